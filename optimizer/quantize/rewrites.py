"""Graph rewrites that keep a quantized ``.tflite`` model on XNNPACK's fast INT8 kernels.

LiteRT's XNNPACK delegate has no INT8 kernel for several operators real exporters produce, and
each one it leaves out splits the graph into one more partition and runs on LiteRT's builtin
kernel. Which operators XNNPACK takes is read from the interpreter
(:mod:`.delegation`), not assumed; the rewrites below replace what it refuses by operators it
runs, each computing the same function up to INT8 rounding. They edit the quantized flatbuffer
(as :mod:`.prelu` does), after either quantizer, because that is the one place every input path
(Keras, SavedModel, ONNX through onnx2tf, float ``.tflite`` through ai-edge-quantizer) passes,
the FP32 reference stays the converter's own model, and the scales of the new tensors follow
exactly from the calibrated ones (no second calibration):

* ``hard_swish``: ``HARD_SWISH(x) = x · relu6(x + 3) / 6`` as ``ADD(x, 3)`` into [0, 6],
  ``MUL(·, 1/6)`` into [0, 1] and ``MUL(x, ·)`` into the operator's own output quantization
  (Howard et al., "Searching for MobileNetV3", ICCV 2019, eq. for h-swish).
* ``clamp``: ``RELU_0_TO_1``, ``RELU``, ``RELU6``, ``RELU_N1_TO_1`` and ``MINIMUM``/``MAXIMUM``
  with a scalar constant whose output quantization range already lies inside the clamp's bounds
  (a hard sigmoid's [0, 1] at scale 1/255, zero point -128): the INT8 saturation of the producer
  does the clamp, so the producer (a convolution, fully-connected, ``ADD``/``SUB``/``MUL`` or
  ``MEAN``, read by nothing else) writes the clamp's output directly; otherwise a ``MUL`` by one
  requantizes and saturates into it (Jacob et al., CVPR 2018, §2.4: activations fused into the
  output range).
* ``scalar_add``: ``ADD``/``SUB`` of a scalar constant that XNNPACK refuses because the constant's
  scale is far from the output's (it requires input/output scale ratios in [2^-10, 2^8)): the
  constant is requantized at the output scale; one that then rounds to zero, with equal input
  and output quantization, makes the operator an identity and it is removed.
* ``resize_nearest``: ``RESIZE_NEAREST_NEIGHBOR`` by integer factors (``align_corners`` false; with
  or without half-pixel centres, which select the same source pixel for integer factors) as
  ``RESHAPE`` to ``[1, H, 1, W, 1, C]``, ``MUL`` by a ones tensor ``[1, 1, kh, 1, kw, 1]``
  (scale 1, so the copy is exact) and ``RESHAPE`` to ``[1, kh·H, kw·W, C]``.
* ``tile_broadcast``: ``TILE`` that repeats only axes of size 1 (Keras' nearest ``UpSampling2D``
  lowers to ``RESHAPE``, ``TILE``, ``RESHAPE``) as the same broadcast ``MUL`` by ones.
* ``transposed_concat``: ``TRANSPOSE(p)`` of every input of a ``CONCATENATION`` whose only reader
  is the inverse ``TRANSPOSE``: one ``CONCATENATION`` on the permuted axis (onnx2tf leaves these
  around NCHW concatenations).
* ``global_average_pool``: ``AVERAGE_POOL_2D`` whose window is the whole input as ``MEAN`` over
  height and width (XNNPACK has an INT8 ``MEAN`` but no INT8 ``AVERAGE_POOL_2D``).
* ``adaptive_pool_identity``: Keras' ``AdaptiveAveragePooling2D`` lowers each spatial axis to a
  1x1 and a 2-wide ``AVERAGE_POOL_2D``, a ``CONCATENATION`` of both and a ``GATHER`` of the bins.
  When the input already has the output's size (AlexNet's 6x6 and VGG's 7x7 at 224x224) the
  ``GATHER`` picks a contiguous range of the 1x1 pool: the 1x1 pools and such gathers are
  identities and are removed, a contiguous gather of part of an input becomes a ``SLICE``, and
  the pools and concatenations left without readers go (XNNPACK has no ``GATHER`` in any type and
  no INT8 ``AVERAGE_POOL_2D``).
* ``prelu``: INT8 ``PRELU`` (no XNNPACK INT8 kernel) from ``PReLU(x) = x + c·relu(−x)``, ``c = 1 − α``
  per channel: ``MUL(x, −c)`` with a fused ``RELU`` and ``ADD`` when every ``α ≤ 1`` (``MUL(x, c)``,
  ``SUB`` when every ``α ≥ 1``), else ``MUL(x, −1)`` with ``RELU``, ``MUL`` by ``c`` and ``ADD``; the new
  tensors' ranges follow from the input's calibrated minimum, ``c`` is quantized per tensor, the
  output keeps the ``PRELU``'s quantization (He et al., ICCV 2015, for PReLU). ``--mixed auto`` times
  it against the float ``PRELU`` (:data:`TRIED_IN_FLOAT`).

:func:`rewrite_for_xnnpack` applies them all and returns how many of each it made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from ..graph.tflite_flatbuffer import drop_unused_tensors, read_model, tflite_schema, write_model
from .flatbuffer import opcode_index

#: XNNPACK's INT8 binary operators take input/output scale ratios in [2^-10, 2^8)
#: (``xnn_create_add_nd_qs8``, XNNPACK ``src/operators/binary-elementwise-nd.c``)
MIN_SCALE_RATIO, MAX_SCALE_RATIO = 2.0 ** -10, 2.0 ** 8
#: operators whose output is requantized to any scale (their INT8 saturation can clamp)
REQUANTIZING = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL", "MEAN", "TRANSPOSE_CONV")
#: fused activation of each standalone clamp, and its bounds
CLAMPS = {"RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}
#: operators whose INT8 rewrite ``--mixed auto`` also times against the float operator: the
#: rewrite adds operators whose cost on a small feature map may exceed the float kernel's with
#: its conversions (:func:`optimizer.quantize.mixed.float_candidates`)
TRIED_IN_FLOAT = ("PRELU",)


class Graph:
    """Mutable view of subgraph 0 of a ``ModelT`` with producer/reader maps and constant helpers."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.schema = tflite_schema()
        self.sg = model.subgraphs[0]
        self.names = {v: k for k, v in vars(self.schema.BuiltinOperator).items() if not k.startswith("_")}
        self.inserted: dict[int, list[Any]] = {}  # op index -> operators to run before it
        self.removed: set[int] = set()

    def op_name(self, op: Any) -> str:
        c = self.model.operatorCodes[op.opcodeIndex]
        return self.names.get(max(c.builtinCode, c.deprecatedBuiltinCode), "CUSTOM")

    def index(self) -> None:
        """Recompute producers and readers (after a rewrite changed tensor references)."""
        self.producer: dict[int, int] = {}
        self.readers: dict[int, list[int]] = {}
        for k, op in enumerate(self.sg.operators):
            if k in self.removed:
                continue
            for t in _ints(op.outputs):
                self.producer[t] = k
            for t in _ints(op.inputs):
                self.readers.setdefault(t, []).append(k)
        self.graph_outputs = set(_ints(self.sg.outputs))

    def tensor(self, t: int) -> Any:
        return self.sg.tensors[t]

    def quant(self, t: int) -> tuple[float, int] | None:
        """Per-tensor (scale, zero point) of tensor ``t``, or None."""
        q = self.tensor(t).quantization
        if q is None or q.scale is None or len(q.scale) != 1:
            return None
        zp = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
        return float(q.scale[0]), zp

    def is_int8(self, t: int) -> bool:
        return self.tensor(t).type == self.schema.TensorType.INT8 and self.quant(t) is not None

    def constant(self, t: int) -> np.ndarray | None:
        """Values of constant tensor ``t`` (dequantized when quantized per tensor), or None."""
        from ..graph.tflite_import import tflite_np_type

        tensor = self.tensor(t)
        buf = self.model.buffers[tensor.buffer].data if tensor.buffer < len(self.model.buffers) else None
        if buf is None or not len(buf):
            return None
        types = {v: k for k, v in vars(self.schema.TensorType).items() if not k.startswith("_")}
        raw = np.frombuffer(np.asarray(buf, np.uint8).tobytes(), tflite_np_type(types.get(tensor.type, "")))
        q = self.quant(t)
        values = raw.astype(np.float64)
        if q is not None and tensor.type in (self.schema.TensorType.INT8, self.schema.TensorType.UINT8,
                                             self.schema.TensorType.INT16):
            values = (values - q[1]) * q[0]
        return values.reshape([int(s) for s in tensor.shape]) if tensor.shape is not None and len(tensor.shape) else values.reshape(())

    def single_reader(self, t: int) -> int | None:
        r = self.readers.get(t, [])
        return r[0] if len(r) == 1 and t not in self.graph_outputs else None

    def add_tensor(self, name: str, shape: list[int], type_: int, quant: tuple[float, int] | None = None,
                   data: np.ndarray | None = None) -> int:
        t = self.schema.TensorT()
        t.name, t.shape, t.type = name.encode(), [int(s) for s in shape], type_
        if quant is not None:
            t.quantization = self.schema.QuantizationParametersT()
            t.quantization.scale, t.quantization.zeroPoint = [float(quant[0])], [int(quant[1])]
        t.buffer = 0
        if data is not None:
            buf = self.schema.BufferT()
            buf.data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
            self.model.buffers.append(buf)
            t.buffer = len(self.model.buffers) - 1
        self.sg.tensors.append(t)
        return len(self.sg.tensors) - 1

    def int8_constant(self, name: str, value: float | np.ndarray, scale: float, zero: int = 0) -> int:
        values = np.asarray(value, np.float64)
        q = np.clip(np.round(values / scale) + zero, -128, 127).astype(np.int8)
        return self.add_tensor(name, list(values.shape), self.schema.TensorType.INT8, (scale, zero), q)

    def new_op(self, opname: str, inputs: list[int], outputs: list[int], options: Any = None,
               version: int = 1) -> Any:
        op = self.schema.OperatorT()
        op.opcodeIndex = opcode_index(self.model, self.schema, getattr(self.schema.BuiltinOperator, opname), version)
        op.inputs, op.outputs = list(inputs), list(outputs)
        if options is not None:
            op.builtinOptionsType = getattr(self.schema.BuiltinOptions, type(options).__name__[:-1])
            op.builtinOptions = options
        return op

    def binary_options(self, kind: str, activation: str = "NONE") -> Any:
        opts = getattr(self.schema, f"{kind}OptionsT")()
        opts.fusedActivationFunction = getattr(self.schema.ActivationFunctionType, activation)
        return opts

    def replace(self, k: int, ops: list[Any]) -> None:
        """Run ``ops`` in place of operator ``k``."""
        self.inserted.setdefault(k, []).extend(ops)
        self.removed.add(k)

    def commit(self) -> None:
        """Apply insertions and removals, drop unreferenced tensors."""
        ops = []
        for k, op in enumerate(self.sg.operators):
            ops.extend(self.inserted.get(k, []))
            if k not in self.removed:
                ops.append(op)
        self.sg.operators = ops
        self.inserted, self.removed = {}, set()
        drop_unused_tensors(self.model, self.sg)
        self.index()


