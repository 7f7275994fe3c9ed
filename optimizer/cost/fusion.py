"""Runtime fusion rules: which layers a runtime folds into a neighbour's kernel (nn-Meter's kernel
detection, Zhang et al., MobiSys 2021: predict per kernel, after the runtime's fusion rules).

:func:`runtime_kernels` gives, for every op-view layer, the kernels a runtime runs for it
(:func:`optimizer.graph.kernel_config.layer_kernels`), or none when the runtime folds the layer
into the kernel that produces its input (or, for a padding, that consumes its output):

* in every runtime: a batch-norm, or a multiply/add by a per-channel constant, on the output of
  a convolution or fully connected layer is folded into its weights (the TFLite converter;
  onnxruntime's ``ConvBNFusion``/``ConvMulFusion``/``ConvAddFusion``); ReLU and ReLU6 clamp the
  output of a convolution, fully connected layer, addition or pooling in place (TFLite's
  ``fused_activation_function``, XNNPACK's output clamps; onnxruntime's ``FusedConv`` and
  ``FusedGemm``, for convolutions and matrix products only); a zero padding read only by a
  convolution or pooling becomes that kernel's padding (the TFLite converter; onnxruntime's
  ``PadFusion``); reshapes, dropout and identities move no data (onnxruntime still runs a
  reshape, a shape or a cast as a node, charged a node's overhead: :func:`runtime_nodes`);
* onnxruntime also fuses sigmoid, tanh, leaky ReLU and hard sigmoid into a convolution
  (``FusedConv``'s MLAS activations), and at FP32 a swish, ``x * sigmoid(x)``, into one
  ``QuickGelu`` kernel priced as the sigmoid (``QuickGeluFusion``; timed against the sigmoid alone
  on eight shapes of efficientnet_b0 and YOLOv8n: 0.88-1.06x, where a sigmoid and a product had
  priced it 1.8-2.2x): :func:`fuse_swish`; and the tanh approximation of a GELU,
  ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, into one ``FastGelu`` node priced as the
  tanh and the product writing its output (``FastGeluFusion``, which leaves a GELU writing a graph
  output alone; timed over six shapes of 64-3072 channels: 1.12-1.53x those two, 1.9-2.5x the tanh
  alone, where its eight passes had priced it about 3x): :func:`tanh_gelus`.
  Its softmax over an axis other than the last is that axis transposed to the last, the softmax,
  and the transpose back (:func:`transposed_softmax`).

A QDQ file (onnxruntime's static quantizer) dequantizes each weight with a ``DequantizeLinear``
of its own, a layer with no activation input: a matrix product reading such a layer's output
reads a weight, and is priced as the fully connected kernel onnxruntime runs for it
(``QLinearMatMul``/``QGemm``), not as a product of two activations. Its ``QuantizeLinear`` and
``DequantizeLinear`` layers get no kernel of their own: onnxruntime fuses them with the operator
between them into a ``QLinear*`` kernel, drops them around an operator that moves 8-bit data
(pooling, transpose, resize), or runs them beside a float operator (a negation, a subtraction),
and an INT8 probe times its operator between the same conversions
(:mod:`optimizer.measure.probe_onnx`), so they are in the operator's price; a
``DequantizeLinear`` a ``Shape`` reads is a kernel of its own (a dequantization of the tensor).
A ReLU on a float operator's output folds into the ``QuantizeLinear`` after it
(``ReluQuantFusion``).

onnxruntime runs FP32 convolutions in its blocked NCHWc layout (``NchwcTransformer``), and with
them the pooling, additions, products, concatenations and fused activations that read only NCHWc
tensors (:func:`nchwc_layout`: a depthwise convolution of any channels, a convolution's output
padded to the block, pooling and concatenation of whole blocks only); every other reader of an
NCHWc tensor (a negation, a PReLU, a resize of another interpolation, a reshape, an addition of a
constant, the graph's output) gets a ``ReorderOutput``, and a depthwise convolution, a pooling or
a convolution of at least one block of input channels whose input is not NCHWc gets a
``ReorderInput`` (:func:`nchwc_reorders`; the tensors of every zoo and public network's optimized
graph but a few 1 x 1 ones of the PaddleOCR files). Each reorder is a ``reorder`` kernel of its tensor, charged to the layer that needs it and
priced as a transpose of the tensor (``predicted.STAND_IN_KINDS``). A QDQ file's
convolutions are onnxruntime's NHWC ``QLinearConv`` and have none. MLAS fuses a ReLU into its NCHWc
convolution kernel but runs any other fused activation (ReLU6's ``Clip``, a sigmoid, a leaky ReLU)
as a pass over the convolution's output: a kernel of kind ``activation_pass`` charged to the
convolution (mobilenet_v2's 35 clips: 1.6 of its 8.0 ms, timed with and without them). An
addition of two blocked tensors of one shape folds into the convolution writing one of them, which
accumulates into it, and so does a ReLU after it (:func:`fuse_nchwc_sums`).

A layer reached through folded layers (conv -> batch-norm -> ReLU) fuses as if it followed the
convolution directly; a kernel takes one activation. Only a layer whose input is read by nothing
else is folded.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..graph.kernel_config import (BCAST_CHANNEL, BCAST_NONE, BINARY_KINDS, FREE_KINDS, KernelConfig, canonical_kind,
                                   hwc_dims, layer_kernels)
from ..graph.kernel_families import channels_first
from ..graph.layergraph import Layer, LayerGraph

_COMPUTE = frozenset({"conv", "dwconv", "conv_transpose", "fc"})
_CLAMPS = frozenset({"relu", "relu6"})
#: runtime -> activation kinds fused into a convolution (beyond the clamps)
CONV_ACTIVATIONS: dict[str, frozenset[str]] = {
    "onnxruntime": frozenset({"sigmoid", "tanh", "leaky_relu", "hard_sigmoid"}),
}
#: runtime -> producer kinds a clamp (ReLU/ReLU6) fuses into
CLAMP_PRODUCERS: dict[str, frozenset[str]] = {
    "onnxruntime": frozenset({"conv", "dwconv", "conv_transpose", "fc"}),
}
_DEFAULT_CLAMP_PRODUCERS = frozenset({"conv", "dwconv", "conv_transpose", "fc", "add", "sub", "mul", "max_pool",
                                      "avg_pool"})


def runtime_family(runtime: str | None) -> str:
    """The rule set of a runtime name: ``onnxruntime`` for onnxruntime ones, else TFLite's."""
    return "onnxruntime" if runtime and ("onnx" in runtime or runtime.startswith("ort")) else "tflite"


