"""``dnnplan measure``: host measurements (onnxruntime per layer, LiteRT whole model) and the
external measurement protocol (``--measure-cmd``, see optimizer/measure/PROTOCOL.md)."""

from __future__ import annotations

from typing import Optional

import typer

from . import app
from .bounds import bounded
from .common import STATE, console, console_err, input_shape_option, output_file, parse_input_shape_option, print_json


@app.command()
def measure(
    models: Optional[list[str]] = typer.Argument(None, help="Zoo name(s) or .keras/.onnx/.tflite file(s); several only with --calibrate-host."),
    backend: str = typer.Option("ort", "--backend", "-b", help="ort (per-layer, onnxruntime profiler) or litert (whole model)."),
    threads: int = typer.Option(1, "--threads", help="Inference threads."),
    repeats: int = typer.Option(20, "--repeats", "-r", callback=bounded("measure", "--repeats"), help="Timed runs (median and spread over these)."),
    warmup: int = typer.Option(3, "--warmup", callback=bounded("measure", "--warmup"), help="Discarded warm-up runs."),
    out: Optional[str] = typer.Option(None, "--out", "-o", callback=output_file, help="Write the table (.csv/.json; litert: .json); with --calibrate-host the host.yaml."),
    refresh: bool = typer.Option(False, "--refresh", help="Measure again even if results/cache has the table."),
    calibrate_host: bool = typer.Option(False, "--calibrate-host", help="Fit the host CPU to the per-layer tables of MODELS and write --out (a host.yaml)."),
    measure_cmd: Optional[str] = typer.Option(None, "--measure-cmd", help="Measure through this command (JSON-lines protocol) instead of on this host."),
    measure_timeout: float = typer.Option(120.0, "--measure-timeout", help="Seconds to wait for each --measure-cmd reply."),
    measure_retries: int = typer.Option(1, "--measure-retries", help="Restarts of --measure-cmd after a hang, crash or garbage."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON to stdout."),
    input_shape: Optional[list[str]] = input_shape_option(),
    import_file: Optional[str] = typer.Option(None, "--import", help="Read a per-operator profile instead of measuring: TFLite benchmark_model --enable_op_profiling output or its --profiling_output_csv_file CSV, or an onnxruntime profiling JSON; needs --model."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="With --import: the zoo name or model file the profile was taken of."),
    device: Optional[str] = typer.Option(None, "--device", "-d", help="With --import: device whose processor model splits fused/delegate times and names the table's processor."),
    processor: Optional[str] = typer.Option(None, "--processor", "-p", help="With --import: the processor of --device that ran the profile (default: the device's processor of the profile's kind)."),
) -> None:
    """Measure MODEL on this host (or through --measure-cmd) and write its per-layer table; or
    with --import, turn a profile taken elsewhere (a phone) into that table."""
    from ..errors import ConfigError

    if import_file is not None:
        if models:
            raise ConfigError(f"--import reads a profile: give the model it profiled as --model, not as MODEL "
                              f"({models[0]!r})")
        _import(import_file, model, input_shape, device, processor, out, as_json)
        return
    for flag, value in (("--model", model), ("--device", device), ("--processor", processor)):
        if value is not None:
            raise ConfigError(f"{flag} is only used with --import FILE (measuring on this host takes MODEL)")
    if not models:
        raise ConfigError("give MODEL (a zoo name or model file) or --import FILE --model M")
    if backend not in ("ort", "litert"):
        raise ConfigError(f"--backend {backend!r} is not valid; expected ort or litert")
    if calibrate_host:
        _calibrate(models, out, threads, repeats, warmup, refresh, as_json)
        return
    if len(models) != 1:
        raise ConfigError(f"give one MODEL (got {len(models)}); several are only used with --calibrate-host")
    model = models[0]
    shapes = parse_input_shape_option(input_shape)
    if measure_cmd is not None:
        _external(model, measure_cmd, measure_timeout, measure_retries, threads, repeats, warmup, as_json, shapes)
    elif backend == "litert":
        _litert(model, threads, repeats, warmup, out, as_json, shapes)
    else:
        _ort(model, threads, repeats, warmup, out, refresh, as_json, shapes)


def _ort(model, threads, repeats, warmup, out, refresh, as_json, shapes=None) -> None:
    from ..cost.measured import write_measured_table
    from ..graph import load_graph
    from ..measure.host import measure_model

    if out is not None and not out.endswith((".csv", ".json")):
        from ..errors import ConfigError

        raise ConfigError(f"--out {out!r}: measured tables are .csv or .json files")
    graph = load_graph(model, input_shapes=shapes)
    with console_err.status(f"measuring {graph.name} with onnxruntime ({warmup}+{repeats} runs)",
                            spinner="dots") if not STATE.quiet else _null():
        table = measure_model(model, graph, threads=threads, repeats=repeats, warmup=warmup, refresh=refresh)
    if out:
        write_measured_table(table, out)
    summary = {k: table.meta.get(k) for k in ("model", "backend", "threads", "repeats", "warmup",
                                                "layer_sum_s", "whole_median_s", "whole_std_s",
                                                "executor_overhead_s", "unattributed_share")}
    summary["out"] = out
    if as_json:
        print_json(summary)
        return
    console.print(f"[bold]{graph.name}[/] on this host (onnxruntime, {threads} thread(s)): "
                  f"sum of layer medians {summary['layer_sum_s'] * 1e3:.2f} ms, whole-run median "
                  f"{summary['whole_median_s'] * 1e3:.2f} ms ± {summary['whole_std_s'] * 1e3:.2f}, "
                  f"unattributed {summary['unattributed_share'] * 100:.2f} % of node time"
                  + (f" → {out}" if out else ""))


def _litert(model, threads, repeats, warmup, out, as_json, shapes=None) -> None:
    from ..errors import ConfigError
    from ..fileio import atomic_write_json
    from ..graph import load_graph
    from ..measure.artifacts import export_artifact
    from ..measure.litert import time_litert

    if out is not None and not out.endswith(".json"):
        raise ConfigError(f"--out {out!r}: LiteRT gives whole-model timings only; write them to a .json file")
    graph = load_graph(model, input_shapes=shapes)
    path = export_artifact(model, graph, "tflite")
    r = time_litert(path, threads=threads, repeats=repeats, warmup=warmup)
    summary = {"model": graph.name, "backend": "litert", "artifact": str(path), **r.to_dict()}
    if out:
        atomic_write_json(out, summary)
    if as_json:
        print_json(summary)
        return
    console.print(f"[bold]{graph.name}[/] on this host (LiteRT, {threads} thread(s)): median "
                  f"{r.median_s * 1e3:.2f} ms, std {r.std_s * 1e3:.2f} ms, p10–p90 "
                  f"{r.p10_s * 1e3:.2f}–{r.p90_s * 1e3:.2f} ms")


def _external(model, cmd, timeout, retries, threads, repeats, warmup, as_json, shapes=None) -> None:
    from ..graph import load_graph
    from ..measure.artifacts import export_artifact
    from ..measure.protocol import ExternalMeasurer

    graph = load_graph(model, input_shapes=shapes)
    path = export_artifact(model, graph, "tflite") if not model.endswith(".onnx") else model
    assignment = {"kind": "pipeline", "stages": [{"processor": "cpu", "layers": [0, len(graph)], "threads": threads}]}
    with ExternalMeasurer(cmd, timeout_s=timeout, retries=retries) as m:
        metrics = m.measure(path, assignment, repeats=repeats, warmup=warmup)
    if as_json:
        print_json({"model": graph.name, "command": cmd, "metrics": metrics})
        return
    console.print(f"[bold]{graph.name}[/] via {cmd!r}: " + ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                                                              for k, v in metrics.items()))


