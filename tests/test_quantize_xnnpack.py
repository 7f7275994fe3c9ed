"""INT8 graphs that stay on XNNPACK: delegation read from LiteRT, one test per rewrite (the operator
leaves the builtin kernels and the outputs stay within INT8 tolerance of FP32), mixed precision
and the report's summary line, ``profile --delegate-report``."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.slow

SHAPE = (1, 16, 16, 8)


def _convert(fn, shape=SHAPE, int8=True, seed=0):
    """A tf.function of one [1,16,16,8] input around two 1x1 convolutions, as an FP32 or INT8 .tflite."""
    from optimizer import lazy

    tf = lazy.tensorflow()
    rng = np.random.default_rng(seed)
    w1 = tf.constant(rng.normal(size=(1, 1, shape[-1], 8)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
    def model(x):
        y = fn(tf.nn.conv2d(x, w1, 1, "SAME"))
        w2 = tf.constant(rng.normal(size=(1, 1, y.shape[-1], 4)).astype(np.float32))
        return tf.nn.conv2d(y, w2, 1, "SAME")

    conv = tf.lite.TFLiteConverter.from_concrete_functions([model.get_concrete_function()], model)
    if int8:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: (
            [np.random.default_rng(i).normal(size=shape).astype(np.float32) * 2] for i in range(16))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    from optimizer.graph.tflite_flatbuffer import with_signature
    from optimizer.quantize.convert import quiet

    with quiet():
        return with_signature(bytes(conv.convert()))


def _outputs(data, xs):
    from optimizer.quantize.evaluate import TfliteRunner

    runner = TfliteRunner(data, 1)
    name = runner.output_names[0]
    return np.concatenate([runner.run(runner.feed({next(iter(runner._in)): x}))[name] for x in xs])


def _sqnr(ref, got):
    from optimizer.quantize.evaluate import sqnr_db

    return sqnr_db(ref, got)


def _assert_int8_tolerance(fp32, int8, rewritten):
    """Within INT8 tolerance: as close to FP32 as the quantizer's own model (1 dB slack), >= 12 dB."""
    xs = [np.random.default_rng(100 + i).normal(size=SHAPE).astype(np.float32) * 2 for i in range(8)]
    ref, q, r = _outputs(fp32, xs), _outputs(int8, xs), _outputs(rewritten, xs)
    assert _sqnr(ref, r) >= min(_sqnr(ref, q) - 1.0, 30.0) and _sqnr(ref, r) >= 12.0


def _tf():
    from optimizer import lazy

    return lazy.tensorflow()


def _keras():
    from optimizer import lazy

    return lazy.keras()


def _cases():
    tf = _tf()
    return {
        "hard_swish": ("HARD_SWISH", lambda y: y * tf.nn.relu6(y + 3.0) / 6.0),
        "clamp": (("MINIMUM", "RELU"), lambda y: y * tf.clip_by_value(tf.reduce_mean(y, [1, 2], keepdims=True) * 0.2 + 0.5, 0.0, 1.0)),
        "scalar_add": ("ADD", lambda y: y * tf.sigmoid(y) + 1e-6),
        "resize_nearest": ("RESIZE_NEAREST_NEIGHBOR", lambda y: tf.image.resize(y, (32, 32), "nearest")),
        "tile_broadcast": ("TILE", lambda y: tf.reshape(
            tf.tile(tf.reshape(y, (1, 16, 1, 16, 8)), (1, 1, 2, 1, 1)), (1, 32, 16, 8))),
        "transposed_concat": ("TRANSPOSE", lambda y: tf.transpose(tf.concat(
            [tf.transpose(y, [0, 3, 1, 2]), tf.transpose(y * 0.5, [0, 3, 1, 2])], 1), [0, 2, 3, 1])),
        "global_average_pool": ("AVERAGE_POOL_2D", lambda y: tf.nn.avg_pool2d(y, 16, 16, "VALID")),
        # Keras' adaptive pooling at the input's own size (AlexNet/VGG heads at 224x224)
        "adaptive_pool_identity": (("GATHER", "AVERAGE_POOL_2D"),
                                   lambda y: _keras().layers.AdaptiveAveragePooling2D((16, 16))(y)),
        # per-channel slopes of both signs and above 1 (mediapipe's landmark models have such)
        "prelu": ("PRELU", _prelu(np.array([-1.2, -0.3, 0.0, 0.1, 0.25, 0.7, 1.0, 1.3]))),
    }


