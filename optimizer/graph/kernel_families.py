"""Kernel families: the op families a runtime's kernels really differ by (docs/METHODS.md section 8b).

The coarse op family of a layer (``Layer.op``: conv, dwconv, ...) decides *where* an op can run
(a delegate's supported-ops list). How *fast* it runs depends on a finer split, because the kernels
differ: Paddle-Lite's MobileNetV1 kernel profiles (PaddlePaddle/Paddle-Lite PR #4559, Adreno 630
OpenCL; PR #3724, ARM CPU) give a GPU 1x1 conv about 165 GOP/s, a 3x3 conv 75, a depthwise conv
35 at stride 1 and 14 at stride 2, while the CPU's depthwise / 1x1 ratio is about 0.6 against the
GPU's 0.2; nn-Meter (Zhang et al., MobiSys'21) predicts per kernel type for the same reason.

:func:`kernel_family` derives the finer family from what every importer already records (op
family, operator type, per-sample shapes, MACs), so Keras, ONNX and TFLite graphs agree:

* ``convstem``: a convolution reading 4 channels or fewer (an image network's first layer), which
  accelerators map poorly (Qualcomm's HTP guidance recommends space-to-depth for it;
  docs/METHODS.md section 8b) and which shares little with the wide 3x3 convolutions in speed;
* ``conv1x1`` / ``convkxk``: kernel area ``MACs / (H_out * W_out * C_out * C_in)`` is 1 or more;
* ``dwconv_s1`` / ``dwconv_s2``: depthwise by stride ``H_in / H_out`` (1, or 2 and more);
* ``dense``: a fully connected layer on one row per sample (a classifier's matrix-vector
  product, bound by reading its weights) and ``matmul``: one on several rows per sample (a
  transformer's ``[tokens, hidden]`` projections, a matrix-matrix product that reuses each weight
  once per row, as a 1x1 convolution over ``H * W`` pixels does: an efficiency table without a
  ``matmul`` entry gives it its ``conv1x1`` one, :data:`KERNEL_FALLBACK`);
* ``pool``, ``resize``;
* ``eltwise``: add/mul, activations and normalisations that run as kernels of their own;
* ``layout``: concat, reshape, transpose, pad, slice (data movement only);
* ``postprocess``: detection post-processing (``TFLite_Detection_PostProcess``, NMS), CPU-only
  in every runtime (google-coral/edgetpu #515);
* ``other``: anything else (custom operators included).

Shapes exclude the batch; ONNX graphs are channels-first, every other format channels-last.
"""

from __future__ import annotations

import math

import numpy as np

from .layergraph import Layer, LayerGraph

KERNEL_FAMILIES: tuple[str, ...] = (
    "convstem", "conv1x1", "convkxk", "dwconv_s1", "dwconv_s2", "dense", "matmul", "pool", "eltwise", "resize",
    "layout", "postprocess", "other",
)
#: the kernel family whose efficiency a family without an entry of its own takes before its coarse
#: op family's: a matrix-matrix product runs the GEMM kernels of a 1x1 convolution
KERNEL_FALLBACK: dict[str, str] = {"matmul": "conv1x1"}
#: the coarse op family each kernel family refines (an efficiency table may give either)
COARSE_OF: dict[str, tuple[str, ...]] = {
    "convstem": ("conv",), "conv1x1": ("conv",), "convkxk": ("conv",), "dwconv_s1": ("dwconv",), "dwconv_s2": ("dwconv",),
    "dense": ("dense",), "matmul": ("dense",), "pool": ("pool",), "eltwise": ("add", "act", "norm"), "resize": ("resize",),
    "layout": ("concat", "reshape"), "postprocess": ("custom",), "other": ("other", "custom"),
}
#: detection post-processing operator types (TFLite custom op, ONNX and TF NMS variants)
POSTPROCESS_OP_TYPES: frozenset[str] = frozenset({
    "TFLite_Detection_PostProcess", "NonMaxSuppression", "NON_MAX_SUPPRESSION_V4",
    "NON_MAX_SUPPRESSION_V5", "NonMaxSuppressionV4", "NonMaxSuppressionV5",
    "CombinedNonMaxSuppression", "DetectionPostProcess", "BoxDecode",
})
#: most input channels of a ``convstem`` convolution (RGB or RGBA input)
STEM_MAX_CHANNELS = 4
_DIRECT: dict[str, str] = {"dense": "dense", "pool": "pool", "resize": "resize", "add": "eltwise",
                           "act": "eltwise", "norm": "eltwise", "concat": "layout",
                           "reshape": "layout", "other": "other"}


def channels_first(fmt: str) -> bool:
    """Whether per-sample shapes of a graph imported from ``fmt`` put channels first (ONNX)."""
    return fmt == "onnx"


def _split(shape: tuple[int, ...], first: bool) -> tuple[int, int]:
    """(channels, spatial elements) of a per-sample activation shape."""
    if not shape:
        return 1, 1
    c = shape[0] if first else shape[-1]
    return max(int(c), 1), max(int(math.prod(shape)) // max(int(c), 1), 1)


def _leading_spatial(shape: tuple[int, ...], first: bool) -> int:
    """The first spatial extent (H) of a per-sample shape, 1 when there is none."""
    spatial = shape[1:] if first else shape[:-1]
    return int(spatial[0]) if spatial else 1


def kernel_family(layer: Layer, fmt: str = "") -> str:
    """The kernel family (one of :data:`KERNEL_FAMILIES`) of one op-view ``layer`` of a graph
    imported from ``fmt`` (see module doc)."""
    if layer.op == "custom" or layer.op_type in POSTPROCESS_OP_TYPES:
        return "postprocess" if layer.op_type in POSTPROCESS_OP_TYPES else "other"
    if layer.op == "dense":
        out_shape = layer.output_shapes[0] if layer.output_shapes else ()
        rows = int(math.prod(out_shape[:-1])) if len(out_shape) > 1 else 1  # features last in every format
        return "matmul" if rows > 1 else "dense"
    if layer.op not in ("conv", "dwconv"):
        return _DIRECT.get(layer.op, "other")
    first = channels_first(fmt)
    in_shape = layer.input_shapes[0] if layer.input_shapes else ()
    out_shape = layer.output_shapes[0] if layer.output_shapes else ()
    c_in, _ = _split(in_shape, first)
    c_out, s_out = _split(out_shape, first)
    if layer.op == "dwconv":
        h_in, h_out = _leading_spatial(in_shape, first), _leading_spatial(out_shape, first)
        return "dwconv_s1" if h_out >= h_in else "dwconv_s2"
    if c_in <= STEM_MAX_CHANNELS:
        return "convstem"
    kernel_area = layer.macs / max(s_out * c_out * c_in, 1)
    return "conv1x1" if kernel_area < 1.5 else "convkxk"


def kernel_family_index(graph: LayerGraph) -> np.ndarray:
    """[L] index into :data:`KERNEL_FAMILIES` of every layer of an op-view ``graph``."""
    index = {f: i for i, f in enumerate(KERNEL_FAMILIES)}
    return np.array([index[kernel_family(la, graph.fmt)] for la in graph.layers], dtype=np.int64)
