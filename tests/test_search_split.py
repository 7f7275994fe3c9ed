"""SplitProblem, its exact front, NSGA-II (pymoo), baselines and split plans, on synthetic costs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from _split_fixtures import ToyLink, small_costs, small_graph

from optimizer.errors import ConfigError, ConstraintError
from optimizer.search.solve import solve
from optimizer.search.split import (
    SMARTSPLIT_K,
    SplitProblem,
    head_memory_array,
    split_costs_smartsplit,
)


@pytest.fixture(scope="module")
def costs():
    return small_costs()


def test_memory_and_cut_arrays_follow_the_dag(costs):
    g, c = costs
    mem = head_memory_array(g, "int8")
    assert mem[0] == 0
    for b in range(1, len(g) + 1):
        assert mem[b] == g.memory(0, b, "int8")
    # boundary 2 cuts t1 (skip, 32x32x16) and t2 (16x16x32): both are uploaded
    assert [t.name for t in g.cut_tensors(2)] == ["t1", "t2"]
    assert c.cut_bytes[c.wire_dtypes.index("int8"), 2] == 32 * 32 * 16 + 16 * 16 * 32
    assert c.cut_bytes[c.wire_dtypes.index("fp32"), 2] == 4 * (32 * 32 * 16 + 16 * 16 * 32)


def test_objectives_by_hand(costs):
    g, c = costs
    p = SplitProblem(c)
    link = ToyLink()
    x = p.encode(3, "gpu", 1.0e9, "fp16")
    ev = p.evaluate(x[None, :])
    F, G = ev.F, ev.G
    k = int(x[1])
    nbytes = 2 * (32 * 32 * 16 + 16 * 16 * 32)  # t1 (skip) and t3 at fp16
    up_s = nbytes * 8 / 10e6
    up_j = (283.17e-3 * 10 + 132.86e-3) * up_s  # Huang et al.: (alpha_u tau + beta) I / B
    down_s = 10 * 4 * 8 / 10e6
    down_j = (137.01e-3 * 10 + 132.86e-3) * down_s
    head_s = c.head_latency_s[k, 3]
    # independent recomputation from the synthetic CostTable for gpu at 1 GHz
    from _split_fixtures import table
    t = table(g, scale=2e-9 * 2.0, power_w=1.0 * 0.5**3 + 0.2)
    assert head_s == pytest.approx(float(t.stage_latency(0, 3, 1)))
    server = table(g, scale=1e-10, power_w=0.0, processors=("cloud",), kinds=("cloud",))
    tail_s = float(server.stage_latency(3, len(g), 0))
    assert F[0, 0] == pytest.approx(head_s + up_s + tail_s + down_s + link.rtt_s)
    assert F[0, 1] == pytest.approx(float(t.stage_energy(0, 3, 1)) + up_j + down_j)
    assert F[0, 2] == g.memory(0, 3, "int8")
    assert G[0, 0] <= 0


def test_extremes_have_no_radio(costs):
    g, c = costs
    p = SplitProblem(c, include_extremes=True)
    b = p.breakdown(np.array([[len(g), 0, 2], [0, 3, 0]]))
    assert b["upload_s"][0] == 0 and b["rtt_s"][0] == 0 and b["server_s"][0] == 0
    assert b["client_s"][1] == 0 and b["crossing_bytes"][1] == 64 * 64 * 3  # raw input at int8


def test_population_evaluation_matches_row_by_row(costs):
    _, c = costs
    p = SplitProblem(c, include_extremes=True)
    X = p.enumerate()
    F = p.evaluate(X).F
    rows = np.vstack([p.evaluate(x[None, :]).F for x in X[::7]])
    np.testing.assert_allclose(F[::7], rows)
    assert len(X) == p.space_size() == (len(c.layer_names) + 1) * len(c.options) * len(c.wire_dtypes)


def _dominated_by_any(F, front):
    return ((front <= F[:, None, :]).all(-1) & (front < F[:, None, :]).any(-1)).any(1)


def test_exact_front_is_the_true_front(costs):
    _, c = costs
    p = SplitProblem(c, include_extremes=True, memory_limit_bytes=47_700)
    F, X = p.pareto_front()
    allX = p.enumerate()
    ev = p.evaluate(allX)
    allF, allG = ev.F, ev.G
    ok = allG[:, 0] <= 0
    assert (F[:, 2] <= 47_700).all()  # the all-on-phone split (47 978 B) is excluded
    assert not _dominated_by_any(F, allF[ok]).any()  # nothing feasible dominates the front
    # every feasible point off the front is dominated by, or equal to, a front point
    off = allF[ok]
    covered = ((F <= off[:, None, :]).all(-1)).any(1)
    assert covered.all()
    assert len(np.unique(F, axis=0)) == len(F)


def test_memory_budget_below_every_split(costs):
    _, c = costs
    p = SplitProblem(c, memory_limit_bytes=1000, interior_only=True)  # boundary 0 fits any budget
    with pytest.raises(ConstraintError, match=r"smallest reachable head memory is 0\.029 MB"):
        p.check()
    with pytest.raises(ConstraintError):
        solve(p, "nsga2", seed=1)


def test_nsga2_front_quality_and_determinism(costs, seed):
    from pymoo.indicators.hv import HV

    from optimizer.search.nsga2 import PymooSplitProblem

    _, c = costs
    p = SplitProblem(c, include_extremes=True)
    r1 = solve(p, "nsga2", seed=seed, population=12, generations=15)
    r2 = solve(p, "nsga2", seed=seed, population=12, generations=15)
    assert r1.best == r2.best and [f.decision for f in r1.front] == [f.decision for f in r2.front]
    assert r1.evaluations <= p.space_size() and 0 < r1.explored_fraction <= 1
    assert r1.decision_rule["variant"] == "paper" and r1.seed == seed
    assert set(r1.baselines) == {"lbo", "ebo", "cos", "coc", "rs"}
    exact = PymooSplitProblem(p).pareto_front()  # pymoo sees the exact front
    np.testing.assert_allclose(exact, p.pareto_front()[0])
    F = np.array([[f.objectives[k] for k in p.objectives] for f in r1.front])
    lo, hi = exact.min(0), exact.max(0)
    hv = HV(ref_point=np.full(3, 1.1))
    ratio = hv((F - lo) / (hi - lo)) / hv((exact - lo) / (hi - lo))
    assert ratio >= 0.99
    assert not _dominated_by_any(np.array([list(r1.best.objectives.values())]), exact).any()


def test_pymoo_adapter_fills_F_and_G(costs):
    from pymoo.core.evaluator import Evaluator
    from pymoo.core.population import Population

    from optimizer.search.nsga2 import PymooSplitProblem

    _, c = costs
    core = SplitProblem(c)
    X = np.array([[1, 0, 0], [4.4, 2.6, 1.2]])
    pop = Evaluator().eval(PymooSplitProblem(core), Population.new("X", X))
    ev = core.evaluate(np.array([[1, 0, 0], [4, 3, 1]]))
    F, G = ev.F, ev.G
    np.testing.assert_allclose(pop.get("F"), F)
    np.testing.assert_allclose(pop.get("G"), G)


def test_exact_solver_and_topsis_settings(costs):
    _, c = costs
    p = SplitProblem(c)
    r = solve(p, "exact", weights=[1, 0, 0], topsis_variant="classic")
    assert r.evaluations == p.space_size() and r.explored_fraction == 1.0
    assert r.decision_rule["weights"] == [1.0, 0.0, 0.0] and r.decision_rule["variant"] == "classic"
    # latency-only weights choose the least-latency front point (= LBO)
    assert r.best.objectives["latency_s"] == pytest.approx(r.baselines["lbo"].objectives["latency_s"])
    with pytest.raises(ConfigError, match="unknown setting 'populaton'"):
        solve(p, "nsga2", populaton=10)


def test_baselines(costs, seed):
    g, c = costs
    p = SplitProblem(c, memory_limit_bytes=47_700)
    X = p.enumerate()
    ev = p.evaluate(X)
    F, G = ev.F, ev.G
    ok = G[:, 0] <= 0
    base = solve(p, "lbo").baselines
    assert base["lbo"].objectives["latency_s"] == pytest.approx(F[ok, 0].min())
    assert base["ebo"].objectives["energy_j"] == pytest.approx(F[ok, 1].min())
    assert base["cos"].decision["split"] == len(g) and not base["cos"].feasible  # 47 978 B > budget
    assert base["coc"].decision["split"] == 0 and base["coc"].decision["wire_dtype"] == "int8"
    rs1, rs2 = solve(p, "rs", seed=seed).best, solve(p, "rs", seed=seed).best
    assert rs1 == rs2 and rs1.feasible
    assert {solve(p, "rs", seed=s).best.decision["split"] for s in range(12)} != {rs1.decision["split"]}


def test_joint_choice_never_loses_to_index_only(costs):
    from optimizer.search.split_baselines import index_only_decisions

    g, c = costs
    p = SplitProblem(c, interior_only=True)  # the paper's index-only space is 1..L-1 (0..L is the default)
    Xi = index_only_decisions(p)
    assert (Xi[:, 1] == Xi[0, 1]).all() and c.options[Xi[0, 1]].kind == "cpu"
    assert c.options[Xi[0, 1]].clock_hz == 2.0e9 and c.wire_dtypes[Xi[0, 2]] == "fp32"
    assert list(Xi[:, 0]) == list(range(1, len(g)))
    Fi = p.evaluate(Xi).F
    F = p.evaluate(p.enumerate()).F
    assert F[:, 0].min() < Fi[:, 0].min() and F[:, 1].min() < Fi[:, 1].min()


def test_smartsplit_closed_form():
    g = small_graph()
    c = split_costs_smartsplit(g, [("cpu", 8, [1.0e9, 1.6e9])], 4, 1.6e9, ToyLink())
    p = SplitProblem(c)
    b = p.breakdown(np.array([[2, 1, 0]]))
    m_client = g.macs_array[:2].sum()
    t = m_client / (8 * 1.6e9)
    assert b["client_s"][0] == pytest.approx(t)
    assert b["client_j"][0] == pytest.approx(SMARTSPLIT_K * 8 * 1.6**3 * t)
    assert b["server_s"][0] == pytest.approx(g.macs_array[2:].sum() / (4 * 1.6e9))


def test_bad_bandwidth_is_rejected():
    with pytest.raises(ConfigError, match="uplink_bps is 0; expected a bandwidth > 0"):
        small_costs(link=ToyLink(uplink_bps=0.0))


def test_split_plan_is_valid(costs, tmp_path):
    import jsonschema

    from optimizer.plan import read_plan, shipped_schema, write_plan
    from optimizer.plan.from_search import split_plan

    g, c = costs
    r = solve(SplitProblem(c), "exact")
    r = type(r)(**{**r.__dict__, "best": SplitProblem(c).candidates(np.array([[2, 0, 2]]))[0]})
    plan = split_plan(r, g)
    path = write_plan(plan, tmp_path / "plan.json")
    jsonschema.validate(json.loads(path.read_text()), shipped_schema())
    back = read_plan(path)
    assert back.kind == "split" and back.split.layer == 2 and back.split.wire_dtype == "fp32"
    assert [(t.name, t.shape, t.bytes) for t in back.split.tensors] == [
        ("t1", [32, 32, 16], 4 * 32 * 32 * 16), ("t2", [16, 16, 32], 4 * 16 * 16 * 32)]
    assert back.split.bytes == sum(t.bytes for t in back.split.tensors)
    assert back.search.decision["method"] == "topsis"
    assert set(back.search.baselines) == {"lbo", "ebo", "cos", "coc", "rs"}
    assert back.predicted.latency_s == pytest.approx(r.best.objectives["latency_s"])


def test_core_imports_no_pymoo():
    code = ("import sys, optimizer.search.split, optimizer.search.decision, optimizer.search.split_baselines;"
            "print(any(m.startswith(('pymoo', 'tensorflow')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_mobilenet_v2_on_galaxy_j6_real_costs(zoo_graph):
    """Real zoo graph (op view: residual cuts carry two tensors), real device/link/server files."""
    from pymoo.indicators.hv import HV

    from optimizer.search.split import build_split_costs

    g = zoo_graph("mobilenet_v2", "op")
    costs = build_split_costs(g, "galaxy_j6", "wifi_10", "smartsplit_i5")
    p = SplitProblem(costs)
    # a boundary inside an inverted-residual block uploads the skip tensor too
    two = next(b for b in range(1, len(g)) if len(g.cut_tensors(b)) == 2)
    x = p.encode(two, "cpu", None, "int8")
    assert p.breakdown(x[None])["crossing_bytes"][0] == sum(t.nbytes("int8") for t in g.cut_tensors(two))
    r = solve(p, "nsga2", seed=0)
    exact = p.pareto_front()[0]
    F = np.array([[f.objectives[k] for k in p.objectives] for f in r.front])
    lo, hi = exact.min(0), exact.max(0)
    hv = HV(ref_point=np.full(3, 1.1))
    assert hv((F - lo) / (hi - lo)) >= 0.995 * hv((exact - lo) / (hi - lo))
    assert r.evaluations < 0.5 * p.space_size()
    # with the extremes in the space, LBO / EBO are at least as good as COS and COC
    b = solve(SplitProblem(costs, include_extremes=True), "lbo").baselines
    for key, name in (("latency_s", "lbo"), ("energy_j", "ebo")):
        assert b[name].objectives[key] <= min(b["cos"].objectives[key], b["coc"].objectives[key])
    best = np.array([list(r.best.objectives.values())])
    assert not _dominated_by_any(best, exact).any()


def test_head_pays_its_invoke_overhead_once(costs):
    import dataclasses

    from _split_fixtures import table

    from optimizer.search.split import split_costs_from_tables

    g, _ = costs
    server = table(g, scale=1e-10, power_w=0.0, processors=("cloud",), kinds=("cloud",))
    plain = table(g, scale=2e-9, power_w=0.7)
    called = dataclasses.replace(plain, invoke_overhead_s=np.array([0.0, 3e-3]))
    base = split_costs_from_tables(g, {("gpu", 1e9): plain}, server, ToyLink())
    with_call = split_costs_from_tables(g, {("gpu", 1e9): called}, server, ToyLink())
    d_s = with_call.head_latency_s[0] - base.head_latency_s[0]
    d_j = with_call.head_energy_j[0] - base.head_energy_j[0]
    assert d_s[0] == 0 and d_j[0] == 0  # nothing runs on the phone at l = 0
    np.testing.assert_allclose(d_s[1:], 3e-3)  # once per head, not per layer
    np.testing.assert_allclose(d_j[1:], 3e-3 * plain.active_power_w[1])


@pytest.mark.slow
def test_runtime_reaches_the_split_costs_and_the_job(zoo_graph, tmp_path):
    from optimizer.errors import UnknownNameError
    from optimizer.search.split import build_split_costs
    from optimizer.search.split_job import SplitJob

    g = zoo_graph("vgg11")
    default = build_split_costs(g, "galaxy_j6", "wifi_10", dtype="fp32", processors=["cpu"])
    torch = build_split_costs(g, "galaxy_j6", "wifi_10", dtype="fp32", processors=["cpu"],
                              runtime="pytorch_mobile_fp32")
    assert default.meta["runtime"] == "tflite" and torch.meta["runtime"] == "pytorch_mobile_fp32"
    assert not np.allclose(default.head_latency_s, torch.head_latency_s)
    with pytest.raises(UnknownNameError, match="runtime"):
        build_split_costs(g, "galaxy_j6", "wifi_10", runtime="tensorrt")
    doc = {"name": "j", "models": ["vgg11"], "devices": ["galaxy_j6"], "network": "wifi_10",
           "server": "smartsplit_i5"}
    assert SplitJob.model_validate(doc).runtime is None  # default unchanged
    job = SplitJob.model_validate({**doc, "runtime": "pytorch_mobile_fp32"})
    assert SplitJob.model_validate_json(job.model_dump_json()) == job
