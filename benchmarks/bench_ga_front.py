"""Two-objective GA (throughput, energy) against the exact Pareto front, synthetic cost tables.

For each seeded synthetic table (the test suite's ``synthetic_table``: 3 processors, a share of
layers unsupported off the CPU, i.e. CPU fallback with its contention) the exact front comes from
``PipelineProblem.pareto_front`` and the GA (Park & Ha settings, NSGA-II survivors) runs over
``--seeds`` seeds. Printed per table: runs whose max-throughput end is within 1 % of the exact
one (and the worst ratio), runs whose min-energy end is within 1 %, the median hypervolume ratio
GA / exact (pymoo ``HV``, reference point 1.1 x the exact front's worst corner) and the median
number of distinct mappings evaluated.

Run: ``.venv/bin/python benchmarks/bench_ga_front.py [--seeds 20]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pymoo.indicators.hv import HV  # noqa: E402
from test_search_pipeline import synthetic_table  # noqa: E402

from optimizer.search import solve  # noqa: E402
from optimizer.search.pipeline import PipelineProblem  # noqa: E402

#: (layers, table seed, share of layers unsupported off the CPU)
TABLES = ((30, 6, 0.0), (30, 6, 0.05), (30, 7, 0.05), (60, 8, 0.05), (60, 9, 0.10))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"{'table':22s} {'fps end <=1%':>13s} {'worst':>6s} {'energy end <=1%':>16s} {'HV ratio':>9s} {'evals':>6s}")
    for layers, table_seed, unsupported in TABLES:
        pb = PipelineProblem(synthetic_table(layers, seed=table_seed, unsupported=unsupported), stages=3,
                             objectives=("throughput", "energy"))
        true_F, _ = pb.pareto_front()  # minimisation form: (-fps, energy)
        hv = HV(ref_point=true_F.max(axis=0) + 0.1 * np.abs(true_F.max(axis=0)))
        fps_end, energy_end, hv_ratio, evals = [], [], [], []
        for seed in range(args.seeds):
            res = solve(pb, "ga", seed=seed)
            F = np.array([[-c.objectives["throughput_fps"], c.objectives["energy_j"]] for c in res.front])
            fps_end.append(F[:, 0].min() / true_F[:, 0].min())
            energy_end.append(F[:, 1].min() / true_F[:, 1].min())
            hv_ratio.append(hv(F) / hv(true_F))
            evals.append(res.evaluations)
        fps, energy = np.array(fps_end), np.array(energy_end)
        print(f"L{layers} seed {table_seed} unsup {unsupported:4.0%} {int(np.sum(fps >= 0.99)):>6d}/{args.seeds:<6d} "
              f"{fps.min():6.3f} {int(np.sum(energy <= 1.01)):>9d}/{args.seeds:<6d} {np.median(hv_ratio):9.4f} "
              f"{np.median(evals):6.0f}")
    print(f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
