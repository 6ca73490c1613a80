"""What torch, transformers and their kin say while a command runs in its own process: to a log.

What it is: `to_log(path)`, a context manager for work a command does in its own process,
entered once torch is imported (its loggers exist from then)
(explain's forward, a startup artifact checked): Python warnings (`warnings.warn`: transformers'
FutureWarnings) and the WARNING records of third-party loggers (dynamo's graph-break notes)
are written to `path` instead of the terminal; the block's `Logged` counts them by source.
What it is not: for workers (their stderr is read by `fresh.LiveWorker`, never printed) or for
nanobench's own lines, which go to the terminal as always.
Invariant: nothing is dropped: every warning the block raised is in the log, and the command
says where; the warning filters and loggers are as they were after the block.
"""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

LOGGERS = ("torch", "transformers", "triton")  # third-party: their records go to the log


@dataclass
class Logged:
    """What a block logged: a count by source, filled in when the block ends."""

    path: Path
    by_source: dict[str, int] = field(default_factory=dict)


@contextmanager
def to_log(path: Path):
    """Python warnings and third-party log records raised in the block, written to `path`."""
    logged = Logged(path)
    handler = _CountingHandler(logged)
    # torch puts stream handlers on many of its loggers (torch._dynamo's among them) when it is
    # imported: each one's handlers are swapped for the log's during the block, then put back.
    saved = [(lg, lg.handlers[:], lg.propagate) for lg in third_party_loggers()]
    for logger, _, _ in saved:
        logger.handlers = [handler]
        logger.propagate = False
    path.unlink(missing_ok=True)  # this run's warnings, not an earlier run's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        try:
            yield logged
        finally:
            for logger, handlers, propagate in saved:
                logger.handlers = handlers
                logger.propagate = propagate
            for w in caught:
                source = Path(w.filename).parts
                who = next((p for p in source if p in LOGGERS), "python")
                handler.write(who, f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})")


def third_party_loggers() -> list[logging.Logger]:
    """The top-level third-party loggers, and every one under them that has handlers of its own."""
    found = {name: logging.getLogger(name) for name in LOGGERS}
    for name, logger in logging.root.manager.loggerDict.items():
        if isinstance(logger, logging.Logger) and logger.handlers and name.split(".")[0] in LOGGERS:
            found[name] = logger
    return list(found.values())


class _CountingHandler(logging.Handler):
    """Appends each record to the log file, counting it by its top-level logger."""

    def __init__(self, logged: Logged) -> None:
        super().__init__(logging.WARNING)
        self.logged = logged

    def emit(self, record: logging.LogRecord) -> None:
        # The traceback a record carries (torch logs one with a failure it recovers from) too.
        trace = (
            f"\n{logging.Formatter().formatException(record.exc_info)}" if record.exc_info else ""
        )
        self.write(record.name.split(".")[0], f"{record.levelname} {record.name}: "
                   f"{record.getMessage()}{trace}")  # fmt: skip

    def write(self, source: str, text: str) -> None:
        self.logged.by_source[source] = self.logged.by_source.get(source, 0) + 1
        with open(self.logged.path, "a") as f:
            f.write(text.rstrip() + "\n")