def _prelu(alpha):
    """Keras' PReLU (one slope per channel), which the converter lowers to PRELU."""
    keras = _keras()
    layer = keras.layers.PReLU(keras.initializers.Constant(alpha), shared_axes=[1, 2])
    layer.build(SHAPE)  # its slope variable made outside the traced function
    return layer


@pytest.mark.parametrize("rule", ["hard_swish", "clamp", "scalar_add", "resize_nearest", "tile_broadcast",
                                  "transposed_concat", "global_average_pool", "adaptive_pool_identity", "prelu"])
def test_rewrite_keeps_the_graph_on_xnnpack_within_int8_tolerance(rule):
    from optimizer.quantize.delegation import host_delegation
    from optimizer.quantize.rewrites import rewrite_for_xnnpack

    ops, fn = _cases()[rule]
    ops = (ops,) if isinstance(ops, str) else ops
    fp32, int8 = _convert(fn, int8=False), _convert(fn)
    before = host_delegation(int8)
    # TRANSPOSE runs inside XNNPACK: the rewrite removes the operators themselves
    seen = {o.op for o in before.ops} if "TRANSPOSE" in ops else set(before.outside_counts())
    assert set(ops) <= seen, f"the converter no longer produces the {rule} pattern ({seen})"
    rewritten, counts = rewrite_for_xnnpack(int8, rule, only=(rule,))
    assert counts.get(rule, 0) >= 1
    after = host_delegation(rewritten)
    left = {o.op for o in after.ops} if "TRANSPOSE" in ops else set(after.outside_counts())
    assert not set(ops) & left
    assert after.partitions == 1 and not after.outside
    _assert_int8_tolerance(fp32, int8, rewritten)


def test_resize_and_concat_rewrites_are_exact():
    """Nearest resize, tile, the transposed concatenation and the identity adaptive pooling move
    bytes only: bit-identical outputs."""
    from optimizer.quantize.rewrites import rewrite_for_xnnpack

    xs = [np.random.default_rng(7).normal(size=SHAPE).astype(np.float32)]
    for rule in ("resize_nearest", "tile_broadcast", "transposed_concat", "adaptive_pool_identity"):
        int8 = _convert(_cases()[rule][1])
        rewritten, _ = rewrite_for_xnnpack(int8, rule, only=(rule,))
        assert np.array_equal(_outputs(int8, xs), _outputs(rewritten, xs)), rule


@pytest.mark.parametrize(("alpha", "op"), [
    ([0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 0.95, -0.5], "ADD"),  # every alpha < 1
    ([1.05, 1.1, 1.3, 1.5, 2.0, 1.2, 1.05, 3.0], "SUB"),  # every alpha > 1
])
def test_prelu_with_slopes_on_one_side_of_one_takes_two_operators(alpha, op):
    from optimizer.quantize.inspect import analyse_tflite
    from optimizer.quantize.rewrites import rewrite_for_xnnpack

    fn = _prelu(np.array(alpha))
    fp32, int8 = _convert(fn, int8=False), _convert(fn)
    rewritten, counts = rewrite_for_xnnpack(int8, "prelu", only=("prelu",))
    assert counts == {"prelu": 1}
    names = [o.op for o in analyse_tflite(rewritten, "r").ops]
    assert names.count("MUL") == 1 and op in names and "PRELU" not in names
    _assert_int8_tolerance(fp32, int8, rewritten)


