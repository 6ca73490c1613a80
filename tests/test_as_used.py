"""The product tested as a user runs it: every command in its default table output, the
command lines of the README and of every page under docs/, and every command against every
model form docs/models.md names.

What it is: tests that drive `nanobench.cli.app` through Typer's CliRunner the way a user types
a command (the table, not `--json`, unless the two are compared), on short budgets where a run
is long. A figure is read out of the rendered table text and compared with the same field of
`--json`; a model form's outcome is compared with docs/models.md's "command x model form" table.
What it is not: the contract of one option (test_cli_contract.py) or the correctness of a figure
(each command's own tests): here a figure only has to read the same in both outputs.
Invariant: nothing a user types from the README or docs/ ends in a traceback; a model form a
command cannot take is refused in one line that docs/models.md quotes.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from nanobench.cli import app
from nanobench.harness.cli import console
from tests.helpers import (
    TINY_MHA,
    TextTable,
    gguf_config,
    text_blocks,
    text_tables,
    write_model_forms,
)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Every page a user reads commands from; each page's command lines run with that page's files.
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
FORM_TABLE_PAGE = ROOT / "docs" / "models.md"  # the "command x model form" table's page
# Short runs of every command on the built-in model; the matrix reuses them on each form.
SHORT = {
    "explain": [],
    "compile": ["--modes", "off,static", "--backend", "eager", "--steps", "3"],
    "buckets": ["--run-lengths", "8,64"],
    "capture": ["--run-lengths", "4", "--width-multiples", "128", "--capture-rows", "8"]
    + ["--capture-tokens", "256"],
    "pool-budget": ["--max-batch", "8", "--max-model-len", "256"],
    "decode": ["--systems", "engine-eager,hf-eager", "--steps", "3", "--prompt-len", "4"],
    "startup": ["--modes", "off,static", "--backend", "eager", "--steps", "2", "--runs", "1"],
    "profile": ["--modes", "off,static", "--backend", "eager", "--steps", "3", "--passes", "1"],
}
ONE_ROUND = ["--rounds", "1", "--max-rounds", "1", "--budget-s", "1"]
for timed in ("compile", "capture", "decode", "profile"):
    SHORT[timed] = [*SHORT[timed], *ONE_ROUND]
NO_OUT = {"explain", "history"}  # they write nothing, so they take no --out
# Each of these runs a fresh worker process per mode or system (or per point): seconds each.
SLOW = {"compile", "decode", "sweep", "startup", "profile"}
FORMS = ("preset", "hf", "sharded", "gguf", "gguf-dir", "config-only")
TABLE_FORMS = (
    "preset",
    "HF directory",
    "sharded directory",
    "`.gguf` file",
    "directory with one `.gguf`",
    "`config.json` only",
)


@dataclass(frozen=True)
class Run:
    exit_code: int
    stdout: str
    stderr: str
    output: str
    exception: BaseException | None
    # What the run's report console printed, printed again on two more consoles that
    # `stdout_console()` makes: one as it makes it here (piped), one for a terminal of NARROW.
    piped: str
    narrow: str


NARROW = 80  # the columns of the narrow terminal (console.PIPED_WIDTH set to it)


@contextmanager
def printed_again() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """While a command runs, each console `console.stdout_console()` makes (the one every report
    prints on) prints each thing it is handed on two more consoles made by the same function
    into buffers: one as made here (piped, console.PIPED_WIDTH), one as made for a terminal of
    NARROW columns. Each lays the thing out for its own width (`FitTables`), so the narrow
    buffer is the report as a terminal of NARROW columns shows it, from the same run: a
    separate run at that width printed the same report on other timings."""
    made = console.stdout_console
    piped, narrow = io.StringIO(), io.StringIO()

    def again() -> console.Console:
        shown, same = made(), made()
        with pytest.MonkeyPatch.context() as m:
            m.setattr(console, "PIPED_WIDTH", NARROW)
            small = made()
        same.file, small.file = piped, narrow

        def print_(*objects, **kwargs) -> None:
            for each in (shown, same, small):
                type(each).print(each, *objects, **kwargs)

        shown.print = print_
        return shown

    def holding(function) -> list:
        # the module's own names, not getattr: a lazy module's __getattr__ is never woken
        held = (m for m in list(sys.modules.values()) if m is not None)
        return [m for m in held if getattr(m, "__dict__", {}).get("stdout_console") is function]

    # Every module that imported the function by name; one the command imports while it
    # runs takes `again` from the console module, and is handed `made` back after.
    for module in holding(made):
        module.stdout_console = again
    try:
        yield piped, narrow
    finally:
        for module in holding(again):
            module.stdout_console = made


class Cli:
    """Runs commands in a temporary --out and NANOBENCH_CACHE; a repeated line runs once."""

    def __init__(self, root: Path):
        self.root = root
        self.env = {"NANOBENCH_CACHE": str(root / "cache")}
        self.done: dict[tuple[str, ...], Run] = {}

    def __call__(self, *args: str) -> Run:
        if args not in self.done:
            extra = []
            if args[0] not in NO_OUT and "--out" not in args:
                extra = ["--out", str(self.root / f"out-{len(self.done)}")]
            with printed_again() as (piped, narrow):
                r = CliRunner().invoke(app, [*args, *extra], env=self.env)
            self.done[args] = Run(
                r.exit_code, r.stdout, r.stderr, r.output, r.exception,
                piped.getvalue(), narrow.getvalue(),
            )  # fmt: skip
        return self.done[args]


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Cli:
    return Cli(tmp_path_factory.mktemp("as-used"))


@pytest.fixture(scope="module")
def forms(tmp_path_factory) -> dict[str, str]:
    paths = write_model_forms(tmp_path_factory.mktemp("forms"), gguf_config(TINY_MHA))
    return {"preset": "tiny", **{name: str(path) for name, path in paths.items()}}


def assert_ran(run: Run, what: str) -> None:
    # Without --check only a failed measurement exits 1, and none is expected on these runs.
    assert run.exit_code == 0, f"{what}: exit {run.exit_code}\n{run.output[-3000:]}"
    assert "Traceback" not in run.output, f"{what}:\n{run.output[-3000:]}"
    assert run.exception is None or isinstance(run.exception, SystemExit), repr(run.exception)


def table_with(text: str, *columns: str) -> TextTable:
    tables = [t for t in text_tables(text) if set(columns) <= set(t.header)]
    assert tables, f"no table with columns {columns} in:\n{text[-3000:]}"
    return tables[0]


def number(cell: str) -> float:
    """A table cell's number: thousands separators, a trailing % or unit word dropped."""
    match = re.match(r"-?[\d,]+(\.\d+)?", cell.lstrip("*"))
    assert match, f"no number in table cell {cell!r}"
    return float(match.group(0).replace(",", ""))


