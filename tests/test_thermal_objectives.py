"""Thermal objectives of the searches, checked against the full sustained-run simulator."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optimizer.errors import UnknownNameError
from optimizer.hardware import load_device, load_link
from optimizer.hardware.thermal_spec import thermal_spec_of
from optimizer.workflow import make_pipeline_plan, pipeline_problem
from optimizer.search.thermal_objectives import GovernorLevels, pipeline_thermal_objectives, split_thermal_objectives
from optimizer.search.thermal_workload import mapping_workload
from optimizer.thermal.plan_workload import CappedTables, SplitWorkload
from optimizer.thermal.simulate import simulate

ALL = ("sustained-fps", "peak-temp", "time-to-throttle")


@pytest.fixture(scope="module")
def graph(zoo_graph):
    return zoo_graph("mobilenet_v2", "block")


def _check_against_simulator(obj: dict, sims: list) -> tuple[int, int]:
    """Assert the documented agreement; return (throttled, not throttled) counts."""
    throttled = 0
    for i, r in enumerate(sims):
        assert obj["sustained_fps"][i] == pytest.approx(r.sustained_fps, rel=0.10), i
        if r.time_to_first_throttle_s is None:
            assert obj["time_to_throttle_s"][i] == 600.0
            assert obj["peak_temp_c"][i] == pytest.approx(r.peak_die_c, abs=0.05)
        else:
            throttled += 1
            assert obj["time_to_throttle_s"][i] == r.time_to_first_throttle_s
    return throttled, len(sims) - throttled


@pytest.mark.parametrize("device", ["pixel4", "pixel6"])
def test_pipeline_objectives_match_simulator(graph, device):
    dev = load_device(device)
    prob = pipeline_problem(graph, dev, objectives=("sustained_fps", "peak_temp_c", "time_to_throttle_s"),
                            extra_objectives=pipeline_thermal_objectives(ALL, graph, dev), cpu_cores=8)
    X = np.vstack([prob._fill_unused(x) for x in prob.enumerate_mappings()])
    X = X[np.random.default_rng(1).choice(len(X), 8, replace=False)]
    out = prob.evaluate(X)
    spec = thermal_spec_of(dev)
    sims = [simulate(spec, mapping_workload(prob, x, graph, dev)) for x in X]
    for i, r in enumerate(sims):
        assert r.fps[0] == pytest.approx(out["throughput_fps"][i], rel=1e-9)
    throttled, cool = _check_against_simulator(out, sims)
    assert throttled >= 3  # the level walk is exercised
    if device == "pixel4":
        assert cool >= 1


def test_split_objectives_match_simulator(graph):
    from optimizer.search.split import SplitProblem, build_split_costs

    dev = load_device("pixel4")
    costs = build_split_costs(graph, "pixel4", "wifi_13")
    prob = SplitProblem(costs, include_extremes=True,
                        extra_objectives=split_thermal_objectives(ALL, dev, graph=graph))
    assert prob.objectives[3:] == ("sustained_fps", "peak_temp_c", "time_to_throttle_s")
    X = prob.enumerate()
    X = X[np.random.default_rng(0).choice(len(X), 8, replace=False)]
    X[:3, 0] = len(graph)  # all on the phone: the hottest cases
    F = prob.evaluate(X).F
    b = prob.breakdown(X)
    obj = {"sustained_fps": -F[:, 3], "peak_temp_c": F[:, 4], "time_to_throttle_s": -F[:, 5]}
    tables = CappedTables(graph, dev, "int8")
    sims = []
    for i, x in enumerate(X):
        d = prob.decode(x)
        wl = SplitWorkload(tables, d["split"], d["processor"] if d["split"] > 0 else None, d["clock_hz"],
                           float(b["upload_s"][i] + b["server_s"][i] + b["download_s"][i] + b["rtt_s"][i]),
                           float(b["upload_j"][i] + b["download_j"][i]),
                           float(b["upload_s"][i] + b["download_s"][i]),
                           radio=load_link("wifi_13").radio_state("pixel4"))
        sims.append(simulate(thermal_spec_of(dev), wl))
        assert sims[-1].fps[0] == pytest.approx(1.0 / F[i, 0], rel=1e-9)
    throttled, cool = _check_against_simulator(obj, sims)
    assert throttled >= 1 and cool >= 1
    cand = prob.candidates(X[:1])[0]
    assert cand.objectives["sustained_fps"] == pytest.approx(obj["sustained_fps"][0])


def test_governor_levels_pixel4():
    lv = GovernorLevels(thermal_spec_of(load_device("pixel4")))
    names = lv.spec.processor_names
    assert len(lv.caps) == 7  # unthrottled + six skin rows (the shutdown row is not a level; the
    #                            die and modem rows are off the skin ladder)
    assert np.all(np.diff(lv.caps, axis=0) <= 1e-12)  # each level caps at least as hard
    assert lv.caps[0].tolist() == [1.0] * len(names)
    assert lv.caps[-1][names.index("npu")] == 0.0 and lv.caps[-2][names.index("npu")] == 1.0


def test_sustained_fps_plan_beats_throughput_plan_on_pixel6(graph):
    dev = load_device("pixel6")
    fast = make_pipeline_plan(graph, dev, solver="ga", seed=0, cpu_cores=8).plan
    cool = make_pipeline_plan(graph, dev, solver="ga", seed=0, cpu_cores=8, objectives=("sustained_fps",),
                              extra_objectives=pipeline_thermal_objectives(["sustained-fps"], graph, dev)).plan
    # instantaneous throughput favours the first plan, 10 simulated minutes the second
    assert fast.predicted.throughput_fps > cool.predicted.throughput_fps
    assert cool.predicted.sustained_fps > fast.predicted.sustained_fps
    assert cool.predicted.extra["sustained_fps_objective"] == pytest.approx(cool.predicted.sustained_fps, rel=0.1)


def test_ga_front_with_thermal_objective(graph):
    """GA wall time with/without the objective is measured by benchmarks/bench_thermal_objectives.py."""
    from optimizer.search import solve

    dev = load_device("pixel4")
    plain = pipeline_problem(graph, dev, cpu_cores=8)
    thermal = pipeline_problem(graph, dev, cpu_cores=8, objectives=("throughput", "peak_temp_c"),
                               extra_objectives=pipeline_thermal_objectives(["peak-temp"], graph, dev),
                               table=plain.cost_table)
    res = solve(thermal, "ga", seed=0)
    temps = [c.objectives["peak_temp_c"] for c in res.front]
    fps = [c.objectives["throughput_fps"] for c in res.front]
    assert len(res.front) >= 2 and np.all(np.diff(fps) <= 0) and np.all(np.diff(temps) <= 1e-9)


def test_unknown_objective_name(graph):
    with pytest.raises(UnknownNameError, match="sustained-fps"):
        pipeline_thermal_objectives(["sustained"], graph, load_device("pixel4"))


def test_cli_map_and_split_with_thermal_objectives(tiny_onnx, run_cli, tmp_path):
    out = tmp_path / "map.json"
    r = run_cli("-q", "map", str(tiny_onnx), "-d", "pixel4", "-o", str(out), "--objectives", "throughput,peak-temp",
                "--generations", "20")
    assert r.exit_code == 0, r.stderr
    plan = json.loads(out.read_text())
    assert plan["search"]["objectives"] == ["throughput", "peak_temp_c"]
    assert plan["predicted"]["peak_temp_c"] is not None and plan["predicted"]["sustained_fps"] > 0
    out = tmp_path / "split.json"
    r = run_cli("-q", "split", str(tiny_onnx), "-d", "pixel4", "-n", "wifi_13", "-o", str(out),
                "--granularity", "op", "--objectives", "latency,energy,memory,sustained-fps", "--generations", "5")
    assert r.exit_code == 0, r.stderr
    plan = json.loads(out.read_text())
    assert plan["search"]["objectives"][-1] == "sustained_fps"
    assert plan["predicted"]["sustained_fps"] > 0
    r = run_cli("split", str(tiny_onnx), "-d", "pixel4", "-n", "wifi_13", "-o", str(out), "--objectives",
                "sustained-fps", "--weights", "1,1,1")
    assert r.exit_code == 2 and "--weights" in r.stderr
    r = run_cli("map", str(tiny_onnx), "-d", "redmi_note8", "-o", str(tmp_path / "x.json"), "--objectives",
                "sustained-fps")
    assert r.exit_code == 2 and "redmi_note8" in r.stderr and "pixel6" in r.stderr
    assert not (tmp_path / "x.json").exists()
    r = run_cli("split", str(tiny_onnx), "-d", "pixel4", "-n", "wifi_13", "-o", str(out), "--objectives", "heat")
    assert r.exit_code == 2 and "heat" in r.stderr and "sustained-fps" in r.stderr
