"""Worker entry point: `python -m nanobench.decode_worker` serves one decode system (or the probe)."""

from nanobench.decode_session import open_session
from nanobench.fresh import serve_main

if __name__ == "__main__":
    serve_main(open_session)
