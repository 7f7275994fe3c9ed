"""Bring your own model: ``dnnplan quantize`` of already-converted float ``.tflite`` files.

A digits CNN (trained here on scikit-learn's digits) converted to FP32 and FP16 ``.tflite`` is
quantized by ai-edge-quantizer and must keep its accuracy; six third-party pretrained files
(mediapipe, PReLU made INT8) go the whole chain profile → quantize → map → split → export → run --check.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _byom import (CUSTOM_OP_MODEL, INT8_CHAIN_MODELS, export_and_check, searched_int8_plans_exact,
                   third_party_models)
from _digits import train_digits_cnn

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def digits_tflite(tmp_path_factory):
    """The digits CNN as FP32 and FP16 ``.tflite`` files, with its train/test data."""
    from optimizer import lazy

    tf = lazy.tensorflow()
    model, data = train_digits_cnn()
    xtr, xte, yte = data["xtr"], data["xte"], data["yte"]
    d = tmp_path_factory.mktemp("digits_tflite")
    files = {}
    for kind in ("fp32", "fp16"):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        if kind == "fp16":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.target_spec.supported_types = [tf.float16]
        files[kind] = d / f"digits_{kind}.tflite"
        files[kind].write_bytes(conv.convert())
    np.savez(d / "train.npz", digits=xtr)
    return {"dir": d, "npz": d / "train.npz", "xte": xte, "yte": yte, **files}


def _accuracy(model: bytes, name: str, x: np.ndarray, y: np.ndarray) -> float:
    from optimizer.quantize.evaluate import TfliteRunner

    out = TfliteRunner(model, 1).predict({name: x})
    return float(np.mean(np.argmax(next(iter(out.values())), axis=1) == y))


@pytest.mark.parametrize("kind", ["fp32", "fp16"])
def test_float_tflite_quantizes_keeping_accuracy(digits_tflite, kind, run_cli, tmp_path):
    src = digits_tflite[kind]
    out, rep = tmp_path / "digits.int8.tflite", tmp_path / "report.json"
    res = run_cli("--quiet", "quantize", src, "--calib", digits_tflite["npz"], "--samples", 300,
                  "--out", out, "--report", rep, "--no-latency")
    assert res.exit_code == 0, res.stderr
    report = json.loads(rep.read_text())
    assert report["scheme"] == "per-channel" and report["io"] == "float"
    assert report["ops"]["float_ops"] == []
    assert report["sizes"]["quantized_bytes"] < 0.45 * report["sizes"]["fp32_bytes"]
    assert report["fidelity"]["outputs"][0]["top1_agreement"] >= 0.95
    assert ("FP16 weights" in report["weights"]) == (kind == "fp16")
    from optimizer.quantize.inspect import analyse_tflite
    from optimizer.quantize.tflite_input import read_float_tflite

    assert set(analyse_tflite(out.read_bytes(), "q").weight_types) <= {"INT8", "INT32"}
    from optimizer.quantize.delegation import _interpreter

    # --io float: the quantizer's in-place INT8 inputs/outputs are given back their float type
    interp = _interpreter(out.read_bytes(), 1, True)
    assert {d["dtype"] for d in interp.get_input_details() + interp.get_output_details()} == {np.float32}
    float_model, specs, _ = read_float_tflite(src)
    x, y = digits_tflite["xte"], digits_tflite["yte"]
    float_acc = _accuracy(float_model, specs[0].name, x, y)
    int8_acc = _accuracy(out.read_bytes(), specs[0].name, x, y)
    assert float_acc > 0.9 and int8_acc >= float_acc - 0.02, (float_acc, int8_acc)
    again = tmp_path / "again.tflite"
    assert run_cli("--quiet", "quantize", src, "--calib", digits_tflite["npz"], "--samples", 300,
                   "--out", again, "--no-latency").exit_code == 0
    assert again.read_bytes() == out.read_bytes()                 # same seed: same bytes


def test_per_tensor_and_dynamic_from_tflite(digits_tflite, tmp_path):
    from optimizer.quantize import quantize

    per_tensor = quantize(digits_tflite["fp32"], tmp_path / "pt.tflite", calib=digits_tflite["npz"],
                          samples=200, scheme="per-tensor", measure_latency_=False)
    dynamic = quantize(digits_tflite["fp32"], tmp_path / "dy.tflite", calib=digits_tflite["npz"],
                       samples=200, scheme="dynamic", measure_latency_=False)
    assert per_tensor.sizes.per_channel_tensors == 0
    assert per_tensor.fidelity.outputs[0].top1_agreement >= 0.9
    assert dynamic.io == "float" and dynamic.fidelity.outputs[0].top1_agreement >= 0.95


def test_tflite_bad_inputs(digits_tflite, run_cli, tmp_path):
    src = digits_tflite["fp32"]
    q = tmp_path / "q.tflite"
    assert run_cli("--quiet", "quantize", src, "--calib", digits_tflite["npz"], "--samples", 50,
                   "--out", q, "--no-latency").exit_code == 0
    cases = [
        ([q], "already an integer-quantized model"),
        ([src, "--scheme", "fp16"], "not available for a .tflite input"),
        ([src, "--io", "int8"], "--io int8 is not available for a .tflite input"),
    ]
    bad = tmp_path / "corrupt.tflite"
    bad.write_bytes(src.read_bytes()[:200])
    cases.append(([bad], "corrupt.tflite"))
    for args, match in cases:
        out = tmp_path / "never.tflite"
        res = run_cli("quantize", *args, "--calib", digits_tflite["npz"], "--out", out, "--no-latency")
        assert res.exit_code == 2 and match in res.stderr, (args, res.stderr)
        assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1 and not out.exists()


@pytest.mark.parametrize("name", INT8_CHAIN_MODELS)
def test_third_party_tflite_whole_chain_int8(name, run_cli, tmp_path):
    """mediapipe models (FP16/FP32 weights, pre-3a operator codes, PReLU, a custom op): profile →
    quantize on real photographs → map and split at int8 → export → run --check: INT8 parts agree
    100 % with the single INT8 file; the float model's parts equal it within 1e-5."""
    model = third_party_models()[name]
    q, rep = tmp_path / f"{name}_int8.tflite", tmp_path / "q.json"
    assert run_cli("--quiet", "profile", model, "--out", tmp_path / "profile.json").exit_code == 0
    extra = ["--allow-float-ops"] if name == CUSTOM_OP_MODEL else []
    res = run_cli("--quiet", "quantize", model, "--calib", "sample-images", "--samples", 32, "--heldout", 8,
                  "--out", q, "--report", rep, "--no-latency", *extra)
    assert res.exit_code == 0, res.stderr
    report = json.loads(rep.read_text())
    assert report["sizes"]["quantized_bytes"] < 0.5 * report["sizes"]["fp32_bytes"]
    assert min(o["sqnr_db"] for o in report["fidelity"]["outputs"]) > 5.0
    float_ops = {o["op"] for o in report["ops"]["float_ops"]}
    assert float_ops == ({"CUSTOM:Convolution2DTransposeBias"} if extra else set()), float_ops
    inner = [o for o in report["ops"]["conversion_ops"] if o not in report["ops"]["io_conversion_ops"]]
    assert inner == [] or extra                                          # PReLU included: all INT8
    searched_int8_plans_exact(run_cli, q, tmp_path)
    fp32 = export_and_check(model, tmp_path / "fp32", kind="split", frames=2)
    assert fp32.check.passed and all(o.max_abs_diff <= 1e-5 for o in fp32.check.outputs)


