"""Bandwidth-robust splits in the workflow: a trace becomes a risk objective and a plan annotation.

With ``SplitRequest.bandwidth_trace`` the split search keeps SmartSplit's latency, energy and
memory — evaluated at the trace's mean uplink unless ``bandwidth_bps`` is given — and appends
one risk objective over the trace (:class:`optimizer.search.split_risk.RiskObjective`: mean,
pNN, CVaR_beta after Rockafellar & Uryasev 2000, or regret); ``max_mean_increase`` adds a ceiling on
the expected latency over the trace (:class:`optimizer.search.split_risk.MeanLatencyGuard`). The plan records the trace's
provenance and summary in ``search.settings["bandwidth_trace"]`` and the chosen split's risk
statistics (mean, p95, CVaR-0.95 of latency over the trace) in ``predicted.extra``.

A split fitted on a trace assumes the trace is a fair sample of the link. When the mean rates of
its two halves differ by more than :data:`NONSTATIONARY_RATIO` the CLI and the report say so: on
``TMobile-LTE-short`` (7.2 then 19.5 Mbps) every CVaR split fitted on the first half that differs
from the mean split loses on the second (``benchmarks/bench_robust_split.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .outcome import PlanOutcome
    from .requests import SplitRequest

#: Ratio of the two halves' mean uplink rates above which a trace is reported as non-stationary.
NONSTATIONARY_RATIO = 1.5


def risk_setup(request: SplitRequest, costs: Any) -> tuple[Any, Any, tuple[Any, ...]]:
    """The split costs at the trace's mean uplink (unless the request sets a bandwidth), the
    request's risk objective and its constraints over the trace (``max_mean_increase``:
    :class:`optimizer.search.split_risk.MeanLatencyGuard`)."""
    from ..hardware import load_link
    from ..hardware.bandwidth import load_trace
    from ..search.split_risk import MeanLatencyGuard, RiskObjective, costs_at_uplink

    trace = load_trace(str(request.bandwidth_trace))
    if request.bandwidth_bps is None:
        costs = costs_at_uplink(costs, load_link(request.network), trace.mean_bps)
    guards = () if request.max_mean_increase is None else (
        MeanLatencyGuard(trace, request.max_mean_increase, request.trace_step_s),)
    return costs, RiskObjective(trace, request.risk or "cvar95", request.trace_step_s), guards


def trace_statistics(problem: Any, risk: Any, x: np.ndarray) -> dict[str, float]:
    """Mean, p50, p95 and CVaR-0.95 latency (s) of decision ``x`` over the risk objective's trace."""
    from ..search.split_risk import cvar, latency_samples

    lat = latency_samples(problem.breakdown(np.asarray([x])), risk.trace, risk.starts_s)
    return {"trace_latency_mean_s": float(lat.mean()),
            "trace_latency_p50_s": float(np.quantile(lat, 0.5)),
            "trace_latency_p95_s": float(np.quantile(lat, 0.95)),
            "trace_latency_cvar95_s": float(cvar(lat, 0.95)[0])}


def annotate_risk(outcome: PlanOutcome, risk: Any) -> PlanOutcome:
    """The outcome with the trace recorded in the plan (see the module docstring)."""
    from dataclasses import replace

    problem, plan = outcome.problem, outcome.plan
    d = outcome.result.best.decision
    x = problem.encode(d["split"], d["processor"], d["clock_hz"], d["wire_dtype"])
    stats = trace_statistics(problem, risk, x)
    predicted = plan.predicted.model_copy(update={"extra": {**plan.predicted.extra, **stats}})
    settings = {**plan.search.settings, "bandwidth_trace": risk.describe()}
    search = plan.search.model_copy(update={"settings": settings})
    return replace(outcome, plan=plan.model_copy(update={"predicted": predicted, "search": search}))


def trace_summary(plan: Any) -> str | None:
    """One line with the chosen split's latency statistics over the plan's bandwidth trace (for
    the CLI and the report), or None when the plan has no trace."""
    ex = plan.predicted.extra
    t = (plan.search.settings or {}).get("bandwidth_trace")
    if t is None or "trace_latency_p95_s" not in ex:
        return None
    stats = " / ".join(f"{k} {ex[f'trace_latency_{k}_s'] * 1e3:.1f}" for k in ("mean", "p50", "p95", "cvar95"))
    return (f"over {t['trace']['name']} ({t['trace']['mean_mbps']:.2f} Mbps mean, {t['samples']} upload starts "
            f"every {t['step_s']:g} s) the choice takes {stats} ms")


def trace_warnings(plan: Any) -> list[str]:
    """Warning lines about the plan's bandwidth trace itself (for the CLI and the report): its
    halves' mean rates differ by more than :data:`NONSTATIONARY_RATIO`."""
    t = ((plan.search.settings or {}).get("bandwidth_trace") or {}).get("trace") or {}
    halves = t.get("half_mean_mbps")
    if not halves or max(halves) <= 0 or max(halves) <= NONSTATIONARY_RATIO * min(halves):
        return []
    a, b = halves
    ratio = f"x{max(a, b) / min(a, b):.1f}" if min(a, b) > 0 else "one half carries nothing"
    return [f"warning: {t['name']} is not stationary: its first half averages {a:.2f} Mbps, its second "
            f"{b:.2f} Mbps ({ratio}); a split chosen over the whole trace may not hold "
            "for either regime, so check it on a trace of the conditions you expect"]
