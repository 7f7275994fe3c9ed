"""Operators that move INT8 values without arithmetic keep one quantization from input to output.

TFLite's INT8 kernels for padding, reshaping, slicing, gathering and max pooling copy quantized
values; their input and output must share scale and zero point, which the converter ensures
(the ``SameOperandsAndResultsScale`` trait of the TFLite dialect,
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/mlir/lite/ir/tfl_ops.td)
and the XNNPACK delegate checks (``failed to delegate PAD node``). A part aligned to the single-file
INT8 model takes each tensor's parameters from that model; where the single file fused such an
operator away (a ``PAD`` folded into the next convolution), the part's input and output of it
come from different tensors and differ in the last float bits. :func:`unify_same_scale` restores
the trait.
"""

from __future__ import annotations

from typing import Any

#: builtin operators whose INT8 output must carry their first input's quantization
SAME_SCALE_OPS = ("PAD", "PADV2", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "MAX_POOL_2D", "GATHER",
                  "SLICE", "STRIDED_SLICE", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "BATCH_TO_SPACE_ND",
                  "SPACE_TO_BATCH_ND", "SPLIT", "SPLIT_V", "BROADCAST_TO", "TILE")


def _per_tensor(q: Any) -> bool:
    return q is not None and q.scale is not None and len(q.scale) == 1 and q.zeroPoint is not None


def unify_same_scale(model: Any) -> int:
    """Give every output of a :data:`SAME_SCALE_OPS` operator of ``model``'s main subgraph (a
    TFLite ``ModelT``) its first input's per-tensor quantization, in operator order (so chains of
    them agree); returns how many tensors changed."""
    from ..graph.tflite_flatbuffer import tflite_schema

    ops = tflite_schema().BuiltinOperator
    codes = {getattr(ops, name) for name in SAME_SCALE_OPS}
    sg = model.subgraphs[0]
    changed = 0
    for op in sg.operators or []:
        code = model.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) not in codes or op.inputs is None or not len(op.inputs):
            continue
        src = sg.tensors[op.inputs[0]]
        if not _per_tensor(src.quantization):
            continue
        for oi in op.outputs if op.outputs is not None else []:
            out = sg.tensors[oi]
            q = out.quantization
            if out.type != src.type or not _per_tensor(q):
                continue
            if list(q.scale) != list(src.quantization.scale) or list(q.zeroPoint) != list(src.quantization.zeroPoint):
                q.scale, q.zeroPoint = list(src.quantization.scale), list(src.quantization.zeroPoint)
                changed += 1
    return changed