def _ints(values: Any) -> list[int]:
    return [] if values is None else [int(v) for v in values if int(v) >= 0]


def _name(g: Graph, t: int, suffix: str) -> str:
    raw = g.tensor(t).name
    base = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw or "t")
    return f"{base}/{suffix}"


def hard_swish(g: Graph) -> int:
    """INT8 ``HARD_SWISH`` as ``ADD``, ``MUL``, ``MUL`` (module docstring)."""
    done = 0
    for k, op in enumerate(g.sg.operators):
        if g.op_name(op) != "HARD_SWISH" or k in g.removed:
            continue
        x, y = _ints(op.inputs)[0], _ints(op.outputs)[0]
        if not (g.is_int8(x) and g.is_int8(y)):
            continue
        shape = list(g.tensor(x).shape)
        relu6 = g.add_tensor(_name(g, y, "relu6"), shape, g.schema.TensorType.INT8, (6.0 / 255, -128))
        hsig = g.add_tensor(_name(g, y, "hard_sigmoid"), shape, g.schema.TensorType.INT8, (1.0 / 255, -128))
        three = g.int8_constant(_name(g, y, "three"), 3.0, 3.0 / 127)
        sixth = g.int8_constant(_name(g, y, "sixth"), 1.0 / 6, 1.0 / (6 * 127))
        g.replace(k, [g.new_op("ADD", [x, three], [relu6], g.binary_options("Add", "RELU6"), 2),
                      g.new_op("MUL", [relu6, sixth], [hsig], g.binary_options("Mul"), 2),
                      g.new_op("MUL", [x, hsig], [y], g.binary_options("Mul"), 2)])
        done += 1
    return done


