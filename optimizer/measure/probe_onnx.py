"""Single-kernel ONNX probe models (:mod:`optimizer.measure.probe_models` writes the TFLite ones
and picks the format): ``onnx.helper`` graphs in NCHW (INT8 two-operand element-wise and resize ones in NHWC,
as onnxruntime runs them) with the operators tf2onnx writes
(``MatMul`` + ``Add`` for dense layers, ``Clip`` for ReLU6); INT8 probes are QDQ models
(``QuantizeLinear``/``DequantizeLinear`` around each operator, as onnxruntime's static quantizer
writes them; onnxruntime fuses them into ``QLinear*`` kernels), their float input and output
conversions removed. An INT8 probe's operator reads a quantized tensor and writes one, as inside
a quantized network, whatever onnxruntime then makes of it: a ``QLinear*`` kernel (convolution,
addition, sigmoid), the operator on the 8-bit data (transpose, resize: its
``DequantizeLinear``/``QuantizeLinear`` dropped), or the float operator between a
``DequantizeLinear`` and a ``QuantizeLinear`` that run as kernels of their own (subtraction,
PReLU, tanh; a ReLU reading a tensor with other readers is only the two conversions). INT8
pooling probes are the NHWC kernels onnxruntime runs between a network's ``QLinearConv``s
(:data:`NHWC_INT8_POOLS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..graph.kernel_config import KernelConfig
from .probe_runner import ID_RANGE, random_input


def split_channels(cfg: KernelConfig) -> list[int]:
    """Channels of each of a concatenation's ``n_in`` inputs (``c_out`` split evenly)."""
    n = max(cfg.n_in, 2)
    return [max(cfg.c_out // n + (1 if i < cfg.c_out % n else 0), 1) for i in range(n)]


OPSET = 17


class _Onnx:
    """An ONNX graph under construction: nodes, initializers and the graph inputs' shapes."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.inputs: list[tuple[int, ...]] = []
        self.ids_input = False
        self.uint8_input = False  # the operator reads 8-bit data itself (a ``DequantizeLinear``)
        self.channels_last = False  # INT8: element-wise and resize probes laid out as onnxruntime runs them (NHWC)
        self.repeat = 1  # copies of a two-operand kernel chained (:func:`optimizer.measure.probe_models.probe_model`)
        self._n = 0

    def _name(self) -> str:
        self._n += 1
        return f"v{self._n}"

    def input(self, shape: tuple[int, ...]) -> str:
        self.inputs.append(tuple(shape))
        return f"x{len(self.inputs) - 1}"

    def const(self, values: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self._name()
        self.inits.append(numpy_helper.from_array(values, name))
        return name

    def weight(self, shape: tuple[int, ...]) -> str:
        fan_in = max(math.prod(shape[1:]), 1)
        return self.const((self.rng.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32))

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        from onnx import helper

        out = self._name()
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out


def onnx_probe(cfg: KernelConfig, group: str, dtype: str, rng: np.random.Generator, repeat: int = 1) -> bytes:
    """The serialized ONNX probe of ``cfg``, built by the builder of its kind's ``group``
    (:data:`ONNX_BUILDERS`), QDQ-quantized at ``int8``; ``repeat`` copies of a two-operand kernel."""
    import onnx
    from onnx import TensorProto, helper

    if dtype == "int8" and cfg.kind in NHWC_INT8_POOLS:
        return _nhwc_int8_pool(cfg)
    b = _Onnx(rng)
    b.channels_last, b.repeat = dtype == "int8", repeat
    y = ONNX_BUILDERS[group](b, cfg)
    elem = TensorProto.UINT8 if b.uint8_input else TensorProto.INT32 if b.ids_input else TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info(f"x{i}", elem, list(sh)) for i, sh in enumerate(b.inputs)]
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)]
    graph = helper.make_graph(b.nodes, "probe", inputs, outputs, initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="dnnplan-probe")
    model.ir_version = 8
    out = onnx.shape_inference.infer_shapes(model).graph.output[0]
    if out.type.tensor_type.HasField("shape"):  # the output's shape, as exporters declare it
        model.graph.output[0].CopyFrom(out)
    if dtype == "int8" and not b.uint8_input:
        from .probe_runner import quiet_quantizer

        with quiet_quantizer():
            model = qdq_model(model, b.inputs, b.ids_input)
    return bytes(model.SerializeToString())


def with_clip_activation(model: bytes) -> bytes:
    """An FP32 convolution probe (``model``, which ends in the ReLU every convolution probe takes)
    with a Clip(0, 6) in place of that ReLU: MLAS fuses a ReLU into its NCHWc kernel and runs any
    other activation as a pass over the output, which the pair's difference times."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load_from_string(bytes(model))
    last = m.graph.node[-1]
    if last.op_type != "Relu":
        raise ValueError(f"expected a probe ending in a Relu, not {last.op_type}")
    m.graph.initializer.extend([numpy_helper.from_array(np.array(0.0, np.float32), "clip_min"),
                                numpy_helper.from_array(np.array(6.0, np.float32), "clip_max")])
    last.op_type = "Clip"
    last.input.extend(["clip_min", "clip_max"])
    return bytes(m.SerializeToString())


def _onnx_conv(b: _Onnx, cfg: KernelConfig) -> str:
    x = b.input((1, cfg.c_in, cfg.h_in, cfg.w_in))
    window = {"kernel_shape": [cfg.k, cfg.k], "strides": [cfg.stride] * 2}
    if cfg.kind == "conv_transpose":
        return b.node("ConvTranspose", [x, b.weight((cfg.c_in, cfg.c_out, cfg.k, cfg.k)),
                                        b.const(np.zeros(cfg.c_out, np.float32))],
                      output_shape=[cfg.h_out, cfg.w_out], **window)
    depthwise = cfg.kind == "dwconv"
    c_out = cfg.c_in if depthwise else cfg.c_out
    w = b.weight((c_out, 1, cfg.k, cfg.k) if depthwise else (c_out, cfg.c_in, cfg.k, cfg.k))
    y = b.node("Conv", [x, w, b.const(np.zeros(c_out, np.float32))], group=cfg.c_in if depthwise else 1,
               pads=_same(cfg.h_in, cfg.k, cfg.stride), **window)
    return b.node("Relu", [y])


def _onnx_matmul(b: _Onnx, cfg: KernelConfig) -> str:
    if cfg.kind == "bmm":
        return b.node("MatMul", [b.input((cfg.h_in, cfg.rows, cfg.c_in)), b.input((cfg.h_in, cfg.c_in, cfg.c_out))])
    y = b.node("MatMul", [b.input((cfg.rows, cfg.c_in)), b.weight((cfg.c_in, cfg.c_out))])
    y = b.node("Add", [y, b.const(np.zeros(cfg.c_out, np.float32))])
    return b.node("Relu", [y]) if cfg.rows == 1 else y


def _onnx_pool(b: _Onnx, cfg: KernelConfig) -> str:
    x = b.input((1, cfg.c_in, cfg.h_in, cfg.w_in))
    if cfg.kind.startswith("global"):
        return b.node("GlobalAveragePool" if cfg.kind == "global_avg_pool" else "GlobalMaxPool", [x])
    return b.node("MaxPool" if cfg.kind == "max_pool" else "AveragePool", [x], kernel_shape=[cfg.k, cfg.k],
                  strides=[cfg.stride] * 2, pads=_same(cfg.h_in, cfg.k, cfg.stride))


#: INT8 pooling kinds -> the NHWC kernel onnxruntime's NHWC transformer runs for them between a
#: quantized network's ``QLinearConv``s; a lone QDQ pool stays NCHW, where an 8-bit max pool takes a
#: generic path (112 x 112 x 64, 2 x 2: 6.1 ms against ``NhwcMaxPool``'s 0.10 ms)
NHWC_INT8_POOLS: dict[str, str] = {"max_pool": "NhwcMaxPool", "avg_pool": "QLinearAveragePool",
                                   "global_avg_pool": "QLinearGlobalAveragePool"}


def _nhwc_int8_pool(cfg: KernelConfig) -> bytes:
    """The INT8 probe of a pooling kind of :data:`NHWC_INT8_POOLS`: onnxruntime's NHWC kernel
    (``com.microsoft`` domain) on a UINT8 tensor, as it appears in a quantized network's optimized
    graph."""
    from onnx import TensorProto, helper

    conversions = ["scale", "zero", "scale", "zero"]  # input and output scale and zero point
    attrs: dict[str, Any] = {}
    if cfg.kind != "global_avg_pool":
        attrs = {"kernel_shape": [cfg.k, cfg.k], "strides": [cfg.stride] * 2, "pads": _same(cfg.h_in, cfg.k, cfg.stride)}
    if cfg.kind != "max_pool":
        attrs["channels_last"] = 1
    node = helper.make_node(NHWC_INT8_POOLS[cfg.kind], ["x"] + (conversions if cfg.kind != "max_pool" else []), ["y"],
                            domain="com.microsoft", **attrs)
    graph = helper.make_graph(
        [node], "probe", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, cfg.h_in, cfg.w_in, cfg.c_in])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        initializer=[helper.make_tensor("scale", TensorProto.FLOAT, [], [ACT_SCALE_UINT8]),
                     helper.make_tensor("zero", TensorProto.UINT8, [], [128])])
    model = helper.make_model(graph, producer_name="dnnplan-probe",
                              opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _onnx_binary(b: _Onnx, cfg: KernelConfig) -> str:
    """A two-operand element-wise probe; INT8 in NHWC: onnxruntime runs a quantized network's
    element-wise operators in the NHWC layout of its ``QLinearConv``s, where a per-channel operand
    broadcasts along the innermost axis (a 112 x 112 x 32 ``QLinearMul`` by a per-channel constant:
    0.206 ms NHWC, 0.078 ms NCHW)."""
    h, w, c = cfg.second_operand
    if b.channels_last:
        x, x2 = b.input((1, cfg.h_in, cfg.w_in, cfg.c_in)), b.input((1, h, w, c))
    else:
        x, x2 = b.input((1, cfg.c_in, cfg.h_in, cfg.w_in)), b.input((1, c, h, w))
    op = {"add": "Add", "mul": "Mul", "sub": "Sub", "div": "Div", "maximum": "Max", "minimum": "Min"}[cfg.kind]
    for _ in range(b.repeat):
        x = b.node(op, [x, x2])
    return x


def _onnx_unary(b: _Onnx, cfg: KernelConfig) -> str:
    if cfg.kind == "softmax":
        return b.node("Softmax", [b.input((cfg.h_in * cfg.w_in, cfg.c_in))], axis=-1)
    x = b.input((1, cfg.c_in, cfg.h_in, cfg.w_in))
    if cfg.kind == "relu6":
        return b.node("Clip", [x, b.const(np.array(0, np.float32)), b.const(np.array(6, np.float32))])
    if cfg.kind == "leaky_relu":
        return b.node("LeakyRelu", [x], alpha=0.1)
    if cfg.kind == "prelu":
        return b.node("PRelu", [x, b.const(np.full((cfg.c_in, 1, 1), 0.25, np.float32))])
    return b.node({"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "hard_swish": "HardSwish",
                   "unary": "Neg"}[cfg.kind], [x])


def _onnx_norm(b: _Onnx, cfg: KernelConfig) -> str:
    c = cfg.c_in
    if cfg.kind == "layer_norm":
        return b.node("LayerNormalization", [b.input((cfg.h_in * cfg.w_in, c)), b.const(np.ones(c, np.float32)),
                                             b.const(np.zeros(c, np.float32))], axis=-1)
    return b.node("BatchNormalization", [b.input((1, c, cfg.h_in, cfg.w_in)), b.const(np.ones(c, np.float32)),
                                         b.const(np.zeros(c, np.float32)), b.const(np.zeros(c, np.float32)),
                                         b.const(np.ones(c, np.float32))])


def _onnx_layout(b: _Onnx, cfg: KernelConfig) -> str:
    if cfg.kind == "concat":
        return b.node("Concat", [b.input((1, c, cfg.h_in, cfg.w_in)) for c in split_channels(cfg)], axis=1)
    if cfg.kind == "gather":
        b.ids_input = True
        # a table of at least the rows the ids range over (probe_runner.random_input)
        table = (b.rng.standard_normal((max(cfg.c_in, ID_RANGE), cfg.c_out)) * 0.1).astype(np.float32)
        return b.node("Gather", [b.const(table), b.input((cfg.rows,))], axis=0)
    x = b.input((1, cfg.c_in, cfg.h_in, cfg.w_in))
    if cfg.kind == "pad":
        dh, dw, dc = cfg.h_out - cfg.h_in, cfg.w_out - cfg.w_in, cfg.c_out - cfg.c_in
        pads = np.array([0, 0, dh // 2, dw // 2, 0, dc, dh - dh // 2, dw - dw // 2], np.int64)
        return b.node("Pad", [x, b.const(pads)])
    if cfg.kind == "transpose":
        return b.node("Transpose", [x], perm=[0, 2, 3, 1])
    if cfg.kind == "slice":
        ends = np.array([cfg.c_out, cfg.h_out, cfg.w_out], np.int64)
        return b.node("Slice", [x, b.const(np.zeros(3, np.int64)), b.const(ends), b.const(np.array([1, 2, 3], np.int64))])
    block = max(1, round(cfg.h_out / max(cfg.h_in, 1)))  # depth_to_space
    return b.node("DepthToSpace", [x], blocksize=block, mode="DCR")


def _onnx_resize(b: _Onnx, cfg: KernelConfig) -> str:
    """A resize probe; INT8 in NHWC: onnxruntime's transpose optimizer moves a quantized network's
    ``Resize`` into the NHWC layout of its ``QLinearConv``s, where no 2x fast path applies (80 x 80
    x 96 to 160 x 160, UINT8 nearest: 0.23 ms NCHW, 5.4 ms NHWC)."""
    linear = cfg.kind == "resize_bilinear"
    if b.channels_last:
        x, sizes = b.input((1, cfg.h_in, cfg.w_in, cfg.c_in)), np.array([1, cfg.h_out, cfg.w_out, cfg.c_in], np.int64)
    else:
        x, sizes = b.input((1, cfg.c_in, cfg.h_in, cfg.w_in)), np.array([1, cfg.c_in, cfg.h_out, cfg.w_out], np.int64)
    return b.node("Resize", [x, "", "", b.const(sizes)],
                  mode="linear" if linear else "nearest",
                  coordinate_transformation_mode="half_pixel" if linear else "asymmetric", nearest_mode="floor")


def _onnx_dequantize(b: _Onnx, cfg: KernelConfig) -> str:
    """A dequantization of a whole 8-bit tensor (at FP32 and INT8 alike): what onnxruntime runs for
    a quantized tensor a ``Shape`` reads, which no ``QLinear*`` kernel takes in."""
    b.uint8_input = True
    x = b.input((1, cfg.c_in, cfg.h_in, cfg.w_in))
    return b.node("DequantizeLinear", [x, b.const(np.array(ACT_SCALE_UINT8, np.float32)),
                                       b.const(np.array(128, np.uint8))])


#: the builder of each group of probe kinds (``optimizer.measure.probe_models.KIND_GROUPS``)
ONNX_BUILDERS: dict[str, Callable[[_Onnx, KernelConfig], str]] = {
    "conv": _onnx_conv, "matmul": _onnx_matmul, "pool": _onnx_pool, "binary": _onnx_binary, "unary": _onnx_unary,
    "norm": _onnx_norm, "layout": _onnx_layout, "resize": _onnx_resize, "convert": _onnx_dequantize,
}


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
    dtype = np.dtype(np.int32 if ids_input else np.float32)
    batches = [{n: random_input(rng, list(s), dtype) for n, s in zip(names, input_shapes, strict=True)}
               for _ in range(samples)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    quantized = quantize_model_static(model, Reader(), quantize_static, QuantFormat, QuantType, every_op=True)
    return _quantize_float_io(_strip_io_qdq(quantized))


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


#: scale of a float probe's UINT8 input and output (:func:`_quantize_float_io`)
ACT_SCALE_UINT8 = 0.05


def _quantize_float_io(model: Any) -> Any:
    """A probe the quantizer left in float (a ReLU or ``Clip`` reading a graph input: its
    ``QDQRemovableActivation`` keeps only those reading a quantized tensor) with its input
    dequantized from and its output quantized to UINT8, as a network's kept ReLU reads and writes
    them (the output's zero point at its range's minimum, 0, as calibration puts it; onnxruntime
    then drops the ReLU and runs the two conversions)."""
    from onnx import TensorProto, helper

    g = model.graph
    if any(n.op_type == "DequantizeLinear" for n in g.node) or g.input[0].type.tensor_type.elem_type != TensorProto.FLOAT:
        return model
    shape = [d.dim_value for d in g.input[0].type.tensor_type.shape.dim]
    x, y = g.input[0].name, g.output[0].name
    g.initializer.extend([helper.make_tensor("io_scale", TensorProto.FLOAT, [], [ACT_SCALE_UINT8]),
                          helper.make_tensor("in_zero", TensorProto.UINT8, [], [128]),
                          helper.make_tensor("out_zero", TensorProto.UINT8, [], [0])])
    g.node.insert(0, helper.make_node("DequantizeLinear", ["x_quantized", "io_scale", "in_zero"], [x]))
    g.node.append(helper.make_node("QuantizeLinear", [y, "io_scale", "out_zero"], ["y_quantized"]))
    del g.input[:]
    g.input.append(helper.make_tensor_value_info("x_quantized", TensorProto.UINT8, shape))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("y_quantized", TensorProto.UINT8, None))
    return model


def quantize_model_static(model: Any, reader: Any, quantize_static: Callable[..., Any], fmt: Any,
                          qtype: Any, every_op: bool = False, per_channel: bool = True) -> Any:
    """Run onnxruntime's ``quantize_static`` on an in-memory model through temporary files (its
    interface takes paths) with the probes' settings; returns the quantized ModelProto.
    ``every_op`` (probes) quantizes every operator's input and output whether or not its input
    already is (``ForceQuantizeNoInputCheck``), with the operators the quantizer has no rule for
    among them, as a network's operators between quantized ones read and write quantized tensors.
    ``per_channel`` weights need opset 13 (``DequantizeLinear``'s ``axis``)."""
    import tempfile
    from pathlib import Path

    import onnx

    with tempfile.TemporaryDirectory(prefix="dnnplan-qdq-") as tmp:
        src, dst = Path(tmp) / "f.onnx", Path(tmp) / "q.onnx"
        onnx.save(model, str(src))
        every = {"op_types_to_quantize": sorted({n.op_type for n in model.graph.node})} if every_op else {}
        quantize_static(str(src), str(dst), reader, quant_format=fmt.QDQ, activation_type=qtype.QUInt8,
                        weight_type=qtype.QInt8, per_channel=per_channel, **every,
                        extra_options={"ActivationSymmetric": False, "ForceQuantizeNoInputCheck": every_op})
        return onnx.load(str(dst))
