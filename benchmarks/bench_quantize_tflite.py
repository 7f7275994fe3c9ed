"""Quantizing users' float ``.tflite`` files (issue 18): size, fidelity and conversion time.

Run: .venv/bin/python benchmarks/bench_quantize_tflite.py [--samples 64]
For each mediapipe pretrained model of the test fixtures (FP16 weights, pre-3a operator codes),
prints the per-channel INT8 result of ``dnnplan quantize`` calibrated on ``sample-images``:
INT8 size / float size, SQNR per output on held-out crops, operators left in float (PReLU and
custom ops need ``--allow-float-ops``), conversion seconds; then whether split parts of the INT8
face detector equal the single INT8 file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=64)
    args = ap.parse_args()
    from third_party.fetch_models import fetch

    from optimizer.errors import DnnplanError
    from optimizer.quantize import quantize

    models = fetch()
    print(f"{'model':28s} {'int8/float':>10s} {'SQNR dB (outputs)':>24s} {'float ops':>10s} {'conv s':>7s}")
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, path in sorted(models.items()):
            out = Path(tmp) / f"{name}.int8.tflite"
            try:
                rep = quantize(path, out, calib="sample-images", samples=args.samples, heldout=16,
                               allow_float_ops=True, measure_latency_=False)
            except DnnplanError as exc:
                print(f"{name:28s} refused: {exc}")
                continue
            sqnr = ", ".join("inf" if o.sqnr_db is None else f"{o.sqnr_db:.1f}" for o in rep.fidelity.outputs)
            floats = len(rep.ops.float_ops)
            print(f"{name:28s} {rep.sizes.ratio:10.3f} {sqnr:>24s} {floats:10d} {rep.conversion_s:7.1f}")
        face = Path(tmp) / "face_detection_short_range.int8.tflite"
        if face.exists():
            from _byom import export_and_check

            for kind in ("split", "pipeline"):
                run = export_and_check(face, Path(tmp) / kind, kind=kind, frames=5)
                diff = max(o.max_abs_diff for o in run.check.outputs)
                print(f"INT8 face detector {kind} parts vs single INT8 file: agreement "
                      f"{run.check.agreement:.3f}, max |diff| {diff:g}")


if __name__ == "__main__":
    main()