def _clamp_bounds(g: Graph, op: Any) -> tuple[float, float] | None:
    name = g.op_name(op)
    if name in CLAMPS:
        return CLAMPS[name]
    if name in ("MINIMUM", "MAXIMUM") and len(_ints(op.inputs)) == 2:
        c = g.constant(_ints(op.inputs)[1])
        if c is None or c.size != 1:
            return None
        v = float(c.reshape(-1)[0])
        return (-np.inf, v) if name == "MINIMUM" else (v, np.inf)
    return None


def _saturates_within(g: Graph, t: int, lo: float, hi: float) -> bool:
    """Whether INT8 tensor ``t``'s representable range lies within ``[lo, hi]`` (half a step of slack)."""
    scale, zero = g.quant(t)  # type: ignore[misc]
    rmin, rmax = scale * (-128 - zero), scale * (127 - zero)
    return rmin >= lo - scale / 2 and rmax <= hi + scale / 2


def clamp(g: Graph) -> int:
    """Standalone INT8 clamps done by their producer's saturation, or by a ``MUL`` by one."""
    done = 0
    for k, op in enumerate(g.sg.operators):
        if k in g.removed:
            continue
        bounds = _clamp_bounds(g, op)
        if bounds is None:
            continue
        x, y = _ints(op.inputs)[0], _ints(op.outputs)[0]
        if not (g.is_int8(x) and g.is_int8(y)) or not _saturates_within(g, y, *bounds):
            continue
        p = g.producer.get(x)
        producer = g.sg.operators[p] if p is not None and p not in g.removed else None
        if (producer is not None and g.op_name(producer) in REQUANTIZING and g.single_reader(x) == k
                and len(_ints(producer.outputs)) == 1 and _ratio_ok(g, producer, y)):
            producer.outputs = [y]
            g.replace(k, [])
            g.index()
        else:
            one = g.int8_constant(_name(g, y, "one"), 1.0, 1.0)
            g.replace(k, [g.new_op("MUL", [x, one], [y], g.binary_options("Mul"), 2)])
        done += 1
    return done


