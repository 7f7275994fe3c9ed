"""Bandwidth traces (Mahimahi, CSV, synthetic) and the risk-aware split objectives over them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _split_fixtures import ToyLink, small_costs

from optimizer.errors import ConfigError, SchemaError
from optimizer.hardware.bandwidth import (
    PACKET_BITS,
    constant_trace,
    load_trace,
    read_trace,
    synthetic_trace,
    trace_names,
)
from optimizer.search.split import SplitProblem
from optimizer.search.split_risk import (
    MeanLatencyGuard,
    RiskObjective,
    costs_at_uplink,
    cvar,
    latency_samples,
    parse_risk,
    risk_best,
    risk_objective_name,
)


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


# ---------------------------------------------------------------------------- readers
def test_mahimahi_reader_counts_opportunities(tmp_path):
    t = read_trace(_write(tmp_path, "a.up", "0\n0\n5\n10\n"))
    assert t.period_s == pytest.approx(0.010)
    assert len(t.opportunities_s) == 4
    assert t.mean_bps == pytest.approx(4 * PACKET_BITS / 0.010)
    assert len(t.sha256) == 64


def test_csv_reader_rates_and_windows(tmp_path):
    t = read_trace(_write(tmp_path, "b.csv", "t_s,mbps\n0,8\n1,0\n2,4\n"))
    assert t.period_s == pytest.approx(3.0)
    np.testing.assert_allclose(t.window_rates_bps(1.0), [8e6, 0.0, 4e6], rtol=2e-3)
    assert t.mean_bps == pytest.approx(4e6, rel=2e-3)


@pytest.mark.parametrize("name, text, message", [
    ("x.up", "0\n5\nabc\n", "x.up:3: 'abc' is not a millisecond timestamp"),
    ("x.up", "0\n5\n3\n", "x.up:3: timestamp 3 ms is before the previous 5 ms"),
    ("x.up", "\n0\n", "no delivery opportunity after 0 ms"),
    ("x.csv", "t_s,mbps\n0,5\n1,-2\n", "x.csv:3: '1,-2'; expected 't_s,mbps'"),
    ("x.csv", "t_s,mbps\n1,5\n0,5\n", "x.csv:3: t_s 0 is not after the previous 1"),
    ("x.csv", "t_s,mbps\n0,0\n1,0\n", "delivers less than one 1500-byte packet"),
])
def test_malformed_trace_is_one_line_schema_error(tmp_path, name, text, message):
    with pytest.raises(SchemaError, match=None) as exc:
        read_trace(_write(tmp_path, name, text))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_shipped_traces_load_and_are_real_uplinks():
    names = trace_names()
    assert {"ATT-LTE-driving", "ATT-LTE-driving-2016", "TMobile-LTE-short", "TMobile-UMTS-driving",
            "Verizon-EVDO-driving", "Verizon-LTE-short"} <= set(names)
    for n in names:
        t = load_trace(n)
        rates = t.window_rates_bps(1.0)
        assert t.period_s > 100 and 0.5e6 < t.mean_bps < 20e6 and t.sha256 and t.source.startswith("search_spaces/bandwidth/mahimahi/")
        assert rates.max() > 4 * max(np.percentile(rates, 5), 1.0)  # swings of 4x and more within seconds


def test_transfer_time_through_constant_trace():
    t = constant_trace(8.0, 10.0)
    starts = t.start_times(0.37)
    out = t.transfer_s(np.array([0.0, 150_000.0, 1e6, 150_000.0]), starts)
    assert out.shape == (4, len(starts))
    assert (out[0] == 0).all()
    np.testing.assert_allclose(out[1], 0.15, atol=1.6e-3)  # one packet of slack
    np.testing.assert_allclose(out[2], 1.0, atol=1.6e-3)
    np.testing.assert_array_equal(out[1], out[3])
    # a frame longer than the trace wraps around the period
    np.testing.assert_allclose(t.transfer_s(np.array([15e6]), np.array([9.0]))[0], 15.0, atol=2e-3)


def test_synthetic_trace_is_seeded_and_has_fades():
    a, b, c = synthetic_trace(3), synthetic_trace(3), synthetic_trace(4)
    np.testing.assert_array_equal(a.opportunities_s, b.opportunities_s)
    assert not np.array_equal(a.opportunities_s[:100], c.opportunities_s[:100])
    assert a.mean_bps == pytest.approx(8e6, rel=0.01)
    rates = a.window_rates_bps(0.5)
    assert rates.min() < 0.25 * rates.mean() < rates.max()
    h1, h2 = a.halves()
    assert len(h1.opportunities_s) + len(h2.opportunities_s) == len(a.opportunities_s)
    assert h1.period_s + h2.period_s == pytest.approx(a.period_s)


# ---------------------------------------------------------------------------- statistics
def test_cvar_matches_rockafellar_uryasev_minimum():
    rng = np.random.default_rng(0)
    L = rng.lognormal(0.0, 1.0, size=(3, 200))
    beta = 0.95
    # F_beta(alpha) = alpha + E[(L - alpha)+] / (1 - beta), minimised over alpha (piecewise linear:
    # the minimum sits at one of the samples)
    brute = [min(a + np.maximum(row - a, 0).mean() / (1 - beta) for a in row) for row in L]
    np.testing.assert_allclose(cvar(L, beta), brute, rtol=1e-12)
    assert (cvar(L, beta) >= np.quantile(L, beta, axis=1)).all()


@pytest.mark.parametrize("text, parsed, name", [
    ("cvar95", ("cvar", 0.95), "latency_cvar95_s"), ("p95", ("p", 0.95), "latency_p95_s"),
    ("mean", ("mean", 0.0), "latency_mean_s"), ("Regret", ("regret", 0.0), "latency_regret_s"),
    ("cvar90", ("cvar", 0.90), "latency_cvar90_s"),
])
def test_risk_names(text, parsed, name):
    assert parse_risk(text) == parsed and risk_objective_name(text) == name


@pytest.mark.parametrize("bad", ["cvar", "p100", "p0", "median", "cvar9x"])
def test_bad_risk_names(bad):
    with pytest.raises(ConfigError, match="expected one of mean, regret, pNN or cvarNN"):
        parse_risk(bad)


# ---------------------------------------------------------------------------- objectives in the problem
def _problem(trace, risk, link=None):
    _, costs = small_costs(link or ToyLink())
    return SplitProblem(costs, include_extremes=True, extra_objectives=(RiskObjective(trace, risk, 0.05),))


def test_constant_trace_every_risk_chooses_the_mean_split():
    rate = 2e6
    trace = constant_trace(rate / 1e6, 5.0)
    chosen = {}
    for risk in ("mean", "p95", "cvar95", "regret"):
        x, _ = risk_best(_problem(trace, risk, ToyLink(uplink_bps=rate)), RiskObjective(trace, risk, 0.05))
        chosen[risk] = tuple(x)
    # the latency-only choice at that constant bandwidth (SmartSplit's LBO)
    plain = SplitProblem(small_costs(ToyLink(uplink_bps=rate))[1], include_extremes=True)
    ev = plain.evaluate(plain.enumerate())
    F, G = ev.F, ev.G
    lbo = tuple(plain.enumerate()[np.argmin(np.where(G[:, 0] <= 0, F[:, 0], np.inf))])
    assert len(set(chosen.values())) == 1 and chosen["mean"][0] == lbo[0]
    # the exact front's TOPSIS choice does not move either
    picks = set()
    for risk in ("mean", "p95", "cvar95"):
        from optimizer.search import solve

        picks.add(tuple(solve(_problem(trace, risk, ToyLink(uplink_bps=rate)), "exact").best.decision.items()))
    assert len(picks) == 1


def test_risk_objective_in_exact_and_nsga2():
    from optimizer.search import solve

    trace = synthetic_trace(1, mean_mbps=2.0, duration_s=20.0)
    problem = _problem(trace, "cvar95")
    assert problem.objectives[-1] == "latency_cvar95_s"
    X = problem.enumerate()
    F = problem.evaluate(X).F
    lat = latency_samples(problem.breakdown(X), trace, trace.start_times(0.05))
    np.testing.assert_allclose(F[:, 3], cvar(lat, 0.95))
    assert (F[:, 3] >= lat.mean(axis=1) - 1e-12).all()
    exact = solve(problem, "exact")
    ga = solve(problem, "nsga2", seed=0, population=16, generations=10)
    assert exact.objectives == ga.objectives == problem.objectives
    assert "latency_cvar95_s" in exact.best.objectives and "latency_cvar95_s" in ga.best.objectives


def test_mean_guard_caps_the_expected_latency_over_the_trace(tmp_path):
    """CVaR subject to mean <= (1 + eps) * least mean (Krokhmal, Palmquist & Uryasev 2002)."""
    from _split_fixtures import small_graph, table

    from optimizer.search.split import split_costs_from_tables

    # a slow phone and a fast link with a 1-s fade to 0.2 Mbps every 20 s: offloading has the least
    # mean, running on the phone the least tail
    trace = read_trace(_write(tmp_path, "fades.csv", "t_s,mbps\n" + "".join(
        f"{t},{200 if t % 20 else 0.2}\n" for t in range(60))))
    g = small_graph()
    server = table(g, scale=1e-10, power_w=0.0, name="server", processors=("cloud",), kinds=("cloud",))
    costs = split_costs_from_tables(g, {("cpu", 1e9): table(g, scale=2e-8, power_w=1.0)}, server,
                                    ToyLink(uplink_bps=trace.mean_bps))
    risk = RiskObjective(trace, "cvar95", 0.05)
    free = SplitProblem(costs, include_extremes=True, extra_objectives=(risk,))
    X = free.enumerate()
    means = latency_samples(free.breakdown(X), trace, trace.start_times(0.05)).mean(axis=1)
    x_free, cvar_free = risk_best(free, risk)
    assert x_free[0] == len(g) and means[np.flatnonzero((X == x_free).all(axis=1))[0]] > 5 * means.min()
    for eps in (0.0, 0.05, 0.5):
        guard = MeanLatencyGuard(trace, eps, 0.05)
        guarded = SplitProblem(costs, include_extremes=True, extra_objectives=(risk,), extra_constraints=(guard,))
        assert guard.least_mean(guarded) == pytest.approx(means.min())
        ok = means <= (1 + eps) * means.min() * (1 + 1e-12)
        np.testing.assert_array_equal(guarded.evaluate(X).feasible, ok)
        x, value = risk_best(guarded, risk)
        assert ok[np.flatnonzero((X == x).all(axis=1))[0]] and x[0] == 0  # offloads, within the mean budget
        assert value > cvar_free  # the tail it accepts for the mean
        assert guarded.get_params()["extra_constraints"][0]["max_mean_increase"] == eps
    with pytest.raises(ConfigError, match="expected a fraction >= 0"):
        MeanLatencyGuard(trace, -0.1)


def test_regret_is_zero_for_the_per_sample_best_and_positive_otherwise():
    trace = synthetic_trace(2, mean_mbps=3.0, duration_s=20.0)
    problem = _problem(trace, "regret")
    F = problem.evaluate(problem.enumerate()).F
    assert F[:, 3].min() >= -1e-12 and F[:, 3].max() > 0


def test_costs_at_uplink_rescales_upload_only():
    from optimizer.hardware import load_link

    _, costs = small_costs(ToyLink())
    link = load_link("lte")
    new = costs_at_uplink(costs, link, 2e6)
    np.testing.assert_allclose(new.upload_s, costs.cut_bytes * 8 / 2e6)
    assert new.download_s == costs.download_s and new.rtt_s == costs.rtt_s
    with pytest.raises(ConfigError):
        costs_at_uplink(costs, link, 0.0)


# ---------------------------------------------------------------------------- CLI and requests
def test_split_cli_with_trace_records_risk(run_cli, tiny_onnx, tmp_path):
    trace = tmp_path / "up.csv"
    trace.write_text("t_s,mbps\n" + "\n".join(f"{i},{0.3 if i % 5 == 0 else 6}" for i in range(30)) + "\n")
    res = run_cli("split", tiny_onnx, "--device", "galaxy_j6", "--network", "lte", "--granularity", "op",
                  "--solver", "exact", "--bandwidth-trace", trace, "--risk", "p95", "--weights", "1,1,1,2",
                  "--out", tmp_path / "plan.json")
    assert res.exit_code == 0, res.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["search"]["objectives"][-1] == "latency_p95_s"
    assert plan["search"]["decision"]["weights"] == [1.0, 1.0, 1.0, 2.0]
    bt = plan["search"]["settings"]["bandwidth_trace"]
    assert bt["risk"] == "p95" and bt["trace"]["mean_mbps"] == pytest.approx(4.86, rel=0.01)
    ex = plan["predicted"]["extra"]
    assert ex["trace_latency_p50_s"] <= ex["trace_latency_p95_s"] <= ex["trace_latency_cvar95_s"]
    assert "--bandwidth-trace" in plan["provenance"]["command"]
    # the table shows the risk objective of the choice and of every baseline, and the line under it
    # the choice's trace statistics, both as in the plan
    out = " ".join(res.stdout.split())
    assert "p95 ms" in out and "not stationary" not in out
    assert bt["trace"]["half_mean_mbps"] == pytest.approx([4.86, 4.86], rel=0.01)
    lbo = plan["search"]["baselines"]["lbo"]["objectives"]["latency_p95_s"]
    row = next(line for line in res.stdout.splitlines() if line.strip().startswith("LBO"))
    assert f"{lbo * 1e3:.1f}" in row.split()
    line = f"p95 {ex['trace_latency_p95_s'] * 1e3:.1f} / cvar95 {ex['trace_latency_cvar95_s'] * 1e3:.1f} ms"
    assert line in out
    # the plan keeps the choice's own objective values; the report shows the same column and line
    chosen = plan["search"]["decision"]["chosen_objectives"]
    assert chosen["latency_s"] == pytest.approx(plan["predicted"]["latency_s"])
    assert chosen["latency_p95_s"] == pytest.approx(ex["trace_latency_p95_s"])
    rep = run_cli("report", tmp_path / "plan.json", "--out", tmp_path / "rep")
    assert rep.exit_code == 0, rep.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| p95 latency over the trace (ms) |" in md and line in md
    lbo_row = next(r for r in md.splitlines() if r.startswith("| LBO |"))
    assert f"| {lbo * 1e3:.4g} |" in lbo_row


def test_nonstationary_trace_is_flagged_in_table_and_report(run_cli, tiny_onnx, tmp_path):
    """A trace whose halves' means differ by more than NONSTATIONARY_RATIO gets a warning line in the
    CLI and the report (the TMobile-LTE-short lesson of bench_robust_split.py); the shipped
    TMobile-LTE-short trace is flagged, Verizon-LTE-short (x1.2) is not."""
    from types import SimpleNamespace

    from optimizer.hardware.bandwidth import load_trace
    from optimizer.workflow.robust import trace_warnings

    def plan_of(trace):
        return SimpleNamespace(search=SimpleNamespace(settings={"bandwidth_trace": {"trace": trace.describe()}}))

    assert "7.16 Mbps, its second 19.47 Mbps (x2.7)" in trace_warnings(plan_of(load_trace("TMobile-LTE-short")))[0]
    assert trace_warnings(plan_of(load_trace("Verizon-LTE-short"))) == []
    outage = SimpleNamespace(search=SimpleNamespace(settings={"bandwidth_trace": {"trace": {
        "name": "dead", "half_mean_mbps": [0.0, 3.0]}}}))
    assert "(one half carries nothing)" in trace_warnings(outage)[0]
    trace = tmp_path / "drift.csv"
    trace.write_text("t_s,mbps\n" + "\n".join(f"{i},{2 if i < 15 else 8}" for i in range(30)) + "\n")
    res = run_cli("split", tiny_onnx, "--device", "galaxy_j6", "--network", "lte", "--granularity", "op",
                  "--solver", "exact", "--bandwidth-trace", trace, "--out", tmp_path / "plan.json")
    assert res.exit_code == 0, res.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["search"]["settings"]["bandwidth_trace"]["trace"]["half_mean_mbps"] == pytest.approx([2, 8], rel=0.02)
    out = " ".join(res.stdout.split())
    assert "warning: drift is not stationary: its first half averages 2.00 Mbps, its second 8.00 Mbps (x4.0)" in out
    rep = run_cli("report", tmp_path / "plan.json", "--out", tmp_path / "rep")
    assert rep.exit_code == 0, rep.stderr
    assert "Warning: drift is not stationary" in (tmp_path / "rep" / "report.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (["--risk", "p95"], "--risk p95: needs --bandwidth-trace"),
    (["--bandwidth-trace", "nowhere_trace"], "unknown bandwidth trace 'nowhere_trace'"),
    (["--bandwidth-trace", "ATT-LTE-driving-2016", "--risk", "worst"], "--risk 'worst': expected one of"),
    (["--bandwidth-trace", "ATT-LTE-driving-2016", "--weights", "1,1,1"], "expected 4 (one per objective)"),
    (["--max-mean-increase", "5%"], "--max-mean-increase 0.05: needs --bandwidth-trace"),
    (["--bandwidth-trace", "ATT-LTE-driving-2016", "--max-mean-increase", "lots"],
     "--max-mean-increase 'lots': expected a fraction in 0..1 or a percentage such as 5%"),
])
def test_split_cli_trace_errors(run_cli, tiny_onnx, tmp_path, extra, message):
    res = run_cli("split", tiny_onnx, "--device", "galaxy_j6", "--network", "lte", "--granularity", "op",
                  "--out", tmp_path / "plan.json", *extra)
    assert res.exit_code == 2 and message in res.stderr.replace("\n", ""), res.stderr
    assert not (tmp_path / "plan.json").exists()


def test_malformed_trace_file_exits_2(run_cli, tiny_onnx, tmp_path):
    bad = _write(tmp_path, "bad.up", "0\n12\nfoo\n")
    res = run_cli("split", tiny_onnx, "--device", "galaxy_j6", "--network", "lte", "--granularity", "op",
                  "--bandwidth-trace", bad, "--out", tmp_path / "plan.json")
    assert res.exit_code == 2 and "bad.up:3: 'foo' is not a millisecond timestamp" in res.stderr
    assert not (tmp_path / "plan.json").exists()


def test_batch_split_task_runs_with_trace_risk_and_memory_budget(tmp_path, tiny_onnx):
    """A batch task can do what 'dnnplan split' can: trace + risk objective, memory as a budget."""
    from optimizer.batch import load_job
    from optimizer.batch.tasks import build_inputs, execute_task

    job = _write(tmp_path, "job.yaml", f"""\
