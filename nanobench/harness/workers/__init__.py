"""Processes and the fleet: fresh worker processes, the live workers of a run by member (a typed
(side, name) pair), the interleaved rounds they take turns at, sliced generations, the
machine's load, Inductor's cache directories, threads and the finite check a worker makes.
"""
