"""The workflow layer: typed requests (unknown keys and bad values rejected in one line, in the
caller's words) and batch tasks that ask for what the CLI can (split objectives honoured)."""

from __future__ import annotations

import json

import pytest

from optimizer.errors import ConfigError, DnnplanError, UnknownNameError
from optimizer.workflow import PipelineRequest, SplitRequest, parse_request, plan_split

SPLIT = {"model": "tiny", "device": "pixel4", "network": "wifi_13"}


@pytest.mark.parametrize("cls,data", [
    (PipelineRequest, {"model": "tiny", "device": "pixel6", "stage": 2}),
    (SplitRequest, {**SPLIT, "bandwith_bps": "5 Mbps"}),
])
def test_unknown_key_is_one_line_naming_it_and_the_valid_ones(cls, data):
    with pytest.raises(ConfigError) as err:
        parse_request(cls, data)
    msg = str(err.value)
    bad = (set(data) - set(cls.model_fields)).pop()
    assert f"unknown field {bad!r}" in msg and "valid:" in msg and len(msg.splitlines()) == 1
    assert ("stages" if cls is PipelineRequest else "bandwidth_bps") in msg
    assert err.value.exit_code == 2


@pytest.mark.parametrize("cls,data,message", [
    (PipelineRequest, {"stages": 0}, "PipelineRequest: stages: Input should be greater than or equal to 1 (got 0)"),
    (PipelineRequest, {"memory_limit": "lots"}, "memory_limit 'lots'"),
    (PipelineRequest, {"memory_limit": "0 MB"}, "memory_limit '0 MB': expected a value > 0"),
    (PipelineRequest, {"measure": "phone"}, "measure 'phone': expected 'host'"),
    (PipelineRequest, {"solver": "exact", "measure_cmd": "x"}, "measure_cmd applies to solver ga, not 'exact'"),
    (SplitRequest, {"bandwidth_bps": "0 Mbps"}, "bandwidth_bps '0 Mbps': expected a value > 0"),
    (SplitRequest, {"weights": "1,x"}, "weights '1,x': expected comma-separated numbers"),
    (SplitRequest, {"objectives": "latency,peak-temp", "weights": [1, 1, 1]},
     "weights: weights 1,1,1 has 3 value(s); expected 4 (one per objective) (latency, energy, memory, peak_temp_c)"),
    (SplitRequest, {"cost_model": "closed"}, "cost_model 'closed': expected one of table, smartsplit"),
    (SplitRequest, {"dtype": "int4"}, "SplitRequest: dtype: Input should be 'int8', 'fp16' or 'fp32' (got 'int4')"),
])
def test_bad_values_are_one_line_in_field_names(cls, data, message):
    base = {"model": "tiny", "device": "pixel6"} if cls is PipelineRequest else SPLIT
    with pytest.raises(DnnplanError) as err:
        parse_request(cls, {**base, **data})
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_unknown_names_and_canonical_objectives():
    with pytest.raises(UnknownNameError, match="unknown solver 'anneal'"):
        parse_request(SplitRequest, {**SPLIT, "solver": "anneal"})
    with pytest.raises(UnknownNameError, match="unknown split objective 'heat'.*sustained-fps"):
        parse_request(SplitRequest, {**SPLIT, "objectives": ["latency", "heat"]})
    r = parse_request(SplitRequest, {**SPLIT, "objectives": "energy_j,peak-temp,latency,peak_temp_c",
                                     "bandwidth_bps": "5 Mbps", "memory_limit": "1 MB", "weights": "1,1,1,2"})
    assert r.objectives == ("latency", "energy", "memory", "peak_temp_c")
    assert r.thermal_objectives == ("peak_temp_c",) and r.weights == (1.0, 1.0, 1.0, 2.0)
    assert r.bandwidth_bps == 5e6 and r.memory_limit == 1e6
    p = parse_request(PipelineRequest, {"model": "m", "device": "d", "objectives": "fps,time-to-throttle",
                                        "measure": "host"})
    assert p.objectives == ("fps", "time_to_throttle_s") and p.thermal_objectives == ("time_to_throttle_s",)
    assert p.compute_dtype == "fp32"
    assert parse_request(PipelineRequest, {"model": "m", "device": "d"}).compute_dtype == "int8"


