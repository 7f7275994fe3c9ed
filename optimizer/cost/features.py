"""Per-layer arrays every cost backend needs (MACs, bytes moved, op family), vectorised."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..graph.kernel_families import kernel_family_index
from ..graph.layergraph import FUSED_FAMILIES, OP_FAMILIES, LayerGraph, dtype_bytes
#: operator types converters drop at inference (no kernel anywhere, so never a CPU fallback)
IDENTITY_OP_TYPES: frozenset[str] = frozenset({"Dropout", "SpatialDropout1D", "SpatialDropout2D",
                                               "GaussianDropout", "AlphaDropout", "Identity"})


@dataclass(frozen=True)
class LayerArrays:
    """Per-layer quantities at one dtype, shape [L] each."""

    op_index: np.ndarray  # int index into OP_FAMILIES
    macs: np.ndarray
    in_bytes: np.ndarray  # activation bytes read
    out_bytes: np.ndarray  # activation bytes written
    weight_bytes: np.ndarray
    dispatched: np.ndarray  # bool: the layer is a kernel of its own (not fused)
    identity: np.ndarray | None = None  # bool: dropped at inference (runs everywhere, costs nothing)
    kernel_index: np.ndarray | None = None  # int index into KERNEL_FAMILIES (graph/kernel_families.py)

    @property
    def moved_bytes(self) -> np.ndarray:
        """Bytes a layer moves through memory: inputs + outputs + weights."""
        return self.in_bytes + self.out_bytes + self.weight_bytes


def layer_arrays(graph: LayerGraph, dtype: str) -> LayerArrays:
    """Collect the per-layer arrays of ``graph`` at ``dtype`` (one pass over the layers)."""
    nb = dtype_bytes(dtype)
    fam = {f: i for i, f in enumerate(OP_FAMILIES)}
    n = len(graph.layers)
    op_index = np.empty(n, dtype=np.int64)
    in_el = np.empty(n, dtype=np.float64)
    out_el = np.empty(n, dtype=np.float64)
    for i, layer in enumerate(graph.layers):
        op_index[i] = fam[layer.op]
        in_el[i] = sum(math.prod(s) if s else 1 for s in layer.input_shapes)
        out_el[i] = layer.output_elements
    fused = np.array([fam[f] for f in FUSED_FAMILIES])
    return LayerArrays(
        op_index=op_index, macs=graph.macs_array, in_bytes=in_el * nb, out_bytes=out_el * nb,
        weight_bytes=graph.params_array * nb, dispatched=~np.isin(op_index, fused),
        identity=np.array([layer.op_type in IDENTITY_OP_TYPES for layer in graph.layers], dtype=bool),
        kernel_index=kernel_family_index(graph),
    )
