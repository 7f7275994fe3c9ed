"""Phone–cloud split, from a request to a plan: graph → split costs → problem → solve → plan → simulate.

SmartSplit's recipe (Ahn et al.): a :class:`~optimizer.search.split.SplitProblem` over the split
costs of (device, link, server), NSGA-II or exact enumeration for the Pareto front of latency,
energy and memory (plus any thermal objectives), one point chosen by TOPSIS, and the baselines
LBO/EBO/COS/COC/RS with the result. The plan's thermal predictions come from one simulation.

:func:`plan_split` runs a :class:`~optimizer.workflow.requests.SplitRequest` end to end;
:func:`split_costs` builds its SplitCosts (batch jobs share them between tasks);
:func:`make_split_plan` is the graph-level step for callers that already hold a graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .outcome import PlanOutcome, annotate_thermal

if TYPE_CHECKING:
    from ..graph.layergraph import LayerGraph
    from .requests import SplitRequest


def make_split_plan(
    graph: LayerGraph,
    costs: Any,
    *,
    solver: str = "nsga2",
    seed: int | None = 0,
    memory_limit: float | None = None,
    interior_only: bool = False,
    settings: dict[str, Any] | None = None,
    variant: dict[str, Any] | None = None,
    command: str | None = None,
    extra_objectives: tuple[Any, ...] = (),
    accuracy: tuple[Any, float] | None = None,
    extra_constraints: tuple[Any, ...] = (),
    include_extremes: bool | None = None,
) -> PlanOutcome:
    """Search the splits of ``graph`` priced by ``costs`` (:func:`split_costs` or
    :func:`optimizer.search.split.build_split_costs`) and build the plan; ``extra_objectives`` are
    appended to latency, energy, memory (e.g. thermal ones); ``accuracy = (table [W, L+1], floor)``
    adds the accuracy constraint (:class:`~optimizer.search.split_accuracy.AccuracyConstrainedSplitProblem`);
    ``interior_only`` searches boundaries 1..L-1 only (``include_extremes`` is accepted, no effect).
    The plan's thermal predictions come from one simulation when the device has a thermal spec."""
    from ..plan.from_search import split_plan
    from ..search import solve
    from ..search.split import SplitProblem

    options = {"memory_limit_bytes": memory_limit, "interior_only": interior_only, "include_extremes": include_extremes,
               "extra_objectives": tuple(extra_objectives), "extra_constraints": tuple(extra_constraints)}
    if accuracy is not None:
        from ..search.split_accuracy import AccuracyConstrainedSplitProblem

        problem: Any = AccuracyConstrainedSplitProblem(costs, accuracy=accuracy[0], min_accuracy=accuracy[1],
                                                       **options)
    else:
        problem = SplitProblem(costs, **options)
    result = solve(problem, solver, seed=seed, **(settings or {}))
    plan = split_plan(result, graph, variant=variant,
                      inputs={"model": graph.source_sha256 or graph.name}, command=command)
    return PlanOutcome(annotate_thermal(plan, graph, costs.device), result, problem)


def split_costs(request: SplitRequest, graph: LayerGraph) -> Any:
    """The SplitCosts of ``request`` for ``graph`` (:func:`optimizer.search.split.build_split_costs`);
    ``request.runtime`` selects the phone's inference runtime profile (default: the device's)."""
    from ..search.split import build_split_costs

    return build_split_costs(graph, request.device, request.network, request.server, dtype=request.dtype,
                             cost_model=request.cost_model, wire_dtypes=list(request.wire_dtypes),
                             bandwidth_bps=request.bandwidth_bps,
                             processors=list(request.processors) if request.processors else None,
                             runtime=request.runtime, result=request.result)


def solver_settings(request: SplitRequest) -> dict[str, Any]:
    """Settings of the split solver: TOPSIS weights and variant for the front-building solvers
    (``nsga2``, ``exact``), then ``request.settings`` (which win)."""
    decision: dict[str, Any] = {}
    if request.solver in ("nsga2", "exact"):
        weights = request.weights
        if request.memory_budget is not None:
            from .advice import budget_weights

            weights = budget_weights(weights, len(request.all_objectives))
        decision = {"weights": list(weights) if weights is not None else None,
                    "topsis_variant": request.topsis}
    return {**decision, **request.settings}


