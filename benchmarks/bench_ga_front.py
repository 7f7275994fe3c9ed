"""Two-objective GA (throughput, energy) against the exact Pareto front, synthetic cost tables.

For each seeded synthetic table (the test suite's ``synthetic_table``: 3 processors, a share of
layers unsupported off the CPU, i.e. CPU fallback with its contention) the exact front comes from
``PipelineProblem.pareto_front`` and the GA (Park & Ha settings, NSGA-II survivors, the initial
population seeded with a single-objective run's best per objective) runs over ``--seeds`` seeds.
Printed per table: runs whose max-throughput end is within 1 % of the exact one (and the worst
ratio), runs whose min-energy end is within 1 %, the median hypervolume ratio GA / exact (pymoo
``HV``, reference point 1.1 x the exact front's worst corner) and the median number of distinct
mappings evaluated; then the same figures for plain NSGA-II (``anchors=False``, no seeding) on
the same seeds. A second part does the same on real zoo networks (MobileNetV2 block and op view,
SSD MobileNetV2 FPNLite block) for the modeled phones pixel4, pixel6 and galaxy_s22.

Run: ``.venv/bin/python benchmarks/bench_ga_front.py [--seeds 20] [--real-seeds 10]``
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

from optimizer.graph import load_graph  # noqa: E402
from optimizer.hardware import load_device  # noqa: E402
from optimizer.search import solve  # noqa: E402
from optimizer.search.pipeline import PipelineProblem  # noqa: E402
from optimizer.workflow import pipeline_problem  # noqa: E402

#: (layers, table seed, share of layers unsupported off the CPU)
TABLES = ((30, 6, 0.0), (30, 6, 0.05), (30, 7, 0.05), (60, 8, 0.05), (60, 9, 0.10))
#: real zoo networks (granularity) x the modeled phones, 8 CPU cores as in Park & Ha
REAL = (("mobilenet_v2", "block"), ("ssd_mobilenet_v2_fpnlite", "block"), ("mobilenet_v2", "op"))
PHONES = ("pixel4", "pixel6", "galaxy_s22")


def compare(pb: PipelineProblem, seeds: int) -> str:
    """One row: seeded GA vs plain NSGA-II against ``pb``'s exact front over ``seeds`` seeds."""
    true_F, _ = pb.pareto_front()  # minimisation form: (-fps, energy)
    hv = HV(ref_point=true_F.max(axis=0) + 0.1 * np.abs(true_F.max(axis=0)))
    runs: dict[bool, dict[str, list[float]]] = {}
    for anchors in (True, False):
        got = runs.setdefault(anchors, {"fps": [], "energy": [], "hv": [], "evals": []})
        for seed in range(seeds):
            res = solve(pb, "ga", seed=seed, anchors=anchors)
            F = np.array([[-c.objectives["throughput_fps"], c.objectives["energy_j"]] for c in res.front])
            got["fps"].append(F[:, 0].min() / true_F[:, 0].min())
            got["energy"].append(F[:, 1].min() / true_F[:, 1].min())
            got["hv"].append(hv(F) / hv(true_F))
            got["evals"].append(res.evaluations)
    on, off = ({k: np.array(v) for k, v in runs[a].items()} for a in (True, False))
    return (f"{int(np.sum(on['fps'] >= 0.99)):>6d}/{seeds:<6d} {on['fps'].min():6.3f} "
            f"{int(np.sum(on['energy'] <= 1.01)):>9d}/{seeds:<6d} {np.median(on['hv']):9.4f} {on['hv'].min():7.4f} "
            f"{np.median(on['evals']):6.0f} | {int(np.sum(off['fps'] >= 0.99)):>9d}/{seeds:<6d} "
            f"{off['fps'].min():6.3f} {np.median(off['hv']):7.4f} {off['hv'].min():7.4f} {np.median(off['evals']):6.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20, help="Seeds per synthetic table (default 20).")
    ap.add_argument("--real-seeds", type=int, default=10, help="Seeds per real network x phone (default 10; 0: skip).")
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"{'problem':41s} {'fps end <=1%':>13s} {'worst':>6s} {'energy end <=1%':>16s} {'HV med':>9s} {'HV min':>7s} "
          f"{'evals':>6s} | {'unseeded fps end':>16s} {'worst':>6s} {'HV med':>7s} {'HV min':>7s} {'evals':>6s}")
    for layers, table_seed, unsupported in TABLES:
        pb = PipelineProblem(synthetic_table(layers, seed=table_seed, unsupported=unsupported), stages=3,
                             objectives=("throughput", "energy"))
        print(f"{f'synthetic L{layers} seed {table_seed} unsup {unsupported:.0%}':41s} {compare(pb, args.seeds)}", flush=True)
    for network, granularity in REAL if args.real_seeds else ():
        graph = load_graph(network, granularity)
        for phone in PHONES:
            pb = pipeline_problem(graph, load_device(phone), cpu_cores=8, objectives=("throughput", "energy"))
            print(f"{f'{network} {granularity} {phone}':41s} {compare(pb, args.real_seeds)}", flush=True)
    print(f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
