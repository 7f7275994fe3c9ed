"""Kernel configurations: what a runtime's kernel for one layer computes, in one vocabulary for
Keras, TFLite and ONNX graphs.

A per-device latency predictor (nn-Meter, Zhang et al., MobiSys 2021) describes every kernel by
its configuration -- input and output height, width and channels, kernel size, stride -- plus
derived FLOPs and parameters, and trains one regressor per kernel type on single-kernel models
("probes") with such configurations. :func:`kernel_configs` gives those configurations for the
layers of any :class:`~optimizer.graph.layergraph.LayerGraph`, so the probes a device is measured
with (:mod:`optimizer.measure.probes`) and the layers a network is priced by
(:mod:`optimizer.cost.predicted`) are described by the same code.

* ``kind`` is a canonical operator kind (:data:`OP_KINDS`), read from the importer's operator
  type (Keras class, TFLite builtin, ONNX op type; :data:`KIND_OF_OP_TYPE`);
* the geometry is per sample (batch 1): ``h_in, w_in, c_in -> h_out, w_out, c_out``, square
  kernel ``k`` and ``stride``, ``rows`` of a matrix product (tokens), ``n_in`` operands of an
  element-wise or concatenation kernel and ``bcast``, how the second operand is broadcast:
  :data:`BCAST_CHANNEL` over the spatial dimensions (a squeeze-excitation scale) or
  :data:`BCAST_SCALAR` over everything (a hard-swish's ``+ 3``, a learnable affine block's scale);
* a layer that a runtime runs as several kernels (a Keras ``SeparableConv2D`` is a depthwise and
  a 1x1 convolution; ``swish`` is a sigmoid and a multiply; ``MultiHeadAttention`` is four
  projections, two batched matrix products and a softmax) gives one configuration per kernel.

The kernel family of a configuration (:attr:`KernelConfig.family`) is the one
:func:`optimizer.graph.kernel_families.kernel_family` gives the layer (one regressor each).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields, replace

from .kernel_families import STEM_MAX_CHANNELS, channels_first
from .layergraph import Layer, LayerGraph

#: canonical operator kinds and their kernel family
KIND_FAMILY: dict[str, str] = {
    "conv": "conv", "conv_transpose": "convkxk", "dwconv": "dwconv", "fc": "fc", "bmm": "matmul",
    "max_pool": "pool", "avg_pool": "pool", "global_avg_pool": "pool", "global_max_pool": "pool",
    "add": "eltwise", "sub": "eltwise", "mul": "eltwise", "div": "eltwise", "maximum": "eltwise",
    "minimum": "eltwise", "squared_difference": "eltwise",
    "relu": "eltwise", "relu6": "eltwise", "leaky_relu": "eltwise", "prelu": "eltwise", "sigmoid": "eltwise",
    "tanh": "eltwise", "hard_sigmoid": "eltwise", "hard_swish": "eltwise", "gelu": "eltwise", "elu": "eltwise",
    "swish": "eltwise", "softmax": "eltwise", "exp": "eltwise", "sqrt": "eltwise", "rsqrt": "eltwise",
    "batch_norm": "eltwise", "layer_norm": "eltwise", "quantize": "eltwise", "dequantize": "eltwise",
    "concat": "layout", "pad": "layout", "transpose": "layout", "reshape": "layout", "slice": "layout",
    "split": "layout", "gather": "layout", "depth_to_space": "layout", "space_to_depth": "layout",
    "resize_bilinear": "resize", "resize_nearest": "resize",
    "postprocess": "postprocess", "identity": "other", "other": "other",
    # appended, so that the kinds before keep their codes (a predictor's feature)
    "unary": "eltwise",
    # a convolution's fused activation that onnxruntime's MLAS runs as a pass over its output
    # (:mod:`optimizer.cost.fusion`), priced per element where the table measured it
    "activation_pass": "eltwise",
    # copies of an input into a larger output (Tile, Expand, BROADCAST_TO; tf2onnx's nearest
    # up-sampling is a Reshape, a Tile and a Reshape), priced as the concatenation writing that output
    "tile": "layout",
    # onnxruntime's conversion of a tensor to or from its blocked NCHWc layout (:mod:`optimizer.cost.fusion`)
    "reorder": "layout",
}
OP_KINDS: tuple[str, ...] = tuple(KIND_FAMILY)
#: element-wise kinds with two (or more) operands
BINARY_KINDS: frozenset[str] = frozenset({"add", "sub", "mul", "div", "maximum", "minimum", "squared_difference"})
#: ``KernelConfig.bcast``: the second operand is as large as the first, one value per channel, or
#: one value (runtimes broadcast a scalar by a fast path of its own: onnxruntime INT8 adds one to
#: 320 x 320 x 16 in 0.32 ms, a per-channel operand in 6.0 ms, NHWC)
BCAST_NONE, BCAST_CHANNEL, BCAST_SCALAR = 0, 1, 2
#: kinds that move no data in any runtime (a reshape of a contiguous tensor is a view)
FREE_KINDS: frozenset[str] = frozenset({"identity", "reshape"})

_KINDS: dict[str, str] = {
    # Keras classes (lower case)
    "conv1d": "conv", "conv2d": "conv", "conv2dtranspose": "conv_transpose", "conv1dtranspose": "conv_transpose",
    "depthwiseconv2d": "dwconv", "depthwiseconv1d": "dwconv", "dense": "fc", "einsumdense": "fc",
    "maxpooling2d": "max_pool", "maxpooling1d": "max_pool", "averagepooling2d": "avg_pool",
    "averagepooling1d": "avg_pool", "globalaveragepooling2d": "global_avg_pool",
    "globalaveragepooling1d": "global_avg_pool", "globalmaxpooling2d": "global_max_pool",
    "globalmaxpooling1d": "global_max_pool", "adaptiveaveragepooling2d": "avg_pool",
    "adaptivemaxpooling2d": "max_pool", "multiply": "mul", "subtract": "sub", "average": "add",
    "concatenate": "concat", "leakyrelu": "leaky_relu", "batchnormalization": "batch_norm",
    "layernormalization": "layer_norm", "groupnormalization": "layer_norm", "unitnormalization": "layer_norm",
    "normalization": "batch_norm", "rescaling": "batch_norm", "flatten": "reshape", "permute": "transpose",
    "zeropadding2d": "pad", "cropping2d": "slice", "cropping1d": "slice", "repeatvector": "concat",
    "upsampling2d": "resize_nearest", "resizing": "resize_bilinear", "dropout": "identity",
    "spatialdropout2d": "identity", "spatialdropout1d": "identity", "gaussiandropout": "identity",
    "alphadropout": "identity", "embedding": "gather", "positionembedding": "add",
    "tokenandpositionembedding": "gather",
    # TFLite builtins (lower case)
    "conv2d_": "conv", "conv_2d": "conv", "depthwise_conv_2d": "dwconv", "transpose_conv": "conv_transpose",
    "fully_connected": "fc", "batch_matmul": "bmm", "max_pool_2d": "max_pool", "average_pool_2d": "avg_pool",
    "mean": "global_avg_pool", "reduce_max": "global_max_pool", "add_n": "add", "logistic": "sigmoid",
    "relu_n1_to_1": "relu6", "relu_0_to_1": "relu6", "concatenation": "concat", "pack": "concat",
    "padv2": "pad", "mirror_pad": "pad", "squeeze": "reshape", "expand_dims": "reshape",
    "strided_slice": "slice", "split_v": "split", "unpack": "split", "resize_bilinear": "resize_bilinear",
    "resize_nearest_neighbor": "resize_nearest", "log_softmax": "softmax", "l2_normalization": "layer_norm",
    "local_response_normalization": "layer_norm", "tfLite_detection_postprocess": "postprocess",
    # ONNX op types (lower case)
    "convtranspose": "conv_transpose", "qlinearconv": "conv", "convinteger": "conv", "gemm": "fc",
    "matmul": "fc", "qlinearmatmul": "fc", "matmulinteger": "fc", "maxpool": "max_pool",
    "averagepool": "avg_pool", "globalaveragepool": "global_avg_pool", "reducemean": "global_avg_pool",
    "globalmaxpool": "global_max_pool", "reducemax": "global_max_pool", "sum": "add", "max": "maximum",
    "min": "minimum", "clip": "relu6", "hardsigmoid": "hard_sigmoid", "hardswish": "hard_swish",
    "instancenormalization": "layer_norm", "lrn": "layer_norm", "unsqueeze": "reshape", "shape": "identity",
    "cast": "identity", "constant": "identity", "depthtospace": "depth_to_space",
    "spacetodepth": "space_to_depth", "upsample": "resize_nearest", "resize": "resize_nearest",
    "quantizelinear": "quantize", "dequantizelinear": "dequantize", "nonmaxsuppression": "postprocess",
    "expand": "tile", "broadcast_to": "tile",
    # one-operand element-wise passes of every format (tf2onnx writes a PReLU as Relu, Neg, Mul, Add)
    **{op: "unary" for op in ("neg", "abs", "floor", "ceil", "round", "sign", "reciprocal", "log", "erf", "sin",
                              "cos", "not", "logical_not", "square", "softplus", "softsign",
                              # a power by a constant (a GELU's cube): a per-element pass, which no runtime
                              # quantizes (onnxruntime runs it in float between conversions), not an addition
                              "pow")},
}
#: op types of every importer's spelling -> canonical kind (keys: lower case, no separators but ``_``)
KIND_OF_OP_TYPE: dict[str, str] = {**{k: k for k in OP_KINDS}, **_KINDS}
#: Keras activation functions (``Activation(fn)``, recorded as ``Activation:fn``) -> kind
_ACTIVATIONS: dict[str, str] = {
    "relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "hard_sigmoid": "hard_sigmoid", "tanh": "tanh",
    "swish": "swish", "silu": "swish", "hard_swish": "hard_swish", "hard_silu": "hard_swish", "gelu": "gelu",
    "elu": "elu", "softmax": "softmax", "exponential": "exp", "linear": "identity", "leaky_relu": "leaky_relu",
}


@dataclass(frozen=True)
class KernelConfig:
    """The configuration of one kernel (module doc); counts are per sample."""

    kind: str
    h_in: int = 1
    w_in: int = 1
    c_in: int = 1
    h_out: int = 1
    w_out: int = 1
    c_out: int = 1
    k: int = 1
    stride: int = 1
    rows: int = 1
    n_in: int = 1
    bcast: int = 0

    @property
    def family(self) -> str:
        """Kernel family (:data:`optimizer.graph.kernel_families.KERNEL_FAMILIES`) of this kernel."""
        base = KIND_FAMILY[self.kind]
        if base == "conv":
            if self.c_in <= STEM_MAX_CHANNELS:
                return "convstem"
            return "conv1x1" if self.k == 1 else "convkxk"
        if base == "dwconv":
            return "dwconv_s1" if self.stride == 1 else "dwconv_s2"
        if base == "fc":
            return "matmul" if self.rows > 1 else "dense"
        return base

    @property
    def macs(self) -> int:
        """Multiply-accumulates (the convention of :mod:`optimizer.graph.layergraph`)."""
        out_px = self.h_out * self.w_out
        if self.kind == "conv":
            return out_px * self.c_out * self.c_in * self.k * self.k
        if self.kind == "conv_transpose":
            return self.h_in * self.w_in * self.c_in * self.k * self.k * self.c_out
        if self.kind == "dwconv":
            return out_px * self.c_out * self.k * self.k
        if self.kind == "fc":
            return self.rows * self.c_in * self.c_out
        if self.kind == "bmm":
            return self.h_in * self.rows * self.c_in * self.c_out
        return 0

    @property
    def weight_elems(self) -> int:
        """Weight elements (biases included) of the kernel."""
        if self.kind in ("conv", "conv_transpose"):
            return self.k * self.k * self.c_in * self.c_out + self.c_out
        if self.kind == "dwconv":
            return self.k * self.k * self.c_out + self.c_out
        if self.kind == "fc":
            return self.c_in * self.c_out + self.c_out
        if self.kind in ("prelu", "batch_norm", "layer_norm"):
            return 2 * self.c_out
        if self.kind == "gather":
            return self.c_in * self.c_out  # vocabulary x embedding
        return 0

    @property
    def in_elems(self) -> int:
        """Activation elements read (every non-constant operand)."""
        if self.kind == "fc":
            return self.rows * self.c_in
        if self.kind == "bmm":
            return self.h_in * (self.rows * self.c_in + self.c_in * self.c_out)
        if self.kind == "gather":
            return self.rows
        one = self.h_in * self.w_in * self.c_in
        if self.kind in BINARY_KINDS:
            return one + math.prod(self.second_operand) * (self.n_in - 1)
        if self.kind == "concat":
            return self.h_in * self.w_in * self.c_out
        return one

    @property
    def second_operand(self) -> tuple[int, int, int]:
        """(height, width, channels) of a two-operand kernel's second operand (``bcast``)."""
        if self.bcast == BCAST_NONE:
            return self.h_in, self.w_in, self.c_in
        return (1, 1, self.c_in) if self.bcast == BCAST_CHANNEL else (1, 1, 1)

    @property
    def out_elems(self) -> int:
        """Activation elements written."""
        if self.kind in ("fc", "gather"):
            return self.rows * self.c_out
        if self.kind == "bmm":
            return self.h_in * self.rows * self.c_out
        return self.h_out * self.w_out * self.c_out

    def as_row(self) -> dict[str, int | str]:
        """The configuration as a flat mapping (a probe table's configuration columns)."""
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, object]) -> KernelConfig:
        """Inverse of :meth:`as_row`; keys beyond the configuration's are ignored."""
        names = {f.name for f in fields(cls)}
        values: dict[str, object] = {k: v for k, v in row.items() if k in names}
        ints = {k: int(v) for k, v in values.items() if k != "kind"}  # type: ignore[call-overload]
        return cls(kind=str(values["kind"]), **ints)


