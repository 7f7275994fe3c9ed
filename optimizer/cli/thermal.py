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
    trace: Path = typer.Argument(..., help="CSV trace with a header row (.csv or .csv.gz) or a shipped one's name (odroid_xu3_rise); concatenated "
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
    from ..thermal.fit import EXACT, fit_model, save_model
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
    # what `thermal eval` needs to fit the ridge reference on the same training data
    m.info.update(trace_resolved=str(Path(trace).resolve()), train_window_s=[train_from, train_to],
                  gap_factor=gap_factor)
    save_model(m, out)
    if not STATE.quiet:
        taus = ", ".join(f"{t:.3g}" for t in m.time_constants_s()[:4])
        how = ("continuous-time: predicts traces at any step" if m.continuous_time else
               f"discrete-time at {m.dt_s:g} s: traces at other steps are resampled onto it")
        hid = f", {m.n_hidden} hidden node(s)" if model == "rc" else ""
        console_err.print(f"trace: {tr.describe()}", highlight=False)
        console_err.print(f"{model} model: {len(m.temp_names)} sensors, {len(m.input_names)} inputs{hid}, "
                          f"fitted at a {m.info.get('fit_step_s') or m.dt_s:.4g} s step, {how}; "
                          f"time constants {taus} s -> {out}", highlight=False)
        how_ct = m.info.get("discretisation", "")
        if how_ct and not how_ct.startswith(EXACT):
            console_err.print(f"note: the {model} model written is {how_ct}", highlight=False)


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


def _parse_horizons(text: str, dt: float, max_steps: int) -> list[int]:
    """Horizons in steps; each within ``[1, max_steps]`` (the longest segment's steps: a longer
    horizon has no start to score)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            steps = round(float(part[:-1]) / dt) if part.endswith("s") else int(part)
        except (ValueError, OverflowError):
            raise ConfigError(f"--horizons: {part!r} is not a step count (e.g. 10) or a duration (e.g. 60s)") from None
        if steps < 1:
            raise ConfigError(f"--horizons: {part!r} is shorter than one step ({dt:g} s)")
        if steps > max_steps:
            raise ConfigError(f"--horizons: {part!r} is {steps} steps, longer than the trace's longest segment "
                              f"({max_steps} steps of {dt:g} s): no start can be scored; give at most {max_steps}")
        out.append(steps)
    if not out:
        raise ConfigError("--horizons is empty")
    return out


@thermal_app.command("eval")
def eval_cmd(
    model_path: Path = typer.Argument(..., help="Model JSON written by 'thermal fit'."),
    trace: Path = typer.Argument(..., help="CSV trace with the model's columns, or a shipped one's name."),
    horizons: str = typer.Option("1,10,60", "--horizons", help="Steps, or durations with s (e.g. 1,10,60s)."),
    t_from: float | None = typer.Option(None, "--from", help="Evaluate on samples with t >= this (s)."),
    t_to: float | None = typer.Option(None, "--to", help="Evaluate on samples with t < this (s)."),
    time: str | None = typer.Option(None, "--time", help="Time column (default: the model's training one)."),
    gap_factor: float = typer.Option(5.0, "--gap-factor", help="Split segments at gaps > this x median step."),
    train: Path | None = typer.Option(None, "--train", help="Training trace for the ridge reference (default: the "
                                      "one recorded in the model, with its --train-from/--train-to window)."),
    no_ridge: bool = typer.Option(False, "--no-ridge", help="Skip the ridge reference."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """RMSE per sensor at each horizon and open loop, next to a ridge reference and persistence."""
    from ..thermal.fit import align_trace, evaluate, load_model
    from ..thermal.reference import training_trace
    from ..thermal.trace import read_trace

    m = load_model(model_path)
    tcol = time or m.info.get("time_column") or "t_s"
    train_tr = None
    if not no_ridge:
        info = m.info if train is None else {**m.info, "train_window_s": None}
        train_tr = training_trace(info, m.temp_names, m.input_names, train, where=str(model_path))
    tr = read_trace(trace, tcol, list(m.temp_names), list(m.input_names), gap_factor=gap_factor)
    if t_from is not None or t_to is not None:
        tr = tr.window(t_from, t_to)
    described = tr.describe()
    tr, note = align_trace(m, tr)
    scores = evaluate(m, tr, _parse_horizons(horizons, tr.dt_s, max(len(sg) for sg in tr.segments) - 1), train=train_tr)
    ridge_about = (None if train_tr is None else
                   f"ridge reference: T[k+h]-T[k] ~ current temps, current inputs and the inputs' mean over the "
                   f"horizon (one RidgeCV per horizon), fitted on {train_tr.path} ({train_tr.n_rows} rows)")
    if as_json:
        print_json({"model": str(model_path), "kind": m.kind, "trace": str(trace), "dt_s": tr.dt_s,
                    "rows": tr.n_rows, "segments": len(tr.segments), "breaks": tr.breaks, "resampled": note,
                    "ridge_reference": ridge_about, "scores": [s.to_dict() for s in scores]})
        return
    if not STATE.quiet:
        console_err.print(f"trace: {described}" + (f"; {note}" if note else ""), highlight=False)
        if ridge_about:
            console_err.print(ridge_about, highlight=False)
    from rich.table import Table

    cols = "model / ridge / persistence" if train_tr is not None else "model / persistence"
    table = Table(title=f"{m.kind} model on {trace.name} ({tr.n_rows} rows, step {tr.dt_s:g} s): RMSE °C ({cols})")
    table.add_column("horizon")
    for name in [*m.temp_names, "overall"]:
        table.add_column(name, justify="right")
    for s in scores:
        label = s.label if s.seconds is None else f"{s.steps} ({s.seconds:g} s)"
        table.add_row(label, *[" / ".join(f"{d[k]:.3f}" for d in (s.rmse_c, s.ridge_rmse_c, s.persistence_rmse_c)
                                          if d is not None) for k in [*m.temp_names, "overall"]])
    console.print(table)
    summary = Table(title="overall RMSE °C: does the model beat the learned reference and persistence?")
    for c in ("horizon", "model", "ridge", "persistence", "persistence ÷ model", "model ÷ ridge"):
        summary.add_column(c, justify="right")
    for s in scores:
        mod, per = s.rmse_c["overall"], s.persistence_rmse_c["overall"]
        rid = s.ridge_rmse_c["overall"] if s.ridge_rmse_c is not None else None
        summary.add_row(s.label if s.seconds is None else f"{s.steps} ({s.seconds:g} s)", f"{mod:.3f}",
                        "-" if rid is None else f"{rid:.3f}", f"{per:.3f}", f"{per / mod:.2f}",
                        "-" if rid is None else f"{mod / rid:.2f}")
    console.print(summary)