#: onnxruntime operators that run as nodes of their own without moving data a probe times (shape
#: arithmetic, views): each costs a node's overhead (retinaface's INT8 file runs 56 of them)
ORT_BARE_NODES = frozenset({"shape", "cast", "reshape", "squeeze", "unsqueeze", "flatten", "size", "range",
                            "constantofshape"})


def runtime_nodes(graph: LayerGraph, runtime: str | None, kernels: list[list[KernelConfig]]) -> list[int]:
    """Nodes the runtime runs for each layer of ``graph`` given its ``kernels``
    (:func:`runtime_kernels`): one per kernel (a fused activation's pass is none), and one for an
    onnxruntime operator of :data:`ORT_BARE_NODES` that runs no priced kernel."""
    bare = runtime_family(runtime) == "onnxruntime"
    return [sum(k.kind != "activation_pass" for k in ks)
            or int(bare and la.op_type.lower() in ORT_BARE_NODES)
            for la, ks in zip(graph.layers, kernels, strict=True)]


def runtime_kernels(graph: LayerGraph, runtime: str | None, dtype: str = "fp32") -> list[list[KernelConfig]]:
    """Kernels ``runtime`` runs for each layer of the op-view ``graph`` at ``dtype`` (module doc):
    an empty list for a layer folded away or moving no data."""
    rules = runtime_family(runtime)
    out, folded_into, kinds = _fused_kernels(graph, rules, dtype)
    if rules == "onnxruntime" and _quantized(kinds):
        # a QDQ file's conversions run inside their operators' kernels (QLinear*) or beside them, and
        # an INT8 probe times its operator with them; so does a clamp on a float operator (module doc)
        return [layer_kernels(graph.layers[i], graph.fmt)
                if _dequantized_for_a_shape(graph, i, kinds) or _converts_at_the_boundary(graph, i, kinds)
                else [] if k in QDQ_KINDS or _clamps_into_quantize(graph, i, kinds) else ks
                for i, (k, ks) in enumerate(zip(kinds, out, strict=True))]
    if _runs_nchwc(rules, dtype, kinds):
        fuse_swish(graph, kinds, out)
        for g, region in tanh_gelus(graph, kinds):  # one FastGelu kernel each (module doc)
            tanh = next(j for j in region if kinds[j] == "tanh")
            out[g] = out[tanh] + out[g]
            for j in region - {g}:
                out[j] = []
        layout = nchwc_layout(graph, kinds, folded_into)
        fuse_nchwc_sums(graph, kinds, out, folded_into, layout[0])
        for i, extra in nchwc_reorders(graph, kinds, layout).items():
            out[i] = out[i] + extra
    return out


