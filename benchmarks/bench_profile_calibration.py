"""Calibration from per-operator profiles: ``calibrate --from-profile`` on this host.

1. Exports the zoo networks through the project's ONNX path and profiles each with onnxruntime
   (``SessionOptions.enable_profiling``, one intra-op thread; ``results/profiles/<model>_ort.json``).
2. Fits device ``host``'s ``cpu`` to the profile(s) of ``--fit`` (default mobilenet_v2), exactly as
   ``dnnplan calibrate --device host --from-profile results/profiles/mobilenet_v2_ort.json
   --model mobilenet_v2 --out results/profiles/host_fit.yaml`` does, and prints per op family the
   profiled, modeled-before and modeled-after ms (acceptance: every family within x1.25).
3. For every other network (``--holdout``, default resnet50 mobilenet_v1), not used in the fit:
   profiled and modeled total before and after (acceptance: smaller error after).
4. ``measure --import`` of each real public benchmark_model log in ``tests/data/profiles``
   against the zoo model it profiled or a stand-in: what matched.

Run: ``.venv/bin/python benchmarks/bench_profile_calibration.py [--runs 12] [--fit mobilenet_v2 ...]
[--holdout resnet50 mobilenet_v1]``. Times are of a shared 2-core machine (other processes
inflate them; the per-node medians over the runs damp that).
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = {  # public log -> the zoo model it profiled, or the stand-in
    "tflite_gpu_opencl_mobilenet_v3_issue44369.txt": ("mobilenet_v2", "pixel6", "stand-in for MobileNetV3"),
    "tflite_cpu_mobilenet_v1_quant_issue61950.txt": ("mobilenet_v1", None, "the model it profiled (INT8 there)"),
    "tflite_cpu_mobilenet_v2_pixel_issue23131_fragment.txt": ("mobilenet_v2", None, "the model it profiled (a fragment)"),
    "tflite_nnapi_xnnpack_mixed_issue57758.txt": ("mobilenet_v2", None, "a user's model; no zoo match expected"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--fit", nargs="+", default=["mobilenet_v2"])
    ap.add_argument("--holdout", nargs="*", default=["resnet50", "mobilenet_v1"])
    args = ap.parse_args()

    from optimizer.errors import DnnplanError
    from optimizer.graph import load_graph
    from optimizer.hardware.loader import load_device
    from optimizer.measure.artifacts import export_artifact
    from optimizer.measure.ort_profile import write_profile
    from optimizer.measure.profile_fit import family_rows, fit_processor_to_profiles
    from optimizer.measure.profile_import import import_profile

    warnings.simplefilter("ignore")  # unmatched-layer lines: counted below instead
    out = ROOT / "results" / "profiles"
    out.mkdir(parents=True, exist_ok=True)
    host = load_device("host")
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    matches = {}
    for name in [*args.fit, *args.holdout]:
        g = load_graph(name)
        t0 = time.perf_counter()
        prof = write_profile(export_artifact(name, g, "onnx"), out / f"{name}_ort.json", runs=args.runs)
        _, matches[name] = import_profile(prof, g, host, "cpu")
        m = matches[name]
        print(f"{name}: profiled {args.runs} runs in {time.perf_counter() - t0:.1f} s; {m.rows_matched} of "
              f"{len(m.profile.records)} nodes matched by {m.mode}, {len(m.unmatched_layers)} layers without a node "
              f"(fused away), operator sum {m.profile.total_s * 1e3:.2f} ms, whole run {m.profile.whole_s * 1e3:.2f} ms, "
              f"layout ops the model does not cost {m.unmodeled_s.sum() * 1e3:.3f} ms (left out of the fit)")
    t0 = time.perf_counter()
    fit = fit_processor_to_profiles(host, "cpu", [matches[n] for n in args.fit])
    print(f"\nfit to {' + '.join(args.fit)} in {time.perf_counter() - t0:.1f} s: efficiency "
          + ", ".join(f"{k} {v:.4g}" for k, v in fit.efficiency.items())
          + f"; layer_overhead {fit.layer_overhead_s * 1e6:.3g} us; memory_bandwidth "
          f"{fit.memory_bandwidth_bytes_per_s / 1e9:.3g} GB/s; invoke_overhead {(fit.invoke_overhead_s or 0) * 1e6:.3g} us")
    print(f"{'network':14s} {'family':8s} {'profile ms':>10s} {'before ms':>10s} {'after ms':>9s} {'before/p':>8s} {'after/p':>8s}")
    worst = 0.0
    for r in fit.rows:
        worst = max(worst, abs(math.log(r.ratio_after)))
        print(f"{r.model:14s} {r.family:8s} {r.profile_s * 1e3:10.3f} {r.before_s * 1e3:10.3f} {r.after_s * 1e3:9.3f} "
              f"{r.ratio_before:8.3f} {r.ratio_after:8.3f}")
    print(f"worst family after the fit: x{math.exp(worst):.3f} (acceptance <= x1.25: {'PASS' if worst <= math.log(1.25) else 'FAIL'})")
    print("\nnetworks not used in the fit (sum over the timed layers):")
    for name in args.holdout:
        rows = family_rows(host, fit.device, "cpu", matches[name], "fp32")
        p, b, a = (sum(getattr(r, k) for r in rows) for k in ("profile_s", "before_s", "after_s"))
        better = abs(math.log(a / p)) < abs(math.log(b / p))
        print(f"{name:14s} profile {p * 1e3:8.2f} ms  before {b * 1e3:8.2f} ms (x{b / p:.3f})  after {a * 1e3:8.2f} ms "
              f"(x{a / p:.3f})  {'improved' if better else 'NOT improved'}; per family "
              + ", ".join(f"{r.family} {r.ratio_before:.2f}->{r.ratio_after:.2f}" for r in rows))
    print("\nmeasure --import of the public benchmark_model logs:")
    for log, (model, device, why) in LOGS.items():
        path = ROOT / "tests" / "data" / "profiles" / log
        dev = load_device(device) if device else None
        try:
            table, m = import_profile(path, load_graph(model), dev)
        except DnnplanError as exc:
            print(f"  {log}: {model} ({why}): refused: {exc}")
            continue
        fam = table.meta["family_totals_s"]
        print(f"  {log}: {model} ({why}), processor {table.meta['processor']}: {m.rows_matched} of "
              f"{len(m.profile.records)} rows matched by {m.mode} to {int(m.covered.sum())} of {len(m.graph)} layers, "
              f"{len(m.unmatched_rows)} rows unmatched; " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in fam.items()))
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
