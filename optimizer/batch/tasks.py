"""Task execution for batch jobs: shared inputs per key, and one search per task.

Graphs are imported once per (model, granularity); cost tables once per input key (model,
granularity, device, dtype) and split costs once per (key, network, server). Tasks only read
them. Every search goes through :mod:`optimizer.workflow` with a typed request, as the CLI's do:
a task can do what the command can (thermal objectives, TOPSIS weights, solver settings).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import DnnplanError
from .jobspec import DEFAULT_SERVER, TaskSpec
from .store import TaskOutcome


@dataclass
class SharedInputs:
    """What every task of one input key reuses, or the one-line error building it."""

    key: tuple[str, str, str, str, tuple[str, ...]]
    graph: Any = None
    table: Any = None  # CostTable for map tasks
    split_costs: dict[tuple[Any, ...], Any] = field(default_factory=dict)  # by TaskSpec.split_key
    error: str | None = None


def build_inputs(key: tuple[str, str, str, str, tuple[str, ...]], tasks: list[TaskSpec],
                 graphs: dict[tuple[str, str, tuple[str, ...]], Any] | None = None) -> SharedInputs:
    """Build the inputs of ``tasks`` (all sharing ``key``); ``graphs`` caches imports by model."""
    from ..cost import build_cost_table
    from ..graph import load_graph
    from ..graph.input_shapes import parse_input_shapes
    from ..workflow import split_costs

    model, granularity, device, dtype, shapes = key
    inputs = SharedInputs(key=key)
    try:
        cache = graphs if graphs is not None else {}
        if (model, granularity, shapes) not in cache:
            cache[(model, granularity, shapes)] = load_graph(model, granularity,
                                                             input_shapes=parse_input_shapes(list(shapes)) or None)
        inputs.graph = cache[(model, granularity, shapes)]
        if any(t.kind == "map" for t in tasks):
            inputs.table = build_cost_table(inputs.graph, device, dtype)
        for t in tasks:
            if t.kind == "split" and t.split_key not in inputs.split_costs:
                inputs.split_costs[t.split_key] = split_costs(split_request(t, costs_only=True), inputs.graph)
    except DnnplanError as exc:
        inputs.error = str(exc).splitlines()[0]
    return inputs


def map_request(task: TaskSpec) -> Any:
    """The :class:`~optimizer.workflow.PipelineRequest` of a map task."""
    from ..workflow import PipelineRequest, parse_request

    return parse_request(PipelineRequest, {
        "model": task.model, "device": task.device, "dtype": task.dtype, "granularity": task.granularity,
        "solver": task.solver or "ga", "objectives": list(task.objectives or ()), "stages": task.stages,
        "seed": task.seed, "memory_limit": task.memory_limit, "settings": dict(task.settings),
        "measure": task.measure, "measure_cmd": task.measure_cmd, "input_shape": task.input_shape})


def split_request(task: TaskSpec, *, costs_only: bool = False) -> Any:
    """The :class:`~optimizer.workflow.SplitRequest` of a split task (its ``objectives`` included);
    ``costs_only`` keeps just the fields of :attr:`TaskSpec.split_key`, so one task's bad search
    setting fails that task alone, not every task sharing its costs."""
    from ..workflow import SplitRequest, parse_request

    fields: dict[str, Any] = {
        "model": task.model, "device": task.device, "network": task.network or "",
        "server": task.server or DEFAULT_SERVER, "granularity": task.granularity, "dtype": task.dtype,
        "cost_model": task.cost_model, "processors": task.processors, "input_shape": task.input_shape,
        "runtime": task.runtime}
    if task.wire_dtypes:
        fields["wire_dtypes"] = list(task.wire_dtypes)
    if not costs_only:
        fields.update(solver=task.solver or "nsga2", memory_limit=task.memory_limit, seed=task.seed,
                      interior_only=task.interior_only, include_extremes=task.include_extremes,
                      objectives=list(task.objectives or ()),
                      settings=dict(task.settings), bandwidth_trace=task.bandwidth_trace, risk=task.risk,
                      memory_budget=task.memory_budget, accuracy_data=task.accuracy_data,
                      min_accuracy=task.min_accuracy, max_mean_increase=task.max_mean_increase)
    return parse_request(SplitRequest, fields)


def check_tasks(job_name: str, tasks: list[TaskSpec], *, allow_commands: bool = False) -> None:
    """Refuse a task that would run a command (``measure_cmd``) unless ``allow_commands``: a job
    file from someone else must not run programs on this machine without the user saying so.
    Then resolve every name of every task before anything is created or run: model, device,
    network, server, bandwidth trace, labelled accuracy data (its arrays' headers) and a split
    task's head processors; the solver settings the CLI bounds (:mod:`optimizer.bounds`); and
    the request each task becomes (objectives, solver, risk, settings). Each distinct name is
    resolved once.

    Raises
    ------
    ConfigError
        ``job <name>: <task label>: <the one-line error>`` for the first task that cannot run.
    """
    from ..bounds import check_task_settings
    from ..errors import ConfigError
    from ..graph.loader import resolve_model
    from ..hardware import load_device, load_link, load_server
    from ..hardware.bandwidth import load_trace
    from ..plan.accuracy import labelled_members

    resolvers: dict[str, Any] = {"model": resolve_model, "device": load_device, "network": load_link,
                                 "server": load_server, "trace": load_trace, "accuracy_data": labelled_members}
    seen: set[tuple[str, str]] = set()
    for t in tasks:
        if t.measure_cmd is not None and not allow_commands:
            raise ConfigError(f"job {job_name}: {t.label()}: measure_cmd would run the command {t.measure_cmd!r} on "
                              "this machine; check it and pass --allow-commands to run it")
        names = {"model": t.model, "device": t.device}
        if t.kind == "split":
            names.update(network=t.network or "", server=t.server or DEFAULT_SERVER, trace=t.bandwidth_trace or "",
                         accuracy_data=t.accuracy_data or "")
        try:
            for kind, name in names.items():
                if name and (kind, name) not in seen:
                    resolvers[kind](name)
                    seen.add((kind, name))
            for p in t.processors or ():  # a split task's head processors are the device's
                load_device(t.device).processor(p)
            check_task_settings(t.kind, t.settings)
            map_request(t) if t.kind == "map" else split_request(t)
        except DnnplanError as exc:
            raise ConfigError(f"job {job_name}: {t.label()}: {str(exc).splitlines()[0]}") from None


def execute_task(task: TaskSpec, inputs: SharedInputs) -> TaskOutcome:
    """Run one task; any error becomes a failed outcome with its one-line message."""
    t0 = time.perf_counter()
    try:
        if inputs.error:
            raise DnnplanError(inputs.error)
        plan, result = _run_search(task, inputs)
        metrics = {k: v for k, v in plan["predicted"].items() if isinstance(v, (int, float))}
        search = {"evaluations": result.evaluations, "space_size": result.space_size,
                  "explored_fraction": result.explored_fraction, "wall_time_s": result.wall_time_s}
        if task.kind == "split":
            from ..search.split_job import comparison_row, split_metrics

            search["comparison"] = comparison_row(result, len(inputs.graph))
            metrics.update(split_metrics(search["comparison"]))
        return TaskOutcome(task.task_id, "done", time.perf_counter() - t0, metrics=metrics,
                           search=search, plan=plan)
    except DnnplanError as exc:
        return TaskOutcome(task.task_id, "failed", time.perf_counter() - t0, error=str(exc).splitlines()[0])
    except Exception as exc:  # a bug must not stop the other tasks; keep the one-line cause
        first = str(exc).splitlines()[0] if str(exc) else ""
        return TaskOutcome(task.task_id, "failed", time.perf_counter() - t0,
                           error=f"internal error {type(exc).__name__}: {first}")


def _run_search(task: TaskSpec, inputs: SharedInputs) -> tuple[dict[str, Any], Any]:
    """One map or split search through the workflow, on the inputs its key shares."""
    from ..workflow import plan_pipeline, plan_split

    command = f"dnnplan batch task {task.task_id}"
    if task.kind == "map":
        host = None
        if task.measure == "host":
            from ..runtime.host_evaluator import HostPipelineMeasurer as host
        outcome = plan_pipeline(map_request(task), graph=inputs.graph, table=inputs.table, host_measurer=host,
                                command=command)
    else:
        outcome = plan_split(split_request(task), graph=inputs.graph, costs=inputs.split_costs[task.split_key],
                             command=command)
    return outcome.plan.model_dump(mode="json"), outcome.result
