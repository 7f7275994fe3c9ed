"""``dnnplan map``: pipeline mapping of a network onto a phone's processors (Park & Ha)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from . import app
from .bounds import bounded
from .common import STATE, console, console_err, input_shape_option, output_file, state_file

#: option names of the request fields, for one-line errors in the user's words
MAP_OPTIONS = {"dtype": "--dtype", "granularity": "--granularity", "solver": "--solver", "objectives": "--objectives",
               "stages": "--stages", "processors": "--processors", "memory_limit": "--memory-limit",
               "cpu_cores": "--cpu-cores", "pre_s": "--pre-ms", "post_s": "--post-ms", "resume": "--resume",
               "measure": "--measure", "measure_cmd": "--measure-cmd", "measure_repeats": "--measure-repeats",
               "measure_frames": "--measure-frames", "measure_cache": "--measure-cache",
               "measure_cache_mb": "--measure-cache-mb", "variant": "--variant", "input_shape": "--input-shape"}


@app.command("map")
def map_cmd(
    model: str = typer.Argument(..., help="Zoo name or model file (.keras, .onnx, .tflite, SavedModel dir)."),
    device: str = typer.Option(..., "--device", "-d", help="Device name (search_spaces/devices) or YAML path."),
    out: Path = typer.Option(..., "--out", "-o", callback=output_file, help="Plan file to write (schema v1)."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="int8, fp16 or fp32 (default int8; fp32 with "
                                                              "--measure host)."),
    solver: str = typer.Option("ga", "--solver", help="ga, exact, single or flops."),
    objectives: str = typer.Option("throughput", "--objectives",
                                   help="throughput (alias fps), latency, energy, memory, sustained-fps, "
                                        "peak-temp, time-to-throttle; two comma-separated for a Pareto front "
                                        "(e.g. throughput,peak-temp)."),
    stages: Optional[int] = typer.Option(None, "--stages", help="Most inference stages (each on its own processor; "
                                         "default: 3, or fewer on a device with fewer processors)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the GA (same seed -> same plan)."),
    granularity: str = typer.Option("kernel", "--granularity", "-g", help="kernel (each operator with the "
                                    "batch-norms, activations and reshapes a runtime fuses into it: stages "
                                    "end only where a runtime can end a partition), op or block."),
    processors: Optional[str] = typer.Option(None, "--processors",
                                             help="Comma-separated processors stages may use (default: all)."),
    memory_limit: Optional[str] = typer.Option(None, "--memory-limit", help="Per-processor memory cap, e.g. '2 GB'."),
    cpu_cores: Optional[int] = typer.Option(None, "--cpu-cores", help="CPU cores shared by CPU stages (4 threads) "
                                            "and pre/post-processing (2 threads each); default: the device's "
                                            "cpu_cores, else 8."),
    pre_ms: float | None = typer.Option(None, "--pre-ms", help="Pre-processing time per frame (CPU, 2 threads), ms "
                                        "(default: a detector's modeled resize/normalise, else 0)."),
    post_ms: float | None = typer.Option(None, "--post-ms", help="Post-processing time per frame (CPU, 2 threads), ms "
                                         "(default: a detector's modeled decode/NMS, else 0)."),
    generations: int = typer.Option(300, "--generations", callback=bounded("map", "--generations"), help="GA generation cap (paper: 200-300)."),
    population: int = typer.Option(32, "--population", callback=bounded("map", "--population"), help="GA population (paper: 32)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", callback=state_file,
                                              help="GA checkpoint file (default: OUT.ckpt, removed on success)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the GA from its checkpoint."),
    measure_cmd: Optional[str] = typer.Option(None, "--measure-cmd",
                                              help="Measure each candidate's fps with this command "
                                                   "(optimizer/measure/PROTOCOL.md); GA fitness = measured fps."),
    measure: Optional[str] = typer.Option(None, "--measure",
                                          help="'host': measure each candidate by running it on this "
                                               "host's cores (--device host_cores); GA fitness = measured fps."),
    measure_repeats: Optional[int] = typer.Option(None, "--measure-repeats",
                                                  help="Timed runs per measurement, median kept (default 10 "
                                                       "with --measure-cmd, 2 warm-up runs; 5 with --measure host)."),
    measure_frames: int = typer.Option(100, "--measure-frames", callback=bounded("map", "--measure-frames"), help="Frames per timed run (--measure host)."),
    variant: Optional[list[str]] = typer.Option(None, "--variant",
                                                help="Zoo builder argument KEY=VALUE (repeatable), e.g. input_size=96."),
    measure_cache: Optional[Path] = typer.Option(None, "--measure-cache", callback=state_file,
                                                 help="JSON-lines cache of measurements (default: OUT.measured.jsonl)."),
    measure_cache_mb: float = typer.Option(2048, "--measure-cache-mb",
                                           help="Size limit of the converted-stage cache of --measure host "
                                                "(results/cache/host_stages); least recently used entries "
                                                "of earlier runs are evicted."),
    input_shape: Optional[list[str]] = input_shape_option(),
) -> None:
    """Map MODEL onto DEVICE as a pipeline of processor stages and write the plan."""
    from ..plan.io import write_plan
    from ..workflow import PipelineRequest, parse_request, prepare_pipeline
    from .common import parse_variant

    ckpt = checkpoint if checkpoint is not None else out.with_name(out.name + ".ckpt")
    settings = _solver_settings(solver, generations, population, ckpt, resume)
    measuring = measure_cmd is not None or measure is not None
    cache = measure_cache if measure_cache is not None else out.with_name(out.name + ".measured.jsonl")
    request = parse_request(PipelineRequest, {
        "model": model, "device": device, "dtype": dtype, "granularity": granularity, "solver": solver,
        "objectives": objectives, "stages": stages, "seed": seed, "processors": processors,
        "memory_limit": memory_limit, "cpu_cores": cpu_cores, "pre_s": _seconds(pre_ms), "post_s": _seconds(post_ms),
        "settings": settings, "variant": parse_variant(variant), "measure": measure, "measure_cmd": measure_cmd,
        "measure_repeats": measure_repeats, "measure_frames": measure_frames,
        "measure_cache": str(cache) if measuring else None, "measure_cache_mb": measure_cache_mb,
        "input_shape": input_shape or None}, labels=MAP_OPTIONS)
    search = prepare_pipeline(request, host_measurer=_host_measurer(request.measure))
    command = "dnnplan " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv else None
    outcome = _run(search, generations, command, ckpt)
    result, plan = outcome.result, outcome.plan
    write_plan(plan, out)
    if solver == "ga" and checkpoint is None:
        ckpt.unlink(missing_ok=True)
    _summary(search.problem, result, plan, out)


def _solver_settings(solver: str, generations: int, population: int, ckpt: Path, resume: bool) -> dict:
    """The solver's settings: the GA's caps and checkpoint; other solvers only resume."""
    if solver == "ga":
        return {"max_generations": generations, "population": population, "checkpoint": ckpt, "resume": resume}
    return {"resume": True} if resume else {}


def _host_measurer(measure: str | None) -> Any:
    """The runner that measures GA candidates on this host's cores (``--measure host``), else None."""
    if measure != "host":
        return None
    from ..runtime.host_evaluator import HostPipelineMeasurer

    return HostPipelineMeasurer


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1e3


