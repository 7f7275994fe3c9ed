"""INT8 parts keep every runtime kernel whole: a plan boundary inside one moves to its end.

TFLite folds a batch norm into the convolution before it and fuses a ReLU/ReLU6 into it
(:attr:`~optimizer.graph.layergraph.LayerGraph.kernel_anchors`); the single-file INT8 model rounds
once, at the kernel's output. A part that ends inside the kernel rounds the tensor between
(the convolution's raw output, or its pre-activation) at a scale of its own, and the next part
rounds again: on MobileNetV2 at 96x96, a split between ``block_8_depthwise_BN`` and its ReLU6
agreed with the single file on 75 % of frames (SQNR 19 dB). :func:`whole_kernels` moves such a
boundary forward to the kernel's end, so the earlier part runs the whole kernel and the parts
compute what the single file computes; the caller prints what moved.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import ModelFormatError
from ..graph.layergraph import LayerGraph

if TYPE_CHECKING:
    from .parts import PartRange


def whole_kernels(ops: LayerGraph, parts: list[PartRange],
                  layer_starts: list[int]) -> tuple[list[PartRange], list[str]]:
    """``parts`` (operator ranges of the op view ``ops``, in order) with every boundary between
    two consecutive parts that lies inside a kernel moved to the kernel's end, and one line per
    moved boundary. ``layer_starts``: the first op of every plan-view layer, and the op count
    (:func:`~optimizer.plan.parts.op_boundaries`), to keep the parts' layer ranges in step.

    Raises
    ------
    ModelFormatError
        A part would be left empty: all its operators belong to the previous part's kernel.
    """
    anchors = ops.kernel_anchors
    n = len(ops)
    out = list(parts)
    lines = []

    def layer_of(op: int) -> int:
        return bisect_right(layer_starts, op) - 1

    for k in range(1, len(out)):
        b = out[k].first_op
        if out[k - 1].end_op != b:
            continue
        end = b
        while 0 < end < n and anchors[end] < end:
            end += 1
        if end == b:
            continue
        kernel = ops.layers[int(anchors[b])].name
        if end >= out[k].end_op:
            raise ModelFormatError(f"plan: {out[k].name} (ops {b}-{out[k].end_op - 1}) holds only operators fused into "
                                   f"the kernel of {kernel!r} in {out[k - 1].name}; an INT8 kernel cannot be divided: "
                                   "move the boundary (map/split with --granularity kernel place boundaries only between kernels)")
        moved = [ops.layers[i].name for i in range(b, end)]
        out[k - 1] = replace(out[k - 1], end_op=end, last_layer=layer_of(end - 1))
        out[k] = replace(out[k], first_op=end, first_layer=layer_of(end))
        lines.append(f"{out[k].name} started at {moved[0]!r}, inside the kernel of {kernel!r}: at INT8 the kernel stays "
                     f"whole in {out[k - 1].name} ({', '.join(moved)} run there), so the parts compute what the "
                     "single file computes")
    return out, lines
