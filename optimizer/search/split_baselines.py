"""SmartSplit's baselines and the exact front for :class:`~optimizer.search.split.SplitProblem`.

Baselines (Prakash et al., 2022, §5), each a single candidate:

* ``lbo`` — latency-based optimisation: the feasible candidate of least latency;
* ``ebo`` — energy-based optimisation: the feasible candidate of least energy;
* ``cos`` — compute on smartphone: boundary ``L`` (all layers on the phone), on the head
  option of least latency;
* ``coc`` — compute on cloud: boundary ``0`` (the input is uploaded), on the wire dtype of
  least latency;
* ``rs`` — random split: a uniformly drawn feasible candidate of the problem's space (seeded).

Ties are broken lexicographically on (latency, energy, memory), then by decision order. COS and
COC are in the problem's space by default (boundaries ``0..L``), so the front, TOPSIS and LBO/EBO
can choose not to split; with ``interior_only`` they are evaluated as baselines all the same. A
COS whose memory exceeds the budget is reported with ``feasible=False``.

``exact`` enumerates the whole space and keeps the true Pareto front (pymoo's non-dominated
sorting), then picks one point by TOPSIS.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, ConstraintError
from .decision import topsis
from .problem import build_result
from .result import Candidate, SearchResult
from .split import SplitProblem

BASELINES: tuple[str, ...] = ("lbo", "ebo", "cos", "coc", "rs")


def _lexmin(F: np.ndarray, primary: int) -> int:
    """Row of least ``F[:, primary]``, ties by the other columns in order, then index."""
    cols = [primary] + [j for j in range(F.shape[1]) if j != primary]
    return int(np.lexsort(tuple(F[:, j] for j in reversed(cols)))[0])


def _feasible_space(problem: SplitProblem) -> tuple[np.ndarray, np.ndarray]:
    problem.check()
    X = problem.enumerate()
    ev = problem.evaluate(X)
    return X[ev.feasible], ev.F[ev.feasible]


def extreme_decisions(problem: SplitProblem) -> dict[str, np.ndarray]:
    """``cos`` (boundary L on the head option of least latency) and ``coc`` (boundary 0 on the
    wire dtype of least latency) decision vectors."""
    c = problem.costs
    n, n_opt, n_wire = c.n_layers, len(c.options), len(c.wire_dtypes)
    cos = np.stack([np.full(n_opt, n), np.arange(n_opt), np.zeros(n_opt, dtype=np.int64)], axis=1)
    coc = np.stack([np.zeros(n_wire, dtype=np.int64), np.zeros(n_wire, dtype=np.int64), np.arange(n_wire)], axis=1)
    return {"cos": cos[_lexmin(problem.evaluate(cos).F, 0)], "coc": coc[_lexmin(problem.evaluate(coc).F, 0)]}


def baseline_decisions(problem: SplitProblem, seed: int | None = None) -> dict[str, np.ndarray]:
    """Decision vectors of every baseline (see the module docstring)."""
    X, F = _feasible_space(problem)
    out = {"lbo": X[_lexmin(F, 0)], "ebo": X[_lexmin(F, 1)], **extreme_decisions(problem)}
    rng = np.random.default_rng(seed)
    out["rs"] = X[int(rng.integers(len(X)))]
    return out


def split_baselines(problem: SplitProblem, seed: int | None = None) -> dict[str, Candidate]:
    """Every baseline as a :class:`Candidate`, keyed ``lbo, ebo, cos, coc, rs``."""
    dec = baseline_decisions(problem, seed)
    cands = problem.candidates(np.stack([dec[b] for b in BASELINES]))
    return dict(zip(BASELINES, cands, strict=True))


def index_only_decisions(problem: SplitProblem, *, processor_kind: str = "cpu",
                         wire_dtype: str = "fp32") -> np.ndarray:
    """The split-index-only sub-space (the paper's setting): every boundary of the problem, with
    the head on the first processor of ``processor_kind`` at its highest clock and
    ``wire_dtype`` tensors on the wire. Shape [n, 3]."""
    c = problem.costs
    kinds = [i for i, o in enumerate(c.options) if o.kind == processor_kind]
    if not kinds:
        raise ConfigError(f"no head option of kind {processor_kind!r}; the options are "
                          f"{', '.join(sorted({o.kind for o in c.options}))}")
    if wire_dtype not in c.wire_dtypes:
        raise ConfigError(f"wire dtype {wire_dtype!r} is not searched; valid: {', '.join(c.wire_dtypes)}")
    first = c.options[kinds[0]].processor
    k = max((i for i in kinds if c.options[i].processor == first), key=lambda i: c.options[i].clock_hz)
    xl, xu = problem.bounds()
    ls = np.arange(xl[0], xu[0] + 1)
    return np.stack([ls, np.full_like(ls, k), np.full_like(ls, c.wire_dtypes.index(wire_dtype))], axis=1)


def solver_result(problem: SplitProblem, solver: str, best: Candidate, *, seed: int | None,
            start: float, evaluations: int, settings: dict[str, Any] | None = None, **parts: Any) -> SearchResult:
    """:func:`~optimizer.search.problem.build_result` with the problem's settings recorded first."""
    return build_result(problem, solver, best, evaluations=evaluations, wall_time_s=time.perf_counter() - start,
                        seed=seed, settings={**problem.get_params(), **(settings or {})}, **parts)

def choose(problem: SplitProblem, X: np.ndarray, F: np.ndarray, weights: Sequence[float] | None,
           variant: str) -> tuple[list[Candidate], Candidate, dict[str, Any]]:
    """Front candidates, the TOPSIS choice among them and the decision-rule record."""
    if len(X) == 0:
        raise ConstraintError(f"no feasible split of {problem.costs.model!r} was found")
    choice = topsis(F, weights=weights, variant=variant)
    front = problem.candidates(X)
    return front, front[choice.index], choice.as_dict()


def solve_split_exact(problem: SplitProblem, *, seed: int | None = None,
                      weights: Sequence[float] | None = None, topsis_variant: str = "paper") -> SearchResult:
    """Enumerate the whole space: the true Pareto front, one point chosen by TOPSIS."""
    start = time.perf_counter()
    problem.check()
    F, X = problem.pareto_front()
    front, best, rule = choose(problem, X, F, weights, topsis_variant)
    return solver_result(problem, "exact", best, seed=seed, start=start, evaluations=problem.space_size(),
                   front=front, settings={"weights": None if weights is None else list(weights),
                                                 "topsis": topsis_variant},
                   decision_rule=rule, baselines=split_baselines(problem, seed))


def _solve_baseline(name: str, problem: SplitProblem, seed: int | None) -> SearchResult:
    start = time.perf_counter()
    base = split_baselines(problem, seed)
    evals = 1 if name in ("rs",) else (len(problem.costs.options) if name == "cos" else
                                       len(problem.costs.wire_dtypes) if name == "coc" else problem.space_size())
    return solver_result(problem, name, base[name], seed=seed, start=start, evaluations=evals,
                   decision_rule={"method": name}, baselines=base)


def solve_split_lbo(problem: SplitProblem, *, seed: int | None = None) -> SearchResult:
    """LBO: the feasible candidate of least latency."""
    return _solve_baseline("lbo", problem, seed)


def solve_split_ebo(problem: SplitProblem, *, seed: int | None = None) -> SearchResult:
    """EBO: the feasible candidate of least phone energy."""
    return _solve_baseline("ebo", problem, seed)


def solve_split_cos(problem: SplitProblem, *, seed: int | None = None) -> SearchResult:
    """COS: every layer on the phone, on its fastest head option."""
    return _solve_baseline("cos", problem, seed)


def solve_split_coc(problem: SplitProblem, *, seed: int | None = None) -> SearchResult:
    """COC: every layer on the server (the input is uploaded)."""
    return _solve_baseline("coc", problem, seed)


def solve_split_rs(problem: SplitProblem, *, seed: int | None = None) -> SearchResult:
    """RS: a uniformly random feasible candidate (seeded)."""
    return _solve_baseline("rs", problem, seed)