def json_rows(run: Run, table: str | None = None) -> list[dict]:
    rows = json.loads(run.stdout)["rows"]
    return [r for r in rows if table is None or r["table"] == table]


def by(rows: list[dict], key: str) -> dict:
    return {r[key]: r for r in rows}


def same_explain(text: str, doc: Run) -> None:
    table = table_with(text, "graphs", "ops", "guards")
    (row,) = json_rows(doc)
    for column, field in (("graphs", "graphs"), ("ops", "ops"), ("guards", "guards")):
        assert table.column(column) == [str(row[field])], column


def same_compile(text: str, doc: Run) -> None:
    table = table_with(text, "mode", "builds", "shapes")
    rows = by(json_rows(doc), "mode")
    assert table.column("mode") == list(rows)
    for mode, builds, shapes in zip(*(table.column(c) for c in ("mode", "builds", "shapes"))):
        assert (int(builds), int(shapes)) == (rows[mode]["builds"], rows[mode]["shapes"]), mode
    # An open shape set widens every step: static builds once a step, off never (hand count).
    assert (rows["off"]["builds"], rows["static"]["builds"]) == (0, 3)


def same_buckets(text: str, doc: Run) -> None:
    table = table_with(text, "steps", "cells open", "cells bucketed", "waste")
    rows = by(json_rows(doc, "run"), "steps")
    assert [int(number(s)) for s in table.column("steps")] == list(rows)
    for cells in zip(*(table.column(c) for c in ("steps", "cells open", "cells bucketed"))):
        steps, open_, bucketed = (int(number(c)) for c in cells)
        assert (open_, bucketed) == (rows[steps]["cells_open"], rows[steps]["cells_bucketed"])


