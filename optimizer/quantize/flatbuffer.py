"""Read and write TFLite flatbuffers through the schema's object API, with shared vectors.

The TFLite converter writes every vector once per table that owns it. For per-channel INT8
models that wastes a measurable part of the file: each convolution stores an int64 zero
point per output channel for its weights *and* again for its int32 bias, and all of them are
zero (symmetric weights, TFLite quantization spec). FlatBuffers references vectors by offset,
so identical vectors may be stored once and referenced from several tables: the file is
equally valid (the verifier only checks bounds) and every reader, the LiteRT interpreter
included, sees exactly the same model. :func:`compact` re-serialises a model that way; for
mobilenet_v2 it removes ~0.27 MB (about 7 % of the INT8 file).

:func:`merge_calibration` combines models calibrated on disjoint sample sets (TFLite's
calibrator records the absolute min/max of every tensor, so the merge is exact).

Reading and writing live in :mod:`optimizer.graph.tflite_flatbuffer` (shared with the importer
and the exporters).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph.tflite_flatbuffer import read_model, write_model


def compact(data: bytes, what: str = "model") -> bytes:
    """The same TFLite model with identical vectors shared (see the module docstring)."""
    return write_model(read_model(data, what))


def merge_calibration(models: list[bytes]) -> bytes:
    """Merge models calibrated on disjoint samples: per tensor, min of mins and max of maxes.

    All models must come from the same float model (same tensors in the same order).
    """
    if not models:
        raise ValueError("merge_calibration needs at least one model")
    merged = read_model(models[0], "calibrated model")
    for other_bytes in models[1:]:
        other = read_model(other_bytes, "calibrated model")
        for sg, osg in zip(merged.subgraphs, other.subgraphs, strict=True):
            for t, ot in zip(sg.tensors, osg.tensors, strict=True):
                q, oq = t.quantization, ot.quantization
                if oq is None or oq.min is None or oq.max is None or len(oq.min) == 0:
                    continue
                if q is None or q.min is None or q.max is None or len(q.min) == 0:
                    t.quantization = oq
                    continue
                q.min = np.minimum(np.asarray(q.min), np.asarray(oq.min))
                q.max = np.maximum(np.asarray(q.max), np.asarray(oq.max))
    return write_model(merged)


def reciprocal_sqrt_as_rsqrt(data: bytes, what: str = "model") -> tuple[bytes, int]:
    """Rewrite every integer ``DIV(1, SQRT(x))`` (optionally ``DIV(1, RESHAPE(SQRT(x)))``) of a
    quantized model as ``RSQRT(x)`` (``RESHAPE`` kept), with the ``DIV``'s output quantization;
    returns the model and the number of rewrites.

    tf2onnx writes a normalisation's ``1/sqrt(var + eps)`` as ``Sqrt`` then ``Reciprocal`` and
    onnx2tf keeps the pair, which TFLite lowers to ``SQRT`` then ``DIV`` of the constant 1. In
    INT8, a ``SQRT`` output below half its scale is the zero point, and LiteRT's integer ``DIV``
    kernel refuses a zero divisor (``div.cc: data != zero_point``): magika_standard_v3_3 fails on
    its first constant feature column. The integer ``RSQRT`` kernel (LiteRT ``elementwise.cc``)
    maps an input at the zero point to the largest output instead, and computes ``1/sqrt`` with
    one rounding, not two. The rewritten model computes the same function.
    """
    import copy

    from ..graph.tflite_flatbuffer import drop_unused_tensors, tflite_schema

    schema = tflite_schema()
    ops_enum = schema.BuiltinOperator
    model = read_model(data, what)

    def code_of(op: Any) -> int:
        c = model.operatorCodes[op.opcodeIndex]
        return int(max(c.builtinCode, c.deprecatedBuiltinCode))

    rewrites = 0
    for sg in model.subgraphs:
        ops = list(sg.operators or [])
        producer = {int(t): op for op in ops for t in (op.outputs if op.outputs is not None else [])}
        readers: dict[int, int] = {}
        for op in ops:
            for t in op.inputs if op.inputs is not None else []:
                readers[int(t)] = readers.get(int(t), 0) + 1
        graph_outputs = {int(t) for t in sg.outputs}
        removed = []
        for div in ops:
            if code_of(div) != ops_enum.DIV or len(div.inputs) != 2 or not _is_one(model, sg.tensors[div.inputs[0]]):
                continue
            opts = div.builtinOptions
            if opts is not None and getattr(opts, "fusedActivationFunction", 0):
                continue
            chain = []
            t = int(div.inputs[1])
            while (p := producer.get(t)) is not None and code_of(p) == ops_enum.RESHAPE and not chain:
                chain.append(p)
                t = int(p.inputs[0])
            sqrt = producer.get(t)
            if sqrt is None or code_of(sqrt) != ops_enum.SQRT:
                continue
            links = [int(sqrt.outputs[0]), *(int(p.outputs[0]) for p in chain)]
            if any(readers.get(x, 0) != 1 or x in graph_outputs for x in links):
                continue
            out = sg.tensors[div.outputs[0]]
            last = chain[-1] if chain else sqrt
            if list(sg.tensors[last.outputs[0]].shape) != list(out.shape) or out.type == schema.TensorType.FLOAT32:
                continue
            sqrt.opcodeIndex = opcode_index(model, schema, ops_enum.RSQRT, 2)
            for x in links:
                sg.tensors[x].quantization = copy.deepcopy(out.quantization)
            last.outputs = [int(div.outputs[0])]
            removed.append(div)
            rewrites += 1
        if removed:
            sg.operators = [op for op in ops if all(op is not r for r in removed)]
            drop_unused_tensors(model, sg)
    return (write_model(model), rewrites) if rewrites else (data, 0)


def _is_one(model: Any, tensor: Any) -> bool:
    """Whether ``tensor`` is a constant whose every (dequantized) value is 1."""
    buf = model.buffers[tensor.buffer].data if tensor.buffer < len(model.buffers) else None
    if buf is None or len(buf) == 0:
        return False
    from ..graph.tflite_flatbuffer import tflite_schema
    from ..graph.tflite_import import tflite_np_type

    names = {v: k for k, v in vars(tflite_schema().TensorType).items() if not k.startswith("_")}
    values = np.frombuffer(np.asarray(buf, np.uint8).tobytes(), tflite_np_type(names.get(tensor.type, "")))
    q = tensor.quantization
    if q is not None and q.scale is not None and len(q.scale) == 1:
        zp = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
        real = (values.astype(np.float64) - zp) * float(q.scale[0])
        return bool(np.all(np.abs(real - 1.0) <= float(q.scale[0]) / 2))
    return bool(np.all(values == 1))


def opcode_index(model: Any, schema: Any, builtin: int, version: int) -> int:
    """Index of the operator code of ``builtin`` in ``model`` (added when missing)."""
    for k, c in enumerate(model.operatorCodes):
        if max(c.builtinCode, c.deprecatedBuiltinCode) == builtin:
            c.version = max(int(c.version), version)
            return k
    code = schema.OperatorCodeT()
    code.builtinCode = builtin
    code.deprecatedBuiltinCode = min(builtin, 127)
    code.version = version
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1
