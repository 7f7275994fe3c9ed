"""The one contract every search problem meets, the one result builder and the one
non-dominated filter every solver uses.

A problem is *population-first* (pymoo's ``Problem`` convention, Blank & Deb, IEEE Access 2020):
``evaluate(X)`` takes a whole population ``X`` [N, n_var] of integer decision vectors and returns an
:class:`Evaluation` with objectives ``F`` [N, M] in minimisation form (a "max" objective is
negated), constraint values ``G`` [N, k] (``<= 0`` feasible) and named per-candidate ``metrics``
[N] in their natural units. Every problem can enumerate its space, so ``pareto_front()`` gives the
true front by exhaustive enumeration — the yardstick the heuristic solvers are measured against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .result import Candidate, SearchResult


@dataclass(frozen=True)
class Evaluation:
    """Objectives ``F`` [N, M] (minimised), constraints ``G`` [N, k] (``<= 0`` feasible) and
    named metrics (each [N]) of a population."""

    F: np.ndarray
    G: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        F, G = np.asarray(self.F, dtype=np.float64), np.asarray(self.G, dtype=np.float64)
        if F.ndim != 2 or G.ndim != 2 or len(F) != len(G):
            raise ValueError(f"Evaluation: F must be [N, M] and G [N, k], got {F.shape} and {G.shape}")
        object.__setattr__(self, "F", F)
        object.__setattr__(self, "G", G)

    def __getitem__(self, metric: str) -> np.ndarray:
        """A named metric, e.g. ``ev["throughput_fps"]`` (objectives and constraints are ``F``, ``G``)."""
        return self.metrics[metric]

    @property
    def feasible(self) -> np.ndarray:
        """[N] bool: every constraint holds."""
        return np.asarray((self.G <= 0).all(axis=1))

    @property
    def violation(self) -> np.ndarray:
        """[N] total constraint violation (0 when feasible)."""
        return np.clip(self.G, 0.0, None).sum(axis=1)


@runtime_checkable
class SearchProblem(Protocol):
    """What every solver may rely on (see the module docstring)."""

    kind: str
    n_var: int

    @property
    def objective_names(self) -> tuple[str, ...]: ...

    @property
    def objective_senses(self) -> tuple[str, ...]: ...

    def bounds(self) -> tuple[np.ndarray, np.ndarray]: ...

    def evaluate(self, X: np.ndarray) -> Evaluation: ...

    def pareto_front(self) -> tuple[np.ndarray, np.ndarray]: ...

    def space_size(self) -> int: ...

    def get_params(self) -> dict[str, Any]: ...


def nondominated(F: np.ndarray) -> np.ndarray:
    """Sorted indices of the non-dominated rows of the minimisation matrix ``F`` [N, M] (pymoo's
    efficient non-dominated sort, Zhang et al. IEEE TEVC 2015); equal rows are all kept."""
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    F = np.asarray(F, dtype=np.float64)
    if len(F) == 0:
        return np.zeros(0, dtype=np.int64)
    idx = NonDominatedSorting(method="efficient_non_dominated_sort").do(F, only_non_dominated_front=True)
    return np.sort(np.asarray(idx, dtype=np.int64))


def unique_rows(X: np.ndarray, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep the first row of each distinct objective vector (rows keep their order)."""
    if len(F) == 0:
        return X, F
    _, first = np.unique(F, axis=0, return_index=True)
    keep = np.sort(first)
    return X[keep], F[keep]


def build_result(problem: Any, solver: str, best: Candidate, *, evaluations: int, wall_time_s: float,
                 seed: int | None, settings: dict[str, Any] | None = None,
                 front: Sequence[Candidate] = (), history: Sequence[dict[str, float]] = (),
                 baselines: dict[str, Candidate] | None = None,
                 decision_rule: dict[str, Any] | None = None) -> SearchResult:
    """The :class:`SearchResult` of a run on ``problem``: space size, how it was counted, the
    fraction explored and the objective names come from the problem, the rest from the solver."""
    size = int(problem.space_size())
    return SearchResult(
        problem=problem.kind, solver=solver, best=best, front=tuple(front), evaluations=int(evaluations),
        space_size=float(size), space_counting=getattr(problem, "space_counting", ""),
        explored_fraction=min(1.0, evaluations / size) if size else 0.0, wall_time_s=float(wall_time_s),
        seed=seed, settings=dict(settings or {}), objectives=tuple(problem.objective_names),
        history=tuple(history), baselines=dict(baselines or {}), decision_rule=decision_rule,
    )
