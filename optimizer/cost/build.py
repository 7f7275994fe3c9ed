"""``build_cost_table``: one entry point over the analytic, measured and learned backends."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError, UnknownNameError
from ..graph.layergraph import DTYPE_BYTES, LayerGraph
from ..hardware.schema import Device
from .analytic import analytic_costs
from .hostproc import host_seconds
from .measured import MeasuredTable, check_matches, measured_energy, read_measured_table
from .table import CostTable

BACKENDS: tuple[str, ...] = ("analytic", "measured", "learned")


def build_cost_table(
    graph: LayerGraph,
    device: Device | str,
    dtype: str = "int8",
    backend: str = "analytic",
    *,
    clock_hz: Mapping[str, float] | None = None,
    table: MeasuredTable | str | os.PathLike[str] | None = None,
    model: Any = None,
    runtime: str | None = None,
) -> CostTable:
    """Per-layer, per-processor costs of ``graph`` on ``device`` at ``dtype``.

    Parameters
    ----------
    graph : LayerGraph
        The network (any granularity; the table follows its layers).
    device : Device or str
        A Device (phone, board or server) or a device name for :func:`optimizer.hardware.load_device`.
    dtype : {"int8", "fp16", "fp32"}
        Activation and weight precision.
    backend : {"analytic", "measured", "learned"}
        ``analytic``: roofline model of :mod:`optimizer.cost.analytic`; ``measured``: per-layer
        ``table`` (from ``dnnplan measure`` or a phone) for every processor of the device;
        ``learned``: a fitted Pipeline ``model`` (:func:`optimizer.cost.learned.fit_learned_model`
        or a joblib file) predicting each processor's layer latencies.
    clock_hz : mapping, optional
        Clock per processor name (default: each processor's maximum), for DVFS evaluation.
        Measured and learned latencies were taken at the maximum clock and are scaled by
        ``f_max / f`` for compute-bound use; energies use the power model at ``f``.
    runtime : str, optional
        Inference runtime whose efficiency profile to use (``Device.runtimes``; default: the
        device's own ``runtime``), e.g. ``pytorch_mobile_fp32`` for SmartSplit's setting.

    Returns
    -------
    CostTable
        Energy is active power x time (fallback transfers included); hand-off matrices,
        memory capacities and idle power come from the device.
    """
    if isinstance(device, str):
        from ..hardware.loader import load_device

        device = load_device(device)
    if dtype not in DTYPE_BYTES:
        raise ConfigError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}")
    if backend not in BACKENDS:
        raise UnknownNameError("cost backend", backend, BACKENDS)
    base = analytic_costs(graph, device, dtype, clock_hz, runtime)
    latency, energy = base["latency_s"], base["energy_j"]
    power, clocks = base["active_power_w"], base["clock_hz"]
    max_clocks = np.array([p.max_clock_hz for p in device.processors])
    meta: dict[str, Any] = {"clock_hz": dict(zip(device.processor_names, clocks.tolist())),
                            "runtime": runtime or device.runtime}
    meta.update(host_seconds(graph, device))  # detector pre/post-processing on the CPU (Park & Ha)
    if device.cpu_cores is not None:
        meta["cpu_cores"] = device.cpu_cores
    if backend == "measured":
        if table is None:
            raise ConfigError("the measured backend needs a table (--table FILE from `dnnplan measure`)")
        mt = table if isinstance(table, MeasuredTable) else read_measured_table(table)
        latency, energy = _from_measured(graph, device, mt, power, clocks / max_clocks)
        meta["table"] = mt.path
        meta["table_meta"] = dict(mt.meta)
    elif backend == "learned":
        if model is None:
            raise ConfigError("the learned backend needs a fitted model (fit_learned_model or --table "
                              "files to train on)")
        pipe = _load_model(model)
        from .learned import predict_latency

        latency = np.column_stack([predict_latency(pipe, graph, dtype, p.name) for p in device.processors])
        latency = latency * (max_clocks / clocks)[None, :]
        energy = latency * power[None, :]
        meta["trained_on"] = list(getattr(pipe, "processors_", []))
    arrays = base["arrays"]
    h_lat, h_spb, h_jpb = device.handoff_matrices()
    capacity = np.array([p.memory_bytes if p.memory_bytes is not None else device.memory_bytes
                         for p in device.processors], dtype=np.float64)
    return CostTable(
        model=graph.name, device=device.name, dtype=dtype, backend=backend,
        granularity=graph.granularity, processors=device.processor_names,
        processor_kinds=tuple(p.kind for p in device.processors),
        layer_names=tuple(la.name for la in graph.layers),
        latency_s=np.ascontiguousarray(latency, dtype=np.float64),
        energy_j=np.ascontiguousarray(energy, dtype=np.float64),
        supported=base["supported"], cut_bytes=graph.cut_bytes_array(dtype),
        weight_bytes=arrays.weight_bytes, live_bytes=graph.live_bytes_array(dtype), macs=arrays.macs,
        handoff_latency_s=h_lat, handoff_s_per_byte=h_spb, handoff_j_per_byte=h_jpb,
        memory_capacity_bytes=capacity, active_power_w=power, idle_power_w=device.idle_power_w,
        meta=meta, invoke_overhead_s=np.array([p.runtime_value("invoke_overhead_s", device.check_runtime(runtime))
                                                for p in device.processors]),
        max_delegated_partitions=np.array([p.max_delegated_partitions for p in device.processors]),
    )


def _from_measured(graph: LayerGraph, device: Device, mt: MeasuredTable, power: np.ndarray,
                   clock_ratio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    for name in mt.processors:
        if name not in device.processor_names:
            raise UnknownNameError("processor", name, device.processor_names,
                                   where=f"{mt.path or 'measured table'} (device {device.name!r})")
    missing = [p for p in device.processor_names if p not in mt.processors]
    if missing:
        raise ConfigError(f"{mt.path or 'measured table'}: no rows for processor {missing[0]!r} of device "
                          f"{device.name!r} (table has {', '.join(mt.processors)}); measure every "
                          "processor or use a device file listing only the measured ones")
    lat = np.column_stack([check_matches(mt, graph, p) for p in device.processor_names]) / clock_ratio[None, :]
    energy = lat * power[None, :]
    for j, p in enumerate(device.processor_names):
        e = measured_energy(mt, p)
        if e is not None:
            energy[:, j] = e
    return lat, energy


def _load_model(model: Any) -> Any:
    if isinstance(model, (str, os.PathLike)):
        p = Path(model)
        if not p.is_file():
            raise InputFileError(f"{p}: no such learned cost model file")
        import joblib

        return joblib.load(p)
    if not hasattr(model, "predict"):
        raise ConfigError(f"learned cost model must have predict(); got {type(model).__name__}")
    return model
