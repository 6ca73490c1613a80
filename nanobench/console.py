"""Terminal plumbing for commands: error mapping, progress on stderr, the stdout console.

What it is: `run_command()`, a context manager every command body runs in. It turns a user
mistake into one line on stderr and exit 2, and yields a `status(msg)` callable that shows
progress on stderr only when both streams are terminals and `--quiet` is not set.
What it is not: output formatting (that is `reports/`).
Invariant: no traceback ever reaches the user for a mistake of theirs.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import typer
from rich.console import Console

from nanobench.errors import EXIT_BAD_INPUT, BadInput


def stdout_console() -> Console:
    # Piped output keeps whole rows: a table wrapped at 80 columns is unreadable in a log.
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)


def stderr_console() -> Console:
    return Console(stderr=True)


def user_error_types() -> tuple[type[BaseException], ...]:
    from engine.config import ConfigError
    from engine.engine import EngineLimitError
    from engine.weights import CheckpointError

    return (BadInput, ConfigError, CheckpointError, EngineLimitError)


def say_error(message: str) -> None:
    line = " ".join(str(message).split())
    sys.stderr.write(f"nanobench: error: {line}\n")
    sys.stderr.flush()


@contextmanager
def run_command(quiet: bool = False):
    live = not quiet and sys.stderr.isatty() and sys.stdout.isatty()
    console = stderr_console()
    status_box = console.status("") if live else None

    def status(message: str) -> None:
        if status_box is not None:
            status_box.update(message)

    try:
        if status_box is not None:
            status_box.start()
        yield status
    except typer.Exit:
        raise
    except user_error_types() as e:
        if status_box is not None:
            status_box.stop()
        say_error(str(e))
        raise typer.Exit(EXIT_BAD_INPUT) from None
    finally:
        if status_box is not None:
            status_box.stop()
