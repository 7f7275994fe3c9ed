"""Single-kernel probe models, written directly as TFLite flatbuffers and ONNX protobufs.

A probe is the smallest model that runs one kernel of a given configuration
(:class:`~optimizer.graph.kernel_config.KernelConfig`) the way a converted network runs it:
a convolution with its activation fused (nn-Meter's ``conv-bn-relu``, whose batch-norm the
converter folds; Zhang et al., MobiSys 2021), a depthwise convolution, a fully connected layer,
a pooling, element-wise, layout or resize operator, at FP32 or INT8.

Writing the files directly takes milliseconds per probe, where building a Keras model and
running the TFLite converter (with calibration for INT8) takes seconds; thousands of probes are
built per device. TFLite probes are assembled through the schema's object API
(:mod:`optimizer.graph.tflite_flatbuffer`) with the operators, options and quantization the
TFLite converter writes for the same Keras layer (per-channel symmetric INT8 weights, INT32
biases at ``input scale x weight scale``, fixed output scales for the logistic, tanh and softmax
kernels as TFLite's INT8 kernels require). ONNX probes are ``onnx.helper`` graphs in NCHW, the
operators tf2onnx writes (``MatMul`` + ``Add`` for dense layers, ``Clip`` for ReLU6); INT8 ONNX
probes are QDQ models (``QuantizeLinear``/``DequantizeLinear`` around each operator, as
onnxruntime's static quantizer writes them; onnxruntime fuses them into ``QLinear*`` kernels).

Every builder is seeded: the same configuration, dtype and seed give the same bytes.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..graph.kernel_config import BINARY_KINDS, KernelConfig

#: kinds a probe can be built for (both formats, FP32 and INT8)
PROBE_KINDS: tuple[str, ...] = (
    "conv", "dwconv", "conv_transpose", "fc", "bmm", "max_pool", "avg_pool", "global_avg_pool",
    "global_max_pool", "add", "mul", "sub", "maximum", "relu", "relu6", "leaky_relu", "prelu", "sigmoid",
    "tanh", "hard_swish", "softmax", "batch_norm", "layer_norm", "concat", "pad", "transpose",
    "slice", "gather", "resize_bilinear", "resize_nearest", "depth_to_space",
)
FORMATS = ("tflite", "onnx")
ACT_SCALE = 0.05  # INT8 activation scale of a probe (values in about [-6.4, 6.35])


def probe_model(config: KernelConfig, fmt: str, dtype: str, seed: int = 0) -> bytes:
    """The serialized probe of ``config`` in ``fmt`` (``tflite`` | ``onnx``) at ``dtype``
    (``fp32`` | ``int8``).

    Raises
    ------
    ConfigError
        A kind without a probe builder (:data:`PROBE_KINDS`), or an unknown format or dtype.
    """
    if config.kind not in PROBE_KINDS:
        raise ConfigError(f"no probe builder for kernel kind {config.kind!r}; probes exist for "
                          f"{', '.join(PROBE_KINDS)}")
    if dtype not in ("fp32", "int8"):
        raise ConfigError(f"probes are built at fp32 or int8, not {dtype!r}")
    rng = np.random.default_rng([seed, zlib.crc32(repr(config).encode())])
    if fmt == "tflite":
        return _tflite(config, dtype, rng)
    if fmt == "onnx":
        return _onnx(config, dtype, rng)
    raise ConfigError(f"unknown probe format {fmt!r}; expected {' or '.join(FORMATS)}")


# ----------------------------------------------------------------------------------- TFLite

class _Tflite:
    """A one-subgraph TFLite model under construction (object API of the schema)."""

    def __init__(self, dtype: str, rng: np.random.Generator) -> None:
        from ..graph.tflite_flatbuffer import tflite_schema

        self.s = tflite_schema()
        self.int8 = dtype == "int8"
        self.rng = rng
        self.tensors: list[Any] = []
        self.buffers: list[Any] = [self.s.BufferT()]
        self.ops: list[Any] = []
        self.codes: list[int] = []

    def _quant(self, scale: float | np.ndarray, zero: int | np.ndarray = 0, dim: int = 0) -> Any:
        q = self.s.QuantizationParametersT()
        q.scale = [float(v) for v in np.atleast_1d(scale)]
        q.zeroPoint = [int(v) for v in np.atleast_1d(zero)] * (1 if np.ndim(zero) else len(q.scale))
        q.quantizedDimension = dim
        return q

    def tensor(self, shape: tuple[int, ...], *, data: np.ndarray | None = None, ttype: int | None = None,
               quant: Any = None) -> int:
        t = self.s.TensorT()
        t.shape = [int(d) for d in shape]
        t.type = ttype if ttype is not None else (self.s.TensorType.INT8 if self.int8 else self.s.TensorType.FLOAT32)
        t.name = f"t{len(self.tensors)}"
        if quant is None and self.int8 and t.type == self.s.TensorType.INT8:
            quant = self._quant(ACT_SCALE)
        t.quantization = quant
        if data is not None:
            b = self.s.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        return len(self.tensors) - 1

    def act(self, shape: tuple[int, ...], scale: float = ACT_SCALE, zero: int = 0) -> int:
        """An activation tensor (INT8 with ``scale``/``zero`` in an INT8 probe)."""
        return self.tensor(shape, quant=self._quant(scale, zero) if self.int8 else None)

    def const(self, values: np.ndarray, ttype: int | None = None) -> int:
        """A constant tensor of exactly ``values``' dtype (int32 shapes, axes, paddings)."""
        types = {np.dtype(np.int32): self.s.TensorType.INT32, np.dtype(np.int64): self.s.TensorType.INT64,
                 np.dtype(np.float32): self.s.TensorType.FLOAT32}
        return self.tensor(values.shape, data=values, ttype=ttype if ttype is not None else types[values.dtype])

    def weights(self, shape: tuple[int, ...], channel_dim: int) -> tuple[int, np.ndarray]:
        """Weights of ``shape`` (per-channel symmetric INT8 along ``channel_dim`` in an INT8 probe);
        returns the tensor and its per-channel scales (ones at FP32)."""
        fan_in = max(math.prod(shape) // max(shape[channel_dim], 1), 1)
        w = (self.rng.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32)
        if not self.int8:
            return self.tensor(shape, data=w, ttype=self.s.TensorType.FLOAT32), np.ones(shape[channel_dim])
        axes = tuple(i for i in range(len(shape)) if i != channel_dim)
        scale = np.maximum(np.abs(w).max(axis=axes), 1e-6) / 127.0
        q = np.clip(np.round(w / np.expand_dims(scale, axes)), -127, 127).astype(np.int8)
        zero = np.zeros(len(scale), dtype=np.int64)
        return self.tensor(shape, data=q, ttype=self.s.TensorType.INT8,
                           quant=self._quant(scale, zero, channel_dim)), scale

    def bias(self, n: int, w_scale: np.ndarray, in_scale: float = ACT_SCALE) -> int:
        if not self.int8:
            return self.tensor((n,), data=(0.01 * self.rng.standard_normal(n)).astype(np.float32),
                               ttype=self.s.TensorType.FLOAT32)
        scale = in_scale * w_scale
        b = np.zeros(n, dtype=np.int32)
        return self.tensor((n,), data=b, ttype=self.s.TensorType.INT32,
                           quant=self._quant(scale, np.zeros(n, dtype=np.int64)))

    def op(self, name: str, inputs: list[int], outputs: list[int], options: str | None = None,
           **values: Any) -> None:
        code = getattr(self.s.BuiltinOperator, name)
        if code not in self.codes:
            self.codes.append(code)
        o = self.s.OperatorT()
        o.opcodeIndex = self.codes.index(code)
        o.inputs, o.outputs = list(inputs), list(outputs)
        if options is not None:
            opts = getattr(self.s, f"{options}T")()
            for k, v in values.items():
                setattr(opts, k, v)
            o.builtinOptionsType = getattr(self.s.BuiltinOptions, options)
            o.builtinOptions = opts
        self.ops.append(o)

    def finish(self, inputs: list[int], outputs: list[int]) -> bytes:
        from ..graph.tflite_flatbuffer import write_model

        m = self.s.ModelT()
        m.version = 3
        m.description = "dnnplan kernel probe"
        codes = []
        for c in self.codes:
            oc = self.s.OperatorCodeT()
            oc.builtinCode = c
            oc.deprecatedBuiltinCode = min(c, 127)
            oc.version = 1
            codes.append(oc)
        m.operatorCodes = codes
        sg = self.s.SubGraphT()
        sg.tensors, sg.inputs, sg.outputs, sg.operators = self.tensors, inputs, outputs, self.ops
        sg.name = "main"
        m.subgraphs = [sg]
        m.buffers = self.buffers
        return bytes(write_model(m))


def _nhwc(h: int, w: int, c: int) -> tuple[int, int, int, int]:
    return (1, h, w, c)


def _tflite(cfg: KernelConfig, dtype: str, rng: np.random.Generator) -> bytes:
    b = _Tflite(dtype, rng)
    s = b.s
    relu = s.ActivationFunctionType.RELU
    same = s.Padding.SAME
    kind = cfg.kind
    x = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in))
    ins = [x]
    if kind == "conv":
        w, ws = b.weights((cfg.c_out, cfg.k, cfg.k, cfg.c_in), 0)
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        b.op("CONV_2D", [x, w, b.bias(cfg.c_out, ws)], [y], "Conv2DOptions", padding=same,
             strideW=cfg.stride, strideH=cfg.stride, fusedActivationFunction=relu)
    elif kind == "dwconv":
        w, ws = b.weights((1, cfg.k, cfg.k, cfg.c_in), 3)
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_in))
        b.op("DEPTHWISE_CONV_2D", [x, w, b.bias(cfg.c_in, ws)], [y], "DepthwiseConv2DOptions", padding=same,
             strideW=cfg.stride, strideH=cfg.stride, depthMultiplier=1, fusedActivationFunction=relu)
    elif kind == "conv_transpose":
        w, ws = b.weights((cfg.c_out, cfg.k, cfg.k, cfg.c_in), 0)
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        shape = b.const(np.array(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out), np.int32))
        b.op("TRANSPOSE_CONV", [shape, w, x, b.bias(cfg.c_out, ws)], [y], "TransposeConvOptions", padding=same,
             strideW=cfg.stride, strideH=cfg.stride)
    elif kind == "fc":
        x = b.act((cfg.rows, cfg.c_in))
        ins = [x]
        w, ws = b.weights((cfg.c_out, cfg.c_in), 0)
        if b.int8:  # the converter quantizes fully connected weights per tensor
            w, ws = _per_tensor(b, cfg.c_out, cfg.c_in)
        y = b.act((cfg.rows, cfg.c_out))
        b.op("FULLY_CONNECTED", [x, w, b.bias(cfg.c_out, np.full(cfg.c_out, ws[0]))], [y],
             "FullyConnectedOptions", fusedActivationFunction=relu if cfg.rows == 1 else 0, keepNumDims=False)
    elif kind == "bmm":
        x = b.act((cfg.h_in, cfg.rows, cfg.c_in))
        x2 = b.act((cfg.h_in, cfg.c_in, cfg.c_out))
        ins = [x, x2]
        y = b.act((cfg.h_in, cfg.rows, cfg.c_out))
        b.op("BATCH_MATMUL", [x, x2], [y], "BatchMatMulOptions", adjX=False, adjY=False)
    elif kind in ("max_pool", "avg_pool"):
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_in))
        b.op("MAX_POOL_2D" if kind == "max_pool" else "AVERAGE_POOL_2D", [x], [y], "Pool2DOptions",
             padding=same, strideW=cfg.stride, strideH=cfg.stride, filterWidth=cfg.k, filterHeight=cfg.k)
    elif kind in ("global_avg_pool", "global_max_pool"):
        y = b.act((1, cfg.c_in))
        b.op("MEAN" if kind == "global_avg_pool" else "REDUCE_MAX", [x, b.const(np.array([1, 2], np.int32))], [y],
             "ReducerOptions", keepDims=False)
    elif kind in BINARY_KINDS:
        other = _nhwc(1, 1, cfg.c_in) if cfg.bcast else _nhwc(cfg.h_in, cfg.w_in, cfg.c_in)
        x2 = b.act(other)
        ins = [x, x2]
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        name = {"add": "ADD", "mul": "MUL", "sub": "SUB", "div": "DIV", "maximum": "MAXIMUM", "minimum": "MINIMUM",
                "squared_difference": "SQUARED_DIFFERENCE"}[kind]
        opts = {"ADD": "AddOptions", "MUL": "MulOptions", "SUB": "SubOptions"}.get(name)
        b.op(name, [x, x2], [y], opts)
    elif kind in ("relu", "relu6", "sigmoid", "tanh", "hard_swish", "leaky_relu", "prelu", "softmax"):
        scale, zero = {"sigmoid": (1 / 256, -128), "softmax": (1 / 256, -128), "tanh": (1 / 128, 0)}.get(
            kind, (ACT_SCALE, 0))
        if kind == "softmax":
            x = b.act((cfg.h_in * cfg.w_in, cfg.c_in))
            ins = [x]
            y = b.act((cfg.h_in * cfg.w_in, cfg.c_in), scale, zero)
        else:
            y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out), scale, zero)
        if kind == "prelu":
            alpha = (0.25 * np.ones((1, 1, cfg.c_in))).astype(np.float32)
            a = (b.tensor(alpha.shape, data=np.full(alpha.shape, 64, np.int8), ttype=s.TensorType.INT8,
                          quant=b._quant(0.25 / 64)) if b.int8 else b.const(alpha))
            b.op("PRELU", [x, a], [y])
        elif kind == "leaky_relu":
            b.op("LEAKY_RELU", [x], [y], "LeakyReluOptions", alpha=0.1)
        elif kind == "softmax":
            b.op("SOFTMAX", [x], [y], "SoftmaxOptions", beta=1.0)
        else:
            b.op({"relu": "RELU", "relu6": "RELU6", "sigmoid": "LOGISTIC", "tanh": "TANH",
                  "hard_swish": "HARD_SWISH"}[kind], [x], [y])
    elif kind == "batch_norm":  # a batch-norm no convolution absorbs: multiply and add per channel
        mid = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in))
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        b.op("MUL", [x, _channel_const(b, cfg.c_in, 1.0)], [mid], "MulOptions")
        b.op("ADD", [mid, _channel_const(b, cfg.c_in, 0.1)], [y], "AddOptions")
    elif kind == "layer_norm":  # as the converter lowers it: mean, variance, rsqrt, scale and shift
        shape = (cfg.h_in * cfg.w_in, cfg.c_in)
        x = b.act(shape)
        ins = [x]
        axis = b.const(np.array([1], np.int32))
        mean, sq, var, eps, rs, norm, y = (b.act((shape[0], 1)), b.act(shape), b.act((shape[0], 1)),
                                           b.act((shape[0], 1)), b.act((shape[0], 1)), b.act(shape), b.act(shape))
        b.op("MEAN", [x, axis], [mean], "ReducerOptions", keepDims=True)
        b.op("SQUARED_DIFFERENCE", [x, mean], [sq])
        b.op("MEAN", [sq, axis], [var], "ReducerOptions", keepDims=True)
        b.op("ADD", [var, _scalar(b, 1e-3)], [eps], "AddOptions")
        b.op("RSQRT", [eps], [rs])
        cen = b.act(shape)
        b.op("SUB", [x, mean], [cen], "SubOptions")
        b.op("MUL", [cen, rs], [norm], "MulOptions")
        gamma = b.act(shape)
        b.op("MUL", [norm, _row_const(b, cfg.c_in, 1.0)], [gamma], "MulOptions")
        b.op("ADD", [gamma, _row_const(b, cfg.c_in, 0.1)], [y], "AddOptions")
    elif kind == "concat":
        n = max(cfg.n_in, 2)
        parts = [cfg.c_out // n + (1 if i < cfg.c_out % n else 0) for i in range(n)]
        ins = [b.act(_nhwc(cfg.h_in, cfg.w_in, max(c, 1))) for c in parts]
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, sum(max(c, 1) for c in parts)))
        b.op("CONCATENATION", ins, [y], "ConcatenationOptions", axis=3)
    elif kind == "pad":
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        dh, dw = cfg.h_out - cfg.h_in, cfg.w_out - cfg.w_in
        pads = np.array([[0, 0], [dh // 2, dh - dh // 2], [dw // 2, dw - dw // 2], [0, 0]], np.int32)
        b.op("PAD", [x, b.const(pads)], [y])
    elif kind == "transpose":
        y = b.act(_nhwc(cfg.c_in, cfg.h_in, cfg.w_in))
        b.op("TRANSPOSE", [x, b.const(np.array([0, 3, 1, 2], np.int32))], [y])
    elif kind == "slice":
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        b.op("SLICE", [x, b.const(np.zeros(4, np.int32)),
                       b.const(np.array(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out), np.int32))], [y])
    elif kind == "gather":
        table = (rng.standard_normal((cfg.c_in, cfg.c_out)) * 0.1).astype(np.float32)
        t = (b.tensor(table.shape, data=np.clip(np.round(table / ACT_SCALE), -127, 127).astype(np.int8),
                      quant=b._quant(ACT_SCALE)) if b.int8 else b.const(table))
        ids = b.tensor((cfg.rows,), ttype=s.TensorType.INT32)
        ins = [ids]
        y = b.act((cfg.rows, cfg.c_out))
        b.op("GATHER", [t, ids], [y], "GatherOptions", axis=0)
    elif kind in ("resize_bilinear", "resize_nearest"):
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_in))
        size = b.const(np.array([cfg.h_out, cfg.w_out], np.int32))
        if kind == "resize_bilinear":
            b.op("RESIZE_BILINEAR", [x, size], [y], "ResizeBilinearOptions", halfPixelCenters=True)
        else:
            b.op("RESIZE_NEAREST_NEIGHBOR", [x, size], [y], "ResizeNearestNeighborOptions")
    elif kind == "depth_to_space":
        block = max(1, round(cfg.h_out / max(cfg.h_in, 1)))
        y = b.act(_nhwc(cfg.h_in * block, cfg.w_in * block, cfg.c_in // (block * block)))
        b.op("DEPTH_TO_SPACE", [x], [y], "DepthToSpaceOptions", blockSize=block)
    else:  # pragma: no cover - PROBE_KINDS is checked first
        raise ConfigError(f"no TFLite probe for kind {kind!r}")
    return b.finish(ins, [y])


def _per_tensor(b: _Tflite, rows: int, cols: int) -> tuple[int, np.ndarray]:
    w = (b.rng.standard_normal((rows, cols)) / math.sqrt(cols)).astype(np.float32)
    scale = max(float(np.abs(w).max()), 1e-6) / 127.0
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return b.tensor((rows, cols), data=q, ttype=b.s.TensorType.INT8, quant=b._quant(scale, 0)), np.array([scale])


def _channel_const(b: _Tflite, c: int, value: float) -> int:
    v = np.full((1, 1, 1, c), value, np.float32)
    if not b.int8:
        return b.const(v)
    return b.tensor(v.shape, data=np.full(v.shape, 100, np.int8), ttype=b.s.TensorType.INT8,
                    quant=b._quant(value / 100 if value else 0.01))


def _row_const(b: _Tflite, c: int, value: float) -> int:
    v = np.full((1, c), value, np.float32)
    if not b.int8:
        return b.const(v)
    return b.tensor(v.shape, data=np.full(v.shape, 100, np.int8), ttype=b.s.TensorType.INT8,
                    quant=b._quant(value / 100))


def _scalar(b: _Tflite, value: float) -> int:
    if not b.int8:
        return b.const(np.array([value], np.float32))
    return b.tensor((1,), data=np.array([1], np.int8), ttype=b.s.TensorType.INT8, quant=b._quant(value))


# ------------------------------------------------------------------------------------- ONNX

OPSET = 17


def _onnx(cfg: KernelConfig, dtype: str, rng: np.random.Generator) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []
    names = iter(f"v{i}" for i in range(10_000))

    def const(values: np.ndarray) -> str:
        name = next(names)
        inits.append(numpy_helper.from_array(values, name))
        return name

    def node(op: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        outs = [next(names) for _ in range(n_out)]
        nodes.append(helper.make_node(op, inputs, outs, **attrs))
        return outs

    def weight(shape: tuple[int, ...]) -> str:
        fan_in = max(math.prod(shape[1:]), 1)
        return const((rng.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32))

    kind = cfg.kind
    x_shape: list[tuple[int, ...]] = [(1, cfg.c_in, cfg.h_in, cfg.w_in)]
    ids_input = False
    if kind == "conv":
        y = node("Conv", ["x0", weight((cfg.c_out, cfg.c_in, cfg.k, cfg.k)), const(np.zeros(cfg.c_out, np.float32))],
                 kernel_shape=[cfg.k, cfg.k], strides=[cfg.stride] * 2, pads=_same(cfg.h_in, cfg.k, cfg.stride))
        y = node("Relu", y)
    elif kind == "dwconv":
        y = node("Conv", ["x0", weight((cfg.c_in, 1, cfg.k, cfg.k)), const(np.zeros(cfg.c_in, np.float32))],
                 kernel_shape=[cfg.k, cfg.k], strides=[cfg.stride] * 2, group=cfg.c_in,
                 pads=_same(cfg.h_in, cfg.k, cfg.stride))
        y = node("Relu", y)
    elif kind == "conv_transpose":
        y = node("ConvTranspose", ["x0", weight((cfg.c_in, cfg.c_out, cfg.k, cfg.k)),
                                   const(np.zeros(cfg.c_out, np.float32))],
                 kernel_shape=[cfg.k, cfg.k], strides=[cfg.stride] * 2,
                 output_shape=[cfg.h_out, cfg.w_out])
    elif kind == "fc":
        x_shape = [(cfg.rows, cfg.c_in)]
        y = node("MatMul", ["x0", weight((cfg.c_in, cfg.c_out))])
        y = node("Add", [y[0], const(np.zeros(cfg.c_out, np.float32))])
        if cfg.rows == 1:
            y = node("Relu", y)
    elif kind == "bmm":
        x_shape = [(cfg.h_in, cfg.rows, cfg.c_in), (cfg.h_in, cfg.c_in, cfg.c_out)]
        y = node("MatMul", ["x0", "x1"])
    elif kind in ("max_pool", "avg_pool"):
        y = node("MaxPool" if kind == "max_pool" else "AveragePool", ["x0"], kernel_shape=[cfg.k, cfg.k],
                 strides=[cfg.stride] * 2, pads=_same(cfg.h_in, cfg.k, cfg.stride))
    elif kind in ("global_avg_pool", "global_max_pool"):
        y = node("GlobalAveragePool" if kind == "global_avg_pool" else "GlobalMaxPool", ["x0"])
    elif kind in BINARY_KINDS:
        x_shape = [(1, cfg.c_in, cfg.h_in, cfg.w_in),
                   (1, cfg.c_in, 1, 1) if cfg.bcast else (1, cfg.c_in, cfg.h_in, cfg.w_in)]
        op = {"add": "Add", "mul": "Mul", "sub": "Sub", "div": "Div", "maximum": "Max", "minimum": "Min"}[kind]
        y = node(op, ["x0", "x1"])
    elif kind == "relu":
        y = node("Relu", ["x0"])
    elif kind == "relu6":
        y = node("Clip", ["x0", const(np.array(0, np.float32)), const(np.array(6, np.float32))])
    elif kind == "sigmoid":
        y = node("Sigmoid", ["x0"])
    elif kind == "tanh":
        y = node("Tanh", ["x0"])
    elif kind == "hard_swish":
        y = node("HardSwish", ["x0"])
    elif kind == "leaky_relu":
        y = node("LeakyRelu", ["x0"], alpha=0.1)
    elif kind == "prelu":
        y = node("PRelu", ["x0", const(np.full((cfg.c_in, 1, 1), 0.25, np.float32))])
    elif kind == "softmax":
        x_shape = [(cfg.h_in * cfg.w_in, cfg.c_in)]
        y = node("Softmax", ["x0"], axis=-1)
    elif kind == "batch_norm":
        c = cfg.c_in
        y = node("BatchNormalization", ["x0", const(np.ones(c, np.float32)), const(np.zeros(c, np.float32)),
                                        const(np.zeros(c, np.float32)), const(np.ones(c, np.float32))])
    elif kind == "layer_norm":
        x_shape = [(cfg.h_in * cfg.w_in, cfg.c_in)]
        y = node("LayerNormalization", ["x0", const(np.ones(cfg.c_in, np.float32)),
                                        const(np.zeros(cfg.c_in, np.float32))], axis=-1)
    elif kind == "concat":
        n = max(cfg.n_in, 2)
        parts = [max(cfg.c_out // n + (1 if i < cfg.c_out % n else 0), 1) for i in range(n)]
        x_shape = [(1, c, cfg.h_in, cfg.w_in) for c in parts]
        y = node("Concat", [f"x{i}" for i in range(n)], axis=1)
    elif kind == "pad":
        dh, dw = cfg.h_out - cfg.h_in, cfg.w_out - cfg.w_in
        pads = np.array([0, 0, dh // 2, dw // 2, 0, 0, dh - dh // 2, dw - dw // 2], np.int64)
        y = node("Pad", ["x0", const(pads)])
    elif kind == "transpose":
        y = node("Transpose", ["x0"], perm=[0, 2, 3, 1])
    elif kind == "slice":
        ends = np.array([cfg.c_out, cfg.h_out, cfg.w_out], np.int64)
        y = node("Slice", ["x0", const(np.zeros(3, np.int64)), const(ends), const(np.array([1, 2, 3], np.int64))])
    elif kind == "gather":
        ids_input = True
        x_shape = [(cfg.rows,)]
        y = node("Gather", [const((rng.standard_normal((cfg.c_in, cfg.c_out)) * 0.1).astype(np.float32)), "x0"],
                 axis=0)
    elif kind in ("resize_bilinear", "resize_nearest"):
        sizes = np.array([1, cfg.c_in, cfg.h_out, cfg.w_out], np.int64)
        mode = "linear" if kind == "resize_bilinear" else "nearest"
        y = node("Resize", ["x0", "", "", const(sizes)], mode=mode,
                 coordinate_transformation_mode="half_pixel" if mode == "linear" else "asymmetric",
                 nearest_mode="floor")
    elif kind == "depth_to_space":
        block = max(1, round(cfg.h_out / max(cfg.h_in, 1)))
        y = node("DepthToSpace", ["x0"], blocksize=block, mode="DCR")
    else:  # pragma: no cover - PROBE_KINDS is checked first
        raise ConfigError(f"no ONNX probe for kind {kind!r}")
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.INT32 if ids_input else TensorProto.FLOAT, list(s))
              for i, s in enumerate(x_shape)]
    import onnx

    outputs = [helper.make_tensor_value_info(y[0], TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "probe", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="dnnplan-probe")
    model.ir_version = 8
    out = onnx.shape_inference.infer_shapes(model).graph.output[0]
    if out.type.tensor_type.HasField("shape"):  # the output's shape, as exporters declare it
        model.graph.output[0].CopyFrom(out)
    if dtype == "int8":
        from .probe_runner import quiet_quantizer

        with quiet_quantizer():
            model = qdq_model(model, [s for s in x_shape], ids_input)
    return bytes(model.SerializeToString())


def _same(size: int, k: int, stride: int) -> list[int]:
    """ONNX ``pads`` of TensorFlow's SAME padding (the extra pixel at the end, as tf2onnx writes)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return [total // 2, total // 2, total - total // 2, total - total // 2]


def qdq_model(model: Any, input_shapes: list[tuple[int, ...]], ids_input: bool = False,
              samples: int = 2, seed: int = 0) -> Any:
    """``model`` statically quantized to QDQ form by onnxruntime's quantizer (INT8 weights per
    channel, UINT8 activations: onnxruntime's recommended x86 CPU setting), calibrated on
    ``samples`` seeded standard-normal inputs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(seed)
    names = [i.name for i in model.graph.input]
    batches = [{n: (rng.integers(0, 8, size=s).astype(np.int32) if ids_input else
                    rng.standard_normal(s).astype(np.float32)) for n, s in zip(names, input_shapes, strict=True)}
               for _ in range(samples)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    return _strip_io_qdq(quantize_model_static(model, Reader(), quantize_static, QuantFormat, QuantType))


def _strip_io_qdq(model: Any) -> Any:
    """A QDQ probe as its kernel runs inside a quantized network: the graph takes the quantized
    input (the ``QuantizeLinear`` of each float input removed) and gives the quantized output
    (the final ``DequantizeLinear`` removed), so no float conversion is timed with the kernel."""
    from onnx import TensorProto, helper, numpy_helper

    g = model.graph
    zero_type = {i.name: numpy_helper.to_array(i).dtype for i in g.initializer}
    elem = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}
    inputs = {i.name for i in g.input}
    outputs = {o.name for o in g.output}
    keep, new_in, new_out = [], [], []
    for n in g.node:
        if n.op_type == "QuantizeLinear" and n.input[0] in inputs:
            zp = zero_type.get(n.input[2]) if len(n.input) > 2 else None
            shape = [d.dim_value for i in g.input if i.name == n.input[0] for d in i.type.tensor_type.shape.dim]
            new_in.append((n.input[0], helper.make_tensor_value_info(n.output[0], elem.get(zp, TensorProto.UINT8),
                                                                      shape)))
            continue
        if n.op_type == "DequantizeLinear" and n.output[0] in outputs:
            zp = zero_type.get(n.input[2]) if len(n.input) > 2 else None
            new_out.append((n.output[0], helper.make_tensor_value_info(n.input[0], elem.get(zp, TensorProto.UINT8),
                                                                        None)))
            continue
        keep.append(n)
    replaced_in = dict(new_in)
    replaced_out = dict(new_out)
    ins = [replaced_in.get(i.name, i) for i in g.input]
    outs = [replaced_out.get(o.name, o) for o in g.output]
    del g.node[:]
    g.node.extend(keep)
    del g.input[:]
    g.input.extend(ins)
    del g.output[:]
    g.output.extend(outs)
    return model


def quantize_model_static(model: Any, reader: Any, quantize_static: Callable[..., Any], fmt: Any,
                          qtype: Any) -> Any:
    """Run onnxruntime's ``quantize_static`` on an in-memory model through temporary files (its
    interface takes paths) with the probes' settings; returns the quantized ModelProto."""
    import tempfile
    from pathlib import Path

    import onnx

    with tempfile.TemporaryDirectory(prefix="dnnplan-qdq-") as tmp:
        src, dst = Path(tmp) / "f.onnx", Path(tmp) / "q.onnx"
        onnx.save(model, str(src))
        quantize_static(str(src), str(dst), reader, quant_format=fmt.QDQ, activation_type=qtype.QUInt8,
                        weight_type=qtype.QInt8, per_channel=True, extra_options={"ActivationSymmetric": False})
        return onnx.load(str(dst))
