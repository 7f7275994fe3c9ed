"""Plans with hand-chosen boundaries (solver ``manual``), for tests, demos, benchmarks and device checks.

A pipeline gets one stage between every two consecutive boundaries; a split takes one boundary
(0..L) with the tensors crossing it (:meth:`~optimizer.graph.layergraph.LayerGraph.cut_tensors`).
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..graph.layergraph import LayerGraph
from .schema import Plan


def plan_for_boundaries(model: str, boundaries: list[int], *, kind: str = "pipeline", dtype: str = "fp32",
                        granularity: str = "op", variant: dict[str, Any] | None = None,
                        processors: list[str] | None = None, threads: int = 1, device: str = "host",
                        solver: str = "manual", input_shapes: dict[str, tuple[int, ...]] | None = None,
                        graph: LayerGraph | None = None) -> Plan:
    """A plan with hand-chosen boundaries (for tests, demos and benchmarks).

    ``boundaries`` are in the ``granularity`` view: a pipeline gets ``len(boundaries) + 1``
    stages on ``processors`` (default ``cpu0, cpu1, ...``); a split takes ``boundaries[0]`` as its
    boundary, with the crossing tensors of :meth:`LayerGraph.cut_tensors`. ``input_shapes``: of a
    model file with dynamic dims (``--input-shape``), recorded in ``model.input_shapes``.
    ``graph``: the op-view graph of ``model`` when the caller has it already (not imported again).
    The boundaries are recorded in the plan's ``search.settings.cuts``.
    """
    from ..graph import load_graph
    from .schema import CrossingTensor, ModelRef, SearchInfo, Split, Stage, model_input_shapes, new_provenance

    variant = dict(variant or {})
    if graph is None:
        graph = load_graph(model, granularity, input_shapes=input_shapes, **variant)
    else:
        graph = graph.with_granularity(granularity)
    n = len(graph)
    ref = ModelRef(name=graph.name, sha256=graph.source_sha256, layers=n, granularity=granularity,
                   dtype=dtype, source=graph.source or None, variant=variant, input_shapes=model_input_shapes(graph))
    search = SearchInfo(solver=solver, settings={"cuts": list(boundaries)})
    if kind == "pipeline":
        bounds = [0, *boundaries, n]
        if sorted(set(bounds)) != bounds:
            raise ConfigError(f"boundaries {boundaries}: expected strictly increasing boundaries inside 1..{n - 1}")
        processor_names = processors or [f"cpu{k}" for k in range(len(bounds) - 1)]
        stages = [Stage(processor=processor_names[k], first_layer=a, last_layer=b - 1, threads=threads, dtype=dtype)
                  for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        return Plan(kind="pipeline", model=ref, device=device, stages=stages, search=search,
                    provenance=new_provenance())
    if kind == "split":
        if len(boundaries) != 1 or not 0 <= boundaries[0] <= n:
            raise ConfigError(f"boundaries {boundaries}: a split takes one boundary in 0..{n}")
        wire_dtype = dtype
        tensors = [CrossingTensor(name=t.name, shape=list(t.shape), dtype=wire_dtype, bytes=t.nbytes(wire_dtype))
                   for t in graph.cut_tensors(boundaries[0])]
        split = Split(layer=boundaries[0], tensors=tensors, bytes=sum(t.bytes for t in tensors),
                      head_processor=(processors or ["cpu0"])[0], wire_dtype=wire_dtype, server="server")
        return Plan(kind="split", model=ref, device=device, split=split, search=search,
                    provenance=new_provenance())
    raise ConfigError(f"kind {kind!r}: expected pipeline or split")
