"""Core classes: refit the shared PyTorch FP32 rates and print the per core*GHz consistency.

Run: .venv/bin/python benchmarks/bench_core_classes.py

1. Refits the Cortex-A57 ``conv`` and ``dense`` MACs per cycle per core of the ``pytorch`` runtime
   in ``search_spaces/calibration/cores.yaml`` (least squares on log modeled/published) to the
   published PyTorch FP32 CPU points of ``published.yaml``: Jetson Nano AlexNet/VGG16 (A57,
   Zhang et al. 2023) and Raspberry Pi 4 ResNet50 (A72, through the table's A72/A57 ratio); prints
   the fit next to the shipped values (docs/METHODS.md sections 4, 8).
2. Prints AlexNet/VGG16 FP32 latency x cores x GHz for every device that runs the PyTorch kernels,
   and the ``calibrate --report`` core-class rows (docs/METHODS.md section 8b).
"""

from __future__ import annotations

import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.cost import build_cost_table  # noqa: E402
from optimizer.graph import load_graph  # noqa: E402
from optimizer.hardware import load_device  # noqa: E402
from optimizer.hardware.units import parse_quantity  # noqa: E402
from optimizer.report.fidelity import core_class_facts, read_published  # noqa: E402
from optimizer.shipped import ENV, shipped_root  # noqa: E402


@lru_cache(maxsize=None)
def _graph(model: str):
    return load_graph(model, "op")


def _points() -> list[dict]:
    """The published CPU points whose runtime is the table's ``pytorch`` (the A57 and A72 devices)."""
    return [p for p in read_published()["points"] if p["processor"] == "cpu" and p.get("runtime") == "pytorch"]


def _latencies_ms(points: list[dict]) -> np.ndarray:
    out = []
    for p in points:
        clk = {k: parse_quantity(v, "frequency") for k, v in (p.get("clock") or {}).items()} or None
        dev = load_device(p["device"])
        rt = None if p.get("runtime") == dev.runtime else p.get("runtime")
        ct = build_cost_table(_graph(p["model"]), dev, "fp32", clock_hz=clk, runtime=rt)
        out.append(ct.whole_network_latency()[ct.processor_index("cpu")] * 1e3)
    return np.array(out)


def refit() -> None:
    base = yaml.safe_load((shipped_root() / "calibration" / "cores.yaml").read_text())
    a57 = base["runtimes"]["pytorch"]["classes"]["A57"]["rates"]["fp32"]
    pts = _points()
    pub = np.array([float(p["ms"]) for p in pts])
    saved = os.environ.get(ENV)

    def model(log_x: np.ndarray) -> np.ndarray:
        doc = yaml.safe_load(yaml.safe_dump(base))
        doc["runtimes"]["pytorch"]["classes"]["A57"]["rates"]["fp32"].update(
            conv=float(np.exp(log_x[0])), dense=float(np.exp(log_x[1])))
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "calibration").mkdir()
            (Path(d) / "calibration" / "cores.yaml").write_text(yaml.safe_dump(doc))
            os.environ[ENV] = d
            try:
                return _latencies_ms(pts)
            finally:
                os.environ.pop(ENV) if saved is None else os.environ.__setitem__(ENV, saved)

    fit = least_squares(lambda x: np.log(model(x) / pub), np.log([a57["conv"], a57["dense"]]))
    conv, dense = np.exp(fit.x)
    print("A57 under pytorch, MACs/cycle/core: fitted conv %.3g, dense %.3g (shipped %.3g, %.3g)"
          % (conv, dense, a57["conv"], a57["dense"]))
    shipped = _latencies_ms(pts)
    for p, m_fit, m_ship in zip(pts, model(fit.x), shipped):
        print(f"  {p['device']:13s} {p['model']:9s} published {p['ms']:7.1f} ms  fitted x{m_fit / p['ms']:.2f}  "
              f"shipped x{m_ship / p['ms']:.2f}")


def consistency() -> None:
    data = read_published()
    cfg = data["core_classes"]
    print("\nlatency x cores x GHz (s*core*GHz) under the PyTorch kernels")
    for entry in cfg["devices"]:
        dev = load_device(entry["device"])
        clk = {k: parse_quantity(v, "frequency") for k, v in (entry.get("clock") or {}).items()} or None
        rt = None if entry["runtime"] == dev.runtime else entry["runtime"]
        core_ghz = sum(int(c["count"]) * parse_quantity(c["clock"], "frequency") for c in entry["cores"]) / 1e9
        cells = []
        for m in cfg["models"]:
            ct = build_cost_table(_graph(m), dev, "fp32", clock_hz=clk, runtime=rt)
            ms = ct.whole_network_latency()[ct.processor_index("cpu")] * 1e3
            cells.append(f"{m} {ms:7.1f} ms x {core_ghz:5.2f} = {ms * core_ghz / 1e3:6.2f}")
        cores = " + ".join(f"{c['count']}x {c['core']}" for c in entry["cores"])
        print(f"  {entry['device']:12s} {cores:14s} " + "   ".join(cells))
    print()
    for row in core_class_facts(data):
        print(f"{'PASS' if row.passed else 'FAIL'}  {row.fact}: {row.detail}")


if __name__ == "__main__":
    refit()
    consistency()
