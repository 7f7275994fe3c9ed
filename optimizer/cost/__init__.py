"""Cost models: (LayerGraph, Device) -> CostTable (see DESIGN.md, ``cost/``)."""

from .table import CostTable

__all__ = ["CostTable"]
