"""Picking one solution from a Pareto front: TOPSIS (Hwang & Yoon, 1981).

Two variants, both over an objective matrix ``F`` [N, M] whose columns are all minimised:

* ``"paper"`` — as SmartSplit (Prakash et al., 2022) uses it: drop infeasible rows, normalise
  each column (vector normalisation ``r_ij = f_ij / ||f_j||``), multiply by the weights, take
  the ideal point as the column minima and choose the row with the least Euclidean distance
  to it.
* ``"classic"`` — Hwang & Yoon: the same weighted normalised matrix, ideal (column minima) and
  anti-ideal (column maxima), closeness ``C = d- / (d+ + d-)``; choose the largest ``C``.

Edge cases: a column of zeros stays zero (no division by zero); a constant column has no
influence; when every row coincides with the ideal (``d+ + d- = 0``) its closeness is 1.

Ties (scores equal within a relative 1e-9) are broken deterministically: the lexicographically
smallest objective row (first column first), then the lowest row index. With this rule the
choice is never dominated by another feasible row, whatever the (non-negative) weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, ConstraintError

VARIANTS: tuple[str, ...] = ("paper", "classic")
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class TopsisChoice:
    """The chosen row and how it was chosen.

    ``scores`` has one entry per input row: the distance to the ideal (``paper``, lower is
    better) or the closeness coefficient (``classic``, higher is better); NaN for infeasible rows.
    """

    index: int
    variant: str
    weights: tuple[float, ...]
    scores: np.ndarray

    @property
    def score(self) -> float:
        return float(self.scores[self.index])

    def as_dict(self) -> dict[str, Any]:
        """JSON-serialisable record for results and plans."""
        return {"method": "topsis", "variant": self.variant, "weights": list(self.weights),
                "normalisation": "vector", "score": self.score,
                "score_meaning": "distance to ideal (lower is better)" if self.variant == "paper"
                else "closeness to ideal (higher is better)",
                "tie_break": "lexicographically smallest objectives, then lowest index"}


def check_weights(weights: Sequence[float] | None, n_objectives: int) -> tuple[float, ...]:
    """Validate TOPSIS weights: ``n_objectives`` finite values, none negative, not all zero."""
    if weights is None:
        return (1.0,) * n_objectives
    w = tuple(float(v) for v in weights)
    if len(w) != n_objectives:
        raise ConfigError(f"weights {','.join(f'{v:g}' for v in w)} has {len(w)} value(s); expected "
                          f"{n_objectives} (one per objective)")
    bad = [v for v in w if not np.isfinite(v) or v < 0]
    if bad:
        raise ConfigError(f"weight {bad[0]:g} is not valid; expected finite values >= 0")
    if sum(w) == 0:
        raise ConfigError("weights are all zero; give at least one positive weight")
    return w


def topsis(
    F: np.ndarray,
    *,
    feasible: np.ndarray | None = None,
    weights: Sequence[float] | None = None,
    variant: str = "paper",
) -> TopsisChoice:
    """Choose one row of ``F`` (all columns minimised) by TOPSIS.

    Parameters
    ----------
    F
        Objective matrix [N, M].
    feasible
        Boolean mask [N]; infeasible rows are dropped before normalising (default: all feasible).
    weights
        One non-negative weight per column (default: all 1).
    variant
        ``"paper"`` (distance to the ideal, SmartSplit) or ``"classic"`` (closeness, Hwang & Yoon).

    Raises
    ------
    ConstraintError
        No row is feasible.
    ConfigError
        Unknown variant, bad weights, or a non-finite objective value.
    """
    if variant not in VARIANTS:
        raise ConfigError(f"unknown TOPSIS variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or F.shape[1] == 0:
        raise ConfigError(f"TOPSIS needs an objective matrix [rows, objectives], got shape {F.shape}")
    w = check_weights(weights, F.shape[1])
    ok = np.ones(len(F), dtype=bool) if feasible is None else np.asarray(feasible, dtype=bool)
    if ok.shape != (len(F),):
        raise ConfigError(f"feasible mask has shape {ok.shape}; expected ({len(F)},)")
    rows = np.flatnonzero(ok)
    if len(rows) == 0:
        raise ConstraintError(f"TOPSIS: none of the {len(F)} candidate(s) is feasible; relax the constraints")
    A = F[rows]
    if not np.isfinite(A).all():
        raise ConfigError("TOPSIS: the objective matrix has a non-finite value in a feasible row")
    norm = np.sqrt((A**2).sum(axis=0))
    V = A / np.where(norm > 0, norm, 1.0) * np.asarray(w)
    d_plus = np.sqrt(((V - V.min(axis=0)) ** 2).sum(axis=1))
    if variant == "paper":
        score, better = d_plus, -d_plus
    else:
        d_minus = np.sqrt(((V - V.max(axis=0)) ** 2).sum(axis=1))
        total = d_plus + d_minus
        score = np.where(total > 0, d_minus / np.where(total > 0, total, 1.0), 1.0)
        better = score
    best = better.max()
    tied = np.flatnonzero(better >= best - TIE_RTOL * max(1.0, abs(best)))
    # lexicographic order of the tied rows' objectives (np.lexsort: last key is primary)
    order = np.lexsort(tuple(A[tied, j] for j in range(A.shape[1] - 1, -1, -1)))
    chosen = int(rows[tied[order[0]]])
    scores = np.full(len(F), np.nan)
    scores[rows] = score
    return TopsisChoice(index=chosen, variant=variant, weights=w, scores=scores)
