"""Runs that do not collide: one ``batch run`` per run folder (a lock naming its holder), workers
(and quantize's calibration helpers) that die with their parent, a damaged task result re-run
instead of failing the folder, caches checked by hash, and job files that run no command unless
allowed."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _safety import REPO, pool_workers


def _job(tmp_path: Path, model: Path, seeds: int = 2, settings: str = "", solver: str = "exact") -> Path:
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\ngrid:\n  models: [{model}]\n  devices: [pixel6, pixel4]\n  seeds: {list(range(seeds))}\n"
                   f"  map: {{solvers: [{solver}]{settings}}}\n")
    return job


def _start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.Popen([sys.executable, "-m", "optimizer.cli", "--quiet", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -------------------------------------------------------------------------------------- the lock
def test_a_second_run_on_a_held_folder_exits_2_naming_the_holder(tmp_path, tiny_onnx, run_cli):
    from optimizer.folderlock import FolderLock

    run = tmp_path / "run"
    run.mkdir()
    with FolderLock(run, "run folder"):
        r = run_cli("batch", "run", _job(tmp_path, tiny_onnx), "--out", run)
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"another 'dnnplan batch run' (PID {os.getpid()}) is using this run folder" in r.stderr
    assert not (run / "tasks").exists()


@pytest.mark.slow
def test_two_concurrent_runs_compute_each_task_once(tmp_path, chain_onnx):
    """Before: both runs computed every task."""
    job = _job(tmp_path, chain_onnx, seeds=1, solver="ga", settings=", settings: {max_generations: 15, patience: 15}")
    first = _start("batch", "run", str(job), "--out", "run", "--workers", "1", cwd=tmp_path)
    deadline = time.time() + 60
    while not (tmp_path / "run" / "run.json").exists() and time.time() < deadline and first.poll() is None:
        time.sleep(0.02)
    second = _start("batch", "run", str(job), "--out", "run", "--workers", "1", cwd=tmp_path)
    outs = [p.communicate(timeout=300) for p in (first, second)]
    ran = [int(m.group(1)) for out, _ in outs for m in [re.search(r"\((\d+) run now", out)] if m]
    assert sum(ran) == 2, outs  # two tasks, each computed by one run
    assert first.returncode == 0, outs[0][1]
    # the second started while the first held the folder (its tasks take seconds)
    assert second.returncode == 2 and f"(PID {first.pid}) is using this run folder" in outs[1][1], outs[1][1]


def test_a_lock_left_by_a_dead_run_is_taken_over_with_a_note(tmp_path, tiny_onnx, run_cli):
    run = tmp_path / "run"
    run.mkdir()
    dead = _dead_pid()
    (run / "dnnplan.lock").write_text(f"{dead}\n")
    r = run_cli("batch", "run", _job(tmp_path, tiny_onnx), "--out", run, "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert f"taking over the run folder from PID {dead}, which ended without releasing it" in r.stderr
    assert (run / "dnnplan.lock").read_text() == ""  # released


# -------------------------------------------------------------------------------- damaged results
def test_a_damaged_result_is_run_again_with_a_warning(tmp_path, tiny_onnx, run_cli):
    """Before: a truncated result.json made the whole folder 'damaged' (exit 2) until deleted by hand."""
    job, run = _job(tmp_path, tiny_onnx), tmp_path / "run"
    assert run_cli("batch", "run", job, "--out", run, "--workers", "1").exit_code == 0
    result = sorted(run.glob("tasks/*/result.json"))[0]
    whole = result.read_text()
    result.write_text(whole[: len(whole) // 2])
    status = run_cli("batch", "status", run)
    assert status.exit_code == 0 and "damaged" in status.stderr and "3 done" in status.stdout, status
    r = run_cli("batch", "run", job, "--out", run, "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert f"{result}: damaged" in r.stderr and "(1 run now, 3 already finished)" in r.stdout, (r.stdout, r.stderr)
    assert json.loads(result.read_text())["status"] == "done"
    assert result.with_name("result.json.damaged").read_text() == whole[: len(whole) // 2]


# ---------------------------------------------------------------------------------------- workers
@pytest.mark.slow
def test_pool_workers_die_when_the_run_is_killed(tmp_path, chain_onnx):
    """Before: after ``kill -9`` of ``batch run`` its pool workers kept computing."""
    import psutil

    job = _job(tmp_path, chain_onnx, solver="ga", settings=", settings: {max_generations: 100000, patience: 100000}")
    proc = _start("batch", "run", str(job), "--out", "run", "--workers", "2", cwd=tmp_path)
    main, family = psutil.Process(proc.pid), []
    try:
        workers = pool_workers(main, 2)
        assert len(workers) >= 2, "the workers did not start"
        family = main.children(recursive=True)
        _kill_and_expect_gone(proc, family)
    finally:  # never leave the run or its workers behind
        _kill_all(proc, main, family)


def _kill_and_expect_gone(proc: subprocess.Popen[str], family: list) -> None:
    """``kill -9`` the process ``proc``; every process of ``family`` must end within 10 s."""
    import psutil

    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 10
    alive = family
    while alive and time.time() < deadline:
        time.sleep(0.2)
        alive = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, [p.cmdline()[-1][:80] for p in alive]


def _kill_all(proc: subprocess.Popen[str], main: object, family: list) -> None:
    import psutil

    for p in [main] * (proc.poll() is None) + family:
        with contextlib.suppress(psutil.Error):
            p.kill()
    proc.wait()


@pytest.fixture(scope="module")
def chain_onnx(tmp_path_factory):
    from _bad_inputs import write_chain_onnx

    return write_chain_onnx(tmp_path_factory.mktemp("chain") / "chain.onnx")


# ----------------------------------------------------------------------------------------- caches
def test_a_stage_cache_entry_is_used_only_when_its_hash_matches(tmp_path):
    """Before: a host-stage cache file was used whatever its bytes."""
    from optimizer.fileio import sha256_file
    from optimizer.runtime.host_evaluator import _verified_stage

    stage, meta = tmp_path / "k.tflite", tmp_path / "k.json"
    stage.write_bytes(b"TFL3 model bytes")
    meta.write_text(json.dumps({"sha256": sha256_file(stage), "inputs": [], "outputs": []}))
    assert _verified_stage(stage, meta) == {"sha256": sha256_file(stage), "inputs": [], "outputs": []}
    stage.write_bytes(b"TFL3 other bytes")
    with pytest.warns(UserWarning, match="stage cache entry damaged or altered"):
        assert _verified_stage(stage, meta) is None
    assert not stage.exists() and not meta.exists()  # removed: converted again


# ------------------------------------------------------------------------------ commands in jobs
def test_a_job_file_runs_no_command_unless_the_user_allows_it(tmp_path, tiny_onnx, run_cli):
    """A received job file with ``measure_cmd`` would run any program: refused in one line (exit 2,
    no run folder) until ``--allow-commands``; ``batch plan`` lists the command."""
    marker = tmp_path / "ran"
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\ntasks:\n  - {{kind: map, model: {tiny_onnx}, device: pixel6, "
                   f"measure_cmd: 'touch {marker}'}}\n")
    r = run_cli("batch", "run", job, "--out", tmp_path / "run")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"measure_cmd would run the command 'touch {marker}'" in r.stderr and "--allow-commands" in r.stderr
    assert not (tmp_path / "run").exists() and not marker.exists()
    r = run_cli("batch", "plan", job)
    assert r.exit_code == 0 and f"runs the command 'touch {marker}'" in r.stdout


@pytest.mark.slow
def test_quantize_calibration_helpers_die_with_their_parent(tmp_path):
    """Before: after ``kill -9`` of a quantize run its spawned calibration helpers lived on."""
    import psutil

    code = ("import time\nfrom optimizer.quantize.parallel_calibration import parallel_calibration\n"
            "with parallel_calibration(2):\n    print('ready', flush=True)\n    time.sleep(120)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    main, family = psutil.Process(proc.pid), []
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        family = main.children(recursive=True)
        assert family, "no helper process started"
        _kill_and_expect_gone(proc, family)
    finally:
        _kill_all(proc, main, family)
