"""Split search quality: NSGA-II front vs the exact front, and what the joint variables save.

For every network of ``search_spaces/jobs/smartsplit.yaml`` (block granularity) and resnet50 at
op granularity, on each phone of the job over its network, with the joint space (every phone
processor and clock level, wire dtypes int8/fp16/fp32, INT8 compute):

* share of the exact front's points found (median);
* hypervolume ratio HV(NSGA-II front) / HV(exact front), pymoo's HV indicator on objectives
  normalised by the exact front's ideal and nadir points, common reference point 1.1 in each;
  median (and minimum) over the seeds, with the distinct evaluations used;
* joint vs split-index-only: least latency (LBO) and least energy (EBO) of the joint space
  against the paper's setting (head on the CPU at its highest clock, FP32 tensors on the wire),
  and against the same split-index-only space with INT8 tensors on the wire (what processor and
  clock alone save).

Run: ``.venv/bin/python benchmarks/bench_split_quality.py [--seeds 10]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.graph import load_graph  # noqa: E402
from optimizer.search.nsga2 import run_nsga2  # noqa: E402
from optimizer.search.split import SplitProblem, build_split_costs  # noqa: E402
from optimizer.search.split_baselines import index_only_decisions  # noqa: E402
from optimizer.search.split_job import SplitJob  # noqa: E402
from optimizer.shipped import shipped_root  # noqa: E402
from optimizer.yamlio import load_model_yaml  # noqa: E402

JOB = shipped_root() / "jobs" / "smartsplit.yaml"


def hv_ratio(F: np.ndarray, exact: np.ndarray) -> float:
    from pymoo.indicators.hv import HV

    lo, hi = exact.min(axis=0), exact.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    hv = HV(ref_point=np.full(exact.shape[1], 1.1))
    return float(hv((F - lo) / span) / hv((exact - lo) / span))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--population", type=int, default=40)
    ap.add_argument("--generations", type=int, default=40)
    args = ap.parse_args()
    job = load_model_yaml(JOB, SplitJob)
    cases = [(m, "block") for m in job.models] + [("resnet50", "op")]
    print(f"NSGA-II population {args.population}, generations {args.generations}, seeds 0..{args.seeds - 1}; "
          f"network {job.network}, server {job.server}; joint space, INT8 compute")
    print(f"{'network':<14}{'gran':<6}{'device':<13}{'space':>6}{'front':>6}{'HV med':>9}{'HV min':>9}"
          f"{'found':>7}{'evals med':>10}{'explored':>9}{'s/run':>7}   {'LBO lat joint/idx ms':>22}{'saved':>7}"
          f"   {'EBO E joint/idx mJ':>20}{'saved':>7}   {'vs int8-wire idx: lat':>9}{'E':>9}")
    all_ratios = []
    for model, gran in cases:
        graph = load_graph(model, gran)
        for device in job.devices:
            costs = build_split_costs(graph, device, job.network, job.server, dtype="int8")
            p = SplitProblem(costs, interior_only=True)  # SmartSplit's boundaries 1..L-1, as recorded in BENCHMARKS.md
            exact = p.pareto_front()[0]
            ratios, evals, times, found = [], [], [], []
            exact_set = {tuple(r) for r in exact}
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                _, F, adapter, _ = run_nsga2(p, seed=seed, population=args.population,
                                             generations=args.generations)
                times.append(time.perf_counter() - t0)
                ratios.append(hv_ratio(F, exact))
                found.append(len(exact_set & {tuple(r) for r in F}) / len(exact_set))
                evals.append(len(adapter.archive()))
            all_ratios += ratios
            X = p.enumerate()
            ev = p.evaluate(X)
            F, G = ev.F, ev.G
            Fi = p.evaluate(index_only_decisions(p)).F
            F8 = p.evaluate(index_only_decisions(p, wire_dtype="int8")).F
            ok = G[:, 0] <= 0
            lat_j, lat_i, lat_8 = F[ok, 0].min(), Fi[:, 0].min(), F8[:, 0].min()
            e_j, e_i, e_8 = F[ok, 1].min(), Fi[:, 1].min(), F8[:, 1].min()
            print(f"{graph.name:<14}{gran:<6}{device:<13}{p.space_size():>6}{len(exact):>6}"
                  f"{statistics.median(ratios):>9.2%}{min(ratios):>9.2%}{statistics.median(found):>7.0%}"
                  f"{statistics.median(evals):>10.0f}"
                  f"{statistics.median(evals) / p.space_size():>9.1%}{statistics.median(times):>7.2f}   "
                  f"{lat_j * 1e3:>10.1f}/{lat_i * 1e3:<11.1f}{1 - lat_j / lat_i:>7.1%}   "
                  f"{e_j * 1e3:>9.1f}/{e_i * 1e3:<10.1f}{1 - e_j / e_i:>7.1%}   "
                  f"{1 - lat_j / lat_8:>9.1%}{1 - e_j / e_8:>9.1%}", flush=True)
    print(f"overall: median HV ratio {statistics.median(all_ratios):.2%}, minimum {min(all_ratios):.2%} "
          f"over {len(all_ratios)} runs")


if __name__ == "__main__":
    main()
