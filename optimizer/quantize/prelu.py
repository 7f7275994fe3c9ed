"""INT8 PReLU in a model quantized by ai-edge-quantizer.

The quantizer (0.10) has no PRELU rule: a statically quantized model keeps every PReLU in float
between a ``DEQUANTIZE`` of its INT8 input and a ``QUANTIZE`` of its output, so an INT8-only
accelerator falls back to the CPU at each one (mediapipe's landmark models have 13–53). TFLite's
builtin PRELU has an INT8 kernel (``tensorflow/lite/kernels/prelu.cc``: INT8 input, output and
slope, output rescaled by ``s_in/s_out`` on the positive side and ``s_in·s_alpha/s_out`` on the
negative side), which is what the TFLite converter emits for PReLU in full-integer PTQ (Jacob et
al., CVPR 2018, §2; docs/METHODS.md section 1).

:func:`integer_prelu` rewrites each ``DEQUANTIZE → PRELU → QUANTIZE`` chain into one INT8 PRELU:
input = the ``DEQUANTIZE``'s INT8 input (its calibrated scale), output = the ``QUANTIZE``'s INT8
output (the scale calibrated on the float PReLU's output), slope quantized to INT8 per tensor,
asymmetric over ``[min(α, 0), max(α, 0)]`` as the converter does. Chains whose float tensors are
also read elsewhere (or are model outputs) are left as they are. XNNPACK has no INT8 PRELU kernel;
:func:`.rewrites.prelu` then turns the INT8 PRELU into operators it runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph.tflite_flatbuffer import drop_unused_tensors, read_model, tflite_schema, write_model


def quantize_slope(alpha: np.ndarray) -> tuple[np.ndarray, float, int]:
    """INT8 slope, scale and zero point: asymmetric per tensor over ``[min(α,0), max(α,0)]``."""
    from .rewrites import range_quant

    scale, zero = range_quant(float(alpha.min()), float(alpha.max()))
    q = np.clip(np.round(alpha / scale) + zero, -128, 127).astype(np.int8)
    return q, scale, zero


def integer_prelu(data: bytes, what: str = "model", keep_float: frozenset[str] = frozenset()) -> tuple[bytes, int]:
    """The model with its float PReLU chains made INT8 (see the module doc) and how many were;
    chains whose PRELU or QUANTIZE output is named in ``keep_float`` stay float (mixed precision)."""
    schema = tflite_schema()
    model = read_model(data, what)
    ops = schema.BuiltinOperator
    code_of = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    done = 0
    for sg in model.subgraphs:
        producer = {int(t): k for k, op in enumerate(sg.operators) for t in op.outputs}
        readers: dict[int, list[int]] = {}
        for k, op in enumerate(sg.operators):
            for t in op.inputs:
                readers.setdefault(int(t), []).append(k)
        outputs = {int(t) for t in sg.outputs}
        drop: set[int] = set()
        for k, op in enumerate(sg.operators):
            if code_of[op.opcodeIndex] != ops.PRELU:
                continue
            chain = _chain(model, sg, k, producer, readers, outputs, code_of, schema)
            if chain is None or _named(sg, [op.outputs[0], sg.operators[chain[1]].outputs[0]]) & keep_float:
                continue
            deq, quant, alpha = chain
            op.inputs = [sg.operators[deq].inputs[0], _int8_slope(model, sg, alpha, schema)]
            op.outputs = list(sg.operators[quant].outputs)
            drop |= {deq, quant}
            done += 1
        if drop:
            sg.operators = [op for k, op in enumerate(sg.operators) if k not in drop]
            drop_unused_tensors(model, sg)
    return (write_model(model) if done else data), done


def _named(sg: Any, tensors: list[int]) -> set[str]:
    names = (sg.tensors[int(t)].name for t in tensors)
    return {n.decode(errors="replace") if isinstance(n, bytes) else str(n) for n in names}


def _chain(model: Any, sg: Any, k: int, producer: dict[int, int], readers: dict[int, list[int]],
           outputs: set[int], code_of: list[int], schema: Any) -> tuple[int, int, int] | None:
    """``(dequantize op, quantize op, slope tensor)`` when PRELU ``k`` sits in a rewritable chain."""
    ops, types = schema.BuiltinOperator, schema.TensorType
    op = sg.operators[k]
    x, alpha, y = int(op.inputs[0]), int(op.inputs[1]), int(op.outputs[0])
    deq, quant = producer.get(x), readers.get(y, [])
    if deq is None or code_of[sg.operators[deq].opcodeIndex] != ops.DEQUANTIZE or len(quant) != 1:
        return None
    if code_of[sg.operators[quant[0]].opcodeIndex] != ops.QUANTIZE or x in outputs or y in outputs:
        return None
    src, dst = sg.tensors[int(sg.operators[deq].inputs[0])], sg.tensors[int(sg.operators[quant[0]].outputs[0])]
    slope = sg.tensors[alpha]
    data = model.buffers[slope.buffer].data if slope.buffer else None
    if (src.type != types.INT8 or dst.type != types.INT8 or readers.get(x) != [k]
            or slope.type != types.FLOAT32 or data is None or not len(data)):
        return None
    return deq, quant[0], alpha


def _int8_slope(model: Any, sg: Any, alpha: int, schema: Any) -> int:
    """Append an INT8 copy of float slope tensor ``alpha``; returns its index."""
    src = sg.tensors[alpha]
    values = np.frombuffer(np.asarray(model.buffers[src.buffer].data, np.uint8).tobytes(), np.float32)
    q, scale, zero = quantize_slope(values)
    buf = schema.BufferT()
    buf.data = q.view(np.uint8)
    model.buffers.append(buf)
    t = schema.TensorT()
    t.shape, t.type, t.buffer = list(src.shape), schema.TensorType.INT8, len(model.buffers) - 1
    t.name = (src.name or b"alpha") + b"/int8"
    t.quantization = schema.QuantizationParametersT()
    t.quantization.scale, t.quantization.zeroPoint = [scale], [zero]
    sg.tensors.append(t)
    return len(sg.tensors) - 1
