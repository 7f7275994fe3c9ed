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
kernels as TFLite's INT8 kernels require). ONNX probes (:mod:`optimizer.measure.probe_onnx`) are
``onnx.helper`` graphs in NCHW, the operators tf2onnx writes; INT8 ONNX probes are QDQ models.

Every builder is seeded: the same configuration, dtype and seed give the same bytes.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..graph.kernel_config import KernelConfig
from .probe_onnx import ONNX_BUILDERS, onnx_probe, split_channels
from .probe_runner import ID_RANGE

#: kinds a probe can be built for (both formats, FP32 and INT8)
PROBE_KINDS: tuple[str, ...] = (
    "conv", "dwconv", "conv_transpose", "fc", "bmm", "max_pool", "avg_pool", "global_avg_pool",
    "global_max_pool", "add", "mul", "sub", "maximum", "relu", "relu6", "leaky_relu", "prelu", "sigmoid",
    "tanh", "hard_swish", "softmax", "batch_norm", "layer_norm", "concat", "pad", "transpose",
    "slice", "gather", "resize_bilinear", "resize_nearest", "depth_to_space", "unary", "dequantize",
)
FORMATS = ("tflite", "onnx")
ACT_SCALE = 0.05  # INT8 activation scale of a probe (values in about [-6.1, 6.65])
#: INT8 activation zero point of a probe: the converter quantizes activations asymmetrically, so a
#: network's zero points are rarely 0, and some kernels take a fast path only at 0 (TFLite's INT8
#: BATCH_MATMUL: an 8 x 128 x 64 x 128 product runs 13x slower at a zero point of -6)
ACT_ZERO = -6
#: version -> (format, dtype, what changed) of every change to the probe models that changes what
#: a probe measures; a probe table records the version it was measured with (``probe_version``)
PROBE_CHANGES: dict[int, tuple[str, str, str]] = {
    2: ("tflite", "int8", "INT8 TFLite probes' activations take a zero point of -6, not 0"),
    3: ("onnx", "int8", "INT8 onnxruntime probes' times leave out the NHWC transposes around QLinearConv"),
    4: ("onnx", "int8", "INT8 onnxruntime element-wise probes with two operands are laid out NHWC"),
    5: ("onnx", "int8", "every INT8 onnxruntime probe's operator reads and writes quantized tensors; pooling "
                        "probes are onnxruntime's NHWC kernels"),
    6: ("onnx", "int8", "INT8 onnxruntime resize probes are laid out NHWC"),
}
PROBE_VERSION = max(PROBE_CHANGES)


