"""Cost models: (LayerGraph, Device) -> CostTable (docs/ARCHITECTURE.md, ``cost/``).

Backends: ``analytic`` (roofline + CPU fallback), ``measured`` (per-layer tables from
``dnnplan measure`` or a phone) and ``learned`` (a scikit-learn Pipeline trained on measured
tables). Use :func:`build_cost_table` for all of them; backends are registered by name in
:mod:`optimizer.cost.backends` (:func:`register_backend`, :func:`backend_names`).
"""

from .backends import backend_names, register_backend
from .build import BACKENDS, build_cost_table
from .measured import MeasuredTable, read_measured_table, write_measured_table
from .table import CostTable

__all__ = ["BACKENDS", "CostTable", "MeasuredTable", "backend_names", "build_cost_table", "read_measured_table",
           "register_backend", "write_measured_table"]