CONFIG_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(KernelConfig))


def canonical_kind(op_type: str) -> str:
    """The canonical kind (:data:`OP_KINDS`) of an importer's operator type, ``other`` if unknown.

    Keras ``Activation`` layers are recorded as ``Activation:<function>`` by the Keras importer.
    """
    head, _, fn = op_type.partition(":")
    if head.lower() == "activation":
        return _ACTIVATIONS.get(fn.lower(), "other")
    key = re.sub(r"[^a-z0-9_]", "", op_type.lower())
    if key in KIND_OF_OP_TYPE:
        return KIND_OF_OP_TYPE[key]
    return KIND_OF_OP_TYPE.get(key.replace("_", ""), "other")


def hwc_dims(shape: tuple[int, ...], first: bool) -> tuple[int, int, int]:
    """(height, width, channels) of a per-sample shape (1 where absent); vectors are channels."""
    if not shape:
        return 1, 1, 1
    if len(shape) == 1:
        return 1, 1, int(shape[0])
    first = first and len(shape) >= 3  # [rows, features] is features-last in every format
    c = int(shape[0] if first else shape[-1])
    spatial = shape[1:] if first else shape[:-1]
    h = int(spatial[0])
    w = int(math.prod(spatial[1:])) if len(spatial) > 1 else 1
    return max(h, 1), max(w, 1), max(c, 1)