def _fused_kernels(graph: LayerGraph, rules: str, dtype: str = "fp32"
                   ) -> tuple[list[list[KernelConfig]], list[int | None], list[str]]:
    """Every layer's kernels after the fusion rules of ``rules``, the layer each folded layer
    folded into, and every layer's kind."""
    conv_acts = CONV_ACTIVATIONS.get(rules, frozenset())
    kinds = [canonical_kind(la.op_type) for la in graph.layers]
    nchwc = _runs_nchwc(rules, dtype, kinds)
    clamp_into = CLAMP_PRODUCERS.get(rules, _DEFAULT_CLAMP_PRODUCERS)
    # an op type every importer spells differently: its kernel's kind; of a layer of several
    # kernels, the last's, which writes its output (a separable convolution's pointwise one takes
    # its batch norm and ReLU)
    for i, la in enumerate(graph.layers):
        if kinds[i] == "other":
            ks = layer_kernels(la, graph.fmt)
            kinds[i] = ks[-1].kind if ks else kinds[i]
        elif kinds[i] == "conv" and graph.fmt == "onnx":  # an ONNX Conv of one group per channel
            ks = layer_kernels(la, graph.fmt)
            kinds[i] = "dwconv" if ks and ks[-1].kind == "dwconv" else kinds[i]
    folded_into: list[int | None] = [None] * len(graph.layers)
    activated: set[int] = set()  # kernels that already took an activation (a kernel fuses one)
    out: list[list[KernelConfig]] = []
    for i, la in enumerate(graph.layers):
        kernels = layer_kernels(_weights_as_constants(graph, la) if kinds[i] == "fc" else la, graph.fmt)
        kind = kinds[i]
        if kind == "prelu" and graph.fmt in ("keras", "zoo") and kernels:  # a converter rewrites a Keras PReLU
            kernels = exported_prelu(kernels[0], rules, dtype)
        if kind == "swish" and nchwc:  # one QuickGelu (fuse_swish)
            kernels = kernels[:1]
        if kind == "softmax" and nchwc and la.axis >= 0 and kernels:
            kernels = transposed_softmax(la, kernels[0])
        base = _producer_kernel(graph, i, folded_into)
        base_kind = kinds[base] if base is not None else None
        fold = False
        if kind in FREE_KINDS:
            fold = True
        elif base_kind is not None:
            # onnxruntime folds a per-channel constant into an NCHWc convolution, not a one-element one
            # (but a 0-d multiplier, which the layer's constant count does not tell apart)
            constant_operand = kind in BINARY_KINDS and len(la.input_shapes) == 1 and not (nchwc and la.params == 1)
            if (kind == "batch_norm" or constant_operand) and base_kind in _COMPUTE:
                fold = True
            elif base not in activated and ((kind in _CLAMPS and base_kind in clamp_into)
                                            or (kind in conv_acts and base_kind in ("conv", "dwconv"))):
                fold = True
                activated.add(base)  # type: ignore[arg-type]
                if (nchwc and kind != "relu" and base is not None
                        and _nchwc_blocked(graph, base, channels_first(graph.fmt), base_kind)):
                    # MLAS's pass over the output (module doc)
                    out[base] = out[base] + [replace(k, kind="activation_pass") for k in kernels]
        if not fold and kind == "pad" and _pads_for_consumer(graph, i, kinds, rules):
            fold = True
        if fold:
            folded_into[i] = base if base is not None else i
            out.append([])
        else:
            out.append(kernels)
    return out, folded_into, kinds


def fuse_swish(graph: LayerGraph, kinds: list[str], out: list[list[KernelConfig]]) -> None:
    """Price, in place, each product ``x * sigmoid(x)`` whose sigmoid only it reads as the one
    ``QuickGelu`` kernel onnxruntime runs for both at FP32 (module doc): the product takes the
    sigmoid's kernel, the sigmoid none. The sigmoid keeps its place in the NCHWc layout, which
    ``QuickGelu`` keeps (no reorder between a convolution and it)."""
    for i, la in enumerate(graph.layers):
        acts = [t for t in la.inputs if t in graph.tensors]
        if kinds[i] != "mul" or len(acts) != 2 or not out[i]:
            continue
        for s, x in (acts, acts[::-1]):
            j = graph.tensors[s].producer
            if (j >= 0 and kinds[j] == "sigmoid" and out[j] and list(graph.layers[j].inputs) == [x]
                    and list(graph.tensors[s].consumers) == [i]):
                out[i], out[j] = out[j], []
                break


