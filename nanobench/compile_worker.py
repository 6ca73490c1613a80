"""Worker entry point: `python -m nanobench.compile_worker` serves one compile mode, fresh."""

from nanobench.compile_session import open_session
from nanobench.fresh import serve_main

if __name__ == "__main__":
    serve_main(open_session)
