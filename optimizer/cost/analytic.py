"""Analytic cost backend: a roofline per layer and processor, with CPU fallback.

For layer ``l`` on processor ``p`` at clock ``f`` (Williams, Waterman & Patterson, "Roofline",
CACM 2009; per-op-family efficiency and dispatch overhead as in nn-Meter, Zhang et al.
MobiSys'21)::

    t_native[l, p] = o_p * dispatched_l + max(MACs_l / (peak_p[dtype] * eff_p[op_l] * f / f_max),
                                              bytes_l / bandwidth_p)

An op that ``p`` does not support at ``dtype`` falls back to the CPU (Park & Ha, IEEE Access
2024)::

    t[l, p] = t_native[l, cpu] + 2 * handoff_latency_s[p, cpu]
              + (in_bytes_l + out_bytes_l) * handoff_s_per_byte[p, cpu]

Energy is active power times time, ``P_p(f) = P_static + Upsilon * f^3`` (Zhang et al. 2023),
plus ``(in + out) * handoff_j_per_byte`` for a fallback's transfers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ConfigError, UnknownNameError
from ..graph.kernel_families import KERNEL_FAMILIES
from ..graph.layergraph import DTYPE_BYTES, OP_FAMILIES, LayerGraph
from ..hardware.cores import family_scales
from ..hardware.schema import Device, Processor
from .backends import BackendCosts, BackendInputs
from .features import LayerArrays, layer_arrays


def resolve_clocks(device: Device, clock_hz: Mapping[str, float] | None) -> np.ndarray:
    """Clock per processor [P]: the maximum unless ``clock_hz`` overrides it (0 < f <= max)."""
    clocks = np.array([processor.max_clock_hz for processor in device.processors])
    for name, clock in (clock_hz or {}).items():
        if name not in device.processor_names:
            raise UnknownNameError("processor", name, device.processor_names, where=f"device {device.name!r}")
        processor = device.processor(name)
        if not (isinstance(clock, (int, float)) and 0 < clock <= processor.max_clock_hz * (1 + 1e-9)):
            raise ConfigError(f"clock for processor {name!r} of {device.name!r} is {clock!r} Hz; expected "
                              f"0 < f <= {processor.max_clock_hz:.4g} Hz (its highest level)")
        clocks[device.processor_names.index(name)] = float(clock)
    return clocks


def supported_matrix(device: Device, op_index: np.ndarray, dtype: str) -> np.ndarray:
    """[L, P] bool: layer l's op family runs natively on processor p at ``dtype``."""
    by_family = np.array([[processor.supports(family, dtype) for processor in device.processors]
                          for family in OP_FAMILIES])
    return by_family[op_index]


def executed_dtype(kind: str, dtype: str) -> str:
    """The dtype a processor really computes ``dtype`` in: the TFLite GPU delegate runs INT8
    models in FP16 (TFLite GPU delegate documentation; docs/METHODS.md section 8); NNAPI accelerators
    (tpu, npu) run FP32 models with relaxed FP16 precision (Android NNAPI
    ``setRelaxComputationFloat32toFloat16``); a DSP's delegate (Hexagon/QNN HTP) runs an FP32 graph
    in FP16 (owner decision, docs/METHODS.md section 8b). A processor without an FP16 peak computes
    ``dtype`` itself (see :func:`native_latency`)."""
    if (kind == "gpu" and dtype == "int8") or (kind in ("tpu", "npu", "dsp") and dtype == "fp32"):
        return "fp16"
    return dtype


def layer_efficiency(proc: Processor, arrays: LayerArrays, runtime: str | None, dtype: str) -> np.ndarray:
    """[L] fraction of its ``dtype`` peak ``proc`` reaches on every layer: its efficiency for the
    layer's kernel family (conv1x1, dwconv_s2, ...; docs/METHODS.md section 8b), else for its coarse op
    family, else its default, times the shared core-class rate of its op family where the
    processor declares core clusters (:func:`optimizer.hardware.cores.family_scales`)."""
    kernels = arrays.kernel_index if arrays.kernel_index is not None else np.full(len(arrays.macs), -1)
    pairs = np.stack([arrays.op_index, kernels], axis=1)
    unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
    table = np.array([proc.op_efficiency(OP_FAMILIES[op], runtime, KERNEL_FAMILIES[kernel] if kernel >= 0 else None)
                      for op, kernel in unique])
    return np.asarray(table[inverse.reshape(-1)], dtype=float) * family_scales(proc, runtime, dtype)[arrays.op_index]


