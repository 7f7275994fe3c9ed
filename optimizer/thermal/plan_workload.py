"""Workloads under clock caps: capped cost tables, pipeline power, and a split plan's workload.

The sustained-run simulator (:func:`optimizer.thermal.simulate.simulate`) asks a workload for its
per-processor power and throughput under clock caps. This module holds what every such workload
shares: :class:`CappedTables` (the cost model rebuilt at ``clock_hz = c_p f_max``, cached per
distinct caps), :func:`pipeline_power` (power of a pipeline mapping from its stage times) and
:class:`SplitWorkload`. The pipeline workload itself evaluates a
:class:`~optimizer.search.pipeline.PipelineProblem`, so it lives above, in
:mod:`optimizer.search.thermal_workload`; a Plan becomes a workload in :mod:`optimizer.workflow.simulate`.

:func:`optimizer.workflow.simulate.plan_workload` turns a Plan v1 (pipeline or split) into the ``caps -> WorkloadPoint``
callable of :func:`optimizer.thermal.simulate.simulate`. Under caps ``c_p`` (fraction of
processor ``p``'s maximum clock, 0 = off) the cost model is rebuilt at ``clock_hz = c_p f_max``
(:func:`optimizer.cost.build_cost_table`, cached per distinct caps) and:

* **pipeline** (Park & Ha, IEEE Access 2024): stage times come from
  :meth:`optimizer.search.pipeline.PipelineProblem.evaluate` on the capped table with the plan's
  own settings (threads, cores, pre/post), throughput = 1 / slowest stage;
* **split** (SmartSplit): the head runs at ``min(head clock, c f_max)``; throughput =
  1 / (client + host + upload + server + download + RTT) (host: a detector's pre/post-processing
  on the CPU, stretched by its cap), frames processed one at a time as in
  :class:`optimizer.search.split.SplitProblem`; upload/server/download terms do not depend on
  the phone's clocks and are read from the plan's ``predicted.extra`` (or recomputed from the
  link and server files).

A processor the governor switches **off** (Pixel 4's NPU at 51 °C skin) does not stall the
plan: its layers fall back to the CPU, as NNAPI/TFLite re-route work of an unavailable
delegate — its cost-table column becomes the CPU's and its time heats the CPU (the fallback
stage keeps its own thread; it is not counted in the CPU-sharing slowdown of CPU stages).
Clocks are capped continuously (``cap × f_max``), not snapped to the device's clock levels.

Power of processor ``p`` (busy time ``b_p`` per frame, period ``T``; utilisation
``u_p = b_p / T``): ``P_p = P_static,p + (P_active,p(f) - P_static,p) u_p`` for processors the
plan uses (the CPU always: it hosts pre/post-processing and CPU fallback), 0 for the others
(power-gated). ``P_active(f) = P_static + Υ f³`` is the device's power model (TADF, Zhang et al.
2023). CPU busy time counts CPU stages, CPU fallback of other stages' unsupported layers and
pre/post-processing weighted by ``host_threads / cpu_threads``. A split's uploads heat the
``modem`` node: radio energy per frame (Huang et al., MobiSys'12: ``(α_u τ_u + β) I / B`` up,
alike down) plus, with the phone's :class:`~optimizer.hardware.schema.RadioState`, the tail the
radio holds between one frame's transfers and the next (Huang et al.'s tail, cut by the next
upload) over the period; a governor cap ``c`` on the ``modem`` (modem thermal mitigation)
stretches upload and download by ``1/c`` (same energy per bit, lower radio duty) and "off"
stops offloading (throughput 0). The phone's whole-device idle power (display, DRAM) is not an
input of the thermal specs and is left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..cost.hostproc import host_seconds_at_cap
from ..errors import ConfigError
from ..hardware.schema import RadioState
from .simulate import WorkloadPoint

#: processor name of the radio in the thermal specs
MODEM = "modem"


def _caps_key(caps: Mapping[str, float], names: Sequence[str]) -> tuple[float, ...]:
    return tuple(round(float(caps.get(n, 1.0)), 9) for n in names)


class CappedTables:
    """Cost tables of one graph on one device at capped clocks, cached per distinct caps.

    Parameters
    ----------
    graph
        The LayerGraph (granularity of the plan or problem).
    device
        The :class:`~optimizer.hardware.schema.Device`.
    dtype
        Compute dtype of the table.
    base
        The uncapped table if already built (reused for caps of all ones).

    Notes
    -----
    ``table(caps)`` returns a table whose off processors (cap 0) carry the CPU's latency and
    energy columns with ``supported`` False (all their time is CPU fallback).
    """

    def __init__(self, graph: Any, device: Any, dtype: str, *, backend: str | None = None,
                 base: Any = None) -> None:
        self.graph, self.device, self.dtype, self.backend = graph, device, dtype, backend
        self.names = device.processor_names
        self.cpu = device.fallback_index
        self.static_w = np.array([p.power.static_w for p in device.processors])
        self._cache: dict[tuple[float, ...], Any] = {}
        if base is not None:
            self._cache[(1.0,) * len(self.names)] = base

    def cpu_off(self, caps: Mapping[str, float]) -> bool:
        """Whether ``caps`` switch the CPU off (thermal shutdown: nothing runs, nothing heats)."""
        return float(caps.get(self.names[self.cpu], 1.0)) <= 0

    def table(self, caps: Mapping[str, float]) -> Any:
        """The CostTable under ``caps`` (processor → fraction of max clock, 0 = off; missing = 1)."""
        from ..cost import build_cost_table

        key = _caps_key(caps, self.names)
        if key not in self._cache:
            if key[self.cpu] <= 0:
                raise ConfigError(f"device {self.device.name!r}: the CPU ({self.names[self.cpu]!r}) is switched "
                                  "off; nothing can run (thermal shutdown)")
            clocks = {p.name: c * p.max_clock_hz for p, c in zip(self.device.processors, key, strict=True)
                      if 0 < c < 1}
            ct = build_cost_table(self.graph, self.device, self.dtype, backend=self.backend,
                                  clock_hz=clocks or None)
            off = [j for j, c in enumerate(key) if c <= 0]
            if off:
                lat, en, sup = ct.latency_s.copy(), ct.energy_j.copy(), ct.supported.copy()
                for j in off:
                    lat[:, j], en[:, j], sup[:, j] = lat[:, self.cpu], en[:, self.cpu], False
                ct = replace(ct, latency_s=lat, energy_j=en, supported=sup,
                             meta={**ct.meta, "off": [self.names[j] for j in off]})
            self._cache[key] = ct
        return self._cache[key]


def native_cum(ct: Any) -> np.ndarray:
    """[L+1, P] prefix sums of the time each processor spends natively (fallback excluded)."""
    cached = ct.meta.get("native_cum")
    if cached is None:
        cached = np.vstack([np.zeros((1, ct.n_processors)), np.cumsum(ct.latency_s * ct.supported, axis=0)])
        ct.meta["native_cum"] = cached
    return cached


def pipeline_power(problem: Any, X: np.ndarray, out: Any, static_w: np.ndarray,
                   pre_s: float = 0.0, post_s: float = 0.0) -> np.ndarray:
    """Per-processor power [N, P] (cost-table order) of pipeline mappings ``X`` [N, 2K].

    ``out`` is ``problem.evaluate(X)``; ``pre_s``/``post_s`` the raw pre/post-processing times
    (before CPU sharing). See the module docstring for the model.
    """
    ct = problem.cost_table
    prep = problem.prepare()
    K, cpu = prep.K, prep.cpu
    X = np.asarray(X, dtype=np.int64)
    counts, procs = X[:, :K], X[:, K:].copy()
    used = counts > 0
    procs[~used] = cpu
    b = np.cumsum(counts, axis=1)
    a = b - counts
    raw = ct.cum_latency_s[b, procs] - ct.cum_latency_s[a, procs]
    nat_cum = native_cum(ct)
    native = np.where(used, nat_cum[b, procs] - nat_cum[a, procs], 0.0)
    fallback = np.where(used, raw, 0.0) - native
    N, P = len(X), ct.n_processors
    busy = np.zeros((N, P))
    rows = np.repeat(np.arange(N), K)
    np.add.at(busy, (rows, procs.ravel()), native.ravel())
    busy[:, cpu] += fallback.sum(axis=1) + (pre_s + post_s) * problem.host_threads / problem.cpu_threads
    on = np.zeros((N, P), dtype=bool)
    on[rows, procs.ravel()] |= used.ravel()
    on[:, cpu] = True
    for name in ct.meta.get("off", ()):
        on[:, ct.processor_index(name)] = False  # switched off: its layers run on the CPU
    period = np.asarray(out["bottleneck_s"], dtype=np.float64)[:, None]
    util = np.divide(busy, period, out=np.zeros_like(busy), where=period > 0)
    active = np.asarray(ct.active_power_w, dtype=np.float64)[None, :]
    static = np.minimum(static_w[None, :], active)
    return np.where(on, static + (active - static) * util, 0.0)


def spec_columns(spec: Any, names: Sequence[str], device: str) -> np.ndarray:
    """Index in ``spec.processor_names`` of each device processor name (error if one is missing)."""
    procs = spec.processor_names
    missing = [n for n in names if n not in procs]
    if missing:
        raise ConfigError(f"thermal spec {spec.device!r} has no processor {missing[0]!r} of device {device!r}; "
                          f"it knows {', '.join(procs)}")
    return np.array([procs.index(n) for n in names], dtype=np.int64)


@dataclass
class SplitWorkload:
    """Simulator workload of one split plan (see the module docstring)."""

    tables: CappedTables
    split: int
    head: str | None
    head_clock_hz: float | None
    remote_s: float  # upload + server + download + RTT (independent of the phone's clocks)
    radio_j: float  # upload + download energy per frame
    transfer_s: float = 0.0  # the upload + download part of remote_s (stretched by a modem cap)
    host_s: float = 0.0  # detector pre/post-processing on the CPU at its top clock (cost.hostproc)
    host_share: float = 0.0  # the host threads' share of the CPU
    radio: RadioState | None = None  # the phone's radio on the link: its tail between transfers

    def __call__(self, caps: Mapping[str, float]) -> WorkloadPoint:
        if self.tables.cpu_off(caps):
            return WorkloadPoint({}, 0.0)
        radio_cap = float(caps.get(MODEM, 1.0))
        if self.split < len(self.tables.graph) and radio_cap <= 0:
            # the radio is switched off (modem thermal mitigation): no frame leaves the phone
            cpu = self.tables.cpu
            return WorkloadPoint({self.tables.names[cpu]: float(self.tables.static_w[cpu])}, 0.0)
        remote_s = self.remote_s + self.transfer_s * (1.0 / radio_cap - 1.0) if radio_cap < 1 else self.remote_s
        dev = self.tables.device
        names = self.tables.names
        cpu = self.tables.cpu
        power = dict.fromkeys(names, 0.0)
        if self.split == 0 or self.head is None:
            period = remote_s
            ct = self.tables.table({})
            native_cpu = 0.0
            j = cpu
            busy = 0.0
        else:
            j = names.index(self.head)
            proc = dev.processors[j]
            frac = float(caps.get(self.head, 1.0))
            clock = self.head_clock_hz or proc.max_clock_hz
            eff = {n: float(caps.get(n, 1.0)) for n in names}
            if frac > 0:
                eff[self.head] = min(clock, frac * proc.max_clock_hz) / proc.max_clock_hz
            ct = self.tables.table(eff)
            # the head is one stage (delegate partitions, CPU fallback, one invoke), as in the split search
            busy = float(ct.stage_seconds(0, self.split, j))
            native = min(busy, float(native_cum(ct)[self.split, j]) + float(ct.invoke_overhead_s[j]))
            native_cpu = busy - native
            busy = native
            period = busy + native_cpu + remote_s
        host = host_seconds_at_cap(self.host_s, caps.get(names[cpu], 1.0))
        period += host
        static = np.minimum(self.tables.static_w, ct.active_power_w)
        if j != cpu:
            u = busy / period if period > 0 else 0.0
            power[names[j]] = float(static[j] + (ct.active_power_w[j] - static[j]) * u)
            cpu_busy = native_cpu
        else:
            cpu_busy = busy + native_cpu
        u_cpu = (cpu_busy + host * self.host_share) / period if period > 0 else 0.0
        power[names[cpu]] = float(static[cpu] + (ct.active_power_w[cpu] - static[cpu]) * u_cpu)
        if self.radio_j > 0 and period > 0:
            tail = 0.0
            if self.radio is not None:      # the radio holds its tail state until the next frame's upload
                transfer = self.transfer_s / radio_cap if radio_cap < 1 else self.transfer_s
                tail = float(self.radio.tail_j(max(period - transfer, 0.0)))
            power[MODEM] = (self.radio_j + tail) / period
        return WorkloadPoint(power, 1.0 / period if period > 0 else float("inf"))
