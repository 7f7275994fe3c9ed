"""Exported split parts over a loopback socket against the single-file model, cut inside a
ResNet-50 bottleneck: the full-size runs of ``tests/test_runtime_equivalence.py``.

ResNet-50 (full width, and the test's quarter width ``slimmable_resnet50`` x0.25 beside it),
32 px, split at boundary 29 (inside bottleneck ``layer1.2``: ``layer1_1_relu3`` and
``layer1_2_relu1`` cross). INT8 (calibration 32 synthetic frames, parts aligned to the kept
single-file INT8 model): top-1 agreement of parts vs single file on 200 frames, SQNR of parts vs
single file and of both vs the float Keras model. FP32 on 8 frames: max |diff| of parts vs the
single-file FP32 TFLite export (bound 1e-5) and vs Keras (bound 1e-3 of its largest output).

Run: ``.venv/bin/python benchmarks/bench_runtime_equivalence.py [--models resnet50,slimmable_resnet50:0.25]``.
Exit status 1 when a bound fails.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _deploy_cache import split_over_socket  # noqa: E402

SIZE, CUT = 32, 29


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,slimmable_resnet50:0.25",
                    help="comma-separated zoo names, NAME:WIDTH for slimmable_resnet50")
    ap.add_argument("--frames", type=int, default=200, help="INT8 frames (default 200)")
    args = ap.parse_args()
    # the in-process tail server's connections cancelled at shutdown are logged by asyncio as errors
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    ok = True
    for spec in args.models.split(","):
        name, _, width = spec.partition(":")
        variant = {"width": float(width)} if width else {}
        label = f"{name}{' x' + width if width else ''}"
        for dtype, frames in (("int8", args.frames), ("fp32", 8)):
            with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = split_over_socket(Path(tmp), name, SIZE, CUT, dtype, frames=frames, **variant)
            tensors = [t.name for t in r["plan"].split.tensors]
            if dtype == "int8":
                passed = r["agreement"] >= 0.99 and len(set(r["single"].argmax(1))) > 10
                print(f"{label} int8 split at {CUT} ({', '.join(tensors)}): top-1 agreement with the single "
                      f"file {r['agreement']:.1%} on {frames} frames; SQNR parts vs single file "
                      f"{r['sqnr_parts_single']:.1f} dB, parts vs float {r['sqnr_parts_float']:.1f} dB, single "
                      f"file vs float {r['sqnr_single_float']:.1f} dB; distinct float top-1 classes "
                      f"{len(set(r['keras'].argmax(1)))}  {'ok' if passed else 'FAIL'}", flush=True)
            else:
                keras_bound = 1e-3 * float(abs(r["keras"]).max())
                live = float(abs(r["single"]).max()) > 0.1  # a live signal, not vanishing activations
                passed = live and r["max_abs_diff"] <= 1e-5 and r["max_abs_diff_keras"] <= keras_bound
                print(f"{label} fp32 split at {CUT}: max |diff| vs single-file FP32 TFLite {r['max_abs_diff']:.2e} "
                      f"(bound 1e-5), vs Keras {r['max_abs_diff_keras']:.2e} (bound {keras_bound:.2e}); "
                      f"{'ok' if passed else 'FAIL'}", flush=True)
            ok &= passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
