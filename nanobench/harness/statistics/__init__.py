"""Statistics: the intervals a command reports and how they are built, the process pool, a
machine's history read as a calibration, and the three verdicts. Imports nothing else of
harness but `errors`.
"""
