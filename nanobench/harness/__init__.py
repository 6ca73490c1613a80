"""What every command shares, by concern, one sub-package each; `errors` (bad input against a
failed measurement, the exit codes) sits under them all.

Floors, bottom up (`tests/test_layout.py` holds them): `errors`; `statistics` (intervals,
the process pool, a machine's history as a calibration, verdicts) and `step` (the user's step:
targets, dynamo's view of a call, remedies); `cli` (the option vocabulary, validation, the
console, the lifeline of a run's processes); `workers` (fresh processes, the fleet, members,
interleaved rounds, the machine's load); `runs` (the owner of a measured run, changes between
sides, gates, rows, records, history files, the output contract, the estimate).
"""
