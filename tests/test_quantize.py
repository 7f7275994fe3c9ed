"""INT8 post-training quantization: a real digits CNN, determinism, calibration, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _digits import train_digits_cnn

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- fixtures (built once per module)

@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """A small CNN trained on scikit-learn's 8x8 digits, saved as .keras, plus its data splits."""
    model, data = train_digits_cnn()
    xtr, xte, yte = data["xtr"], data["xte"], data["yte"]
    d = tmp_path_factory.mktemp("digits")
    np.savez(d / "train.npz", digits=xtr)
    model.save(d / "digits.keras")
    return {"dir": d, "keras": d / "digits.keras", "npz": d / "train.npz", "xte": xte, "yte": yte}


@pytest.fixture(scope="module")
def digits_quantized(digits):
    """The digits CNN quantized with both full-integer schemes (calibration = training split)."""
    from optimizer.quantize import quantize

    out = {}
    for scheme in ("per-channel", "per-tensor"):
        path = digits["dir"] / f"digits_{scheme}.tflite"
        rep = quantize(digits["keras"], path, calib=digits["npz"], samples=1000, scheme=scheme,
                       seed=7, runs=10, warmup=2)
        out[scheme] = (path, rep)
    return out


def _accuracy(tflite: bytes, x: np.ndarray, y: np.ndarray) -> float:
    from optimizer.quantize import TfliteRunner

    pred = TfliteRunner(tflite).predict({"digits": x})
    return float(np.mean(next(iter(pred.values())).argmax(axis=1) == y))


# ---------------------------------------------------------------- accuracy and report

@pytest.mark.slow
def test_digits_int8_accuracy_within_one_point(digits, digits_quantized, tmp_path):
    from optimizer.quantize import convert_float, open_model

    src = open_model(digits["keras"], tmp_path)
    fp32 = convert_float(src)
    acc_fp32 = _accuracy(fp32, digits["xte"], digits["yte"])
    path, rep = digits_quantized["per-channel"]
    acc_int8 = _accuracy(path.read_bytes(), digits["xte"], digits["yte"])
    assert acc_fp32 > 0.9, "the digits CNN did not train"
    assert abs(acc_fp32 - acc_int8) <= 0.01, (acc_fp32, acc_int8)
    # the report's held-out inputs are drawn from the .npz but never used for calibration
    assert rep.calibration.samples_used + rep.calibration.heldout <= 1257
    assert rep.calibration.heldout > 0 and len(rep.fidelity.outputs) == 1
    out = rep.fidelity.outputs[0]
    assert out.top1_agreement is not None and out.top1_agreement >= 0.95
    assert out.sqnr_db is not None and out.sqnr_db > 25.0
    print(f"digits CNN: FP32 acc {acc_fp32:.4f}, INT8 acc {acc_int8:.4f}")


@pytest.mark.slow
def test_digits_report_per_channel_vs_per_tensor(digits_quantized):
    pc = digits_quantized["per-channel"][1]
    pt = digits_quantized["per-tensor"][1]
    for rep in (pc, pt):
        assert rep.ops.float_ops == [] and rep.ops.io_conversion_ops == []
        assert rep.ops.cpu_segments == 0
        assert rep.sizes.quantized_bytes < rep.sizes.fp32_bytes
        assert rep.latency is not None and rep.latency.threads == 2
        assert rep.latency.fp32.p90_ms >= rep.latency.fp32.median_ms > 0
    # per-channel stores one scale per output channel of every conv/depthwise weight and bias
    assert pc.sizes.per_channel_tensors > 0 and pt.sizes.per_channel_tensors == 0
    assert pc.sizes.quantized_bytes > pt.sizes.quantized_bytes
    # the FC weights stay per tensor in both (Park & Ha's scheme); both schemes are faithful
    assert pc.fidelity.outputs[0].sqnr_db > 25 and pt.fidelity.outputs[0].sqnr_db > 20
    print(f"digits SQNR per-channel {pc.fidelity.outputs[0].sqnr_db:.2f} dB, "
          f"per-tensor {pt.fidelity.outputs[0].sqnr_db:.2f} dB")


@pytest.mark.slow
def test_cli_same_seed_byte_identical_and_report(digits, digits_quantized, run_cli, tmp_path):
    out = tmp_path / "again.tflite"
    report = tmp_path / "r.json"
    res = run_cli("quantize", digits["keras"], "--out", out, "--calib", digits["npz"], "--seed", 7,
                  "--runs", 3, "--warmup", 1, "--report", report)
    assert res.exit_code == 0, res.stderr
    first = digits_quantized["per-channel"][0].read_bytes()
    assert out.read_bytes() == first
    data = json.loads(report.read_text())
    assert data["scheme"] == "per-channel" and data["io"] == "int8"
    assert data["sizes"]["quantized_bytes"] == len(first)
    assert data["fidelity"]["outputs"][0]["sqnr_db"] > 25
    assert "ratio" in res.stdout and "SQNR" in res.stdout
    other = tmp_path / "other.tflite"
    res = run_cli("quantize", digits["keras"], "--out", other, "--calib", digits["npz"],
                  "--seed", 8, "--no-latency", "--samples", 50)
    assert res.exit_code == 0, res.stderr
    assert other.read_bytes() != first  # a different calibration draw gives other scales


