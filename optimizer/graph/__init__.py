"""Model importers and the immutable LayerGraph (docs/ARCHITECTURE.md, ``graph/``).

``load_graph(model)`` accepts a zoo name, a ``.keras`` file, a SavedModel directory, an
``.onnx`` or a ``.tflite`` file. TensorFlow and onnx are imported only when needed.
"""

from __future__ import annotations

from .layergraph import (
    DTYPE_BYTES, GRANULARITIES, OP_FAMILIES, Layer, LayerGraph, LayerSpec, Tensor, build_graph, dtype_bytes
)
from .loader import load_graph

__all__ = [
    "DTYPE_BYTES", "GRANULARITIES", "OP_FAMILIES", "Layer", "LayerGraph", "LayerSpec", "Tensor", "build_graph",
    "dtype_bytes", "load_graph",
]
