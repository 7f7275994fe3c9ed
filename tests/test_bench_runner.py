"""`make bench` (benchmarks/run_all.py): picks benchmarks, runs them, reports their exit status."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

RUNNER = REPO / "benchmarks" / "run_all.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RUNNER), *args], capture_output=True, text=True, cwd=REPO)


def test_lists_every_benchmark_and_filters_by_substring():
    every = sorted(p.stem.removeprefix("bench_") for p in (REPO / "benchmarks").glob("bench_*.py"))
    assert _run("--list").stdout.split() == every
    assert _run("--list", "--only", "thermal", "--skip", "fit").stdout.split() == \
        [n for n in every if "thermal" in n and "fit" not in n]
    bad = _run("--only", "no_such_benchmark")
    assert bad.returncode == 2 and "no benchmark matches" in bad.stderr and "cli_startup" in bad.stderr


def test_runs_the_chosen_benchmark_and_logs_it():
    r = _run("--only", "cli_startup")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dnnplan --help: median" in r.stdout and "1/1 passed" in r.stdout
    assert "dnnplan --help: median" in (REPO / "results" / "bench" / "cli_startup.log").read_text()