@pytest.mark.slow
def test_dynamic_and_fp16_leave_float_ops(digits, tmp_path):
    from optimizer.quantize import quantize

    dyn = quantize(digits["keras"], tmp_path / "d.tflite", calib=digits["npz"], scheme="dynamic",
                   measure_latency_=False, heldout=20)
    assert dyn.io == "float"
    assert {e.op for e in dyn.ops.float_ops} >= {"CONV_2D", "FULLY_CONNECTED"}
    assert dyn.ops.cpu_fallback_counts["CONV_2D"] == 2
    assert dyn.sizes.weight_bytes_by_type.get("INT8", 0) > 0
    f16 = quantize(digits["keras"], tmp_path / "h.tflite", calib="synthetic", scheme="fp16",
                   measure_latency_=False, heldout=20)
    assert f16.sizes.weight_bytes_by_type.get("FLOAT16", 0) > 0
    assert f16.fidelity.outputs[0].sqnr_db > 50  # float16 weights barely move the outputs
    # fp16 and dynamic read no calibration data, so nothing warns about synthetic calibration
    assert not any("calibration data:" in w for w in f16.warnings + dyn.warnings), f16.warnings
    assert any("fp16 scheme uses no calibration data" in w and "synthetic held-out" in w for w in f16.warnings)


@pytest.mark.slow
def test_tensorflow_noise_does_not_reach_terminal(digits, tmp_path):
    out = tmp_path / "q.tflite"
    code = ("import sys; from optimizer.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "quantize", str(digits["keras"]), "--out",
                           str(out), "--calib", "synthetic", "--samples", "20", "--heldout", "5",
                           "--runs", "2", "--warmup", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    # only our own warnings: synthetic data, no TensorFlow/absl/XNNPACK log lines
    assert lines and all(ln.startswith("warning:") for ln in lines), proc.stderr
    assert "Saved artifact" not in proc.stdout and "XNNPACK delegate for CPU" not in proc.stdout


# ---------------------------------------------------------------- calibration sources (no TF)

def test_image_directory_is_preprocessed_like_inference(tmp_path):
    from PIL import Image

    from optimizer.quantize import InputSpec, load_calibration

    rng = np.random.default_rng(0)
    for i in range(6):
        pix = rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)
        Image.fromarray(pix).save(tmp_path / f"img{i}.png")
    pre = {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [127.5] * 3}
    spec = InputSpec("input", (4, 4, 3), "float32")
    cal = load_calibration(tmp_path, [spec], pre, samples=3, heldout=2, seed=1)
    assert cal.size() == 3 and cal.size("heldout") == 2
    x = np.concatenate([cal.arrays()["input"], cal.arrays("heldout")["input"]])
    # same size: no resampling, so every value must be (p - 127.5) / 127.5 for some saved pixel
    originals = {tuple(np.asarray(Image.open(p), dtype=np.float64).ravel()) for p in tmp_path.glob("*.png")}
    for row in x:
        assert tuple((row * 127.5 + 127.5).round(4).ravel()) in originals
    assert x.min() >= -1.0 and x.max() <= 1.0
    # same seed -> same draw; calibration and held-out are disjoint
    again = load_calibration(tmp_path, [spec], pre, samples=3, heldout=2, seed=1)
    assert np.array_equal(again.arrays()["input"], cal.arrays()["input"])
    calib_rows = {r.tobytes() for r in cal.arrays()["input"]}
    assert not calib_rows & {r.tobytes() for r in cal.arrays("heldout")["input"]}
    bgr = load_calibration(tmp_path, [spec], {**pre, "color": "BGR"}, samples=3, heldout=2, seed=1)
    assert np.allclose(bgr.arrays()["input"], cal.arrays()["input"][..., ::-1])


def test_fewer_samples_than_asked_is_said(tmp_path):
    from optimizer.quantize import InputSpec, load_calibration

    np.savez(tmp_path / "c.npz", x=np.zeros((50, 3), np.float32))
    cal = load_calibration(tmp_path / "c.npz", [InputSpec("x", (3,), "float32")], None,
                           samples=1000, heldout=100, seed=0)
    assert cal.size() == 40 and cal.size("heldout") == 10
    assert any("50 samples" in n and "asked 1000" in n for n in cal.notes)


