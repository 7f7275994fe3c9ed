"""Helpers shared by the deploy test modules: cached single-file exports (conversion is slow),
the single-file INT8 runner and SQNR."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

_CACHE: dict[tuple, dict] = {}


def single_file_fp32(model: str, size: int, x: np.ndarray) -> np.ndarray:
    """Outputs of the single-file FP32 TFLite export of zoo ``model`` (weight seed 0) on ``x``."""
    from optimizer.plan.export import export_plan, plan_for_cuts
    from optimizer.runtime import run_parts

    key = (model, size)
    if key not in _CACHE:
        d = Path(tempfile.mkdtemp(prefix="dnnplan-single-"))
        plan = plan_for_cuts(model, [], dtype="fp32", variant={"input_size": size})
        _CACHE[key] = {"dir": d, "manifest": export_plan(plan, d / "art", seed=0)}
    entry = _CACHE[key]
    m = entry["manifest"]
    return run_parts(m, entry["dir"] / "art", {m.inputs[0].name: x})[m.outputs[0].name]


def run_single_file(path, x):
    """The single-file INT8 model on float frames: quantize, invoke, dequantize."""
    from optimizer.lazy import litert_interpreter

    runner = litert_interpreter()(model_path=str(path)).get_signature_runner("serving_default")
    (ds, dz), (qs, qz) = (runner.get_input_details()["in0"]["quantization"],
                          runner.get_output_details()["output_0"]["quantization"])
    rows = []
    for i in range(len(x)):
        q = np.clip(np.rint(x[i:i + 1] / ds) + dz, -128, 127).astype(np.int8)
        rows.append((runner(in0=q)["output_0"].astype(np.float32) - qz) * qs)
    return np.concatenate(rows)


def sqnr_db(ref, test):
    """Signal-to-quantization-noise ratio of ``test`` against ``ref`` in dB."""
    noise = float(np.sum((ref.astype(np.float64) - test) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref.astype(np.float64) ** 2)) / noise)