def _ratio_ok(g: Graph, producer: Any, out: int) -> bool:
    """An ``ADD``/``SUB`` producer keeps XNNPACK's scale-ratio limits with output ``out``."""
    if g.op_name(producer) not in ("ADD", "SUB"):
        return True
    s_out = g.quant(out)[0]  # type: ignore[index]
    return all(MIN_SCALE_RATIO <= q[0] / s_out < MAX_SCALE_RATIO
               for t in _ints(producer.inputs) if (q := g.quant(t)) is not None)


def scalar_add(g: Graph) -> int:
    """``ADD``/``SUB`` of a badly scaled scalar constant: constant requantized, or the op removed."""
    done = 0
    for k, op in enumerate(g.sg.operators):
        if k in g.removed or g.op_name(op) not in ("ADD", "SUB") or len(_ints(op.inputs)) != 2:
            continue
        x, c, y = *_ints(op.inputs), _ints(op.outputs)[0]
        value = g.constant(c)
        if value is None or value.size != 1 or not (g.is_int8(x) and g.is_int8(c) and g.is_int8(y)):
            continue
        s_c, s_y = g.quant(c)[0], g.quant(y)[0]  # type: ignore[index]
        if MIN_SCALE_RATIO <= s_c / s_y < MAX_SCALE_RATIO:
            continue
        v = float(value.reshape(-1)[0])
        if abs(v) > 127 * s_y:
            continue
        act = getattr(op.builtinOptions, "fusedActivationFunction", 0)
        if round(v / s_y) == 0 and g.quant(x) == g.quant(y) and not act and y not in g.graph_outputs:
            for r in g.readers.get(y, []):
                g.sg.operators[r].inputs = [x if t == y else t for t in op_inputs(g.sg.operators[r])]
            g.replace(k, [])
            g.index()
        else:
            op.inputs = [x, g.int8_constant(_name(g, c, "requantized"), v, s_y)]
        done += 1
    return done