def test_synthetic_tokens_and_pixels_in_range():
    from optimizer.quantize import InputSpec, load_calibration

    tok = load_calibration("synthetic", [InputSpec("ids", (16,), "int32")],
                           {"kind": "tokens", "vocab_size": 30}, samples=8, heldout=2)
    assert tok.arrays()["ids"].dtype == np.int32 and tok.arrays()["ids"].max() < 30
    img = load_calibration("synthetic", [InputSpec("x", (5, 5, 3), "float32")],
                           {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [127.5] * 3},
                           samples=8, heldout=2)
    assert img.arrays()["x"].min() >= -1 and img.arrays()["x"].max() <= 1 and img.size("heldout") == 2


def test_sample_images_are_real_photographs_preprocessed_like_inference():
    """``--calib sample-images``: seeded crops of scikit-learn's photographs, normalised like a
    folder's images; real images are spatially smooth, synthetic noise is not."""
    from optimizer.quantize import InputSpec, load_calibration

    pre = {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [127.5] * 3}
    spec = InputSpec("input", (32, 32, 3), "float32")
    cal = load_calibration("sample-images", [spec], pre, samples=24, heldout=6, seed=3)
    assert cal.arrays()["input"].shape == (24, 32, 32, 3) and cal.size("heldout") == 6
    assert "sample-images" in cal.source
    x = cal.arrays()["input"]
    assert x.min() >= -1.0 and x.max() <= 1.0 and x.std() > 0.2
    assert len({r.tobytes() for r in x}) == 24                      # augmentation: no repeats

    def neighbour_corr(a):
        return float(np.corrcoef(a[:, :, :-1].ravel(), a[:, :, 1:].ravel())[0, 1])

    noise = load_calibration("synthetic", [spec], pre, samples=24, heldout=0, seed=3).arrays()["input"]
    assert neighbour_corr(x) > 0.8 and abs(neighbour_corr(noise)) < 0.1
    again = load_calibration("sample-images", [spec], pre, samples=24, heldout=6, seed=3)
    assert np.array_equal(again.arrays()["input"], x)
    other = load_calibration("sample-images", [spec], pre, samples=24, heldout=6, seed=4)
    assert not np.array_equal(other.arrays()["input"], x)
    nchw = load_calibration("sample-images", [InputSpec("x", (1, 20, 24), "float32")],
                            {"layout": "NCHW", "color": "RGB", "mean": [0.0], "std": [255.0]},
                            samples=4, heldout=0, seed=0)
    assert nchw.arrays()["x"].shape == (4, 1, 20, 24) and 0 <= nchw.arrays()["x"].min() <= nchw.arrays()["x"].max() <= 1


def test_sample_images_refuse_a_non_image_model():
    from optimizer.errors import InputFileError
    from optimizer.quantize import InputSpec, load_calibration

    with pytest.raises(InputFileError, match="one image input"):
        load_calibration("sample-images", [InputSpec("x", (3,), "float32")], None, samples=2, heldout=0)


# ---------------------------------------------------------------- bad input: message, exit 2, no file

def _fails(run_cli, out: Path, *args, match: str) -> None:
    res = run_cli("quantize", *args, "--out", out, "--no-latency")
    assert res.exit_code == 2, (res.exit_code, res.stderr)
    assert match in res.stderr, res.stderr
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1, res.stderr
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]


@pytest.mark.slow
def test_calibration_shape_mismatch(digits, run_cli, tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, digits=np.zeros((20, 28, 28, 1), np.float32))
    _fails(run_cli, tmp_path / "q.tflite", digits["keras"], "--calib", bad,
           match="array 'digits' has shape [20, 28, 28, 1] float32; input 'digits' expects [N, 8, 8, 1] float32")
    ints = tmp_path / "ints.npz"
    np.savez(ints, digits=np.zeros((20, 8, 8, 1), np.uint8))
    _fails(run_cli, tmp_path / "q.tflite", digits["keras"], "--calib", ints, match="uint8")


@pytest.mark.slow
def test_empty_and_unreadable_calibration(digits, run_cli, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not an image")
    _fails(run_cli, tmp_path / "q.tflite", digits["keras"], "--calib", empty,
           match="no images")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "cat.jpg").write_bytes(b"\xff\xd8 this is not a jpeg")
    _fails(run_cli, tmp_path / "q.tflite", digits["keras"], "--calib", broken,
           match="cat.jpg: unreadable calibration image")
    _fails(run_cli, tmp_path / "q.tflite", digits["keras"], "--calib", tmp_path / "nope.npz",
           match="calibration source not found")


