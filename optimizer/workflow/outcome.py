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
    ``device`` is a Device, a device name, or None for the plan's own device; the device's
    identity is recorded first (:func:`stamp_device`)."""
    from ..errors import UnknownNameError
    from ..hardware import load_device
    from .simulate import annotate_plan

    if device is None or isinstance(device, str):
        try:
            device = load_device(device or plan.device)
        except UnknownNameError:
            return plan
    return annotate_plan(stamp_device(plan, device), graph=graph, device=device)


def stamp_device(plan: Plan, device: Any) -> Plan:
    """Record the device's identity in ``plan.provenance.inputs["device"]`` (in place; returns the
    plan): :func:`optimizer.plan.device_check.device_sha256`, which ``validate``/``export``/``run`` compare."""
    from ..plan.device_check import DEVICE_INPUT, device_sha256

    plan.provenance.inputs[DEVICE_INPUT] = device_sha256(device)
    return plan