def transposed_softmax(layer: Layer, softmax: KernelConfig) -> list[KernelConfig]:
    """The kernels onnxruntime FP32 runs for a softmax over a per-sample axis other than the last
    (``layer.axis``): the axis transposed to the last, the softmax over its rows, and the transpose
    back (its ``Softmax`` kernel does so inside the node: bert_small's attention softmax over axis 2 of
    ``[1, 8, 128, 128]`` takes 275 us in the network against 62 us for the same rows over the last
    axis). Each transpose swaps the axis with the axes after it, per block of the axes before it."""
    shape = layer.input_shapes[0]
    axis = shape[layer.axis]
    outer, inner = math.prod(shape[:layer.axis]), math.prod(shape[layer.axis + 1:])
    rows = outer * inner
    return [KernelConfig("transpose", inner, outer, axis, inner, outer, axis),
            replace(softmax, h_in=rows, w_in=1, c_in=axis, h_out=rows, w_out=1, c_out=axis),
            KernelConfig("transpose", axis, outer, inner, axis, outer, inner)]


def tanh_gelus(graph: LayerGraph, kinds: list[str]) -> list[tuple[int, set[int]]]:
    """The tanh-approximated GELUs onnxruntime fuses into ``FastGelu`` at FP32, as (the product
    writing the GELU, the GELU's layers): ``x * 0.5 * (1 + tanh(c * (x + k * x^3)))`` with its
    constant operands in either order (tf2onnx's export of a Keras ``gelu(approximate=True)``),
    each intermediate read only inside it and its output read by a layer (not a graph output)."""
    n = len(graph.layers)

    def acts(i: int) -> list[str]:
        return [t for t in graph.layers[i].inputs if t in graph.tensors]

    def only_reader(i: int) -> int | None:
        outs = graph.layers[i].outputs
        readers = graph.tensors[outs[0]].consumers if len(outs) == 1 and outs[0] in graph.tensors else ()
        return readers[0] if len(readers) == 1 and readers[0] < n else None

    def single_input(i: int | None, kind: str) -> str | None:
        """The one activation input of layer ``i`` when it is of ``kind`` with a constant operand."""
        if i is None or i < 0 or kinds[i] != kind or len(acts(i)) != 1:
            return None
        return acts(i)[0]

    found = []
    for t in range(n):
        if kinds[t] != "tanh" or len(acts(t)) != 1:
            continue
        scale = graph.tensors[acts(t)[0]].producer  # c * (x + k x^3)
        inner = single_input(scale, "mul")
        add = graph.tensors[inner].producer if inner is not None else -1
        if only_reader(scale) != t or add < 0 or kinds[add] != "add" or len(acts(add)) != 2 or only_reader(add) != scale:
            continue
        found_x = None
        for x, cube_t in (acts(add), acts(add)[::-1]):
            cube_scale = graph.tensors[cube_t].producer  # k * x^3
            cube = single_input(cube_scale, "mul")
            power = graph.tensors[cube].producer if cube is not None else -1
            if (power >= 0 and single_input(power, "unary") == x and only_reader(power) == cube_scale
                    and only_reader(cube_scale) == add):
                found_x, region = x, {t, scale, add, cube_scale, power}
                break
        one = only_reader(t)  # 1 + tanh(...)
        if found_x is None or one is None or single_input(one, "add") is None:
            continue
        g = only_reader(one)  # (0.5 x) * (1 + tanh)
        if g is None or kinds[g] != "mul" or len(acts(g)) != 2:
            continue
        other = next(u for u in acts(g) if u != graph.layers[one].outputs[0])
        half = graph.tensors[other].producer
        if single_input(half, "mul") != found_x or only_reader(half) != g:
            continue
        readers = graph.tensors[graph.layers[g].outputs[0]].consumers
        if not readers or any(c >= n for c in readers):
            continue  # a graph output: onnxruntime leaves it unfused
        found.append((g, region | {one, g, half}))
    return found