def test_mixed_tries_rewritten_prelu_in_float():
    """PReLU rewritten into the delegate is still a float candidate for --mixed auto (read from the
    model before the rewrites), under the float model's output name."""
    from optimizer.quantize.mixed import float_candidates
    from optimizer.quantize.rewrites import rewrite_for_xnnpack

    fn = _prelu(np.linspace(-0.5, 1.5, 8))
    fp32, int8 = _convert(fn, int8=False), _convert(fn)
    rewritten, _ = rewrite_for_xnnpack(int8, "prelu")
    assert float_candidates(rewritten, fp32, 1) == {}
    found = float_candidates(rewritten, fp32, 1, before=int8)
    assert list(found) == ["PRELU"] and len(found["PRELU"]) == 1


def test_clamp_without_a_requantizing_producer_becomes_a_mul_by_one():
    """A clamp after a reshape (which cannot requantize) is a MUL by one saturating into its range."""
    from optimizer.quantize.delegation import host_delegation
    from optimizer.quantize.rewrites import rewrite_for_xnnpack

    tf = _tf()
    int8 = _convert(lambda y: tf.clip_by_value(tf.transpose(y, [0, 2, 1, 3]), 0.0, 1.0))
    assert {"RELU_0_TO_1", "MINIMUM"} & set(host_delegation(int8).outside_counts())
    rewritten, counts = rewrite_for_xnnpack(int8, "clamp", only=("clamp",))
    names = [o.op for o in host_delegation(rewritten).ops]
    assert "RELU_0_TO_1" not in names and "MINIMUM" not in names
    assert counts.get("clamp", 0) >= 1


def test_quantize_reports_partitions_rewrites_mixed_and_summary(tmp_path):
    """The report's delegation, mixed-precision and summary on a small Keras model with hard-swish
    and softmax (INT8 softmax has no XNNPACK kernel: mixed auto tries it in float)."""
    from optimizer import lazy
    from optimizer.quantize import quantize

    keras = lazy.keras()
    keras.utils.set_random_seed(0)
    inp = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(16, 3, padding="same")(inp)
    x = keras.layers.Activation("hard_swish")(x)
    x = keras.layers.DepthwiseConv2D(3, padding="same")(x)
    x = keras.layers.Activation("hard_swish")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    out = keras.layers.Dense(10, activation="softmax")(x)
    model = keras.Model(inp, out, name="hswish_net")
    off = quantize(model, tmp_path / "off.tflite", samples=16, heldout=8, runs=5, warmup=1, rewrite=False)
    assert off.delegation.quantized.ops_outside.get("HARD_SWISH") == 2
    assert off.delegation.rewrites == {}
    rep = quantize(model, tmp_path / "auto.tflite", samples=16, heldout=8, runs=5, warmup=1, mixed="auto")
    d = rep.delegation
    assert d.converted.ops_outside.get("HARD_SWISH") == 2 and d.rewrites.get("hard_swish") == 2
    assert "HARD_SWISH" not in d.quantized.ops_outside
    assert d.quantized.segments and all(s.median_ms >= 0 for s in d.quantized.segments)
    assert rep.mixed is not None and rep.mixed.int8_mac_share >= 0.8
    assert all(t.op in ("SOFTMAX",) for t in rep.mixed.trials)
    assert rep.summary and "hard_swish x2" in rep.summary
    assert rep.fidelity.outputs[0].top1_agreement >= 0.8
    doc = json.loads(rep.model_dump_json())
    assert doc["delegation"]["fp32"]["delegate"] == "XNNPACK"


