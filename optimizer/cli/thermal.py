"""``dnnplan thermal``: fit thermal models to CSV traces and evaluate them at horizons."""

from __future__ import annotations

from pathlib import Path

import typer

from . import app
from .common import STATE, console, console_err, output_file, print_json, stage_progress

#: how ``thermal fit`` and ``thermal eval`` name their requests' fields (errors speak of the options)
FIT_OPTIONS = {"model": "--model", "window": "--window", "ridge": "--ridge", "hidden": "--hidden",
               "fit_step_s": "--fit-step", "shooting_s": "--shooting", "train_from_s": "--train-from",
               "train_to_s": "--train-to", "gap_factor": "--gap-factor", "time": "--time", "temps": "--temps",
               "inputs": "--inputs"}
EVAL_OPTIONS = {"horizons": "--horizons", "from_s": "--from", "to_s": "--to", "time": "--time",
                "gap_factor": "--gap-factor", "train": "--train"}

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
    from ..thermal.fit import EXACT, save_model
    from ..workflow.requests import parse_request
    from ..workflow.thermal import fit_thermal_model
    from ..workflow.thermal_requests import ThermalFitRequest

    request = parse_request(ThermalFitRequest, {
        "trace": str(trace), "time": time, "temps": temps, "inputs": inputs, "model": model, "window": window,
        "ridge": ridge, "hidden": hidden, "fit_step_s": fit_step, "shooting_s": shooting, "train_from_s": train_from,
        "train_to_s": train_to, "gap_factor": gap_factor, "seed": seed}, labels=FIT_OPTIONS)
    with stage_progress("fitting") as progress:
        fitted, training = fit_thermal_model(request, progress)
    save_model(fitted, out)
    if not STATE.quiet:
        taus = ", ".join(f"{t:.3g}" for t in fitted.time_constants_s()[:4])
        how = ("continuous-time: predicts traces at any step" if fitted.continuous_time else
               f"discrete-time at {fitted.dt_s:g} s: traces at other steps are resampled onto it")
        hidden_nodes = f", {fitted.n_hidden} hidden node(s)" if model == "rc" else ""
        console_err.print(f"trace: {training.describe()}", highlight=False)
        console_err.print(f"{model} model: {len(fitted.temp_names)} sensors, {len(fitted.input_names)} inputs{hidden_nodes}, "
                          f"fitted at a {fitted.info.get('fit_step_s') or fitted.dt_s:.4g} s step, {how}; "
                          f"time constants {taus} s -> {out}", highlight=False)
        discretisation = fitted.info.get("discretisation", "")
        if discretisation and not discretisation.startswith(EXACT):
            console_err.print(f"note: the {model} model written is {discretisation}", highlight=False)


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
    from ..workflow.requests import parse_request
    from ..workflow.thermal import evaluate_thermal_model
    from ..workflow.thermal_requests import ThermalEvalRequest

    request = parse_request(ThermalEvalRequest, {
        "model_path": str(model_path), "trace": str(trace), "horizons": horizons, "from_s": t_from, "to_s": t_to,
        "time": time, "gap_factor": gap_factor, "train": None if train is None else str(train),
        "ridge_reference": not no_ridge}, labels=EVAL_OPTIONS)
    evaluation = evaluate_thermal_model(request)
    fitted, scored, scores = evaluation.model, evaluation.trace, evaluation.scores
    if as_json:
        print_json(evaluation.to_dict())
        return
    if not STATE.quiet:
        note = evaluation.resampled_note
        console_err.print(f"trace: {evaluation.described}" + (f"; {note}" if note else ""), highlight=False)
        if evaluation.ridge_reference:
            console_err.print(evaluation.ridge_reference, highlight=False, markup=False)
    from rich.table import Table

    cols = "model / ridge / persistence" if evaluation.train is not None else "model / persistence"
    table = Table(title=f"{fitted.kind} model on {trace.name} ({scored.n_rows} rows, step {scored.dt_s:g} s): RMSE °C ({cols})")
    table.add_column("horizon")
    for name in [*fitted.temp_names, "overall"]:
        table.add_column(name, justify="right")
    for s in scores:
        label = s.label if s.seconds is None else f"{s.steps} ({s.seconds:g} s)"
        table.add_row(label, *[" / ".join(f"{d[k]:.3f}" for d in (s.rmse_c, s.ridge_rmse_c, s.persistence_rmse_c)
                                          if d is not None) for k in [*fitted.temp_names, "overall"]])
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