def test_unknown_zoo_name_and_bad_options(run_cli, tmp_path):
    _fails(run_cli, tmp_path / "q.tflite", "mobilenet_v9", match="unknown zoo network 'mobilenet_v9'")
    _fails(run_cli, tmp_path / "q.tflite", "mobilenet_v2", "--scheme", "int4",
           match="--scheme 'int4' unknown")
    _fails(run_cli, tmp_path / "q.tflite", "mobilenet_v2", "--scheme", "fp16", "--io", "int8",
           match="--io int8 needs an integer scheme")


@pytest.mark.slow
def test_operator_that_cannot_be_quantized(run_cli, tmp_path):
    """TFLite has no int8 CUMSUM kernel: the full-integer scheme must fail and name it."""
    from optimizer import lazy

    tf = lazy.tensorflow()
    keras = lazy.keras()

    class CumSum(keras.layers.Layer):
        def call(self, x):
            return tf.math.cumsum(x, axis=-1)

    inp = keras.Input((16,), name="x")
    model = keras.Model(inp, keras.layers.Dense(4)(CumSum()(keras.layers.Dense(8)(inp))))
    saved = tmp_path / "cumsum_savedmodel"
    with lazy.silenced_stderr():
        model.export(str(saved), format="tf_saved_model", verbose=False)
    _fails(run_cli, tmp_path / "q.tflite", saved, "--samples", 10,
           match="TFLite cannot quantize operator CUMSUM")
    res = run_cli("quantize", saved, "--out", tmp_path / "f.tflite", "--samples", 10,
                  "--allow-float-ops", "--no-latency", "--json")
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert [e["op"] for e in data["ops"]["float_ops"]] == ["CUMSUM"]
    assert data["ops"]["cpu_fallback_counts"]["CUMSUM"] == 1
    assert data["ops"]["cpu_segments"] == 1


# ---------------------------------------------------------------- compact files, parallel calibration

@pytest.mark.slow
def test_parallel_calibration_and_compaction_change_no_result(digits, digits_quantized, tmp_path):
    """Calibrating on 1 or 3 processes gives the same bytes (exact min/max merge); the compact
    file is the converter's model with identical vectors shared: same outputs, smaller, aligned."""
    from ai_edge_litert import schema_py_generated as schema

    from optimizer.quantize import quantize
    from optimizer.quantize.flatbuffer import compact

    kw = dict(calib=digits["npz"], samples=300, scheme="per-channel", seed=5, heldout=20,
              measure_latency_=False)
    one = quantize(digits["keras"], tmp_path / "one.tflite", calib_workers=1, compact=False, **kw)
    three = quantize(digits["keras"], tmp_path / "three.tflite", calib_workers=3, **kw)
    assert (one.calibration.workers, three.calibration.workers) == (1, 3)
    # Flatten in the batch-1 SavedModel reshapes to a fixed batch: calibrated sample by sample
    assert one.calibration.batch == three.calibration.batch == 1
    raw, packed = (tmp_path / "one.tflite").read_bytes(), (tmp_path / "three.tflite").read_bytes()
    assert compact(raw) == packed  # same calibration statistics, bit for bit
    assert compact(packed) == packed
    assert not one.sizes.compacted and one.sizes.converter_bytes == len(raw)
    assert three.sizes.compacted and three.sizes.converter_bytes == len(raw)
    assert len(packed) < len(raw)  # int64 zero points of weights and biases stored once
    x = digits["xte"]
    assert np.array_equal(_logits(raw, x), _logits(packed, x))
    model = schema.Model.GetRootAs(packed, 0)
    for i in range(model.BuffersLength()):
        buf = model.Buffers(i)
        if buf.DataLength():
            assert buf._tab.Vector(buf._tab.Offset(4)) % 16 == 0  # schema.fbs force_align: 16
    # the module fixture (1000 samples, default workers) and a 1-process run agree too
    again = quantize(digits["keras"], tmp_path / "again.tflite", calib=digits["npz"], samples=1000,
                     seed=7, calib_workers=1, measure_latency_=False)
    assert again.output_sha256 == digits_quantized["per-channel"][1].output_sha256


def _logits(tflite: bytes, x: np.ndarray) -> np.ndarray:
    from optimizer.quantize import TfliteRunner

    return next(iter(TfliteRunner(tflite).predict({"digits": x}).values()))


def test_corrupt_flatbuffer_is_a_format_error():
    from optimizer.errors import ModelFormatError
    from optimizer.quantize.flatbuffer import compact

    with pytest.raises(ModelFormatError, match="not a TFLite flatbuffer"):
        compact(b"\x00" * 64, "broken.tflite")
    with pytest.raises(ModelFormatError, match="broken.tflite: corrupt TFLite flatbuffer"):
        compact(b"\x10\x00\x00\x00TFL3" + b"\xff" * 8, "broken.tflite")