def op_inputs(op: Any) -> list[int]:
    return [] if op.inputs is None else [int(t) for t in op.inputs]


def resize_nearest(g: Graph) -> int:
    """``RESIZE_NEAREST_NEIGHBOR`` by integer factors as reshape, broadcast ``MUL`` by ones, reshape."""
    done = 0
    types = g.schema.TensorType
    for k, op in enumerate(g.sg.operators):
        if k in g.removed or g.op_name(op) != "RESIZE_NEAREST_NEIGHBOR":
            continue
        if getattr(op.builtinOptions, "alignCorners", False):
            continue
        x, y = _ints(op.inputs)[0], _ints(op.outputs)[0]
        sx, sy = list(g.tensor(x).shape), list(g.tensor(y).shape)
        if len(sx) != 4 or len(sy) != 4 or sx[0] != 1 or sy[1] % sx[1] or sy[2] % sx[2]:
            continue
        kh, kw = sy[1] // sx[1], sy[2] // sx[2]
        n, h, w, c = sx
        int8 = g.is_int8(x) and g.is_int8(y)
        if not int8 and g.tensor(x).type != types.FLOAT32:
            continue
        q = g.quant(x) if int8 else None
        six = g.add_tensor(_name(g, y, "rows"), [1, h, 1, w, 1, c], g.tensor(x).type, q)
        big = g.add_tensor(_name(g, y, "tiled"), [1, h, kh, w, kw, c], g.tensor(x).type, q)
        if int8:
            ones = g.int8_constant(_name(g, y, "ones"), np.ones((1, 1, kh, 1, kw, 1)), 1.0)
        else:
            ones = g.add_tensor(_name(g, y, "ones"), [1, 1, kh, 1, kw, 1], types.FLOAT32,
                                data=np.ones((1, 1, kh, 1, kw, 1), np.float32))
        shape6 = g.add_tensor(_name(g, y, "shape6"), [6], types.INT32, data=np.array([1, h, 1, w, 1, c], np.int32))
        shape4 = g.add_tensor(_name(g, y, "shape4"), [4], types.INT32, data=np.array(sy, np.int32))
        g.replace(k, [g.new_op("RESHAPE", [x, shape6], [six]),
                      g.new_op("MUL", [six, ones], [big], g.binary_options("Mul"), 2),
                      g.new_op("RESHAPE", [big, shape4], [y])])
        done += 1
    return done


def tile_broadcast(g: Graph) -> int:
    """``TILE`` that repeats only size-1 axes (Keras' nearest upsampling lowers to RESHAPE, TILE,
    RESHAPE) as a broadcast ``MUL`` by a ones tensor of the multiples' shape (scale 1: exact)."""
    done = 0
    types = g.schema.TensorType
    for k, op in enumerate(g.sg.operators):
        if k in g.removed or g.op_name(op) != "TILE" or len(_ints(op.inputs)) != 2:
            continue
        x, reps, y = *_ints(op.inputs), _ints(op.outputs)[0]
        m = g.constant(reps)
        shape = [int(d) for d in g.tensor(x).shape]
        if m is None or len(m.reshape(-1)) != len(shape) or len(shape) > 6:
            continue
        mult = [int(v) for v in m.reshape(-1)]
        if any(r > 1 and d != 1 for r, d in zip(mult, shape, strict=True)):
            continue
        int8 = g.is_int8(x) and g.is_int8(y) and g.quant(x) == g.quant(y)
        if int8:
            ones = g.int8_constant(_name(g, y, "ones"), np.ones(mult), 1.0)
        elif g.tensor(x).type == types.FLOAT32:
            ones = g.add_tensor(_name(g, y, "ones"), mult, types.FLOAT32, data=np.ones(mult, np.float32))
        else:
            continue
        g.replace(k, [g.new_op("MUL", [x, ones], [y], g.binary_options("Mul"), 2)])
        done += 1
    return done


