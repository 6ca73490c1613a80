"""A sweep's grid and its ledger: which points a GRID.toml names, and which of them are done.

What it is: `load_grid` reads a grid (a command, fixed options, axes) and validates every value
against the command's own Typer signature, read off the registered callbacks, so an option
added to a command later is sweepable without editing this file; `points` expands the axes
into `Point`s keyed by a hash of their full options (defaults included); `Ledger` keeps one
JSON record per finished point under `<out>/points/<key>/point.json` and rewrites the tidy
`<out>/sweep.csv` from them, each file atomically, as each point finishes.
What it is not: a launcher (`nanobench.sweep.launchers` runs points) or a report (`reports.sweep`).
Invariant: a bad grid is `BadInput` before any point runs; a finished point's record is on
disk whole before the next point is reported, so an interrupted sweep loses none of them.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import os
import tempfile
import typing
from dataclasses import asdict, dataclass
from pathlib import Path

from nanobench.commands import COMMANDS
from nanobench.commands import command as registered
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.rows import RowSchemaError, rebuild

# The commands whose points are timed must never share a machine; the others only count: each
# command says which (`Command.sweep`), or that a sweep does not run it.
TIMED = tuple(c.name for c in COMMANDS if c.sweep == "timed")
SWEEPABLE = tuple(c.name for c in COMMANDS if c.sweep)
# Options the sweep itself sets on every point.
RESERVED = ("out", "json_mode", "check", "quiet")
# A point whose command printed its document is finished; a crash or a timeout runs again.
FINISHED = ("ok", "failed")


@dataclass(frozen=True)
class OptionSpec:
    name: str  # the TOML name: the long option with `_` for `-`
    types: tuple[type, ...]  # from the annotation, None removed
    default: object
    flag: str  # "--width-multiple"
    off_flag: str  # a bool's "--no-..." (or the declared "--open"); "" otherwise


@dataclass(frozen=True)
class Grid:
    command: str
    options: tuple[tuple[str, object], ...]  # fixed for every point, in file order
    axes: tuple[tuple[str, tuple], ...]  # name, values; the first two lead the heatmap


@dataclass(frozen=True)
class Point:
    index: int
    key: str  # sha256 of the command and its full options, 12 hex digits
    command: str
    axes: tuple[tuple[str, object], ...]
    options: tuple[tuple[str, object], ...]  # every option of the command, defaults included

    def argv(self) -> list[str]:
        """The command line of this point, without --json and --out (the launcher adds those)."""
        specs = command_options(self.command)
        args = [self.command]
        for name, value in self.options:
            spec = specs[name]
            if value is None or value == spec.default:
                continue
            if bool in spec.types:
                args.append(spec.flag if value else spec.off_flag)
            else:
                args += [spec.flag, str(value)]
        return args


def command_options(command: str) -> dict[str, OptionSpec]:
    """The sweepable options of one registered command, from its signature and annotations.

    An option is declared as `Annotated[type, typer.Option(...)]` with a plain default
    (nanobench.harness.cli.options); a `typer.Option(...)` default is read too, for a command added that way.
    """
    run = registered(command).run
    hints = typing.get_type_hints(run, include_extras=True)
    found = {}
    for name, param in inspect.signature(run).parameters.items():
        if name in RESERVED:
            continue
        hint, extras = hints[name], ()
        if typing.get_origin(hint) is typing.Annotated:
            hint, *extras = typing.get_args(hint)
        declared = [e for e in extras if hasattr(e, "param_decls")]
        option = declared[0] if declared else param.default
        default = param.default if declared else getattr(option, "default", None)
        types = _types(hint)
        decls = [d for d in getattr(option, "param_decls", ()) or () if d.startswith("--")]
        flag, _, off = (decls[0] if decls else "").partition("/")
        dashed = name.replace("_", "-")
        found[name] = OptionSpec(
            name=name,
            types=types,
            default=_text(default) if isinstance(default, tuple) else default,
            flag=flag or f"--{dashed}",
            off_flag=(off or f"--no-{dashed}") if bool in types else "",
        )
    return found


def _types(hint) -> tuple[type, ...]:
    """The scalar types an option takes: a Literal's are str, a parsed list's (Ints) is its text."""
    if typing.get_origin(hint) is typing.Literal:
        return (str,)
    if isinstance(hint, type) and issubclass(hint, tuple):
        return (str,)
    args = typing.get_args(hint)
    if args:
        return tuple(dict.fromkeys(t for a in args if a is not type(None) for t in _types(a)))
    return (hint,) if hint in _SCALARS else ()


def _text(values: tuple) -> str:
    """A list option's default as the comma-separated text its flag takes."""
    return ",".join(str(v) for v in values)


_SCALARS = (bool, int, float, str)


