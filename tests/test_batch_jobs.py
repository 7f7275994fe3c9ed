"""Batch job files: expansion, stable ids, and bad input with file/line/field."""

from __future__ import annotations


import pytest

from optimizer.batch import load_job
from optimizer.errors import SchemaError
from optimizer.shipped import shipped_root

GRID = """\
name: small
defaults: {dtype: int8}
grid:
  models: [mobilenet_v2, resnet50]
  devices: [pixel6]
  seeds: [0, 1]
  map: {solvers: [ga, exact], objectives: [[throughput]]}
  split: {networks: [wifi_10, lte], solvers: [nsga2]}
tasks:
  - {kind: split, model: alexnet, device: galaxy_j6, network: wifi_10, solver: exact}
"""


def _write(tmp_path, text, name="job.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_grid_expands_to_the_product_plus_explicit_tasks(tmp_path):
    job = load_job(_write(tmp_path, GRID))
    tasks = job.expand()
    maps = [t for t in tasks if t.kind == "map"]
    splits = [t for t in tasks if t.kind == "split"]
    assert len(maps) == 2 * 1 * 2 * 2  # models x devices x solvers x seeds
    assert len(splits) == 2 * 1 * 2 * 2 + 1  # models x devices x networks x seeds + explicit
    assert all(t.network is None for t in maps)
    assert {t.granularity for t in splits} == {"block"} and {t.granularity for t in maps} == {"kernel"}
    assert len({t.task_id for t in tasks}) == len(tasks)
    # ids are stable across loads and change with any field
    again = {t.task_id for t in load_job(_write(tmp_path, GRID, "again.yaml")).expand()}
    assert again == {t.task_id for t in tasks}
    assert maps[0].model_copy(update={"seed": 99}).task_id != maps[0].task_id


@pytest.mark.parametrize("text, message", [
    ("name: x\ngrid: {models: [a], devices: [b]\n", "line 3 column 1: malformed YAML"),
    ("name: x\ngrid:\n  models: [a]\n  devices: [b]\n  colour: red\n  map: {}\n",
     "line 5: field 'grid.colour' is not allowed here"),
    ("name: x\ngrid:\n  models: []\n  devices: [b]\n  map: {}\n", "line 3: field 'grid.models'"),
    ("name: x\ngrid:\n  models: [a]\n  devices: [b]\n  seeds: [0, x]\n  map: {}\n",
     "line 5: field 'grid.seeds[1]': Input should be a valid integer"),
    ("name: x\n", "has no 'grid' and no 'tasks'"),
    ("", "the file is empty"),
    ("name: x\ntasks:\n  - {kind: split, model: a, device: b}\n", "line 3: tasks[0]: a split task needs a 'network'"),
    ("name: x\ngrid: {models: [a], devices: [b]}\n", "needs a 'map' and/or a 'split' section"),
])
def test_bad_job_files_name_line_and_field(tmp_path, run_cli, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(SchemaError) as err:
        load_job(path)
    assert message in str(err.value)
    res = run_cli("batch", "plan", path)
    assert res.exit_code == 2 and message in res.stderr.replace("\n", "")


def test_batch_plan_lists_tasks(tmp_path, run_cli):
    res = run_cli("batch", "plan", _write(tmp_path, GRID))
    assert res.exit_code == 0, res.stderr
    assert "17 tasks" in res.stdout


SMARTSPLIT = str(shipped_root() / "jobs" / "smartsplit.yaml")


def test_split_job_file_runs_as_a_batch_job_with_its_costs_and_settings(tmp_path, run_cli):
    """One format for both commands: `dnnplan batch` reads `dnnplan split --job` files, and a
    task of it finds exactly the split `split --job` finds (same costs, solver, TOPSIS)."""
    import yaml

    from optimizer.batch.tasks import build_inputs, execute_task
    from optimizer.search.split_job import SplitJob
    from optimizer.workflow import run_split_job

    tasks = load_job(SMARTSPLIT).expand()
    assert len(tasks) == 5 * 2 and {t.kind for t in tasks} == {"split"}  # models x devices x seeds
    t = tasks[0]
    assert (t.dtype, t.granularity, t.server, t.network) == ("fp32", "block", "smartsplit_i5", "wifi_10")
    assert (t.processors, t.wire_dtypes, t.cost_model) == (["cpu"], ["fp32"], "table")
    assert t.settings == {"topsis_variant": "paper", "weights": [1.0, 1.0, 1.0], "population": 40,
                          "generations": 40}
    res = run_cli("batch", "plan", SMARTSPLIT)
    assert res.exit_code == 0 and "10 tasks" in res.stdout, res.stderr

    doc = yaml.safe_load(open(SMARTSPLIT))
    doc.update(models=["alexnet"], devices=["galaxy_j6"], population=12, generations=6)
    small = tmp_path / "smartsplit_small.yaml"
    small.write_text(yaml.safe_dump(doc))
    row = run_split_job(SplitJob.model_validate(doc))[0]
    (task,) = load_job(small).expand()
    out = execute_task(task, build_inputs(task.input_key, [task]))
    assert out.status == "done", out.error
    assert out.plan["split"]["layer"] == row["chosen"]["split"]
    assert out.plan["split"]["wire_dtype"] == row["chosen"]["wire_dtype"] == "fp32"
    assert out.metrics["latency_s"] == pytest.approx(row["objectives"]["latency_s"], rel=1e-12)
    # the reverse view: the task records the baselines `split --job` prints, as row and as columns
    cmp = out.search["comparison"]
    assert cmp["layers"] == row["layers"] and cmp["chosen"] == row["chosen"]
    for b in ("lbo", "ebo", "cos", "coc", "rs"):
        assert cmp[b] == row[b]
        assert out.metrics[f"{b}_split"] == row[b]["decision"]["split"]
        assert out.metrics[f"{b}_latency_s"] == pytest.approx(row[b]["objectives"]["latency_s"], rel=1e-12)
    # LBO is the least-latency split, so the chosen one cannot beat it
    assert out.metrics["lbo_latency_s"] <= out.metrics["latency_s"] + 1e-12
    run = tmp_path / "run"
    res = run_cli("batch", "run", str(small), "--out", str(run), "--workers", "1")
    assert res.exit_code == 0, res.stderr
    res = run_cli("batch", "report", str(run))
    assert res.exit_code == 0, res.stderr
    line = next(ln.strip() for ln in res.stdout.splitlines() if ln.strip().startswith("alexnet"))
    cells = line.split()
    assert cells[:4] == ["alexnet", "galaxy_j6", str(row["layers"]), str(row["chosen"]["split"])], line
    assert cells[7:12] == [str(row[b]["decision"]["split"]) for b in ("lbo", "ebo", "cos", "coc", "rs")], line
    assert "LBO" in res.stdout and "1 done" in res.stdout
    res = run_cli("batch", "report", str(tmp_path))
    assert res.exit_code == 2 and "not a batch run folder" in res.stderr
    (run / "run.json").write_text("{not json")
    res = run_cli("batch", "report", str(run))
    assert res.exit_code == 2 and "run.json: not valid JSON" in res.stderr, res.stderr
    res = run_cli("batch", "collect", str(run), "--out", str(tmp_path / "t.csv"))
    assert res.exit_code == 0, res.stderr
    import pandas as pd

    table = pd.read_csv(tmp_path / "t.csv")
    assert table["metric_coc_split"].tolist() == [row["coc"]["decision"]["split"]]
    # the same task with the batch defaults (all processors, int8/fp16/fp32 on the wire) differs
    free = task.model_copy(update={"processors": None, "wire_dtypes": None})
    assert free.task_id != task.task_id and free.split_key != task.split_key


def test_split_job_name_unfit_for_a_store_is_one_line(tmp_path):
    doc = open(SMARTSPLIT).read().replace("name: smartsplit", "name: smart split")
    with pytest.raises(SchemaError, match="as a batch job: field 'name'"):
        load_job(_write(tmp_path, doc))


def test_unreachable_scheduler_fails_fast_and_writes_nothing(tmp_path, run_cli):
    out = tmp_path / "run"
    res = run_cli("batch", "run", _write(tmp_path, GRID), "--out", out, "--scheduler", "tcp://127.0.0.1:9")
    assert res.exit_code == 2
    assert "cannot reach a Dask scheduler" in res.stderr
    assert not out.exists()
