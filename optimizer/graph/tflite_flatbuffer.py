"""Read and write TFLite flatbuffers through the schema's object API, with shared vectors.

The leaf every layer that edits a ``.tflite`` file reads it through: the TFLite importer
(:mod:`optimizer.graph.tflite_import`, for files no interpreter can open), the quantizer
(:mod:`optimizer.quantize`: compaction, calibration merge, PReLU rewrite, float ``.tflite``
input) and the exporters (:mod:`optimizer.plan.export_files`). It imports nothing of the
project but its errors, so the graph layer does not depend on the quantizer.

The TFLite converter writes every vector once per table that owns it. :func:`write_model`
stores identical numeric vectors once and references them from every table that owns them:
FlatBuffers references vectors by offset, so the file is equally valid (the verifier only
checks bounds) and every reader, the LiteRT interpreter included, sees exactly the same model
(see :func:`optimizer.quantize.flatbuffer.compact`).

Byte buffers (``Buffer.data``) keep the 16-byte alignment the converter gives them
(``force_align: 16`` in ``schema.fbs``), which the generated Python object API drops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelFormatError

TFLITE_IDENTIFIER = b"TFL3"
BUFFER_ALIGNMENT = 16  # schema.fbs: Buffer.data (force_align: 16)


def tflite_schema() -> Any:
    """The TFLite schema's generated Python module (``ai_edge_litert.schema_py_generated``)."""
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


def read_model(data: bytes, what: str = "model") -> Any:
    """Parse TFLite flatbuffer bytes into a mutable ``ModelT`` object tree."""
    schema = tflite_schema()
    if len(data) < 8 or data[4:8] != TFLITE_IDENTIFIER:
        raise ModelFormatError(f"{what}: not a TFLite flatbuffer (no 'TFL3' identifier); "
                               "expected a .tflite file")
    try:
        model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(data, 0))
    except Exception as exc:  # flatbuffers raises struct/index errors on corrupt input
        raise ModelFormatError(f"{what}: corrupt TFLite flatbuffer ({type(exc).__name__}: {exc}); "
                               "re-export the model") from None
    if not model.subgraphs or not model.buffers:
        raise ModelFormatError(f"{what}: TFLite flatbuffer without subgraphs or buffers (truncated or "
                               "corrupt); re-export the model")
    for b in model.buffers or []:  # data appended after the flatbuffer (ai-edge-quantizer writes so)
        if getattr(b, "offset", 0) > 1:
            if b.offset + b.size > len(data):
                raise ModelFormatError(f"{what}: a buffer lies past the end of the file "
                                       f"({b.offset}+{b.size} > {len(data)} bytes); re-export the model")
            b.data = np.frombuffer(data, np.uint8, count=b.size, offset=b.offset).copy()
            b.offset, b.size = 0, 0
    return model


def _sharing_builder(initial_size: int) -> Any:
    """A ``flatbuffers.Builder`` that writes each distinct numeric vector once (byte vectors
    16-byte aligned); the flatbuffers package is imported here, on first use."""
    import flatbuffers

    class SharingBuilder(flatbuffers.Builder):
        def __init__(self, size: int) -> None:
            super().__init__(size)
            self._written: dict[tuple[str, bytes], int] = {}

        def CreateNumpyVector(self, x: np.ndarray) -> int:  # noqa: N802 (flatbuffers API)
            key = (x.dtype.str, x.tobytes())
            if key in self._written:
                return self._written[key]
            if x.dtype == np.uint8:  # Buffer.data / custom options: keep 16-byte alignment
                self.StartVector(1, x.size, BUFFER_ALIGNMENT)
                self.head -= x.size
                self.Bytes[self.head:self.head + x.size] = key[1]
                self.vectorNumElems = x.size
                offset = self.EndVector()
            else:
                offset = super().CreateNumpyVector(x)
            self._written[key] = offset
            return offset

    return SharingBuilder(initial_size)


def write_model(model: Any) -> bytes:
    """Serialise a ``ModelT`` with identical numeric vectors stored once."""
    builder = _sharing_builder(1 << 20)
    builder.Finish(model.Pack(builder), file_identifier=TFLITE_IDENTIFIER)
    return bytes(builder.Output())


def serving_signature(inputs: list[int], outputs: list[int]) -> Any:
    """A ``serving_default`` ``SignatureDefT`` of subgraph 0 naming its tensors ``in0..`` and
    ``output_0..`` (the names converted parts and signature-less files get)."""
    schema = tflite_schema()

    def tensor_map(name: str, index: int) -> Any:
        tm = schema.TensorMapT()
        tm.name, tm.tensorIndex = name.encode(), int(index)
        return tm

    sig = schema.SignatureDefT()
    sig.signatureKey = b"serving_default"
    sig.subgraphIndex = 0
    sig.inputs = [tensor_map(f"in{k}", i) for k, i in enumerate(inputs)]
    sig.outputs = [tensor_map(f"output_{k}", i) for k, i in enumerate(outputs)]
    return sig


