"""Read a ``.tflite`` flatbuffer: which operators compute in float after quantization.

An operator is *float* when any of its non-constant inputs or outputs is a float tensor.
QUANTIZE ops fed by a model input and DEQUANTIZE ops producing a model output are the I/O
conversions of a float-interface model. On an integer-only accelerator (NPU/DSP/EdgeTPU) every
float operator falls back to the CPU, and every switch between accelerator and CPU costs a
transfer (Park & Ha, IEEE Access 2024, docs/METHODS.md section 1); the number of contiguous CPU segments
is reported for that reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..errors import ModelFormatError

_FLOAT_TYPES = {"FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16"}
_CONVERSIONS = {"QUANTIZE", "DEQUANTIZE"}


_SHAPE_ONLY = frozenset({"SHAPE"})


@dataclass(frozen=True)
class OpInfo:
    """One operator in execution order."""

    index: int
    op: str
    output: str
    is_float: bool
    io_conversion: bool

    @property
    def is_conversion(self) -> bool:
        """A QUANTIZE/DEQUANTIZE with a float side (I/O, around float ops, or fp16 weights)."""
        return self.is_float and self.op in _CONVERSIONS


@dataclass(frozen=True)
class OpsAnalysis:
    """Operators of the primary subgraph and their numeric types."""

    ops: tuple[OpInfo, ...]
    weight_types: dict[str, int]   # constant-tensor bytes by tensor type
    per_channel_tensors: int       # constant tensors quantized with > 1 scale

    @property
    def float_ops(self) -> list[OpInfo]:
        """Float compute ops (QUANTIZE/DEQUANTIZE conversions excluded)."""
        return [o for o in self.ops if o.is_float and not o.is_conversion]

    @property
    def conversion_ops(self) -> list[OpInfo]:
        """QUANTIZE/DEQUANTIZE ops with a float side (I/O ones included)."""
        return [o for o in self.ops if o.is_conversion]

    @property
    def io_ops(self) -> list[OpInfo]:
        """QUANTIZE of a model input / DEQUANTIZE of a model output."""
        return [o for o in self.ops if o.io_conversion]

    @property
    def cpu_fallback(self) -> list[OpInfo]:
        """Ops an integer-only accelerator cannot run (float compute and float conversions)."""
        return [o for o in self.ops if o.is_float]

    @property
    def cpu_segments(self) -> int:
        """Contiguous runs of CPU-fallback ops in execution order."""
        flags = [o.is_float for o in self.ops]
        return sum(1 for i, f in enumerate(flags) if f and (i == 0 or not flags[i - 1]))

    def op_counts(self) -> dict[str, int]:
        return dict(Counter(o.op for o in self.ops))


def analyse_tflite(data: bytes, name: str = "model") -> OpsAnalysis:
    """Analyse the operators and weight types of a ``.tflite`` model given as bytes."""
    from ai_edge_litert import schema_py_generated as schema

    try:
        model = schema.Model.GetRootAs(data, 0)
        sub = model.Subgraphs(0)
    except Exception as exc:  # flatbuffers raises struct.error/IndexError on garbage
        raise ModelFormatError(f"{name}: not a TFLite flatbuffer ({exc})") from None
    op_names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}

    def is_const(t: int) -> bool:
        buf = model.Buffers(sub.Tensors(t).Buffer())
        return buf is not None and (buf.DataLength() > 0 or buf.Offset() > 1)

    def ttype(t: int) -> str:
        return type_names.get(sub.Tensors(t).Type(), "UNKNOWN")

    graph_in = set(sub.InputsAsNumpy().tolist()) if sub.InputsLength() else set()
    graph_out = set(sub.OutputsAsNumpy().tolist()) if sub.OutputsLength() else set()
    ops = []
    for i in range(sub.OperatorsLength()):
        op = sub.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        opname = op_names.get(builtin, f"BUILTIN_{builtin}")
        if opname == "CUSTOM" and code.CustomCode():
            opname = f"CUSTOM:{code.CustomCode().decode()}"
        ins = [t for t in (op.InputsAsNumpy().tolist() if op.InputsLength() else []) if t >= 0]
        outs = [t for t in (op.OutputsAsNumpy().tolist() if op.OutputsLength() else []) if t >= 0]
        # SHAPE reads only its input's dimensions: a float input does not make it float compute
        acts = ([] if opname in _SHAPE_ONLY else [t for t in ins if not is_const(t)]) + outs
        is_float = any(ttype(t) in _FLOAT_TYPES for t in acts)
        io_conv = ((opname == "QUANTIZE" and any(t in graph_in for t in ins))
                   or (opname == "DEQUANTIZE" and any(t in graph_out for t in outs)))
        out_name = sub.Tensors(outs[0]).Name().decode() if outs else ""
        ops.append(OpInfo(i, opname, out_name, is_float, io_conv))
    weights: Counter[str] = Counter()
    per_channel = 0
    for t in range(sub.TensorsLength()):
        if is_const(t):
            tensor = sub.Tensors(t)
            weights[ttype(t)] += model.Buffers(tensor.Buffer()).DataLength()
            q = tensor.Quantization()
            if q is not None and q.ScaleLength() > 1:
                per_channel += 1
    return OpsAnalysis(tuple(ops), dict(weights), per_channel)
