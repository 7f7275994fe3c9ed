"""``dnnplan batch``: expand, run, inspect and collect batch search jobs."""

from __future__ import annotations

import shutil
from typing import Optional

import typer

from . import app
from .common import STATE, console, console_err, output_file, print_wide, store_folder

batch_app = typer.Typer(help="Batch search jobs: job files, resumable result store, process pool or Dask.",
                        no_args_is_help=True)
app.add_typer(batch_app, name="batch")


@batch_app.command("plan")
def batch_plan(job_file: str = typer.Argument(..., metavar="JOB", help="Job file, or a job name in search_spaces/jobs (e.g. demo).")) -> None:
    """Show the expanded task list and its count without running anything (every name checked)."""
    from rich.table import Table

    from ..batch import load_job
    from ..batch.tasks import check_tasks

    job = load_job(job_file)
    tasks = job.expand()
    check_tasks(job.name, tasks, allow_commands=True)  # nothing runs here; the commands are listed below
    table = Table(title=f"job {job.name}: {len(tasks)} tasks", header_style="bold")
    for col in ("task id", "kind", "model", "device", "network", "solver", "objectives", "seed"):
        table.add_column(col)
    for t in tasks:
        table.add_row(t.task_id, t.kind, t.model, t.device, t.network or "-", t.solver or "",
                      ",".join(t.objectives or []), str(t.seed))
    console.print(table)
    console.print(f"{len(tasks)} tasks")
    commands = sorted({t.measure_cmd for t in tasks if t.measure_cmd})
    for cmd in commands:
        console.print(f"runs the command {cmd!r} (measure_cmd): 'batch run' needs --allow-commands")


