"""Equivalence of exported parts with the whole model, cuts inside residual blocks.

* INT8: ResNet-50 (32 px) as a split cut inside bottleneck ``layer1.2`` run over a real
  loopback socket, against the single-file INT8 model of the same weights and calibration
  (shipped by the export with ``keep_reference``): top-1 agreement on 200 inputs >= 99 %;
  SQNR printed. MobileNetV2's INT8 pipeline is checked in ``test_export.py``.
* FP32: the same ResNet-50 split over the socket against the single-file FP32 TFLite model:
  max abs diff <= 1e-5 (and against Keras within float kernel differences).
"""

from __future__ import annotations

import numpy as np
import pytest

from _deploy_cache import run_single_file, sqnr_db

pytestmark = pytest.mark.slow

N = 200
CALIB = 32


def _exports(tmp, model, size, cuts, kind, dtype):
    from optimizer.plan.export import export_plan, plan_for_cuts

    variant = {"input_size": size}
    plan = plan_for_cuts(model, cuts, kind=kind, dtype=dtype, variant=variant)
    manifest = export_plan(plan, tmp / f"{model}-{kind}-{dtype}", samples=CALIB, seed=0,
                           keep_reference=dtype == "int8")
    return plan, tmp / f"{model}-{kind}-{dtype}", manifest


def _check_int8(plan, art, manifest, size, label):
    from optimizer.plan.export import load_plan_model
    from optimizer.runtime import run_plan

    assert manifest.calibration.aligned_to_single_file and manifest.reference.file == "reference.int8.tflite"
    x = np.random.default_rng(42).uniform(-1, 1, (N, size, size, 3)).astype(np.float32)
    rep = run_plan(plan, art, frames=N, input=x, keep_outputs=True)
    parts = rep.outputs[manifest.outputs[0].name]
    single = run_single_file(art / manifest.reference.file, x)
    keras_model, _, _ = load_plan_model(plan, seed=0)
    ref = np.asarray(keras_model.predict(x, batch_size=50, verbose=0))
    agree = float(np.mean(parts.argmax(1) == single.argmax(1)))
    print(f"\n{label}: top-1 agreement with single-file INT8 {agree:.1%} on {N} inputs; SQNR parts vs "
          f"single-file {sqnr_db(single, parts):.1f} dB, parts vs float {sqnr_db(ref, parts):.1f} dB, "
          f"single-file vs float {sqnr_db(ref, single):.1f} dB; distinct float top-1 classes "
          f"{len(set(ref.argmax(1)))}")
    assert len(set(single.argmax(1))) > 10  # the inputs really are classified differently
    assert agree >= 0.99
    return rep


def test_resnet50_int8_split_over_socket_agrees_with_single_file(tmp_path):
    plan, art, manifest = _exports(tmp_path, "resnet50", 32, [29], "split", "int8")
    rep = _check_int8(plan, art, manifest, 32, "resnet50 int8 split at 29 over loopback")
    assert rep.wire is not None and rep.wire["payload_bytes"] == plan.split.bytes


def test_resnet50_fp32_split_over_socket_equals_keras(tmp_path):
    from optimizer.plan.export import load_plan_model
    from optimizer.runtime import run_plan

    plan, art, _ = _exports(tmp_path, "resnet50", 32, [29], "split", "fp32")
    assert [t.name for t in plan.split.tensors] == ["layer1_1_relu3:0", "layer1_2_relu1:0"]
    from _deploy_cache import single_file_fp32

    x = np.random.default_rng(5).uniform(-1, 1, (8, 32, 32, 3)).astype(np.float32)
    rep = run_plan(plan, art, frames=8, input=x, keep_outputs=True)
    ref = single_file_fp32("resnet50", 32, x)
    keras_model, _, _ = load_plan_model(plan, seed=0)
    keras_out = np.asarray(keras_model(x, training=False))
    out = next(iter(rep.outputs.values()))
    assert np.abs(ref).max() > 0.1
    diff = float(np.abs(out - ref).max())
    print(f"\nresnet50 fp32 split over loopback: max abs diff {diff:.2e} vs single-file FP32 TFLite, "
          f"{float(np.abs(out - keras_out).max()):.2e} vs Keras")
    assert diff <= 1e-5
    assert np.abs(out - keras_out).max() <= 1e-3 * np.abs(keras_out).max()
