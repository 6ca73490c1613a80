"""The two ways a command ends badly, kept apart: bad input (exit 2) and a failed measurement.

What it is: `BadInput`, raised by validation for a user mistake, and the exit codes
(0 ok, 1 failed, 2 bad input, 3 inconclusive under --check).
What it is not: a gate. Gates raise their own module's exception and become exit 1 only
under `--check`.
Invariant: a user mistake becomes one line on stderr and exit 2, never a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
# --check: nothing failed, but a gate's interval straddles its target at this noise.
EXIT_INCONCLUSIVE = 3


class BadInput(ValueError):
    """A user mistake: names the input and what was expected."""


class MeasurementFailed(RuntimeError):
    """A measurement that ran but cannot be trusted; its message is the row's status."""


def as_vs(e: BadInput) -> BadInput:
    """The before side's error as the user typed it: that side is `--vs`, not `--target`
    ("--vs 'nope.py:factory': no such file nope.py"), else said to be the before side's."""
    said = str(e)
    return BadInput(said.replace("--target", "--vs", 1) if "--target" in said else f"--vs: {said}")