def layer_kernels(layer: Layer, fmt: str = "") -> list[KernelConfig]:
    """Kernel configurations of one op-view ``layer`` of a graph imported from ``fmt`` (module doc):
    one per kernel a runtime runs for it, none for a layer no runtime computes (dropout)."""
    kind = canonical_kind(layer.op_type)
    if kind == "other":  # an op type nobody spells alike: fall back on the op family
        kind = {"conv": "conv", "dwconv": "dwconv", "dense": "fc", "pool": "avg_pool", "add": "add",
                "concat": "concat", "resize": "resize_nearest", "reshape": "reshape",
                "custom": "postprocess" if "postprocess" in layer.op_type.lower() else "other"}.get(layer.op, "other")
    if kind == "identity":
        return []
    # a softmax normalises its last axis in every format (ONNX's default axis -1 from opset 13; an
    # attention's [heads, tokens, tokens] rows of tokens, not a channel axis of heads)
    first = channels_first(fmt) and kind != "softmax"
    ins = layer.input_shapes or ((),)
    out = layer.output_shapes[0] if layer.output_shapes else ()
    h_in, w_in, c_in = hwc_dims(ins[0], first)
    h_out, w_out, c_out = hwc_dims(out, first)
    base = KernelConfig(kind, h_in, w_in, c_in, h_out, w_out, c_out, n_in=max(len(layer.input_shapes), 1))
    stride = max(1, round(h_in / h_out)) if h_out else 1
    if kind in ("conv", "dwconv"):
        if kind == "conv" and layer.op == "dwconv":
            kind = "dwconv"
        per = h_out * w_out * c_out * (1 if kind == "dwconv" else c_in)
        k = max(1, round(math.sqrt(layer.macs / per))) if per and layer.macs else 1
        if layer.op_type.lower() == "separableconv2d":  # depthwise (c_in) then pointwise (c_out)
            area = max(layer.macs / max(h_out * w_out * c_in, 1) - c_out, 1.0)
            dw = replace(base, kind="dwconv", c_out=c_in, k=max(1, round(math.sqrt(area))), stride=stride)
            return [dw, replace(base, kind="conv", h_in=h_out, w_in=w_out, k=1, stride=1)]
        return [replace(base, kind=kind, k=k, stride=stride)]
    if kind == "conv_transpose":
        per = h_in * w_in * c_in * c_out
        k = max(1, round(math.sqrt(layer.macs / per))) if per and layer.macs else 1
        return [replace(base, k=k, stride=max(1, round(h_out / max(h_in, 1))))]
    if kind == "fc":
        rows_shape = out[:-1] if len(out) > 1 else ()
        rows = int(math.prod(rows_shape)) if rows_shape else 1
        c_out_fc = int(out[-1]) if out else 1
        c_in_fc = int(layer.macs // max(rows * c_out_fc, 1)) if layer.macs else int(ins[0][-1]) if ins[0] else 1
        if len(layer.input_shapes) > 1:  # both operands are activations: a batched matrix product
            return [_bmm(layer, out)]
        if layer.op_type.lower() == "multiheadattention":
            return _attention(layer, rows, c_out_fc)
        return [KernelConfig("fc", rows=rows, c_in=max(c_in_fc, 1), c_out=c_out_fc)]
    if kind == "bmm":
        return [_bmm(layer, out)]
    if kind in ("max_pool", "avg_pool"):
        if (h_in, w_in) == (h_out, w_out) and "adaptive" in layer.op_type.lower():
            return []  # an adaptive pool to its own size
        # graphs keep no pool size: a window as large as the stride (3 for a stride-1 pool)
        return [replace(base, kind=kind, k=stride if stride > 1 else 3, stride=stride)]
    if kind in ("global_avg_pool", "global_max_pool"):
        return [replace(base, k=h_in, stride=h_in, h_out=1, w_out=1, c_out=c_in)]
    if kind in BINARY_KINDS:
        return [_binary_kernel(layer, base, out, first)]
    if kind == "swish":
        return [replace(base, kind="sigmoid", n_in=1), replace(base, kind="mul", n_in=2)]
    if kind == "tile":  # the output written from copies of the input, as a concatenation of 2 to 4 parts
        parts = min(max(round(h_out * w_out * c_out / max(h_in * w_in * c_in, 1)), 2), 4)
        return [replace(base, h_in=h_out, w_in=w_out, c_in=max(c_out // parts, 1), n_in=parts)]
    if kind == "concat":
        return [replace(base, c_in=max(c_out // max(base.n_in, 1), 1))]
    if kind == "split" and layer.output_shapes:  # a copy of each part: the slices that write them
        return [replace(base, kind="slice", n_in=1, h_out=h, w_out=w, c_out=c)
                for h, w, c in (hwc_dims(o, first) for o in layer.output_shapes)]
    if kind == "gather":
        vocab = max(layer.params // max(c_out, 1), 1)
        rows = int(math.prod(out[:-1])) if len(out) > 1 else 1
        return [KernelConfig("gather", rows=rows, c_in=vocab, c_out=c_out)]
    if kind in ("softmax", "layer_norm"):
        # rows normalised along their last axis, however the rows are laid out (bert's attention
        # softmax: 8 heads x 128 tokens of 128), as the probes sample them (rows, 1, c)
        return [replace(base, h_in=h_in * w_in, w_in=1, h_out=h_out * w_out, w_out=1, n_in=1)]
    return [replace(base, n_in=1)]


def _binary_kernel(layer: Layer, base: KernelConfig, out: tuple[int, ...], first: bool) -> KernelConfig:
    """The kernel of a two-operand element-wise layer: the larger operand's dims, broadcast when the
    operands differ in size (a constant operand is a per-channel one, a one-element operand a
    scalar: :data:`BCAST_SCALAR`). An operand varying along the
    last axis only makes it channels-last whatever the format (a Keras Normalization's mean ahead of
    an ONNX file's first transpose: ``[1, 224, 224, 3] - [1, 1, 1, 3]``)."""
    shapes = layer.input_shapes
    if len(shapes) >= 2:
        sizes = [math.prod(s) if s else 1 for s in shapes]
        bcast = BCAST_NONE if min(sizes) == max(sizes) else BCAST_SCALAR if min(sizes) == 1 else BCAST_CHANNEL
        big, small = shapes[sizes.index(max(sizes))], shapes[sizes.index(min(sizes))]
        last = bcast == BCAST_CHANNEL and bool(small) and small[-1] > 1 and all(d == 1 for d in small[:-1])
        n = len(shapes)
    else:  # a constant operand: ``params`` elements
        big = shapes[0] if shapes else ()
        bcast, n = BCAST_SCALAR if layer.params == 1 else BCAST_CHANNEL, 2
        last = bool(big) and layer.params > 1 and big[-1] == layer.params != big[0]
    last = last and first and len(big) >= 3
    if len(shapes) < 2 and not last:
        return replace(base, n_in=2, bcast=bcast)  # a per-channel constant (a folded scale) or a scalar
    h_in, w_in, c_in = hwc_dims(big, first and not last)
    h_out, w_out, c_out = hwc_dims(out, first and not last)
    return replace(base, h_in=h_in, w_in=w_in, c_in=c_in, h_out=h_out, w_out=w_out, c_out=c_out, n_in=n, bcast=bcast)


def _bmm(layer: Layer, out: tuple[int, ...]) -> KernelConfig:
    """A batched matrix product ``[B, M, K] x [B, K, N]`` from its per-sample output ``[..., M, N]``
    and MACs (``B M K N``)."""
    n = int(out[-1]) if out else 1
    m = int(out[-2]) if len(out) > 1 else 1
    batch = int(math.prod(out[:-2])) if len(out) > 2 else 1
    inner = int(layer.macs // max(batch * m * n, 1)) if layer.macs else 1
    return KernelConfig("bmm", h_in=batch, h_out=batch, rows=m, c_in=max(inner, 1), c_out=n)


def _attention(layer: Layer, tokens: int, dim: int) -> list[KernelConfig]:
    """Kernels of a Keras ``MultiHeadAttention`` self-attention over ``tokens`` x ``dim``: the Q, K,
    V projections, the two batched products, the softmax over every head's rows (the layer's
    ``heads``) and the output projection (heads merged in the products: ``heads x key_dim`` from
    the parameter count ``4 D (H d) + 3 (H d) + D``)."""
    inner = max(1, round((layer.params - dim) / (4 * dim + 3))) if layer.params else dim
    proj = KernelConfig("fc", rows=tokens, c_in=dim, c_out=inner)
    heads = max(layer.heads, 1)  # the softmax normalises heads x tokens rows of tokens
    return [proj, proj, proj,
            KernelConfig("bmm", h_in=1, rows=tokens, c_in=inner, c_out=tokens),
            KernelConfig("softmax", h_in=heads * tokens, c_in=tokens, h_out=heads * tokens, c_out=tokens),
            KernelConfig("bmm", h_in=1, rows=tokens, c_in=tokens, c_out=inner),
            KernelConfig("fc", rows=tokens, c_in=inner, c_out=dim)]


def graph_kernels(graph: LayerGraph) -> list[list[KernelConfig]]:
    """:func:`layer_kernels` of every layer of an op-view ``graph``."""
    if graph.granularity != "op":
        raise ValueError(f"graph_kernels needs the op view, got {graph.granularity!r}")
    return [layer_kernels(la, graph.fmt) for la in graph.layers]
