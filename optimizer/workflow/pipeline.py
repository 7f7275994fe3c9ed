"""Pipeline mapping, from a request to a plan: graph → cost table → problem → solve → plan → simulate.

The recipe of Park & Ha (IEEE Access 2024): a :class:`~optimizer.search.pipeline.PipelineProblem`
over the device's cost table, solved by a registered solver (GA by default), compared with
every single-processor mapping and the FLOPs-proportional one, written as a plan whose thermal
predictions come from one sustained-run simulation (docs/METHODS.md section 10).

:func:`plan_pipeline` runs a :class:`~optimizer.workflow.requests.PipelineRequest` end to end;
:func:`prepare_pipeline` stops before the solver so a caller can show the problem (the CLI's
progress bar); :func:`pipeline_problem`, :func:`finish_pipeline_plan` and
:func:`make_pipeline_plan` are the graph-level steps for callers that already hold a graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .outcome import PlanOutcome, annotate_thermal

if TYPE_CHECKING:
    from ..graph.layergraph import LayerGraph
    from ..hardware.schema import Device
    from ..search.result import SearchResult
    from .measured import MeasuredFitness
    from .requests import PipelineRequest

Progress = Callable[[int, float, int], None]

#: Park & Ha's pipeline: up to 3 inference stages, each on its own processor (docs/METHODS.md section 2)
DEFAULT_STAGES = 3


def pipeline_problem(
    graph: LayerGraph,
    device: Device | str,
    *,
    dtype: str = "int8",
    stages: int | None = None,
    objectives: tuple[str, ...] = ("throughput",),
    memory_limit: float | None = None,
    processors: list[str] | None = None,
    cpu_cores: int | None = None,
    cpu_threads: int = 4,
    pre_s: float | None = None,
    post_s: float | None = None,
    backend: str | None = None,
    extra_objectives: tuple[Any, ...] = (),
    table: Any = None,
) -> Any:
    """The checked :class:`PipelineProblem` of ``graph`` on ``device`` (a Device or its name);
    ``table`` reuses a CostTable already built for them. ``stages`` None: Park & Ha's
    :data:`DEFAULT_STAGES`, or as many as the processors allowed when the device has fewer."""
    from ..cost import build_cost_table
    from ..hardware import load_device
    from ..search.pipeline import PipelineProblem

    if table is None:
        dev = load_device(device) if isinstance(device, str) else device
        table = build_cost_table(graph, dev, dtype, backend=backend)
    if stages is None:
        stages = min(DEFAULT_STAGES, len(processors) if processors else table.n_processors)
    problem = PipelineProblem(table, stages=stages, objectives=tuple(objectives), memory_limit=memory_limit,
                              processors=processors, cpu_cores=cpu_cores, cpu_threads=cpu_threads,
                              pre_s=pre_s, post_s=post_s, extra_objectives=tuple(extra_objectives))
    problem.prepare()
    problem.check_memory_feasible()
    return problem


def finish_pipeline_plan(problem: Any, result: SearchResult, graph: LayerGraph, *,
                         variant: dict[str, Any] | None = None, command: str | None = None,
                         device: Any = None) -> PlanOutcome:
    """Add the single-processor and FLOPs baselines to ``result`` and build the plan; the plan's
    ``predicted`` thermal fields come from one simulation when the device has a thermal spec."""
    from ..plan.from_search import pipeline_plan
    from ..search import solve

    baselines = dict(result.baselines)
    baselines.update(solve(problem, "single").baselines)
    baselines["flops"] = solve(problem, "flops").best
    result = replace(result, baselines=baselines)
    plan = pipeline_plan(result, problem, graph, variant=variant,
                         inputs={"model": graph.source_sha256 or graph.name}, command=command)
    return PlanOutcome(annotate_thermal(plan, graph, device), result, problem)


def make_pipeline_plan(graph: LayerGraph, device: Device | str, *, solver: str = "ga", seed: int | None = 0,
                       settings: dict[str, Any] | None = None, variant: dict[str, Any] | None = None,
                       command: str | None = None, **problem_args: Any) -> PlanOutcome:
    """Map ``graph`` onto ``device`` as a pipeline: problem (``problem_args`` as in
    :func:`pipeline_problem`) → ``solve`` → baselines → plan."""
    from ..search import solve

    problem = pipeline_problem(graph, device, **problem_args)
    result = solve(problem, solver, seed=seed, **(settings or {}))
    return finish_pipeline_plan(problem, result, graph, variant=variant, command=command, device=device)


@dataclass
class PipelineSearch:
    """A pipeline request ready to solve: its graph, device, checked problem and solver settings."""

    request: PipelineRequest
    graph: LayerGraph
    device: Device
    problem: Any  # PipelineProblem
    settings: dict[str, Any] = field(default_factory=dict)
    fitness: MeasuredFitness | None = None

    def run(self, *, progress: Progress | None = None, command: str | None = None) -> PlanOutcome:
        """Solve (``progress(generation, best, evaluations)`` reports GA generations), add the
        baselines and build the plan; a measurement process is stopped whatever happens."""
        from ..search import solve

        req = self.request
        extra = {"progress": progress} if progress is not None and req.solver == "ga" else {}
        try:
            result = solve(self.problem, req.solver, seed=req.seed, **self.settings, **extra)
        finally:
            if self.fitness is not None:
                self.fitness.close()
        return finish_pipeline_plan(self.problem, result, self.graph, variant=dict(req.variant) or None,
                                    command=command, device=self.device)


def prepare_pipeline(request: PipelineRequest, *, graph: LayerGraph | None = None, table: Any = None,
                     host_measurer: Any = None) -> PipelineSearch:
    """Load what ``request`` names and build its problem (nothing is solved yet).

    ``graph`` and ``table`` reuse a LayerGraph and CostTable already built for the request's
    model, granularity, device and dtype (batch jobs share them between tasks);
    ``host_measurer`` is needed for ``measure="host"`` (see :mod:`optimizer.workflow.measured`).
    Name errors (device, host device) come before the model is loaded.
    """
    from ..graph import load_graph
    from ..hardware import load_device
    from .measured import check_host, measured_fitness

    dev = load_device(request.device)
    check_host(request, dev, host_measurer)
    if graph is None:
        graph = load_graph(request.model, request.granularity, input_shapes=request.input_shape,
                           **dict(request.variant))
    extra: tuple[Any, ...] = ()
    if request.thermal_objectives:
        from ..search.thermal_objectives import pipeline_thermal_objectives

        extra = pipeline_thermal_objectives(request.thermal_objectives, graph, dev)
    problem = pipeline_problem(
        graph, dev, dtype=request.compute_dtype, stages=request.stages, objectives=request.objectives,
        memory_limit=request.memory_limit, processors=list(request.processors) if request.processors else None,
        cpu_cores=request.cpu_cores, pre_s=request.pre_s, post_s=request.post_s, extra_objectives=extra,
        cpu_threads=1 if request.measure == "host" else 4, table=table)  # host: one thread per core stage
    settings = dict(request.settings)
    fitness = measured_fitness(request, graph, dev, problem, host_measurer) if request.solver == "ga" else None
    if fitness is not None:
        settings["evaluator"] = fitness.evaluator
    return PipelineSearch(request, graph, dev, problem, settings, fitness)


def plan_pipeline(request: PipelineRequest, *, graph: LayerGraph | None = None, table: Any = None,
                  host_measurer: Any = None, progress: Progress | None = None,
                  command: str | None = None) -> PlanOutcome:
    """Run ``request`` end to end (:func:`prepare_pipeline` then :meth:`PipelineSearch.run`)."""
    search = prepare_pipeline(request, graph=graph, table=table, host_measurer=host_measurer)
    return search.run(progress=progress, command=command)