def _run(search, generations: int, command: str | None, ckpt: Path):
    """Solve; an interrupted GA names the generations done and its checkpoint (one line)."""
    done = {"gen": 0}
    try:
        return _solve(search, generations, command, done)
    except KeyboardInterrupt:
        from ..errors import Interrupted

        if search.request.solver != "ga":
            raise
        if ckpt.exists():
            raise Interrupted(f"{done['gen']} generations done, {generations - done['gen']} remaining; checkpoint "
                              f"kept at {ckpt}; re-run the same command with --resume to resume") from None
        raise Interrupted(f"0 of {generations} generations done, before the first checkpoint ({ckpt}); re-run the "
                          "same command to start again") from None


def _solve(search, generations: int, command: str | None, done: dict[str, int]):
    """Solve with a Rich progress bar of GA generations (none with --quiet or another solver);
    ``done["gen"]`` follows the generations finished."""
    if search.request.solver != "ga":
        return search.run(command=command)
    if STATE.quiet:
        return search.run(progress=lambda gen, best, evals: done.update(gen=gen), command=command)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    unit = {"throughput": "fps", "latency": "s", "energy": "J", "memory": "B", "sustained_fps": "fps",
            "peak_temp_c": "°C", "time_to_throttle_s": "s"}.get(search.problem.objective_names[0], "")
    with Progress(TextColumn("[bold]GA[/] gen"), MofNCompleteColumn(), BarColumn(),
                  TextColumn("best {task.fields[best]}  evals {task.fields[evals]}"),
                  TimeElapsedColumn(), console=console_err, transient=True) as bar:
        task = bar.add_task("ga", total=generations, best="-", evals=0)

        def progress(gen: int, best: float, evals: int) -> None:
            done["gen"] = gen
            bar.update(task, completed=gen, best=f"{best:.4g} {unit}", evals=evals)

        return search.run(progress=progress, command=command)


