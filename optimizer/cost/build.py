"""``build_cost_table``: one entry point over every registered cost backend
(:mod:`optimizer.cost.backends`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..graph.layergraph import DTYPE_BYTES, LayerGraph
from ..hardware.schema import Device
from .analytic import executed_dtype, processor_power, resolve_clocks
from .backends import BUILTIN_BACKENDS, BackendInputs, get_backend, run_backend
from .features import layer_arrays
from .measured import MeasuredTable
from .hostproc import host_seconds
from .table import CostTable

#: names of the built-in backends (:func:`optimizer.cost.backends.backend_names` lists every registered one)
BACKENDS: tuple[str, ...] = tuple(BUILTIN_BACKENDS)


def build_cost_table(
    graph: LayerGraph,
    device: Device | str,
    dtype: str = "int8",
    backend: str | None = None,
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
    backend : str, optional
        A registered backend (:func:`optimizer.cost.backends.backend_names`; default: the
        device's, :func:`default_backend`). ``predicted``: per-device kernel predictors
        (:mod:`optimizer.cost.predicted`); ``analytic``: roofline model of :mod:`optimizer.cost.analytic`; ``measured``: per-layer
        ``table`` (from ``dnnplan measure`` or a phone) for every processor of the device;
        ``learned``: a fitted Pipeline ``model`` (:func:`optimizer.cost.learned.fit_learned_model`
        or a JSON file of :func:`~optimizer.cost.learned.save_learned_model`) predicting each processor's layer latencies.
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
    backend = backend or default_backend(device)
    get_backend(backend)  # an unknown name fails before any work
    runtime = device.check_runtime(runtime)
    clocks = resolve_clocks(device, clock_hz)
    inputs = BackendInputs(graph=graph, device=device, dtype=dtype, runtime=runtime, clock_hz=clock_hz,
                           clocks=clocks, power_w=processor_power(device, clocks))
    options = {k: v for k, v in (("table", table), ("model", model)) if v is not None}
    costs = run_backend(backend, inputs, options)
    meta: dict[str, Any] = {"clock_hz": dict(zip(device.processor_names, clocks.tolist())),
                            "runtime": runtime or device.runtime, **host_seconds(graph, device),  # Park & Ha
                            **({"cpu_cores": device.cpu_cores} if device.cpu_cores is not None else {}), **costs.meta}
    arrays = costs.arrays if costs.arrays is not None else layer_arrays(graph, dtype)
    handoff_latency_s, handoff_s_per_byte, handoff_j_per_byte = device.handoff_matrices()
    capacity = np.array([p.memory_bytes if p.memory_bytes is not None else device.memory_bytes
                         for p in device.processors], dtype=np.float64)
    return CostTable(
        model=graph.name, device=device.name, dtype=dtype, backend=backend,
        granularity=graph.granularity, processors=device.processor_names,
        processor_kinds=tuple(p.kind for p in device.processors),
        layer_names=tuple(la.name for la in graph.layers),
        latency_s=np.ascontiguousarray(costs.latency_s, dtype=np.float64),
        energy_j=np.ascontiguousarray(costs.energy_j, dtype=np.float64),
        supported=costs.supported, cut_bytes=graph.cut_bytes_array(dtype),
        weight_bytes=arrays.weight_bytes, live_bytes=graph.live_bytes_array(dtype), macs=arrays.macs,
        handoff_latency_s=handoff_latency_s, handoff_s_per_byte=handoff_s_per_byte,
        handoff_j_per_byte=handoff_j_per_byte,
        memory_capacity_bytes=capacity, active_power_w=inputs.power_w, idle_power_w=device.idle_power_w,
        meta=meta, invoke_overhead_s=_invoke_overhead(device, runtime, costs.invoke_overhead_s),
        max_delegated_partitions=np.array([p.max_delegated_partitions for p in device.processors]),
        fallback_cpu_s=costs.fallback_cpu_s, **_parameter_cache(device, dtype, runtime),
    )


def default_backend(device: Device) -> str:
    """The backend a device file chooses: ``predicted`` when a processor names a probe table,
    else ``analytic``."""
    return "predicted" if device.has_predictors else "analytic"


def _invoke_overhead(device: Device, runtime: str | None, measured: np.ndarray | None) -> np.ndarray:
    """[P] per-call overhead: the backend's measurement where it has one, else the device file's."""
    listed = np.array([p.runtime_value("invoke_overhead_s", runtime) for p in device.processors])
    return listed if measured is None else np.where(np.isnan(measured), listed, measured)


def _parameter_cache(device: Device, dtype: str, runtime: str | None) -> dict[str, np.ndarray]:
    """Each processor's parameter cache and streaming cost in the table's weight bytes: a processor
    that computes ``dtype`` in a wider type (``executed_dtype``) holds ``widen`` times the bytes."""
    cache, per_byte = [], []
    for p in device.processors:
        run = executed_dtype(p.kind, dtype)
        widen = DTYPE_BYTES[run] / DTYPE_BYTES[dtype] if run in p.peak_macs_per_s else 1.0
        cache.append(np.inf if p.parameter_cache_bytes is None else float(p.parameter_cache_bytes) / widen)
        per_byte.append(widen / p.runtime_value("memory_bandwidth_bytes_per_s", runtime))
    return {"parameter_cache_bytes": np.array(cache), "parameter_stream_s_per_byte": np.array(per_byte)}
