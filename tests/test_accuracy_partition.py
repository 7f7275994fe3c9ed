"""Accuracy per partition (INT8 head, INT8/FP16/FP32 wire, FP32/INT8 tail) of the digits CNN,
and ``dnnplan split --accuracy-data/--min-accuracy``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _digits import train_digits_cnn

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    model, data = train_digits_cnn()
    d = tmp_path_factory.mktemp("digits")
    model.save(d / "digits.keras")
    np.savez(d / "digits.npz", x=data["xte"], y=data["yte"], calib=data["xtr"][:128])
    return {"model": model, "keras": d / "digits.keras", "npz": d / "digits.npz", **data}


def test_int8_head_and_wire_lose_at_most_one_point_for_a_quarter_of_the_bytes(digits):
    from optimizer.plan.accuracy import partition_accuracy

    res = partition_accuracy(digits["model"], digits["xte"], digits["yte"], [1, 2, 3], calib=digits["xtr"][:128],
                             configs=[("int8", "int8", "fp32"), ("fp32", "fp32", "fp32"), ("int8", "int8", "int8"),
                                      ("fp32", "fp16", "fp32")])
    ref = res[0].reference_accuracy
    assert ref > 0.9, "the digits CNN did not train"
    floats = [r for r in res if (r.head_dtype, r.wire_dtype, r.tail_dtype) == ("fp32", "fp32", "fp32")]
    assert all(r.accuracy == pytest.approx(ref) for r in floats)  # cutting alone changes nothing
    int8 = [r for r in res if (r.head_dtype, r.wire_dtype, r.tail_dtype) == ("int8", "int8", "fp32")]
    ok = [r for r in int8 if r.loss_points <= 1.0 and r.wire_bytes <= 0.26 * r.wire_bytes_fp32]
    assert ok, [(r.split, r.accuracy, r.wire_bytes, r.wire_bytes_fp32) for r in int8]
    assert all(r.as_dict()["wire_ratio"] < 0.26 for r in int8)
    assert {r.samples for r in res} == {len(digits["yte"])}


def test_int8_wire_with_a_wrong_range_loses_accuracy(digits):
    """The wire quantizer is real: a calibration range 1000x too wide destroys the tensors."""
    from optimizer.plan.accuracy import _wire

    x = digits["xte"]
    good = _wire([x], "int8", [digits["xtr"]])[0]
    bad = _wire([x], "int8", [digits["xtr"] * 1000])[0]
    assert np.abs(good - x).max() <= 1 / 255 + 1e-6
    pred = lambda a: np.asarray(digits["model"](a, training=False)).argmax(axis=1)  # noqa: E731
    assert np.mean(pred(bad) == digits["yte"]) < np.mean(pred(good) == digits["yte"]) - 0.3


def test_split_with_min_accuracy_records_the_deployed_accuracy(run_cli, digits, tmp_path):
    res = run_cli("split", digits["keras"], "--device", "galaxy_j6", "--network", "wifi_10", "--granularity", "op",
                  "--solver", "exact", "--accuracy-data", digits["npz"], "--min-accuracy", "95%",
                  "--out", tmp_path / "plan.json")
    assert res.exit_code == 0, res.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    ex, acc = plan["predicted"]["extra"], plan["search"]["settings"]["accuracy"]
    assert ex["accuracy"] >= 0.95 and ex["accuracy_fp32"] == pytest.approx(acc["fp32_accuracy"])
    assert acc["samples"] == len(digits["yte"]) and acc["calibration_samples"] == 128
    assert acc["min_accuracy"] == 0.95 and plan["search"]["settings"]["min_accuracy"] == 0.95
    assert "accuracy of the deployed configuration" in res.stdout
    assert "--min-accuracy 0.95" in plan["provenance"]["command"]


@pytest.mark.parametrize("extra, message", [
    (["--min-accuracy", "0.999"], "minimum accuracy 0.9990 is above every split"),
    (["--min-accuracy", "1.5"], "--min-accuracy '1.5': expected a fraction in 0..1"),
])
def test_accuracy_errors(run_cli, digits, tmp_path, extra, message):
    res = run_cli("split", digits["keras"], "--device", "galaxy_j6", "--network", "wifi_10", "--granularity", "op",
                  "--solver", "exact", "--accuracy-data", digits["npz"], "--out", tmp_path / "plan.json", *extra)
    assert res.exit_code == 2 and message in res.stderr.replace("\n", ""), res.stderr
    assert not (tmp_path / "plan.json").exists()


def test_accuracy_options_checked_before_work(run_cli, tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((4, 8, 8, 1)), labels=np.zeros(4))
    for args, message in (
        (["mobilenet_v2", "--min-accuracy", "0.9"], "--min-accuracy needs --accuracy-data"),
        (["mobilenet_v2", "--accuracy-data", bad], "model 'mobilenet_v2' is not a .keras file"),
    ):
        res = run_cli("split", *args, "--device", "galaxy_j6", "--network", "wifi_10", "--out", tmp_path / "p.json")
        assert res.exit_code == 2 and message in res.stderr.replace("\n", ""), res.stderr
    from optimizer.errors import InputFileError
    from optimizer.plan.accuracy import load_labelled

    with pytest.raises(InputFileError, match="expected x"):
        load_labelled(bad)
