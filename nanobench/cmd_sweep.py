"""`nanobench sweep GRID.toml`: a grid of one command's configurations, here or on a Ray cluster.

What it is: the command. It validates its options and the grid (against the swept command's
own option types) before anything runs, lists the points under `--dry-run`, runs the points
the out directory has not finished (all of them under `--redo`) through a launcher, and prints
the summary table, the heatmap and `<out>/sweep.csv` (or one JSON document under `--json`).
What it is not: the grid and the ledger (`nanobench.sweep`), running a point
(`nanobench.launchers`) or drawing (`reports.sweep`).
Invariant: a bad grid is one line and exit 2 with nothing run or written; every point that
finished before a Ctrl-C is in sweep.csv, and rerunning the same grid runs only the rest.
"""

from __future__ import annotations

import os

import typer

from nanobench.common import Gate, choice, finish, positive
from nanobench.console import run_command, say_error, stdout_console
from nanobench.errors import BadInput

EXIT_INTERRUPTED = 130  # the shell's code for a run ended by SIGINT


def sweep(
    grid: str | None = typer.Argument(
        None, help="GRID.toml: command, [options] for every point, [axes] to cross."
    ),
    out: str = typer.Option(
        "nanobench-out", help="Directory for sweep.csv, sweep.png and points/<key>/."
    ),
    launcher: str = typer.Option("local", help="local (this machine) | ray (a Ray cluster)."),
    jobs: int = typer.Option(
        1, help="Arithmetic points (buckets, pool-budget) run at once by local; timed ones: 1."
    ),
    address: str | None = typer.Option(
        None, help="Ray cluster address (auto, HEAD:6379); none: start a local one."
    ),
    num_cpus: int = typer.Option(0, help="CPUs of a local Ray cluster (0: this machine's)."),
    resources: str = typer.Option(
        "", help='Ray resources each point asks for, as JSON: {"GPU": 1}.'
    ),
    timeout: int = typer.Option(3600, help="Seconds before a point's process is killed."),
    redo: bool = typer.Option(False, "--redo", help="Run finished points again."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the points; run nothing."),
    json_mode: bool = typer.Option(
        False, "--json", help="Print one JSON document instead of tables."
    ),
    check: bool = typer.Option(
        False, "--check", help="Exit 1 when a point did not end ok or a gate of it failed."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress on stderr."),
) -> None:
    """Run one command over a grid of options, each point in a fresh process; resumable.

    Example: nanobench sweep grid.toml --jobs 2   (grid.toml: command = "buckets",
    [axes] width_multiple = [256, 1024], rows = [1, 4])
    """
    from nanobench.launchers import Task, launch_local, launch_ray, parse_resources
    from nanobench.sweep import TIMED, Ledger, PointRecord, load_grid, points
    from reports.sweep import FIGURES, dry_run_rows, point_verdict, render_dry_run

    with run_command(quiet) as status:
        positive("--jobs", jobs)
        positive("--timeout", timeout)
        if num_cpus < 0:
            raise BadInput(f"--num-cpus {num_cpus}: expected 0 (this machine's) or more")
        choice("--launcher", launcher, ("local", "ray"))
        if launcher != "ray" and (address or resources):
            raise BadInput("--address/--resources: only with --launcher ray")
        ray_options = parse_resources(resources)
        if grid is None:
            raise BadInput("GRID: missing; expected a grid file, e.g. nanobench sweep grid.toml")
        spec = load_grid(grid)
        found = points(spec)
        axes = list(spec.axes)

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
            raise typer.Exit(code)

        from nanobench.common import out_dir

        ledger = Ledger(out_dir(out))
        todo = [p for p in found if redo or not ledger.finished(p.key)]
        by_key = {p.key: p for p in todo}
        timed = spec.command in TIMED
        tasks = [
            Task(p.key, tuple(p.argv()), str(ledger.point_dir(p.key).resolve()), timeout, timed)
            for p in todo
        ]

        def done(task: Task, run) -> None:
            point = by_key[task.key]
            ledger.record(
                PointRecord(
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
            )
            finished = sum(ledger.finished(p.key) for p in found)
            status(f"{finished}/{len(found)} points done ({point.key}: {run.status})")

        status(f"running {len(tasks)} of {len(found)} points ({launcher})")
        try:
            if launcher == "local":
                launch_local(tasks, done, jobs)
            else:
                launch_ray(
                    tasks,
                    done,
                    address=address,
                    num_cpus=num_cpus or os.cpu_count() or 1,
                    resources=ray_options,
                )
        except KeyboardInterrupt:
            say_error(
                f"interrupted: the finished points are in {ledger.out / 'sweep.csv'}; "
                "run the same command again to resume"
            )
            raise typer.Exit(EXIT_INTERRUPTED) from None

        from reports.sweep import draw_sweep, render_sweep, save_sweep_figure, tidy_rows

        records = [ledger.records[p.key] for p in found]
        figure = FIGURES[spec.command]
        png = save_sweep_figure(
            draw_sweep(records, axes, figure, spec.command), ledger.out / "sweep.png"
        )
        outputs = {"csv": str(ledger.out / "sweep.csv"), "png": str(png)}
        gates = []
        for r in records:
            verdict = point_verdict(r.gates)
            passed = r.status == "ok" and verdict in ("pass", "")
            detail = "ok" if passed else (r.detail or f"{r.status}, gates {verdict}")
            gates.append(Gate(f"point[{r.key}]", passed, detail))
        code = finish(
            "sweep",
            tidy_rows(records),
            gates,
            outputs,
            json_mode=json_mode,
            check=check,
            render=lambda: render_sweep(
                stdout_console(), records, axes, figure, outputs, ran=len(tasks)
            ),
        )
    raise typer.Exit(code)