def _perm(g: Graph, op: Any) -> list[int] | None:
    if g.op_name(op) != "TRANSPOSE" or len(_ints(op.inputs)) != 2:
        return None
    p = g.constant(_ints(op.inputs)[1])
    return None if p is None else [int(v) for v in p.reshape(-1)]


def transposed_concat(g: Graph) -> int:
    """``TRANSPOSE(p)`` on each input of a concatenation undone by one ``TRANSPOSE``: one concatenation."""
    done = 0
    for k, op in enumerate(g.sg.operators):
        if k in g.removed or g.op_name(op) != "CONCATENATION":
            continue
        out = _ints(op.outputs)[0]
        after = g.single_reader(out)
        back = _perm(g, g.sg.operators[after]) if after is not None else None
        ins = _ints(op.inputs)
        firsts = [g.producer.get(t) for t in ins]
        if back is None or any(f is None for f in firsts):
            continue
        perms = [_perm(g, g.sg.operators[f]) for f in firsts]  # type: ignore[index]
        p = perms[0]
        if p is None or any(q != p for q in perms) or [p[i] for i in back] != list(range(len(p))):
            continue
        if any(set(g.readers.get(t, [])) != {k} or t in g.graph_outputs for t in ins):
            continue
        axis = op.builtinOptions.axis % len(p)
        op.builtinOptions.axis = p[axis]
        op.inputs = [_ints(g.sg.operators[f].inputs)[0] for f in firsts]  # type: ignore[index]
        op.outputs = _ints(g.sg.operators[after].outputs)  # type: ignore[index]
        for f in set(firsts):
            g.replace(f, [])  # type: ignore[arg-type]
        g.replace(after, [])  # type: ignore[arg-type]
        g.index()
        done += 1
    return done


def global_average_pool(g: Graph) -> int:
    """``AVERAGE_POOL_2D`` over the whole input as ``MEAN`` over height and width."""
    done = 0
    for k, op in enumerate(g.sg.operators):
        if k in g.removed or g.op_name(op) != "AVERAGE_POOL_2D":
            continue
        o = op.builtinOptions
        x, y = _ints(op.inputs)[0], _ints(op.outputs)[0]
        sx = list(g.tensor(x).shape)
        if (len(sx) != 4 or o.filterHeight != sx[1] or o.filterWidth != sx[2] or o.fusedActivationFunction
                or list(g.tensor(y).shape)[1:3] != [1, 1]):
            continue
        axes = g.add_tensor(_name(g, y, "axes"), [2], g.schema.TensorType.INT32, data=np.array([1, 2], np.int32))
        opts = g.schema.ReducerOptionsT()
        opts.keepDims = True
        g.replace(k, [g.new_op("MEAN", [x, axes], [y], opts, 2)])
        done += 1
    return done


def _bypass(g: Graph, k: int, x: int, y: int) -> bool:
    """Remove operator ``k`` whose output ``y`` equals its input ``x`` (same quantization): its
    readers read ``x``. Not done when ``y`` is a graph output."""
    if y in g.graph_outputs or g.tensor(x).type != g.tensor(y).type or g.quant(x) != g.quant(y):
        return False
    for r in g.readers.get(y, []):
        g.sg.operators[r].inputs = [x if t == y else t for t in op_inputs(g.sg.operators[r])]
    g.replace(k, [])
    g.index()
    return True


