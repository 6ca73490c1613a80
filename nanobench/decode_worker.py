"""Worker entry point: `python -m nanobench.decode_worker` runs one decode system, fresh."""

from nanobench.decode_bench import run_worker
from nanobench.fresh import worker_main

if __name__ == "__main__":
    worker_main(run_worker)