def exported_prelu(prelu: KernelConfig, rules: str, dtype: str) -> list[KernelConfig]:
    """The kernels of a Keras PReLU once converted for ``rules``' runtime at ``dtype``. tf2onnx
    writes Keras 3's ``relu(x) - alpha * relu(-x)`` as it is: ``Relu``, ``Neg``, ``Relu``, a ``Mul``
    by the per-channel slopes and an ``Add`` (arcface_mobilenet's 33 PReLUs, priced as
    onnxruntime's ``PRelu``: 15 ms of a 21 ms prediction, against 11.5 ms profiled for the whole
    exported network); quantized, the ReLU after the ``Neg`` folds into its ``QuantizeLinear``, as
    in a QDQ file's own kernel view (:func:`_clamps_into_quantize`). The TFLite converter writes
    ``PRELU`` at FP32, and at INT8 a per-channel ``MUL`` and an ``ADD`` (XNNPACK's INT8 ``PRELU``
    probe had priced arcface_mobilenet's graph at 5× its file)."""
    binary = replace(prelu, n_in=2)
    scale_and_sum = [replace(binary, kind="mul", bcast=BCAST_CHANNEL), replace(binary, kind="add", bcast=BCAST_NONE)]
    if rules != "onnxruntime":
        return scale_and_sum if dtype == "int8" else [prelu]
    relu = replace(prelu, kind="relu")
    return [relu, replace(prelu, kind="unary"), *([] if dtype == "int8" else [relu]), *scale_and_sum]


#: kinds onnxruntime's NCHWc transformer runs blocked when every activation input is NCHWc
#: (``TransformBinary``, ``TransformConcat``, ``TransformActivation``, ``TransformPool``,
#: ``TransformBatchNormalization``; :func:`_reads_nchwc`); any other activation (a ReLU6's ``Clip``,
#: a leaky ReLU) is blocked only fused into the convolution before it
NCHWC_READERS = frozenset({"global_avg_pool", "global_max_pool", "add", "mul", "concat", "relu", "sigmoid",
                           "tanh", "swish", "batch_norm", "pad", "resize_nearest", "resize_bilinear"})
#: the resizes onnxruntime runs as a blocked ``Upsample`` (``TransformResize``; integer spatial scales):
#: ``mode/coordinate_transformation_mode/nearest_mode`` (``Layer.interpolation``), a nearest one only
#: mapping asymmetrically and rounding down
NCHWC_RESIZES = ("nearest/asymmetric/floor", "linear/half_pixel/", "linear/asymmetric/", "linear/align_corners/")
#: kinds onnxruntime converts to NCHWc whatever their input's layout (a ``ReorderInput`` when it is not)
NCHWC_CONVERTERS = frozenset({"conv", "dwconv", "max_pool", "avg_pool"})
#: MLAS's NCHWc block (16 channels with AVX-512, 8 with AVX2): a convolution with fewer input
#: channels reads NCHW directly, one with more needs a multiple of ``NCHWC_ALIGN``; output channels
#: are padded to the block; pooling and concatenation need whole blocks (:func:`_nchwc_blocked`)
NCHWC_BLOCK, NCHWC_ALIGN = 16, 4


#: a QDQ file's conversion kinds (``QuantizeLinear``, ``DequantizeLinear``)
QDQ_KINDS = frozenset({"quantize", "dequantize"})


def _quantized(kinds: list[str]) -> bool:
    return any(k in QDQ_KINDS for k in kinds)


def _runs_nchwc(rules: str, dtype: str, kinds: list[str]) -> bool:
    """Whether onnxruntime runs the graph's convolutions in NCHWc (FP32; a QDQ file's or an INT8
    model's convolutions are NHWC ``QLinearConv``)."""
    return rules == "onnxruntime" and dtype != "int8" and not _quantized(kinds)


def _producer_blocked(graph: LayerGraph, t: str, blocked: list[bool]) -> bool:
    """Whether the layer writing tensor ``t`` (none for a graph input) runs NCHWc."""
    p = graph.tensors[t].producer
    return p >= 0 and blocked[p]


