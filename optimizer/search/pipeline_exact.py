"""Exact pipeline mapping: the true optimum by exhaustive, vectorised enumeration.

For throughput (minimise the bottleneck stage time), every ordered choice of k <= 3 distinct
processors is solved on the grid of its boundaries at once: stage times are built from the
CostTable's prefix sums as broadcast arrays (a vector over the first inner boundary, a matrix
over both inner boundaries for the middle stage), so a 400-layer, 4-processor, 3-stage problem (1.9 M mappings)
takes a fraction of a second. Other objectives, extra objective hooks and k > 3 fall back to
enumerating every mapping in chunks through :meth:`PipelineProblem.evaluate` (same model,
slower). Two objectives give the exact Pareto front (:meth:`PipelineProblem.pareto_front`).
This is the yardstick for the genetic algorithm of Park & Ha (docs/METHODS.md section 2).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np

from ..errors import ConfigError
from .pipeline import PipelineProblem, range_max
from .problem import build_result
from .result import Candidate, SearchResult


def _handoff_s(ct: Any, boundary: np.ndarray | int, p: int, q: int) -> np.ndarray:
    if p == q:
        return np.zeros_like(np.asarray(boundary, dtype=np.float64))
    return ct.handoff_latency_s[p, q] + ct.cut_bytes[boundary] * ct.handoff_s_per_byte[p, q]


def _order_grid(problem: PipelineProblem, order: tuple[int, ...]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Bottleneck time over the boundary grid of one processor order (inf where infeasible).

    Returns the grid and the boundary arrays it is indexed by (one axis per inner boundary).
    """
    prep = problem.prepare()
    ct = problem.cost_table
    L, cpu, k = prep.L, prep.cpu, len(order)
    serial = problem.serial_single and k == 1  # one stage: pre, inference, post one frame at a time
    inner = np.arange(1, L, dtype=np.int64)
    axes = []
    for m in range(k - 1):
        shape = [1] * (k - 1)
        shape[m] = L - 1
        axes.append(inner.reshape(shape))
    bounds: list[np.ndarray | int] = [0, *axes, L]
    chain = (cpu, *order, cpu)
    finite_caps = not np.all(np.isinf(prep.caps[list(order)]))
    feasible = np.ones((), bool)
    stage_costs, cpu_users = [], np.zeros((), np.int64)
    for m, p in enumerate(order):  # stage costs, and which stages run anything on the CPU
        a_arr, b_arr = np.broadcast_arrays(np.asarray(bounds[m]), np.asarray(bounds[m + 1]))
        total, cpu_s = ct.stage_parts(a_arr, np.maximum(b_arr, a_arr + 1), p)  # as in PipelineProblem.evaluate
        stage_costs.append((total, cpu_s))
        cpu_users = cpu_users + ((cpu_s > 0) | (p == cpu))
        if finite_caps:
            mem = (ct.cum_weight_bytes[b_arr] - ct.cum_weight_bytes[a_arr]
                   + range_max(prep.live_sparse, a_arr, b_arr))
            feasible = feasible & (mem <= prep.caps[p])
    threads = (np.maximum(problem.host_threads, problem.cpu_threads * np.minimum(cpu_users, 1)) if serial
               else 2 * problem.host_threads + problem.cpu_threads * cpu_users)
    slow = np.maximum(1.0, threads / prep.cores)
    bott = max(prep.pre, prep.post) * slow
    for m, p in enumerate(order):
        total, cpu_s = stage_costs[m]
        comp = total + cpu_s * (slow - 1.0)  # CPU work slows with the shared cores
        t = _handoff_s(ct, bounds[m], chain[m], p) + comp + _handoff_s(ct, bounds[m + 1], p, chain[m + 2])
        bott = np.maximum(bott, t)
    if serial:
        bott = bott + min(prep.pre, prep.post) * slow
    valid = feasible
    for m in range(k - 2):
        valid = valid & (axes[m] < axes[m + 1])
    bott = np.where(valid, bott, np.inf)
    return np.broadcast_to(bott, [L - 1] * (k - 1)) if k > 1 else bott, tuple(axes)


def exact_throughput(problem: PipelineProblem) -> tuple[np.ndarray | None, int]:
    """Chromosome of the highest-throughput feasible mapping (None if none) and mappings counted.

    Ties go to the first order in ``itertools.permutations`` order and the smallest boundaries.
    """
    prep = problem.prepare()
    L, K = prep.L, prep.K
    best_t, best_x, counted = np.inf, None, 0
    for k in range(1, K + 1):
        for order in itertools.permutations(prep.allowed.tolist(), k):
            grid, axes = _order_grid(problem, order)
            counted += int(np.isfinite(grid).sum()) if k > 1 else 1
            flat = int(np.argmin(grid)) if grid.ndim else 0
            value = float(grid.reshape(-1)[flat]) if grid.ndim else float(grid)
            if value < best_t:
                inner = [int(ax.reshape(-1)[i]) for ax, i in zip(axes, np.unravel_index(flat, grid.shape))] \
                    if k > 1 else []
                bnd = [0, *inner, L]
                best_t = value
                best_x = problem.encode(list(np.diff(bnd)), list(order))
    return best_x, counted


def solve_pipeline_exact(problem: PipelineProblem, *, seed: int | None = None) -> SearchResult:
    """True optimum (one objective) or true Pareto front (two objectives) of ``problem``.

    ``seed`` is accepted for the common solver interface and unused (the method is
    deterministic). Raises :class:`~optimizer.errors.ConstraintError` when no mapping is
    feasible, naming the constraint and the best value reachable.
    """
    t0 = time.perf_counter()
    prep = problem.prepare()
    hooks = any(o[3] is not None for o in prep.objectives)
    names = problem.objective_names
    front: tuple[Candidate, ...] = ()
    rule = None
    if len(names) == 1:
        if names[0] == "throughput" and prep.K <= 3 and not hooks:
            x, _ = exact_throughput(problem)
        else:
            x = _exact_generic(problem)
        if x is None:
            problem.check_memory_feasible()
            raise AssertionError("unreachable: check_memory_feasible found a feasible mapping the search missed")
        best = problem.candidates(np.asarray([x]))[0]
    elif len(names) == 2:
        F, X = problem.pareto_front()
        if len(X) == 0:
            problem.check_memory_feasible()
        cands = problem.candidates(X)
        front = tuple(cands)
        first = 0 if "throughput" not in names else names.index("throughput")
        i = int(np.argmin(F[:, first]))
        best = cands[i]
        rule = {"rule": f"best {names[first]} on the front"}
    else:
        raise ConfigError(f"solver 'exact': supports 1 or 2 objectives, got {list(names)}")
    return build_result(problem, "exact", best, evaluations=problem.space_size(),
                        wall_time_s=time.perf_counter() - t0, seed=seed, front=front, decision_rule=rule)


def _exact_generic(problem: PipelineProblem) -> np.ndarray | None:
    """Best feasible chromosome for a single objective by chunked enumeration."""
    best_key: tuple[float, float] | None = None
    best_x = None
    for X in problem.enumerate_mappings():
        X = problem._fill_unused(X)
        out = problem.evaluate(X)
        f = np.where(out.feasible, out.F[:, 0], np.inf)
        i = int(np.lexsort((out["latency_s"], f))[0])
        if not np.isfinite(f[i]):
            continue
        key = (float(f[i]), float(out["latency_s"][i]))
        if best_key is None or key < best_key:
            best_key, best_x = key, X[i]
    return best_x
