"""Thermal fits on the real Odroid-XU3 trace stored in the repository
(search_spaces/thermal/traces/odroid_xu3_rise.csv.gz, full rate): fit on t >= 600 s, evaluate
open loop on the first 10 minutes (the heating transient, ~12 °C of rise)."""

from __future__ import annotations

import importlib.util

import pytest

from optimizer.shipped import shipped_root
from tests.conftest import REPO

TRACE = shipped_root() / "thermal" / "traces" / "odroid_xu3_rise.csv.gz"
TEMPS, INPUTS = "t_a15_core*_c,t_gpu_c", "p_a7_w,p_a15_w,p_mem_w,p_gpu_w"


def _published():
    spec = importlib.util.spec_from_file_location("bench_thermal_fit", REPO / "benchmarks" / "bench_thermal_fit.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.PUBLISHED_A, mod.PUBLISHED_B


@pytest.fixture(scope="module")
def odroid():
    from optimizer.thermal.trace import read_trace

    trace = read_trace(TRACE, "t_s", TEMPS, INPUTS)
    assert trace.n_rows == 41716 and trace.dt_s == pytest.approx(0.1) and len(trace.segments) == 1
    return trace.window(600.0, None), trace.window(None, 600.0)


@pytest.mark.parametrize("kind", ["linear", "rc"])
def test_default_fits_beat_published_and_persistence_open_loop(odroid, kind):
    from optimizer.thermal.fit import evaluate, fit_model, fixed_model

    train, test = odroid
    a, b = _published()
    published = fixed_model(a, b, 0.1, train.temp_names, train.input_names, source="data README")
    fitted = fit_model(train, kind)
    pub_open = evaluate(published, test, [1])[-1].rmse_c["overall"]
    fit_scores = evaluate(fitted, test, [1])
    fit_open = fit_scores[-1].rmse_c["overall"]
    persistence = fit_scores[-1].persistence_rmse_c["overall"]
    assert pub_open > 6.0 and persistence > 6.0  # ~7.9 and ~8.2 °C: the transient is ~12 °C
    assert fit_open <= 2.0, (kind, fit_open)     # the floor of the validated fit step (plain 0.1 s least squares is worse)
    assert fitted.continuous_time and fitted.info["fit_step_s"] > 0.1  # step chosen on held-out data
    assert len(fitted.info.get("validation") or fitted.info["step_validation"]) >= 3


def test_cli_fit_and_eval_on_the_compressed_trace(run_cli, tmp_path):
    out = tmp_path / "m.json"
    r = run_cli("thermal", "fit", TRACE, "--time", "t_s", "--temps", TEMPS, "--inputs", "p_*_w",
                "--train-from", "600", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert "continuous-time" in r.stderr and "41716" not in r.stderr  # 35716 training rows
    r = run_cli("thermal", "eval", out, TRACE, "--horizons", "1,600", "--to", "600", "--json")
    assert r.exit_code == 0, r.stderr
    import json

    scores = json.loads(r.stdout)["scores"]
    assert scores[-1]["rmse_c"]["overall"] <= 2.0 < 6.0 < scores[-1]["persistence_rmse_c"]["overall"]
