"""Thermal model fitting from traces: synthetic recovery, evaluation, CLI and bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from optimizer.errors import ConfigError, InputFileError
from optimizer.thermal.fit import evaluate, fit_model, fixed_model, load_model, save_model
from optimizer.thermal.rc import RCNetwork
from optimizer.thermal.trace import read_trace


def _network() -> RCNetwork:
    g = np.array([[0, 0.4, 0.0], [0.4, 0, 0.6], [0.0, 0.6, 0]])
    return RCNetwork(("die", "board", "skin"), ("p_cpu", "p_gpu"), np.array([2.0, 10.0, 40.0]), g,
                     np.array([0.0, 0.05, 0.25]), np.array([[1.0, 0.3], [0.0, 0.7], [0.0, 0.0]]))


@pytest.fixture(scope="module")
def synthetic_csv(tmp_path_factory):
    """A 1 s trace of a known 3-node network under random power steps, with a gap in the middle."""
    net = _network()
    rng = np.random.default_rng(7)
    n = 3000
    steps = np.repeat(rng.uniform(0, [3.0, 2.0], size=(n // 60 + 1, 2)), 60, axis=0)[:n]
    x = net.discretise(1.0).simulate(np.full(3, 24.0), steps[:-1], 24.0)
    temps = x + rng.normal(0, 0.02, x.shape)
    t = np.arange(n, dtype=float)
    t[1500:] += 500.0                                  # a gap: never predicted across
    df = pd.DataFrame({"time_s": t, "t_die_c": temps[:, 0], "t_board_c": temps[:, 1],
                       "t_skin_c": temps[:, 2], "p_cpu": steps[:, 0], "p_gpu": steps[:, 1]})
    path = tmp_path_factory.mktemp("trace") / "synthetic.csv"
    df.to_csv(path, index=False)
    return path, net


def test_rc_fit_recovers_time_constants_within_5_percent(synthetic_csv, tmp_path):
    path, net = synthetic_csv
    tr = read_trace(path, "time_s", "t_*_c", "p_*")
    assert len(tr.segments) == 2 and tr.dt_s == pytest.approx(1.0)
    model = fit_model(tr, "rc")
    true = net.time_constants_s()
    fitted = model.time_constants_s()
    np.testing.assert_allclose(fitted, true, rtol=0.05)
    # steady-state gains recovered too (ambient 24 °C was not given to the fit)
    np.testing.assert_allclose(model.info["zero_input_steady_c"], 24.0, atol=0.3)
    np.testing.assert_allclose(model.B[:, 0] / model.B[0, 0], net.continuous()[1][:, 0] / net.continuous()[1][0, 0],
                               atol=0.05)
    out = tmp_path / "rc.json"
    save_model(model, out)
    again = load_model(out)
    np.testing.assert_allclose(again.Ad, model.Ad)
    scores = {s.label: s for s in evaluate(again, tr, [1, 60])}
    assert scores["open loop"].rmse_c["overall"] < 0.05
    assert scores["60 steps"].rmse_c["overall"] < scores["60 steps"].persistence_rmse_c["overall"] / 10
    # re-discretised exactly at another step: a 2 s model predicts the 2 s subsampled trace
    Ad2, _, _ = again.discrete(2.0)
    np.testing.assert_allclose(Ad2, net.discretise(2.0).Ad, atol=0.01)


def test_linear_fit_one_step_and_window(synthetic_csv):
    path, net = synthetic_csv
    tr = read_trace(path, "time_s", "t_*_c", "p_*")
    lin = fit_model(tr, "linear")
    np.testing.assert_allclose(lin.Ad, net.discretise(1.0).Ad, atol=0.02)
    s1 = evaluate(lin, tr, [1])[0]
    assert s1.rmse_c["overall"] < 0.035                    # noise 0.02 °C, one step
    short = fit_model(tr, "linear", window=200)
    assert short.info["transitions"] == 200
    assert lin.continuous_time                             # real matrix logarithm: any step
    np.testing.assert_allclose(lin.discrete(2.0)[0], net.discretise(2.0).Ad, atol=0.03)


def test_published_matrices_evaluate_as_fixed_model(synthetic_csv):
    path, net = synthetic_csv
    tr = read_trace(path, "time_s", "t_*_c", "p_*")
    d = net.discretise(1.0)
    exact = fixed_model(d.Ad, d.Bd, 1.0, tr.temp_names, tr.input_names, c=d.ed * 24.0)
    ol = evaluate(exact, tr, [5])[-1]
    assert ol.rmse_c["overall"] < 0.03 < ol.persistence_rmse_c["overall"]


@pytest.fixture()
def small_csv(tmp_path):
    def _write(rows: list[list], name="t.csv", header="t_s,temp_a_c,temp_b_c,p_w"):
        p = tmp_path / name
        p.write_text(header + "\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
        return p
    return _write


def test_cli_fit_and_eval_roundtrip(run_cli, synthetic_csv, tmp_path):
    path, _ = synthetic_csv
    out = tmp_path / "lin.json"
    r = run_cli("thermal", "fit", path, "--time", "time_s", "--temps", "t_die_c,t_b*_c,t_skin_c",
                "--inputs", "p_*", "--train-from", "0", "--train-to", "1200", "--out", out)
    assert r.exit_code == 0, r.stderr
    model = json.loads(out.read_text())
    assert model["schema"] == "dnnplan.thermal-model" and model["kind"] == "linear"
    assert model["temps"] == ["t_die_c", "t_board_c", "t_skin_c"]
    r = run_cli("thermal", "eval", out, path, "--horizons", "1,10,60s", "--from", "1200", "--json")
    assert r.exit_code == 0, r.stderr
    scores = json.loads(r.stdout)["scores"]
    assert [s["steps"] for s in scores] == [1, 10, 60, None]
    assert all(s["rmse_c"]["overall"] < s["persistence_rmse_c"]["overall"] for s in scores[1:])
    r = run_cli("thermal", "eval", out, path)
    assert r.exit_code == 0 and "open loop" in r.stdout and "t_skin_c" in r.stdout


@pytest.mark.parametrize("rows, args, message", [
    ([[0, 30, 31, 1.0], [1, 30.1, 31, 1.0]], ("--temps", "temp_c*"), "column 'temp_c\\*' not found; columns found: t_s, temp_a_c"),
    ([[0, 30, 31, 1.0], [1, "hot", 31, 1.0], [2, 30, 31, 1]], (), "row 2 \\(line 3\\), column 'temp_a_c': value 'hot'"),
    ([[0, 30, 31, 1.0], [1, 30, 31, 1.0], [2, 30, "nan", 1]], (), "row 3 \\(line 4\\), column 'temp_b_c'"),
    ([[2, 30, 31, 1.0], [1, 30, 31, 1.0], [0, 30, 31, 1]], (), "time column 't_s' never increases"),
    ([[0, "", 31, 1.0], [1, "", 31, 1.0], [2, "", 31, 1]], (),
     "column 'temp_a_c' has no numeric value in 3 rows"),
    ([[0, 30, 31, 1.0], [0, 30, 31, 1.0], [0, 30, 31, 1]], (), "never increases"),
    ([[0, 30, 31, 1.0], [1, 30.2, 31, 1.0], [2, 30.3, 31, 1]], (), "2 transitions to fit, but the linear model has 4"),
])
def test_cli_bad_traces_exit_2_and_write_nothing(run_cli, small_csv, tmp_path, rows, args, message):
    path = small_csv(rows)
    out = tmp_path / "m.json"
    temps = dict(zip(args[::2], args[1::2], strict=True)).get("--temps", "temp_*_c")
    r = run_cli("thermal", "fit", path, "--time", "t_s", "--temps", temps, "--inputs", "p_w", "--out", out)
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1
    import re

    assert re.search(message, " ".join(r.stderr.split())), r.stderr
    assert not out.exists() and not list(tmp_path.glob(".m.json*"))


def test_rc_needs_more_rows_than_parameters(small_csv):
    path = small_csv([[0, 30, 31, 1.0], [1, 30.2, 31, 1.0], [2, 30.3, 31, 1]])
    with pytest.raises(ConfigError, match="parameters"):
        fit_model(read_trace(path, "t_s", "temp_*_c", "p_w"), "rc")


def test_irregular_sampling_is_resampled_and_gaps_split(small_csv):
    rows = [[t, 30 + 0.01 * t, 31, 1.0] for t in (0, 1, 2.3, 3, 4, 5.4, 6, 100, 101, 102)]
    tr = read_trace(small_csv(rows), "t_s", "temp_*_c", "p_w")
    assert tr.resampled and len(tr.segments) == 2
    np.testing.assert_allclose(np.diff(tr.segments[0].times_s), 1.0)
    assert tr.segments[0].temps_c[3, 0] == pytest.approx(30.03)
    with pytest.raises(InputFileError, match="no such thermal trace file"):
        read_trace(small_csv(rows).with_name("missing.csv"), "t_s", "temp_*_c", "p_w")


# -- logs as loggers write them ------------------------------------------------------------------
PHONE_TEMPS, PHONE_INPUTS = "t_*_c", "util_*,freq_*,p_battery_w"


@pytest.fixture(scope="module")
def phone_logs(tmp_path_factory):
    """Synthetic 1 Hz phone logs (13 sensors, 19 inputs): 3 concatenated recordings to fit, and a
    recording from another seed (another sample interval) to evaluate on."""
    from optimizer.thermal.phone_log import make_phone_log

    d = tmp_path_factory.mktemp("phone")
    fit_log, other = d / "log.csv.gz", d / "other.csv"
    make_phone_log(seed=0, recordings=3).to_csv(fit_log, index=False)
    make_phone_log(seed=1, recordings=1).to_csv(other, index=False)
    return fit_log, other


def test_multi_recording_jittered_log_segments_are_reported(phone_logs):
    tr = read_trace(phone_logs[0], "time_s", PHONE_TEMPS, PHONE_INPUTS)
    assert len(tr.temp_names) == 13 and len(tr.input_names) == 19 and 2900 < tr.n_rows < 3200
    assert tr.breaks == {"resets": 2, "gaps": 1, "dropped_rows": 0} and len(tr.segments) == 4
    assert tr.resampled and 1.02 <= tr.dt_s <= 1.04
    assert "2 time reset(s) (new recordings), 1 gap(s)" in tr.describe() and "linear interpolation" in tr.describe()
    for s in tr.segments:
        np.testing.assert_allclose(np.diff(s.times_s), tr.dt_s)


def test_phone_log_fit_predicts_another_recording_60s_ahead(run_cli, phone_logs, tmp_path):
    fit_log, other = phone_logs
    out = tmp_path / "phone.json"
    r = run_cli("thermal", "fit", fit_log, "--time", "time_s", "--temps", PHONE_TEMPS, "--inputs", PHONE_INPUTS,
                "--out", out)
    assert r.exit_code == 0, r.stderr
    assert "4 segment(s)" in r.stderr and "2 time reset(s)" in r.stderr
    r = run_cli("thermal", "eval", out, other, "--horizons", "1,10,60s", "--json")
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["dt_s"] != pytest.approx(json.loads(out.read_text())["dt_s"], rel=1e-3)  # another step
    by = {s["steps"]: s for s in res["scores"]}
    h60 = round(60 / res["dt_s"])
    assert by[h60]["rmse_c"]["overall"] * 2.5 <= by[h60]["persistence_rmse_c"]["overall"], by[h60]


def test_discrete_model_gets_the_trace_resampled_onto_its_step_at_any_ratio(synthetic_csv, run_cli, tmp_path):
    """A discrete-only model (here the exact 2 s and 0.5 s discretisations of the network that made
    the 1 s trace) scores a trace at any step: the trace is resampled onto the model's step, inputs
    averaged over each step under a zero-order hold."""
    from optimizer.thermal.fit import align_trace

    path, net = synthetic_csv
    tr = read_trace(path, "time_s", "t_*_c", "p_*")
    for step in (2.0, 0.5):
        d = net.discretise(step)
        model = fixed_model(d.Ad, d.Bd, step, tr.temp_names, tr.input_names, c=d.ed * 24.0)
        aligned, note = align_trace(model, tr)
        assert aligned.dt_s == step and "resampled onto the model's" in note and "averaged" in note
        scores = evaluate(model, tr, [1, 30])
        assert scores[0].n == sum(len(s) - 1 for s in aligned.segments)
        assert scores[-1].rmse_c["overall"] < 0.1 < 1.0 < scores[-1].persistence_rmse_c["overall"], step
        save_model(model, tmp_path / "fixed.json")
        r = run_cli("thermal", "eval", tmp_path / "fixed.json", path, "--time", "time_s", "--horizons", "1",
                    "--no-ridge")
        assert r.exit_code == 0, r.stderr
        assert f"resampled onto the model's {step:g} s step" in " ".join(r.stderr.split())
    # the inputs of a coarser step are the mean of the held inputs over it, not a sample
    seg = tr.resample(3.0, hold_inputs=True).segments[0]
    raw = tr.segments[0]
    np.testing.assert_allclose(seg.inputs[:-1], raw.inputs[:3 * (len(seg) - 1)].reshape(-1, 3, 2).mean(axis=1))


def test_matrix_logarithm_cases_say_which_model_was_written():
    """Exact logarithm; negative-axis modes reflected with the other modes and the steady state
    kept; unstable fits left discrete."""
    from optimizer.thermal.fit import APPROXIMATE, DISCRETE_ONLY, EXACT, continuous_from_discrete
    from optimizer.thermal.rc import zoh

    V = np.array([[1.0, 0.4], [0.3, 1.0]])
    Bd, c = np.array([[0.2], [0.1]]), np.array([0.5, 0.3])
    for lam, kind in (((0.9, 0.3), EXACT), ((0.9, -0.3), APPROXIMATE), ((1.02, 0.3), DISCRETE_ONLY)):
        Ad = V @ np.diag(lam) @ np.linalg.inv(V)
        cont, how = continuous_from_discrete(Ad, Bd, c, 2.0)
        assert how.startswith(kind), how
        if kind == DISCRETE_ONLY:
            assert cont is None and "1.02" in how
            continue
        A, B, b0 = cont
        np.testing.assert_allclose(np.sort(np.exp(2.0 * np.linalg.eigvals(A).real)), np.sort(np.abs(lam)), rtol=1e-9)
        Ad2, Bf = zoh(A, np.column_stack([B, b0]), 2.0)
        np.testing.assert_allclose(np.linalg.solve(np.eye(2) - Ad2, Bf),        # steady state kept
                                   np.linalg.solve(np.eye(2) - Ad, np.column_stack([Bd, c])), rtol=1e-9)
        if kind == EXACT:
            np.testing.assert_allclose(Ad2, Ad, atol=1e-12)
            np.testing.assert_allclose(Bf, np.column_stack([Bd, c]), atol=1e-12)
        else:
            assert "-0.3" in how and not np.allclose(Ad2, Ad)


def test_bad_fit_options_and_damaged_gzip(run_cli, synthetic_csv, tmp_path):
    path, _ = synthetic_csv
    out = tmp_path / "m.json"
    base = ("thermal", "fit", path, "--time", "time_s", "--temps", "t_*_c", "--inputs", "p_*", "--out", out)
    for extra, message in ((("--model", "rc", "--hidden", "two"), "--hidden must be a whole number"),
                           (("--fit-step", "1.5"), "--fit-step 1.5 s must be a whole multiple"),
                           (("--gap-factor", "0.5"), "--gap-factor must be > 1")):
        r = run_cli(*base, *extra)
        assert r.exit_code == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    r = run_cli("thermal", "fit", bad, "--time", "t", "--temps", "a", "--inputs", "b", "--out", out)
    assert r.exit_code == 2 and "not a readable CSV file" in r.stderr
    assert not out.exists()


def test_rc_fit_on_many_sensors_is_stable_with_non_negative_gains(phone_logs):
    tr = read_trace(phone_logs[0], "time_s", PHONE_TEMPS, PHONE_INPUTS).window(None, 400.0)
    m = fit_model(tr, "rc", fit_step_s=tr.dt_s, hidden=0)
    assert m.B.min() >= 0 and np.linalg.eigvals(m.A).real.max() < 0
    assert m.info["fit_step_s"] == pytest.approx(tr.dt_s)


def test_hidden_auto_keeps_the_candidate_best_on_held_out_data(synthetic_csv):
    """``--hidden auto`` (the default) fits 0 and 1 hidden nodes and keeps the better on held-out data."""
    path, net = synthetic_csv
    tr = read_trace(path, "time_s", "t_die_c,t_board_c", "p_*")     # skin unlogged: a hidden node
    m = fit_model(tr.window(None, 1200.0), "rc", hidden="auto")
    table = m.info["hidden_validation"]
    assert [r["hidden_nodes"] for r in table] == [0, 1]
    best = min(table, key=lambda r: r["held_out_open_loop_rmse_c"])
    assert m.n_hidden == best["hidden_nodes"]
    assert all(np.isfinite(r["held_out_open_loop_rmse_c"]) for r in table)
    assert m.dt_s == pytest.approx(tr.dt_s)
    one = fit_model(tr.window(None, 1200.0), "rc", hidden=1)      # a fixed count skips validation
    assert one.n_hidden == 1 and not one.info["hidden_validation"] and one.A.shape == (3, 3)
    assert np.linalg.eigvals(one.A).real.max() < 0 and one.B.min() >= 0 and not one.B[2].any()
    again = load_model(save_model(one, tr.path + ".rc1.json"))
    np.testing.assert_allclose(again.simulate(tr.segments[0].temps_c[0], tr.segments[0].inputs),
                               one.simulate(tr.segments[0].temps_c[0], tr.segments[0].inputs))


def test_single_row_recordings_are_dropped_and_counted(small_csv):
    rows = [[t, 30 + 0.1 * t, 31, 1.0] for t in (0, 1, 2, 3)] + [[0, 35, 31, 1.0]] \
        + [[t, 30, 31, 1.0] for t in (0, 1, 2)] + [[50, 30, 31, 1.0]]
    tr = read_trace(small_csv(rows), "t_s", "temp_*_c", "p_w")
    assert tr.breaks == {"resets": 2, "gaps": 1, "dropped_rows": 2}
    assert [len(s) for s in tr.segments] == [4, 3] and not tr.resampled
    assert "2 row(s) in segments shorter than 2 samples dropped" in tr.describe()


# -- models that transfer, and a learned reference -----------------------------------------------
def _write_at_step(trace, step: float, path) -> None:
    """The trace's segments resampled to ``step`` and written as one CSV (time restarts per segment,
    as a logger with another sample interval would write it)."""
    frames = []
    for s in trace.resample(step, hold_inputs=True).segments:
        d = {"time_s": s.times_s - s.times_s[0]}
        d.update(zip(trace.temp_names, s.temps_c.T, strict=True))
        d.update(zip(trace.input_names, s.inputs.T, strict=True))
        frames.append(pd.DataFrame(d))
    pd.concat(frames).to_csv(path, index=False)


@pytest.mark.parametrize("model, fit_step", [("linear", None), ("linear", "4"), ("rc", None), ("rc", "3")])
def test_fit_then_eval_another_recording_at_any_step(run_cli, synthetic_csv, tmp_path, model, fit_step):
    """Every model type, at a validated or forced fit step, scores another recording logged at
    0.4 s or 2.5 s, next to the ridge reference fitted on its training data."""
    path, _ = synthetic_csv
    out = tmp_path / "m.json"
    r = run_cli("thermal", "fit", path, "--time", "time_s", "--temps", "t_*_c", "--inputs", "p_*",
                "--model", model, "--train-to", "1400", "--out", out, *(("--fit-step", fit_step) if fit_step else ()))
    assert r.exit_code == 0, r.stderr
    saved = json.loads(out.read_text())
    assert saved["info"]["train_window_s"] == [None, 1400.0] and saved["info"]["discretisation"]
    other = read_trace(path, "time_s", "t_*_c", "p_*").window(1400.0, None)
    for step in (0.4, 2.5):
        csv = tmp_path / f"other_{step}.csv"
        _write_at_step(other, step, csv)
        r = run_cli("thermal", "eval", out, csv, "--horizons", "1,60s", "--json")
        assert r.exit_code == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["dt_s"] == pytest.approx(step, rel=1e-6)
        h60 = res["scores"][1]
        assert h60["seconds"] == pytest.approx(60.0, abs=step)
        assert h60["rmse_c"]["overall"] * 5 < h60["persistence_rmse_c"]["overall"], (step, h60)
        assert h60["ridge_rmse_c"]["overall"] < h60["persistence_rmse_c"]["overall"]
        assert res["scores"][-1]["ridge_rmse_c"] is None and "RidgeCV" in res["ridge_reference"]


def test_ridge_reference_scores_the_same_starts_and_is_a_real_competitor(synthetic_csv):
    """The ridge reference is fitted on the training data only, scored on the model's starts, and
    on a linear plant it is near the noise one step ahead; a model that ignores the inputs loses to it."""
    from optimizer.thermal.reference import RidgeReference

    path, net = synthetic_csv
    tr = read_trace(path, "time_s", "t_*_c", "p_*")
    train, test = tr.window(None, 1400.0), tr.window(1400.0, None)
    lazy = fixed_model(np.eye(3), np.zeros((3, 2)), 1.0, tr.temp_names, tr.input_names)   # = persistence
    s1, s60 = evaluate(lazy, test, [1, 60], train=train)[:2]
    assert s1.ridge_rmse_c["overall"] < 0.05 < s1.persistence_rmse_c["overall"]           # noise 0.02 °C
    assert s60.ridge_rmse_c["overall"] < s60.rmse_c["overall"] / 3
    assert s60.rmse_c == s60.persistence_rmse_c
    ref = RidgeReference(train)
    assert ref.squared_errors(test, 60).shape == (3,) and ref.alpha(60) > 0.0
    assert ref.squared_errors(test, 10_000) is None                                        # no pair that long


def test_eval_names_a_missing_training_trace_and_accepts_train(run_cli, synthetic_csv, tmp_path):
    path, _ = synthetic_csv
    moved = tmp_path / "train.csv"
    moved.write_text(path.read_text())
    out = tmp_path / "m.json"
    assert run_cli("thermal", "fit", moved, "--time", "time_s", "--temps", "t_*_c", "--inputs", "p_*",
                   "--out", out).exit_code == 0
    moved.unlink()
    r = run_cli("thermal", "eval", out, path, "--horizons", "1")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "train.csv' is not found; give the training log with --train PATH" in " ".join(r.stderr.split())
    r = run_cli("thermal", "eval", out, path, "--horizons", "1,60", "--train", path)
    assert r.exit_code == 0, r.stderr
    assert "model ÷ ridge" in r.stdout and "ridge reference" in r.stderr
    assert run_cli("thermal", "eval", out, path, "--horizons", "1", "--no-ridge").exit_code == 0