def load_grid(path: str) -> Grid:
    """Read and validate GRID.toml; every mistake is one `BadInput` line naming it."""
    tomllib = _toml()
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text())
    except OSError as e:
        raise BadInput(f"GRID {path}: cannot read it ({e.strerror or e})") from None
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"GRID {path}: not valid TOML ({e})") from None
    unknown = sorted(set(data) - {"command", "options", "axes"})
    if unknown:
        raise BadInput(f"GRID {path}: unknown key {unknown[0]!r}; expected command, options, axes")
    command = data.get("command")
    if command not in SWEEPABLE:
        raise BadInput(f"GRID command {command!r}: expected one of {', '.join(SWEEPABLE)}")
    specs = command_options(command)
    options = _table(data, "options")
    axes = _table(data, "axes")
    for name, value in options.items():
        _check_value(command, specs, f"options.{name}", name, value)
    for name, values in axes.items():
        if name in options:
            raise BadInput(f"GRID axes.{name}: also in [options]; give it in one place")
        if not isinstance(values, list) or not values:
            raise BadInput(f"GRID axes.{name}: expected a non-empty list of values")
        if len(set(map(json.dumps, values))) != len(values):
            raise BadInput(f"GRID axes.{name} {values}: expected distinct values")
        for value in values:
            _check_value(command, specs, f"axes.{name}", name, value)
    return Grid(
        command=command,
        options=tuple(options.items()),
        axes=tuple((k, tuple(v)) for k, v in axes.items()),
    )


def _toml():
    # The standard library reads TOML from Python 3.11; 3.10 gets the same parser as tomli.
    try:
        import tomllib
    except ModuleNotFoundError:
        import tomli as tomllib
    return tomllib


def _table(data: dict, name: str) -> dict:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise BadInput(f"GRID {name}: expected a table [{name}]")
    return table


def _check_value(command: str, specs: dict[str, OptionSpec], where: str, name: str, value):
    if name in RESERVED:
        raise BadInput(f"GRID {where}: set by the sweep itself; remove it")
    if name not in specs:
        raise BadInput(
            f"GRID {where}: {command} has no option --{name.replace('_', '-')} "
            f"(options: {', '.join(sorted(specs))})"
        )
    if not _fits(value, specs[name].types):
        wanted = " or ".join(t.__name__ for t in specs[name].types)
        raise BadInput(f"GRID {where} = {value!r}: expected {wanted}, as {specs[name].flag} takes")


def _fits(value, types: tuple[type, ...]) -> bool:
    # bool is an int in Python, but `rows = true` is a mistake, not one row.
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int):
        # A str option takes text such as "8,64"; a number written bare is the same text.
        return bool({int, float, str} & set(types))
    if isinstance(value, float):
        return float in types
    return isinstance(value, str) and str in types


def points(grid: Grid) -> list[Point]:
    """The cartesian product of the axes, first axis slowest, each point with its full options."""
    specs = command_options(grid.command)
    names = [n for n, _ in grid.axes]
    found = []
    for index, combo in enumerate(itertools.product(*(v for _, v in grid.axes))):
        given = {**dict(grid.options), **dict(zip(names, combo))}
        full = tuple((n, given.get(n, s.default)) for n, s in sorted(specs.items()))
        found.append(
            Point(
                index=index,
                key=point_key(grid.command, dict(full)),
                command=grid.command,
                axes=tuple(zip(names, combo)),
                options=full,
            )
        )
    return found


def point_key(command: str, options: dict) -> str:
    """Hex sha256 of the canonical JSON of the command and its full options, 12 digits."""
    text = json.dumps({"command": command, "options": options}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class PointRecord:
    """One finished (or crashed) point: what ran, where, and the command's own document."""

    key: str
    index: int
    command: str
    axes: dict
    status: str  # ok | failed (exit 1) | bad-input (exit 2) | crashed | timeout
    detail: str  # the last line the command wrote on stderr, when it did not end ok
    wall_s: float
    env: dict  # the environment record of the machine that ran it
    rows: list
    gates: list
    outputs: dict


class Ledger:
    """The records of one out directory, and the tidy CSV rebuilt from them."""

    def __init__(self, out: Path):
        self.out = out
        self.records: dict[str, PointRecord] = {}
        for path in sorted(out.glob("points/*/point.json")):
            try:
                record = rebuild(PointRecord, json.loads(path.read_text()))
            except (OSError, ValueError, TypeError, RowSchemaError):
                continue  # a record from another version is run again, not trusted
            self.records[record.key] = record

    def finished(self, key: str) -> bool:
        record = self.records.get(key)
        return record is not None and record.status in FINISHED

    def point_dir(self, key: str) -> Path:
        return self.out / "points" / key

    def record(self, record: PointRecord) -> None:
        """Write the point's record, then the CSV; each by rename, so never half a file."""
        from reports.sweep import write_sweep_csv

        self.records[record.key] = record
        path = self.point_dir(record.key) / "point.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, json.dumps(asdict(record), default=str))
        write_sweep_csv(self.out / "sweep.csv", list(self.records.values()))


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
