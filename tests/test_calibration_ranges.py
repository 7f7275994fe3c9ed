"""Calibration ranges recorded with LiteRT (optimizer.quantize.ranges): every activation's true
min/max, also where TFLite's ADD computes in place, and the same model from TensorFlow's wrapper
where the recorder does not cover a model."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from optimizer.graph.tflite_flatbuffer import read_model, write_model
from optimizer.quantize import ranges

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def residual():
    """x -> conv -> add(conv, x) -> relu: the conv output dies at the ADD, which TFLite may then
    compute into the conv output's buffer. Returns (float flatbuffer, keras model, branch model)."""
    from optimizer.lazy import keras as _keras, tensorflow

    keras, tf = _keras(), tensorflow()
    keras.utils.set_random_seed(3)
    x = keras.Input((8, 8, 4), batch_size=1, name="x")
    branch = keras.layers.Conv2D(4, 3, padding="same", name="branch")(x)
    y = keras.layers.ReLU(name="out")(keras.layers.Add(name="sum")([branch, x]))
    model = keras.Model(x, y)
    flat = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    return flat, model, keras.Model(x, [branch, keras.layers.Add()([branch, x])])


def _named(flat: bytes, ranges_by_index: dict[int, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    tensors = read_model(flat).subgraphs[0].tensors
    return {tensors[i].name.decode(): r for i, r in ranges_by_index.items()}


def test_ranges_are_what_the_tensors_hold_also_before_an_in_place_add(residual):
    flat, _, probe = residual
    rng = np.random.default_rng(0)
    frames = [rng.standard_normal((2, 8, 8, 4)).astype(np.float32) for _ in range(3)]
    got = _named(flat, ranges.record_ranges(flat, ({"x": f} for f in frames)))
    branch_vals, sum_vals = (np.concatenate(v) for v in zip(*(probe.predict(f, verbose=0) for f in frames)))
    branch = next(v for k, v in got.items() if "branch" in k and "sum" not in k and "out" not in k)
    np.testing.assert_allclose(branch, (branch_vals.min(), branch_vals.max()), rtol=1e-5)
    # the sum's range is wider: TensorFlow's wrapper reported it for the conv output (the fault)
    assert sum_vals.max() - sum_vals.min() > 1.2 * (branch_vals.max() - branch_vals.min())
    inp = got[next(k for k in got if k.endswith("x:0") or k.startswith("serving_default_x"))]
    all_frames = np.concatenate(frames)
    assert inp == (float(all_frames.min()), float(all_frames.max()))


def test_calibrated_model_quantizes_and_merges_like_the_wrappers(residual):
    from optimizer.quantize.flatbuffer import merge_calibration

    flat, _, _ = residual
    rng = np.random.default_rng(1)
    a, b = ({"x": rng.standard_normal((1, 8, 8, 4)).astype(np.float32)} for _ in range(2))
    both = ranges.calibrate(flat, [a, b])
    merged = merge_calibration([ranges.calibrate(flat, [a]), ranges.calibrate(flat, [b])])
    assert both is not None and both == merged  # min of mins, max of maxes: exact
    from tensorflow.lite.python.optimize import calibrator

    def stats(model: bytes) -> dict[int, tuple[float, float]]:
        return {i: (float(t.quantization.min[0]), float(t.quantization.max[0]))
                for i, t in enumerate(read_model(model).subgraphs[0].tensors)
                if t.quantization is not None and t.quantization.min is not None and len(t.quantization.min)}

    theirs = stats(bytes(calibrator.Calibrator(flat).calibrate(lambda: iter([a, b]))))
    ours = stats(both)
    assert set(ours) == set(theirs) and len(ours) == 3  # input, conv output, add+relu output
    for i, (lo, hi) in ours.items():  # the wrapper's are never narrower (its conv range is the sum's)
        assert theirs[i][0] <= lo + 1e-6 and theirs[i][1] >= hi - 1e-6 and lo <= hi


def test_models_with_several_subgraphs_are_left_to_tensorflows_wrapper(residual):
    flat = residual[0]
    model = read_model(flat)
    assert len(ranges.activation_tensors(model)) == 3  # input, conv output, add+relu output
    model.subgraphs.append(copy.deepcopy(model.subgraphs[0]))
    two = write_model(model)
    assert ranges.activation_tensors(read_model(two)) is None
    assert ranges.calibrate(two, iter(())) is None


def test_ranges_do_not_depend_on_the_threads(residual):
    flat = residual[0]
    rng = np.random.default_rng(2)
    frames = [{"x": rng.standard_normal((4, 8, 8, 4)).astype(np.float32)} for _ in range(2)]
    assert ranges.record_ranges(flat, frames, threads=2) == ranges.record_ranges(flat, frames, threads=1)


def test_ranges_recorded_in_several_passes_are_the_same(residual):
    """A budget too small for every activation at once: one pass per tensor group, same ranges."""
    flat = residual[0]
    rng = np.random.default_rng(4)
    frames = [{"x": rng.standard_normal((1, 8, 8, 4)).astype(np.float32)} for _ in range(3)]
    model = read_model(flat)
    tensors = ranges.activation_tensors(model)
    assert len(ranges.tensor_groups(model, tensors, 8 * 8 * 4 * 4)) == len(tensors)  # one tensor per pass
    whole = ranges.record_ranges(flat, frames)
    assert ranges.record_ranges(flat, lambda: iter(frames), group_bytes=1) == whole
    with pytest.raises(TypeError, match="callable"):
        ranges.record_ranges(flat, iter(frames), group_bytes=1)