@pytest.mark.filterwarnings("ignore:Warning. Enabling `experimental_preserve_all_tensors`")
def test_prelu_chains_become_int8_prelu(tmp_path):
    """A float PReLU between DEQUANTIZE and QUANTIZE becomes TFLite's INT8 PRELU; the slope is
    quantized asymmetric per tensor and the outputs stay close to the float-PReLU model."""
    from optimizer.quantize.evaluate import TfliteRunner, sqnr_db
    from optimizer.quantize.inspect import analyse_tflite
    from optimizer.quantize.prelu import integer_prelu, quantize_slope
    from optimizer.quantize.tflite_input import quantize_float_tflite, read_float_tflite

    alpha = np.array([-0.5, 0.0, 0.25, 1.0], np.float32)
    q, scale, zero = quantize_slope(alpha)
    assert np.allclose((q.astype(np.float32) - zero) * scale, alpha, atol=scale / 2 + 1e-7)
    assert scale == pytest.approx(1.5 / 255) and q.dtype == np.int8
    model = third_party_models()["hand_recrop"]
    data, specs, _ = read_float_tflite(model)
    calib = [{specs[0].name: np.random.default_rng(k).uniform(0, 1, (1, *specs[0].shape)).astype(np.float32)}
             for k in range(8)]
    from ai_edge_quantizer import quantizer, recipe

    from optimizer.quantize.tflite_input import _recipe

    qt = quantizer.Quantizer(data, _recipe(recipe, "per-channel"))
    hybrid = bytes(qt.quantize(qt.calibrate({"serving_default": calib}, num_threads=1)).quantized_model)
    assert [o.op for o in analyse_tflite(hybrid, "h").float_ops].count("PRELU") == 13
    rewritten, n = integer_prelu(hybrid, "h")
    assert n == 13 and analyse_tflite(rewritten, "r").float_ops == []
    from optimizer.quantize.tflite_input import float_interface

    assert float_interface(rewritten, "r") == quantize_float_tflite(data, "per-channel", calib, "hand_recrop")
    x = {specs[0].name: np.concatenate([c[specs[0].name] for c in calib])}
    a, b = TfliteRunner(hybrid, 1).predict(x), TfliteRunner(rewritten, 1).predict(x)
    assert all(sqnr_db(a[k], b[k]) > 25 for k in a)
    dynamic = quantize_float_tflite(data, "dynamic", calib, "hand_recrop")       # hybrid ops untouched
    assert integer_prelu(dynamic, "d")[1] == 0
