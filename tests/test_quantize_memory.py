"""Quantization in bounded memory: calibration streams its samples, so peak
resident memory does not grow with ``--samples``; batch and processes follow ``--memory-budget``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- planning (no TensorFlow)

def test_plan_follows_the_budget_and_frame_bytes(monkeypatch):
    from optimizer.quantize import parallel_calibration as pc

    monkeypatch.setattr(pc, "default_workers", lambda samples: min(2, max(1, samples // 256)))
    small = pc.plan_calibration(1000, 4e9, frame_bytes=10e6, model_bytes=14e6)
    assert (small.batch, small.workers) == (pc.CALIB_BATCH, 2)     # mobilenet-sized frames: full batches
    assert small.estimate() <= 4e9
    big = pc.plan_calibration(1000, 4e9, frame_bytes=165e6, model_bytes=9e6)  # a 640x640 detector
    assert big.workers == 2 and 1 <= big.batch < pc.CALIB_BATCH and big.estimate() <= 4e9
    tight = pc.plan_calibration(1000, 2.2e9, frame_bytes=165e6, model_bytes=9e6)
    assert tight.workers == 1 and tight.estimate() <= 2.2e9         # no room for a second process
    # the batch does not depend on an explicit worker count (byte-identical models)
    forced = pc.plan_calibration(1000, 4e9, frame_bytes=165e6, model_bytes=9e6, workers=4)
    assert forced.batch == big.batch and forced.workers == 4
    assert pc.plan_calibration(10, 4e9, frame_bytes=1e6, model_bytes=1e6).batch == 10  # never above the samples


def test_memory_budget_parsing():
    from optimizer.errors import ConfigError
    from optimizer.quantize.api import parse_memory_budget

    assert parse_memory_budget("4GB") == 4_000_000_000
    assert parse_memory_budget("512MB") == 512_000_000
    assert parse_memory_budget("1 GiB") == 2 ** 30
    for bad in ("4 GHz", "-1GB", "lots"):
        with pytest.raises(ConfigError, match="--memory-budget"):
            parse_memory_budget(bad)


def test_bad_memory_budget_is_one_line_exit_2(run_cli, tmp_path):
    out = tmp_path / "m.tflite"
    res = run_cli("quantize", "mobilenet_v2", "--out", out, "--memory-budget", "4 GHz")
    assert res.exit_code == 2 and "--memory-budget" in res.stderr and "4GB" in res.stderr
    assert not out.exists()


def test_samples_are_the_same_whatever_the_batching():
    from optimizer.quantize import InputSpec, load_calibration

    spec = InputSpec("x", (8, 8, 3), "float32")
    pre = {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [127.5] * 3}
    for source in ("synthetic", "sample-images"):
        cal = load_calibration(source, [spec], pre, samples=10, heldout=3, seed=2)
        whole = cal.arrays()["x"]
        assert whole.shape == (10, 8, 8, 3)
        import numpy as np

        assert np.array_equal(np.concatenate([b["x"] for b in cal.batches("calib", 4)]), whole)
        # the held-out set does not depend on the number of calibration samples
        more = load_calibration(source, [spec], pre, samples=30, heldout=3, seed=2)
        assert np.array_equal(more.arrays("heldout")["x"], cal.arrays("heldout")["x"])
        assert np.array_equal(more.arrays()["x"][:10], whole)


# ---------------------------------------------------------------- peak RSS does not grow with samples

SIDE = 256  # 786 kB per float32 sample: 1000 samples held would be ~0.8 GB


def _tiny_keras(path: Path) -> Path:
    from optimizer import lazy

    keras = lazy.keras()
    keras.utils.set_random_seed(0)
    x = keras.Input((SIDE, SIDE, 3), name="image")
    y = keras.layers.Conv2D(4, 3, strides=8, activation="relu")(x)
    y = keras.layers.GlobalAveragePooling2D()(y)
    model = keras.Model(x, keras.layers.Dense(3)(y))
    model.save(path)
    return path


def _peak_rss(model: Path, samples: int, tmp_path: Path) -> tuple[int, dict]:
    """Quantize in a child process; its report's peak RSS (the child's own getrusage)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = tmp_path / f"m{samples}.tflite"
    proc = subprocess.run([sys.executable, "-m", "optimizer.cli", "quantize", str(model), "--out", str(out),
                           "--samples", str(samples), "--heldout", "4", "--calib-workers", "1",
                           "--no-latency", "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    return rep["peak_rss_bytes"], rep


@pytest.mark.slow
def test_peak_rss_does_not_grow_with_samples(tmp_path):
    model = _tiny_keras(tmp_path / "tiny.keras")
    few, rep_few = _peak_rss(model, 100, tmp_path)
    many, rep_many = _peak_rss(model, 1000, tmp_path)
    frame = SIDE * SIDE * 3 * 4
    assert rep_many["calibration"]["samples_used"] == 1000
    assert rep_many["calibration"]["batch"] == rep_few["calibration"]["batch"] == 32
    # holding the 900 extra samples once would add 0.7 GB; streaming keeps the peak flat
    assert many - few < 0.15 * 900 * frame, (few, many)
    assert many < rep_many["calibration"]["memory_budget_bytes"]
    print(f"peak RSS: {few / 1e6:.0f} MB with 100 samples, {many / 1e6:.0f} MB with 1000")


@pytest.mark.slow
def test_helpers_end_before_the_quantizer(tmp_path, monkeypatch):
    """Helper processes hold a TensorFlow runtime and model copies (ssd_mobilenet_v1_fpn: 1.57 GB):
    they exit once their ranges are in, before the merge and the converter's quantizer run."""
    import multiprocessing

    from optimizer.quantize import parallel_calibration as pc
    from optimizer.quantize import quantize

    alive: list[int] = []
    real_merge = pc.merge_calibration

    def merge_spy(models):
        alive.append(len(multiprocessing.active_children()))
        return real_merge(models)

    monkeypatch.setattr(pc, "merge_calibration", merge_spy)
    model = _tiny_keras(tmp_path / "tiny.keras")
    rep = quantize(model, tmp_path / "q.tflite", samples=64, heldout=4, calib_workers=2,
                   measure_latency_=False)
    assert rep.calibration.workers == 2
    assert alive == [0]


# ---------------------------------------------------------------- peak memory against the budget

def test_budget_warning_says_what_peaked_how_much_and_what_to_do():
    from optimizer.quantize.peak_memory import memory_budget_warning

    line = memory_budget_warning(12_460_000_000, 4_000_000_000, "the per-channel TFLite conversion")
    assert line is not None and "\n" not in line
    assert "peak memory 12.46 GB during the per-channel TFLite conversion" in line
    assert "more than --memory-budget 4.00 GB" in line
    assert "quantize where 12.5 GB is free" in line and "--memory-budget 13GB" in line
    assert "before quantizing began" in memory_budget_warning(5e9, 4e9, None)
    assert memory_budget_warning(4_000_000_000, 4_000_000_000, "x") is None  # at the budget: fine
    assert memory_budget_warning(None, 4_000_000_000, None) is None


def test_peak_stages_name_the_stage_that_last_raised_the_peak(monkeypatch):
    from optimizer.quantize import peak_memory as api

    marks = iter([100, 100, 300, 300, 250, 900, 900])  # VmHWM read at start and after each stage
    monkeypatch.setattr(api, "peak_rss_bytes", lambda: next(marks))
    peaks = api.PeakStages()
    assert peaks.after("loading") == 100 and peaks.stage is None  # the peak predates the stages
    assert peaks.after("fp32") == 300 and peaks.stage == "fp32"
    assert peaks.after("fidelity") == 300 and peaks.stage == "fp32"
    assert peaks.after("odd read") == 300 and peaks.stage == "fp32"  # never lower
    assert peaks.after("int8") == 900 and peaks.stage == "int8"
    assert peaks.after("latency") == 900 and peaks.stage == "int8"


@pytest.mark.slow
def test_quantize_warns_once_when_its_peak_exceeds_the_budget(run_cli, tmp_path):
    from optimizer.quantize import quantize

    model = _tiny_keras(tmp_path / "tiny.keras")
    common = ("--samples", "8", "--heldout", "2", "--calib-workers", "1", "--no-latency")
    res = run_cli("quantize", model, "--out", tmp_path / "q.tflite", "--memory-budget", "50MB", *common)
    assert res.exit_code == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "more than --memory-budget 0.05 GB" in ln
             and ln.startswith("warning: peak memory")]
    assert len(lines) == 1, res.stderr
    assert "resident" in res.stdout  # the table's peak memory row
    rep = quantize(model, tmp_path / "r.tflite", samples=8, heldout=2, calib_workers=1, measure_latency_=False,
                   memory_budget="1TB")
    assert rep.peak_rss_bytes and rep.peak_rss_bytes < 1e12
    assert not [w for w in rep.warnings if "--memory-budget" in w]
