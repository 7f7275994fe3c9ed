"""Thermal fits on the real phone log stored in the repository
(search_spaces/thermal/traces/galaxy_c7pro_stress.csv.gz: Galaxy C7 Pro, one stress recording,
thermal zone 1 in whole °C, ~1.3 s logging stamped to the second): ``thermal fit`` then
``thermal eval`` on a held-out part, with the ridge reference on a one-sensor trace."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO

TRACE = REPO / "search_spaces" / "thermal" / "traces" / "galaxy_c7pro_stress.csv.gz"
INPUTS = "freq_cpu0_mhz,freq_cpu7_mhz,v_batt_mv"


def test_shipped_phone_log_reads_as_one_jittered_recording():
    from optimizer.thermal.trace import read_trace

    tr = read_trace(TRACE, "t_s", "t_zone1_c", INPUTS)
    # 1480 logged rows over 1906 s, stamped to the second (1 or 2 s apart): resampled onto 1 s
    assert len(tr.segments) == 1 and tr.dt_s == pytest.approx(1.0) and tr.resampled
    assert tr.n_rows == 1907 and tr.breaks == {"resets": 0, "gaps": 0, "dropped_rows": 0}
    temps = tr.segments[0].temps_c[:, 0]
    assert temps.min() == 31 and temps.max() == 50          # the stress run heats the SoC by 19 °C


def test_fit_then_eval_on_the_held_out_rise_beats_persistence_and_ridge(run_cli, tmp_path):
    """Fit on t >= 450 s (peak and cooling), score the held-out first 450 s (31 -> 41 °C): the
    default model is better than persistence and than the ridge reference 60 s ahead, and the ridge
    reference of a one-sensor trace is scored per start (its overall RMSE is the sensor's)."""
    out = tmp_path / "m.json"
    r = run_cli("thermal", "fit", TRACE, "--time", "t_s", "--temps", "t_zone1_c", "--inputs", INPUTS,
                "--train-from", "450", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert json.loads(out.read_text())["info"]["continuous_time"] is True
    r = run_cli("thermal", "eval", out, TRACE, "--horizons", "1,60", "--to", "450", "--json")
    assert r.exit_code == 0, r.stderr
    h1, h60 = json.loads(r.stdout)["scores"][:2]
    for s in (h1, h60):
        assert s["ridge_rmse_c"]["overall"] == pytest.approx(s["ridge_rmse_c"]["t_zone1_c"])
    # one step ahead everything sits on the 1 °C quantisation floor (~0.24 °C)
    assert h1["rmse_c"]["overall"] == pytest.approx(h1["persistence_rmse_c"]["overall"], rel=0.05)
    model, ridge, persistence = (h60[k]["overall"] for k in ("rmse_c", "ridge_rmse_c", "persistence_rmse_c"))
    assert model * 1.3 < persistence, (model, persistence)    # measured 1.47 vs 2.20 °C
    assert model < ridge < persistence * 1.2, (model, ridge)  # ridge 2.04 °C