def test_mixed_keeps_float_nodes_through_the_converter(tmp_path):
    """Denylisted nodes come out float between DEQUANTIZE and QUANTIZE, from the stored calibration."""
    from optimizer.quantize.calibration import load_calibration
    from optimizer.quantize.convert import convert_quantized, model_from_keras
    from optimizer.quantize.inspect import analyse_tflite
    from optimizer import lazy

    keras = lazy.keras()
    keras.utils.set_random_seed(1)
    inp = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, padding="same", name="c1")(inp)
    x = keras.layers.Activation("hard_swish", name="hs")(x)
    out = keras.layers.Conv2D(4, 1, name="c2")(x)
    src = model_from_keras(keras.Model(inp, out), "tiny")
    cal = load_calibration("synthetic", src.inputs, None, samples=8, heldout=0, seed=0, workdir=tmp_path)
    store: dict = {}
    full = convert_quantized(src, "per-channel", cal, "float", calibrated=store)
    assert "calibrated" in store
    hs = [o.output for o in analyse_tflite(full).ops if o.op == "HARD_SWISH"]
    mixed = convert_quantized(src, "per-channel", cal, "float", float_nodes=hs, calibrated=store)
    floats = [o.op for o in analyse_tflite(mixed).float_ops]
    assert floats == ["HARD_SWISH"]


def test_profile_delegate_report(tmp_path, run_cli):
    fn = _cases()["hard_swish"][1]
    path = tmp_path / "hs.tflite"
    path.write_bytes(_convert(fn))
    res = run_cli("profile", path, "--delegate-report", "--runs", "3", "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ops_outside"] == {"HARD_SWISH": 1} and doc["partitions"] == 2
    assert any(s["segment"] == "HARD_SWISH" and not s["delegated"] for s in doc["segments"])
    bad = run_cli("profile", "mobilenet_v2", "--delegate-report")
    assert bad.exit_code == 2 and "--delegate-report reads a .tflite file" in bad.stderr.replace("\n", "")


def test_segment_timing_per_operator_times_every_operator_alone():
    from optimizer.quantize.delegation import time_segments

    t = time_segments(_convert(_cases()["hard_swish"][1]), 1, 3, 1, per_operator=True)
    assert sorted(s.ops[0] for s in t.segments) == sorted(o.index for o in t.delegation.ops)
    assert all(len(s.ops) == 1 and s.median_ms > 0 for s in t.segments)
    by_label = {s.label: s for s in t.segments}
    assert [s.label for s in t.segments].count("CONV_2D") == 2 and by_label["CONV_2D"].delegated
    assert not by_label["HARD_SWISH"].delegated


def test_a_busy_host_during_the_mixed_trials_is_said():
    """Timing trials share the cores with other processes: their CPU share is measured and a share
    below BUSY_CPU_SHARE puts one warning in the report (the float/INT8 choice may differ)."""
    import subprocess
    import sys
    import time

    from optimizer.quantize.api import BUSY_CPU_SHARE, busy_host_warning
    from optimizer.quantize.evaluate import TfliteRunner, measure_latency_pair
    from optimizer.quantize.report import MixedInfo, MixedTrialInfo

    # trials long enough (about 0.1 s) for the hogs to take their share: a burst of a few
    # milliseconds can run before the scheduler gets round to the hogs
    data = _convert(lambda y: y * 2.0, shape=(1, 256, 256, 8), int8=False)
    first, second = TfliteRunner(data, 2), TfliteRunner(data, 2)
    assert first.output_names  # loads the interpreter
    sample = {name: np.zeros((1, 256, 256, 8), np.float32) for name in first._in}
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        time.sleep(0.3)
        busy, _ = measure_latency_pair(first, second, sample, runs=100, warmup=2)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert busy.cpu_share is not None and busy.cpu_share < BUSY_CPU_SHARE, busy
    trial = MixedTrialInfo(op="PRELU", ops=3, current_ms=1.0, candidate_ms=1.1, sqnr_db=30.0, kept=False,
                           cpu_share=busy.cpu_share)
    line = busy_host_warning(MixedInfo(mode="auto", float_op_counts={}, int8_mac_share=1.0, trials=[trial]), 2)
    assert line is not None and "host was busy during the timing trials" in line and "\n" not in line
    idle = trial.model_copy(update={"cpu_share": 0.97})
    assert busy_host_warning(MixedInfo(mode="auto", float_op_counts={}, int8_mac_share=1.0, trials=[idle]), 2) is None
