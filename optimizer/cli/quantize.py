"""``dnnplan quantize``: TFLite post-training quantization with a fidelity/size/latency report."""

from __future__ import annotations

from typing import Optional

import typer

from . import app
from .bounds import bounded
from .common import STATE, console, console_err, input_shape_option, output_file, parse_input_shape_option, print_json


@app.command()
def quantize(
    model: str = typer.Argument(..., help="Zoo name (e.g. mobilenet_v2), a .keras, float .tflite or .onnx file, or a SavedModel directory."),
    out: str = typer.Option(..., "--out", "-o", callback=output_file, help="Quantized .tflite to write (only on success)."),
    calib: str = typer.Option("synthetic", "--calib", help="Calibration data: image directory, .npz (one array per input), 'sample-images' (random crops of the photographs scikit-learn ships) or 'synthetic'."),
    samples: int = typer.Option(1000, "--samples", callback=bounded("quantize", "--samples"), help="Calibration samples drawn at random (Park & Ha use 1000)."),
    scheme: str = typer.Option("per-channel", "--scheme", help="per-channel (TFLite full-integer default), per-tensor, fp16 or dynamic."),
    io: Optional[str] = typer.Option(None, "--io", help="Model interface: int8 or float (default: int8 for integer schemes, else float)."),
    report: Optional[str] = typer.Option(None, "--report", callback=output_file, help="Also write the report as JSON to this file."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample draw and of zoo weight initialisation."),
    heldout: int = typer.Option(100, "--heldout", callback=bounded("quantize", "--heldout"), help="Held-out samples (not used for calibration) for fidelity."),
    threads: int = typer.Option(2, "--threads", help="LiteRT interpreter threads for the latency figures."),
    runs: int = typer.Option(30, "--runs", callback=bounded("quantize", "--runs"), help="Timed inference runs per model (after warm-up)."),
    warmup: int = typer.Option(5, "--warmup", callback=bounded("quantize", "--warmup"), help="Untimed warm-up runs per model."),
    allow_float_ops: bool = typer.Option(False, "--allow-float-ops", help="Integer schemes: keep operators the converter cannot quantize in float instead of failing."),
    no_latency: bool = typer.Option(False, "--no-latency", help="Skip the host latency measurement."),
    compact: bool = typer.Option(True, "--compact/--no-compact", help="Store identical flatbuffer vectors once (same model, smaller file)."),
    calib_workers: Optional[int] = typer.Option(None, "--calib-workers", help="Processes calibrating in parallel (default: one per 256 samples, at most one per CPU, as many as --memory-budget holds; output unchanged)."),
    memory_budget: str = typer.Option("4GB", "--memory-budget", help="Peak memory to plan calibration for (batch, processes, batch-norm passes), e.g. 4GB, 512MB; samples are streamed."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON to stdout instead of the summary."),
    mixed: str = typer.Option("off", "--mixed", help="off: full-integer (Edge TPU, Hexagon and other integer-only accelerators need it); auto: keep in float the operators outside the host's XNNPACK delegate whose float version makes the model faster, measured."),
    rewrite: bool = typer.Option(True, "--rewrite/--no-rewrite", help="Rewrite INT8 operators XNNPACK has no kernel for (hard-swish, clamps, nearest resize, ...) into ones it runs, so the model stays in few delegate partitions."),
    input_shape: Optional[list[str]] = input_shape_option(),
) -> None:
    """Quantize a model with TFLite PTQ (Park & Ha scheme by default) and report size, ops, fidelity, latency."""
    from ..quantize import quantize as run_quantize

    shapes = parse_input_shape_option(input_shape)

    if STATE.quiet or as_json:
        rep = run_quantize(model, out, calib=calib, samples=samples, scheme=scheme, io=io, seed=seed,
                           heldout=heldout, threads=threads, runs=runs, warmup=warmup,
                           allow_float_ops=allow_float_ops, measure_latency_=not no_latency,
                           compact=compact, calib_workers=calib_workers, memory_budget=memory_budget,
                           input_shapes=shapes, rewrite=rewrite, mixed=mixed)
    else:
        with console_err.status("quantizing") as status:
            rep = run_quantize(model, out, calib=calib, samples=samples, scheme=scheme, io=io,
                               seed=seed, heldout=heldout, threads=threads, runs=runs, warmup=warmup,
                               allow_float_ops=allow_float_ops, measure_latency_=not no_latency,
                               compact=compact, calib_workers=calib_workers, memory_budget=memory_budget,
                               progress=lambda msg: status.update(msg), input_shapes=shapes,
                               rewrite=rewrite, mixed=mixed)
    if report:
        rep.write_json(report)
    if as_json:
        print_json(rep.model_dump(mode="json"))
        return
    _print_summary(rep)


def _print_summary(rep) -> None:
    from rich.table import Table

    from .common import human_count

    for w in rep.warnings:
        console_err.print(f"[yellow]warning:[/] {w}", highlight=False)
    t = Table(title=f"{rep.model} → {rep.output} ({rep.scheme}, {rep.io} I/O)", header_style="bold",
              show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    s = rep.sizes
    shared = (f"; {human_count(s.converter_bytes)}B as converted, identical vectors then stored once"
              if s.compacted and s.converter_bytes else "")
    t.add_row("size", f"FP32 {human_count(s.fp32_bytes)}B → {human_count(s.quantized_bytes)}B "
                      f"(ratio {s.ratio:.3f}; {s.per_channel_tensors} per-channel tensors{shared})")
    c = rep.calibration
    how = (f"; batches of {c.batch} on {c.workers} process{'es' if c.workers != 1 else ''}"
           + (f", {c.threads} threads each" if (c.threads or 1) > 1 else "") if c.workers else "")
    if c.memory_budget_bytes and c.workers:
        how += f", planned for --memory-budget {human_count(c.memory_budget_bytes)}B"
    t.add_row("conversion", f"{rep.conversion_s:.1f} s, {c.samples_used} calibration samples "
                            f"from {c.source} (seed {c.seed}{how})")
    if rep.peak_rss_bytes:
        helper = (f"; largest calibrating helper {human_count(rep.helper_peak_rss_bytes)}B"
                  if rep.helper_peak_rss_bytes else "")
        during = f" during {rep.peak_stage}" if rep.peak_stage else ""
        budget = c.memory_budget_bytes
        over = (f" (over --memory-budget {human_count(budget)}B)" if budget and rep.peak_rss_bytes > budget
                else "")
        t.add_row("peak memory", f"{human_count(rep.peak_rss_bytes)}B resident{during}{over}{helper}")
    o = rep.ops
    floats = ", ".join(f"{k} x{v}" for k, v in _count(e.op for e in o.float_ops).items()) or "none"
    ios = ", ".join(f"{k} x{v}" for k, v in _count(e.op for e in o.conversion_ops).items()) or "none"
    n_io = len(o.io_conversion_ops)
    t.add_row("operators", f"{o.total} ({', '.join(f'{k} x{v}' for k, v in sorted(o.counts.items()))})")
    if rep.transposes is not None:
        t.add_row("TRANSPOSE ops", f"FP32 {rep.transposes.fp32} → {rep.scheme} {rep.transposes.quantized}")
    t.add_row("float compute ops", floats)
    t.add_row("QUANTIZE/DEQUANTIZE (float side)", f"{ios} ({n_io} at model I/O)")
    fallback = ", ".join(f"{k} x{v}" for k, v in o.cpu_fallback_counts.items()) or "none"
    t.add_row("CPU fallback (int-only accel.)", f"{fallback} in {o.cpu_segments} segment(s)")
    if rep.fidelity is not None:
        for f in rep.fidelity.outputs:
            sq = "identical" if f.sqnr_db is None else f"{f.sqnr_db:.1f} dB"
            top1 = "" if f.top1_agreement is None else f", top-1 agreement {100 * f.top1_agreement:.1f} %"
            t.add_row(f"fidelity {f.output}", f"SQNR {sq}, max |err| {f.max_abs_error:.4g}{top1} "
                                              f"({rep.fidelity.samples} held-out samples)")
    if rep.delegation is not None:
        d = rep.delegation
        t.add_row(f"{d.quantized.delegate} partitions ({d.threads} threads)",
                  f"FP32 {d.fp32.partitions}; {rep.scheme} as quantized {d.converted.partitions} → "
                  f"{d.quantized.partitions} after rewrites" + (" and mixed precision" if rep.mixed else ""))
        t.add_row(f"ops outside {d.quantized.delegate}",
                  f"FP32: {_counts(d.fp32.ops_outside)}; as quantized: {_counts(d.converted.ops_outside)}; "
                  f"final: {_counts(d.quantized.ops_outside)}")
        if d.rewrites:
            t.add_row("rewrites", _counts(d.rewrites))
    if rep.mixed is not None:
        m = rep.mixed
        trials = "; ".join(f"{tr.op} x{tr.ops}: {_ms(tr.current_ms)} → {_ms(tr.candidate_ms)}"
                           + (f", SQNR {tr.sqnr_db:.1f} dB" if tr.sqnr_db is not None else "")
                           + (" kept" if tr.kept else " not kept") for tr in m.trials) or "no candidates"
        t.add_row("mixed precision", f"float: {_counts(m.float_op_counts)}; {100 * m.int8_mac_share:.1f} % of "
                                     f"MACs in INT8; trials: {trials}")
    if rep.latency is not None:
        lat = rep.latency
        t.add_row(f"latency ({lat.threads} threads)",
                  f"FP32 median {lat.fp32.median_ms:.2f} ms (p90 {lat.fp32.p90_ms:.2f}) → "
                  f"{rep.scheme} {lat.quantized.median_ms:.2f} ms (p90 {lat.quantized.p90_ms:.2f}); "
                  f"speed-up x{lat.speedup:.2f} over {lat.fp32.runs} runs")
    console.print(t)
    if rep.summary:
        label = "[yellow]warning:[/]" if rep.summary_warns else "[bold]summary:[/]"
        console.print(f"{label} {rep.summary}", highlight=False)


def _counts(counts: dict) -> str:
    return ", ".join(f"{k} x{v}" for k, v in counts.items()) or "none"


def _ms(value) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def _count(items) -> dict[str, int]:
    from collections import Counter

    return dict(Counter(items))
