"""A per-operator profile imported as the measured table of one processor: the driver.

:func:`import_profile` reads the file (:mod:`optimizer.measure.profile_formats`), matches its
rows to the graph's layers (:mod:`optimizer.measure.profile_match`), splitting a time that
covers several layers by the analytic latency on the chosen processor (:func:`modeled_layers`),
and builds the :class:`~optimizer.cost.measured.MeasuredTable` the ``measured`` cost backend
reads. The names of the two modules it drives are importable from here too.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..graph.layergraph import LayerGraph
from .profile_formats import (
    ACCEPTED,
    DELEGATES,
    FORMATS,
    ORT_PROVIDERS,
    Profile,
    ProfileRecord,
    benchmark_summary,
    read_profile,
)
from .profile_match import (
    LAYOUT_OPS,
    TFLITE_FAMILIES,
    ProfileMatch,
    family_totals,
    layer_family,
    match_profile,
    table_match,
)

__all__ = [
    "ACCEPTED", "DELEGATES", "FORMATS", "LAYOUT_OPS", "ORT_PROVIDERS", "TFLITE_FAMILIES", "Profile", "ProfileMatch",
    "ProfileMatchWarning", "ProfileRecord", "benchmark_summary", "family_totals", "import_profile", "layer_family",
    "match_profile", "modeled_layers", "pick_processor", "read_profile", "table_match",
]


class ProfileMatchWarning(UserWarning):
    """A profile row that matches no layer, or a layer no row covers."""


def modeled_layers(device: Any, processor: str, graph: LayerGraph, dtype: str) -> np.ndarray:
    """Native analytic latency [L] of ``graph``'s layers on ``device``'s ``processor``."""
    from ..cost.analytic import analytic_costs

    column = device.processor_index(processor)
    return np.asarray(analytic_costs(graph, device, dtype)["native_s"][:, column], dtype=np.float64)


def pick_processor(device: Any, profile: Profile, processor: str | None) -> str:
    """``processor`` (checked), else the device's first processor of the profile's kind, else its CPU."""
    if processor is not None:
        return str(device.processor(processor).name)
    for candidate in device.processors:
        if candidate.kind == profile.processor:
            return str(candidate.name)
    return str(device.processors[device.fallback_index].name)


def import_profile(path: str | os.PathLike[str], graph: LayerGraph, device: Any = None,
                   processor: str | None = None, dtype: str = "fp32") -> tuple[Any, ProfileMatch]:
    """Read ``path``, match it to ``graph`` and build the measured table of one processor.

    With ``device``, times covering several layers are split by the analytic latency on
    ``processor`` (default: the device's processor of the profile's kind) and the table is
    named after that processor; without, by MACs (then bytes), named after the profile's
    processor kind. Unmatched rows and layers are reported as :class:`ProfileMatchWarning`.

    Returns
    -------
    (MeasuredTable, ProfileMatch)
        The table (one row per layer, readable by the ``measured`` cost backend; metadata
        with the profile, the matching and per-op-family totals) and the match.
    """
    import warnings

    import pandas as pd

    from ..cost.measured import MeasuredTable, measured_frame

    profile = read_profile(path)
    name = pick_processor(device, profile, processor) if device is not None else (processor or profile.processor)
    weights = modeled_layers(device, name, graph, dtype) if device is not None else None
    match = match_profile(profile, graph, weights, dtype)
    for line in match.warnings():
        warnings.warn(line, ProfileMatchWarning, stacklevel=2)
    rows = pd.DataFrame({
        "processor": name, "index": np.arange(len(graph.layers)), "layer": [layer.name for layer in graph.layers],
        "op": [layer.op for layer in graph.layers], "latency_s": match.latency_s, "latency_std_s": np.nan,
        "energy_j": np.nan,
    })
    meta = {
        "model": graph.name, "granularity": graph.granularity, "source_sha256": graph.source_sha256,
        "device": getattr(device, "name", None), "processor": name, "backend": "profile",
        "profile": str(path), "profile_format": profile.format, "profile_processor": profile.processor,
        "match_mode": match.mode, "rows": len(profile.records), "rows_matched": match.rows_matched,
        "unmatched_rows": len(match.unmatched_rows), "unmatched_layers": match.unmatched_layers,
        "profile_total_s": profile.total_s, "layer_sum_s": float(match.latency_s.sum()),
        "whole_median_s": profile.whole_s, "invoke_overhead_s": profile.invoke_overhead_s,
        "family_totals_s": family_totals(match),
    }
    return MeasuredTable(measured_frame(rows, f"{graph.name} profile"), meta, ""), match