def nchwc_layout(graph: LayerGraph, kinds: list[str], folded_into: list[int | None]
                 ) -> tuple[list[bool], list[bool]]:
    """Which layers onnxruntime runs in its NCHWc layout (module doc), and which of those read
    their input blocked (a convolution of at least one block of input channels)."""
    first = channels_first(graph.fmt)
    n = len(graph.layers)
    blocked = [False] * n
    wide_input = [False] * n
    for i, la in enumerate(graph.layers):
        acts = [t for t in la.inputs if t in graph.tensors]
        if kinds[i] in NCHWC_CONVERTERS and la.output_shapes and acts and folded_into[i] is None:
            blocked[i] = _nchwc_blocked(graph, i, first, kinds[i])
            # a convolution of fewer channels than a block reads NCHW; the others read blocks
            wide_input[i] = blocked[i] and (kinds[i] != "conv"
                                            or hwc_dims(graph.tensors[acts[0]].shape, first)[2] >= NCHWC_BLOCK)
        elif folded_into[i] not in (None, i) and kinds[i] not in FREE_KINDS:  # fused into its kernel
            blocked[i] = blocked[folded_into[i]]  # type: ignore[index]
        elif kinds[i] in NCHWC_READERS and acts:
            blocked[i] = _reads_nchwc(graph, i, kinds, first) and all(_producer_blocked(graph, t, blocked)
                                                                         for t in acts)
    return blocked, wide_input


def _reads_nchwc(graph: LayerGraph, i: int, kinds: list[str], first: bool) -> bool:
    """Whether the reader ``i`` (:data:`NCHWC_READERS`) can run on blocked inputs: an addition or
    product of two or more tensors of one shape (one with a constant operand is not transformed), a
    concatenation over channels of whole blocks, a global pooling of whole blocks, a padding that
    onnxruntime fuses into the convolution reading it, a resize of :data:`NCHWC_RESIZES`."""
    la, kind = graph.layers[i], kinds[i]
    if kind == "pad":
        return _pads_for_consumer(graph, i, kinds, "onnxruntime")
    if kind in ("resize_nearest", "resize_bilinear"):
        if not la.output_shapes or len(la.input_shapes) != 1:
            return False
        (h, w, c), (h_out, w_out, c_out) = hwc_dims(la.input_shapes[0], first), hwc_dims(la.output_shapes[0], first)
        mode = la.interpolation if la.interpolation.startswith("nearest") else la.interpolation.rsplit("/", 1)[0] + "/"
        return mode in NCHWC_RESIZES and c == c_out and h > 0 and w > 0 and h_out % h == 0 and w_out % w == 0
    shapes = [graph.tensors[t].shape for t in la.inputs if t in graph.tensors]
    if kind in ("add", "mul"):
        return len(shapes) >= 2 and len(shapes) == len(la.input_shapes) and len(set(shapes)) == 1
    channels = [hwc_dims(s, first)[2] for s in shapes]
    if kind == "concat":
        spatial = {hwc_dims(s, first)[:2] for s in shapes}
        out = hwc_dims(la.output_shapes[0], first) if la.output_shapes else None
        return (len(spatial) == 1 and out is not None and out[2] == sum(channels)
                and all(c % NCHWC_BLOCK == 0 for c in channels))
    if kind in ("global_avg_pool", "global_max_pool"):
        return all(c % NCHWC_BLOCK == 0 for c in channels)
    return True


def nchwc_reorders(graph: LayerGraph, kinds: list[str], layout: tuple[list[bool], list[bool]]
                   ) -> dict[int, list[KernelConfig]]:
    """The layout conversions onnxruntime adds around its NCHWc layers (:func:`nchwc_layout`), as
    ``reorder`` kernels per layer index."""
    first = channels_first(graph.fmt)
    n = len(graph.layers)
    blocked, wide_input = layout
    extra: dict[int, list[KernelConfig]] = {}

    def reorder(t: str) -> KernelConfig:
        h, w, c = hwc_dims(graph.tensors[t].shape, first)
        return KernelConfig("reorder", h, w, c, h, w, c)

    for i, la in enumerate(graph.layers):
        acts = [t for t in la.inputs if t in graph.tensors]
        if wide_input[i] and not _producer_blocked(graph, acts[0], blocked):
            extra.setdefault(i, []).append(reorder(acts[0]))
    for i, la in enumerate(graph.layers):
        if not blocked[i]:
            continue
        for t in la.outputs:
            readers = graph.tensors[t].consumers if t in graph.tensors else ()
            if any(c >= n or not (blocked[c] and (kinds[c] not in NCHWC_CONVERTERS or wide_input[c])
                                  or _to_channels_last(graph, c, kinds))
                   for c in readers):
                extra.setdefault(i, []).append(reorder(t))
    return extra


