"""A sweep converts each sub-model once: :class:`ConversionMemo` copies a conversion made before
only when everything that makes the bytes is the same, and the copy equals a fresh conversion."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest


def _model(name: str = "head"):
    from optimizer.lazy import keras

    k = keras()
    k.utils.set_random_seed(0)
    x = k.Input((6, 6, 3), name="in0")
    y = k.layers.ReLU(name="r")(k.layers.Conv2D(4, 3, name="c")(x))
    return k.Model(x, y, name=name)


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _data(seed: int):
    from optimizer.plan.calibration_data import representative_dataset

    return representative_dataset([np.random.default_rng(seed).uniform(-1, 1, (4, 6, 6, 3)).astype(np.float32)])


@pytest.mark.slow
def test_memo_copies_only_the_same_conversion(tmp_path):
    from optimizer.plan.tflite_convert import ConversionMemo, convert_part

    memo = ConversionMemo(tmp_path / "memo")
    model = _model()
    fresh = convert_part(model, tmp_path / "fresh.tflite", "int8", _data(0))
    first = convert_part(model, tmp_path / "a.tflite", "int8", _data(0), memo=memo)
    again = convert_part(model, tmp_path / "b.tflite", "int8", _data(0), memo=memo)
    assert (memo.misses, memo.hits) == (1, 1) and _sha(first) == _sha(again) == _sha(fresh)
    # other calibration samples, weights, name (TFLite keeps it) or dtype: converted again
    convert_part(model, tmp_path / "c.tflite", "int8", _data(1), memo=memo)
    model.get_layer("c").bias.assign(np.ones(4, np.float32))
    convert_part(model, tmp_path / "d.tflite", "int8", _data(0), memo=memo)
    convert_part(_model("stage0"), tmp_path / "e.tflite", "int8", _data(0), memo=memo)
    convert_part(model, tmp_path / "f.tflite", "fp32", None, memo=memo)
    assert (memo.misses, memo.hits) == (5, 1)
    assert len({_sha(tmp_path / f"{c}.tflite") for c in "acdef"}) == 5