def _import(path, model, input_shape, device, processor, out, as_json) -> None:
    from ..cost.measured import write_measured_table
    from ..errors import ConfigError
    from ..graph import load_graph
    from ..measure.profile_import import import_profile

    if model is None:
        raise ConfigError(f"--import {path}: give --model M, the zoo name or model file the profile was taken of")
    if processor is not None and device is None:
        raise ConfigError(f"--processor {processor}: give --device D too (the device whose processor ran the profile)")
    if out is not None and not out.endswith((".csv", ".json")):
        raise ConfigError(f"--out {out!r}: measured tables are .csv or .json files")
    dev = None
    if device is not None:
        from ..hardware.loader import load_device

        dev = load_device(device)
    graph = load_graph(model, input_shapes=parse_input_shape_option(input_shape))
    table, match = import_profile(path, graph, dev, processor)
    if out:
        write_measured_table(table, out)
    meta = table.meta
    if as_json:
        print_json({**{k: meta[k] for k in ("model", "profile", "profile_format", "processor", "match_mode", "rows",
                                            "rows_matched", "unmatched_rows", "unmatched_layers", "profile_total_s",
                                            "layer_sum_s", "family_totals_s")}, "out": out})
        return
    covered = int(match.covered.sum())
    console.print(f"[bold]{graph.name}[/] ← {path} ({meta['profile_format']}, {meta['rows']} rows, "
                  f"processor {meta['processor']}): {meta['rows_matched']} rows matched by {match.mode} to "
                  f"{covered} of {len(graph)} layers; {meta['unmatched_rows']} rows and "
                  f"{len(meta['unmatched_layers'])} layers unmatched" + (f" → {out}" if out else ""), highlight=False)
    total = sum(meta["family_totals_s"].values()) or 1.0
    for fam, sec in sorted(meta["family_totals_s"].items(), key=lambda kv: -kv[1]):
        console.print(f"  {fam:8s} {sec * 1e3:9.3f} ms  {sec / total:6.1%}", highlight=False)


def _calibrate(models, out, threads, repeats, warmup, refresh, as_json) -> None:
    import math

    from ..errors import ConfigError
    from ..measure.host import calibrate_host

    if not out or not out.endswith((".yaml", ".yml")):
        raise ConfigError("--calibrate-host needs --out PATH.yaml (e.g. mine/devices/host.yaml, then "
                          "'dnnplan --search-spaces mine ...' uses it as device 'host')")
    fit = calibrate_host(models, out, threads=threads, repeats=repeats, warmup=warmup, refresh=refresh)
    if as_json:
        print_json({"out": out, **fit})
        return
    console.print(f"host calibrated from {', '.join(models)} → {out}")
    for name, ratio in fit["model_over_measured"].items():
        worst = max((r for r in fit["families"] if r["model"] == name), default=None,
                    key=lambda r: abs(math.log(r["after_over_profile"])))
        console.print(f"  {name}: model/measured {ratio:.3f}" + (
            f" (kernel family furthest off: {worst['family']} ×{worst['after_over_profile']:.3f})" if worst else ""),
            highlight=False)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
