"""Measured pipeline search on this host: the GA with measured fitness.

mobilenet_v2 at a small input (default 96 px), block granularity, FP32, on ``host_cores`` (this
workstation's two cores as processors ``cpu0``/``cpu1``, at most 2 stages). Every candidate the
GA proposes is executed with the reference runtime (one pinned one-thread LiteRT stage per core)
and its median fps is the fitness. Prints:

* evaluations (distinct mappings measured) out of the space, stage conversions, wall time;
* the best measured fps among all candidates tried, the GA's chosen mapping's measured fps and
  their ratio (>= 0.95 expected), the best single-stage measured fps and GA / single;
* the same three re-measured afterwards, interleaved (fresh medians: how much of a difference
  survives the noise of a shared machine);
* measured / modeled (``host_cores``) throughput for several plans, and the rank correlation of
  model and measurement over every candidate tried.

Run: ``.venv/bin/python benchmarks/bench_host_measured.py [--input-size 96] [--frames 100]
[--repeats 5] [--seed 0] [--statistic median|best]``. The stage cache (``results/cache/host_stages``) persists between
runs; measurements do not (a fresh JSON-lines cache per run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def loadavg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--input-size", type=int, default=96)
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--confirm-rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--statistic", choices=("median", "best"), default="median",
                    help="summary of the runs of one measurement: median, or the fastest run")
    args = ap.parse_args()
    os.chdir(ROOT)

    from scipy.stats import spearmanr

    from optimizer.graph import load_graph
    from optimizer.workflow import pipeline_problem
    from optimizer.runtime.host_evaluator import HostPipelineMeasurer
    from optimizer.search import solve
    from optimizer.search.evaluators import MeasuredEvaluator

    variant = {"input_size": args.input_size}
    graph = load_graph(args.model, "block", **variant)
    problem = pipeline_problem(graph, "host_cores", dtype="fp32", stages=2)
    host = HostPipelineMeasurer(args.model, graph, dtype="fp32", variant=variant, frames=args.frames,
                                repeats=args.repeats, seed=args.seed, statistic=args.statistic)
    cpus = sorted(os.sched_getaffinity(0))
    print(f"{args.model} @ {args.input_size} px, {len(graph)} blocks, fp32, host_cores (CPUs {cpus}); "
          f"{args.frames} frames x {args.repeats} runs per measurement ({args.statistic})")
    print(f"load average at start: {loadavg()} (other processes share these {len(cpus)} cores)")

    with tempfile.TemporaryDirectory() as tmp:
        ev = MeasuredEvaluator(host, Path(tmp) / "measured.jsonl")
        t0 = time.perf_counter()
        result = solve(problem, "ga", seed=args.seed, evaluator=ev)
        wall = time.perf_counter() - t0
        # the single-stage mappings, measured through the same evaluator (cached if the GA tried them)
        singles = np.stack([problem.encode([len(graph), 0], [p, q]) for p, q in (("cpu0", "cpu1"), ("cpu1", "cpu0"))])
        ga_measured = ev.calls
        ev.evaluate(problem, singles)
        measured = ev.measured()

    space = problem.space_size()
    print(f"\nGA: {result.evaluations} evaluations = {ga_measured} measurements of {space} mappings "
          f"({result.evaluations / space:.0%} of the space), {host.conversions} stage conversions, "
          f"{wall:.0f} s wall, stopped by {result.settings.get('stopped_by')}")

    def chromosome(k: tuple[int, ...]) -> np.ndarray:
        """Chromosome of a canonical key (unused stages' processors filled in)."""
        return problem.encode(k[:2], [p if p >= 0 else None for p in k[2:]])

    def stages_of(k: tuple[int, ...]) -> list[dict]:
        return problem.decode(chromosome(k))["stages"]

    def label(k: tuple[int, ...]) -> str:
        return " | ".join(f"{s['processor']}:{s['first_layer']}-{s['last_layer']}" for s in stages_of(k))

    keys = list(measured)
    modeled = problem.evaluate(np.stack([chromosome(k) for k in keys]))["throughput_fps"]
    fps = np.array([measured[k] for k in keys])
    dec = result.best.decision
    ga_key = problem.key(problem.encode(dec["counts"], dec["processors"]))
    best_key = keys[int(np.argmax(fps))]
    single_keys = [k for k in keys if k[1] == 0]
    best_single = max(single_keys, key=lambda k: measured[k])
    print(f"best measured candidate: {label(best_key)}  {measured[best_key]:.1f} fps")
    print(f"GA's chosen mapping:     {label(ga_key)}  {measured[ga_key]:.1f} fps  "
          f"ratio to best measured {measured[ga_key] / measured[best_key]:.3f}")
    print(f"best single stage:       {label(best_single)}  {measured[best_single]:.1f} fps  "
          f"GA / best single x{measured[ga_key] / measured[best_single]:.2f}")

    # the runtime pins stage k to CPU k whatever the processor names, so a mapping and its core-swapped
    # twin are the same run: their two measurements show the noise of this shared machine
    def layers_of(k: tuple[int, ...]) -> tuple:
        return tuple((s["first_layer"], s["last_layer"]) for s in stages_of(k))

    twins: dict[tuple, list[float]] = {}
    for k in keys:
        twins.setdefault(layers_of(k), []).append(measured[k])
    pair = [abs(np.log(v[0] / v[1])) for v in twins.values() if len(v) == 2]
    if pair:
        print(f"noise: {len(pair)} core-swapped twin pairs (identical runs): |measured ratio - 1| median "
              f"{np.expm1(np.median(pair)):.1%}, max {np.expm1(max(pair)):.1%}")

    # fresh, interleaved re-measurements: the GA's choice, the best-measured mapping with other cuts,
    # and the best single stage (the cached values are one median each)
    runner = max((k for k in keys if k[1] > 0 and layers_of(k) != layers_of(ga_key)), key=lambda k: measured[k])
    plans = {name: host.plan(stages_of(k))
             for name, k in (("ga", ga_key), ("runner-up", runner), ("single", best_single))}
    again: dict[str, list[float]] = {n: [] for n in plans}
    for _ in range(args.confirm_rounds):
        for n, plan in plans.items():
            again[n].append(host.measure_plan(plan)[0])
    med = {n: statistics.median(v) for n, v in again.items()}
    print(f"re-measured ({args.confirm_rounds} interleaved rounds, median of medians): GA {med['ga']:.1f}, "
          f"runner-up with other cuts ({label(runner)}, {measured[runner]:.1f} when tried) {med['runner-up']:.1f}, "
          f"single {med['single']:.1f} fps; GA / runner-up {med['ga'] / med['runner-up']:.3f}, "
          f"GA / single x{med['ga'] / med['single']:.2f}")

    # where the time goes in the chosen plan: per-stage busy time (reference runtime's report)
    from optimizer.runtime import run_plan

    rep = run_plan(plans["ga"], host.artifacts(plans["ga"]), frames=args.frames, pin=True)
    srep = run_plan(plans["single"], host.artifacts(plans["single"]), frames=args.frames, pin=True)
    busy = ", ".join(f"{s.name} on CPU {s.cores}: {s.mean_s * 1e3:.2f} ms/frame ({s.utilization:.0%} busy)"
                     for s in rep.stages)
    print(f"GA plan stages: {busy}; single stage: {srep.stages[0].mean_s * 1e3:.2f} ms/frame "
          f"(sum of the GA stages {sum(s.mean_s for s in rep.stages) * 1e3:.2f} ms)")

    print("\nmeasured vs modeled (host_cores) throughput:")
    order = np.argsort(-fps)
    show = {best_key, ga_key, *single_keys, *[keys[i] for i in order[:: max(1, len(order) // 6)]]}
    for k in sorted(show, key=lambda k: -measured[k]):
        i = keys.index(k)
        print(f"  {label(k):<28} measured {fps[i]:7.1f}  modeled {modeled[i]:7.1f}  ratio {fps[i] / modeled[i]:.2f}")
    ratio = fps / modeled
    rho = spearmanr(fps, modeled).statistic
    print(f"all {len(keys)} candidates: measured/modeled median {np.median(ratio):.2f} "
          f"(min {ratio.min():.2f}, max {ratio.max():.2f}); Spearman rank correlation {rho:.2f}")
    two = np.array([k[1] > 0 for k in keys])
    if two.any():
        print(f"  2-stage: median ratio {np.median(ratio[two]):.2f}; single-stage: {np.median(ratio[~two]):.2f}")
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