def same_capture(text: str, doc: Run) -> None:
    table = table_with(text, "item", "reference bytes", "triton bytes")
    rows = by(json_rows(doc, "held"), "item")
    assert table.column("item") == list(rows)
    for item, ref, tri in zip(*(table.column(c) for c in table.header)):
        assert (number(ref), number(tri)) == (
            rows[item]["reference_bytes"],
            rows[item]["triton_bytes"],
        ), item


def same_pool_budget(text: str, doc: Run) -> None:
    table = next(t for t in text_tables(text) if any(r[0] == "KV blocks" for r in t.rows))
    blocks = next(r for r in table.rows if r[0] == "KV blocks")
    rows = json_rows(doc)
    # One column per kernel, in the JSON rows' order: "reference wm 2048", "triton rows only".
    assert [h.split()[0] for h in table.header[1:]] == [r["kernel"] for r in rows]
    assert [int(number(c)) for c in blocks[1:]] == [r["kv_blocks"] for r in rows]


def same_decode(text: str, doc: Run) -> None:
    table = table_with(text, "system", "tokens match")
    rows = by(json_rows(doc), "system")
    assert table.column("system") == list(rows)
    matches = {"yes": True, "NO": False, "-": None}
    assert [matches[c] for c in table.column("tokens match")] == [
        r["tokens_match"] for r in rows.values()
    ]
    floored = next(r for r in rows.values() if r["floor_ms"])
    # The floor line: "... (weights 15.1 MiB + K/V ...) ... and 0.032 GFLOP / ...".
    found = re.search(r"weights\s+([\d.]+)\s+(KiB|MiB)[\s\S]*?and\s+([\d.]+)\s+GFLOP\s", text)
    assert found, text[-2000:]
    unit = {"KiB": 2**10, "MiB": 2**20}[found.group(2)]
    assert found.group(1) == f"{floored['weight_bytes'] / unit:.1f}"
    assert found.group(3) == f"{floored['step_flops'] / 1e9:.3f}"


def same_startup(text: str, doc: Run) -> None:
    table = table_with(text, "phase")
    ready = next(r for r in table.rows if r[0] == "ready")
    rows = json_rows(doc)
    # a column per mode and kind, in the JSON rows' order; eager leaves no hot start
    assert list(table.header[1:]) == [f"{r['mode']} {r['kind']}" for r in rows] == [
        "off cold", "static cold", "static warm"]  # fmt: skip
    # the table and --json are two runs: their seconds differ, their starts do not
    assert all(1.0 < number(c) < 60 for c in ready[1:]), ready


def same_profile(text: str, doc: Run) -> None:
    table = table_with(text, "where the step goes")
    rows = json_rows(doc)
    # a column per mode, in the JSON rows' order; a line per category, none dropped
    assert list(table.header[1:]) == [r["mode"] for r in rows] == ["off", "static"]
    shown = [line[0] for line in table.rows]
    assert {"guards", "eager ops", "outside the forward", "unattributed"} <= set(shown), shown
    for r in rows:
        # the two runs' times differ; what each profiled does not: a static step has guards
        assert r["profiled_step_ms"] > 0 and r["steps_profiled"] >= 1, r
        assert r["words"], r
    guards = next(line for line in table.rows if line[0] == "guards")
    assert number(guards[1]) == 0 and number(guards[2]) > 0, guards


SAME = {
    "explain": same_explain,
    "compile": same_compile,
    "buckets": same_buckets,
    "capture": same_capture,
    "pool-budget": same_pool_budget,
    "decode": same_decode,
    "startup": same_startup,
    "profile": same_profile,
}


