"""pymoo adapter: :class:`~optimizer.search.split.SplitProblem` as a pymoo ``Problem``, and the
NSGA-II split solver (Deb et al., 2002, as SmartSplit runs it through pymoo).

The adapter's ``_evaluate(X, out)`` takes the whole population (``X`` [N, 3]) and fills
``out["F"]`` [N, 3] and ``out["G"]`` [N, 1]; ``_calc_pareto_front`` returns the exact
enumeration's front, so ``problem.pareto_front()`` and pymoo's indicators work unchanged.

The decision vector is integer: NSGA-II runs with integer random sampling (plus, unless the
problem searches the interior only, the COS and COC decisions, so not splitting is always in the
archive and no front member is dominated by it), SBX crossover and
polynomial mutation followed by rounding repair (pymoo's recipe for discrete variables), and
eliminates duplicates. Every evaluated point is kept in an archive; the returned front is the
non-dominated feasible subset of the archive (one point per distinct objective vector).
Evaluations are counted as distinct candidates (a modeled evaluation is a pure function of the
decision, so a repeated candidate costs nothing new); pymoo's own count is kept in the settings.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2, binary_tournament
from pymoo.core.callback import Callback
from pymoo.core.duplicate import DefaultDuplicateElimination
from pymoo.core.mating import Mating
from pymoo.core.problem import Problem
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.operators.repair.rounding import RoundingRepair
from pymoo.operators.sampling.rnd import IntegerRandomSampling
from pymoo.operators.selection.tournament import TournamentSelection
from pymoo.optimize import minimize

from ..errors import ConfigError
from .result import SearchResult
from .problem import nondominated, unique_rows
from .split import SplitProblem
from .split_baselines import choose, extreme_decisions, solver_result, split_baselines


MATING_TRIES = 5


class PymooSplitProblem(Problem):
    """A :class:`SplitProblem` seen by pymoo (population-wise evaluation, archive of all
    evaluated points)."""

    def __init__(self, core: SplitProblem) -> None:
        xl, xu = core.bounds()
        super().__init__(n_var=core.n_var, n_obj=len(core.objectives), n_ieq_constr=1,
                         xl=xl, xu=xu, vtype=int)
        self.core = core
        self.archive_X: list[np.ndarray] = []
        self.n_evaluated = 0

    def _evaluate(self, X: np.ndarray, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        Xi = np.rint(np.asarray(X, dtype=np.float64)).astype(np.int64)
        ev = self.core.evaluate(Xi)
        out["F"], out["G"] = ev.F, ev.G
        self.archive_X.append(Xi)
        self.n_evaluated += len(Xi)

    def _calc_pareto_front(self, *args: Any, **kwargs: Any) -> np.ndarray:
        return self.core.pareto_front()[0]

    def archive(self) -> np.ndarray:
        """Every distinct decision vector evaluated so far, [n, 3]."""
        if not self.archive_X:
            return np.zeros((0, 3), dtype=np.int64)
        return np.unique(np.vstack(self.archive_X), axis=0)


class _History(Callback):
    def __init__(self, adapter: PymooSplitProblem) -> None:
        super().__init__()
        self.adapter = adapter
        self.rows: list[dict[str, float]] = []

    def notify(self, algorithm: Any) -> None:
        opt = algorithm.opt
        self.rows.append({"generation": float(algorithm.n_gen),
                          "evaluations": float(self.adapter.n_evaluated),
                          "front_size": float(0 if opt is None else len(opt))})


def run_nsga2(problem: SplitProblem, *, seed: int | None = None, population: int = 40,
              generations: int = 40) -> tuple[np.ndarray, np.ndarray, PymooSplitProblem, list[dict[str, float]]]:
    """Run pymoo's NSGA-II; return the archive's feasible front ``(X, F)``, the adapter and the
    per-generation history."""
    if population < 4 or generations < 1:
        raise ConfigError(f"NSGA-II needs population >= 4 and generations >= 1 "
                          f"(got population={population}, generations={generations})")
    adapter = PymooSplitProblem(problem)
    dedup = DefaultDuplicateElimination()
    crossover = SBX(prob=0.9, eta=15, vtype=float, repair=RoundingRepair())
    mutation = PM(eta=20, vtype=float, repair=RoundingRepair())
    # at most MATING_TRIES matings per generation to find offspring that are not duplicates
    # (pymoo's default of 100 spins for seconds once a small space is nearly covered)
    mating = Mating(TournamentSelection(func_comp=binary_tournament), crossover, mutation,
                    eliminate_duplicates=dedup, n_max_iterations=MATING_TRIES)
    sampling: Any = IntegerRandomSampling()
    if not problem.interior_only:
        extremes = np.stack(list(extreme_decisions(problem).values()))
        rng = np.random.default_rng(seed)
        xl, xu = problem.bounds()
        rest = rng.integers(xl, xu + 1, size=(max(0, population - len(extremes)), len(xl)))
        sampling = np.vstack([extremes, rest])[:population]
    algorithm = NSGA2(pop_size=population, sampling=sampling, crossover=crossover,
                      mutation=mutation, eliminate_duplicates=dedup, mating=mating)
    history = _History(adapter)
    minimize(adapter, algorithm, ("n_gen", generations), seed=seed, callback=history,
             verbose=False, save_history=False)
    X = adapter.archive()
    ev = problem.evaluate(X)
    ok = ev.feasible
    idx = nondominated(ev.F[ok])
    Xf, Ff = unique_rows(X[ok][idx], ev.F[ok][idx])
    return Xf, Ff, adapter, history.rows


def solve_split_nsga2(problem: SplitProblem, *, seed: int | None = None, population: int = 40,
                      generations: int = 40, weights: Sequence[float] | None = None,
                      topsis_variant: str = "paper") -> SearchResult:
    """NSGA-II front, then one point chosen by TOPSIS (SmartSplit's pipeline)."""
    start = time.perf_counter()
    problem.check()
    X, F, adapter, history = run_nsga2(problem, seed=seed, population=population, generations=generations)
    front, best, rule = choose(problem, X, F, weights, topsis_variant)
    return solver_result(problem, "nsga2", best, seed=seed, start=start, evaluations=len(adapter.archive()),
                   front=front,
                   settings={"population": population, "generations": generations,
                             "pymoo_evaluations": adapter.n_evaluated,
                             "weights": None if weights is None else list(weights),
                             "topsis": topsis_variant},
                   history=history, decision_rule=rule, baselines=split_baselines(problem, seed))