@batch_app.command("run")
def batch_run(
    job_file: str = typer.Argument(..., metavar="JOB", help="Job file, or a job name in search_spaces/jobs (e.g. demo)."),
    out: Optional[str] = typer.Option(None, "--out", callback=store_folder, help="Run folder [default: results/<job name>]."),
    workers: int = typer.Option(2, "--workers", "-w", help="Local worker processes."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786."),
    local_cluster: Optional[int] = typer.Option(None, "--local-cluster", help="Start a Dask LocalCluster with N worker processes."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed tasks again."),
    allow_commands: bool = typer.Option(False, "--allow-commands",
                                        help="Let tasks run their measure_cmd command (refused without it)."),
) -> None:
    """Run every unfinished task; re-running resumes (finished tasks are skipped)."""
    from ..batch import ResultStore, load_job, run_job
    from ..confine import inside
    from ..errors import ConfigError

    if scheduler and local_cluster:
        raise ConfigError("give either --scheduler or --local-cluster, not both")
    job = load_job(job_file)
    root = store_folder(out or inside("results", job.name, "job name", single=True))
    store = ResultStore(root)
    try:
        with _progress() as update:
            summary = run_job(job, store, workers=workers, scheduler=scheduler,
                              local_cluster=local_cluster, retry_failed=retry_failed, progress=update,
                              allow_commands=allow_commands)
    except Exception:  # an interrupted run keeps its folder: re-running resumes it
        made = store.created  # only a folder this run made, never one that existed before it
        if made is not None and not any(made.glob("**/tasks/*/result.json")):
            shutil.rmtree(made, ignore_errors=True)  # nothing finished: leave nothing behind
        raise
    console.print(f"{summary.total} tasks: {summary.done} done, {summary.failed} failed "
                  f"({summary.ran} run now, {summary.skipped} already finished) in "
                  f"{summary.wall_time_s:.1f} s on {summary.backend}; results in {store.root}")
    if summary.failed:
        console_err.print(f"{summary.failed} task(s) failed: see 'dnnplan batch status {store.root}'")
        raise typer.Exit(1)


@batch_app.command("status")
def batch_status(run: str = typer.Argument(..., metavar="RUN", help="Run folder.")) -> None:
    """Counts by status and every failed task with its one-line error."""
    from ..batch import ResultStore

    store = ResultStore.open_existing(run)
    counts = store.counts()
    console.print(f"{run}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    df = store.table()
    for _, row in df[df["status"] == "failed"].iterrows():
        console.print(f"  [red]failed[/] {row['task_id']} {row['kind']} {row['model']} on "
                      f"{row['device']}: {row['error']}", highlight=False)


@batch_app.command("report")
def batch_report(run: str = typer.Argument(..., metavar="RUN", help="Run folder.")) -> None:
    """Finished tasks as tables: split tasks against their baselines (as 'split --job' prints),
    map tasks with their predicted throughput, latency and energy."""
    from ..batch import ResultStore
    from .split import print_comparison

    store = ResultStore.open_existing(run)
    name = store.info().get("job", store.root.name)
    done = sorted(((t, r) for t, r in store.records() if r is not None and r["status"] == "done"),
                  key=lambda tr: (tr[0].model, tr[0].device, tr[0].solver or "", tr[0].seed))
    by_network: dict[str, list[dict]] = {}
    older = 0
    for t, r in done:
        if t.kind != "split":
            continue
        if "comparison" not in (r.get("search") or {}):
            older += 1  # finished before batch split tasks recorded their baselines
            continue
        by_network.setdefault(t.network or "-", []).append(
            {"model": t.model, "device": t.device, "seed": t.seed, "solver": t.solver or "nsga2",
             **r["search"]["comparison"]})
    for network, rows in by_network.items():
        print_comparison(rows, f"{name}: split tasks over {network} vs baselines")
    maps = [(t, r) for t, r in done if t.kind == "map"]
    if maps:
        from rich import box
        from rich.table import Table

        table = Table(title=f"{name}: map tasks", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("model", "device", "solver", "objectives", "seed", "fps", "lat ms", "E mJ"):
            table.add_column(col, justify="left" if col in ("model", "device", "solver", "objectives") else "right")
        for t, r in maps:
            m = r.get("metrics") or {}
            table.add_row(t.model, t.device, t.solver or "ga", ",".join(t.objectives or []), str(t.seed),
                          *[f"{m[k] * scale:.2f}" if isinstance(m.get(k), (int, float)) else "-"
                            for k, scale in (("throughput_fps", 1), ("latency_s", 1e3), ("energy_j", 1e3))])
        print_wide(table)
    counts = store.counts()
    console.print(f"{run}: " + ", ".join(f"{v} {k}" for k, v in counts.items())
                  + (f"; {older} split task(s) ran before baselines were recorded: re-run them "
                     "in a new run folder to compare" if older else ""), highlight=False)


@batch_app.command("collect")
def batch_collect(
    run: str = typer.Argument(..., metavar="RUN", help="Run folder."),
    out: str = typer.Option(..., "--out", callback=output_file, help="table.parquet or table.csv"),
) -> None:
    """One row per task: inputs, solver, seed, objectives, evaluations, wall time, plan path."""
    from ..batch import ResultStore, write_table

    store = ResultStore.open_existing(run)
    n = write_table(store.table(), out)
    console.print(f"{n} rows -> {out}")


class _progress:
    """Rich progress bar with done/failed/remaining and ETA (silent with --quiet, and when stderr
    is not a terminal: Rich would print only its last state there, stale after an interrupt;
    the summary line on stdout says the same)."""

    def __enter__(self):
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = None if STATE.quiet or not console_err.is_terminal else Progress(
            TextColumn("[bold]batch"), BarColumn(), TextColumn("{task.fields[text]}"),
            TimeRemainingColumn(), console=console_err, transient=False)
        self.task = None
        if self.bar:
            self.bar.start()
        return self.update

    def update(self, done: int, failed: int, remaining: int, total: int) -> None:
        if not self.bar:
            return
        text = f"{done} done, {failed} failed, {remaining} remaining"
        if self.task is None:
            self.task = self.bar.add_task("batch", total=max(total, 1), text=text)
        self.bar.update(self.task, completed=done + failed, text=text)

    def __exit__(self, *exc):
        if self.bar:
            self.bar.stop()
        return False