def probe_model(config: KernelConfig, fmt: str, dtype: str, seed: int = 0, repeat: int = 1) -> bytes:
    """The serialized probe of ``config`` in ``fmt`` (``tflite`` | ``onnx``) at ``dtype``
    (``fp32`` | ``int8``); ``repeat`` > 1 chains that many copies of a two-operand kernel, each
    reading the one before (a node chain: its time per copy past the first is what the runtime
    spends per node of a network, beyond the kernel's work).

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
    if repeat > 1 and _GROUP_OF[config.kind] != "binary":
        raise ConfigError(f"only two-operand kernels chain; {config.kind!r} does not")
    rng = np.random.default_rng([seed, zlib.crc32(repr(config).encode())])
    if fmt == "tflite":
        return _tflite(config, dtype, rng, repeat)
    if fmt == "onnx":
        return onnx_probe(config, _GROUP_OF[config.kind], dtype, rng, repeat)
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
        self.repeat = 1  # copies of a two-operand kernel chained (:func:`probe_model`)

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

    def act(self, shape: tuple[int, ...], scale: float = ACT_SCALE, zero: int = ACT_ZERO) -> int:
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


def _tflite(cfg: KernelConfig, dtype: str, rng: np.random.Generator, repeat: int = 1) -> bytes:
    b = _Tflite(dtype, rng)
    b.repeat = repeat
    ins, y = _TFLITE_BUILDERS[cfg.kind](b, cfg)
    return b.finish(ins, [y])


def _tfl_conv(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    s = b.s
    x = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in))
    if cfg.kind == "conv":
        w, ws = b.weights((cfg.c_out, cfg.k, cfg.k, cfg.c_in), 0)
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        b.op("CONV_2D", [x, w, b.bias(cfg.c_out, ws)], [y], "Conv2DOptions", padding=s.Padding.SAME,
             strideW=cfg.stride, strideH=cfg.stride, fusedActivationFunction=s.ActivationFunctionType.RELU)
    elif cfg.kind == "dwconv":
        w, ws = b.weights((1, cfg.k, cfg.k, cfg.c_in), 3)
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_in))
        b.op("DEPTHWISE_CONV_2D", [x, w, b.bias(cfg.c_in, ws)], [y], "DepthwiseConv2DOptions",
             padding=s.Padding.SAME, strideW=cfg.stride, strideH=cfg.stride, depthMultiplier=1,
             fusedActivationFunction=s.ActivationFunctionType.RELU)
    else:  # conv_transpose
        w, ws = b.weights((cfg.c_out, cfg.k, cfg.k, cfg.c_in), 0)
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        shape = b.const(np.array(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out), np.int32))
        b.op("TRANSPOSE_CONV", [shape, w, x, b.bias(cfg.c_out, ws)], [y], "TransposeConvOptions",
             padding=s.Padding.SAME, strideW=cfg.stride, strideH=cfg.stride)
    return [x], y


def _tfl_matmul(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    if cfg.kind == "bmm":
        x, x2 = b.act((cfg.h_in, cfg.rows, cfg.c_in)), b.act((cfg.h_in, cfg.c_in, cfg.c_out))
        y = b.act((cfg.h_in, cfg.rows, cfg.c_out))
        b.op("BATCH_MATMUL", [x, x2], [y], "BatchMatMulOptions", adjX=False, adjY=False)
        return [x, x2], y
    x = b.act((cfg.rows, cfg.c_in))
    # the converter quantizes fully connected weights per tensor
    w, ws = _per_tensor(b, cfg.c_out, cfg.c_in) if b.int8 else b.weights((cfg.c_out, cfg.c_in), 0)
    y = b.act((cfg.rows, cfg.c_out))
    b.op("FULLY_CONNECTED", [x, w, b.bias(cfg.c_out, np.full(cfg.c_out, ws[0]))], [y], "FullyConnectedOptions",
         fusedActivationFunction=b.s.ActivationFunctionType.RELU if cfg.rows == 1 else 0, keepNumDims=False)
    return [x], y


def _tfl_pool(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    x = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in))
    if cfg.kind.startswith("global"):
        y = b.act((1, cfg.c_in))
        b.op("MEAN" if cfg.kind == "global_avg_pool" else "REDUCE_MAX", [x, b.const(np.array([1, 2], np.int32))],
             [y], "ReducerOptions", keepDims=False)
        return [x], y
    y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_in))
    b.op("MAX_POOL_2D" if cfg.kind == "max_pool" else "AVERAGE_POOL_2D", [x], [y], "Pool2DOptions",
         padding=b.s.Padding.SAME, strideW=cfg.stride, strideH=cfg.stride, filterWidth=cfg.k, filterHeight=cfg.k)
    return [x], y


def _tfl_binary(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    x = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in))
    x2 = b.act(_nhwc(*cfg.second_operand))
    name = {"add": "ADD", "mul": "MUL", "sub": "SUB", "div": "DIV", "maximum": "MAXIMUM", "minimum": "MINIMUM",
            "squared_difference": "SQUARED_DIFFERENCE"}[cfg.kind]
    y = x
    for _ in range(b.repeat):
        a, y = y, b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        b.op(name, [a, x2], [y], {"ADD": "AddOptions", "MUL": "MulOptions", "SUB": "SubOptions"}.get(name))
    return [x, x2], y


def _tfl_unary(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    # INT8 kernels of these take fixed output scales (TFLite's quantization specification)
    scale, zero = {"sigmoid": (1 / 256, -128), "softmax": (1 / 256, -128), "tanh": (1 / 128, 0)}.get(
        cfg.kind, (ACT_SCALE, ACT_ZERO))
    shape = (cfg.h_in * cfg.w_in, cfg.c_in) if cfg.kind == "softmax" else _nhwc(cfg.h_in, cfg.w_in, cfg.c_in)
    x = b.act(shape)
    y = b.act(shape, scale, zero)
    if cfg.kind == "prelu":
        alpha = np.full((1, 1, cfg.c_in), 0.25, np.float32)
        a = (b.tensor(alpha.shape, data=np.full(alpha.shape, 64, np.int8), ttype=b.s.TensorType.INT8,
                      quant=b._quant(0.25 / 64)) if b.int8 else b.const(alpha))
        b.op("PRELU", [x, a], [y])
    elif cfg.kind == "leaky_relu":
        b.op("LEAKY_RELU", [x], [y], "LeakyReluOptions", alpha=0.1)
    elif cfg.kind == "softmax":
        b.op("SOFTMAX", [x], [y], "SoftmaxOptions", beta=1.0)
    else:
        b.op({"relu": "RELU", "relu6": "RELU6", "sigmoid": "LOGISTIC", "tanh": "TANH",
              "hard_swish": "HARD_SWISH", "unary": "NEG"}[cfg.kind], [x], [y])
    return [x], y


def _tfl_norm(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    if cfg.kind == "batch_norm":  # a batch-norm no convolution absorbs: multiply and add per channel
        x = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in))
        mid, y = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in)), b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        b.op("MUL", [x, _channel_const(b, (1, 1, 1, cfg.c_in), 1.0)], [mid], "MulOptions")
        b.op("ADD", [mid, _channel_const(b, (1, 1, 1, cfg.c_in), 0.1)], [y], "AddOptions")
        return [x], y
    # layer norm as the converter lowers it: mean, variance, rsqrt, scale and shift
    shape, col = (cfg.h_in * cfg.w_in, cfg.c_in), (cfg.h_in * cfg.w_in, 1)
    x = b.act(shape)
    axis = b.const(np.array([1], np.int32))
    mean, sq, var, eps, rs = b.act(col), b.act(shape), b.act(col), b.act(col), b.act(col)
    cen, norm, gamma, y = b.act(shape), b.act(shape), b.act(shape), b.act(shape)
    b.op("MEAN", [x, axis], [mean], "ReducerOptions", keepDims=True)
    b.op("SQUARED_DIFFERENCE", [x, mean], [sq])
    b.op("MEAN", [sq, axis], [var], "ReducerOptions", keepDims=True)
    b.op("ADD", [var, _channel_const(b, (1,), 1e-3)], [eps], "AddOptions")
    b.op("RSQRT", [eps], [rs])
    b.op("SUB", [x, mean], [cen], "SubOptions")
    b.op("MUL", [cen, rs], [norm], "MulOptions")
    b.op("MUL", [norm, _channel_const(b, (1, cfg.c_in), 1.0)], [gamma], "MulOptions")
    b.op("ADD", [gamma, _channel_const(b, (1, cfg.c_in), 0.1)], [y], "AddOptions")
    return [x], y


def _tfl_layout(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    s = b.s
    if cfg.kind == "concat":
        ins = [b.act(_nhwc(cfg.h_in, cfg.w_in, c)) for c in split_channels(cfg)]
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, sum(split_channels(cfg))))
        b.op("CONCATENATION", ins, [y], "ConcatenationOptions", axis=3)
        return ins, y
    if cfg.kind == "gather":
        # a table of at least the rows the ids range over (probe_runner.random_input)
        table = (b.rng.standard_normal((max(cfg.c_in, ID_RANGE), cfg.c_out)) * 0.1).astype(np.float32)
        t = (b.tensor(table.shape, data=np.clip(np.round(table / ACT_SCALE) + ACT_ZERO, -128, 127).astype(np.int8),
                      quant=b._quant(ACT_SCALE, ACT_ZERO)) if b.int8 else b.const(table))
        ids = b.tensor((cfg.rows,), ttype=s.TensorType.INT32)
        y = b.act((cfg.rows, cfg.c_out))
        b.op("GATHER", [t, ids], [y], "GatherOptions", axis=0)
        return [ids], y
    x = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in))
    if cfg.kind == "pad":
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        dh, dw, dc = cfg.h_out - cfg.h_in, cfg.w_out - cfg.w_in, cfg.c_out - cfg.c_in
        pads = np.array([[0, 0], [dh // 2, dh - dh // 2], [dw // 2, dw - dw // 2], [0, dc]], np.int32)
        b.op("PAD", [x, b.const(pads)], [y])
    elif cfg.kind == "transpose":
        y = b.act(_nhwc(cfg.c_in, cfg.h_in, cfg.w_in))
        b.op("TRANSPOSE", [x, b.const(np.array([0, 3, 1, 2], np.int32))], [y])
    elif cfg.kind == "slice":
        y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out))
        size = b.const(np.array(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out), np.int32))
        b.op("SLICE", [x, b.const(np.zeros(4, np.int32)), size], [y])
    else:  # depth_to_space
        block = max(1, round(cfg.h_out / max(cfg.h_in, 1)))
        y = b.act(_nhwc(cfg.h_in * block, cfg.w_in * block, cfg.c_in // (block * block)))
        b.op("DEPTH_TO_SPACE", [x], [y], "DepthToSpaceOptions", blockSize=block)
    return [x], y


def _tfl_resize(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    x = b.act(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in))
    y = b.act(_nhwc(cfg.h_out, cfg.w_out, cfg.c_in))
    size = b.const(np.array([cfg.h_out, cfg.w_out], np.int32))
    if cfg.kind == "resize_bilinear":
        b.op("RESIZE_BILINEAR", [x, size], [y], "ResizeBilinearOptions", halfPixelCenters=True)
    else:
        b.op("RESIZE_NEAREST_NEIGHBOR", [x, size], [y], "ResizeNearestNeighborOptions")
    return [x], y


def _tfl_dequantize(b: _Tflite, cfg: KernelConfig) -> tuple[list[int], int]:
    """An INT8 tensor dequantized to float (at FP32 and INT8 alike)."""
    x = b.tensor(_nhwc(cfg.h_in, cfg.w_in, cfg.c_in), ttype=b.s.TensorType.INT8, quant=b._quant(ACT_SCALE, ACT_ZERO))
    y = b.tensor(_nhwc(cfg.h_out, cfg.w_out, cfg.c_out), ttype=b.s.TensorType.FLOAT32)
    b.op("DEQUANTIZE", [x], [y])
    return [x], y


def _per_tensor(b: _Tflite, rows: int, cols: int) -> tuple[int, np.ndarray]:
    w = (b.rng.standard_normal((rows, cols)) / math.sqrt(cols)).astype(np.float32)
    scale = max(float(np.abs(w).max()), 1e-6) / 127.0
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return b.tensor((rows, cols), data=q, ttype=b.s.TensorType.INT8, quant=b._quant(scale, 0)), np.array([scale])


def _channel_const(b: _Tflite, shape: tuple[int, ...], value: float) -> int:
    """A constant operand of ``shape`` filled with ``value`` (INT8 with a scale giving it)."""
    v = np.full(shape, value, np.float32)
    if not b.int8:
        return b.const(v)
    return b.tensor(v.shape, data=np.full(v.shape, 100, np.int8), ttype=b.s.TensorType.INT8,
                    quant=b._quant(value / 100 if value else 0.01))


KIND_GROUPS: dict[str, tuple[str, ...]] = {
    "conv": ("conv", "dwconv", "conv_transpose"), "matmul": ("fc", "bmm"),
    "pool": ("max_pool", "avg_pool", "global_avg_pool", "global_max_pool"), "binary": ("add", "mul", "sub", "maximum"),
    "unary": ("relu", "relu6", "leaky_relu", "prelu", "sigmoid", "tanh", "hard_swish", "softmax", "unary"),
    "norm": ("batch_norm", "layer_norm"), "layout": ("concat", "pad", "transpose", "slice", "gather", "depth_to_space"),
    "resize": ("resize_bilinear", "resize_nearest"), "convert": ("dequantize",),
}
_TFLITE_BUILDERS: dict[str, Callable[[_Tflite, KernelConfig], tuple[list[int], int]]] = {
    k: fn for group, fn in (("conv", _tfl_conv), ("matmul", _tfl_matmul), ("pool", _tfl_pool),
                            ("binary", _tfl_binary), ("unary", _tfl_unary), ("norm", _tfl_norm),
                            ("layout", _tfl_layout), ("resize", _tfl_resize), ("convert", _tfl_dequantize))
    for k in KIND_GROUPS[group]}
assert set(_TFLITE_BUILDERS) == set(PROBE_KINDS) and set(ONNX_BUILDERS) == set(KIND_GROUPS)
_GROUP_OF = {k: group for group, kinds in KIND_GROUPS.items() for k in kinds}
