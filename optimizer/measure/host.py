"""Host measurement front end: export, measure with onnxruntime, cache; calibrate ``host.yaml``.

Measured tables are cached under ``results/cache/measure/`` keyed by model identity, threads,
repeats and warm-up, so benchmarks can be re-run without re-measuring (pass ``refresh=True``
to measure again).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..cost.features import layer_arrays
from ..cost.measured import MeasuredTable, read_measured_table, write_measured_table
from ..errors import ConfigError
from ..fileio import atomic_write_text
from ..graph.layergraph import OP_FAMILIES, LayerGraph
from .artifacts import cache_dir, export_artifact

FIT_FAMILIES = ("conv", "dwconv", "dense", "pool")


def measure_model(model_ref: str, graph: LayerGraph | None = None, *, threads: int = 1, repeats: int = 20,
                  warmup: int = 3, refresh: bool = False, rounds: int = 1, **variant: Any) -> MeasuredTable:
    """Per-layer onnxruntime table of ``model_ref`` on this host, from the cache when present.

    ``rounds`` > 1 measures in that many separate sessions and keeps the round with the lowest
    whole-network time: on a shared host, contention only ever adds time, so the least
    contended round is the best estimate (the usual minimum-of-repeats rule for benchmarks).
    The table's metadata records the conditions: 1-minute load average before and after,
    UTC time, rounds, every round's total, and the builder variant.
    """
    from ..graph import load_graph
    from .ort_profile import measure_ort

    if rounds < 1:
        raise ConfigError(f"rounds={rounds}: need rounds >= 1")
    g = graph if graph is not None else load_graph(model_ref, **variant)
    ident = (g.source_sha256 or g.name)[:16]
    extra = f"-x{rounds}" if rounds > 1 else ""
    if g.served_input_shapes:  # a model file measured at --input-shape: one table per shape
        extra += "-" + "-".join("x".join(map(str, s)) for s in g.served_input_shapes.values())
    path = (cache_dir() / "measure"
            / f"{g.name}-{ident}-{g.granularity}-ort-t{threads}-r{repeats}-w{warmup}{extra}.csv")
    if path.is_file() and not refresh:
        return read_measured_table(path)
    onnx_path = export_artifact(model_ref, g, "onnx", **variant)
    load_before = _load_avg()
    results = [measure_ort(g, onnx_path, threads=threads, repeats=repeats, warmup=warmup) for _ in range(rounds)]
    best = min(results, key=lambda r: r.layer_sum_s)
    best.table.meta.update({
        "load_avg_1m_before": round(load_before, 2), "load_avg_1m_after": round(_load_avg(), 2),
        "measured_at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rounds": rounds,
        "round_totals_s": [round(r.layer_sum_s, 6) for r in results],
        "variant": {k: variant[k] for k in sorted(variant)},
    })
    write_measured_table(best.table, path)
    return read_measured_table(path)


def _load_avg() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _predict(arrays: Any, params: np.ndarray, peak: float) -> np.ndarray:
    eff_by_family = np.full(len(OP_FAMILIES), math.exp(params[0]))
    for k, fam in enumerate(FIT_FAMILIES):
        eff_by_family[OP_FAMILIES.index(fam)] = math.exp(params[1 + k])
    eff = eff_by_family[arrays.op_index]
    overhead, bandwidth = math.exp(params[-2]), math.exp(params[-1])
    compute = arrays.macs / (peak * eff)
    return overhead * arrays.dispatched + np.maximum(compute, arrays.moved_bytes / bandwidth)


def fit_processor(pairs: list[tuple[LayerGraph, MeasuredTable]], peak_macs_per_s: float,
                  dtype: str = "fp32", processor: str = "cpu") -> dict[str, Any]:
    """Least-squares fit of a processor's efficiencies, dispatch overhead and bandwidth.

    Minimises the log error of each network's whole latency plus (weighted 0.3) of its
    dispatched layers' latencies (:func:`scipy.optimize.least_squares`, soft-L1 loss) for the
    roofline of :mod:`optimizer.cost.analytic` at a fixed peak.

    Returns
    -------
    dict
        ``efficiency`` (default + FIT_FAMILIES, each <= 4: Winograd may beat direct MACs), ``layer_overhead_s``,
        ``memory_bandwidth_bytes_per_s`` and the residual log errors per network.
    """
    from scipy.optimize import least_squares

    from ..cost.measured import check_matches

    if not pairs:
        raise ConfigError("calibration needs at least one measured table")
    data = []
    for graph, table in pairs:
        y = check_matches(table, graph, processor)
        data.append((layer_arrays(graph, dtype), y))

    def residuals(params: np.ndarray) -> np.ndarray:
        res = []
        for arrays, y in data:
            pred = _predict(arrays, params, peak_macs_per_s)
            res.append([math.log(pred.sum() / y.sum())])
            m = arrays.dispatched & (y > 1e-6)
            res.append(0.3 * np.log(pred[m] / y[m]) / math.sqrt(max(m.sum(), 1)))
        return np.concatenate([np.atleast_1d(r) for r in res])

    x0 = np.log([0.2, 0.5, 0.1, 0.3, 0.2, 2e-5, 1e10])
    lo = np.log([1e-3] * (1 + len(FIT_FAMILIES)) + [1e-7, 1e8])
    hi = np.log([4.0] * (1 + len(FIT_FAMILIES)) + [1e-2, 1e12])
    fit = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1")
    eff = {"default": math.exp(fit.x[0])}
    eff.update({fam: math.exp(fit.x[1 + k]) for k, fam in enumerate(FIT_FAMILIES)})
    errors = {g.name: float(_predict(a, fit.x, peak_macs_per_s).sum() / y.sum())
              for (g, _), (a, y) in zip(pairs, data, strict=True)}
    return {"efficiency": eff, "layer_overhead_s": math.exp(fit.x[-2]),
            "memory_bandwidth_bytes_per_s": math.exp(fit.x[-1]), "model_over_measured": errors}


def host_peak_macs() -> tuple[int, float, float]:
    """(cores, clock Hz, fp32 MAC/s) of this host from ``os.cpu_count`` and ``/proc/cpuinfo``.

    MACs per cycle per core: 16 with AVX2+FMA (two 256-bit FMA pipes), 32 with AVX-512, else 4.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    flags, mhz, bogo = "", 0.0, 0.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = line.partition(":")
            key = key.strip()
            if key == "flags" and not flags:
                flags = val
            elif key == "cpu MHz" and not mhz:
                mhz = float(val)
            elif key == "bogomips" and not bogo:
                bogo = float(val)
    except OSError:
        pass
    clock = (bogo / 2 if bogo else mhz or 2000.0) * 1e6
    words = set(flags.split())
    per_cycle = 32 if "avx512f" in words else 16 if {"avx2", "fma"} <= words else 4
    return cores, clock, cores * clock * per_cycle


