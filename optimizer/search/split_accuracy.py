"""A split problem with an accuracy floor: ``accuracy(l, w) >= min_accuracy`` as a constraint.

The accuracy of the deployed configuration depends on the boundary ``l`` and the wire dtype
``w`` (the head dtype and FP32 tail are fixed by the search), so it is a table ``[W, L+1]``
measured once (:func:`optimizer.plan.accuracy.accuracy_table`) and read per candidate.

The problem keeps :class:`~optimizer.search.split.SplitProblem`'s single constraint column, so
every solver, baseline and the exact front work unchanged: ``G = max(memory / limit - 1,
min_accuracy - accuracy, other extra constraints)`` — all terms dimensionless, ``<= 0`` exactly
when the head fits the memory budget and the configuration reaches the accuracy floor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError, ConstraintError
from .problem import Evaluation
from .split import SplitProblem


class AccuracyConstrainedSplitProblem(SplitProblem):
    """:class:`SplitProblem` plus ``accuracy[w, l] >= min_accuracy`` (see the module docstring)."""

    def __init__(self, costs: Any, *, accuracy: np.ndarray, min_accuracy: float, **kwargs: Any) -> None:
        super().__init__(costs, **kwargs)
        self.accuracy = np.asarray(accuracy, dtype=np.float64)
        self.min_accuracy = float(min_accuracy)
        want = (len(costs.wire_dtypes), costs.n_layers + 1)
        if self.accuracy.shape != want or not 0 <= self.min_accuracy <= 1:
            raise ConfigError(f"accuracy table of shape {self.accuracy.shape} and floor {min_accuracy}: expected "
                              f"shape {want} and a floor in 0..1")

    def accuracy_of(self, X: np.ndarray) -> np.ndarray:
        """Top-1 accuracy of each candidate's deployed configuration, shape [N]."""
        l, _, w = self.columns(X)
        return np.asarray(self.accuracy[w, l], dtype=np.float64)

    def constraint_terms(self, X: np.ndarray, b: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [*super().constraint_terms(X, b), self.min_accuracy - self.accuracy_of(X)]

    def evaluate(self, X: np.ndarray) -> Evaluation:
        ev = super().evaluate(X)
        return Evaluation(ev.F, ev.G, {**ev.metrics, "accuracy": self.accuracy_of(X)})

    def check(self) -> None:
        super().check()
        xl, xu = self.bounds()
        reach = self.accuracy[:, xl[0]: xu[0] + 1]
        if not (reach >= self.min_accuracy).any():
            raise ConstraintError(f"minimum accuracy {self.min_accuracy:.4f} is above every split of "
                                  f"{self.costs.model!r}; the best reachable is {reach.max():.4f}")

    def get_params(self) -> dict[str, Any]:
        return {**super().get_params(), "min_accuracy": self.min_accuracy}
