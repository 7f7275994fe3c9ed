"""Search results -> Plan v1 (``pipeline_plan`` for pipeline mappings, ``split_plan`` for splits).

The plan package reads search results through their public fields (``SearchResult``,
``Candidate``) and the problem's ``settings()``; it does not re-run any search.
"""

from __future__ import annotations

import math
from typing import Any

from .schema import CrossingTensor, ModelRef, Plan, Predicted, SearchInfo, Split, model_input_shapes, new_provenance


def _jsonable(value: Any) -> Any:
    """Replace non-finite floats (JSON has no inf/nan) by None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


# ----------------------------------------------------------------------------- split plans
def split_plan(result: Any, graph: Any, *, variant: dict[str, Any] | None = None,
               inputs: dict[str, str] | None = None, command: str | None = None) -> Plan:
    """The split plan of ``result.best`` (a split :class:`~optimizer.search.SearchResult`).

    Parameters
    ----------
    result
        A split search result; ``result.settings`` carries the problem settings (device,
        network, server, dtype, granularity) and ``result.best.decision`` the split.
    graph
        The LayerGraph searched (same granularity): gives the crossing tensors' names and shapes.
    variant
        Zoo builder arguments, recorded in ``model.variant``.
    """
    best = result.best
    dec, st = best.decision, result.settings
    layer = int(dec["split"])
    wire = dec["wire_dtype"]
    tensors = [] if layer >= len(graph) else [
        CrossingTensor(name=t.name, shape=list(t.shape), dtype=wire, bytes=t.nbytes(wire))
        for t in graph.cut_tensors(layer)]
    split = Split(layer=layer, tensors=tensors, bytes=sum(t.bytes for t in tensors),
                  head_processor=dec["processor"] if layer > 0 else None,
                  head_clock_hz=dec["clock_hz"] if layer > 0 else None, wire_dtype=wire,
                  server=st.get("server") or None,
                  result="topk" if st.get("result") == "topk" and layer < len(graph) else None)
    obj = best.objectives
    predicted = Predicted(latency_s=obj["latency_s"], energy_j=obj["energy_j"],
                          memory_bytes=obj["memory_bytes"],
                          extra={k: float(v) for k, v in best.metrics.items() if k != "memory_bytes"})
    baselines = {name: _jsonable({"decision": c.decision, "objectives": c.objectives,
                                  "feasible": c.feasible})
                 for name, c in result.baselines.items()}
    search = SearchInfo(
        solver=result.solver, seed=result.seed, objectives=list(result.objectives),
        evaluations=result.evaluations, space_size=result.space_size,
        explored_fraction=result.explored_fraction, wall_time_s=result.wall_time_s,
        settings=_jsonable({**st, "space_counting": result.space_counting, "front_size": len(result.front)}),
        decision=_jsonable({**(result.decision_rule or {}), "chosen_objectives": obj}), baselines=baselines)
    model = ModelRef(name=graph.name, sha256=graph.source_sha256 or "unknown", layers=len(graph),
                     granularity=graph.granularity, dtype=st.get("dtype", "int8"),
                     source=graph.source or None, variant=dict(variant or {}),
                     input_shapes=model_input_shapes(graph))
    return Plan(kind="split", model=model, device=st.get("device", ""), network=st.get("network") or None,
                split=split, predicted=predicted, search=search,
                provenance=new_provenance(inputs, command))


# -------------------------------------------------------------------------- pipeline plans
def pipeline_plan(result: Any, problem: Any, graph: Any, *, variant: dict[str, Any] | None = None,
                  inputs: dict[str, str] | None = None, command: str | None = None) -> Plan:
    """The pipeline plan of ``result.best`` (a pipeline :class:`~optimizer.search.SearchResult`).

    Parameters
    ----------
    result
        A pipeline search result; ``result.best.decision["stages"]`` lists the used stages
        (processor, inclusive 0-based layer range) and ``result.best.metrics`` their times.
    problem
        The :class:`~optimizer.search.pipeline.PipelineProblem` searched (cost table, threads).
    graph
        The LayerGraph searched (same granularity as the cost table).
    variant
        Zoo builder arguments, recorded in ``model.variant``.
    """
    from .schema import HostStage, Stage

    best = result.best
    ct = problem.cost_table
    cpu_name = ct.processors[ct.processor_kinds.index("cpu")]
    times = best.metrics.get("stage_time_s", [])
    stages = [Stage(processor=st["processor"], first_layer=st["first_layer"], last_layer=st["last_layer"],
                    threads=problem.cpu_threads if st["processor"] == cpu_name else None, dtype=ct.dtype,
                    predicted_time_s=times[k] if k < len(times) else None)
              for k, st in enumerate(best.decision["stages"])]
    host = {"processor": cpu_name, "threads": problem.host_threads}
    pre = HostStage(**host, predicted_time_s=best.metrics.get("pre_s"))
    post = HostStage(**host, predicted_time_s=best.metrics.get("post_s"))
    obj = best.objectives
    known = ("throughput_fps", "latency_s", "energy_j", "memory_bytes", "peak_temp_c",
             "time_to_throttle_s", "sustained_fps")
    extra = {k: float(v) for k, v in obj.items() if k not in known}
    extra.update({k: float(best.metrics[k]) for k in ("bottleneck_s", "cpu_slowdown") if k in best.metrics})
    predicted = Predicted(**{k: _jsonable(float(obj[k])) for k in known if k in obj}, extra=_jsonable(extra))
    baselines = {name: _jsonable({"decision": c.decision, "objectives": c.objectives, "feasible": c.feasible})
                 for name, c in result.baselines.items()}
    decision = dict(result.decision_rule or {})
    if result.front:
        decision["front"] = [{"stages": c.decision["stages"], "objectives": c.objectives} for c in result.front]
    search = SearchInfo(
        solver=result.solver, seed=result.seed, objectives=list(result.objectives),
        evaluations=result.evaluations, space_size=result.space_size,
        explored_fraction=result.explored_fraction, wall_time_s=result.wall_time_s,
        settings=_jsonable({**result.settings, "problem": problem.get_params(),
                            "space_counting": result.space_counting, "front_size": len(result.front),
                            "history": [dict(h) for h in result.history]}),
        decision=_jsonable(decision) or None, baselines=baselines)
    model = ModelRef(name=graph.name, sha256=graph.source_sha256 or "unknown", layers=len(graph),
                     granularity=graph.granularity, dtype=ct.dtype, source=graph.source or None,
                     variant=dict(variant or {}), input_shapes=model_input_shapes(graph))
    return Plan(kind="pipeline", model=model, device=ct.device, preprocess=pre, stages=stages, postprocess=post,
                predicted=predicted, search=search, provenance=new_provenance(inputs, command))
