"""`nanobench sweep GRID.toml`: a grid of one command's configurations, here or on a Ray cluster.

What it is: the command. It validates its options and the grid (against the swept command's
own option types) before anything runs, lists the points under `--dry-run`, runs the points
the out directory has not finished (all of them under `--redo`) through a launcher, and prints
the summary table, the heatmap and `<out>/sweep.csv` (or one JSON document under `--json`).
What it is not: the grid and the ledger (`nanobench.sweep.points`), running a point
(`nanobench.sweep.launchers`) or drawing (`reports.sweep`).
Invariant: a bad grid is one line and exit 2 with nothing run or written; every point that
finished before a Ctrl-C or a SIGTERM is in sweep.csv, and rerunning the same grid runs only
the rest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import typer

from nanobench.commands import Command
from nanobench.harness.cli.console import run_command, say_error, stdout_console
from nanobench.harness.cli.lifeline import interrupt_code
from nanobench.harness.cli.options import (
    Address,
    CheckOpt,
    DryRun,
    Jobs,
    JsonOpt,
    Launcher,
    NumCpus,
    QuietOpt,
    Redo,
    Resources,
    Timeout,
)
from nanobench.harness.errors import BadInput
from nanobench.harness.runs.gates import Gate
from nanobench.harness.runs.output import finish
from nanobench.harness.statistics.verdicts import INCONCLUSIVE, PASS

GridArg = Annotated[
    str | None,
    typer.Argument(help="GRID.toml: a command, the options of every point, the axes to cross."),
]
SweepOut = Annotated[
    str, typer.Option(help="Directory for sweep.csv, sweep.png and points/<key>/.")
]


@dataclass(frozen=True)
class SweepSpec:
    """A sweep's options; the signature's defaults read these."""

    grid: str | None = None
    out: str = "nanobench-out"
    launcher: str = "local"
    jobs: int = 1
    address: str | None = None
    num_cpus: int = 0
    resources: str = ""
    timeout: int = 3600
    redo: bool = False
    dry_run: bool = False

    def validate(self) -> None:
        """Cross-option rules Typer cannot state: Ray-only options, a grid to read."""
        if self.launcher != "ray" and (self.address or self.resources):
            raise BadInput("--address/--resources: only with --launcher ray")
        if self.grid is None:
            raise BadInput("GRID: missing; expected a grid file, e.g. nanobench sweep grid.toml")


def gates(spec: SweepSpec, records) -> list[Gate]:
    """One gate per point: it ended ok and its own gates passed; inconclusive ones stay so."""
    from reports.sweep import point_verdict

    found = []
    for r in records:
        verdict = point_verdict(r.gates)
        if r.status != "ok" or verdict not in (PASS, INCONCLUSIVE, ""):
            found.append(Gate(f"point[{r.key}]", False, r.detail or f"{r.status}, gates {verdict}"))
        elif verdict == INCONCLUSIVE:
            found.append(Gate(f"point[{r.key}]", False, "a gate can't tell", INCONCLUSIVE))
        else:
            found.append(Gate(f"point[{r.key}]", True, "ok"))
    return found


def sweep(
    grid: GridArg = SweepSpec.grid,
    out: SweepOut = SweepSpec.out,
    launcher: Launcher = SweepSpec.launcher,
    jobs: Jobs = SweepSpec.jobs,
    address: Address = SweepSpec.address,
    num_cpus: NumCpus = SweepSpec.num_cpus,
    resources: Resources = SweepSpec.resources,
    timeout: Timeout = SweepSpec.timeout,
    redo: Redo = SweepSpec.redo,
    dry_run: DryRun = SweepSpec.dry_run,
    json_mode: JsonOpt = False,
    check: CheckOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run one command over a grid of options, each point in a fresh process; resumable.

    Example: nanobench sweep grid.toml --jobs 2   (grid.toml: command = "buckets", then
    under axes: width_multiple = [256, 1024], rows = [1, 4])

    Example: nanobench sweep grid.toml --dry-run   (list the points' command lines)

    Example: nanobench sweep grid.toml --launcher ray --address auto --check
    """
    # Heavy on purpose: the points' reports read pandas; the CLI must start without it.
    from nanobench.sweep.launchers import parse_resources
    from nanobench.sweep.points import load_grid, points
    from reports.sweep import dry_run_rows, render_dry_run

    with run_command(quiet) as status:
        spec = SweepSpec(
            grid=grid,
            out=out,
            launcher=launcher,
            jobs=jobs,
            address=address,
            num_cpus=num_cpus,
            resources=resources,
            timeout=timeout,
            redo=redo,
            dry_run=dry_run,
        )
        spec.validate()
        ray_options = parse_resources(resources)
        grid_spec = load_grid(grid)
        found = points(grid_spec)
        if dry_run:
            code = finish(
                "sweep",
                dry_run_rows(found),
                [],
                {},
                json_mode=json_mode,
                check=check,
                render=lambda: render_dry_run(stdout_console(), found, lambda p: p.argv()),
            )
        else:
            ledger, ran = run_points(spec, grid_spec, found, ray_options, status)
            code = report(spec, grid_spec, found, ledger, ran, json_mode=json_mode, check=check)
    raise typer.Exit(code)


