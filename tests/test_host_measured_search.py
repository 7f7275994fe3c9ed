"""Measured pipeline search on this host: candidates run for
real on the cores of ``host_cores``, every distinct stage converted once, measurements cached
in JSON lines so an interrupted GA resumes without measuring anything twice."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optimizer.errors import ConfigError
from optimizer.graph import load_graph
from optimizer.hardware import load_device
from optimizer.workflow import pipeline_problem
from optimizer.runtime.host_evaluator import HostPipelineMeasurer, cache_bytes, check_host_device, prune_stage_cache
from optimizer.search import solve
from optimizer.search.evaluators import MeasuredEvaluator

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_keras(tmp_path_factory):
    """An 8-layer conv net (op granularity: 16 two-core mappings) saved as .keras."""
    from optimizer.lazy import keras

    k = keras()
    k.utils.set_random_seed(0)
    x = inp = k.Input((24, 24, 3), name="image")
    for i, f in enumerate((8, 16, 16, 24, 24, 32)):
        x = k.layers.Conv2D(f, 3, padding="same", activation="relu", name=f"conv{i}")(x)
    x = k.layers.GlobalAveragePooling2D(name="gap")(x)
    x = k.layers.Dense(10, name="logits")(x)
    path = tmp_path_factory.mktemp("tiny") / "tiny.keras"
    k.Model(inp, x, name="tiny").save(path)
    return path


@pytest.fixture(scope="module")
def problem(tiny_keras):
    graph = load_graph(tiny_keras, "op")
    return graph, pipeline_problem(graph, "host_cores", dtype="fp32", stages=2)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Shared working directory: its ``results/cache/host_stages`` is the CLI's default stage cache."""
    return tmp_path_factory.mktemp("work")


class Interrupt(Exception):
    pass


def test_interrupted_measured_ga_resumes_without_remeasuring(tmp_path, tiny_keras, problem, workdir):
    graph, prob = problem
    L = len(graph)
    stage_cache = workdir / "results" / "cache" / "host_stages"
    cached_before = len(list(stage_cache.glob("*.tflite")))
    cache, ckpt = tmp_path / "m.jsonl", tmp_path / "ga.ckpt"
    host = HostPipelineMeasurer(tiny_keras, graph, cache_dir=stage_cache, frames=4, repeats=1)
    calls: list[tuple] = []

    def stop_after(k):
        def measure(decision):
            if len(calls) == k:
                raise Interrupt
            calls.append(tuple((s["processor"], s["first_layer"], s["last_layer"]) for s in decision["stages"]))
            return host(decision)
        return measure

    settings = dict(population=6, max_generations=6)
    with pytest.raises(Interrupt):  # killed in generation 1, after the generation-0 checkpoint
        solve(prob, "ga", seed=3, evaluator=MeasuredEvaluator(stop_after(8), cache), checkpoint=ckpt, **settings)
    assert ckpt.exists() and len(calls) == 8 and len(cache.read_text().splitlines()) == 8
    ev = MeasuredEvaluator(stop_after(10 ** 6), cache)
    resumed = solve(prob, "ga", seed=3, evaluator=ev, resume=True, checkpoint=ckpt, **settings)
    assert ev.calls == len(calls) - 8 and resumed.settings["measurements"] == ev.calls
    lines = [json.loads(x) for x in cache.read_text().splitlines()]
    # no candidate measured twice: total measurements == distinct candidates == cache lines
    assert len(calls) == len(set(calls)) == len(lines) == len({tuple(r["key"]) for r in lines})
    assert resumed.evaluations <= len(lines) <= prob.space_size()
    # every distinct stage converted once: prefixes, suffixes and the whole network at most
    assert host.conversions == len(list(stage_cache.glob("*.tflite"))) - cached_before <= 2 * (L - 1) + 1
    # the GA's best is the best measured candidate it saw
    best_fps = resumed.best.objectives["throughput_fps"]
    assert best_fps == pytest.approx(max(r["fps"] for r in lines))
    assert all(r["fps"] > 0 for r in lines)
    # an uninterrupted run with the same seed over the same measurements: same plan, nothing measured
    (tmp_path / "copy.jsonl").write_text(cache.read_text())
    ev2 = MeasuredEvaluator(stop_after(0), tmp_path / "copy.jsonl")
    straight = solve(prob, "ga", seed=3, evaluator=ev2, **settings)
    assert ev2.calls == 0 and straight.best.decision == resumed.best.decision


