"""Benchmark: TFLite post-training quantization of a zoo network (default mobilenet_v2 at 224).

Prints, from one run: FP32 and quantized file sizes and their ratio (as written, and as the
TFLite converter emitted it before identical vectors were shared), conversion time with the
calibration batch and process count, SQNR
against FP32 on held-out inputs, and LiteRT host latency FP32 vs quantized (median, p90,
speed-up) for every scheme (per-channel, per-tensor, fp16, dynamic).

    .venv/bin/python benchmarks/bench_quantize.py [--model mobilenet_v2] [--samples 1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--samples", type=int, default=1000, help="calibration samples (Park & Ha: 1000)")
    ap.add_argument("--heldout", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schemes", default="per-channel,per-tensor,fp16,dynamic")
    args = ap.parse_args()

    from optimizer.quantize import prepare, quantize_prepared
    from optimizer.quantize.convert import temp_workdir

    print(f"model {args.model}, calibration: synthetic, {args.samples} samples, seed {args.seed}; "
          f"host {os.cpu_count()} CPUs, LiteRT {args.threads} threads, {args.runs} runs")
    rows = []
    with temp_workdir() as tmp, tempfile.TemporaryDirectory() as outdir:
        t0 = time.perf_counter()
        prep = prepare(args.model, Path(tmp), calib="synthetic", samples=args.samples,
                       heldout=args.heldout, seed=args.seed)
        print(f"prepare (build, BN statistics, export, FP32 convert): {time.perf_counter() - t0:.1f} s; "
              f"FP32 .tflite {prep.fp32.__len__() / 1e6:.2f} MB")
        for scheme in args.schemes.split(","):
            rep = quantize_prepared(prep, Path(outdir) / f"{scheme}.tflite", scheme=scheme,
                                    threads=args.threads, runs=args.runs)
            out = rep.fidelity.outputs[0]
            cal = rep.calibration
            rows.append((scheme, rep.sizes.quantized_bytes / 1e6, rep.sizes.ratio,
                         rep.sizes.converter_bytes / rep.sizes.fp32_bytes,
                         f"{cal.batch}x{cal.workers}" if cal.workers else "-", rep.conversion_s,
                         out.sqnr_db, out.top1_agreement, rep.latency.fp32.median_ms,
                         rep.latency.quantized.median_ms, rep.latency.quantized.p90_ms,
                         rep.latency.speedup, len(rep.ops.float_ops)))
    head = (f"{'scheme':<12}{'MB':>7}{'ratio':>8}{'as conv':>9}{'batch x proc':>13}{'conv s':>8}{'SQNR dB':>9}{'top1 agr':>10}"
            f"{'FP32 ms':>9}{'Q ms':>8}{'Q p90':>8}{'speedup':>9}{'float ops':>11}")
    print(head)
    for s, mb, ratio, raw, how, conv, sq, top1, f_ms, q_ms, q90, sp, nf in rows:
        top = "-" if top1 is None else f"{100 * top1:.0f} %"
        sqs = "inf" if sq is None else f"{sq:.2f}"
        print(f"{s:<12}{mb:>7.2f}{ratio:>8.3f}{raw:>9.3f}{how:>13}{conv:>8.1f}{sqs:>9}{top:>10}{f_ms:>9.2f}{q_ms:>8.2f}"
              f"{q90:>8.2f}{sp:>8.2f}x{nf:>11}")


if __name__ == "__main__":
    main()
