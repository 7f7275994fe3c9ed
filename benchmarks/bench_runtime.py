"""Measured host FPS and latency of exported plans vs the plan's prediction.

Exports a few MobileNetV2 plans (INT8, 160 px) — one stage on both cores, a two-stage
pipeline cut near the MAC midpoint inside a residual block (one core per stage), and a split
over loopback at 10 Mbps — runs each with the reference runtime, and prints measured FPS,
latency percentiles and per-stage busy time. Where ``optimizer.cost.build_cost_table`` and a
``host`` device (``search_spaces/devices/host.yaml``) exist, the prediction comes from the
analytic cost table (stage time = sum of layer latencies on the stage's processor, each one-core
group modeled as host.yaml's one-core ``cpu``; pipeline FPS = 1 / slowest stage; latency =
sum of stages; the 2-thread single stage is predicted as one core, so its ratio shows the
thread speed-up); otherwise only measured
figures are printed, and the script says so.

Run: ``.venv/bin/python benchmarks/bench_runtime.py [--frames N] [--size S]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.errors import DnnplanError  # noqa: E402
from optimizer.graph import load_graph  # noqa: E402
from optimizer.plan.export import export_plan  # noqa: E402
from optimizer.plan.manual_plan import plan_for_boundaries  # noqa: E402
from optimizer.runtime import run_plan  # noqa: E402


def residual_cut_near_half(graph) -> int:
    """A boundary near half the MACs where more than one tensor crosses (inside a block)."""
    cum = np.cumsum(graph.macs_array)
    half = cum[-1] / 2
    cands = [i for i in range(1, len(graph)) if len(graph.cut_tensors(i)) > 1
             and graph.layers[i - 1].op == "act"]
    return min(cands, key=lambda i: abs(cum[i - 1] - half))


def predict(plan, graph):
    """Fill ``plan.predicted`` and stage times from the host cost table; None if unavailable."""
    try:
        from optimizer.cost import build_cost_table
        from optimizer.hardware import load_device

        device = load_device("host")
        table = build_cost_table(graph, device, plan.model.dtype)
    except (DnnplanError, ImportError) as exc:
        return f"no prediction ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    names = [p.name for p in device.processors]
    if plan.kind != "pipeline":
        return "no prediction for split plans in this benchmark"
    times = []
    for st in plan.stages:
        # host.yaml models one core as processor 'cpu': every one-core group (cpu0, cpu1) is one
        proc = st.processor if st.processor in names else names[0]
        p = table.processor_index(proc)
        times.append(float(table.stage_latency(st.first_layer, st.last_layer + 1, p)))
        st.predicted_time_s = times[-1]
    plan.predicted.throughput_fps = 1.0 / max(times)
    plan.predicted.latency_s = sum(times)
    return "predicted from the analytic host cost table"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--size", type=int, default=160)
    ap.add_argument("--dtype", default="int8")
    args = ap.parse_args()
    variant = {"input_size": args.size}
    graph = load_graph("mobilenet_v2", "op", **variant)
    cut = residual_cut_near_half(graph)
    procs = ["cpu0", "cpu1"]  # one core each (runtime core groups: stage k on CPU k)
    plans = {
        "1 stage, 2 threads": plan_for_boundaries("mobilenet_v2", [], dtype=args.dtype, variant=variant,
                                                  processors=procs[:1], threads=2),
        f"2 stages cut at {cut}": plan_for_boundaries("mobilenet_v2", [cut], dtype=args.dtype, variant=variant,
                                                      processors=procs),
        f"split at {cut}, 10 Mbps": plan_for_boundaries("mobilenet_v2", [cut], kind="split", dtype=args.dtype,
                                                        variant=variant),
    }
    print(f"mobilenet_v2 {args.size}px {args.dtype}; cut {cut} crosses "
          f"{[t.name for t in graph.cut_tensors(cut)]}; {args.frames} frames per plan")
    with tempfile.TemporaryDirectory() as tmp:
        for label, plan in plans.items():
            note = predict(plan, graph)
            t0 = time.perf_counter()
            export_plan(plan, Path(tmp) / "art", samples=32)
            t_export = time.perf_counter() - t0
            rep = run_plan(plan, Path(tmp) / "art", frames=args.frames,
                           bandwidth_bps=10e6 if plan.kind == "split" else None)
            lat = rep.latency_s
            busy = ", ".join(f"{s.name} {s.mean_s * 1e3:.1f} ms ({s.utilization:.0%})" for s in rep.stages)
            ratio = f"{rep.fps_ratio:.2f}" if rep.fps_ratio else "-"
            pred = f"{rep.predicted_fps:.1f}" if rep.predicted_fps else "-"
            print(f"{label:>24}: {rep.throughput_fps:6.1f} FPS (predicted {pred}, measured/predicted {ratio}); "
                  f"latency p50 {lat['p50'] * 1e3:.1f} / p90 {lat['p90'] * 1e3:.1f} / p99 {lat['p99'] * 1e3:.1f} ms; "
                  f"busy per frame: {busy}; export {t_export:.0f} s; {note}")
            if rep.wire:
                paced = run_plan(plan, Path(tmp) / "art", frames=max(10, args.frames // 5),
                                 bandwidth_bps=10e6, input_fps=0.5 / max(s.mean_s for s in rep.stages))
                print(f"{'':>24}  paced at half the bottleneck rate: latency p50 "
                      f"{paced.latency_s['p50'] * 1e3:.1f} ms (no queueing)")
                w = rep.wire
                print(f"{'':>24}  wire {w['bytes_per_frame']:.0f} B/frame, upload p50 "
                      f"{w['upload_s_p50'] * 1e3:.1f} ms (ideal {w['bytes_per_frame'] * 8 / 10e6 * 1e3:.1f} ms), "
                      f"round trip p50 {w['round_trip_s_p50'] * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