def run_points(spec: SweepSpec, grid_spec, found: list, ray_options: dict, status):
    """Run the points the ledger has not finished (all with --redo); returns (ledger, ran)."""
    from nanobench.harness.cli.validate import out_dir
    from nanobench.sweep.launchers import Task, launch_local, launch_ray
    from nanobench.sweep.points import TIMED, Ledger

    ledger = Ledger(out_dir(spec.out))
    todo = [p for p in found if spec.redo or not ledger.finished(p.key)]
    by_key = {p.key: p for p in todo}
    timed = grid_spec.command in TIMED
    tasks = [
        Task(p.key, tuple(p.argv()), str(ledger.point_dir(p.key).resolve()), spec.timeout, timed)
        for p in todo
    ]

    def done(task: Task, run) -> None:
        point = by_key[task.key]
        ledger.record(record_of(point, run))
        finished = sum(ledger.finished(p.key) for p in found)
        status(f"{finished}/{len(found)} points done ({point.key}: {run.status})")

    status(f"running {len(tasks)} of {len(found)} points ({spec.launcher})")
    try:
        if spec.launcher == "local":
            launch_local(tasks, done, spec.jobs)
        else:
            launch_ray(
                tasks,
                done,
                address=spec.address,
                num_cpus=spec.num_cpus or os.cpu_count() or 1,
                resources=ray_options,
            )
    except KeyboardInterrupt as e:
        say_error(
            f"interrupted: the finished points are in {ledger.out / 'sweep.csv'}; "
            "run the same command again to resume"
        )
        raise typer.Exit(interrupt_code(e)) from None
    return ledger, len(tasks)


def record_of(point, run):
    """The ledger's record of one finished point: its axes, its run, its rows and gates."""
    from nanobench.sweep.points import PointRecord

    return PointRecord(
        key=point.key,
        index=point.index,
        command=point.command,
        axes=dict(point.axes),
        status=run.status,
        detail=run.detail,
        wall_s=run.wall_s,
        env=run.env,
        rows=run.doc.get("rows", []),
        gates=run.doc.get("gates", []),
        outputs=run.doc.get("outputs", {}),
    )


def report(spec: SweepSpec, grid_spec, found: list, ledger, ran: int, *, json_mode, check) -> int:
    """The sweep's figure, CSV and table over every point of the grid; the exit code."""
    from reports.csvio import save_figure
    from reports.sweep import (
        FIGURES,
        draw_sweep,
        render_sweep,
        run_of,
        tidy_rows,
    )

    axes = list(grid_spec.axes)
    records = [ledger.records[p.key] for p in found]
    figure = FIGURES[grid_spec.command]
    png = save_figure(
        draw_sweep(records, axes, figure, grid_spec.command, run_of(found)),
        ledger.out / "sweep.png",
    )
    outputs = {"csv": str(ledger.out / "sweep.csv"), "png": str(png)}
    return finish(
        "sweep",
        tidy_rows(records),
        gates(spec, records),
        outputs,
        json_mode=json_mode,
        check=check,
        render=lambda: render_sweep(stdout_console(), records, axes, figure, outputs, ran=ran),
    )


SWEEP = Command("sweep", sweep, doc="docs/sweeps.md")