def _to_channels_last(graph: LayerGraph, i: int, kinds: list[str]) -> bool:
    """A transpose of a ``(C, H, W)`` tensor to ``(H, W, C)``: onnxruntime writes it from the
    blocked tensor as one channels-last ``ReorderOutput`` (``TransformTranspose``), the transpose
    kernel it is priced as, with no reorder before it."""
    la = graph.layers[i]
    if kinds[i] != "transpose" or len(la.input_shapes) != 1 or not la.output_shapes:
        return False
    src, dst = la.input_shapes[0], la.output_shapes[0]
    return len(src) == 3 and tuple(dst) == (src[1], src[2], src[0])


def fuse_nchwc_sums(graph: LayerGraph, kinds: list[str], out: list[list[KernelConfig]],
                    folded_into: list[int | None], blocked: list[bool]) -> None:
    """Fold, in place, each addition of two same-shaped NCHWc tensors into the convolution that
    produces one of them, and a ReLU after it too (onnxruntime's ``TransformBinary`` and
    ``TransformActivation``): the convolution accumulates into its sum input and clamps. The
    first operand's convolution is tried first; it must write only this addition's input, not
    have taken an activation, and not read a per-channel scaling (:func:`_reads_a_channel_scaling`)."""
    n = len(graph.layers)
    activations = _CLAMPS | CONV_ACTIVATIONS["onnxruntime"]
    activated = {folded_into[j] for j in range(n) if folded_into[j] not in (None, j) and kinds[j] in activations}
    for i, la in enumerate(graph.layers):
        acts = [t for t in la.inputs if t in graph.tensors]
        if (kinds[i] != "add" or folded_into[i] is not None or not blocked[i] or len(acts) != 2
                or len({graph.tensors[t].shape for t in acts}) != 1):
            continue
        for t in acts:
            tensor = graph.tensors[t]
            p = tensor.producer
            if p < 0 or len(tensor.consumers) != 1 or len(graph.layers[p].outputs) != 1:
                continue
            k: int = folded_into[p] if folded_into[p] is not None else p  # type: ignore[assignment]
            if kinds[k] in ("conv", "dwconv") and k not in activated and not _reads_a_channel_scaling(graph, k, kinds):
                folded_into[i], out[i] = k, []
                _fold_relu_after(graph, i, k, kinds, out, folded_into)
                activated.add(k)
                break


def _fold_relu_after(graph: LayerGraph, i: int, k: int, kinds: list[str], out: list[list[KernelConfig]],
                     folded_into: list[int | None]) -> None:
    """Fold a ReLU reading only the output of the addition ``i``, now summed by ``k``, into ``k``."""
    la = graph.layers[i]
    if len(la.outputs) != 1 or la.outputs[0] not in graph.tensors:
        return
    readers = graph.tensors[la.outputs[0]].consumers
    if len(readers) == 1 and readers[0] < len(graph.layers) and kinds[readers[0]] == "relu":
        folded_into[readers[0]], out[readers[0]] = k, []


def _dequantized_for_a_shape(graph: LayerGraph, i: int, kinds: list[str]) -> bool:
    """A QDQ file's ``DequantizeLinear`` of an activation that a ``Shape`` reads: onnxruntime gives
    each reader of a shared conversion one of its own, and the ``Shape``'s stays a kernel, which
    dequantizes the whole tensor (22 in efficientdet_lite0's optimized graph, 1.8 M elements)."""
    la = graph.layers[i]
    if kinds[i] != "dequantize" or not la.inputs or la.inputs[0] not in graph.tensors:
        return False  # a weight's conversion reads an initializer, no activation
    n = len(graph.layers)
    return any(c < n and graph.layers[c].op_type == "Shape"
               for t in la.outputs if t in graph.tensors for c in graph.tensors[t].consumers)


def _converts_at_the_boundary(graph: LayerGraph, i: int, kinds: list[str]) -> bool:
    """A QDQ file's ``QuantizeLinear`` of a graph input or ``DequantizeLinear`` of a graph output:
    the float tensors the network takes and returns, converted by no operator's probe (an INT8
    probe reads and writes 8-bit tensors): kernels of their own (nudenet's 320 x 320 x 3 input,
    1.2 % of the network)."""
    la = graph.layers[i]
    if kinds[i] == "quantize":
        return bool(la.inputs) and la.inputs[0] in graph.inputs
    return kinds[i] == "dequantize" and bool(la.outputs) and any(t in graph.outputs for t in la.outputs)


