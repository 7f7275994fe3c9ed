"""``DIV(1, SQRT(x))`` of an INT8 model becomes ``RSQRT(x)`` (magika_standard_v3_3, a
tf2onnx export, failed quantize with LiteRT's ``div.cc: data != zero_point`` on a zero variance)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def int8_reciprocal_sqrt():
    """x[16] -> 1 / sqrt(x * x) -> * 0.5, full-integer INT8, calibrated on |x| in [0.5, 8] (the
    quantized ranges include 0, so an input 0 makes the SQRT output its zero point)."""
    from optimizer import lazy
    from optimizer.graph.convert import keras_tflite_converter, quiet_conversion

    keras, tf = lazy.keras(), lazy.tensorflow()
    x = keras.Input((16,), name="x")
    y = keras.layers.Lambda(lambda v: tf.math.reciprocal(tf.sqrt(v * v + 1e-6)) * 0.5, name="norm")(x)
    model = keras.Model(x, y)
    rng = np.random.default_rng(0)

    def rep():
        for _ in range(32):
            yield [(rng.uniform(0.5, 8, (1, 16)) * rng.choice([-1, 1], (1, 16))).astype(np.float32)]

    conv = keras_tflite_converter(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    with quiet_conversion():
        return bytes(conv.convert())


def _ops(data: bytes) -> list[str]:
    from optimizer.lazy import litert_interpreter

    it = litert_interpreter()(model_content=data)
    return [o["op_name"] for o in it._get_ops_details()]


def _run(data: bytes, x: np.ndarray) -> np.ndarray:
    from optimizer.lazy import litert_interpreter

    it = litert_interpreter()(model_content=data)
    it.allocate_tensors()
    i, o = it.get_input_details()[0], it.get_output_details()[0]
    s, z = i["quantization"]
    it.set_tensor(i["index"], np.clip(np.rint(x / s) + z, -128, 127).astype(np.int8))
    it.invoke()
    s, z = o["quantization"]
    return (it.get_tensor(o["index"]).astype(np.float32) - z) * s


@pytest.mark.slow
def test_reciprocal_sqrt_becomes_rsqrt_and_takes_a_zero(int8_reciprocal_sqrt):
    from optimizer.quantize.flatbuffer import reciprocal_sqrt_as_rsqrt

    before = int8_reciprocal_sqrt
    assert "DIV" in _ops(before) and "SQRT" in _ops(before)
    x = np.linspace(0.5, 8, 16, dtype=np.float32)[None]
    x_zero = x.copy()
    x_zero[0, 3] = 0.0
    with pytest.raises(RuntimeError, match="zero_point|DIV"):  # LiteRT's integer DIV: no zero divisor
        _run(before, x_zero)
    after, n = reciprocal_sqrt_as_rsqrt(before)
    assert n == 1
    assert "DIV" not in _ops(after) and "SQRT" not in _ops(after) and "RSQRT" in _ops(after)
    got, want = _run(after, x), 0.5 / np.abs(x)
    scale = float(np.max(want)) / 127
    assert np.max(np.abs(got - want)) < 3 * scale  # the same function within a few output steps
    assert np.allclose(got, _run(before, x), atol=3 * scale)
    big = _run(after, x_zero)[0, 3]
    assert big >= np.max(want) - 3 * scale  # the zero maps to the largest output, not an error
    assert reciprocal_sqrt_as_rsqrt(after) == (after, 0)  # nothing left to rewrite
