"""Pipeline mapping benchmark (Park & Ha, docs/METHODS.md section 2): GA against the exact optimum, modeled INT8 cost tables.

For every zoo network x device (default pixel4, pixel6, galaxy_s22): the exact optimum
(``solver="exact"``), then the GA over ``--seeds`` seeds with its memetic step (default) and
without it (``local_search=0``, the plain GA): the share of runs reaching >= 99 % of the
optimum's throughput, the worst ratio, the median / max fraction of the design space evaluated
(every evaluation counted, local-search moves included), the best single-processor mapping, the
FLOPs-proportional baseline and the pipelined / best-single ratio. Each cost table is built
once per network x device and shared by every seed. Then the ``exact`` time on a synthetic
400-layer, 4-processor, 3-stage problem.

Run: ``.venv/bin/python benchmarks/bench_map_optimality.py [--seeds 10] [--networks a,b] [--devices x,y]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # zoo builders live in models/

DEVICES = ("pixel4", "pixel6", "galaxy_s22")


def synthetic_400() -> object:
    """Seeded random 400-layer, 4-processor cost table (for the exact-solver timing)."""
    from optimizer.cost.table import CostTable

    rng = np.random.default_rng(0)
    L, P = 400, 4
    macs = rng.lognormal(16, 1.2, L)
    lat = macs[:, None] / (np.array([2e10, 6e10, 2e11, 1e11])[None, :] * rng.uniform(0.3, 1.0, (L, P)))
    hl = np.full((P, P), 1e-4)
    np.fill_diagonal(hl, 0)
    spb = np.full((P, P), 2e-10)
    np.fill_diagonal(spb, 0)
    return CostTable(model="synthetic400", device="synthetic", dtype="int8", backend="analytic", granularity="op",
                     processors=("cpu", "gpu", "npu", "dsp"), processor_kinds=("cpu", "gpu", "npu", "dsp"),
                     layer_names=tuple(f"l{i}" for i in range(L)), latency_s=lat, energy_j=lat,
                     supported=np.ones((L, P), bool), cut_bytes=rng.integers(1e4, 2e6, L + 1).astype(float),
                     weight_bytes=np.zeros(L), live_bytes=np.zeros(L), macs=macs, handoff_latency_s=hl,
                     handoff_s_per_byte=spb, handoff_j_per_byte=spb, memory_capacity_bytes=np.full(P, np.inf),
                     active_power_w=np.ones(P))


def main() -> int:
    from optimizer.graph.zoo import zoo_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--granularity", default="op", choices=("op", "kernel", "block"))
    ap.add_argument("--networks", default=",".join(zoo_names()))
    ap.add_argument("--devices", default=",".join(DEVICES))
    args = ap.parse_args()

    from optimizer.cost import build_cost_table
    from optimizer.graph import load_graph
    from optimizer.search import solve
    from optimizer.search.pipeline import PipelineProblem

    print(f"GA (population 32, cx 0.9, mut 0.8, stop: best 20 unchanged 10 gens, cap 300) vs exact; "
          f"{args.seeds} seeds; INT8 analytic cost tables, {args.granularity} granularity, 3 stages; "
          f"'plain' = without the memetic step (local_search=0)\n")
    head = (f"{'network':26s} {'device':10s} {'L':>4s} {'space':>8s} {'opt fps':>8s} {'GA>=99%':>8s} "
            f"{'worst':>7s} {'med expl':>9s} {'max expl':>9s} {'plain>=99%':>10s} {'plain worst':>11s} "
            f"{'plain expl':>10s} {'pipe/single':>11s} {'flops/opt':>9s} {'exact s':>7s}")
    print(head)
    print("-" * len(head))
    ratios_all: list[float] = []
    fracs_all: list[float] = []
    plain_all: list[float] = []
    speedups = []
    for name in args.networks.split(","):
        graph = load_graph(name, args.granularity)
        for dev in args.devices.split(","):
            ct = build_cost_table(graph, dev, "int8")  # once per network x device, shared by every seed
            pb = PipelineProblem(ct, stages=3)
            t0 = time.perf_counter()
            exact = solve(pb, "exact")
            t_exact = time.perf_counter() - t0
            opt = exact.best.objectives["throughput_fps"]
            single = solve(pb, "single").best.objectives["throughput_fps"]
            flops = solve(pb, "flops").best.objectives["throughput_fps"]
            ratios, fracs, plain, plain_fracs = [], [], [], []
            for seed in range(args.seeds):
                res = solve(pb, "ga", seed=seed)
                ratios.append(res.best.objectives["throughput_fps"] / opt)
                fracs.append(res.explored_fraction)
                res = solve(pb, "ga", seed=seed, local_search=0)
                plain.append(res.best.objectives["throughput_fps"] / opt)
                plain_fracs.append(res.explored_fraction)
            ratios_all += ratios
            fracs_all += fracs
            plain_all += plain
            speedups.append(opt / single)
            ok, plain_ok = np.mean(np.asarray(ratios) >= 0.99), np.mean(np.asarray(plain) >= 0.99)
            print(f"{name:26s} {dev:10s} {ct.n_layers:4d} {pb.space_size():8d} {opt:8.1f} {ok:8.0%} "
                  f"{min(ratios):7.4f} {np.median(fracs):9.3%} {max(fracs):9.3%} {plain_ok:10.0%} "
                  f"{min(plain):11.4f} {np.median(plain_fracs):10.3%} {opt / single:10.2f}x "
                  f"{flops / opt:9.3f} {t_exact:7.3f}", flush=True)
    r, p = np.asarray(ratios_all), np.asarray(plain_all)
    print("-" * len(head))
    print(f"overall: GA >= 0.99 of the optimum in {np.mean(r >= 0.99):.1%} of {len(r)} runs (target >= 95 %), "
          f">= 0.98 in {np.mean(r >= 0.98):.1%} (target 100 %), worst {r.min():.4f}; explored median "
          f"{np.median(fracs_all):.3%}, max {max(fracs_all):.3%} (target <= 1 %)")
    print(f"plain GA: >= 0.99 in {np.mean(p >= 0.99):.1%}, >= 0.98 in {np.mean(p >= 0.98):.1%}, worst {p.min():.4f}; "
          f"pipelined / best single x{min(speedups):.2f}-{max(speedups):.2f} (paper x2.9-4.4)")

    pb = PipelineProblem(synthetic_400(), stages=3)
    pb.prepare()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        res = solve(pb, "exact")
        times.append(time.perf_counter() - t0)
    print(f"exact on synthetic 400 layers x 4 processors x 3 stages ({res.space_size:.0f} mappings): "
          f"best of 3 {min(times):.3f} s, median {np.median(times):.3f} s (target < 1 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
