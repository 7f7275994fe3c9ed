"""Calibration report: how closely the analytic cost model reproduces the published figures.

Run: .venv/bin/python benchmarks/bench_cost_calibration.py
Prints measured (published) vs model values and their ratio for
* Jetson Nano, PyTorch AlexNet / VGG16, CPU-only at 1050 MHz and GPU-only at 921 MHz
  (Zhang et al. 2023, docs/METHODS.md section 4),
* Pixel 4 RetinaFace-MobileNet 160x160 per-worker latencies (SPLASH, docs/METHODS.md section 5),
* Park & Ha INT8/FP32 speed-up ranges on Pixel 6 and Galaxy S22 over the three SSD detectors
  (docs/METHODS.md section 1).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.cost import build_cost_table  # noqa: E402
from optimizer.graph import load_graph  # noqa: E402
from optimizer.hardware import load_device  # noqa: E402

NANO = {("alexnet", "cpu"): 0.845, ("alexnet", "gpu"): 0.724, ("vgg16", "cpu"): 2.170, ("vgg16", "gpu"): 1.954}
RETINAFACE_MS = {"cpu": 10.99, "gpu": 7.65, "dsp": 8.62, "npu": 9.39}
PARK_HA = {"pixel6": {"cpu": (4.8, 5.0), "gpu": (3.3, 4.0), "tpu": (1.3, 1.5)},
           "galaxy_s22": {"cpu": (3.5, 4.0), "gpu": (2.5, 3.2), "dsp": (10.9, 13.5)}}
DETECTORS = ("ssd_mobilenet_v1_fpn", "ssd_mobilenet_v2_fpnlite", "ssd_resnet50_fpn")


def nano() -> list[float]:
    dev = load_device("jetson_nano")
    ratios = []
    print("Jetson Nano (Zhang et al. 2023), fp32, CPU 1050 MHz / GPU 921.6 MHz")
    for model in ("alexnet", "vgg16"):
        ct = build_cost_table(load_graph(model), dev, "fp32", clock_hz={"cpu": 1.05e9, "gpu": 921.6e6})
        for proc in ("cpu", "gpu"):
            model_s = float(ct.whole_network_latency()[ct.processor_index(proc)])
            pub = NANO[(model, proc)]
            ratios.append(model_s / pub)
            print(f"  {model:8s} {proc}-only  published {pub * 1e3:7.1f} ms  model {model_s * 1e3:7.1f} ms  "
                  f"model/published {model_s / pub:5.3f}")
    return ratios


def retinaface() -> list[float]:
    dev = load_device("pixel4")
    ct = build_cost_table(load_graph("retinaface_mobilenet"), dev, "int8")
    ratios = []
    print("Pixel 4 RetinaFace-MobileNet 160x160 (SPLASH), int8")
    for proc, pub in RETINAFACE_MS.items():
        model_ms = float(ct.whole_network_latency()[ct.processor_index(proc)]) * 1e3
        ratios.append(model_ms / pub)
        print(f"  {proc:4s} published {pub:6.2f} ms  model {model_ms:6.2f} ms  model/published {model_ms / pub:5.3f}")
    return ratios


def park_ha() -> list[tuple[str, str, float, float, float, float]]:
    graphs = {m: load_graph(m) for m in DETECTORS}
    rows = []
    print("Park & Ha INT8/FP32 single-processor speed-ups (SSD MobileNetV1 FPN, MobileNetV2 FPNLite, ResNet50 FPN, 640x640)")
    for dev_name, targets in PARK_HA.items():
        dev = load_device(dev_name)
        tables = {(m, dt): build_cost_table(g, dev, dt) for m, g in graphs.items() for dt in ("fp32", "int8")}
        for proc, (lo, hi) in targets.items():
            j = dev.processor_names.index(proc)
            sp = [float(tables[(m, "fp32")].whole_network_latency()[j] / tables[(m, "int8")].whole_network_latency()[j])
                  for m in DETECTORS]
            inside = sum(lo * 0.999 <= s <= hi * 1.001 for s in sp)
            rows.append((dev_name, proc, lo, hi, min(sp), max(sp)))
            print(f"  {dev_name:10s} {proc:4s} published x{lo:.1f}-{hi:.1f}  model x{min(sp):.2f}-{max(sp):.2f} "
                  f"({', '.join(f'{s:.2f}' for s in sp)}; {inside}/3 inside)")
    return rows


def main() -> None:
    r1 = nano()
    r2 = retinaface()
    rows = park_ha()
    worst = max(max(abs(r - 1) for r in r1), max(abs(r - 1) for r in r2))
    mid = [((a + b) / 2) / ((lo + hi) / 2) for _, _, lo, hi, a, b in rows]
    print(f"summary: latency points within {worst * 100:.1f} % of published; speed-up range midpoints "
          f"model/published {min(mid):.2f}-{max(mid):.2f}")


if __name__ == "__main__":
    main()