def _drop_dead(g: Graph) -> None:
    """Remove operators none of whose outputs is read or a graph output, until none is left."""
    while True:
        dead = [k for k, op in enumerate(g.sg.operators) if k not in g.removed and _ints(op.outputs)
                and not any(g.readers.get(t) or t in g.graph_outputs for t in _ints(op.outputs))]
        if not dead:
            return
        for k in dead:
            g.replace(k, [])
        g.index()


def _contiguous(values: np.ndarray | None) -> tuple[int, int] | None:
    """``(start, length)`` of a constant index vector ``start, start + 1, ...``, else None."""
    if values is None or values.ndim != 1 or not values.size:
        return None
    v = values.astype(np.int64)
    return (int(v[0]), len(v)) if np.array_equal(v, np.arange(v[0], v[0] + len(v))) else None


def adaptive_pool_identity(g: Graph) -> int:
    """Identity 1x1 pools and contiguous gathers (Keras' adaptive pooling at its own size) removed or
    sliced, with the operators left unread (module docstring)."""
    done = 0
    for k, op in enumerate(g.sg.operators):
        if k in g.removed:
            continue
        name, ins, outs = g.op_name(op), _ints(op.inputs), _ints(op.outputs)
        if name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            o = op.builtinOptions
            if ((o.filterHeight, o.filterWidth, o.strideH, o.strideW) == (1, 1, 1, 1)
                    and not o.fusedActivationFunction and _bypass(g, k, ins[0], outs[0])):
                done += 1
            continue
        if name != "GATHER" or len(ins) != 2 or getattr(op.builtinOptions, "batchDims", 0):
            continue
        x, y = ins[0], outs[0]
        picked = _contiguous(g.constant(ins[1]))
        shape = [int(d) for d in g.tensor(x).shape]
        if picked is None or g.quant(x) != g.quant(y) or g.tensor(x).type != g.tensor(y).type:
            continue
        axis = op.builtinOptions.axis % len(shape)
        start, length = picked
        p = g.producer.get(x)
        if p is not None and g.op_name(g.sg.operators[p]) == "CONCATENATION" and (
                g.sg.operators[p].builtinOptions.axis % len(shape) == axis):
            offset = 0
            for t in _ints(g.sg.operators[p].inputs):
                size = int(g.tensor(t).shape[axis])
                if offset <= start and start + length <= offset + size and g.quant(t) == g.quant(y):
                    x, start, shape = t, start - offset, [int(d) for d in g.tensor(t).shape]
                    break
                offset += size
        if start == 0 and length == shape[axis]:
            done += _bypass(g, k, x, y)
            continue
        begin, size = [0] * len(shape), list(shape)
        begin[axis], size[axis] = start, length
        i32 = g.schema.TensorType.INT32
        b = g.add_tensor(_name(g, y, "begin"), [len(shape)], i32, data=np.array(begin, np.int32))
        s = g.add_tensor(_name(g, y, "size"), [len(shape)], i32, data=np.array(size, np.int32))
        g.replace(k, [g.new_op("SLICE", [x, b, s], [y], g.schema.SliceOptionsT(), 2)])
        g.index()
        done += 1
    if done:
        _drop_dead(g)
    return done


