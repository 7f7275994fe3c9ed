"""Risk-aware split objectives over a bandwidth trace (bandwidth as a distribution, not a number).

For a population ``X`` of splits and a :class:`~optimizer.hardware.bandwidth.BandwidthTrace`,
the end-to-end latency of candidate ``i`` for an upload starting at sample time ``t_s`` is

``lat[i, s] = T_client + transfer(bytes_i, t_s) + T_server + T_download + RTT``

where ``transfer`` pushes the crossing bytes through the trace's delivery opportunities
(Mahimahi's drain rule; :meth:`BandwidthTrace.transfer_s`) and the other terms are the split
problem's modeled components (:meth:`optimizer.search.split.SplitProblem.breakdown`). Over the
samples (start times every ``step_s`` seconds of the trace) one statistic becomes an objective:

* ``mean`` — expected latency;
* ``pNN`` — the NN-th percentile (numpy's linear interpolation);
* ``cvarNN`` — CVaR at ``beta = NN/100`` (Rockafellar & Uryasev, "Optimization of conditional
  value-at-risk", J. Risk 2000): ``CVaR_beta = VaR_beta + E[(L - VaR_beta)+] / (1 - beta)`` with
  ``VaR_beta`` the lower beta-quantile of the empirical distribution (the minimiser of their
  auxiliary function ``F_beta(alpha)`` for equally weighted samples);
* ``regret`` — expected regret against the per-sample best split: ``mean_s(lat[i, s] -
  min_j lat[j, s])`` with ``j`` over the feasible decisions of the problem's space (Savage's
  regret criterion, 1951).

The objective plugs into :class:`~optimizer.search.split.SplitProblem` as an extra objective
(``name``, ``sense``, ``fn(problem, X, breakdown) -> [N]``), so the exact front, NSGA-II and
TOPSIS use it unchanged.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import ConfigError

RISKS: tuple[str, ...] = ("mean", "p95", "cvar95", "regret")
_PATTERN = re.compile(r"^(mean|regret|p(\d{1,2})|cvar(\d{1,2}))$")


def parse_risk(text: str) -> tuple[str, float]:
    """``"cvar95"`` -> ``("cvar", 0.95)``, ``"p90"`` -> ``("p", 0.90)``, ``"mean"`` -> ``("mean", 0)``.

    Raises
    ------
    ConfigError
        Not one of ``mean``, ``regret``, ``pNN``, ``cvarNN`` (NN in 1..99).
    """
    m = _PATTERN.match(str(text).strip().lower())
    level = m and (m.group(2) or m.group(3))
    if m is None or (level is not None and not 0 < int(level) < 100):
        raise ConfigError(f"risk {text!r}: expected one of mean, regret, pNN or cvarNN with NN in 1..99 "
                          f"(e.g. {', '.join(RISKS)})")
    kind = m.group(1) if level is None else m.group(1).rstrip("0123456789")
    return kind, (int(level) / 100 if level else 0.0)


def risk_objective_name(risk: str) -> str:
    """The objective's name: ``latency_cvar95_s``, ``latency_p95_s``, ``latency_mean_s``, ``latency_regret_s``."""
    kind, beta = parse_risk(risk)
    return f"latency_{kind}{round(beta * 100) if beta else ''}_s"


def cvar(samples: np.ndarray, beta: float) -> np.ndarray:
    """CVaR_beta of each row of ``samples`` [N, S] (Rockafellar & Uryasev 2000), shape [N]."""
    var = np.asarray(np.quantile(samples, beta, axis=1, method="inverted_cdf"), dtype=np.float64)
    return np.asarray(var + np.maximum(samples - var[:, None], 0.0).mean(axis=1) / (1.0 - beta), dtype=np.float64)


def statistic(samples: np.ndarray, kind: str, beta: float, best: np.ndarray | None = None) -> np.ndarray:
    """One risk statistic per row of ``samples`` [N, S]; ``best`` [S] is needed for ``regret``."""
    if kind == "mean":
        return np.asarray(samples.mean(axis=1), dtype=np.float64)
    if kind == "p":
        return np.asarray(np.quantile(samples, beta, axis=1), dtype=np.float64)
    if kind == "cvar":
        return cvar(samples, beta)
    if best is None:
        raise ConfigError("regret needs the per-sample best latency")
    return np.asarray((samples - best[None, :]).mean(axis=1), dtype=np.float64)


def fixed_seconds(breakdown: dict[str, np.ndarray]) -> np.ndarray:
    """The part [N] of each candidate's latency that does not depend on the uplink: head (with its
    host work), server, download and round trip."""
    b = breakdown
    return np.asarray(b["client_s"] + b["server_s"] + b["download_s"] + b["rtt_s"], dtype=np.float64)


def latency_samples(breakdown: dict[str, np.ndarray], trace: Any, starts_s: np.ndarray) -> np.ndarray:
    """End-to-end latency [N, S] of the candidates of ``breakdown`` at each upload start time."""
    fixed = fixed_seconds(breakdown)
    return np.asarray(fixed[:, None] + trace.transfer_s(breakdown["crossing_bytes"], starts_s), dtype=np.float64)


def fitting_samples(problem: Any, trace: Any, starts_s: np.ndarray) -> np.ndarray:
    """Latency samples [N, S] of every decision of ``problem``'s searched space whose head fits its
    memory budget (the reference set of regret and of the mean guard; boundaries 0..L by default,
    so not splitting counts, 1..L-1 with ``interior_only``)."""
    b = problem.breakdown(problem.enumerate())
    ok = b["memory_bytes"] <= problem.limit_bytes
    return latency_samples({k: v[ok] for k, v in b.items()}, trace, starts_s)