def host_copy_bandwidth(megabytes: int = 32, repeats: int = 40) -> float:
    """Single-thread memory bandwidth of this host in bytes/s: best of ``repeats`` numpy copies.

    Counts read + write bytes of ``numpy.copyto`` over a ``megabytes`` float32 array (a STREAM
    "copy" kernel, McCalpin 1995); the best run is the least disturbed by other processes.
    """
    if megabytes < 1 or repeats < 1:
        raise ConfigError(f"megabytes={megabytes}, repeats={repeats}: both must be >= 1")
    src = np.ones(megabytes * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best


def host_yaml(fit: dict[str, Any], models: list[str], threads: int) -> str:
    """Text of ``search_spaces/devices/host.yaml`` from a calibration fit."""
    cores, clock, peak = host_peak_macs()
    eff = ", ".join(f"{k}: {min(v, 4.0):.4g}" for k, v in fit["efficiency"].items())
    errs = ", ".join(f"{k} {v:.3f}" for k, v in fit["model_over_measured"].items())
    return f"""# This workstation, calibrated by `dnnplan measure {' '.join(models)} --backend ort --threads {threads} --calibrate-host`
# (optimizer.measure.host.fit_processor: onnxruntime per-layer medians on this host).
# Whole-network model/measured after the fit: {errs}
name: host
description: "this workstation: {cores} cores at {clock / 1e9:.2f} GHz (calibrated with {threads} onnxruntime thread(s))"
memory: {_mem_gb():.0f} GB
idle_power: 0 W
source: "os.sched_getaffinity and /proc/cpuinfo on this host; power cannot be measured in a VM: nominal values"
processors:
  - name: cpu
    kind: cpu
    cores: {threads}
    clock_levels: [{clock / 1e9:.4g} GHz]
    clusters: [{{core: x86, count: {threads}, clock: {clock / 1e9:.4g} GHz}}]
    peak_macs: {{fp32: {peak * threads / cores / 1e9:.4g} GMAC/s, fp16: {peak * threads / cores / 1e9:.4g} GMAC/s, int8: {2 * peak * threads / cores / 1e9:.4g} GMAC/s}}
    efficiency: {{{eff}}}
    memory_bandwidth: {fit['memory_bandwidth_bytes_per_s'] / 1e9:.4g} GB/s
    layer_overhead: {fit['layer_overhead_s'] * 1e6:.4g} us
    supported_ops: {{fp32: all, fp16: all, int8: all}}
    power: {{static: 5 W, dynamic_at_max: 15 W, source: "nominal (server core ~3.5-5 W); not measured in a VM"}}
    source: "peak = threads x clock x MACs/cycle (16 with AVX2+FMA) from /proc/cpuinfo; efficiency, layer_overhead and memory_bandwidth calibrated from onnxruntime per-layer measurements of {', '.join(models)}"
handoff:
  default: {{latency: 0 s, bandwidth: 10 GB/s, energy_per_byte: 0 J/B}}
  source: "single processor: no hand-offs"
"""


def _mem_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return 8.0


def calibrate_host(models: list[str], out: str | os.PathLike[str], *, threads: int = 1, repeats: int = 20,
                   warmup: int = 3, refresh: bool = False) -> dict[str, Any]:
    """Measure ``models`` (cached), fit the host CPU and write ``out`` (a host.yaml) atomically."""
    from ..graph import load_graph
    from ..hardware.loader import load_device

    pairs = []
    for m in models:
        g = load_graph(m)
        pairs.append((g, measure_model(m, g, threads=threads, repeats=repeats, warmup=warmup, refresh=refresh)))
    _, _, peak = host_peak_macs()
    cores = host_peak_macs()[0]
    fit = fit_processor(pairs, peak * threads / cores)
    text = host_yaml(fit, models, threads)
    tmp = Path(out).with_suffix(".check.yaml")
    atomic_write_text(tmp, text)
    try:
        load_device(tmp)  # never leave an invalid host.yaml behind
    finally:
        tmp.unlink(missing_ok=True)
    atomic_write_text(out, text)
    return fit