def param(command: str, *more: str):
    """A pytest param led by a command; one that spawns workers is marked slow."""
    marks = [pytest.mark.slow] if command in SLOW else []
    return pytest.param(command, *more, marks=marks, id="-".join((command, *more)))


@pytest.mark.parametrize("command", [param(c) for c in SHORT])
def test_the_default_table_runs_and_reads_as_the_json(command, cli):
    table = cli(command, *SHORT[command])
    assert_ran(table, f"{command} (table)")
    assert not table.stdout.lstrip().startswith("{"), "the default output is the table"
    # The built-in model named as the preset it is: the matrix's preset cell is this same run.
    named = [] if command == "buckets" else ["--model", "tiny"]  # buckets reads no model
    doc = cli(command, *SHORT[command], *named, "--json")
    assert_ran(doc, f"{command} --json")
    SAME[command](table.stdout, doc)


@pytest.mark.parametrize("command", [param(c) for c in SHORT])
def test_the_default_table_reads_whole_at_80_columns(command, cli):
    """A table wider than the terminal prints as a block per row: no cell is cut to an ellipsis
    (rich squeezed compile's 13 columns at 80 to 'mo…', 'st…', '0.…'), no line is over 80.
    The default-table test's run, its report printed again at 80 columns (`printed_again`)."""
    run = cli(command, *SHORT[command])
    assert run.exit_code == 0, run.output[-3000:]
    # All the run printed on stdout is its report console's: the narrow copy shows all of it.
    assert run.stdout == run.piped, "stdout holds what the report console did not print"
    got = run.narrow
    assert "…" not in got, got[-3000:]
    assert max(len(line) for line in got.splitlines()) <= 80
    if command == "compile":
        doc = cli(command, *SHORT[command], "--model", "tiny", "--json")
        blocks = text_blocks(got)
        for mode, row in by(json_rows(doc), "mode").items():
            block = blocks[f"mode: {mode}"]
            assert (int(block["builds"]), int(block["shapes"])) == (row["builds"], row["shapes"])


def page_blocks(page: Path, lang: str | None = None) -> list[str]:
    """The bodies of a page's fenced code blocks (of one language, when given)."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", page.read_text(), re.S | re.M)
    return [body for tag, body in blocks if lang is None or tag == lang]


def page_files(page: Path) -> dict[str, str]:
    """The files a page's command lines name, from its own blocks: its Python example is
    `my_step.py`, its TOML grid `grid.toml` (a page shows at most one of each)."""
    files = {}
    for name, lang in (("my_step.py", "python"), ("grid.toml", "toml")):
        bodies = page_blocks(page, lang)
        assert len(bodies) <= 1, f"{page.name} shows {len(bodies)} {lang} blocks"
        if bodies:
            files[name] = bodies[0]
    return files


def page_command_lines(page: Path) -> list[str]:
    """Every `nanobench ...` line of a page's code blocks (a comment line naming one, as the
    Python example's does, too; a line continued with a trailing backslash joined to the next)
    and every inline `nanobench <command> ...` span, without the leading `nanobench` and any
    trailing comment; in order."""
    lines = []
    for body in page_blocks(page):
        for line in re.sub(r"\s*\\\n\s*", " ", body).splitlines():
            found = re.match(r"\s*(?:#\s*(?:[\w./-]+:)?\s*)?nanobench (.+)", line)
            if found:
                lines.append(re.split(r"\s+#\s", found.group(1))[0].strip())
    return lines + re.findall(r"`nanobench ([a-z][a-z-]*(?: [^`]*)?)`", page.read_text())


@dataclass(frozen=True)
class DocLine:
    """A command line a page shows, without the leading `nanobench`."""

    page: Path
    line: str


def documented_lines() -> list[DocLine]:
    """The command lines of every page, each once, named by the first page that shows it."""
    seen: dict[str, DocLine] = {}
    for page in PAGES:
        for line in page_command_lines(page):
            seen.setdefault(line, DocLine(page, line))
    return list(seen.values())


def parse(line: str) -> None:
    """Parse a command line with the CLI's own (click) parser, options and types included,
    without running the command's body: an unknown or renamed option raises."""
    group = typer.main.get_command(app)
    name, *rest = shlex.split(line)
    ctx = group.make_context("nanobench", [name])
    command = group.get_command(ctx, name)
    assert command is not None, f"nanobench {name}: no such command"
    command.make_context(name, rest, parent=ctx)


