"""Before and after, and records: the owner of a measured run (`measured_run`), the changes
between two sides and their gates, typed rows, the env record, the history's files and a run's
code identity, saved runs read back, the benchmark-DB export, the output contract and the
estimate of a run's time.
"""