def native_latency(device: Device, arrays: LayerArrays, dtype: str, clocks: np.ndarray,
                   runtime: str | None = None) -> np.ndarray:
    """[L, P] roofline latency of every layer on every processor, ignoring support.

    A processor without a peak at ``dtype`` gets ``inf`` (it cannot run the layer natively).
    Fused layers (batch-norm, activation, padding, reshapes: ``arrays.dispatched`` False) cost
    no dispatch and no memory pass of their own: TFLite folds them into the preceding kernel
    (docs/METHODS.md section 8). ``runtime`` scales the efficiencies by the processor's profile, and
    a CPU that declares its core clusters runs at the shared core table's rate for them
    (:func:`optimizer.hardware.cores.family_scales`).
    """
    n_layers, n_procs = len(arrays.macs), len(device.processors)
    out = np.empty((n_layers, n_procs))
    for column, processor in enumerate(device.processors):
        run_dtype = executed_dtype(processor.kind, dtype)
        if dtype not in processor.peak_macs_per_s or run_dtype not in processor.peak_macs_per_s:
            run_dtype = dtype
        peak = processor.peak_at(run_dtype, clocks[column])
        if peak <= 0:
            out[:, column] = np.inf
            continue
        compute = arrays.macs / (peak * layer_efficiency(processor, arrays, runtime, run_dtype))
        widen = DTYPE_BYTES[run_dtype] / DTYPE_BYTES[dtype]
        moved = arrays.moved_bytes * widen
        bandwidth = np.full(n_layers, processor.runtime_value("memory_bandwidth_bytes_per_s", runtime))
        if processor.onchip_memory_bytes is not None and processor.onchip_bandwidth_bytes_per_s is not None:
            bandwidth[moved <= processor.onchip_memory_bytes] = processor.onchip_bandwidth_bytes_per_s
        memory = np.where(arrays.dispatched, moved / bandwidth, 0.0)
        overhead = processor.runtime_value("layer_overhead_s", runtime)
        out[:, column] = overhead * arrays.dispatched + np.maximum(compute, memory)
    return out


def processor_power(device: Device, clocks: np.ndarray) -> np.ndarray:
    """Active power [P] of every processor at ``clocks``: ``P_static + Upsilon * f^3``."""
    return np.array([processor.power_w(clocks[column]) for column, processor in enumerate(device.processors)])


def type_support(graph: LayerGraph, device: Device, dtype: str) -> np.ndarray:
    """[L, P] bool: processor p's delegate runs layer l's operator type at ``dtype``
    (:meth:`optimizer.hardware.schema.Processor.supports_type`)."""
    types = sorted({layer.op_type for layer in graph.layers})
    table = np.array([[processor.supports_type(op_type, dtype) for processor in device.processors]
                      for op_type in types], dtype=bool)
    index = {op_type: position for position, op_type in enumerate(types)}
    return table[[index[layer.op_type] for layer in graph.layers]].reshape(len(graph.layers), len(device.processors))


def _op_support(graph: LayerGraph, device: Device, dtype: str, arrays: LayerArrays) -> np.ndarray:
    """[L, P] native support of an op-level (or member-less) graph; identity layers run
    everywhere; the fallback processor must run every layer."""
    supported = supported_matrix(device, arrays.op_index, dtype) & type_support(graph, device, dtype)
    if arrays.identity is not None:
        supported = supported | arrays.identity[:, None]
    fallback = device.fallback_index
    if not supported[:, fallback].all():
        bad = graph.layers[int(np.argmin(supported[:, fallback]))]
        raise ConfigError(f"device {device.name!r}: fallback processor {device.processors[fallback].name!r} "
                          f"cannot run {bad.op!r} layers at {dtype} (layer {bad.name!r}); add {dtype!r} to its "
                          "peak_macs and supported_ops")
    return supported


def _block_starts(graph: LayerGraph) -> np.ndarray:
    """Index of each unit's first member in the op view (kernel and block units are consecutive
    runs of ops)."""
    sizes = np.array([len(layer.members) for layer in graph.layers])
    return np.concatenate([[0], np.cumsum(sizes)[:-1]])


def layer_support(graph: LayerGraph, device: Device, dtype: str, arrays: LayerArrays) -> np.ndarray:
    """[L, P] bool: layer ``l`` runs natively on processor ``p`` at ``dtype`` (a kernel or block when all
    its members do); ``arrays`` are ``graph``'s :func:`layer_arrays`. Device capability only: no
    latency model is evaluated, so measured and learned backends use it without the analytic pass."""
    if graph.op_view is not None:
        fine = _op_support(graph.op_view, device, dtype, layer_arrays(graph.op_view, dtype))
        return np.logical_and.reduceat(fine, _block_starts(graph), axis=0)
    return _op_support(graph, device, dtype, arrays)


