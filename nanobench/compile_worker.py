"""Worker entry point: `python -m nanobench.compile_worker` runs one compile mode, fresh."""

from nanobench.compile_bench import run_mode
from nanobench.fresh import worker_main

if __name__ == "__main__":
    worker_main(run_mode)