@pytest.mark.parametrize("args,message", [
    (["map", "--stages", "0"], "PipelineRequest: --stages: Input should be greater than or equal to 1 (got 0)"),
    (["map", "--cpu-cores", "0"], "PipelineRequest: --cpu-cores: Input should be greater than or equal to 1"),
    (["split", "--topsis", "fancy"], "--topsis 'fancy': expected one of paper, classic"),
    (["split", "--wire", "int8,int4"], "int4"),
])
def test_cli_bad_request_value_exit_2_one_line(run_cli, tiny_onnx, tmp_path, args, message):
    out = tmp_path / "plan.json"
    extra = ["--network", "wifi_10"] if args[0] == "split" else []
    r = run_cli(args[0], str(tiny_onnx), "--device", "pixel6", *extra, "--out", str(out), *args[1:])
    assert r.exit_code == 2, r.stdout
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def test_plan_split_request_with_thermal_objective(tiny_onnx):
    req = parse_request(SplitRequest, {**SPLIT, "model": str(tiny_onnx), "granularity": "op", "solver": "exact",
                                       "objectives": ["latency", "energy", "memory", "peak-temp"]})
    out = plan_split(req)
    assert out.plan.search.objectives[-1] == "peak_temp_c"
    assert all("peak_temp_c" in c.objectives for c in out.result.front)


def test_batch_split_task_honours_its_objectives(tiny_onnx, tmp_path):
    """Before the workflow layer a batch split task dropped ``objectives``: the plan searched
    latency, energy and memory only, and an unknown objective passed silently; now it is refused
    before the run folder is created."""
    from optimizer.batch import ResultStore, load_job, run_job
    from optimizer.errors import ConfigError

    tasks = f"""\
name: thermal_split
tasks:
  - {{kind: split, model: {tiny_onnx}, device: pixel4, network: wifi_13, granularity: op, solver: exact,
     objectives: [latency, energy, memory, sustained-fps]}}
  - {{kind: split, model: {tiny_onnx}, device: pixel4, network: wifi_13, granularity: op, solver: exact}}
"""
    job = tmp_path / "job.yaml"
    job.write_text(tasks + """\
  - {kind: split, model: alexnet, device: pixel4, network: wifi_13, granularity: op, solver: exact,
     objectives: [latency, heat]}
""")
    with pytest.raises(ConfigError, match="unknown split objective 'heat'"):
        run_job(load_job(job), ResultStore(tmp_path / "bad"), workers=1)
    assert not (tmp_path / "bad").exists()
    job.write_text(tasks)
    store = ResultStore(tmp_path / "run")
    summary = run_job(load_job(job), store, workers=1)
    assert (summary.done, summary.failed) == (2, 0)
    plans, chosen = {}, {}
    for task, result in store.records():
        key = tuple(task.objectives)
        plans[key] = json.loads((store.task_dir(task.task_id) / "plan.json").read_text())
        chosen[key] = result["search"]["comparison"]["objectives"]
    thermal, plain = ("latency", "energy", "memory", "sustained-fps"), ("latency", "energy", "memory")
    assert plans[thermal]["search"]["objectives"] == ["latency_s", "energy_j", "memory_bytes", "sustained_fps"]
    assert plans[plain]["search"]["objectives"] == ["latency_s", "energy_j", "memory_bytes"]
    assert chosen[thermal]["sustained_fps"] > 0 and "sustained_fps" not in chosen[plain]


def test_batch_map_task_with_measured_fitness(tiny_onnx, tmp_path):
    """A map task can ask for what ``dnnplan map --measure-cmd`` does: GA fitness measured by the
    reference runner (PROTOCOL.md); task ids of tasks without it are unchanged."""
    import sys

    from optimizer.batch import ResultStore, TaskSpec, load_job, run_job

    plain = TaskSpec(kind="map", model="m", device="pixel6")
    assert "measure" not in plain.canonical() and "measure_cmd" not in plain.canonical()
    split = TaskSpec(kind="split", model="m", device="pixel6", network="wifi_10", measure="host")
    assert split.measure is None and "measure" not in split.canonical()
    cmd = f"{sys.executable} -m optimizer.measure.reference_runner"
    job = tmp_path / "job.yaml"
    job.write_text(f"""\
name: measured_map
tasks:
  - {{kind: map, model: {tiny_onnx}, device: pixel6, stages: 2, measure_cmd: "{cmd}",
     settings: {{max_generations: 1, population: 4}}}}
""")
    store = ResultStore(tmp_path / "run")
    with pytest.raises(ConfigError, match="measure_cmd would run the command .* pass --allow-commands"):
        run_job(load_job(job), store, workers=1)  # a job file alone never runs a program
    assert not (tmp_path / "run").exists()
    summary = run_job(load_job(job), store, workers=1, allow_commands=True)
    (task, result), = store.records()
    assert (summary.done, summary.failed) == (1, 0), result["error"]
    plan = json.loads((store.task_dir(task.task_id) / "plan.json").read_text())
    assert plan["search"]["settings"]["evaluator"] == "measured"
    assert plan["search"]["settings"]["measurements"] == plan["search"]["evaluations"] > 0
