"""From a LayerGraph and names to a Plan: the one recipe the CLI, batch jobs and notebooks share.

``make_pipeline_plan`` = cost table (device, dtype) → :class:`PipelineProblem` → ``solve`` →
baselines (every single processor, the FLOPs-proportional mapping) → :func:`pipeline_plan`.
``make_split_plan`` = split costs (device, link, server) → :class:`SplitProblem` → ``solve``
(its baselines LBO/EBO/COS/COC/RS come with the result) → :func:`split_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .from_search import pipeline_plan, split_plan
from .schema import Plan


@dataclass(frozen=True)
class PlanOutcome:
    """A plan with the search result and the problem that produced it."""

    plan: Plan
    result: Any  # optimizer.search.SearchResult
    problem: Any  # PipelineProblem | SplitProblem


def pipeline_problem(
    graph: Any,
    device: Any,
    *,
    dtype: str = "int8",
    stages: int = 3,
    objectives: tuple[str, ...] = ("throughput",),
    memory_limit: float | None = None,
    processors: list[str] | None = None,
    cpu_cores: int | None = None,
    cpu_threads: int = 4,
    pre_s: float | None = None,
    post_s: float | None = None,
    backend: str = "analytic",
    extra_objectives: tuple[Any, ...] = (),
    table: Any = None,
) -> Any:
    """The checked :class:`PipelineProblem` of ``graph`` on ``device`` (a Device or its name);
    ``table`` reuses a CostTable already built for them."""
    from ..cost import build_cost_table
    from ..hardware import load_device
    from ..search.pipeline import PipelineProblem

    if table is None:
        dev = load_device(device) if isinstance(device, str) else device
        table = build_cost_table(graph, dev, dtype, backend=backend)
    problem = PipelineProblem(table, stages=stages, objectives=tuple(objectives), memory_limit=memory_limit,
                              processors=processors, cpu_cores=cpu_cores, cpu_threads=cpu_threads,
                              pre_s=pre_s, post_s=post_s,
                              extra_objectives=tuple(extra_objectives))
    problem.prepare()
    problem.check_memory_feasible()
    return problem


def _thermal(plan: Plan, graph: Any, device: Any) -> Plan:
    """Fill the plan's thermal predictions by one simulation when its device has a thermal spec."""
    from ..errors import UnknownNameError
    from ..hardware import load_device
    from ..thermal.plan_workload import annotate_plan

    if device is None or isinstance(device, str):
        try:
            device = load_device(device or plan.device)
        except UnknownNameError:
            return plan
    return annotate_plan(plan, graph=graph, device=device)


def finish_pipeline_plan(problem: Any, result: Any, graph: Any, *, variant: dict[str, Any] | None = None,
                         command: str | None = None, device: Any = None) -> PlanOutcome:
    """Add the single-processor and FLOPs baselines to ``result`` and build the plan; the plan's
    ``predicted`` thermal fields come from one simulation when the device has a thermal spec."""
    from ..search import solve

    baselines = dict(result.baselines)
    baselines.update(solve(problem, "single").baselines)
    baselines["flops"] = solve(problem, "flops").best
    result = replace(result, baselines=baselines)
    plan = pipeline_plan(result, problem, graph, variant=variant,
                         inputs={"model": graph.source_sha256 or graph.name}, command=command)
    return PlanOutcome(_thermal(plan, graph, device), result, problem)


def make_pipeline_plan(graph: Any, device: Any, *, solver: str = "ga", seed: int | None = 0,
                       settings: dict[str, Any] | None = None, variant: dict[str, Any] | None = None,
                       command: str | None = None, **problem_args: Any) -> PlanOutcome:
    """Map ``graph`` onto ``device`` as a pipeline: problem (``problem_args`` as in
    :func:`pipeline_problem`) → ``solve`` → baselines → plan."""
    from ..search import solve

    problem = pipeline_problem(graph, device, **problem_args)
    result = solve(problem, solver, seed=seed, **(settings or {}))
    return finish_pipeline_plan(problem, result, graph, variant=variant, command=command, device=device)


def make_split_plan(
    graph: Any,
    device: str,
    network: str,
    *,
    server: str = "smartsplit_i5",
    dtype: str = "int8",
    solver: str = "nsga2",
    seed: int | None = 0,
    memory_limit: float | None = None,
    include_extremes: bool = False,
    cost_model: str = "table",
    wire_dtypes: tuple[str, ...] = ("int8", "fp16", "fp32"),
    bandwidth_bps: float | None = None,
    processors: list[str] | None = None,
    runtime: str | None = None,
    settings: dict[str, Any] | None = None,
    variant: dict[str, Any] | None = None,
    command: str | None = None,
    costs: Any = None,
    extra_objectives: tuple[Any, ...] = (),
) -> PlanOutcome:
    """Split ``graph`` between ``device`` and ``server`` over ``network`` and build the plan;
    ``costs`` reuses SplitCosts already built for them; ``extra_objectives`` are appended to
    latency, energy, memory (e.g. thermal ones). The plan's thermal predictions come from one
    simulation when the device has a thermal spec."""
    from ..search import solve
    from ..search.split import SplitProblem, build_split_costs

    if costs is None:
        costs = build_split_costs(graph, device, network, server, dtype=dtype, cost_model=cost_model,
                                  wire_dtypes=list(wire_dtypes), bandwidth_bps=bandwidth_bps,
                                  processors=processors, runtime=runtime)
    problem = SplitProblem(costs, memory_limit_bytes=memory_limit, include_extremes=include_extremes,
                           extra_objectives=tuple(extra_objectives))
    result = solve(problem, solver, seed=seed, **(settings or {}))
    plan = split_plan(result, graph, variant=variant,
                      inputs={"model": graph.source_sha256 or graph.name}, command=command)
    return PlanOutcome(_thermal(plan, graph, device), result, problem)
