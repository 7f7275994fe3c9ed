"""``dnnplan profile``: per-layer table of a network (zoo name or model file)."""

from __future__ import annotations

from typing import Optional

import typer

from . import app
from .common import (
    STATE, console, console_err, human_count, input_shape_option, output_file, parse_input_shape_option, parse_variant, print_json
)


@app.command()
def profile(
    model: str = typer.Argument(..., help="Zoo name (e.g. mobilenet_v2) or a .keras/.onnx/.tflite file or SavedModel dir."),
    granularity: str = typer.Option("op", "--granularity", "-g", help="op (one layer per operator), kernel (each operator with the batch-norms, activations and reshapes a runtime fuses into it) or block (consecutive operators sharing a block label)."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="fp32, fp16 or int8 for byte counts [default: the model's weight dtype, else fp32]."),
    input_size: Optional[int] = typer.Option(None, "--input-size", help="Zoo networks only: input size (H=W, or sequence length)."),
    variant: Optional[list[str]] = typer.Option(None, "--variant", help="Zoo builder argument KEY=VALUE (repeatable), e.g. alpha=0.5 (mobilenet_v2's width multiplier)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON to stdout instead of a table."),
    out: Optional[str] = typer.Option(None, "--out", "-o", callback=output_file, help="Also write the JSON profile to this file (atomically)."),
    input_shape: Optional[list[str]] = input_shape_option(),
    delegate_report: bool = typer.Option(False, "--delegate-report", help=".tflite files: which operators LiteRT's XNNPACK delegate runs on this host, in how many partitions, and the measured time of every partition and of every operator left to the builtin kernels."),
    threads: int = typer.Option(2, "--threads", help="--delegate-report: LiteRT interpreter threads."),
    runs: int = typer.Option(20, "--runs", help="--delegate-report: timed runs per partition (median)."),
) -> None:
    """Per-layer op, output shape, MACs, params, output bytes and cut bytes, with totals."""
    from ..errors import ConfigError
    from ..graph import GRANULARITIES, dtype_bytes, load_graph

    if delegate_report:
        _delegate_report(model, threads, runs, as_json, out)
        return

    if granularity not in GRANULARITIES:
        raise ConfigError(f"--granularity {granularity!r} is not valid; expected {', '.join(GRANULARITIES)}")
    if dtype is not None:
        dtype_bytes(dtype)
    args = parse_variant(variant)
    if input_size is not None:
        args["input_size"] = input_size
    graph = load_graph(model, granularity, input_shapes=parse_input_shape_option(input_shape), **args)
    dt = dtype or graph.weight_dtype or "fp32"
    if out:
        from ..fileio import atomic_write_json

        atomic_write_json(out, graph.to_dict(dt))
    if as_json:
        print_json(graph.to_dict(dt))
        return
    _print_table(graph, dt)


def _delegate_report(model: str, threads: int, runs: int, as_json: bool, out: Optional[str]) -> None:
    from pathlib import Path

    from ..errors import ConfigError, InputFileError
    from ..quantize.delegation import time_segments

    path = Path(model)
    if path.suffix.lower() != ".tflite":
        raise ConfigError(f"--delegate-report reads a .tflite file (got {model!r}); quantize the model first "
                          "(dnnplan quantize MODEL --out M.tflite) or give its .tflite")
    if not path.is_file():
        raise InputFileError(f"{path}: no such file; give an existing .tflite model file")
    if threads < 1 or runs < 1:
        raise ConfigError(f"--threads and --runs must be >= 1 (got {threads}, {runs})")
    from ..graph.tflite_flatbuffer import read_model

    data = path.read_bytes()
    read_model(data, str(path))  # one-line error for a file that is not a TFLite flatbuffer
    timing = time_segments(data, threads, runs)
    d = timing.delegation
    doc = {"model": str(path), "delegate": d.delegate, "threads": threads, "runs": runs,
           "partitions": d.partitions, "ops_total": len(d.ops), "ops_outside": d.outside_counts(),
           "whole_ms": timing.whole_ms, "delegated_ms": timing.delegated_ms, "outside_ms": timing.outside_ms,
           "ops": [{"index": o.index, "op": o.op, "tensor": o.output, "partition": o.partition} for o in d.ops],
           "segments": [{"segment": s.label, "ops": list(s.ops), "op_counts": s.op_counts, "delegated": s.delegated,
                         "median_ms": s.median_ms} for s in timing.segments],
           "notes": timing.notes}
    if out:
        from ..fileio import atomic_write_json

        atomic_write_json(out, doc)
    if as_json:
        print_json(doc)
        return
    from rich.table import Table

    table = Table(title=f"{path.name} on this host: {d.partitions} {d.delegate} partition"
                        f"{'s' if d.partitions != 1 else ''}, {len(d.outside)} of {len(d.ops)} operators "
                        f"outside ({threads} threads)", header_style="bold")
    for col in ("segment", "ops", "operators", "median ms"):
        table.add_column(col, justify="right" if col in ("ops", "median ms") else "left")
    for s in timing.segments:
        table.add_row(s.label if s.delegated else f"[yellow]{s.label}[/] (builtin kernel)", str(len(s.ops)),
                      ", ".join(f"{k} x{v}" for k, v in s.op_counts.items()), f"{s.median_ms:.3f}")
    if not STATE.quiet:
        console.print(table)
    outside = ", ".join(f"{k} x{v}" for k, v in d.outside_counts().items()) or "none"
    console.print(f"[bold]whole model[/]: {timing.whole_ms:.2f} ms median; partitions {timing.delegated_ms:.2f} ms, "
                  f"builtin-kernel operators {timing.outside_ms:.2f} ms (each segment timed alone: one invoke "
                  f"each); outside {d.delegate}: {outside}", highlight=False)
    for note in timing.notes:
        console_err.print(f"[yellow]note:[/] {note}", highlight=False)


def _print_table(graph, dtype: str) -> None:
    from rich.table import Table

    from ..graph import dtype_bytes

    cut = graph.cut_bytes_array(dtype)
    table = Table(title=f"{graph.name} — {len(graph)} layers ({graph.granularity} view, {dtype})",
                  show_lines=False, header_style="bold")
    for col in ("#", "name", "op", "output shape", "MACs", "params", "out bytes", "cut bytes after"):
        table.add_column(col, justify="right" if col not in ("name", "op", "output shape") else "left")
    for layer in graph.layers:
        shape = " ".join("x".join(map(str, s)) for s in layer.output_shapes)
        table.add_row(str(layer.index), layer.name, layer.op, shape, human_count(layer.macs),
                      human_count(layer.params), human_count(layer.output_bytes(dtype)),
                      human_count(cut[layer.index + 1]))
    if not STATE.quiet:
        console.print(table)
    console.print(f"[bold]total[/]: {human_count(graph.total_macs)} MACs, "
                  f"{human_count(graph.total_params)} params, "
                  f"{human_count(graph.total_params * dtype_bytes(dtype))}B weights ({dtype}), "
                  f"input {human_count(cut[0])}B, output {human_count(cut[-1])}B")
