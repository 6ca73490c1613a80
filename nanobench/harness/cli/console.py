"""Terminal plumbing for commands: error mapping, progress on stderr, the stdout console.

What it is: `run_command()`, a context manager every command body runs in. It turns a user
mistake into one line on stderr and exit 2, an interrupt into exit 128 + its signal (SIGTERM
raising as Ctrl-C does while it runs), and yields a `Status`, the `status(msg)` callable that
shows progress on stderr only when both streams are terminals and `--quiet` is not set; once a
run's estimate is known (`Status.expect`, from `harness.runs.eta`) the line ends with the time
elapsed and the time left, redrawn as the spinner turns.
`OneLineErrors`, the app's command group, does the same for what click rejects while parsing
(`--rows x`, an unknown option, a missing value) instead of Typer's usage box.
`stdout_console()` is the console every report prints on (tables fitted to its width).
What it is not: output formatting (that is `reports/`).
Invariant: no traceback ever reaches the user for a mistake of theirs; a string printed on
either console prints as written (no rich markup, no emoji codes: a user's `my_step.py:factory`
or `[red]` is text), so a report styles a cell with `rich.text.Text`, never with markup.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

import typer
from rich.console import Console, RenderHook
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from nanobench.harness.cli.lifeline import (
    end_with_parent,
    interrupt_code,
    terminate_as_interrupt,
)
from nanobench.harness.cli.versions import warn_untested_torch
from nanobench.harness.errors import EXIT_BAD_INPUT, BadInput

PIPED_WIDTH = 160  # columns when stdout is not a terminal


class FitTables(RenderHook):
    """Every table printed is laid out for the console's width (`reports.style.fit_table`)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def process_renderables(self, renderables: list) -> list:
        from reports.style import fit_table

        return [fit_table(self.console, r) if isinstance(r, Table) else r for r in renderables]


def stdout_console() -> Console:
    """The terminal's width; piped, PIPED_WIDTH, so a log keeps whole rows whatever COLUMNS
    says (pytest-xdist sets it to 80 in its workers). A table too wide prints a block per row."""
    console = Console(
        soft_wrap=False,
        width=None if sys.stdout.isatty() else PIPED_WIDTH,
        # User-given strings (target specs, paths, break reasons) reach titles and cells:
        # ":factory:" is an emoji code and "[...]" markup otherwise.
        markup=False,
        emoji=False,
    )
    console.push_render_hook(FitTables(console))
    return console


def stderr_console() -> Console:
    return Console(stderr=True, markup=False, emoji=False)


# The engine's errors that are the user's mistake, by module: read only once their module is loaded.
ENGINE_USER_ERRORS = (
    ("engine.config", "ConfigError"),
    ("engine.weights", "CheckpointError"),
    ("engine.engine", "EngineLimitError"),
)


def user_error_types() -> tuple[type[BaseException], ...]:
    """BadInput, and the engine's user errors whose modules are loaded: one can only have been
    raised once its module was, and importing engine.engine to name it would load torch after a
    mistake found before any of it (the one line would wait seconds)."""
    loaded = (getattr(sys.modules.get(m), name, None) for m, name in ENGINE_USER_ERRORS)
    return (BadInput, *(t for t in loaded if t is not None))


def say_warning(message: str) -> None:
    """One line on stderr that --quiet does not hide: a condition the numbers were taken under."""
    line = " ".join(str(message).split())
    sys.stderr.write(f"nanobench: warning: {line}\n")
    sys.stderr.flush()


def say_error(message: str) -> None:
    line = " ".join(str(message).split())
    sys.stderr.write(f"nanobench: error: {line}\n")
    sys.stderr.flush()


class Status:
    """The run's progress line: `status(msg)` shows msg in the live box (None: shown nowhere);
    rendered afresh on every refresh, so the elapsed and ~left it ends with keep moving."""

    def __init__(self, box, quiet: bool) -> None:
        self.box, self.quiet = box, quiet
        self.message = ""
        self.started = self.expected = None

    def __call__(self, message: str) -> None:
        self.message = str(message)
        if self.box is not None:
            self.box.update(self)

    def expect(self, seconds: float, since: float | None = None) -> None:
        """The run's estimate: from now (or `since`, a monotonic time: the run's start where
        the estimate was held), the line says the time elapsed and the time left."""
        self.started, self.expected = time.monotonic() if since is None else since, seconds

    def __rich__(self) -> Text:
        # Text, not markup: a user's "[red]" in a message is text (the module's invariant).
        if self.expected is None:
            return Text(self.message)
        note = progress_note(time.monotonic() - self.started, self.expected)
        return Text(f"{self.message} ({note})" if self.message else note)


@contextmanager
def run_command(quiet: bool = False):
    """The command's body: SIGTERM ends it as Ctrl-C does (exit 143 for 130), and a command
    spawned by nanobench (a sweep's point) ends with its parent (`harness.cli.lifeline`)."""
    end_with_parent()
    warn_untested_torch(say_warning)
    live = not quiet and sys.stderr.isatty() and sys.stdout.isatty()
    console = stderr_console()
    status_box = console.status("") if live else None
    status = Status(status_box, quiet)

    try:
        with terminate_as_interrupt():
            if status_box is not None:
                status_box.start()
            yield status
    except typer.Exit:
        raise
    except KeyboardInterrupt as e:
        # A command that keeps no rows: Typer would exit 130 for a SIGTERM too.
        raise typer.Exit(interrupt_code(e)) from None
    except user_error_types() as e:
        if status_box is not None:
            status_box.stop()
        say_error(str(e))
        raise typer.Exit(EXIT_BAD_INPUT) from None
    finally:
        if status_box is not None:
            status_box.stop()


class OneLineErrors(TyperGroup):
    """Typer's group, with click's parse errors reported as one line on stderr and exit 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(
                args=args,
                prog_name=prog_name,
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
        except typer.TyperException as e:
            if not standalone_mode:
                raise
            report_parse_error(e)
            sys.exit(e.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            sys.stderr.write("nanobench: aborted\n")
            sys.exit(1)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


def report_parse_error(e: typer.TyperException) -> None:
    ctx = getattr(e, "ctx", None)
    # Bare `nanobench` raises an error whose message is the help: that is shown whole.
    if type(e).__name__ == "NoArgsIsHelpError":
        typer.echo(e.format_message(), err=True)
        return
    where = f"{ctx.command_path}: " if ctx is not None else ""
    hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    say_error(f"{where}{e.format_message().rstrip('.')}{hint}")


def interrupted(finished: int, windows: int, missing: list[str], *paths) -> typer.Exit:
    """Ctrl-C or SIGTERM in a rounds sweep: say what is on disk and what did not run; exit 130
    or 143, after the KeyboardInterrupt being handled (`lifeline.Terminated` for SIGTERM)."""
    say_error(
        f"interrupted: {finished} rows and {windows} windows are in "
        f"{' and '.join(str(p) for p in paths)}; not run: {', '.join(missing) or 'none'}"
    )
    return typer.Exit(interrupt_code(sys.exc_info()[1]))


def span(seconds: float) -> str:
    """'45 s', '3 min 40 s', '1 h 05 min': what a person reads at a glance."""
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s" if s < 600 else f"{round(s / 60)} min"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def progress_note(elapsed: float, expected: float) -> str:
    """What a progress line ends with: '1 min 05 s elapsed, ~2 min 35 s left'."""
    if elapsed <= expected:
        return f"{span(elapsed)} elapsed, ~{span(expected - elapsed)} left"
    return f"{span(elapsed)} elapsed, past the ~{span(expected)} estimated"