name: robust
tasks:
  - {{kind: split, model: {tiny_onnx}, device: galaxy_j6, network: lte, solver: exact, granularity: op,
     bandwidth_trace: ATT-LTE-driving-2016, risk: p95, memory_budget: 512MB, max_mean_increase: 0.05}}
  - {{kind: split, model: {tiny_onnx}, device: galaxy_j6, network: lte, solver: exact, granularity: op}}
""")
    robust, plain = load_job(job).expand()
    assert robust.task_id != plain.task_id and "bandwidth_trace" not in plain.canonical()
    out = execute_task(robust, build_inputs(robust.input_key, [robust]))
    assert out.status == "done", out.error
    assert out.plan["search"]["objectives"][-1] == "latency_p95_s"
    assert out.plan["search"]["decision"]["weights"] == [1.0, 1.0, 0.0, 1.0]
    assert out.plan["search"]["settings"]["bandwidth_trace"]["trace"]["name"] == "ATT-LTE-driving-2016"
    assert "trace_latency_p95_s" in out.plan["predicted"]["extra"]
    assert out.plan["search"]["settings"]["extra_constraints"] == [
        {"constraint": "trace_mean_guard", "max_mean_increase": 0.05, "step_s": 0.1}]
    bad = robust.model_copy(update={"risk": "worst"})
    failed = execute_task(bad, build_inputs(bad.input_key, [bad]))
    assert failed.status == "failed" and "risk 'worst'" in failed.error
