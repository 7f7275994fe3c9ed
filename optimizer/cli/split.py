"""``dnnplan split``: mobile–cloud split search (SmartSplit), or a split job with ``--job``."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

import typer

from ..errors import ConfigError
from . import app
from .bounds import bounded
from ..graph.input_shapes import format_input_shapes
from .common import STATE, console, console_err, input_shape_option, output_file, print_wide

SOLVERS = ("nsga2", "exact", "lbo", "ebo", "cos", "coc", "rs")
#: option names of the request fields, for one-line errors in the user's words
SPLIT_OPTIONS = {"network": "--network", "server": "--server", "solver": "--solver", "granularity": "--granularity",
                 "dtype": "--dtype", "wire_dtypes": "--wire", "cost_model": "--cost-model",
                 "memory_limit": "--memory-limit", "bandwidth_bps": "--bandwidth", "objectives": "--objectives",
                 "weights": "--weights", "topsis": "--topsis", "seed": "--seed", "runtime": "--runtime",
                 "bandwidth_trace": "--bandwidth-trace", "risk": "--risk", "memory_budget": "--memory-budget",
                 "accuracy_data": "--accuracy-data", "min_accuracy": "--min-accuracy", "result": "--result",
                 "max_mean_increase": "--max-mean-increase", "interior_only": "--interior-only",
                 "include_extremes": "--extremes", "input_shape": "--input-shape"}


def _fmt_decision(c: Any, n_layers: int) -> tuple[str, str, str]:
    d = c.decision
    where = "-" if d["split"] == 0 else f"{d['processor']} {d['clock_hz'] / 1e9:.2f}G"
    return f"{d['split']}/{n_layers}", where, d["wire_dtype"] if d["split"] < n_layers else "-"


def _front_csv(result: Any, layer_names: tuple[str, ...]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["split", "boundary_after_layer", "processor", "clock_hz", "wire_dtype", "crossing_bytes",
                "latency_s", "energy_j", "memory_bytes", "chosen"])
    for c in result.front:
        d, o = c.decision, c.objectives
        w.writerow([d["split"], layer_names[d["split"] - 1] if d["split"] > 0 else "", d["processor"],
                    f"{d['clock_hz']:.0f}", d["wire_dtype"], int(c.metrics["crossing_bytes"]),
                    f"{o['latency_s']:.9g}", f"{o['energy_j']:.9g}", int(o["memory_bytes"]),
                    int(c.decision == result.best.decision)])
    return buf.getvalue()


def _extra_column(name: str) -> tuple[str, float]:
    """Header and display factor of an extra objective (risk over a bandwidth trace, thermal)."""
    from ..report.frames import display_factor, short_label

    return short_label(name), display_factor(name)


def _summary(result: Any, n_layers: int, title: str) -> None:
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    extra = [n for n in result.best.objectives if n not in ("latency_s", "energy_j", "memory_bytes")]
    columns = [_extra_column(n) for n in extra]
    for col in ("", "split", "head", "wire", "up kB", "down ms", "lat ms", "E mJ", "mem MB",
                *(h for h, _ in columns), "ok"):
        table.add_column(col, justify="left" if col in ("", "head", "wire") else "right", no_wrap=True)
    rows = [(f"[bold]{result.solver}[/]", result.best)]
    rows += [(name.upper(), c) for name, c in result.baselines.items()]
    for label, c in rows:
        split, head, wire = _fmt_decision(c, n_layers)
        o = c.objectives
        table.add_row(label, split, head, wire, f"{c.metrics['crossing_bytes'] / 1e3:.1f}",
                      f"{c.metrics['download_s'] * 1e3:.1f}", f"{o['latency_s'] * 1e3:.1f}", f"{o['energy_j'] * 1e3:.1f}",
                      f"{o['memory_bytes'] / 1e6:.2f}", *(f"{o[n] * k:.1f}" if n in o else "-"
                                                         for n, (_, k) in zip(extra, columns)),
                      "yes" if c.feasible else "[red]no[/]")
    print_wide(table)
    space = result.settings.get("split_space")
    console.print(f"front: {len(result.front)} solutions" + (f" over {space}" if space else "") +
                  f"; evaluations {result.evaluations} of "
                  f"{int(result.space_size)} ({result.explored_fraction:.1%}); "
                  f"{result.wall_time_s:.2f} s", highlight=False)


@app.command("split")
def split_cmd(
    model: str | None = typer.Argument(None, help="Zoo name or model file (.keras/.onnx/.tflite)."),
    device: str | None = typer.Option(None, "--device", "-d", help="Phone (search_spaces/devices)."),
    network: str | None = typer.Option(None, "--network", "-n", help="Link (search_spaces/networks)."),
    server: str = typer.Option("smartsplit_i5", "--server", help="Server (search_spaces/servers)."),
    solver: str = typer.Option("nsga2", "--solver", help=f"One of {', '.join(SOLVERS)}."),
    granularity: str = typer.Option("block", "--granularity", help="block or op."),
    dtype: str = typer.Option("int8", "--dtype", help="Compute dtype of the head (int8, fp16, fp32)."),
    wire: str = typer.Option("int8,fp16,fp32", "--wire", help="Wire dtypes searched, comma-separated."),
    cost_model: str = typer.Option("table", "--cost-model", help="table (CostTable) or smartsplit (closed form)."),
    runtime: str | None = typer.Option(None, "--runtime", help="Phone inference runtime profile, e.g. "
                                       "pytorch_mobile_fp32 (default: the device's own)."),
    memory_limit: str | None = typer.Option(None, "--memory-limit", help="Head memory budget, e.g. '1 GB'."),
    accuracy_data: str | None = typer.Option(
        None, "--accuracy-data", help="Labelled .npz (x, y[, calib]): measure the accuracy of each partition "
                                      "(INT8 head, wire dtype, FP32 tail); MODEL must be a .keras file."),
    min_accuracy: str | None = typer.Option(None, "--min-accuracy", help="Top-1 accuracy floor, e.g. 0.95 or "
                                                                         "95% (needs --accuracy-data)."),
    memory_budget: str | None = typer.Option(
        None, "--memory-budget", help="Head memory as a constraint instead of an objective, e.g. '512MB' "
                                      "(limit = budget; memory's TOPSIS weight set to 0)."),
    bandwidth: str | None = typer.Option(None, "--bandwidth", help="Override the link's bandwidth, e.g. '5 Mbps'."),
    interior_only: bool = typer.Option(False, "--interior-only",
                                       help="Search interior split boundaries 1..L-1 only (SmartSplit's setting); "
                                            "by default all-on-server (0) and all-on-phone (L) are candidates."),
    extremes: bool = typer.Option(False, "--extremes", help="Accepted for compatibility, no effect: the "
                                                            "extremes are searched unless --interior-only."),
    objectives: str = typer.Option("latency,energy,memory", "--objectives",
                                   help="latency, energy and memory are always searched; add sustained-fps, "
                                        "peak-temp or time-to-throttle (thermal simulator estimates)."),
    weights: str | None = typer.Option(None, "--weights",
                                       help="TOPSIS weights latency,energy,memory[,thermal objectives...]."),
    topsis: str = typer.Option("paper", "--topsis", help="paper (distance to ideal) or classic."),
    bandwidth_trace: str | None = typer.Option(
        None, "--bandwidth-trace", help="Uplink trace (Mahimahi packet-delivery file, t_s,mbps CSV, or a name "
                                        "in search_spaces/bandwidth): adds a risk objective over it."),
    risk: str | None = typer.Option(None, "--risk", help="Risk objective over the trace: cvar95 (default), "
                                                         "p95, mean or regret (also pNN, cvarNN)."),
    max_mean_increase: str | None = typer.Option(
        None, "--max-mean-increase", help="Constraint with --bandwidth-trace: expected latency over the trace "
                                          "at most this much above the least, e.g. 5% (mean-CVaR)."),
    result_mode: str = typer.Option(
        "auto", "--result", help="What the server sends back: raw (the network's outputs as float32), topk "
                                 "(an SSD head's 100 best anchors: index, box encoding, score, class; the phone "
                                 "decodes and finishes NMS) or auto (topk for SSD heads, else raw)."),
    population: int = typer.Option(40, "--population", callback=bounded("split", "--population"), help="NSGA-II population."),
    generations: int = typer.Option(40, "--generations", callback=bounded("split", "--generations"), help="NSGA-II generations."),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same plan)."),
    out: Path | None = typer.Option(None, "--out", "-o", callback=output_file, help="Plan JSON to write."),
    front: Path | None = typer.Option(None, "--front", callback=output_file, help="Pareto front CSV to write."),
    job: str | None = typer.Option(None, "--job", help="Run a split job instead: a file, or a name in search_spaces/jobs (e.g. smartsplit)."),
    input_shape: list[str] | None = input_shape_option(),
) -> None:
    """Split a network between phone and server: NSGA-II front + TOPSIS choice vs baselines."""
    if job is not None:
        if model is not None:
            raise ConfigError("give either MODEL or --job, not both")
        _run_job(job)
        return
    if model is None or device is None or network is None or out is None:
        missing = [n for n, v in (("MODEL", model), ("--device", device), ("--network", network),
                                  ("--out", out)) if v is None]
        raise ConfigError(f"dnnplan split needs {', '.join(missing)} (or --job FILE)")
    from ..workflow import SplitRequest, parse_request, plan_split

    request = parse_request(SplitRequest, {
        "model": model, "device": device, "network": network, "server": server, "solver": solver,
        "granularity": granularity, "dtype": dtype, "wire_dtypes": wire, "cost_model": cost_model,
        "memory_limit": memory_limit, "bandwidth_bps": bandwidth, "include_extremes": extremes,
        "interior_only": interior_only,
        "objectives": objectives, "weights": weights, "topsis": topsis, "seed": seed, "runtime": runtime,
        "bandwidth_trace": bandwidth_trace, "risk": risk, "memory_budget": memory_budget,
        "accuracy_data": accuracy_data, "min_accuracy": min_accuracy, "result": result_mode,
        "max_mean_increase": max_mean_increase, "input_shape": input_shape or None,
        "settings": {"population": population, "generations": generations} if solver == "nsga2" else {},
    }, labels=SPLIT_OPTIONS)
    command = "dnnplan split " + " ".join(_argv(request, memory_limit, bandwidth, weights, memory_budget))
    with console_err.status("loading the model", spinner="dots") if not STATE.quiet else nullcontext() as status:
        outcome = plan_split(request, command=command, status=None if status is None else status.update)
    _write_outcome(outcome, request.granularity, out, front)


def _write_outcome(outcome: Any, granularity: str, out: Path, front: Path | None) -> None:
    """Write the plan (and the front CSV), then print the table and notes unless quiet."""
    from ..fileio import atomic_write_text
    from ..plan.io import write_plan

    plan, result, costs = outcome.plan, outcome.result, outcome.problem.costs
    front_text = _front_csv(result, costs.layer_names) if front is not None else None
    write_plan(plan, out)
    if front_text is not None:
        atomic_write_text(front, front_text)
    if not STATE.quiet:
        _print_outcome(plan, result, costs, granularity)
        console.print(f"wrote {out}" + (f" and {front}" if front is not None else ""), highlight=False)


def _print_outcome(plan: Any, result: Any, costs: Any, granularity: str) -> None:
    """The table of the choice and the baselines, then the warnings and notes under it."""
    _summary(result, costs.n_layers, f"{costs.model} on {costs.device} over {costs.network} "
                                     f"to {costs.server} ({granularity}, {costs.cost_model})")
    if (line := _download_note(result.best, costs)) is not None:
        console.print(f"[yellow]{line}[/]", highlight=False)
    _notes(plan, costs.device)


def _download_note(best: Any, costs: Any) -> str | None:
    """A warning when downloading what the server sends back is most of the chosen split's latency."""
    down, latency = best.metrics["download_s"], best.objectives["latency_s"]
    if not down > 0.5 * latency:
        return None
    what = "the 100 best detections" if costs.result == "topk" else "the network's raw outputs"
    return (f"warning: {down / latency:.0%} of the chosen split's latency is downloading {what} "
            f"({costs.download_bytes / 1e6:.2f} MB per frame, {down * 1e3:.0f} ms over {costs.network})")