@dataclass(frozen=True, eq=False)
class RiskObjective:
    """A split objective: a risk statistic of latency over a bandwidth trace (module docstring).

    Parameters
    ----------
    trace
        A :class:`~optimizer.hardware.bandwidth.BandwidthTrace` (the uplink).
    risk
        ``mean``, ``regret``, ``pNN`` or ``cvarNN``.
    step_s
        Spacing of the upload start times sampled over the trace.
    """

    trace: Any
    risk: str = "cvar95"
    step_s: float = 0.1
    sense: str = "min"
    #: per problem object (weak keys: an ``id`` could be reused by a later problem once one is freed)
    _best: weakref.WeakKeyDictionary[Any, np.ndarray] = field(default_factory=weakref.WeakKeyDictionary,
                                                              repr=False, compare=False)

    @property
    def name(self) -> str:
        return risk_objective_name(self.risk)

    @property
    def starts_s(self) -> np.ndarray:
        return np.asarray(self.trace.start_times(self.step_s), dtype=np.float64)

    def best_per_sample(self, problem: Any) -> np.ndarray:
        """``min_j lat[j, s]`` over the feasible decisions of ``problem`` (cached per problem)."""
        if problem not in self._best:
            lat = fitting_samples(problem, self.trace, self.starts_s)
            self._best[problem] = lat.min(axis=0) if len(lat) else np.zeros(len(self.starts_s))
        return self._best[problem]

    def fn(self, problem: Any, X: np.ndarray, breakdown: dict[str, np.ndarray]) -> np.ndarray:
        """The statistic for each candidate of ``X`` [N, 3], shape [N]."""
        kind, beta = parse_risk(self.risk)
        samples = latency_samples(breakdown, self.trace, self.starts_s)
        return statistic(samples, kind, beta, self.best_per_sample(problem) if kind == "regret" else None)

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable record (objective, risk, sampling, trace summary)."""
        return {"objective": self.name, "risk": self.risk, "step_s": self.step_s,
                "samples": int(len(self.starts_s)), "trace": self.trace.describe()}


@dataclass(frozen=True, eq=False)
class MeanLatencyGuard:
    """A split constraint: expected latency over the trace at most ``(1 + max_increase)`` times
    the least expected latency of any split of the searched space that fits the memory budget
    (not splitting included unless the problem is ``interior_only``).

    With a risk objective (CVaR, a percentile) this is the mean-risk form of Krokhmal, Palmquist &
    Uryasev ("Portfolio optimization with conditional value-at-risk objective and constraints",
    J. Risk 2002): cut the tail, but give up at most ``max_increase`` of the mean. The constraint
    value is ``mean / ((1 + max_increase) * least_mean) - 1`` (dimensionless, ``<= 0`` feasible);
    the split of least mean always satisfies it.
    """

    trace: Any
    max_increase: float
    step_s: float = 0.1
    name: str = "trace_mean_guard"
    _least: weakref.WeakKeyDictionary[Any, float] = field(default_factory=weakref.WeakKeyDictionary,
                                                          repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.max_increase < 10:
            raise ConfigError(f"maximum mean-latency increase {self.max_increase:g}: expected a fraction "
                              ">= 0 and < 10, e.g. 0.05 or 5%")

    def _samples(self, breakdown: dict[str, np.ndarray]) -> np.ndarray:
        return latency_samples(breakdown, self.trace, self.trace.start_times(self.step_s))

    def least_mean(self, problem: Any) -> float:
        """Least expected latency over the trace of the splits fitting the memory budget (cached)."""
        if problem not in self._least:
            means = fitting_samples(problem, self.trace, self.trace.start_times(self.step_s)).mean(axis=1)
            self._least[problem] = float(means.min()) if len(means) else float("inf")
        return self._least[problem]

    def fn(self, problem: Any, X: np.ndarray, breakdown: dict[str, np.ndarray]) -> np.ndarray:
        """Constraint value of each candidate of ``X``, shape [N]."""
        ceiling = (1.0 + self.max_increase) * self.least_mean(problem)
        return np.asarray(self._samples(breakdown).mean(axis=1) / ceiling - 1.0, dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable record."""
        return {"constraint": self.name, "max_mean_increase": self.max_increase, "step_s": self.step_s}


def costs_at_uplink(costs: Any, link: Any, uplink_bps: float) -> Any:
    """``costs`` (a :class:`~optimizer.search.split.SplitCosts`) with upload time and energy
    recomputed at ``uplink_bps`` (downlink, RTT and everything else unchanged)."""
    if not uplink_bps > 0:
        raise ConfigError(f"uplink {uplink_bps:g} bit/s: expected a value > 0")
    up = link.model_copy(update={"uplink_bps": float(uplink_bps)})
    return replace(costs, upload_s=np.asarray(up.upload_s(costs.cut_bytes), dtype=np.float64),
                   upload_j=np.asarray(up.upload_j(costs.cut_bytes), dtype=np.float64),
                   meta={**costs.meta, "uplink_bps": float(uplink_bps)})


def risk_best(problem: Any, objective: RiskObjective) -> tuple[np.ndarray, float]:
    """The feasible decision (every constraint of ``problem``) of least ``objective`` over the
    problem's whole space and its value (ties: the lexicographically first decision)."""
    problem.check()
    X = problem.enumerate()
    ok = np.flatnonzero(problem.evaluate(X).feasible)
    b = problem.breakdown(X[ok])
    values = objective.fn(problem, X[ok], b)
    i = int(np.argmin(values))
    return X[ok][i], float(values[i])