DOC_LINES = documented_lines()
LINES = [d.line for d in DOC_LINES]


def test_the_readme_and_docs_name_every_command_line_they_show():
    # The collector sees code blocks, comment lines in the Python example, inline spans and a
    # continued line, on the README and on the docs pages.
    assert "explain --layers 2,4 --path unplanned" in LINES
    assert "explain --target my_step.py:factory --step 3" in LINES
    assert "sweep grid.toml --dry-run" in LINES
    assert (
        "pool-budget --target tests/corpus/memory_gptfast.py:llama3_70b"
        " --capture-sizes 1,8,64,256 --dtype bfloat16 --device-memory 141GiB"
    ) in LINES
    assert {line.split()[0] for line in LINES} >= set(SHORT) | {"sweep"}
    shown = {d.page.name for d in DOC_LINES}
    assert shown >= {"README.md", "measuring.md", "memory.md", "capture-lists.md", "sweeps.md"}


@pytest.mark.parametrize(
    "line,needle",
    [
        ("compile --stepz 3", "No such option: --stepz"),
        ("buckets --rows x", "valid integer"),
        ("compiel --steps 3", "nanobench compiel: no such command"),
    ],
)
def test_the_parse_check_rejects_what_the_cli_rejects(line, needle):
    with pytest.raises(Exception, match=needle):
        parse(line)


@pytest.mark.parametrize("line", LINES)
def test_a_readme_or_docs_command_line_parses(line):
    parse(line)


def fast(line: str) -> bool:
    """Arithmetic, one eager forward or a read of the history: the documented lines the suite
    runs as they are."""
    first = line.split()[0]
    return first in ("explain", "buckets", "pool-budget", "history") or line.endswith("--dry-run")


@pytest.mark.parametrize("doc", [d for d in DOC_LINES if fast(d.line)], ids=lambda d: d.line)
def test_a_fast_readme_or_docs_command_line_runs(doc, cli, tmp_path, monkeypatch):
    # The files a line names are its page's own blocks (my_step.py, grid.toml), or the
    # repository's, from its root (tests/corpus/...).
    for name, body in page_files(doc.page).items():
        (tmp_path / name).write_text(body)
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    monkeypatch.chdir(tmp_path)
    args, what = shlex.split(doc.line), f"{doc.page.name}: {doc.line}"
    run = cli(*args)
    if "--check" not in args:
        assert_ran(run, what)
        return
    # --check makes the gates the exit status: a page may show one failing (1) or undecided (3).
    assert run.exit_code in (0, 1, 3), f"{what}: exit {run.exit_code}\n{run.output[-3000:]}"
    assert "Traceback" not in run.output, f"{what}:\n{run.output[-3000:]}"
    assert isinstance(run.exception, SystemExit), repr(run.exception)


def form_table() -> dict[str, dict[str, str]]:
    """docs/models.md's "command x model form" table: per command, per form, its cell."""
    lines = FORM_TABLE_PAGE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| command | preset |"))
    header = tuple(c.strip() for c in lines[start].strip().strip("|").split("|"))
    assert header[1:] == TABLE_FORMS, header
    matrix = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        matrix[cells[0].strip("`")] = dict(zip(FORMS, cells[1:], strict=True))
    return matrix


def test_the_form_table_has_a_row_per_command_and_a_known_cell_per_form():
    # The table the matrix reads is whole: a command or form it lacks would go untested.
    matrix = form_table()
    assert sorted(matrix) == sorted(MATRIX)
    for command, cells in matrix.items():
        odd = [
            c for c in cells.values() if c != "runs" and not re.fullmatch(r"refused: `[^`]+`", c)
        ]
        assert not odd, f"{command}: cells neither `runs` nor a quoted refusal: {odd}"


