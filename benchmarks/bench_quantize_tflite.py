"""Quantizing users' float ``.tflite`` and ``.onnx`` files: size, fidelity, time, parts.

Run: .venv/bin/python benchmarks/bench_quantize_tflite.py [--samples 64]
For each mediapipe pretrained model of the test fixtures (FP16/FP32 weights, pre-3a operator
codes; ai-edge-quantizer, PReLU made INT8 afterwards) and two ONNX models (the tests'
``onnx.helper`` graph and a tf2onnx export of the zoo's MobileNetV1; onnx2tf then the TFLite
converter), prints the per-channel INT8 result of ``dnnplan quantize`` calibrated on
``sample-images``: INT8 size / float size, SQNR per output on held-out crops, INT8 PReLU count,
operators left in float, quantize seconds (whole call, conversion included), and whether the
2-part split and 3-stage pipeline of the INT8 file (even cuts) equal the single INT8 file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _parts_vs_single(model: Path, tmp: Path) -> str:
    """``split a/d, pipeline a/d``: top-1 agreement and max |diff| of the parts vs the file."""
    from _byom import export_and_check

    cells = []
    for kind in ("split", "pipeline"):
        run = export_and_check(model, tmp / f"{model.stem}-{kind}", kind=kind, frames=5)
        diff = max(o.max_abs_diff for o in run.check.outputs)
        cells.append(f"{run.check.agreement:.3f}/{diff:g}")
    return ", ".join(cells)


def _row(name: str, path: Path, tmp: Path, samples: int) -> str:
    from optimizer.errors import DnnplanError
    from optimizer.quantize import quantize
    from optimizer.quantize.inspect import analyse_tflite

    out = tmp / f"{name}.int8.tflite"
    t0 = time.perf_counter()
    try:
        rep = quantize(path, out, calib="sample-images", samples=samples, heldout=16,
                       allow_float_ops=True, measure_latency_=False)
    except DnnplanError as exc:
        return f"| {name} | refused: {exc} | | | | | | |"
    seconds = time.perf_counter() - t0
    sqnr = ", ".join("inf" if o.sqnr_db is None else f"{o.sqnr_db:.1f}" for o in rep.fidelity.outputs)
    prelu = analyse_tflite(out.read_bytes(), name).op_counts().get("PRELU", 0)
    floats = ", ".join(sorted({o.op for o in rep.ops.float_ops})) or "none"
    if path.suffix == ".onnx":
        name += f" ({rep.weights.split('; ', 1)[1].rstrip(')').replace('|diff|', 'abs diff')})"
    return (f"| {name} | {rep.sizes.fp32_bytes / 1e3:.0f} | {rep.sizes.ratio:.3f} | {sqnr} | {prelu} | {floats} | {seconds:.1f} | "
            f"{_parts_vs_single(out, tmp)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=64)
    args = ap.parse_args()
    from _byom import write_tiny_onnx, zoo_onnx
    from third_party.fetch_models import fetch

    print("| model | float kB | INT8 / float size | SQNR dB (outputs) | INT8 PReLU | float ops | quantize s | "
          "split, pipeline vs single INT8 (agreement/max diff) |")
    print("|---|---:|---:|---|---:|---|---:|---|")
    with tempfile.TemporaryDirectory() as tmp_name, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tmp = Path(tmp_name)
        models = dict(sorted(fetch().items()))
        models["tiny_onnx (onnx.helper)"] = write_tiny_onnx(tmp / "tiny.onnx")
        models["mobilenet_v1 (tf2onnx)"] = zoo_onnx(tmp / "mobilenet_v1.onnx")
        for name, path in models.items():
            print(_row(name.split(" ")[0], path, tmp, args.samples), flush=True)


if __name__ == "__main__":
    main()
