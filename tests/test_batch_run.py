"""Batch runs: resume after SIGKILL, Dask LocalCluster equivalence, failing tasks.

The grid is 4 devices x ``SEEDS`` seeds x (exact map, GA map, NSGA-II split) on the tiny ONNX
model; the Dask run covers the first ``DASK_SEEDS`` seeds and is compared row by row with the
same tasks of the process-pool run (a task's result does not depend on the rest of its job).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from optimizer.batch import ResultStore, load_job, run_job

VOLATILE = ["wall_time_s"]  # timings differ between runs; everything else must not
SEEDS = 8  # 96 tasks
TASKS = 12 * SEEDS
KILL_AT = 40  # results written when the run is killed: well before its end
DASK_SEEDS = 2  # 24 tasks


def _job(tmp_path: Path, model: Path, seeds: int, extra: str = "") -> Path:
    text = f"""\
name: grid
grid:
  models: [{model}]
  devices: [pixel6, galaxy_s22, pixel4, galaxy_s20]
  seeds: {list(range(seeds))}
  map: {{solvers: [exact, ga], settings: {{}}}}
  split: {{networks: [wifi_10], solvers: [nsga2], settings: {{population: 12, generations: 6}}}}
{extra}"""
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def _table(run: Path, task_ids: pd.Series | None = None) -> pd.DataFrame:
    """The run's table without timings; with ``task_ids``, only their rows, columns by name (the
    metric columns come in the order of the first rows' metrics)."""
    df = ResultStore.open_existing(run).table().drop(columns=VOLATILE)
    if task_ids is not None:
        df = df[df.task_id.isin(set(task_ids))].dropna(axis=1, how="all").sort_index(axis=1)
    return df.reset_index(drop=True)


@pytest.fixture(scope="module")
def reference_run(tiny_onnx, tmp_path_factory):
    """An uninterrupted run of the whole grid on the local process pool."""
    tmp = tmp_path_factory.mktemp("ref")
    job = load_job(_job(tmp, tiny_onnx, SEEDS))
    assert len(job.expand()) == TASKS
    summary = run_job(job, ResultStore(tmp / "run"), workers=2)
    assert (summary.done, summary.failed) == (TASKS, 0)
    return tmp / "run"


@pytest.mark.slow
def test_sigkill_halfway_then_resume_loses_and_repeats_nothing(tiny_onnx, tmp_path, reference_run):
    job = _job(tmp_path, tiny_onnx, SEEDS)
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "optimizer.cli", "--quiet", "batch", "run", str(job), "--out", str(run),
           "--workers", "2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 180
    done = 0
    while time.time() < deadline and proc.poll() is None:
        done = len(list(run.glob("tasks/*/result.json")))
        if done >= KILL_AT:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"run ended before it could be killed: {proc.stderr.read().decode()[-500:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = len(list(run.glob("tasks/*/result.json")))
    assert KILL_AT <= killed_at < TASKS
    # no half-written results: every result.json present parses
    store = ResultStore.open_existing(run)
    assert store.counts()["done"] == killed_at

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-1000:]
    ids = [p.parent.name for p in run.glob("tasks/*/result.json")]
    assert len(ids) == len(set(ids)) == TASKS
    pd.testing.assert_frame_equal(_table(run), _table(reference_run))

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and store.counts()["done"] == TASKS


@pytest.mark.slow
def test_dask_local_cluster_matches_local_pool(tiny_onnx, tmp_path, reference_run):
    job = load_job(_job(tmp_path, tiny_onnx, DASK_SEEDS))
    summary = run_job(job, ResultStore(tmp_path / "dask"), local_cluster=2)
    assert summary.backend.startswith("dask") and summary.done == 12 * DASK_SEEDS
    dask = _table(tmp_path / "dask", ResultStore.open_existing(tmp_path / "dask").table().task_id)
    assert len(dask) == 12 * DASK_SEEDS and set(dask.kind) == {"map", "split"} and dask.seed.nunique() == DASK_SEEDS
    pd.testing.assert_frame_equal(dask, _table(reference_run, dask.task_id))


def test_failing_tasks_are_recorded_and_others_finish(tiny_onnx, tmp_path, run_cli):
    # a name no task can run is refused before the run folder exists
    bad = _job(tmp_path, tiny_onnx, 1, "tasks:\n  - {kind: map, model: no_such_net, device: pixel6}\n")
    res = run_cli("--quiet", "batch", "run", bad, "--out", tmp_path / "bad")
    assert res.exit_code == 2 and "unknown zoo network 'no_such_net'" in res.stderr
    assert not (tmp_path / "bad").exists()
    # a task that fails only when it runs is recorded, and the others finish
    extra = f"tasks:\n  - {{kind: map, model: {tiny_onnx}, device: pixel6, memory_limit: 10 B}}\n"
    job = _job(tmp_path, tiny_onnx, 1, extra)
    res = run_cli("--quiet", "batch", "run", job, "--out", tmp_path / "run")
    assert res.exit_code == 1
    table = ResultStore.open_existing(tmp_path / "run").table()
    failed = table[table.status == "failed"].set_index("model")
    assert len(failed) == 1 and (table.status == "done").sum() == 12
    assert "memory" in failed.loc[str(tiny_onnx), "error"]
    status = run_cli("batch", "status", tmp_path / "run")
    assert "12 done, 1 failed" in status.stdout and "memory" in status.stdout
    # failed tasks are not retried without --retry-failed
    again = run_cli("--quiet", "batch", "run", job, "--out", tmp_path / "run")
    assert "0 run now" in again.stdout.replace("\n", " ")
    retry = run_cli("--quiet", "batch", "run", job, "--out", tmp_path / "run", "--retry-failed")
    assert "1 run now" in retry.stdout.replace("\n", " ")


def test_collect_writes_csv_and_parquet(tiny_onnx, tmp_path, run_cli):
    job = _job(tmp_path, tiny_onnx, 1)
    assert run_cli("--quiet", "batch", "run", job, "--out", tmp_path / "run").exit_code == 0
    for name in ("t.csv", "t.parquet"):
        res = run_cli("batch", "collect", tmp_path / "run", "--out", tmp_path / name)
        assert res.exit_code == 0, res.stderr
        df = pd.read_csv(tmp_path / name) if name.endswith("csv") else pd.read_parquet(tmp_path / name)
        assert len(df) == 12
        assert {"task_id", "kind", "model", "solver", "seed", "objectives", "evaluations",
                "wall_time_s", "plan_path"} <= set(df.columns)
        assert (df.evaluations > 0).all()
    bad = run_cli("batch", "collect", tmp_path / "run", "--out", tmp_path / "t.xlsx")
    assert bad.exit_code == 2 and "expected .csv or .parquet" in bad.stderr
    nota = run_cli("batch", "status", tmp_path)
    assert nota.exit_code == 2 and "not a batch run folder" in nota.stderr