def plan_split(request: SplitRequest, *, graph: LayerGraph | None = None, costs: Any = None,
               status: Callable[[str], None] | None = None, command: str | None = None) -> PlanOutcome:
    """Run ``request`` end to end.

    Device, link and server names (and, with thermal objectives, the device's thermal spec) are
    checked before the model loads. ``graph`` and ``costs`` reuse what was built for the same
    model and costs (batch jobs); ``status(message)`` hears what is being done.
    """
    from ..graph import load_graph
    from ..hardware import load_device, load_link, load_server

    dev = load_device(request.device)
    dev.check_runtime(request.runtime)  # an unknown runtime fails before the model loads
    load_link(request.network), load_server(request.server)  # name errors before the model loads
    thermal = request.thermal_objectives
    if thermal:
        from ..hardware.thermal_spec import thermal_spec_of

        thermal_spec_of(dev)  # a device without a thermal section fails before the model loads
    if graph is None:
        graph = load_graph(request.model, request.granularity, input_shapes=request.input_shape)
    extra: tuple[Any, ...] = ()
    if thermal:
        from ..search.thermal_objectives import split_thermal_objectives

        extra = split_thermal_objectives(thermal, dev, graph=graph)
    if status is not None:
        status(f"searching splits of {graph.name} ({len(graph)} layers) with {request.solver}")
    if costs is None:
        costs = split_costs(request, graph)
    risk, guards = None, ()
    if request.bandwidth_trace is not None:
        from .robust import risk_setup

        costs, risk, guards = risk_setup(request, costs)
        extra = (*extra, risk)
    accuracy = None
    if request.accuracy_data is not None:
        from .accuracy import accuracy_setup

        if status is not None:
            status(f"measuring the accuracy of every partition of {graph.name} on {request.accuracy_data}")
        accuracy = accuracy_setup(request, costs)
    outcome = make_split_plan(graph, costs, solver=request.solver, seed=request.seed,
                              memory_limit=request.head_memory_limit, interior_only=request.interior_only,
                              settings=solver_settings(request), command=command, extra_objectives=extra,
                              accuracy=None if accuracy is None else (accuracy[0], request.min_accuracy or 0.0),
                              extra_constraints=guards)
    if accuracy is not None:
        from .accuracy import annotate_accuracy

        outcome = annotate_accuracy(outcome, request, *accuracy)
    if risk is not None:
        from .robust import annotate_risk

        outcome = annotate_risk(outcome, risk)
    from .advice import annotate_dominance

    return annotate_dominance(outcome)


def run_split_job(job: Any, *, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Run a SmartSplit job (:class:`optimizer.search.split_job.SplitJob`, ``dnnplan split --job``):
    one row per (model, device, seed) with the chosen split and the baselines'.

    Each (model, device) is one :class:`~optimizer.workflow.requests.SplitRequest`; its costs and
    problem are built once and solved per seed. Each row: ``model, device, seed, solver`` and
    :func:`optimizer.search.split_job.comparison_row` (``layers``, ``chosen``, ``objectives``,
    ``evaluations``, every baseline's decision and objectives).
    """
    from ..graph import load_graph
    from ..search import solve
    from ..search.split import SplitProblem
    from ..search.split_job import comparison_row
    from .requests import SplitRequest, parse_request

    search = {"population": job.population, "generations": job.generations} if job.solver == "nsga2" else {}
    rows = []
    for model in job.models:
        graph = load_graph(model, job.granularity)
        for device in job.devices:
            request = parse_request(SplitRequest, {
                "model": model, "device": device, "network": job.network, "server": job.server,
                "solver": job.solver, "granularity": job.granularity, "dtype": job.dtype,
                "wire_dtypes": list(job.wire_dtypes), "cost_model": job.cost_model, "processors": job.processors,
                "interior_only": job.interior_only, "include_extremes": job.include_extremes,
                "weights": job.weights, "topsis": job.topsis,
                "runtime": job.runtime, "settings": search})
            problem = SplitProblem(split_costs(request, graph), interior_only=job.interior_only)
            for seed in job.seeds:
                if progress:
                    progress(f"{model} on {device} (seed {seed})")
                res = solve(problem, job.solver, seed=seed, **solver_settings(request))
                rows.append({"model": graph.name, "device": device, "seed": seed, "solver": job.solver,
                             **comparison_row(res, len(graph))})
    return rows