def with_signature(data: bytes, what: str = "model") -> bytes:
    """``data`` unchanged if it has a signature, else the same model with :func:`serving_signature`
    (many published ``.tflite`` files have none; signature runners and calibrators need one)."""
    model = read_model(data, what)
    if model.signatureDefs:
        return data
    main = model.subgraphs[0]
    model.signatureDefs = [serving_signature(list(main.inputs), list(main.outputs))]
    return write_model(model)


def drop_unused_tensors(model: Any, sg: Any) -> None:
    """Remove tensors no operator or graph edge refers to (folded FP16 copies, rewritten chains) and their
    data, renumbering operators, subgraph edges and signatures in place."""
    fields = ("inputs", "outputs", "intermediates")
    used = sorted({int(t) for op in sg.operators for f in fields
                   for t in (getattr(op, f) if getattr(op, f) is not None else []) if t >= 0}
                  | {int(t) for t in sg.inputs} | {int(t) for t in sg.outputs})
    remap = {old: new for new, old in enumerate(used)}
    kept = {sg.tensors[k].buffer for k in used}  # the converter lets equal constants share a buffer
    for k, t in enumerate(sg.tensors):
        if k not in remap and t.buffer and t.buffer not in kept:
            model.buffers[t.buffer].data = None
    sg.tensors = [sg.tensors[k] for k in used]
    for op in sg.operators:
        for f in fields:
            seq = getattr(op, f)
            if seq is not None:
                setattr(op, f, [remap[int(t)] if t >= 0 else -1 for t in seq])
    sg.inputs = [remap[int(t)] for t in sg.inputs]
    sg.outputs = [remap[int(t)] for t in sg.outputs]
    index = model.subgraphs.index(sg)
    for sig in model.signatureDefs or []:
        if sig.subgraphIndex == index:
            for tm in [*(sig.inputs or []), *(sig.outputs or [])]:
                tm.tensorIndex = remap[int(tm.tensorIndex)]


def sub_model(model: Any, op_ids: list[int], inputs: list[int], outputs: list[int], name: str,
              description: str = "", keep_all_buffers: bool = False) -> Any:
    """A new ``ModelT`` whose main subgraph runs operators ``op_ids`` (indices into subgraph 0 of
    ``model``, in that order) between tensors ``inputs`` and ``outputs`` of subgraph 0, with a
    ``serving_default`` signature (:func:`serving_signature`).

    The tensors keep their types, shapes and quantization parameters, so a part of an INT8 model
    exchanges exactly the values the whole model computes. Only the buffers the part reads are
    kept and only the operator codes it uses, unless ``keep_all_buffers`` (a model with
    control-flow subgraphs: every buffer, operator code and later subgraph kept with its index).
    The objects of ``model`` are shallow-copied, never changed.
    """
    import copy

    schema = tflite_schema()
    main = model.subgraphs[0]
    used: list[int] = []
    for k in op_ids:
        op = main.operators[k]
        for seq in (op.inputs, op.outputs, op.intermediates):
            used.extend(int(t) for t in (seq if seq is not None else []) if t >= 0)
    used.extend(int(t) for t in [*inputs, *outputs])
    remap = {t: i for i, t in enumerate(dict.fromkeys(used))}
    buffers = [schema.BufferT()]
    buf_remap: dict[int, int] = {}
    tensors = []
    for t in remap:
        tensor = copy.copy(main.tensors[t])
        data = model.buffers[tensor.buffer].data if tensor.buffer < len(model.buffers) else None
        if keep_all_buffers:
            pass
        elif data is not None and len(data):
            if tensor.buffer not in buf_remap:
                buf_remap[tensor.buffer] = len(buffers)
                buffers.append(model.buffers[tensor.buffer])
            tensor.buffer = buf_remap[tensor.buffer]
        else:
            tensor.buffer = 0
        tensors.append(tensor)
    sg = schema.SubGraphT()
    sg.name = name.encode()
    sg.tensors = tensors
    sg.operators = []
    codes: dict[int, int] = {}
    for k in op_ids:
        op = copy.copy(main.operators[k])
        if not keep_all_buffers:
            op.opcodeIndex = codes.setdefault(op.opcodeIndex, len(codes))
        for field in ("inputs", "outputs", "intermediates"):
            seq = getattr(op, field)
            if seq is not None:
                setattr(op, field, [remap[int(t)] if t >= 0 else -1 for t in seq])
        sg.operators.append(op)
    sg.inputs = [remap[int(t)] for t in inputs]
    sg.outputs = [remap[int(t)] for t in outputs]
    part = schema.ModelT()
    part.version = model.version
    part.operatorCodes = model.operatorCodes if keep_all_buffers else [model.operatorCodes[c] for c in codes]
    part.description = description.encode()
    part.buffers = model.buffers if keep_all_buffers else buffers
    part.subgraphs = [sg, *model.subgraphs[1:]]
    part.signatureDefs = [serving_signature(sg.inputs, sg.outputs)]
    return part
