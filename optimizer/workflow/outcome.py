"""What a workflow returns, and the thermal annotation every plan gets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..graph.layergraph import LayerGraph
    from ..plan.schema import Plan
    from ..search.result import SearchResult


@dataclass(frozen=True)
class PlanOutcome:
    """A plan with the search result and the problem that produced it."""

    plan: Plan
    result: SearchResult
    problem: Any  # PipelineProblem | SplitProblem


def annotate_thermal(plan: Plan, graph: LayerGraph, device: Any) -> Plan:
    """Fill the plan's thermal predictions by one simulation
    (:func:`optimizer.workflow.simulate.annotate_plan`) when its device has a thermal spec;
    ``device`` is a Device, a device name, or None for the plan's own device."""
    from ..errors import UnknownNameError
    from ..hardware import load_device
    from .simulate import annotate_plan

    if device is None or isinstance(device, str):
        try:
            device = load_device(device or plan.device)
        except UnknownNameError:
            return plan
    return annotate_plan(plan, graph=graph, device=device)