def _notes(plan: Any, device: str) -> None:
    """Lines under the table: baselines dominating the choice, accuracy, thermal simulation."""
    from ..workflow.advice import plan_warnings
    from ..workflow.robust import trace_summary

    for line in plan_warnings(plan):
        console.print(f"[yellow]{line}[/]", highlight=False)
    pr = plan.predicted
    if (line := trace_summary(plan)) is not None:
        console.print(line, highlight=False)
    if "accuracy" in pr.extra:
        console.print(f"accuracy of the deployed configuration {pr.extra['accuracy']:.2%} "
                      f"(FP32 model {pr.extra['accuracy_fp32']:.2%})", highlight=False)
    if pr.peak_temp_c is not None:
        ttt = "never" if pr.time_to_throttle_s is None else f"{pr.time_to_throttle_s:.0f} s"
        console.print(f"simulated {pr.extra.get('thermal_horizon_s', 600):.0f} s on {device}: first "
                      f"throttle {ttt}, sustained {pr.sustained_fps:.2f} fps, peak die {pr.peak_temp_c:.1f} °C",
                      highlight=False)
    else:
        from ..workflow.simulate import no_thermal_note

        console.print(f"note: {no_thermal_note(device)}", highlight=False)


def _argv(request: Any, memory_limit: str | None, bandwidth: str | None, weights: str | None,
          memory_budget: str | None = None) -> list[str]:
    """The command line that reproduces ``request`` (the plan's provenance)."""
    r = request
    argv = [r.model, "--device", r.device, "--network", r.network, "--server", r.server, "--solver", r.solver,
            "--granularity", r.granularity, "--dtype", r.dtype, "--wire", ",".join(r.wire_dtypes),
            "--cost-model", r.cost_model, "--topsis", r.topsis, "--seed", str(r.seed)]
    if r.thermal_objectives:
        argv += ["--objectives", ",".join(r.objectives)]
    if r.bandwidth_trace is not None:
        argv += ["--bandwidth-trace", r.bandwidth_trace, "--risk", r.risk or "cvar95"]
    if r.max_mean_increase is not None:
        argv += ["--max-mean-increase", f"{r.max_mean_increase:g}"]
    if r.accuracy_data is not None:
        argv += ["--accuracy-data", r.accuracy_data]
    if r.min_accuracy is not None:
        argv += ["--min-accuracy", f"{r.min_accuracy:g}"]
    if r.result != "auto":
        argv += ["--result", r.result]
    for flag, value in (("--memory-limit", memory_limit), ("--bandwidth", bandwidth), ("--weights", weights),
                        ("--memory-budget", memory_budget)):
        if value is not None:
            argv += [flag, value]
    if r.solver == "nsga2":
        argv += ["--population", str(r.settings["population"]), "--generations", str(r.settings["generations"])]
    argv += ["--runtime", r.runtime] if r.runtime else []
    for shape in format_input_shapes(r.input_shape or {}):
        argv += ["--input-shape", shape]
    return argv + (["--interior-only"] if r.interior_only else [])