def _clamps_into_quantize(graph: LayerGraph, i: int, kinds: list[str]) -> bool:
    """A QDQ file's ReLU or ReLU6 on the output of a float operator (a negation): onnxruntime
    folds it into the ``QuantizeLinear`` after it (``ReluQuantFusion``/``ClipQuantFusion``), whose
    range clamps alike. A ReLU reading a ``DequantizeLinear`` is those two conversions, its probe."""
    la = graph.layers[i]
    if kinds[i] not in _CLAMPS or not la.inputs or la.inputs[0] not in graph.tensors:
        return False
    p = graph.tensors[la.inputs[0]].producer
    return p >= 0 and kinds[p] not in QDQ_KINDS


def _weights_as_constants(graph: LayerGraph, la: Layer) -> Layer:
    """``la`` without the inputs whose producer reads no activation (a QDQ file's weight
    ``DequantizeLinear``, a ``Constant``), when an activation input remains (module doc)."""
    if len(la.inputs) != len(la.input_shapes) or len(la.inputs) < 2:
        return la
    keep = [k for k, t in enumerate(la.inputs)
            if graph.tensors[t].producer < 0 or graph.layers[graph.tensors[t].producer].inputs]
    if not keep or len(keep) == len(la.inputs):
        return la
    return replace(la, inputs=tuple(la.inputs[k] for k in keep), input_shapes=tuple(la.input_shapes[k] for k in keep))


def _reads_a_channel_scaling(graph: LayerGraph, i: int, kinds: list[str]) -> bool:
    """Whether layer ``i`` reads a product by a per-channel activation (a squeeze-and-excitation's
    scale): onnxruntime cannot prove that such a convolution's output has its addend's shape (the
    scale's batch dimension comes from a reshape) and adds the two as reshaped blocked tensors
    instead of fusing the sum (efficientnet_b0's ten additions; onnxruntime's ``TransformBinary``)."""
    acts = [t for t in graph.layers[i].inputs if t in graph.tensors]
    p = graph.tensors[acts[0]].producer if acts else -1
    if p < 0:
        return False
    shapes = graph.layers[p].input_shapes
    return kinds[p] == "mul" and len(shapes) == 2 and shapes[0] != shapes[1]


def _nchwc_blocked(graph: LayerGraph, i: int, first: bool, kind: str) -> bool:
    """Whether onnxruntime runs the convolution or pooling ``i`` of kind ``kind`` in its NCHWc
    layout (``TransformConv``, ``TransformPool``): a depthwise convolution of any channels, a
    convolution of fewer input channels than a block or of a multiple of ``NCHWC_ALIGN`` (its
    output channels padded to the block), a pooling of whole blocks (checked against onnxruntime's
    optimized graphs in the tests)."""
    la = graph.layers[i]
    acts = [t for t in la.inputs if t in graph.tensors]
    if not la.output_shapes or not acts:
        return False
    c_in = hwc_dims(graph.tensors[acts[0]].shape, first)[2]
    if kind == "dwconv":
        return True
    if kind in ("max_pool", "avg_pool"):
        return c_in % NCHWC_BLOCK == 0
    return c_in < NCHWC_BLOCK or c_in % NCHWC_ALIGN == 0


def _producer_kernel(graph: LayerGraph, i: int, folded_into: list[int | None]) -> int | None:
    """The layer whose kernel layer ``i`` would fold into: the producer of its only activation
    input when ``i`` is that tensor's only reader, through layers already folded."""
    la = graph.layers[i]
    if len(la.inputs) != 1:
        return None
    t = graph.tensors[la.inputs[0]]
    if t.producer < 0 or len(t.consumers) != 1 or len(graph.layers[t.producer].outputs) != 1:
        return None
    p = t.producer
    return folded_into[p] if folded_into[p] is not None else p


def _pads_for_consumer(graph: LayerGraph, i: int, kinds: list[str], rules: str = "tflite") -> bool:
    """A padding whose output only a convolution or pooling reads (that kernel's own padding);
    onnxruntime fuses one into a convolution only (a zero padding is not a max pooling's)."""
    la = graph.layers[i]
    if len(la.outputs) != 1:
        return False
    consumers = graph.tensors[la.outputs[0]].consumers
    readers = ("conv", "dwconv") if rules == "onnxruntime" else ("conv", "dwconv", "max_pool", "avg_pool")
    return len(consumers) == 1 and consumers[0] < len(graph.layers) and kinds[consumers[0]] in readers