def analytic_costs(
    graph: LayerGraph, device: Device, dtype: str, clock_hz: Mapping[str, float] | None = None,
    runtime: str | None = None,
) -> dict[str, Any]:
    """Latency, energy and support arrays [L, P] of ``graph`` on ``device`` (see module doc).

    A kernel- or block-view graph that keeps its op view is costed as the sum of its members, each
    at its own op family's efficiency (so the views' totals agree); ``runtime`` picks an efficiency
    profile of the device (None: its default runtime).
    """
    runtime = device.check_runtime(runtime)
    if graph.op_view is not None:
        return block_sums(graph, analytic_costs(graph.op_view, device, dtype, clock_hz, runtime), dtype)
    arrays = layer_arrays(graph, dtype)
    clocks = resolve_clocks(device, clock_hz)
    native = native_latency(device, arrays, dtype, clocks, runtime)
    supported = _op_support(graph, device, dtype, arrays)
    if arrays.identity is not None:
        native[arrays.identity] = 0.0
    power = processor_power(device, clocks)
    cpu_s = fallback_cpu_seconds(graph, device, dtype, arrays, native, clocks, runtime)
    latency, energy = with_fallback(device, arrays, native, supported, power, cpu_s)
    return {"latency_s": latency, "energy_j": energy, "supported": supported,
            "active_power_w": power, "clock_hz": clocks, "native_s": native, "arrays": arrays,
            "fallback_cpu_s": cpu_s}


def with_fallback(device: Device, arrays: LayerArrays, native: np.ndarray, supported: np.ndarray,
                  power: np.ndarray, cpu_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(latency, energy) [L, P] of layers with native times ``native``: a layer ``p`` does not
    support runs on the fallback processor (``cpu_s`` [L], :func:`fallback_cpu_seconds`) plus the
    transfer of its inputs and outputs."""
    fallback = device.fallback_index
    handoff_latency_s, handoff_s_per_byte, handoff_j_per_byte = device.handoff_matrices()
    io_bytes = (arrays.in_bytes + arrays.out_bytes)[:, None]
    fallback_s = (cpu_s[:, None] + 2.0 * handoff_latency_s[:, fallback][None, :]
                  + io_bytes * handoff_s_per_byte[:, fallback][None, :])
    fallback_j = (power[fallback] * cpu_s[:, None]) + io_bytes * handoff_j_per_byte[:, fallback][None, :]
    return np.where(supported, native, fallback_s), np.where(supported, native * power[None, :], fallback_j)


def fallback_cpu_seconds(graph: LayerGraph, device: Device, dtype: str, arrays: LayerArrays, native: np.ndarray,
                         clocks: np.ndarray, runtime: str | None) -> np.ndarray:
    """[L] the CPU's time of each layer when a delegate hands it over: ``native``'s CPU column,
    except that an operator type a delegate cannot run leaves it as a kernel of its own on the
    CPU, even where the CPU would fuse it (HARD_SWISH after a convolution is then one more
    memory pass)."""
    fallback = device.fallback_index
    alone = ~type_support(graph, device, dtype).all(axis=1) & ~arrays.dispatched
    cpu_s = native[:, fallback].copy()
    if alone.any():
        standalone = dataclasses.replace(arrays, dispatched=arrays.dispatched | alone)
        cpu_s[alone] = native_latency(device, standalone, dtype, clocks, runtime)[alone, fallback]
    return cpu_s


def block_sums(graph: LayerGraph, fine: dict[str, Any], dtype: str) -> dict[str, Any]:
    """Sum op-view costs over each unit's (consecutive) members."""
    starts = _block_starts(graph)
    out = dict(fine)
    for key in ("latency_s", "energy_j", "native_s", "fallback_cpu_s"):
        out[key] = np.add.reduceat(fine[key], starts, axis=0)
    out["supported"] = np.logical_and.reduceat(fine["supported"], starts, axis=0)
    out["arrays"] = layer_arrays(graph, dtype)
    return out


def analytic_backend(inputs: BackendInputs) -> BackendCosts:
    """The ``analytic`` cost backend: the roofline of the module docstring, with CPU fallback."""
    base = analytic_costs(inputs.graph, inputs.device, inputs.dtype, inputs.clock_hz, inputs.runtime)
    return BackendCosts(latency_s=base["latency_s"], energy_j=base["energy_j"], supported=base["supported"],
                        arrays=base["arrays"], fallback_cpu_s=base["fallback_cpu_s"])
