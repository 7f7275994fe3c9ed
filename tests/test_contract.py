"""One contract for every registered solver (in the spirit of scikit-learn's
``parametrize_with_checks``): determinism from a seed, result invariants, the exact solver as a
bound, and monotonicity of the optimum in bandwidth and clock.

New solvers registered with :func:`optimizer.search.solve.register_solver` are picked up
automatically: the parametrisation walks the registry.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from _split_fixtures import ToyLink, small_costs

from optimizer.search.pipeline import PipelineProblem
from optimizer.search.solve import solve, solver_names
from optimizer.search.split import SplitProblem
from tests.test_search_pipeline import synthetic_table

#: small budgets so that the whole suite stays fast; the searches' quality is benchmarked
SETTINGS = {("pipeline", "ga"): {"population": 16, "max_generations": 30},
            ("split", "nsga2"): {"population": 20, "generations": 15}}


def _pipeline_problem(objectives=("throughput",), scale: float = 1.0) -> PipelineProblem:
    ct = synthetic_table(12, seed=4)
    if scale != 1.0:  # every time scaled: a clock ``1/scale`` times as fast, memory-bound parts included
        ct = dataclasses.replace(ct, latency_s=ct.latency_s * scale, energy_j=ct.energy_j * scale,
                                 handoff_latency_s=ct.handoff_latency_s * scale,
                                 handoff_s_per_byte=ct.handoff_s_per_byte * scale)
    return PipelineProblem(ct, stages=3, objectives=objectives)


def _split_problem(uplink_bps: float = 10e6, include_extremes: bool = False) -> SplitProblem:
    _, costs = small_costs(ToyLink(uplink_bps=uplink_bps))
    return SplitProblem(costs, include_extremes=include_extremes)


PROBLEMS = {"pipeline": _pipeline_problem, "split": _split_problem}
CASES = [(kind, name) for kind in PROBLEMS for name in solver_names(kind)]


def _run(kind: str, name: str, problem=None, seed: int = 3):
    return solve(problem if problem is not None else PROBLEMS[kind](), name, seed=seed,
                 **SETTINGS.get((kind, name), {}))


def _signature(res) -> tuple:
    cands = (res.best, *res.front)
    return tuple((repr(sorted(c.decision.items())), tuple(sorted(c.objectives.items())), c.feasible) for c in cands)


def test_every_kind_has_an_exact_yardstick():
    assert CASES and all("exact" in solver_names(kind) for kind in PROBLEMS)


@pytest.mark.parametrize("kind, name", CASES)
def test_same_seed_same_result(kind, name):
    a, b = _run(kind, name), _run(kind, name)
    assert _signature(a) == _signature(b)
    assert a.evaluations == b.evaluations and a.history == b.history


@pytest.mark.parametrize("kind, name", CASES)
def test_result_invariants(kind, name):
    problem = PROBLEMS[kind]()
    res = _run(kind, name, problem)
    assert (res.problem, res.solver, res.seed) == (kind, name, 3)
    assert res.best.feasible and res.best.violation == 0.0
    assert res.space_size == problem.space_size() > 0
    assert 1 <= res.evaluations and 0.0 < res.explored_fraction <= 1.0
    assert res.wall_time_s >= 0.0 and res.objectives
    for c in (res.best, *res.front):
        assert all(math.isfinite(v) for v in c.objectives.values()), c.objectives
    evals = [h["evaluations"] for h in res.history if "evaluations" in h]
    assert evals == sorted(evals)


@pytest.mark.parametrize("name", solver_names("split"))
def test_split_fronts_are_non_dominated_and_exact_bounds_them(name):
    problem = _split_problem(include_extremes=True)  # COS and COC are the extremes l = 0 and l = L
    keys = ("latency_s", "energy_j", "memory_bytes")
    res = _run("split", name, problem)
    exact = _run("split", "exact", problem)
    F = np.array([[c.objectives[k] for k in keys] for c in res.front]) if res.front else np.empty((0, 3))
    for i, f in enumerate(F):  # no front point dominates another
        others = np.delete(F, i, axis=0)
        assert not ((others <= f).all(axis=1) & (others < f).any(axis=1)).any()
    E = np.array([[c.objectives[k] for k in keys] for c in exact.front])
    best = np.array([res.best.objectives[k] for k in keys])
    # the chosen point is on, or weakly dominated by, the true front
    assert ((E <= best + 1e-12).all(axis=1)).any()


@pytest.mark.parametrize("name", solver_names("pipeline"))
def test_pipeline_exact_bounds_every_solver(name):
    problem = _pipeline_problem()
    got = _run("pipeline", name, problem).best.objectives["throughput_fps"]
    opt = _run("pipeline", "exact", problem).best.objectives["throughput_fps"]
    assert got <= opt * (1 + 1e-12)
    if name == "exact":
        assert got == opt


def test_split_optimum_latency_falls_as_the_uplink_widens():
    lat = [min(c.objectives["latency_s"] for c in solve(_split_problem(bw), "exact").front)
           for bw in (1e6, 5e6, 20e6, 100e6, 1e9)]
    assert all(b <= a + 1e-15 for a, b in zip(lat, lat[1:], strict=False)), lat
    assert lat[-1] < lat[0]


def test_pipeline_optimum_rises_with_the_clock():
    """A faster clock (every layer time scaled down) never lowers the optimal throughput."""
    fps = [solve(_pipeline_problem(scale=s), "exact").best.objectives["throughput_fps"] for s in (2.0, 1.0, 0.5)]
    assert fps[0] < fps[1] < fps[2]
    assert fps[2] == pytest.approx(2 * fps[1], rel=1e-9)  # every time halved: exactly twice the rate
