"""The parts of a plan: which operators each exported sub-model runs, and which tensors it exchanges.

A pipeline stage, a split's head or its tail becomes one part: a range of operators of the op-view
:class:`~optimizer.graph.layergraph.LayerGraph` between two boundaries of the plan's view
(:func:`op_boundaries` maps plan-view boundaries 0..L onto the op view). Every tensor crossing a
boundary, not only the previous layer's output, is an output of the part that produces it and an
input of each later part that reads it (:func:`part_io`, the DAG cut of
:meth:`~optimizer.graph.layergraph.LayerGraph.cut_tensors`), so boundaries inside residual blocks work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import SchemaError
from ..graph.layergraph import LayerGraph
from .schema import Plan


@dataclass(frozen=True)
class PartRange:
    """One part of a plan as operator ranges of the op-view graph."""

    name: str
    role: str  # stage | head | tail
    first_layer: int
    last_layer: int
    first_op: int
    end_op: int  # exclusive
    processor: str
    threads: int
    dtype: str
    location: str  # device | server


def op_boundaries(plan_graph: LayerGraph) -> list[int]:
    """Op-view boundary of every plan-view boundary 0..L (block view: via ``layer.members``)."""
    sizes = [len(layer.members) or 1 for layer in plan_graph.layers]
    return [0, *np.cumsum(sizes).tolist()]


def plan_parts(plan: Plan, plan_graph: LayerGraph) -> list[PartRange]:
    """The executable parts of ``plan`` (empty head or tail of a split are omitted)."""
    if len(plan_graph) != plan.model.layers:
        raise SchemaError(f"plan: field model.layers: {plan.model.layers} does not match the "
                          f"{len(plan_graph)} {plan_graph.granularity} layers of {plan.model.name}; "
                          "the plan was made for another model or variant")
    op_bounds = op_boundaries(plan_graph)
    n = len(plan_graph)
    parts: list[PartRange] = []
    if plan.kind in ("pipeline", "joint"):
        for k, stage in enumerate(plan.stages or []):
            parts.append(PartRange(f"stage{k}", "stage", stage.first_layer, stage.last_layer,
                                   op_bounds[stage.first_layer], op_bounds[stage.last_layer + 1], stage.processor,
                                   stage.threads or 1, stage.dtype, "device"))
    split = plan.split
    if plan.kind == "split" and split is not None and split.layer > 0:
        parts.append(PartRange("head", "head", 0, split.layer - 1, 0, op_bounds[split.layer],
                               split.head_processor or "cpu", 1, plan.model.dtype, "device"))
    if plan.kind in ("split", "joint") and split is not None and split.layer < n:
        parts.append(PartRange("tail", "tail", split.layer, n - 1, op_bounds[split.layer], op_bounds[n],
                               split.server or "server", 1, plan.model.dtype, "server"))
    if not parts:
        raise SchemaError("plan: nothing to export (no stages and an empty split)")
    return parts


def kernel_splits(plan_graph: LayerGraph, parts: list[PartRange]) -> list[str]:
    """One line per part that starts inside a runtime kernel: its first op fuses into the
    previous part's last kernel (a batch-norm or activation cut off its convolution,
    :attr:`~optimizer.graph.layergraph.LayerGraph.kernel_anchors`). The runtime cannot fuse
    across parts, so the part pays a kernel and an INT8 rounding the single-file model does not."""
    ops = plan_graph.op_view or plan_graph
    anchors = ops.kernel_anchors
    lines = []
    for part in parts:
        if 0 < part.first_op < len(ops) and anchors[part.first_op] < part.first_op:
            first, kernel = ops.layers[part.first_op], ops.layers[int(anchors[part.first_op])]
            lines.append(f"{part.name} starts at {first.name!r} ({first.op}), which runs fused in the kernel of "
                         f"{kernel.name!r} before the boundary; the parts will not compute exactly what the single "
                         "model computes (map/split with --granularity kernel place boundaries only between kernels)")
    return lines


def kernel_aware_parts(op_graph: LayerGraph, plan_graph: LayerGraph, parts: list[PartRange],
                       note: Callable[[str], None] | None) -> list[PartRange]:
    """``parts`` of a Keras export: with INT8 parts, every kernel kept whole
    (:func:`~optimizer.plan.kernel_cuts.whole_kernels`); float parts may divide a kernel
    (:func:`kernel_splits` says where). What moved or divides is passed to ``note``."""
    from .kernel_cuts import whole_kernels

    if any(p.dtype == "int8" for p in parts):
        parts, lines = whole_kernels(op_graph, parts, op_boundaries(plan_graph))
    else:
        lines = kernel_splits(plan_graph, parts)
    for line in lines if note else ():
        note(line)
    return parts


def part_io(graph: LayerGraph, first_op: int, end_op: int) -> tuple[list[str], list[str]]:
    """Tensor ids a part reads from earlier parts and produces for later parts (the DAG cut of
    :meth:`~optimizer.graph.layergraph.LayerGraph.cut_tensors` at both of its boundaries)."""
    n = len(graph)
    ins, outs = [], []
    for t in graph.tensors.values():
        inside = [c for c in t.consumers if first_op <= c < end_op]
        if t.producer < first_op and inside:
            ins.append(t)
        if first_op <= t.producer < end_op and any(c >= end_op or c == n for c in t.consumers):
            outs.append(t)
    key = lambda t: (t.producer, t.name)  # noqa: E731
    return [t.name for t in sorted(ins, key=key)], [t.name for t in sorted(outs, key=key)]