def _run_job(ref: str) -> None:
    from ..search.split_job import SplitJob
    from ..shipped import resolve
    from ..workflow import run_split_job
    from ..yamlio import load_model_yaml

    job = load_model_yaml(resolve(ref, "jobs", "split job"), SplitJob)
    rows = run_split_job(job, progress=None if STATE.quiet else
                         (lambda msg: console_err.print(f"[dim]{msg}[/]", highlight=False)))
    print_comparison(rows, f"{job.name}: split chosen ({job.solver} + TOPSIS {job.topsis}) vs baselines")


def print_comparison(rows: list[dict[str, Any]], title: str) -> None:
    """Print split-search rows (``model, device, seed, solver`` plus a
    :func:`optimizer.search.split_job.comparison_row`) as one table against the baselines."""
    from rich import box
    from rich.table import Table

    from ..search.split_baselines import BASELINES

    seeds = len({r["seed"] for r in rows}) > 1
    solvers = sorted({r["solver"] for r in rows})
    chosen = solvers[0] if len(solvers) == 1 else "chosen"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ["model", "device", *(["seed"] if seeds else []), *(["solver"] if chosen == "chosen" else []), "L",
            chosen, "head / wire", *[b.upper() for b in BASELINES], "lat ms", "E mJ"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("model", "device", "solver", "head / wire") else "right",
                         no_wrap=True)
    for r in rows:
        ch = r["chosen"]
        table.add_row(r["model"], r["device"], *([str(r["seed"])] if seeds else []),
                      *([r["solver"]] if chosen == "chosen" else []), str(r["layers"]),
                      str(ch["split"]), f"{ch['processor']} {ch['clock_hz'] / 1e9:.2f}G {ch['wire_dtype']}",
                      *[str(r[b]["decision"]["split"]) for b in BASELINES],
                      f"{r['objectives']['latency_s'] * 1e3:.1f}", f"{r['objectives']['energy_j'] * 1e3:.1f}")
    print_wide(table)
