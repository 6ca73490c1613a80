"""The three verdicts a gate can reach, named once for the statistics and the gates alike.

What it is: `PASS`, `FAIL`, `INCONCLUSIVE` (the last: the interval straddles the target, so the
run cannot decide at this noise). What it is not: a rule for reaching one (`stats`) or a gate
record (`gates.Gate`).
Invariant: imports nothing, so both `stats` and `gates` sit above it without a cycle.
"""

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