def _summary(problem, result, plan, out: Path) -> None:
    from rich.table import Table

    best = result.best
    table = Table(title=f"{plan.model.name} on {plan.device} ({plan.model.dtype}, {plan.model.layers} "
                        f"{plan.model.granularity} layers) — solver {result.solver}")
    for col in ("stage", "processor", "layers", "time ms"):
        table.add_column(col, justify="right" if col in ("layers", "time ms") else "left")
    bottleneck = best.metrics["bottleneck_s"]

    def row(name: str, proc: str, layers: str, t: float | None) -> None:
        mark = " ◀ bottleneck" if t is not None and abs(t - bottleneck) <= 1e-12 * max(1.0, bottleneck) else ""
        table.add_row(name, proc, layers, ("-" if t is None else f"{t * 1e3:.3f}") + mark)

    row("pre", plan.preprocess.processor, "", best.metrics["pre_s"])
    for k, st in enumerate(plan.stages):
        row(f"{k + 1}", st.processor, f"{st.first_layer}-{st.last_layer} ({st.last_layer - st.first_layer + 1})",
            st.predicted_time_s)
    row("post", plan.postprocess.processor, "", best.metrics["post_s"])
    console.print(table)
    obj = dict(best.objectives)
    measured = result.settings.get("evaluator") == "measured"
    if measured:
        console.print(f"measured: {obj['throughput_fps']:.2f} fps ({result.settings.get('measurements', 0)} "
                      "new measurements this run); modeled figures below", highlight=False)
        obj["throughput_fps"] = 1.0 / bottleneck if bottleneck > 0 else float("inf")
    console.print(f"predicted: {obj['throughput_fps']:.2f} fps, latency {obj['latency_s'] * 1e3:.2f} ms, "
                  f"energy {obj['energy_j'] * 1e3:.2f} mJ/frame, memory {obj['memory_bytes'] / 1e6:.1f} MB "
                  f"(largest stage)", highlight=False)
    pr = plan.predicted
    if pr.peak_temp_c is not None:
        ttt = "never" if pr.time_to_throttle_s is None else f"{pr.time_to_throttle_s:.0f} s"
        console.print(f"simulated {pr.extra.get('thermal_horizon_s', 600):.0f} s at "
                      f"{pr.extra.get('thermal_ambient_c', 25):g} °C: first throttle {ttt}, sustained "
                      f"{pr.sustained_fps:.2f} fps, peak die {pr.peak_temp_c:.1f} °C "
                      f"(dnnplan simulate {out} for details)", highlight=False)
    else:
        from ..workflow.simulate import no_thermal_note

        console.print(f"note: {no_thermal_note(plan.device)}", highlight=False)
    singles = {k.split(":", 1)[1]: c for k, c in result.baselines.items() if k.startswith("single:")}
    if singles:
        best_single = max(singles.items(), key=lambda kv: kv[1].objectives["throughput_fps"])
        parts = ", ".join(f"{p} {c.objectives['throughput_fps']:.2f}" for p, c in singles.items())
        console.print(f"single-processor fps: {parts}; pipeline / best single ({best_single[0]}) = "
                      f"x{obj['throughput_fps'] / best_single[1].objectives['throughput_fps']:.2f}", highlight=False)
    if "flops" in result.baselines:
        console.print(f"profiling-based (FLOPs) mapping: {result.baselines['flops'].objectives['throughput_fps']:.2f} fps",
                      highlight=False)
    if result.front:
        console.print(f"Pareto front: {len(result.front)} mappings (see search.decision.front in the plan)")
    console.print(f"evaluations {result.evaluations} of {result.space_size:.0f} mappings "
                  f"({result.explored_fraction:.3%} explored), {result.wall_time_s:.2f} s; plan written to {out}",
                  highlight=False)