def range_quant(lo: float, hi: float) -> tuple[float, int]:
    """INT8 (scale, zero point) of ``[min(lo, 0), max(hi, 0)]``, asymmetric as TFLite's activations."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    return scale, int(np.clip(round(-128 - lo / scale), -128, 127))


def _channel_slope(g: Graph, t: int, channels: int) -> np.ndarray | None:
    """Constant slope ``t`` as one value per channel of the last axis (None if it varies elsewhere)."""
    a = g.constant(t)
    if a is None or (a.size != 1 and (a.shape[-1] != channels or a.size != channels)):
        return None
    return np.full(channels, float(a.reshape(-1)[0])) if a.size == 1 else a.reshape(-1).astype(np.float64)


def prelu(g: Graph) -> int:
    """INT8 ``PRELU`` as ``MUL`` by ``1 − α`` and ``ADD``/``SUB`` (module docstring)."""
    done = 0
    i8 = g.schema.TensorType.INT8
    for k, op in enumerate(g.sg.operators):
        if k in g.removed or g.op_name(op) != "PRELU" or len(_ints(op.inputs)) != 2:
            continue
        (x, a), y = _ints(op.inputs), _ints(op.outputs)[0]
        shape = [int(d) for d in g.tensor(x).shape]
        alpha = _channel_slope(g, a, shape[-1]) if 2 <= len(shape) <= 4 and g.is_int8(x) and g.is_int8(y) else None
        if alpha is None:
            continue
        (s_x, z_x), s_y = g.quant(x), g.quant(y)[0]  # type: ignore[misc, index]
        reach = s_x * (z_x + 128)  # -(least representable input): relu(-x) lies in [0, reach]
        c = 1.0 - alpha
        if not (MIN_SCALE_RATIO <= s_x / s_y < MAX_SCALE_RATIO) or reach == 0:
            continue
        signed = c.min() < 0 < c.max()  # c·relu(-x) in [min(c, 0)·R, max(c, 0)·R], else |c|·relu(-x) >= 0
        lo, hi = (float(c.min()) * reach, float(c.max()) * reach) if signed else (0.0, float(np.abs(c).max()) * reach)
        s_t, z_t = range_quant(lo, hi) if hi > lo else (s_y, -128)  # hi = lo: alpha = 1, t = 0
        if s_t < s_y * MIN_SCALE_RATIO:  # below the output's resolution: a coarser scale loses nothing
            s_t = s_y * MIN_SCALE_RATIO * 1.01
            z_t = int(np.clip(round(-128 - lo / s_t), -128, 127))
        t = g.add_tensor(_name(g, y, "prelu_negative_part"), shape, i8, (s_t, z_t))
        per_channel = [1] * (len(shape) - 1) + [shape[-1]]
        scale_c = float(np.abs(c).max()) / 127 or 1.0
        if signed:  # x + c·relu(-x)
            r = g.add_tensor(_name(g, y, "prelu_relu_negated"), shape, i8, (reach / 255.0, -128))
            minus_one = g.int8_constant(_name(g, y, "minus_one"), -1.0, 1.0 / 127)
            slope = g.int8_constant(_name(g, y, "one_minus_alpha"), c.reshape(per_channel), scale_c)
            ops = [g.new_op("MUL", [x, minus_one], [r], g.binary_options("Mul", "RELU"), 2),
                   g.new_op("MUL", [r, slope], [t], g.binary_options("Mul"), 2),
                   g.new_op("ADD", [x, t], [y], g.binary_options("Add"), 2)]
        else:  # x + relu(-c·x) when c >= 0, x - relu(c·x) when c <= 0
            up = c.min() >= 0
            slope = g.int8_constant(_name(g, y, "one_minus_alpha"), (-c if up else c).reshape(per_channel), scale_c)
            kind = "Add" if up else "Sub"
            ops = [g.new_op("MUL", [x, slope], [t], g.binary_options("Mul", "RELU"), 2),
                   g.new_op(kind.upper(), [x, t], [y], g.binary_options(kind), 2)]
        g.replace(k, ops)
        done += 1
    return done


REWRITES: dict[str, Callable[[Graph], int]] = {
    "hard_swish": hard_swish, "clamp": clamp, "scalar_add": scalar_add, "resize_nearest": resize_nearest,
    "tile_broadcast": tile_broadcast, "transposed_concat": transposed_concat,
    "global_average_pool": global_average_pool, "adaptive_pool_identity": adaptive_pool_identity,
    "prelu": prelu,
}


def rewrite_for_xnnpack(data: bytes, what: str = "model", only: tuple[str, ...] | None = None) -> tuple[bytes, dict[str, int]]:
    """``data`` with every rewrite of :data:`REWRITES` (or those named in ``only``) applied, and
    how many operators each rewrote; models with several subgraphs are returned unchanged."""
    model = read_model(data, what)
    if len(model.subgraphs) != 1:
        return data, {}
    g = Graph(model)
    g.index()
    counts: Counter[str] = Counter()
    for name, rule in REWRITES.items():
        if only is not None and name not in only:
            continue
        n = rule(g)
        if n:
            counts[name] += n
            g.commit()
    return (write_model(model) if counts else data), dict(counts)
