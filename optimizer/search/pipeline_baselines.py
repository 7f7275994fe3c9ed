"""Baseline pipeline mappings of Park & Ha (IEEE Access 2024; docs/METHODS.md section 2).

* ``single``: every single-processor mapping (the whole network on one processor); the best one
  is the yardstick the pipelined mapping's speed-up is measured against.
* ``flops``: the paper's "profiling-based" mapping. Layer time is assumed proportional to its
  FLOPs (MACs), scaled per processor by that processor's whole-network latency:
  ``t(l, p) = macs[l] / sum(macs) * T_whole(p)``. For every order of K distinct processors the
  layers are split into K consecutive partitions that balance these estimated times (minimum
  bottleneck: bisection on the bottleneck with a greedy maximal-prefix check, exact for a fixed
  order); each split is then evaluated with the problem's real model and the best is kept.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from .pipeline import PipelineProblem
from .problem import build_result
from .result import Candidate, SearchResult


def single_mappings(problem: PipelineProblem) -> np.ndarray:
    """Every single-processor mapping as a population [P, 2K]."""
    prep = problem.prepare()
    return np.asarray([problem.encode([prep.L], [int(p)]) for p in prep.allowed], dtype=np.int64)


def flops_split(problem: PipelineProblem, order: tuple[int, ...]) -> np.ndarray:
    """Chromosome balancing FLOPs-proportional stage times over ``order`` (processor indices)."""
    prep = problem.prepare()
    ct = problem.cost_table
    macs = np.asarray(ct.macs, dtype=np.float64)
    share = macs / macs.sum() if macs.sum() > 0 else np.full(prep.L, 1.0 / prep.L)
    whole = ct.whole_network_latency()
    cum = np.concatenate([[0.0], np.cumsum(share)])  # fraction of the work before each boundary

    def greedy(limit: float) -> list[int] | None:
        bounds, pos = [0], 0
        for p in order:
            reach = cum[pos] + limit / whole[p] * (1 + 1e-12)
            pos = int(np.searchsorted(cum, reach, side="right") - 1)
            pos = min(max(pos, bounds[-1]), prep.L)
            bounds.append(pos)
        return bounds if bounds[-1] == prep.L else None

    lo, hi = 0.0, float(max(whole[list(order)]))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if greedy(mid) is None:
            lo = mid
        else:
            hi = mid
    bounds = greedy(hi)
    if bounds is None:  # numerical corner: everything on the slowest-fitting stage
        bounds = [0] * len(order) + [prep.L]
    return problem.encode(list(np.diff(bounds)), list(order))


def flops_mappings(problem: PipelineProblem) -> np.ndarray:
    """The FLOPs-balanced mapping of every order of K distinct processors, [orders, 2K]."""
    prep = problem.prepare()
    orders = itertools.permutations(prep.allowed.tolist(), prep.K)
    return np.asarray([flops_split(problem, o) for o in orders], dtype=np.int64)


def _pick(problem: PipelineProblem, X: np.ndarray) -> tuple[Candidate, list[Candidate], np.ndarray]:
    """Candidates of ``X`` and the best by the first objective (feasible first, then latency)."""
    out = problem.evaluate(X)
    f = out.F[:, 0]
    order = np.lexsort((out["latency_s"], f, ~out.feasible))
    cands = problem.candidates(X, out)
    return cands[int(order[0])], cands, out.F


def solve_pipeline_single(problem: PipelineProblem, *, seed: int | None = None) -> SearchResult:
    """Best single-processor mapping; ``baselines`` holds every one as ``single:<processor>``.

    ``seed`` is accepted for the common solver interface and unused (deterministic).
    """
    t0 = time.perf_counter()
    X = single_mappings(problem)
    best, cands, _ = _pick(problem, X)
    names = problem.cost_table.processors
    baselines = {f"single:{names[int(p)]}": c for p, c in zip(problem.prepare().allowed, cands)}
    return build_result(problem, "single", best, evaluations=len(X), wall_time_s=time.perf_counter() - t0,
                        seed=seed, baselines=baselines)


def solve_pipeline_flops(problem: PipelineProblem, *, seed: int | None = None) -> SearchResult:
    """Park & Ha's profiling-based (FLOPs-proportional) mapping, best over processor orders.

    ``seed`` is accepted for the common solver interface and unused (deterministic).
    """
    t0 = time.perf_counter()
    X = flops_mappings(problem)
    _, unique_rows = np.unique(problem.canonical(X), axis=0, return_index=True)
    X = X[np.sort(unique_rows)]
    best, _, _ = _pick(problem, X)
    return build_result(problem, "flops", best, evaluations=len(X), wall_time_s=time.perf_counter() - t0,
                        seed=seed)
