"""`nanobench compile`: the compile-mode sweep (a fresh worker per mode, interleaved timed rounds)."""
