"""Batch throughput: the same job on 1 and 2 local workers, and on a Dask LocalCluster of 2.

Run: .venv/bin/python benchmarks/bench_batch.py [JOB]   (a file or a job name; default: paper_grid)
Prints tasks/s per backend and the 2-vs-1 speed-up measured in this run (shared inputs are
built once per key and counted in each run's wall time).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from optimizer.batch import ResultStore, load_job, run_job


def main(job_path: str = "paper_grid") -> None:
    job = load_job(job_path)
    n = len(job.expand())
    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, kwargs in (("pool x1", {"workers": 1}), ("pool x2", {"workers": 2}),
                              ("dask LocalCluster x2", {"local_cluster": 2})):
            s = run_job(job, ResultStore(Path(tmp) / label.replace(" ", "_")), **kwargs)
            rates[label] = n / s.wall_time_s
            print(f"{label:22s} {n} tasks ({s.done} done, {s.failed} failed) in {s.wall_time_s:6.1f} s "
                  f"= {rates[label]:.2f} tasks/s")
    print(f"speed-up 2 vs 1 workers (pool): x{rates['pool x2'] / rates['pool x1']:.2f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
