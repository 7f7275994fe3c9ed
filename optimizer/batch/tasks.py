"""Task execution for batch jobs: shared inputs per key, and one search per task.

Graphs are imported once per (model, granularity); cost tables once per input key (model,
granularity, device, dtype) and split costs once per (key, network, server). Tasks only read
them. Every search goes through :mod:`optimizer.plan.make`, the recipe the CLI uses.
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

    key: tuple[str, str, str, str]
    graph: Any = None
    table: Any = None  # CostTable for map tasks
    split_costs: dict[tuple[Any, ...], Any] = field(default_factory=dict)  # by TaskSpec.split_key
    error: str | None = None


def build_inputs(key: tuple[str, str, str, str], tasks: list[TaskSpec],
                 graphs: dict[tuple[str, str], Any] | None = None) -> SharedInputs:
    """Build the inputs of ``tasks`` (all sharing ``key``); ``graphs`` caches imports by model."""
    from ..cost import build_cost_table
    from ..graph import load_graph
    from ..search.split import build_split_costs

    model, granularity, device, dtype = key
    inputs = SharedInputs(key=key)
    try:
        cache = graphs if graphs is not None else {}
        if (model, granularity) not in cache:
            cache[(model, granularity)] = load_graph(model, granularity)
        inputs.graph = cache[(model, granularity)]
        if any(t.kind == "map" for t in tasks):
            inputs.table = build_cost_table(inputs.graph, device, dtype)
        for t in tasks:
            if t.kind == "split" and t.split_key not in inputs.split_costs:
                network, server, cost_model, wire_dtypes, processors = t.split_key
                options: dict[str, Any] = {"wire_dtypes": list(wire_dtypes)} if wire_dtypes else {}
                inputs.split_costs[t.split_key] = build_split_costs(
                    inputs.graph, device, network, server, dtype=dtype, cost_model=cost_model,
                    processors=list(processors) or None, **options)
    except DnnplanError as exc:
        inputs.error = str(exc).splitlines()[0]
    return inputs


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
    """One map or split search through the same recipe as the CLI (``optimizer.plan.make``)."""
    from ..hardware.units import parse_quantity
    from ..plan.make import make_pipeline_plan, make_split_plan

    try:
        memory_limit = parse_quantity(task.memory_limit, "bytes") if task.memory_limit else None
    except ValueError as exc:
        raise DnnplanError(f"memory_limit {task.memory_limit!r}: {exc}") from None
    command = f"dnnplan batch task {task.task_id}"
    if task.kind == "map":
        outcome = make_pipeline_plan(
            inputs.graph, task.device, dtype=task.dtype, solver=task.solver or "ga", seed=task.seed,
            stages=task.stages, objectives=tuple(task.objectives or ()), memory_limit=memory_limit,
            settings=dict(task.settings), command=command, table=inputs.table)
    else:
        outcome = make_split_plan(
            inputs.graph, task.device, task.network or "", server=task.server or DEFAULT_SERVER,
            dtype=task.dtype, solver=task.solver or "nsga2", seed=task.seed, memory_limit=memory_limit,
            include_extremes=task.include_extremes, settings=dict(task.settings), command=command,
            costs=inputs.split_costs[task.split_key])
    return outcome.plan.model_dump(mode="json"), outcome.result
