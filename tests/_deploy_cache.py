"""Helpers shared by the deploy test modules (and ``benchmarks/bench_runtime_equivalence.py``):
cached single-file exports (conversion is slow), the single-file INT8 runner, SQNR, and a split
run over a loopback socket against the single-file model."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

_CACHE: dict[tuple, dict] = {}


def single_file_fp32(model: str, size: int, x: np.ndarray, **variant: object) -> np.ndarray:
    """Outputs of the single-file FP32 TFLite export of zoo ``model`` at ``size`` (builder
    ``variant`` arguments such as ``width``; weight seed 0) on ``x``."""
    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.runtime import run_parts

    key = (model, size, tuple(sorted(variant.items())))
    if key not in _CACHE:
        d = Path(tempfile.mkdtemp(prefix="dnnplan-single-"))
        plan = plan_for_boundaries(model, [], dtype="fp32", variant={"input_size": size, **variant})
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


def split_over_socket(tmp: Path, model: str, size: int, cut: int, dtype: str, *, frames: int,
                      calib: int = 32, float_reference: bool = True, **variant: object) -> dict:
    """Export zoo ``model`` (``size`` px, builder ``variant``, weight seed 0) as a split at ``cut``
    in ``dtype``, run it over a loopback socket on ``frames`` seeded uniform [-1, 1] frames, and
    compare with the single-file model of the same weights: the INT8 reference the export keeps
    (``keep_reference``) or the single-file FP32 export. Returns the plan, manifest, run report,
    the outputs (``parts``, ``single``; ``keras`` with ``float_reference``) and the figures
    (``agreement``: top-1 of parts vs single file; ``max_abs_diff``; SQNRs in dB)."""
    from optimizer.plan.export import export_plan
    from optimizer.plan.keras_model import load_plan_model
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.runtime import run_plan

    plan = plan_for_boundaries(model, [cut], kind="split", dtype=dtype, variant={"input_size": size, **variant})
    art = tmp / f"{model}-split-{dtype}"
    manifest = export_plan(plan, art, samples=calib, seed=0, keep_reference=dtype == "int8")
    x = np.random.default_rng(42 if dtype == "int8" else 5).uniform(-1, 1, (frames, size, size, 3)).astype(np.float32)
    rep = run_plan(plan, art, frames=frames, input=x, keep_outputs=True)
    parts = rep.outputs[manifest.outputs[0].name]
    single = (run_single_file(art / manifest.reference.file, x) if dtype == "int8"
              else single_file_fp32(model, size, x, **variant))
    out = {"plan": plan, "manifest": manifest, "report": rep, "parts": parts, "single": single,
           "agreement": float(np.mean(parts.argmax(1) == single.argmax(1))),
           "max_abs_diff": float(np.abs(parts - single).max()), "sqnr_parts_single": sqnr_db(single, parts)}
    if float_reference:
        keras_model, _, _ = load_plan_model(plan, seed=0)
        ref = np.asarray(keras_model.predict(x, batch_size=50, verbose=0))
        out.update(keras=ref, sqnr_parts_float=sqnr_db(ref, parts), sqnr_single_float=sqnr_db(ref, single),
                   max_abs_diff_keras=float(np.abs(parts - ref).max()))
    return out
