"""``dnnplan map``: plans written for real zoo networks and devices; bad input exits 2, writes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optimizer.plan import read_plan

MODEL = "mobilenet_v2"


def _args(out, *extra):
    return ("--quiet", "map", MODEL, "--device", "pixel6", "--granularity", "block", "--out", str(out), *extra)


def test_map_exact_writes_a_valid_optimal_plan(run_cli, tmp_path):
    out = tmp_path / "plan.json"
    res = run_cli(*_args(out, "--solver", "exact"))
    assert res.exit_code == 0, res.stderr
    plan = read_plan(out)
    assert plan.kind == "pipeline" and plan.device == "pixel6" and plan.model.dtype == "int8"
    assert plan.stages[0].first_layer == 0 and plan.stages[-1].last_layer == plan.model.layers - 1
    assert plan.preprocess.threads == 2 and plan.postprocess.threads == 2
    assert plan.search.solver == "exact" and plan.search.explored_fraction == 1.0
    # throughput = 1 / the slowest stage, and it beats every single-processor baseline
    times = [s.predicted_time_s for s in plan.stages]
    assert plan.predicted.throughput_fps == pytest.approx(1 / max(times))
    singles = {k: v for k, v in plan.search.baselines.items() if k.startswith("single:")}
    assert sorted(singles) == ["single:cpu", "single:gpu", "single:tpu"]
    assert plan.predicted.throughput_fps > max(v["objectives"]["throughput_fps"] for v in singles.values())
    assert "flops" in plan.search.baselines
    assert "bottleneck" in res.stdout and "single-processor fps" in res.stdout and "explored" in res.stdout


def test_map_ga_same_seed_same_plan_and_front(run_cli, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli(*_args(a, "--seed", "3")).exit_code == 0
    assert run_cli(*_args(b, "--seed", "3")).exit_code == 0
    pa, pb = read_plan(a), read_plan(b)
    assert pa.stages == pb.stages and pa.predicted == pb.predicted
    assert pa.search.evaluations == pb.search.evaluations > 0
    assert not (tmp_path / "a.json.ckpt").exists()  # default checkpoint removed after success
    ex = tmp_path / "ex.json"
    assert run_cli(*_args(ex, "--solver", "exact")).exit_code == 0
    assert pa.predicted.throughput_fps >= 0.99 * read_plan(ex).predicted.throughput_fps
    front = tmp_path / "front.json"
    res = run_cli(*_args(front, "--objectives", "throughput,energy"))
    assert res.exit_code == 0, res.stderr
    doc = json.loads(front.read_text())
    pts = doc["search"]["decision"]["front"]
    assert len(pts) >= 2
    fps = np.array([p["objectives"]["throughput_fps"] for p in pts])
    energy = np.array([p["objectives"]["energy_j"] for p in pts])
    order = np.argsort(-fps)
    assert np.all(np.diff(energy[order]) <= 0)  # faster costs more energy along a front


@pytest.mark.parametrize("extra,message", [
    (("--stages", "4"), "4 stages need 4 distinct processors"),
    (("--processors", "cpu,npu"), "unknown processor 'npu'"),
    (("--memory-limit", "1 MB"), "memory constraint (--memory-limit 1.000 MB)"),
    (("--memory-limit", "lots"), "--memory-limit 'lots'"),
    (("--solver", "anneal"), "unknown solver 'anneal'"),
    (("--resume",), "no such checkpoint file to resume from"),
])
def test_map_bad_input_exit_2_one_line_no_plan(run_cli, tmp_path, extra, message):
    out = tmp_path / "plan.json"
    res = run_cli(*_args(out, *extra))
    assert res.exit_code == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not out.exists()
    if "memory" in message and "MB" in message:
        assert "best reachable needs" in res.stderr


def test_map_network_with_fewer_layers_than_stages(run_cli, tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("Relu", ["y"], ["z"], name="relu")], "two_layers",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 8, 8])], initializer=[w])
    model = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    out = tmp_path / "plan.json"
    res = run_cli("map", str(model), "--device", "pixel6", "--out", str(out))  # conv + fused ReLU: one kernel
    assert res.exit_code == 2 and "has 1 layer at kernel granularity" in res.stderr and "fewer than the 3 stages" in res.stderr
    res = run_cli("map", str(model), "--device", "pixel6", "--granularity", "op", "--out", str(out))
    assert res.exit_code == 2 and "has 2 layers" in res.stderr and "fewer than the 3 stages" in res.stderr
    assert not out.exists()
    assert run_cli("--quiet", "map", str(model), "--device", "pixel6", "--granularity", "op", "--stages", "2",
                   "--out", str(out)).exit_code == 0
    assert len(read_plan(out).stages) in (1, 2)


@pytest.mark.slow
def test_map_measured_through_the_reference_runner_never_measures_twice(run_cli, tmp_path):
    """GA fitness measured on this host via --measure-cmd (PROTOCOL.md); a rerun reuses the cache."""
    import sys

    out, cache = tmp_path / "plan.json", tmp_path / "measured.jsonl"
    cmd = f"{sys.executable} -m optimizer.measure.reference_runner"
    args = _args(out, "--generations", "1", "--population", "8", "--measure-repeats", "2",
                 "--measure-cmd", cmd, "--measure-cache", str(cache))
    res = run_cli(*args)
    assert res.exit_code == 0, res.stderr
    plan = read_plan(out)
    lines = cache.read_text().splitlines()
    keys = [tuple(json.loads(line)["key"]) for line in lines]
    assert len(keys) == len(set(keys)) == plan.search.evaluations > 0
    assert plan.search.settings["evaluator"] == "measured"
    measured = {k: json.loads(line)["fps"] for k, line in zip(keys, lines)}
    assert plan.predicted.throughput_fps in measured.values()  # the plan's fps is a measured one
    res = run_cli(*args)  # same search again: every fitness comes from the cache
    assert res.exit_code == 0, res.stderr
    assert cache.read_text().splitlines() == lines
    assert read_plan(out).search.settings["measurements"] == 0
