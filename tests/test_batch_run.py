"""Batch runs: resume after SIGKILL, Dask LocalCluster equivalence, failing tasks."""

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


def _table(run: Path) -> pd.DataFrame:
    return ResultStore.open_existing(run).table().drop(columns=VOLATILE).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference_run(tiny_onnx, tmp_path_factory):
    """An uninterrupted 240-task run on the local process pool."""
    tmp = tmp_path_factory.mktemp("ref")
    job = load_job(_job(tmp, tiny_onnx, 20))
    assert len(job.expand()) == 240
    summary = run_job(job, ResultStore(tmp / "run"), workers=2)
    assert (summary.done, summary.failed) == (240, 0)
    return tmp / "run"


@pytest.mark.slow
def test_sigkill_halfway_then_resume_loses_and_repeats_nothing(tiny_onnx, tmp_path, reference_run):
    job = _job(tmp_path, tiny_onnx, 20)
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "optimizer.cli", "--quiet", "batch", "run", str(job), "--out", str(run),
           "--workers", "2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 180
    done = 0
    while time.time() < deadline and proc.poll() is None:
        done = len(list(run.glob("tasks/*/result.json")))
        if done >= 100:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"run ended before it could be killed: {proc.stderr.read().decode()[-500:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = len(list(run.glob("tasks/*/result.json")))
    assert 100 <= killed_at < 240
    # no half-written results: every result.json present parses
    store = ResultStore.open_existing(run)
    assert store.counts()["done"] == killed_at

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-1000:]
    ids = [p.parent.name for p in run.glob("tasks/*/result.json")]
    assert len(ids) == len(set(ids)) == 240
    pd.testing.assert_frame_equal(_table(run), _table(reference_run))

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and store.counts()["done"] == 240


@pytest.mark.slow
def test_dask_local_cluster_matches_local_pool(tiny_onnx, tmp_path, reference_run):
    job = load_job(_job(tmp_path, tiny_onnx, 20))
    summary = run_job(job, ResultStore(tmp_path / "dask"), local_cluster=2)
    assert summary.backend.startswith("dask") and summary.done == 240
    pd.testing.assert_frame_equal(_table(tmp_path / "dask"), _table(reference_run))


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