# On the preset, the default-table test's JSON run. Elsewhere what differs between forms is
# reading the model, so one worker each: compile's `off`, and decode's transformers side (its
# engine side reads a form as compile's worker does; a GGUF reaches both as one HF directory).
MATRIX = {
    **SHORT,
    "compile": ["--modes", "off", "--backend", "eager", "--steps", "2", *ONE_ROUND],
    "decode": ["--systems", "hf-eager", "--steps", "2", "--prompt-len", "4", *ONE_ROUND],
    "startup": ["--modes", "off", "--steps", "2", "--runs", "1"],
    "profile": ["--modes", "off", "--steps", "2", "--passes", "1", *ONE_ROUND],
}


@pytest.mark.parametrize("command,form", [param(c, f) for c in MATRIX for f in FORMS])
def test_every_command_on_every_model_form(command, form, cli, forms):
    cell = form_table()[command][form]
    args = SHORT[command] if form == "preset" else MATRIX[command]
    run = cli(command, *args, "--model", forms[form], "--json")
    refused = re.fullmatch(r"refused: `([^`]+)`.*", cell)
    if refused is None:
        assert cell == "runs", f"form table cell {command} x {form}: {cell!r}"
        assert_ran(run, f"{command} --model {form}")
        statuses = [r["status"] for r in json_rows(run) if "status" in r]
        assert all(s == "ok" for s in statuses), statuses
        return
    assert run.exit_code == 2, f"{command} x {form}: exit {run.exit_code}\n{run.output[-2000:]}"
    assert "Traceback" not in run.output and isinstance(run.exception, SystemExit)
    (line,) = run.stderr.strip().splitlines()
    assert refused.group(1) in line, (
        f"docs/models.md quotes {refused.group(1)!r}; the CLI said {line}"
    )


@pytest.mark.slow
def test_sweep_default_table_hands_each_point_its_model_form(cli, forms, tmp_path):
    """A sweep's points are its command in fresh processes: a model form does there what the
    form table's row of that command says. The table's figure reads as the JSON's."""
    picked = ("gguf-dir", "config-only")
    grid = tmp_path / "grid.toml"
    axis = ", ".join(json.dumps(forms[f]) for f in picked)
    grid.write_text(
        f'command = "pool-budget"\n[options]\nmax_batch = 8\nmax_model_len = 256\n'
        f"[axes]\nmodel = [{axis}]\n"
    )
    out = str(tmp_path / "out")
    table = cli("sweep", str(grid), "--out", out)
    assert_ran(table, "sweep (table)")
    doc = cli("sweep", str(grid), "--out", out, "--json")  # resumed: the same points' rows
    assert_ran(doc, "sweep --json")
    assert [form_table()["pool-budget"][f] for f in picked] == ["runs", "runs"]
    rows = json_rows(doc)
    assert {r["axis_model"]: r["point_status"] for r in rows} == {forms[f]: "ok" for f in picked}
    shown = table_with(table.stdout, "model", "capture_pool_bytes")
    for model, cell in zip(*(shown.column(c) for c in ("model", "capture_pool_bytes"))):
        largest = max(r["capture_pool_bytes"] for r in rows if r["axis_model"] == model)
        unit = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[cell.split()[-1]]
        assert number(cell) * unit == pytest.approx(largest, rel=5e-3), (model, cell, largest)
    # A form the point's command refuses is a bad-input point, with the table's quoted line.
    (tmp_path / "refused.toml").write_text(
        f'command = "compile"\n[axes]\nmodel = [{json.dumps(forms["config-only"])}]\n'
    )
    refused = cli("sweep", str(tmp_path / "refused.toml"), "--out", out + "-refused", "--json")
    assert_ran(refused, "sweep of a refused form")
    (point,) = json_rows(refused)
    quoted = re.fullmatch(r"refused: `([^`]+)`.*", form_table()["compile"]["config-only"])
    assert point["point_status"] == "bad-input" and quoted.group(1) in point["point_detail"]
