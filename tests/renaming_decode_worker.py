"""A stand-in decode worker whose final row renames one field: a worker that drifted.

What it is: `python -m tests.renaming_decode_worker`, the real `nanobench.decode.session` (the
real system, warm-up and timed rounds) with one change: its final row sends `builds_measured`
as `builds_timed`, as a worker edited without its parent would.
What it is not: a measurement; it exists so a test can watch the parent refuse the payload.
Invariant: everything but that one key is what the real session sends.
"""

from __future__ import annotations

from collections.abc import Callable

from nanobench.decode.session import open_session
from nanobench.harness.workers.fresh import serve_main


def renaming_session(payload: dict, progress: Callable[[dict], None]):
    session = open_session(payload, progress)
    finish = session.finish

    def renamed() -> dict:
        row = finish()
        if "builds_measured" in row:
            row["builds_timed"] = row.pop("builds_measured")
        return row

    session.finish = renamed
    return session


if __name__ == "__main__":
    serve_main(renaming_session)
