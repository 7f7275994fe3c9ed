"""Export in bounded memory: the float activations that calibrate later INT8 parts are
kept on disk (:class:`optimizer.plan.calibration_data.CalibrationStore`), Keras calls are sized by
``--memory-budget`` and what the process already holds, so peak resident memory does not grow
with ``--samples``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_calibration_store_round_trip(tmp_path):
    from optimizer.errors import ModelFormatError
    from optimizer.plan.calibration_data import CalibrationStore

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 4, 5)).astype(np.float32), rng.normal(size=(4, 4, 5)).astype(np.float32)
    ids = rng.integers(0, 9, size=(7, 2)).astype(np.int64)
    store = CalibrationStore(tmp_path)
    store.put("x:0", a)
    store.put("x:0", b)
    store.put("shape", ids)
    both = np.concatenate([a, b])
    assert store.count("x:0") == 7
    assert np.array_equal(store.rows("x:0", 0, 7), both)
    assert np.array_equal(store.rows("x:0", 2, 5), both[2:5])
    assert np.array_equal(store.rows("x:0", 5, 99), both[5:])  # clipped at the end
    assert store.rows("shape", 1, 3).dtype == np.int64 and np.array_equal(store.rows("shape", 1, 3), ids[1:3])
    steps = list(store.representative(["x:0", "shape"])())
    assert len(steps) == 7 and set(steps[4]) == {"in0", "in1"}
    assert np.array_equal(steps[4]["in0"], both[4:5]) and np.array_equal(steps[4]["in1"], ids[4:5])
    with pytest.raises(ModelFormatError, match="x:0"):
        store.put("x:0", rng.normal(size=(2, 4, 6)).astype(np.float32))


def test_frames_per_call_follow_the_budget(zoo_graph):
    from optimizer.plan.calibration_data import frames_per_call

    g = zoo_graph("mobilenet_v2", "op", input_size=224)
    # the held bytes of this process are taken off the budget: a larger budget never gives fewer frames
    small, large = frames_per_call(g, budget=2e9), frames_per_call(g, budget=40e9)
    assert 1 <= small < large
    assert frames_per_call(g, budget=1e6) == 1  # at least one frame


def test_bad_memory_budget_is_one_line_exit_2(run_cli, tmp_path):
    plan = ROOT / "examples"  # never read: the size is refused first
    out = tmp_path / "art"
    res = run_cli("export", plan / "missing.json", "--out", out, "--memory-budget", "-1GB")
    assert res.exit_code == 2 and "--memory-budget" in res.stderr and "4GB" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()


# ---------------------------------------------------------------- peak RSS does not grow with samples
SIDE = 256
#: a budget that leaves each Keras call one frame (its share less the TensorFlow runtime), so
#: whatever the samples, calls hold the same; with more room calls take more frames by design
BUDGET = "1.6GB"
CUT_CHANNELS = 8  # the cut tensor: 256 x 256 x 8 float32 = 2.1 MB per sample


def _keras_model(path: Path) -> Path:
    from optimizer import lazy

    keras = lazy.keras()
    keras.utils.set_random_seed(0)
    x = keras.Input((SIDE, SIDE, 3), name="image")
    y = keras.layers.Conv2D(CUT_CHANNELS, 3, padding="same", activation="relu", name="wide")(x)
    y = keras.layers.Conv2D(4, 3, strides=8, activation="relu", name="narrow")(y)
    y = keras.layers.GlobalAveragePooling2D(name="pool")(y)
    keras.Model(x, keras.layers.Dense(3, name="logits")(y)).save(path)
    return path


_CHILD = r"""
import sys
from optimizer.cli import main
from optimizer.quantize.parallel_calibration import peak_rss_bytes
try:
    code = main(sys.argv[1:])
finally:
    print("PEAK", peak_rss_bytes(), file=sys.stderr)
sys.exit(code)
"""


def _export_peak(plan: Path, samples: int, out: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, "-q", "export", str(plan), "--out", str(out),
                           "--samples", str(samples), "--no-reference", "--memory-budget", BUDGET],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return int(next(ln.split()[1] for ln in proc.stderr.splitlines() if ln.startswith("PEAK")))


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak RSS read from /proc")
def test_export_peak_rss_does_not_grow_with_samples(tmp_path):
    import json

    from optimizer.plan import write_plan
    from optimizer.plan.manual_plan import plan_for_boundaries

    model = _keras_model(tmp_path / "wide.keras")
    plan = plan_for_boundaries(str(model), [1], dtype="int8")
    write_plan(plan, tmp_path / "plan.json")
    few = _export_peak(tmp_path / "plan.json", 20, tmp_path / "few")
    many = _export_peak(tmp_path / "plan.json", 320, tmp_path / "many")
    manifest = json.loads((tmp_path / "many" / "manifest.json").read_text())
    assert manifest["calibration"]["samples"] == 320
    assert len(manifest["parts"]) == 2 and manifest["parts"][1]["inputs"][0]["shape"] == [1, SIDE, SIDE, CUT_CHANNELS]
    # holding 300 more samples' input and cut activations would add 300 x 2.9 MB = 0.88 GB
    per_sample = SIDE * SIDE * (3 + CUT_CHANNELS) * 4
    assert many - few < 0.15 * 300 * per_sample, (few, many)
    assert many < 1.6e9
    print(f"export peak RSS: {few / 1e6:.0f} MB with 20 samples, {many / 1e6:.0f} MB with 320")


def test_batchnorm_passes_do_not_depend_on_the_memory_the_process_holds():
    """The batch-norm pass size changes the estimated statistics (each pass's batch statistics are
    averaged), so it must follow the graph and the budget only: the same seed gives the same
    weights however much memory the process happens to hold (a split export and its single-file
    reference built in one process used to get different passes, and different networks)."""
    import numpy as np

    from optimizer.graph import load_graph
    from optimizer.quantize.api import bn_frames_per_pass, parse_memory_budget

    g = load_graph("ssd_mobilenet_v2_fpnlite", "op")
    budget = parse_memory_budget("1.5GB")
    before = bn_frames_per_pass(g, budget)
    ballast = np.ones(600_000_000 // 8)  # 600 MB resident
    after = bn_frames_per_pass(g, budget)
    assert ballast.sum() > 0 and before == after >= 1
    assert bn_frames_per_pass(g, parse_memory_budget("8GB")) > before  # the budget still sizes them
