"""Decision support for split plans: warn when a baseline dominates the TOPSIS choice.

TOPSIS (Hwang & Yoon 1981, as SmartSplit applies it) picks from the Pareto front by distance to
the ideal point; with equal weights it happily trades 5x latency for a few MB of phone memory,
and nothing said so. Here the chosen split is compared with the single-candidate baselines
COS, COC, LBO and EBO (Prakash et al. 2022, §5) *in the objectives the user weighted* (TOPSIS
weight > 0): a baseline that is no worse in every one of them and better in at least one
(relative margin 1e-9) dominates the choice. A baseline that would dominate but for head
memory, needing at most 1 % of the phone's memory more (``MEMORY_SLACK``), is reported too,
with ``except: memory_bytes`` and the extra memory as a fraction of the phone's: the case of a
split that trades 5x latency for 3 MB on a 4 GB phone. The plan records the list in
``search.decision["dominated_by"]`` (empty when none; the field is added, nothing renamed); the
CLI table and the report print a warning line per entry.

A memory *budget* (``SplitRequest.memory_budget``) turns memory from an objective into a
constraint: the head-memory limit becomes the budget and memory's TOPSIS weight becomes 0.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .outcome import PlanOutcome

CHECKED: tuple[str, ...] = ("cos", "coc", "lbo", "ebo")
RTOL = 1e-9
MEMORY_SLACK = 0.01  # of the phone's memory: below this, more head memory is not worth a warning's silence


def _vector(problem: Any, decision: dict[str, Any]) -> np.ndarray:
    return np.asarray(problem.encode(decision["split"], decision["processor"], decision["clock_hz"],
                                     decision["wire_dtype"]))


def dominating_baselines(problem: Any, result: Any) -> list[dict[str, Any]]:
    """Baselines of ``result`` that dominate its choice in the objectives with a TOPSIS weight > 0.

    Each entry: ``baseline``, ``objectives`` (the weighted objectives compared), ``chosen`` and
    ``baseline_values`` (natural units, as in the candidates' objectives).
    """
    rule = result.decision_rule or {}
    names = list(problem.objectives)
    weights = rule.get("weights") or [1.0] * len(names)
    cared = [j for j, w in enumerate(weights) if w > 0]
    mem = names.index("memory_bytes")
    phone = float(problem.costs.device_memory_bytes)
    F_best = problem.evaluate(np.asarray([_vector(problem, result.best.decision)])).F[0]
    out = []
    for name in CHECKED:
        cand = result.baselines.get(name)
        if cand is None or not cand.feasible or cand.decision == result.best.decision:
            continue
        F = problem.evaluate(np.asarray([_vector(problem, cand.decision)])).F[0]
        entry = _dominance(F, F_best, cared)
        extra_mem = float(F[mem] - F_best[mem])
        if entry is None and mem in cared and np.isfinite(phone) and 0 < extra_mem <= MEMORY_SLACK * phone:
            entry = _dominance(F, F_best, [j for j in cared if j != mem])
            if entry is not None:
                entry.update({"except": "memory_bytes", "extra_memory_fraction_of_phone": extra_mem / phone})
        if entry is not None:
            objs = [names[j] for j in cared]
            out.append({"baseline": name, "objectives": objs, **entry,
                        "chosen": {k: result.best.objectives[k] for k in objs},
                        "baseline_values": {k: cand.objectives[k] for k in objs}})
    return out


def _dominance(F: np.ndarray, F_best: np.ndarray, cols: list[int]) -> dict[str, Any] | None:
    """``{}`` when ``F`` dominates ``F_best`` in ``cols`` (relative margin RTOL), else None."""
    if not cols:
        return None
    margin = RTOL * np.maximum(np.abs(F_best[cols]), 1e-300)
    if (F[cols] <= F_best[cols] + margin).all() and (F[cols] < F_best[cols] - margin).any():
        return {}
    return None


def warning_lines(dominated_by: list[dict[str, Any]]) -> list[str]:
    """One human-readable line per dominating baseline."""
    lines = []
    for d in dominated_by:
        parts = ", ".join(f"{k} {_fmt(k, d['baseline_values'][k])} vs {_fmt(k, d['chosen'][k])}"
                          for k in d["objectives"])
        base = d["baseline"].upper()
        if d.get("except"):
            lines.append(f"warning: {base} beats the chosen split in every weighted objective but memory, "
                         f"for {d['extra_memory_fraction_of_phone']:.2%} of the phone's memory ({parts}); "
                         "consider --memory-budget")
        else:
            lines.append(f"warning: {base} dominates the chosen split in {', '.join(d['objectives'])} "
                         f"({parts}); consider --weights or --memory-budget")
    return lines


def plan_warnings(plan: Any) -> list[str]:
    """Every warning line of a split plan, for the CLI and the report: baselines dominating the
    choice (:func:`warning_lines`) and a non-stationary bandwidth trace
    (:func:`optimizer.workflow.robust.trace_warnings`)."""
    from .robust import trace_warnings

    return warning_lines((plan.search.decision or {}).get("dominated_by") or []) + trace_warnings(plan)


def _fmt(name: str, value: float) -> str:
    if name.endswith("_s"):
        return f"{value * 1e3:.1f} ms"
    if name.endswith("_j"):
        return f"{value * 1e3:.1f} mJ"
    if name.endswith("_bytes"):
        return f"{value / 1e6:.2f} MB"
    return f"{value:.4g}"


def annotate_dominance(outcome: PlanOutcome) -> PlanOutcome:
    """Record :func:`dominating_baselines` in the plan's ``search.decision`` (TOPSIS choices only)."""
    plan, result = outcome.plan, outcome.result
    if plan.search.decision is None or plan.search.decision.get("method") != "topsis":
        return outcome
    found = dominating_baselines(outcome.problem, result)
    search = plan.search.model_copy(update={"decision": {**plan.search.decision, "dominated_by": found}})
    return replace(outcome, plan=plan.model_copy(update={"search": search}))


def budget_weights(weights: tuple[float, ...] | None, n_objectives: int) -> tuple[float, ...]:
    """TOPSIS weights with memory (the third objective) set to 0: memory is a budget, not an objective."""
    w = list(weights) if weights is not None else [1.0] * n_objectives
    w[2] = 0.0
    return tuple(w)
