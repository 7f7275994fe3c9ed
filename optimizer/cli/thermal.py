"""``dnnplan thermal``: fit thermal models to CSV traces and evaluate them at horizons."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import typer

from ..errors import ConfigError
from . import app
from .common import STATE, console, console_err, output_file, print_json

thermal_app = typer.Typer(help="Thermal models: fit from traces (SPLASH linear, RC) and evaluate.",
                          no_args_is_help=True)
app.add_typer(thermal_app, name="thermal")


@thermal_app.command("fit")
def fit_cmd(
    trace: Path = typer.Argument(..., help="CSV trace with a header row (.csv or .csv.gz); concatenated "
                                           "recordings (time resets) and gaps start new segments."),
    time: str = typer.Option(..., "--time", help="Time column (s)."),
    temps: str = typer.Option(..., "--temps", help="Temperature columns, comma-separated, globs allowed."),
    inputs: str = typer.Option(..., "--inputs", help="Input columns (power, clocks...), globs allowed."),
    out: Path = typer.Option(..., "--out", callback=output_file, help="Where to write the model JSON."),
    model: str = typer.Option("linear", "--model", help="linear (SPLASH) or rc (constrained RC network)."),
    window: int | None = typer.Option(None, "--window", help="linear: fit on the last N samples only."),
    ridge: float = typer.Option(0.0, "--ridge", help="linear: ridge penalty (0 = SVD least squares)."),
    hidden: str = typer.Option("auto", "--hidden", help="rc: unmeasured nodes (board, heat sink): auto = 0 or 1, "
                               "whichever predicts a held-out segment better; 2+ uses the slower open-loop fit."),
    fit_step: float | None = typer.Option(None, "--fit-step", help="Fit at this step (s, a multiple of the "
                                          "trace's); default: chosen on a held-out segment."),
    shooting: float | None = typer.Option(None, "--shooting",
                                          help="rc: also fit windows of this many seconds (multiple shooting)."),
    train_from: float | None = typer.Option(None, "--train-from", help="Fit on samples with t >= this (s; "
                                             "in every recording when the log restarts its clock)."),
    train_to: float | None = typer.Option(None, "--train-to", help="Fit on samples with t < this (s)."),
    gap_factor: float = typer.Option(5.0, "--gap-factor", help="Split segments at gaps > this x median step."),
    seed: int = typer.Option(0, "--seed", help="Seed of the rc fit's restarts."),
) -> None:
    """Fit a thermal model to a trace and write it as JSON."""
    from ..thermal.fit import fit_model, save_model
    from ..thermal.trace import read_trace

    if model not in ("linear", "rc"):
        raise ConfigError(f"--model must be linear or rc, got {model!r}")
    if hidden != "auto" and not hidden.isdigit():
        raise ConfigError(f"--hidden must be a whole number >= 0 or auto, got {hidden!r}")
    hidden_nodes: int | str = hidden if hidden == "auto" else int(hidden)
    if not ridge >= 0:
        raise ConfigError(f"--ridge {ridge!r}: expected a penalty >= 0 (0 = plain least squares)")
    tr = read_trace(trace, time, temps, inputs, gap_factor=gap_factor)
    tr = tr.window(train_from, train_to) if (train_from is not None or train_to is not None) else tr
    with _progress() as progress:
        m = fit_model(tr, model, window=window, ridge=ridge, hidden=hidden_nodes, shooting_s=shooting, seed=seed,
                      fit_step_s=fit_step, progress=progress)
    save_model(m, out)
    if not STATE.quiet:
        taus = ", ".join(f"{t:.3g}" for t in m.time_constants_s()[:4])
        how = ("continuous-time: predicts traces at any step" if m.continuous_time else
               f"discrete-time at {m.dt_s:g} s: traces within 5 % of that step are resampled onto it")
        hid = f", {m.n_hidden} hidden node(s)" if model == "rc" else ""
        console_err.print(f"trace: {tr.describe()}", highlight=False)
        console_err.print(f"{model} model: {len(m.temp_names)} sensors, {len(m.input_names)} inputs{hid}, "
                          f"fitted at a {m.info.get('fit_step_s') or m.dt_s:.4g} s step, {how}; "
                          f"time constants {taus} s -> {out}", highlight=False)


@contextmanager
def _progress():
    """A Rich progress bar fed by the fit's ``progress(stage, done, total)`` (None with --quiet)."""
    if STATE.quiet:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console_err, transient=True) as bar:
        task = bar.add_task("fitting", total=None)

        def update(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)
        yield update


def _parse_horizons(text: str, dt: float) -> list[int]:
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            steps = round(float(part[:-1]) / dt) if part.endswith("s") else int(part)
        except ValueError:
            raise ConfigError(f"--horizons: {part!r} is not a step count (e.g. 10) or a duration (e.g. 60s)") from None
        if steps < 1:
            raise ConfigError(f"--horizons: {part!r} is shorter than one step ({dt:g} s)")
        out.append(steps)
    if not out:
        raise ConfigError("--horizons is empty")
    return out


@thermal_app.command("eval")
def eval_cmd(
    model_path: Path = typer.Argument(..., help="Model JSON written by 'thermal fit'."),
    trace: Path = typer.Argument(..., help="CSV trace with the model's columns."),
    horizons: str = typer.Option("1,10,60", "--horizons", help="Steps, or durations with s (e.g. 1,10,60s)."),
    t_from: float | None = typer.Option(None, "--from", help="Evaluate on samples with t >= this (s)."),
    t_to: float | None = typer.Option(None, "--to", help="Evaluate on samples with t < this (s)."),
    time: str | None = typer.Option(None, "--time", help="Time column (default: the model's training one)."),
    gap_factor: float = typer.Option(5.0, "--gap-factor", help="Split segments at gaps > this x median step."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """RMSE per sensor at each horizon and open loop, next to persistence."""
    from ..thermal.fit import align_trace, evaluate, load_model
    from ..thermal.trace import read_trace

    m = load_model(model_path)
    tcol = time or m.info.get("time_column") or "t_s"
    tr = read_trace(trace, tcol, list(m.temp_names), list(m.input_names), gap_factor=gap_factor)
    if t_from is not None or t_to is not None:
        tr = tr.window(t_from, t_to)
    described = tr.describe()
    tr, note = align_trace(m, tr)
    scores = evaluate(m, tr, _parse_horizons(horizons, tr.dt_s))
    if as_json:
        print_json({"model": str(model_path), "kind": m.kind, "trace": str(trace), "dt_s": tr.dt_s,
                    "rows": tr.n_rows, "segments": len(tr.segments), "breaks": tr.breaks, "resampled": note,
                    "scores": [s.to_dict() for s in scores]})
        return
    if not STATE.quiet:
        console_err.print(f"trace: {described}" + (f"; {note}" if note else ""), highlight=False)
    from rich.table import Table

    table = Table(title=f"{m.kind} model on {trace.name} ({tr.n_rows} rows, step {tr.dt_s:g} s): RMSE °C "
                        f"(model / persistence)")
    table.add_column("horizon")
    for name in [*m.temp_names, "overall"]:
        table.add_column(name, justify="right")
    for s in scores:
        label = s.label if s.seconds is None else f"{s.steps} ({s.seconds:g} s)"
        table.add_row(label, *[f"{s.rmse_c[k]:.3f} / {s.persistence_rmse_c[k]:.3f}"
                               for k in [*m.temp_names, "overall"]])
    console.print(table)
