"""Cost arithmetic and gates: cells, bytes and seconds, as pure functions of numbers.

What it is: one module per topic (`buckets`, `compile`, `capture`, `capture_list`, `pool`), each
a set of unit-suffixed functions (`_s`, `_ms`, `_bytes`, `_cells`) and the `check_*` gates that turn
them into pass/fail, raising an exception named for the module whose promise broke.
What it is not: a measurement. Nothing here runs a model, touches a device or reads a file;
the numbers come from probes and the CLI, or from the seed logs in tests.
Invariant: every function is pure and importing the package does nothing.
"""
