"""Full-size versions of checks that ``make test`` runs on smaller real models: each check builds
the network the test once used, asserts what the test asserts and prints what it measured.

Checks (pick with ``--only NAME,...``):

* ``efficientnet_se``: EfficientNet-B0 (16 squeeze-excitation blocks, 96x96) exported by tf2onnx
  with a dynamic batch, quantized from the ONNX file: no TRANSPOSE in the FP32 or the INT8 model,
  16 depthwise convolutions, a MEAN per SE block, conversion gap below 1e-3; FP32 and INT8 latency.
  The test (``tests/test_quantize_onnx.py::test_tf2onnx_se_network_converts_without_transposes``)
  runs the same path on a 3-block MBConv network.

* ``importers_resnet50``: full-width ResNet-50 (224x224) converted by tf2onnx and the TFLite
  converter; the ONNX and TFLite importers give the Keras graph's MACs and parameters (1 %, 3 %),
  its weighted-layer count and its input and output sizes. The test
  (``tests/test_importers.py::test_keras_onnx_tflite_agree``) runs ResNet-50 at quarter width.

* ``importers_bert``: ``bert_small`` with two encoder layers and BERT's 30,522-word embedding
  converted by tf2onnx and the TFLite converter; both importers resolve the symbolic sequence
  dims, so their MACs agree with the Keras graph's within 1 % (attention is 4 % of them) and
  every input and output dim is known. The test
  (``tests/test_importers.py::test_transformer_with_dynamic_sequence_agrees``) runs the same
  layers with a 1,000-word embedding (``vocab_size=1000``).

* ``fidelity_rows``: the shipped published calibration's spread row over every listed network
  (Pixel 4 CPU / GPU FP32 ratio spread at least nn-Meter's) and the Galaxy S22 Hexagon points
  inside their owner band. The test (``tests/test_fidelity.py::test_owner_decision_band_and_spread_row``)
  computes the spread over the two networks at the ends of the modeled range and only the S22
  Hexagon points.

* ``shared_head``: SSD MobileNetV1 FPN at full width (depth 256, 128x128) exported as an INT8
  kernel-granularity pipeline cut at boundary 49, so that the box head's P3 call is in stage 0 and
  its other calls in stage 1; the pipeline's outputs equal the single file's exactly. The test
  (``tests/test_export.py::test_a_shared_head_call_cut_off_from_its_other_calls_is_aligned_to_the_single_file``)
  runs the narrow variant (``alpha=0.25``, ``depth=32``: same layers and shared heads).

Run: ``.venv/bin/python benchmarks/bench_test_sweeps.py [--only efficientnet_se]``.
Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _conversion_gap(weights_note: str) -> float:
    """The ONNX-vs-TFLite max |diff| the quantize report's ``weights`` line names."""
    match = re.search(r"max \|diff\| ([0-9.e+-]+) on", weights_note)
    return float(match.group(1)) if match else float("inf")


def efficientnet_se(tmp: Path) -> bool:
    """EfficientNet-B0 through tf2onnx (dynamic batch) and ONNX quantization, no TRANSPOSE."""
    from optimizer.graph.convert import keras_to_onnx
    from optimizer.plan.keras_model import load_plan_model
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.quantize import quantize

    km, _, _ = load_plan_model(plan_for_boundaries("efficientnet_b0", [], variant={"input_size": 96}))
    model = keras_to_onnx(km, tmp / "efficientnet_b0.onnx")
    rep = quantize(model, tmp / "eff.tflite", calib="sample-images", samples=16, heldout=4, runs=15, warmup=3)
    gap = _conversion_gap(rep.weights)
    transposes = (rep.transposes.fp32, rep.transposes.quantized) if rep.transposes else None
    passed = (transposes == (0, 0) and rep.ops.counts.get("DEPTHWISE_CONV_2D") == 16
              and rep.ops.counts.get("MEAN", 0) >= 16 and gap < 1e-3)
    print(f"efficientnet_b0 (tf2onnx) 96x96: TRANSPOSE fp32/int8 {transposes}, DEPTHWISE_CONV_2D "
          f"{rep.ops.counts.get('DEPTHWISE_CONV_2D')}, MEAN {rep.ops.counts.get('MEAN')}, conversion gap {gap:.1e}; "
          f"FP32 {rep.latency.fp32.median_ms:.1f} ms, INT8 {rep.latency.quantized.median_ms:.1f} ms "
          f"(x{rep.latency.speedup:.2f})  {'ok' if passed else 'FAIL'}", flush=True)
    return passed