def test_measured_fps_is_real_and_stages_are_reused(tmp_path, tiny_keras, problem):
    graph, prob = problem
    L = len(graph)
    host = HostPipelineMeasurer(tiny_keras, graph, cache_dir=tmp_path, frames=20, repeats=3)
    one = host({"stages": [{"processor": "cpu0", "first_layer": 0, "last_layer": L - 1}]})
    two = host({"stages": [{"processor": "cpu1", "first_layer": 0, "last_layer": 1},
                           {"processor": "cpu0", "first_layer": 2, "last_layer": L - 1}]})
    conv = host.conversions
    assert conv == 3
    again = host({"stages": [{"processor": "cpu0", "first_layer": 0, "last_layer": 1},
                             {"processor": "cpu1", "first_layer": 2, "last_layer": L - 1}]})
    assert host.conversions == conv  # same layer ranges on swapped cores: no new conversion
    for fps, run in zip((one, two, again), host.runs):
        assert fps == pytest.approx(float(np.median(run["fps_runs"]))) and len(run["fps_runs"]) == 3
        assert 1 < fps < 1e6
    # the run's artifacts compute what the whole network computes (stages really are the model's parts)
    from optimizer.plan.manifest import read_manifest
    from optimizer.runtime import run_parts

    plan2 = host.plan([{"processor": "cpu0", "first_layer": 0, "last_layer": 1},
                       {"processor": "cpu1", "first_layer": 2, "last_layer": L - 1}])
    plan1 = host.plan([{"processor": "cpu0", "first_layer": 0, "last_layer": L - 1}])
    d1, d2 = host.artifacts(plan1), host.artifacts(plan2)
    x = {read_manifest(d1).inputs[0].name: np.random.default_rng(0).uniform(-1, 1, (3, 24, 24, 3)).astype(np.float32)}
    y1 = run_parts(read_manifest(d1), d1, x)
    y2 = run_parts(read_manifest(d2), d2, x)
    name = next(iter(y1))
    assert np.max(np.abs(y1[name] - y2[name])) <= 1e-5


def test_stage_cache_evicts_least_recently_used_and_counts_links_once(tmp_path):
    import os

    def stage(key, size, used):
        (tmp_path / f"{key}.tflite").write_bytes(b"x" * size)
        (tmp_path / f"{key}.json").write_text("{}")
        os.utime(tmp_path / f"{key}.json", (used, used))

    stage("a", 4000, 100.0)
    stage("b", 4000, 200.0)
    stage("c", 4000, 300.0)
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    os.link(tmp_path / "c.tflite", run / "stage0.tflite")  # a candidate links its stage: no extra bytes
    (run / "manifest.json").write_text("{}")
    os.utime(run / "manifest.json", (400.0, 400.0))
    total = cache_bytes(tmp_path)
    assert 12000 < total < 12100
    assert prune_stage_cache(tmp_path, total) == []  # within the limit: nothing removed
    removed = prune_stage_cache(tmp_path, 9000)
    assert removed == [tmp_path / "a.tflite", tmp_path / "a.json"]  # oldest first, and only what is needed
    assert cache_bytes(tmp_path) <= 9000
    # entries used by the running search (at or after keep_since) are never evicted, even over the limit
    removed = prune_stage_cache(tmp_path, 1, keep_since=300.0)
    assert removed == [tmp_path / "b.tflite", tmp_path / "b.json"]
    assert (tmp_path / "c.tflite").is_file() and (run / "stage0.tflite").is_file()
    # evicting a stage a candidate links to frees nothing until the candidate goes too
    prune_stage_cache(tmp_path, 1)
    assert not run.exists() and cache_bytes(tmp_path) == 0


def test_measurer_keeps_its_own_stages_when_the_cache_is_over_its_limit(tmp_path, tiny_keras, problem):
    graph, _ = problem
    L = len(graph)
    first = HostPipelineMeasurer(tiny_keras, graph, cache_dir=tmp_path, frames=4, repeats=1)
    first({"stages": [{"processor": "cpu0", "first_layer": 0, "last_layer": L - 1}]})
    old = {p.name for p in tmp_path.glob("*.tflite")}
    assert len(old) == 1
    with pytest.raises(ConfigError, match="--measure-cache-mb"):
        HostPipelineMeasurer(tiny_keras, graph, cache_dir=tmp_path, cache_limit_mb=0)
    second = HostPipelineMeasurer(tiny_keras, graph, cache_dir=tmp_path, frames=4, repeats=1,
                                  cache_limit_mb=1e-6)
    decision = {"stages": [{"processor": "cpu0", "first_layer": 0, "last_layer": 2},
                           {"processor": "cpu1", "first_layer": 3, "last_layer": L - 1}]}
    assert second(decision) > 0 and second.conversions == 2
    now = {p.name for p in tmp_path.glob("*.tflite")}
    assert len(now) == 2 and not now & old  # the earlier run's stage was evicted, this run's stay
    assert len(list((tmp_path / "runs").iterdir())) == 1
    assert second(decision) > 0 and second.conversions == 2  # and are still hits


