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

from ..cost.measured import MeasuredTable, read_measured_table, write_measured_table
from ..confine import inside
from ..errors import ConfigError
from ..graph.layergraph import LayerGraph
from ..hardware.schema import Device
from ..workers import proc_kb_bytes
from .artifacts import cache_dir, export_artifact
from .profile_fit import ProfileFit, fit_processor_to_profiles, write_device_yaml
from .profile_match import table_match


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
    path = inside(cache_dir() / "measure", f"{g.name}-{ident}-{g.granularity}-ort-t{threads}-r{repeats}-w{warmup}"
                  f"{extra}.csv", "measurement cache key", single=True)
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


def fit_host(device: Device, pairs: list[tuple[LayerGraph, MeasuredTable]], processor: str = "cpu",
             dtype: str = "fp32") -> ProfileFit:
    """Fit ``device``'s ``processor`` to per-layer measured tables of this host.

    Each table becomes a profile match (:func:`optimizer.measure.profile_match.table_match`)
    and the processor is fitted by the one least-squares fit of a processor,
    :func:`optimizer.measure.profile_fit.fit_processor_to_profiles`: kernel-family efficiencies,
    per-layer overhead and memory bandwidth of the :mod:`optimizer.cost.analytic` roofline at the
    device's peak.

    Raises
    ------
    ConfigError
        No table, or a table that does not match its graph.
    """
    if not pairs:
        raise ConfigError("calibration needs at least one measured table")
    matches = [table_match(t, g, processor, dtype) for g, t in pairs]
    return fit_processor_to_profiles(device, processor, matches, dtype)


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


#: values of the processor before the fit (the fit starts each fitted family from its own
#: compute-bound estimate, the bandwidth from this and 4x this)
NOMINAL = {"efficiency": {"default": 0.2}, "layer_overhead_s": 20e-6, "memory_bandwidth_bytes_per_s": 10e9}


def host_yaml(models: list[str], threads: int, fit: ProfileFit | None = None) -> str:
    """Text of ``search_spaces/devices/host.yaml``: this host's CPU at ``threads`` threads with
    the values of ``fit`` (its processor ``cpu``), or with :data:`NOMINAL` ones (the fit's start)."""
    cores, clock, peak = host_peak_macs()
    if fit is not None:
        cpu = fit.device.processor(fit.processor)
        values = {"efficiency": dict(cpu.efficiency), "layer_overhead_s": cpu.layer_overhead_s,
                  "memory_bandwidth_bytes_per_s": cpu.memory_bandwidth_bytes_per_s}
        errs = ", ".join(f"{k} {v:.3f}" for k, v in fit.model_over_measured.items())
        fams = "".join(f"#   {m}: " + ", ".join(f"{r.family} {r.ratio_after:.3f}" for r in fit.rows if r.model == m) + "\n"
                       for m in fit.model_over_measured)
        head = ("# (optimizer.measure.host.fit_host: onnxruntime per-layer medians on this host, fitted per kernel\n"
                "# family by optimizer.measure.profile_fit.fit_processor_to_profiles).\n"
                f"# Whole-network model/measured after the fit: {errs}\n# Per kernel family:\n{fams}")
    else:
        values, head = NOMINAL, "# (nominal values before the fit)\n"
    eff = ", ".join(f"{k}: {v:.4g}" for k, v in values["efficiency"].items())
    per_thread = peak * threads / cores / 1e9
    return f"""# This workstation, calibrated by `dnnplan measure {' '.join(models)} --backend ort --threads {threads} --calibrate-host`
{head}name: host
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
    peak_macs: {{fp32: {per_thread:.4g} GMAC/s, fp16: {per_thread:.4g} GMAC/s, int8: {2 * per_thread:.4g} GMAC/s}}
    efficiency: {{{eff}}}
    memory_bandwidth: {values['memory_bandwidth_bytes_per_s'] / 1e9:.4g} GB/s
    layer_overhead: {values['layer_overhead_s'] * 1e6:.4g} us
    supported_ops: {{fp32: all, fp16: all, int8: all}}
    power: {{static: 5 W, dynamic_at_max: 15 W, source: "nominal (server core ~3.5-5 W); not measured in a VM"}}
    source: "peak = threads x clock x MACs/cycle (16 with AVX2+FMA) from /proc/cpuinfo; efficiency (per kernel family), layer_overhead and memory_bandwidth calibrated from onnxruntime per-layer measurements of {', '.join(models)}"
handoff:
  default: {{latency: 0 s, bandwidth: 10 GB/s, energy_per_byte: 0 J/B}}
  source: "single processor: no hand-offs"
"""


def host_device(models: list[str], threads: int = 1) -> Device:
    """This host's CPU at ``threads`` threads with the :data:`NOMINAL` values: the device a host
    calibration starts from."""
    import yaml

    return Device.model_validate(yaml.safe_load(host_yaml(models, threads)))


def _mem_gb() -> float:
    total = proc_kb_bytes("/proc/meminfo", "MemTotal")
    return 8.0 if total is None else total / 1e9


def calibrate_host(models: list[str], out: str | os.PathLike[str], *, threads: int = 1, repeats: int = 20,
                   warmup: int = 3, refresh: bool = False) -> dict[str, Any]:
    """Measure ``models`` (cached), fit the host CPU (:func:`fit_host`) and write ``out`` (a
    host.yaml) once the device loader accepts it.

    Returns
    -------
    dict
        :meth:`ProfileFit.to_dict` (``model_over_measured``: whole network, per model).
    """
    from ..graph import load_graph

    pairs = []
    for m in models:
        g = load_graph(m)
        pairs.append((g, measure_model(m, g, threads=threads, repeats=repeats, warmup=warmup, refresh=refresh)))
    fit = fit_host(host_device(models, threads), pairs)
    write_device_yaml(str(out), host_yaml(models, threads, fit))
    return fit.to_dict()