def importers_resnet50(tmp: Path) -> bool:
    """Full-width ResNet-50 through the ONNX and TFLite importers agrees with its Keras graph."""
    import math

    from optimizer.graph import load_graph
    from optimizer.graph.convert import keras_to_onnx, keras_to_tflite
    from optimizer.graph.zoo import build_keras

    keras_g = load_graph("resnet50")
    model = build_keras("resnet50")
    ok = True
    for g in (load_graph(keras_to_onnx(model, tmp / "resnet50.onnx")),
              load_graph(keras_to_tflite(model, tmp / "resnet50.tflite"))):
        macs, params = g.total_macs / keras_g.total_macs, g.total_params / keras_g.total_params
        weighted = [g.count("conv", "dwconv", "dense"), keras_g.count("conv", "dwconv", "dense")]
        sizes = ([math.prod(s) for s in g.input_shapes + g.output_shapes]
                 == [math.prod(s) for s in keras_g.input_shapes + keras_g.output_shapes])
        passed = abs(macs - 1) <= 0.01 and abs(params - 1) <= 0.03 and weighted[0] == weighted[1] and sizes
        print(f"resnet50 {g.fmt}: MACs x{macs:.4f}, params x{params:.4f} of Keras, weighted layers "
              f"{weighted[0]}/{weighted[1]}, input/output sizes {'equal' if sizes else 'DIFFER'}  "
              f"{'ok' if passed else 'FAIL'}", flush=True)
        ok &= passed
    return ok


def importers_bert(tmp: Path) -> bool:
    """bert_small (depth 0.5, full vocabulary) through the ONNX and TFLite importers keeps its MACs."""
    import math

    from optimizer.graph import load_graph
    from optimizer.graph.convert import keras_to_onnx, keras_to_tflite
    from optimizer.graph.zoo import build_keras

    keras_g = load_graph("bert_small", depth=0.5)
    model = build_keras("bert_small", depth=0.5)
    ok = True
    for g in (load_graph(keras_to_onnx(model, tmp / "bert_small.onnx")),
              load_graph(keras_to_tflite(model, tmp / "bert_small.tflite"))):
        macs = g.total_macs / keras_g.total_macs
        sizes = [math.prod(s) for s in g.output_shapes] == [math.prod(s) for s in keras_g.output_shapes]
        known = all(d > 0 for s in g.input_shapes + g.output_shapes for d in s)
        passed = abs(macs - 1) <= 0.01 and sizes and known
        print(f"bert_small depth 0.5 {g.fmt}: MACs x{macs:.4f} of Keras, output sizes "
              f"{'equal' if sizes else 'DIFFER'}, every dim known {known}  {'ok' if passed else 'FAIL'}", flush=True)
        ok &= passed
    return ok


def fidelity_rows(tmp: Path) -> bool:
    """The spread row over the whole listed zoo and the S22 Hexagon owner-band points pass."""
    from optimizer.report import fidelity

    data = fidelity.read_published()
    ok = True
    for row in fidelity.spread_facts(data):
        print(f"{row.fact}: {row.detail}  {'ok' if row.passed else 'FAIL'}", flush=True)
        ok &= row.passed
    for r in fidelity.point_rows(data):
        if (r.device, r.processor) == ("galaxy_s22", "dsp"):
            passed = r.band == (1.0, 3.0) and r.passed
            print(f"galaxy_s22 dsp {r.model}: published {r.published_ms:.1f} ms, modeled {r.op_ms:.1f} ms, "
                  f"band {r.band}  {'ok' if passed else 'FAIL'}", flush=True)
            ok &= passed
    return ok


def shared_head(tmp: Path) -> bool:
    """Full-width SSD MobileNetV1 FPN cut inside its shared box head: parts equal the single file."""
    import numpy as np

    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.runtime import run_plan

    plan = plan_for_boundaries("ssd_mobilenet_v1_fpn", [49], dtype="int8", granularity="kernel",
                               variant={"input_size": 128})
    m = export_plan(plan, tmp / "art", samples=8, keep_reference=True)
    p3_before_cut = "BoxHead_reshape_P3:0" in [t.name for t in m.parts[0].outputs]
    x = np.random.default_rng(3).uniform(-1, 1, (4, 128, 128, 3)).astype(np.float32)
    check = run_plan(plan, tmp / "art", frames=4, input=x, check_min_agreement=0.99).check
    diffs = {o.name: o.max_abs_diff for o in check.outputs} if check else {}
    passed = (p3_before_cut and check is not None and check.passed
              and diffs == {"box_encodings:0": 0.0, "class_predictions_with_background:0": 0.0})
    print(f"ssd_mobilenet_v1_fpn 128x128 int8, cut 49 (kernel): P3 box head call in stage 0 "
          f"{p3_before_cut}, max |diff| to the single file {diffs}  {'ok' if passed else 'FAIL'}", flush=True)
    return passed


CHECKS: dict[str, Callable[[Path], bool]] = {"efficientnet_se": efficientnet_se,
                                              "importers_resnet50": importers_resnet50,
                                              "importers_bert": importers_bert,
                                              "fidelity_rows": fidelity_rows,
                                              "shared_head": shared_head}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(CHECKS), help=f"comma-separated checks of: {', '.join(CHECKS)}")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        print(f"error: --only {','.join(unknown)}: no such check; the checks are: {', '.join(CHECKS)}",
              file=sys.stderr)
        return 2
    ok = True
    for name in names:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ok &= CHECKS[name](Path(tmp))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