def test_cli_map_measure_host_writes_plan_and_reuses_cache(tmp_path, tiny_keras, run_cli, monkeypatch, workdir):
    monkeypatch.chdir(workdir)  # stage cache: results/cache/host_stages of the cwd
    cache = tmp_path / "m.jsonl"
    args = ["map", str(tiny_keras), "--device", "host_cores", "--measure", "host", "--stages", "2",
            "--measure-frames", "4", "--measure-repeats", "1", "--population", "8", "--generations", "4",
            "--measure-cache", str(cache), "--out", str(tmp_path / "plan.json")]
    r = run_cli(*args)
    assert r.exit_code == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["device"] == "host_cores" and plan["model"]["dtype"] == "fp32"
    assert {s["processor"] for s in plan["stages"]} <= {"cpu0", "cpu1"}
    assert all(s["threads"] in (1, None) for s in plan["stages"])  # one thread per core stage
    assert plan["search"]["settings"].get("measurements", 0) >= 1
    before = cache.read_text()
    r = run_cli(*args)
    assert r.exit_code == 0, r.stderr
    assert cache.read_text() == before  # same seed, everything already measured: nothing re-measured
    assert json.loads((tmp_path / "plan.json").read_text())["search"]["settings"]["measurements"] == 0


def test_bad_input(run_cli, tmp_path, tiny_keras):
    with pytest.raises(ConfigError, match="host_cores"):
        check_host_device(load_device("pixel6"))
    r = run_cli("map", str(tiny_keras), "--device", "host_cores", "--measure", "phone", "--stages", "2",
                "--out", str(tmp_path / "p.json"))
    assert r.exit_code == 2 and "--measure 'phone'" in r.stderr
    r = run_cli("map", str(tiny_keras), "--device", "pixel6", "--measure", "host", "--stages", "2",
                "--out", str(tmp_path / "p.json"))
    assert r.exit_code == 2 and "use --device host_cores" in r.stderr
    r = run_cli("map", str(tiny_keras), "--device", "host_cores", "--measure", "host", "--solver", "exact",
                "--out", str(tmp_path / "p.json"))
    assert r.exit_code == 2 and "--solver ga" in r.stderr
    assert not (tmp_path / "p.json").exists()


def test_int8_stages_are_calibrated_through_the_prefix_and_run(tmp_path, tiny_keras, problem):
    graph, _ = problem
    host = HostPipelineMeasurer(tiny_keras, graph, dtype="int8", cache_dir=tmp_path, frames=6, repeats=1,
                                calib_samples=4)
    fps = host({"stages": [{"processor": "cpu0", "first_layer": 0, "last_layer": 2},
                           {"processor": "cpu1", "first_layer": 3, "last_layer": len(graph) - 1}]})
    assert fps > 0 and host.conversions == 2
    metas = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert len(metas) == 2
    for meta in metas:  # full-integer stages: int8 tensors with quantization parameters at both ends
        for spec in meta["inputs"] + meta["outputs"]:
            assert spec["dtype"] == "int8" and spec["quantization"]["scale"] > 0


def test_stages_are_pinned_to_the_cores_their_processors_name():
    import os
    from types import SimpleNamespace as NS

    from optimizer.runtime import core_groups

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    parts = [NS(name="stage0", processor="cpu1", location="device"),
             NS(name="stage1", processor="cpu0", location="device")]
    # host_cores names this machine's cores: cpu1 is the second CPU whatever the stage order
    assert core_groups(NS(device="host_cores"), parts) == {"stage0": [cpus[1]], "stage1": [cpus[0]]}
    # a phone's processors are not this host's cores: stage k runs on CPU k
    phone = [NS(name="stage0", processor="gpu", location="device"),
             NS(name="stage1", processor="cpu", location="device"),
             NS(name="tail", processor="server", location="server")]
    assert core_groups(NS(device="pixel6"), phone) == {"stage0": [cpus[0]], "stage1": [cpus[1]], "tail": None}
    assert core_groups(NS(device="host_cores"), parts[:1]) == {"stage0": None}  # one stage: not pinned
