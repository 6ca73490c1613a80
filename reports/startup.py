"""`nanobench startup`'s outputs: the terminal tables and `startup.png`.

What it is: `render_startup` (a table of starts per mode and kind, means over runs: ready and
first-token seconds, compile seconds, cache answers, what a cache saved; a table of phases; the
misses and the gates), `render_changes` (a `--vs` run: per mode and start kind, a line per
quantity with before, after and the change, over the `Change` records `startup.vs` made) and
`draw_startup` (a stacked bar per mode and kind, one colour per
phase), over plain row dicts (the CSV's columns are `nanobench.startup.rows.StartRow`'s fields).
What it is not: measurement or arithmetic beyond a mean: every number comes from the rows, an
interval as the rows carry it (`ready_gm_s`, `saved_s`: `startup.rows.with_saved`).
Invariant: a missing measurement prints as `-` and plots as nothing; a failed start is never
averaged into its kind.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from reports.change import changed, field, value
from reports.csvio import save_figure
from reports.style import counted, gate_mark, interval_sources

LABELS = {
    "warm_up": "warm up",
    "cache_key": "cache key",
    "cache_load": "cache load",
    "runtime": "first replay",
    "unattributed": "unattr.",
}


def groups(rows: list[dict]) -> list[tuple[str, str, list[dict], list[dict]]]:
    """(mode, kind, ok rows, all rows) in the order the rows first name them."""
    keys = list(dict.fromkeys((r["mode"], r["kind"]) for r in rows))
    out = []
    for mode, kind in keys:
        mine = [r for r in rows if (r["mode"], r["kind"]) == (mode, kind)]
        out.append((mode, kind, [r for r in mine if r["status"] == "ok"], mine))
    return out


def mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def num(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def with_interval(value, low, high, spec: str = ".2f") -> str:
    if value is None:
        return "-"
    return f"{value:{spec}}" if low is None else f"{value:{spec}} [{low:{spec}}, {high:{spec}}]"


def status_of(ok: list[dict], every: list[dict]) -> str:
    bad = [r for r in every if r["status"] != "ok"]
    return "ok" if not bad else f"{len(bad)} of {len(every)} failed: {bad[0]['status']}"


def ready_interval(ok: list[dict]) -> str:
    """ready seconds' geometric mean over the runs and its t interval, as the rows carry them
    (rows not yet derived: the mean)."""
    if not ok:
        return "-"
    last = ok[-1]
    value = last.get("ready_gm_s")
    value = mean(ok, "ready_s") if value is None else value
    return with_interval(value, last.get("ready_gm_s_low"), last.get("ready_gm_s_high"))


def source_lines(rows: list[dict]) -> list[str]:
    """Where the ready and saved intervals took their variance: a line per source."""
    lines = []
    for column, label in (("ready_gm_s", "ready s [95%]: geometric mean over runs"),
                          ("saved_s", "saved s [95%]: mean over runs")):  # fmt: skip
        pairs = [(r.get(f"{column}_variance"), r.get(f"{column}_df")) for r in rows
                 if r.get(f"{column}_low") is not None]  # fmt: skip
        lines += [f"{label}, variance {s}" for s in interval_sources(pairs)]
    return lines


def starts_table(rows: list[dict], title: str) -> Table:
    table = Table(title=Text(title))
    for col in ("mode", "start", "runs", "status", "ready s [95%]", "1st token s", "compile s",
                "graphs", "FX hit/miss", "AOT hit/miss", "rebuilt", "saved s [95%]", "step ms"):  # fmt: skip
        table.add_column(col, justify="right")
    for mode, kind, ok, every in groups(rows):
        last = ok[-1] if ok else {}
        table.add_row(
            Text(mode),
            kind,
            str(len(every)),
            Text(status_of(ok, every)),
            ready_interval(ok),
            num(mean(ok, "first_token_s")),
            num(mean(ok, "compile_s")),
            num(mean(ok, "graphs"), ".0f"),
            f"{num(mean(ok, 'fx_hits'), '.0f')}/{num(mean(ok, 'fx_misses'), '.0f')}",
            f"{num(mean(ok, 'aot_hits'), '.0f')}/{num(mean(ok, 'aot_misses'), '.0f')}",
            "-" if not ok else ("yes" if any(r["rebuilt"] for r in ok) else "no"),
            with_interval(last.get("saved_s"), last.get("saved_s_low"), last.get("saved_s_high")),
            num(mean(ok, "step_ms"), ".3f"),
        )
    return table


def phases_table(rows: list[dict], phases: tuple[str, ...]) -> Table:
    """A phase a line, a column per mode and kind: narrow enough to print whole."""
    measured = [(m, k, ok) for m, k, ok, _ in groups(rows) if ok]
    table = Table(title="seconds by phase (mean over runs; they add up to ready s)")
    table.add_column("phase")
    for mode, kind, _ in measured:
        table.add_column(Text(f"{mode} {kind}"), justify="right")
    for p in phases:
        table.add_row(LABELS.get(p, p), *(num(mean(ok, f"{p}_s")) for _, _, ok in measured))
    table.add_row("ready", *(num(mean(ok, "ready_s")) for _, _, ok in measured))
    return table


def render_startup(console, rows: list[dict], phases, gates, title: str, elapsed_s: float) -> None:
    """The starts, the phases (`phases`: the row's `<phase>_s` columns, in order), the notes."""
    console.print(starts_table(rows, title))
    console.print(phases_table(rows, phases))
    for r in rows:
        if r.get("missed"):
            console.print(Text(f"{r['mode']} {r['kind']} (run {r['run']}) missed: {r['missed']}"))
        if r.get("rebuilt"):
            console.print(Text(
                f"{r['mode']} {r['kind']} (run {r['run']}): the FX cache hit, yet "
                f"{r['kernels_built']} kernels were built again (on CPU the artifacts carry "
                "the C++ source, not the built library)"))  # fmt: skip
    for line in source_lines(rows):
        console.print(line, markup=False)
    starts_s = sum(r["wall_s"] or 0 for r in rows)
    console.print(f"{len(rows)} starts took {starts_s:.1f} s; the run {elapsed_s:.1f} s")
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


QUANTITIES = {"graphs": "graphs", "ready_s": "ready s", "first_token_s": "1st token s", "compile_s": "compile s",
              "fx_hits": "FX hits", "fx_misses": "FX misses", "aot_hits": "AOT hits",
              "aot_misses": "AOT misses", "kernels_built": "kernels built"}  # fmt: skip
SHOWN_S = 0.005  # a phase under this on both sides prints 0.00 twice: left to the CSV


def quantity(column: str) -> str:
    if column in QUANTITIES:
        return QUANTITIES[column]
    phase = column.removesuffix("_s")
    return f"{LABELS.get(phase, phase)} s"


def shown(c) -> bool:
    """Every count, and every timing but a phase that is nothing on both sides."""
    if field(c, "kind") != "timing" or field(c, "column") in QUANTITIES:
        return True
    return any(abs(field(c, s) or 0) >= SHOWN_S for s in ("before", "after"))


def changes_table(changes: list, title: str, sides: tuple[str, str] = ("before", "after")) -> Table:
    """A line per quantity of each mode and start kind: before, after (`sides` names the two:
    plain and knob in a --try run), the change."""
    table = Table(title=Text(title))
    base, other = sides
    for col in ("start", "quantity", base, other, f"change ({other} / {base}) [95%]"):
        table.add_column(col, justify="left" if col in ("start", "quantity") else "right")
    members = list(dict.fromkeys(field(c, "member") for c in changes))
    for m in members:
        mine = [c for c in changes if field(c, "member") == m and shown(c)]
        for i, c in enumerate(mine):
            column = field(c, "column")
            table.add_row(Text(m if i == 0 else ""), quantity(column),
                          value(field(c, "before"), column), value(field(c, "after"), column),
                          changed(c))  # fmt: skip
        table.add_section()
    return table


def render_changes(console, changes: list, rows: list[dict], gates, title: str, elapsed_s,
                   sides: tuple[str, str] = ("before", "after"), notes=()):  # fmt: skip
    """A --vs, --try or --vs-env run: the change table, what differs between the sides'
    environments (`notes`), what its intervals are, each side's misses, the gates."""
    if not changes:
        console.print("no start ran on both sides: nothing to compare", markup=False)
    else:
        console.print(changes_table(changes, title, sides))
    for note in notes:
        console.print(note, markup=False)
    runs = max((field(c, "rounds") or 0 for c in changes), default=0)
    timed = [c for c in changes if field(c, "kind") == "timing" and field(c, "low") is not None]
    level = max((field(c, "level") or 0 for c in timed), default=0.95)
    at = f"{level:.2%}"
    console.print(
        "seconds: each side's mean over its runs; the change is the geometric mean of "
        f"{sides[1]} / {sides[0]}, run i of each side paired (started back to back), with its t interval over "
        f"{counted(runs, 'run')} at {at} each, the {len(timed)} intervals held together at 95%; faster or "
        f"slower only when it excludes 1. Phases under {SHOWN_S:g} s on both sides are in "
        "startup-changes.csv only.",
        markup=False,
    )
    pairs = [(field(c, "variance"), field(c, "df")) for c in timed]
    for source in interval_sources(pairs):
        console.print(f"change intervals: variance {source}", markup=False)
    lacking = {field(c, "note") for c in changes if field(c, "note")}
    for note in sorted(lacking):
        console.print(f"note: {note}", markup=False)
    for r in rows:
        if r.get("missed"):
            console.print(Text(f"{r['side']} {r['mode']} {r['kind']} (run {r['run']}) missed: "
                               f"{r['missed']}"))  # fmt: skip
        if r.get("status") != "ok":
            console.print(Text(f"{r['side']} {r['mode']} {r['kind']} (run {r['run']}): "
                               f"{r['status']}"))  # fmt: skip
    starts_s = sum(r["wall_s"] or 0 for r in rows)
    console.print(f"{len(rows)} starts took {starts_s:.1f} s; the run {elapsed_s:.1f} s")
    for g in gates:
        console.print(f"{gate_mark(g)} {g.name}: {g.detail}", markup=False)


def draw_startup(rows: list[dict], phases: tuple[str, ...], path: Path, title: str) -> Path:
    """A stacked bar per mode and kind: the mean seconds of each phase, one colour a phase."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [(m, k, ok) for m, k, ok, _ in groups(rows) if ok]
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(measured) + 3), 5))
    cmap = plt.get_cmap("tab20")
    labels = [f"{m}\n{k}" for m, k, _ in measured]
    bottoms = [0.0] * len(measured)
    for i, p in enumerate(phases):
        heights = [max(0.0, mean(ok, f"{p}_s") or 0.0) for _, _, ok in measured]
        if any(heights):
            ax.bar(labels, heights, bottom=bottoms, color=cmap(i), label=LABELS.get(p, p))
            bottoms = [b + h for b, h in zip(bottoms, heights)]
    ax.set_ylabel("seconds from launch to ready")
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path)
