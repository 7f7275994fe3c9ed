"""TFLite importer: a ``.tflite`` flatbuffer (float, float16 or integer-quantized) → LayerGraph.

Read through the LiteRT interpreter (``ai_edge_litert``): ``_get_ops_details()`` lists the
operators of the main subgraph in execution order, ``get_tensor_details()`` their tensors.
Constant tensors (read by an operator, produced by none, not a graph input) are weights: their
element counts are the params of the first operator reading them. An operator whose inputs are
all constants (the ``DEQUANTIZE`` of float16 weights) is folded into the weights it produces.
Dynamic shapes are resolved at the model's input shapes (running it once if a dimension other
than the batch is dynamic); shapes then drop the leading batch dimension (size 1).

MACs (per sample): CONV_2D/CONV_3D: output elements × kernel volume × Cin/groups;
DEPTHWISE_CONV_2D: output elements × kh × kw; FULLY_CONNECTED: output elements × K;
BATCH_MATMUL: output elements × K; TRANSPOSE_CONV: input elements × Cout × kh × kw.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, CustomOperatorWarning, InputFileError, ModelFormatError, UnsupportedOperatorError
from ..fileio import sha256_file
from .input_shapes import InputShapes, resolve_input_shapes, shape_refused
from .layergraph import LayerGraph, LayerSpec, build_graph

_FAMILIES: dict[str, tuple[str, ...]] = {
    "conv": ("CONV_2D", "CONV_3D", "TRANSPOSE_CONV", "CONV_3D_TRANSPOSE"),
    "dwconv": ("DEPTHWISE_CONV_2D",),
    "dense": ("FULLY_CONNECTED", "BATCH_MATMUL", "EMBEDDING_LOOKUP", "LSTM",
              "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "SVDF", "RNN",
              "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN"),
    "pool": ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "MEAN", "REDUCE_MAX", "REDUCE_MIN"),
    "add": ("ADD", "ADD_N", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "SQUARED_DIFFERENCE",
            "FLOOR_DIV", "FLOOR_MOD"),
    "concat": ("CONCATENATION", "PACK"),
    "act": ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "PRELU", "LOGISTIC",
            "TANH", "HARD_SWISH", "ELU", "GELU", "SOFTMAX", "LOG_SOFTMAX"),
    "norm": ("L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION"),
    "reshape": ("RESHAPE", "TRANSPOSE", "SQUEEZE", "EXPAND_DIMS", "PAD", "PADV2", "MIRROR_PAD",
                "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "UNPACK", "TILE", "BROADCAST_TO",
                "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND",
                "REVERSE_V2"),
    "resize": ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"),
}
OP_FAMILY: dict[str, str] = {op: fam for fam, ops in _FAMILIES.items() for op in ops}
_BUILTIN_NAME = re.compile(r"[A-Z][A-Z0-9_]*")  # builtin op names; custom ops keep their own
_WEIGHTED = ("conv", "dwconv", "dense")
_DTYPES = {np.dtype(np.int8): "int8", np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32"}


def graph_from_tflite_file(path: str | os.PathLike[str], input_shapes: InputShapes | None = None) -> LayerGraph:
    """Import a ``.tflite`` file (named by its stem, identified by its SHA-256).

    ``weight_dtype`` of the result is the dtype of the conv/dense weights as stored (``int8``
    for integer-quantized and dynamic-range models, ``fp16`` for float16 weights, else ``fp32``).
    """
    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such file; give an existing .tflite model file")
    interpreter = _open(p)
    served = _apply_input_shapes(interpreter, input_shapes, str(p))
    graph = graph_from_interpreter(interpreter, p.stem, source=str(p), source_sha256=sha256_file(p))
    return dataclasses.replace(graph, served_input_shapes=served) if input_shapes else graph


def _apply_input_shapes(interpreter: Any, input_shapes: InputShapes | None, where: str) -> InputShapes | None:
    """Resize the inputs to the shapes :func:`~optimizer.graph.input_shapes.resolve_input_shapes`
    gives (``resize_tensor_input``) and run once on zeros, so every tensor has its shape there."""
    if isinstance(interpreter, FlatbufferView):
        if input_shapes:
            raise ConfigError(f"{where}: --input-shape needs LiteRT kernels for every operator (this model has "
                              "custom operators without one); convert the model at the shape you serve")
        return None
    inputs = interpreter.get_input_details()
    declared = {str(d["name"]): [int(x) if x > 0 else None for x in d.get("shape_signature", d["shape"])]
                for d in inputs}
    if not input_shapes and not any(None in dims[1:] for dims in declared.values()):
        return None  # static (or a dynamic batch only, resolved at 1 when the file was opened)
    shapes = resolve_input_shapes(input_shapes, declared, where)
    if all(list(d["shape"]) == list(shapes[str(d["name"])]) for d in inputs):
        return shapes
    from ..lazy import silenced_stderr

    try:
        with silenced_stderr():
            for d in inputs:
                interpreter.resize_tensor_input(d["index"], list(shapes[str(d["name"])]), strict=True)
            interpreter.allocate_tensors()
            for d in inputs:
                interpreter.set_tensor(d["index"], np.zeros(shapes[str(d["name"])], dtype=d["dtype"]))
            interpreter.invoke()
    except (ValueError, RuntimeError) as exc:
        raise shape_refused(where, shapes, (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]) from None
    return shapes


def _open(p: Path) -> Any:
    from ..lazy import litert_interpreter, silenced_stderr

    Interpreter = litert_interpreter()
    with open(p, "rb") as fh:
        head = fh.read(8)
    if len(head) < 8 or head[4:8] != b"TFL3":
        raise ModelFormatError(f"{p}: not a TFLite flatbuffer (file identifier {head[4:8]!r}, "
                               "expected b'TFL3'); give a model written by the TFLite converter")
    _check_tensor_references(p)
    try:
        with silenced_stderr():
            interpreter = Interpreter(model_path=str(p),
                                      experimental_op_resolver_type=_resolver_without_delegates())
    except (ValueError, RuntimeError) as exc:
        text = str(exc)
        if _unresolved_op(text):  # custom operators without a kernel here: read the flatbuffer
            return FlatbufferView(p)
        raise ModelFormatError(f"{p}: not a valid TFLite model ({text.strip().splitlines()[0][:160]}); "
                               "expected a flatbuffer written by the TFLite converter") from exc
    _resolve_dynamic_shapes(interpreter)
    return interpreter


def _check_tensor_references(p: Path) -> None:
    """Refuse a subgraph whose operators name tensors it does not have (LiteRT drops such an
    operator silently, which would import a different network)."""
    from ai_edge_litert import schema_py_generated as schema

    try:
        model = schema.Model.GetRootAs(p.read_bytes(), 0)
        for s in range(model.SubgraphsLength()):
            sg = model.Subgraphs(s)
            n = sg.TensorsLength()
            for i in range(sg.OperatorsLength()):
                op = sg.Operators(i)
                refs = [op.Inputs(k) for k in range(op.InputsLength())]
                refs += [op.Outputs(k) for k in range(op.OutputsLength())]
                for t in refs:
                    if int(t) >= n:
                        raise ModelFormatError(f"{p}: corrupt subgraph {s}: operator #{i} refers to tensor {int(t)}, "
                                               f"but the subgraph has {n} tensors; re-export the model")
    except ModelFormatError:
        raise
    except Exception as exc:  # flatbuffers raises struct/index errors on truncated input
        raise ModelFormatError(f"{p}: corrupt TFLite flatbuffer ({type(exc).__name__}); re-export the model") from None


def _resolve_dynamic_shapes(interpreter: Any) -> None:
    """Give dynamic tensors their shapes at the model's input shapes.

    A dynamic-batch model stores 1 for every -1 of its shape signatures; where a reshape's
    target is computed in the graph (``[batch * tokens, hidden]`` ahead of a transformer's
    FULLY_CONNECTED), the stored shape is ``[1, 1]`` and only running the model resolves it
    (bert_small: 64 % of its MACs). Models whose only unknown dimension is the batch are not
    run; a model that cannot run on zero inputs keeps its stored shapes.
    """
    if not any(-1 in list(d.get("shape_signature", []))[1:] for d in interpreter.get_tensor_details()):
        return
    with contextlib.suppress(ValueError, RuntimeError):
        interpreter.allocate_tensors()
        for d in interpreter.get_input_details():
            interpreter.set_tensor(d["index"], np.zeros(d["shape"], dtype=d["dtype"]))
        interpreter.invoke()


def _resolver_without_delegates() -> Any:
    """Builtin kernels only: the default XNNPACK delegate would replace operators by DELEGATE
    nodes when tensors are allocated."""
    from ai_edge_litert.interpreter import OpResolverType

    return OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES


def _unresolved_op(message: str) -> str:
    marker = "unresolved custom op: "
    low = message.lower()
    if marker in low:
        start = low.index(marker) + len(marker)
        return message[start:].split(".")[0].split()[0].strip()
    return ""


def _fold_constant_ops(ops: list[dict[str, Any]], details: dict[int, dict[str, Any]],
                       constants: set[int]) -> tuple[set[int], dict[int, np.dtype[Any]]]:
    """Fold operators computed from constants only (e.g. DEQUANTIZE of float16 weights): their
    outputs join ``constants`` (in place); returns them and the dtype of the weight they come from."""
    folded: set[int] = set()
    weight_types: dict[int, np.dtype[Any]] = {}
    for op in ops:
        ins = [int(t) for t in op["inputs"] if t >= 0]
        if ins and all(t in constants or t in folded for t in ins):
            for t in op["outputs"]:
                constants.add(int(t))
                folded.add(int(t))
                weight_types[int(t)] = np.dtype(details[ins[0]]["dtype"])
    return folded, weight_types


def graph_from_interpreter(interpreter: Any, name: str, *, source: str = "",
                           source_sha256: str = "") -> LayerGraph:
    """Import the main subgraph of a constructed LiteRT/TFLite ``Interpreter``."""
    where = source or name
    ops = interpreter._get_ops_details()
    details = {int(d["index"]): d for d in interpreter.get_tensor_details()}
    graph_inputs = [int(d["index"]) for d in interpreter.get_input_details()]
    graph_outputs = [int(d["index"]) for d in interpreter.get_output_details()]
    produced = {int(t) for op in ops for t in op["outputs"] if t >= 0}
    constants = {int(t) for op in ops for t in op["inputs"]
                 if t >= 0 and int(t) not in produced and int(t) not in graph_inputs}

    for i, op in enumerate(ops):
        op_name = str(op["op_name"])
        if op_name == "DELEGATE":
            tensor = _tensor_name(details, op["outputs"])
            raise UnsupportedOperatorError(
                f"{where}: operator #{i} (producing {tensor!r}) is a delegate node; import the model "
                "file before a delegate is applied")
    _warn_custom(ops, details, where)

    folded, weight_types = _fold_constant_ops(ops, details, constants)

    def per_sample(t: int) -> tuple[int, ...]:
        d = details[t]
        shape = [int(x) for x in d["shape"]]
        if shape and shape[0] == 1:  # the batch (shapes are resolved at batch 1; a leading
            shape = shape[1:]        # dim > 1 is batch * tokens, see _resolve_dynamic_shapes)
        return tuple(max(x, 1) for x in shape)

    def full(t: int) -> tuple[int, ...]:
        return tuple(max(int(x), 1) for x in details[t]["shape"])

    counted: set[int] = set()
    seen: set[str] = set()
    specs: list[LayerSpec] = []
    weight_dtypes: set[str] = set()
    for i, op in enumerate(ops):
        outs = [int(t) for t in op["outputs"] if t >= 0]
        if outs and all(t in folded for t in outs):
            continue
        op_name = str(op["op_name"])
        ins = [int(t) for t in op["inputs"] if t >= 0]
        params = 0
        for t in ins:
            if t in constants and t not in counted:
                counted.add(t)
                params += math.prod(full(t))
        family = OP_FAMILY.get(op_name, "other") if is_builtin(op_name) else "custom"
        if family in _WEIGHTED and len(ins) > 1 and ins[1] in constants:
            w_type = weight_types.get(ins[1], np.dtype(details[ins[1]]["dtype"]))
            weight_dtypes.add(_DTYPES.get(w_type, str(w_type)))
        label = _tensor_name(details, outs) or f"{op_name}_{i}"
        if label in seen:
            label = f"{label}#{i}"
        seen.add(label)
        out_shapes = tuple(per_sample(t) for t in outs)
        specs.append(LayerSpec(
            name=label, op=family, op_type=op_name,
            inputs=tuple(dict.fromkeys(str(t) for t in ins if t not in constants)),
            outputs=tuple(str(t) for t in outs), output_shapes=out_shapes,
            macs=_macs(op_name, [full(t) for t in ins], [per_sample(t) for t in ins],
                       tuple(full(t) for t in outs)),
            params=params,
        ))
    if not specs:
        raise ModelFormatError(f"{where}: the TFLite model has no operators to import")
    weight_dtype = "int8" if "int8" in weight_dtypes else ("fp16" if weight_dtypes == {"fp16"} else "fp32")
    return build_graph(name, specs, [(str(t), per_sample(t)) for t in graph_inputs],
                       [str(t) for t in graph_outputs], source=source or name,
                       source_sha256=source_sha256, fmt="tflite", weight_dtype=weight_dtype)


def is_builtin(op_name: str) -> bool:
    """Whether ``op_name`` (as LiteRT reports it) is a TFLite builtin operator (custom
    operators keep their registered names, e.g. ``Convolution2DTransposeBias``)."""
    return op_name != "CUSTOM" and bool(_BUILTIN_NAME.fullmatch(op_name))


def _warn_custom(ops: list[dict[str, Any]], details: dict[int, Any], where: str) -> None:
    """Warn once per custom operator type; refuse one whose outputs have no static shape (a
    dynamic dimension that running the model did not resolve keeps the stored placeholder 1)."""
    custom: dict[str, int] = {}
    for i, op in enumerate(ops):
        name = str(op["op_name"])
        if is_builtin(name):
            continue
        custom[name] = custom.get(name, 0) + 1
        for t in op["outputs"]:
            shape = [int(x) for x in details[int(t)]["shape"]]
            signature = [int(x) for x in details[int(t)].get("shape_signature", shape)]
            unresolved = any(d < 0 and x <= 1 for d, x in zip(signature[1:], shape[1:]))
            if not shape or min(shape) < 1 or unresolved:
                raise UnsupportedOperatorError(
                    f"{where}: custom operator #{i} {name!r} writes tensor "
                    f"{str(details[int(t)]['name'])!r} whose shape is unknown ({signature}); store static "
                    "output shapes in the model (convert with a fixed input shape)")
    if custom:
        listed = ", ".join(f"{k} x{v}" for k, v in sorted(custom.items()))
        warnings.warn(f"{where}: custom operators {listed} imported as CPU-only layers (cost from MACs where "
                      "recognised, else from bytes moved); export keeps each inside one part",
                      CustomOperatorWarning, stacklevel=3)


class FlatbufferView:
    """The interpreter calls the importer makes, answered from the flatbuffer itself.

    For models whose custom operators have no kernel in this LiteRT build, so no interpreter can
    be created: operators, tensors and shapes are read as stored (the schema's object API).
    """

    def __init__(self, path: Path) -> None:
        from .tflite_flatbuffer import read_model, tflite_schema

        schema = tflite_schema()

        model = read_model(path.read_bytes(), str(path))
        codes = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
        self.sg = model.subgraphs[0]
        types = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
        self.ops = []
        for op in self.sg.operators or []:
            oc = model.operatorCodes[op.opcodeIndex]
            name = (oc.customCode.decode() if oc.customCode
                    else codes.get(max(oc.builtinCode, oc.deprecatedBuiltinCode), "UNKNOWN"))
            self.ops.append({"op_name": name, "inputs": np.asarray(op.inputs if op.inputs is not None else []),
                             "outputs": np.asarray(op.outputs if op.outputs is not None else [])})
        self.tensors = []
        for i, t in enumerate(self.sg.tensors or []):
            shape = np.asarray(t.shape if t.shape is not None else [], dtype=np.int32)
            sig = np.asarray(t.shapeSignature if t.shapeSignature is not None else shape, dtype=np.int32)
            self.tensors.append({"index": i, "name": (t.name or b"").decode(), "shape": shape,
                                 "shape_signature": sig, "dtype": tflite_np_type(types.get(t.type, "FLOAT32"))})

    def _get_ops_details(self) -> list[dict[str, Any]]:
        return self.ops

    def get_tensor_details(self) -> list[dict[str, Any]]:
        return self.tensors

    def get_input_details(self) -> list[dict[str, Any]]:
        return [self.tensors[int(i)] for i in self.sg.inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        return [self.tensors[int(i)] for i in self.sg.outputs]


def tflite_np_type(name: str) -> Any:
    """numpy type of a TFLite ``TensorType`` name."""
    return {"FLOAT32": np.float32, "FLOAT16": np.float16, "INT8": np.int8, "UINT8": np.uint8,
            "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "BOOL": np.bool_}.get(name, np.float32)


def _tensor_name(details: dict[int, Any], outs: Any) -> str:
    """A readable layer name from the first output tensor (TFLite fuses names with ';')."""
    for t in outs:
        if int(t) >= 0:
            return str(details[int(t)]["name"]).split(";")[0]
    return ""


def _macs(op: str, ins_full: list[tuple[int, ...]], ins: list[tuple[int, ...]],
          outs: tuple[tuple[int, ...], ...]) -> int:
    """MACs of one op at the interpreter's batch of 1. ``outs`` are the full (concrete) output
    shapes: an op whose leading dimension merges batch and sequence (a FULLY_CONNECTED on
    [tokens, hidden]) must count every row, not drop the first one as the batch."""
    if not outs:
        return 0
    out = math.prod(outs[0])
    if op == "CONV_2D" and len(ins_full) > 1:  # filter [Cout, kh, kw, Cin/groups]
        return out * math.prod(ins_full[1][1:])
    if op == "CONV_3D" and len(ins_full) > 1:  # filter [kd, kh, kw, Cin, Cout]
        return out * math.prod(ins_full[1][:-1])
    if op == "DEPTHWISE_CONV_2D" and len(ins_full) > 1:  # filter [1, kh, kw, Cout]
        return out * math.prod(ins_full[1][1:3])
    if op == "FULLY_CONNECTED" and len(ins_full) > 1:  # weights [Nout, K]
        return out * ins_full[1][-1]
    if op == "BATCH_MATMUL" and len(ins_full) > 1:
        lhs, m = ins_full[0], outs[0][-2] if len(outs[0]) > 1 else 1
        k = lhs[-2] if len(lhs) > 1 and lhs[-1] == m and lhs[-2] != m else lhs[-1]
        return out * k
    if op == "TRANSPOSE_CONV" and len(ins_full) > 2:  # (output_shape, filter [Cout,kh,kw,Cin], x)
        return math.prod(ins[2]) * math.prod(ins_full[1][:3])
    if op == "Convolution2DTransposeBias" and len(ins_full) > 1:  # (x, filter [Cout,kh,kw,Cin], bias)
        return math.prod(ins[0]) * math.prod(ins_full[1][:3])  # MediaPipe's transposed conv + bias
    if op == "CONV_3D_TRANSPOSE" and len(ins_full) > 2:  # filter [kd, kh, kw, Cout, Cin]
        return math.prod(ins[2]) * math.prod(ins_full[1][:-1])
    return 0



def operator_macs(data: bytes) -> list[int]:
    """MACs of every operator of a ``.tflite`` model's main subgraph, by operator index (the
    counting rules of the module docstring; 0 for operators without weights)."""
    from ..lazy import litert_interpreter, silenced_stderr

    with silenced_stderr():  # not allocated: the stored shapes are enough, and a custom operator only
        # a delegate implements has no builtin kernel to prepare
        interp = litert_interpreter()(model_content=data, experimental_op_resolver_type=_resolver_without_delegates())
    details = {int(d["index"]): d for d in interp.get_tensor_details()}

    def full(t: int) -> tuple[int, ...]:
        return tuple(max(int(x), 1) for x in details[t]["shape"])

    out = []
    for op in interp._get_ops_details():
        ins = [int(t) for t in op["inputs"] if t >= 0]
        outs = tuple(full(int(t)) for t in op["outputs"] if t >= 0)
        out.append(_macs(str(op["op_name"]), [full(t) for t in ins], [full(t)[1:] for t in ins], outs))
    return out
