"""Thermal objectives for the searches: sustained FPS, peak temperature, time to throttle.

Running the full simulator (:func:`optimizer.thermal.simulate.simulate`, ~0.1-0.2 s per
mapping) inside a GA that evaluates thousands of mappings would dominate its run time, so the
objectives use a vectorised **governor-level walk** over a whole population at once:

1. The governor's non-shutdown trip rows on its ladder sensor (the status sensor, else the
   sensor of the lowest trip: the skin on the phones), sorted by trip temperature, define levels
   ``0..R``: level ``j`` has the caps of rows ``0..j-1`` in force (level 0 = unthrottled). Rows
   on other sensors (the phones' die trips, the radio's rows) act independently of that ladder and are
   left out of the estimate: where they fire, the full simulation is the reference.
2. For each level reached by some candidate, the search's own cost model is evaluated at the
   level's capped clocks (the problem's ``evaluate`` on a cost table rebuilt at
   ``cap × f_max``, cached per level; an "off" processor falls back to the CPU) giving per
   candidate throughput and per-processor power (:mod:`optimizer.thermal.plan_workload`).
3. Temperatures at the horizon under constant power come in closed form from the RC network's
   modes (:meth:`optimizer.thermal.rc.RCNetwork.response`). A candidate at level ``j`` moves
   to ``j+1`` when row ``j``'s sensor would reach its trip temperature by the horizon.
4. Where the settled level cools the sensor below the row's clear temperature, the governor
   oscillates between the two levels (hysteresis, as in the simulator's sawtooth); the share of
   time at the higher level balances the sensor at the middle of the hysteresis band:
   ``α = (T_lo_level − θ) / (T_lo_level − T_hi_level)``, ``θ = (trip + clear) / 2``, and the
   sustained FPS is ``α fps_j + (1 − α) fps_{j−1}`` (a quasi-static average, the equilibrium
   argument of SPLASH's sustained-performance analysis).

Objectives (natural sense):

* ``sustained_fps`` (max): the estimate of step 4 — the simulator's last-minute FPS;
* ``peak_temp_c`` (min): the hottest die at the horizon **without** throttling (the RC response
  is monotone from ambient under constant power, so this equals the simulated peak whenever the
  mapping does not throttle, and ranks the heat a mapping generates otherwise);
* ``time_to_throttle_s`` (max): first time a trip row would fire under the unthrottled power
  (:meth:`SteadyStateObjective.time_to_first_trip_s`), capped at the horizon.

``tests/test_thermal_objectives.py`` checks these against the full simulator on sample mappings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..cost.hostproc import host_seconds_at_cap
from ..errors import ConfigError, UnknownNameError
from ..hardware import load_device, load_link
from ..hardware.schema import RadioState
from ..thermal.governor import Governor
from ..hardware.thermal_spec import thermal_spec_of
from ..thermal.plan_workload import MODEM, CappedTables, native_cum, pipeline_power, spec_columns
from ..thermal.rc import RCNetwork
from ..thermal.simulate import SteadyStateObjective
from .pipeline import Objective, PipelineProblem

#: objective name -> sense
THERMAL_OBJECTIVES: dict[str, str] = {"sustained_fps": "max", "peak_temp_c": "min", "time_to_throttle_s": "max"}
#: accepted spellings on the command line
THERMAL_ALIASES: dict[str, str] = {
    "sustained-fps": "sustained_fps", "peak-temp": "peak_temp_c", "peak_temp": "peak_temp_c",
    "peak-temp-c": "peak_temp_c", "time-to-throttle": "time_to_throttle_s",
    "time_to_throttle": "time_to_throttle_s",
}


def thermal_name(name: str) -> str | None:
    """Canonical thermal objective name of ``name`` (an alias or the name), else None."""
    n = THERMAL_ALIASES.get(name, name)
    return n if n in THERMAL_OBJECTIVES else None


EvalFn = Callable[[dict[str, float]], tuple[np.ndarray, np.ndarray]]


class GovernorLevels:
    """The governor of a thermal spec as an ordered list of cap levels (see the module docstring).

    Parameters
    ----------
    spec
        The device's thermal spec.
    duration_s, ambient_c
        Horizon of the estimate and ambient temperature (default: the spec's).
    """

    def __init__(self, spec: Any, *, duration_s: float = 600.0, ambient_c: float | None = None) -> None:
        if not duration_s > 0:
            raise ConfigError(f"thermal objective horizon must be > 0 s, got {duration_s!r}")
        self.spec = spec
        self.duration_s = float(duration_s)
        self.ambient_c = spec.ambient_c if ambient_c is None else float(ambient_c)
        self.network = RCNetwork.from_spec(spec)
        self.steady = SteadyStateObjective(spec)
        self.power_limit = spec.power_limit_w()
        trips = spec.governor.trips
        live = [i for i, r in enumerate(trips) if not r.shutdown]
        st = spec.governor.status
        ladder = st.sensor if st is not None else (min((trips[i] for i in live), key=lambda r: r.trip_c).sensor
                                                   if live else None)
        order = sorted((i for i in live if trips[i].sensor == ladder), key=lambda i: trips[i].trip_c)
        self.rows = [trips[i] for i in order]
        self.sensor = np.array([spec.node_index(r.sensor) for r in self.rows], dtype=np.int64)
        gov = Governor(spec)
        caps = [np.ones(len(spec.processor_names))]
        for k in range(len(order)):
            gov.reset()
            gov.active[order[:k + 1]] = True
            caps.append(gov.caps.copy())
        self.caps = np.array(caps)  # [R+1, M] in spec.processor_names order
        self.die = np.array([spec.node_index(n) for n in spec.die_nodes] or range(len(spec.node_names)))

    def level_caps(self, j: int) -> dict[str, float]:
        """Caps of level ``j`` as processor → fraction."""
        return dict(zip(self.spec.processor_names, self.caps[j].tolist(), strict=True))

    def horizon_temps(self, power_w: np.ndarray) -> np.ndarray:
        """[N, nodes] temperatures at the horizon under constant power [N, M] from ambient."""
        return self.network.response(power_w, np.array([self.duration_s]), self.ambient_c)[:, 0, :]

    def estimate(self, evaluate: EvalFn, n: int, *, sustained: bool = True) -> dict[str, np.ndarray]:
        """Objectives of ``n`` candidates; ``evaluate(caps) -> (power [n, M], fps [n])``.

        Returns ``peak_temp_c``, ``time_to_throttle_s`` and, with ``sustained``, also
        ``sustained_fps`` and ``level`` [n] (the walk over the levels; without it only the
        unthrottled level is evaluated).
        """
        cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

        def at(j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            if j not in cache:
                p, f = evaluate(self.level_caps(j))
                p = np.minimum(p, self.power_limit)
                cache[j] = (p, np.asarray(f, dtype=np.float64), self.horizon_temps(p))
            return cache[j]

        p0, f0, t0 = at(0)
        ttt = np.minimum(self.steady.time_to_first_trip_s(p0, self.ambient_c, self.duration_s), self.duration_s)
        result = {"peak_temp_c": t0[:, self.die].max(axis=1), "time_to_throttle_s": ttt}
        if not sustained:
            return result
        level = np.zeros(n, dtype=np.int64)
        for j, row in enumerate(self.rows):
            here = level == j
            if not here.any():
                break
            hot = here & (at(j)[2][:, self.sensor[j]] >= row.trip_c)
            level[hot] = j + 1
        fps = f0.copy()
        for s in range(1, len(self.rows) + 1):
            m = level == s
            if not m.any():
                continue
            row, sens = self.rows[s - 1], self.sensor[s - 1]
            _, f_hi, t_hi = at(s)
            _, f_lo, t_lo = at(s - 1)
            theta = 0.5 * (row.trip_c + row.clear_c)
            a, b = t_lo[:, sens], t_hi[:, sens]
            with np.errstate(divide="ignore", invalid="ignore"):
                alpha = np.where(b < row.clear_c, np.clip((a - theta) / (a - b), 0.0, 1.0), 1.0)
            fps[m] = (alpha * f_hi + (1.0 - alpha) * f_lo)[m]
        return {**result, "sustained_fps": fps, "level": level}


class _Memo:
    """Objective values of the last population (several hooks share one estimate)."""

    def __init__(self) -> None:
        self.key: bytes | None = None
        self.value: dict[str, np.ndarray] | None = None

    def get(self, X: np.ndarray, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        key = np.ascontiguousarray(X).tobytes() + str(X.shape).encode()
        if key != self.key or self.value is None:
            self.value, self.key = compute(), key
        return self.value


def _check_names(names: Sequence[str]) -> list[str]:
    out = []
    for raw in names:
        n = thermal_name(raw)
        if n is None:
            raise UnknownNameError("thermal objective", raw, [*THERMAL_OBJECTIVES, *THERMAL_ALIASES])
        out.append(n)
    return out


def pipeline_thermal_objectives(names: Sequence[str], graph: Any, device: Any, *, duration_s: float = 600.0,
                                ambient_c: float | None = None) -> tuple[Any, ...]:
    """:class:`~optimizer.search.pipeline.Objective` hooks for a PipelineProblem on ``device``.

    Parameters
    ----------
    names
        Thermal objective names or aliases (``sustained-fps``, ``peak-temp``, ``time-to-throttle``).
    graph, device
        The LayerGraph and Device of the problem (cost tables are rebuilt at capped clocks).
    """
    canon = _check_names(names)
    dev = load_device(device) if isinstance(device, str) else device
    spec = thermal_spec_of(dev)
    cols = spec_columns(spec, dev.processor_names, dev.name)
    levels = GovernorLevels(spec, duration_s=duration_s, ambient_c=ambient_c)
    state: dict[str, Any] = {}
    memo = _Memo()

    def compute(problem: Any, X: np.ndarray, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ct = problem.cost_table
        if state.get("table") is not ct:
            state.update(table=ct, tables=CappedTables(graph, dev, ct.dtype, base=ct), problems={})
        tables: CappedTables = state["tables"]

        def evaluate(caps: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
            key = tuple(round(caps.get(n, 1.0), 9) for n in dev.processor_names)
            if key not in state["problems"]:
                cpu_frac = caps.get(dev.processor_names[dev.fallback_index], 1.0) or 1.0
                state["problems"][key] = PipelineProblem(
                    tables.table(caps), stages=problem.stages, objectives=("throughput",),
                    processors=problem.processors, cpu_threads=problem.cpu_threads,
                    host_threads=problem.host_threads, cpu_cores=problem.cpu_cores,
                    pre_s=problem.host_s()[0] / cpu_frac, post_s=problem.host_s()[1] / cpu_frac)
            prob = state["problems"][key]
            o = prob.evaluate(X)
            pw = pipeline_power(prob, X, o, tables.static_w, *prob.host_s())
            full = np.zeros((len(X), len(spec.processor_names)))
            full[:, cols] = pw
            return full, o["throughput_fps"]

        return levels.estimate(evaluate, len(X), sustained="sustained_fps" in canon)

    def hook(name: str) -> Callable[[Any, np.ndarray, dict[str, np.ndarray]], np.ndarray]:
        return lambda problem, X, out: memo.get(X, lambda: compute(problem, X, out))[name]

    return tuple(Objective(n, hook(n), THERMAL_OBJECTIVES[n]) for n in canon)


def split_thermal_objectives(names: Sequence[str], device: Any, *, graph: Any = None, duration_s: float = 600.0,
                             ambient_c: float | None = None) -> tuple[Any, ...]:
    """Objective hooks for a :class:`~optimizer.search.split.SplitProblem` on ``device``.

    Under a level's caps, a head option (processor, clock) runs at the highest clock level of
    its processor not above ``min(clock, cap f_max)`` (an "off" head falls back to the CPU's
    options); the phone is busy ``client_s`` of each ``client + upload + server + download +
    RTT`` period, its radio spends ``upload_j + download_j`` per period plus its tail between
    transfers (the phone's :meth:`~optimizer.hardware.schema.Link.radio_state`; ``modem`` node). With
    ``graph`` (the searched LayerGraph) the head's CPU-fallback time heats the CPU, as in
    :class:`~optimizer.thermal.plan_workload.SplitWorkload`; without it all head time heats
    the head processor.
    """
    canon = _check_names(names)
    dev = load_device(device) if isinstance(device, str) else device
    model = _SplitThermal(dev, GovernorLevels(thermal_spec_of(dev), duration_s=duration_s, ambient_c=ambient_c),
                          graph, sustained="sustained_fps" in canon)
    memo = _Memo()

    def hook(name: str) -> Callable[[Any, np.ndarray, Any], np.ndarray]:
        return lambda problem, X, out: memo.get(np.asarray(X), lambda: model.estimate(problem, np.asarray(X)))[name]

    return tuple(Objective(n, hook(n), THERMAL_OBJECTIVES[n]) for n in canon)


class _SplitThermal:
    """Per-processor power and frame rate of split candidates under governor caps (see
    :func:`split_thermal_objectives`); per-SplitCosts arrays and per-caps option maps are cached."""

    def __init__(self, dev: Any, levels: GovernorLevels, graph: Any, *, sustained: bool) -> None:
        self.dev, self.levels, self.graph, self.sustained = dev, levels, graph, sustained
        spec = levels.spec
        self.spec_idx = {n: i for i, n in enumerate(spec.processor_names)}
        self.cpu_name = dev.processor_names[dev.fallback_index]
        self.static = {p.name: min(p.power.static_w, p.power_w()) for p in dev.processors}
        self.costs: Any = None
        self.maps: dict[tuple[tuple[str, float], ...], tuple[np.ndarray, np.ndarray]] = {}

    def prepare(self, costs: Any) -> None:
        """Check the processors and cache the head's native (non-fallback) time per option."""
        if self.costs is costs:
            return
        opts, dev, spec = costs.options, self.dev, self.levels.spec
        for o in {o.processor for o in opts} | {self.cpu_name}:
            if o not in self.spec_idx:
                raise ConfigError(f"thermal spec {spec.device!r} has no processor {o!r} of device {dev.name!r}; "
                                  f"it knows {', '.join(spec.processor_names)}")
        native = costs.head_latency_s.copy()
        if self.graph is not None:
            tables = CappedTables(self.graph, dev, costs.dtype)
            for k, o in enumerate(opts):
                ct = tables.table({o.processor: o.clock_hz / dev.processor(o.processor).max_clock_hz})
                j = ct.processor_index(o.processor)
                calls = np.where(np.arange(ct.n_layers + 1) > 0, ct.invoke_overhead_s[j], 0.0)  # one per head
                native[k] = np.minimum(native_cum(ct)[:, j] + calls, costs.head_latency_s[k])
        self.costs, self.native, self.maps = costs, native, {}
        self.active = np.array([dev.processor(o.processor).power_w(o.clock_hz) for o in opts])
        self.proc = np.array([o.processor for o in opts])

    def option_map(self, caps: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
        """For each option: the option it runs as under ``caps`` and a time scale (>= 1)."""
        key = tuple(sorted(caps.items()))
        if key not in self.maps:
            opts = self.costs.options
            k_new, scale = np.arange(len(opts)), np.ones(len(opts))
            for k, o in enumerate(opts):
                proc = o.processor if caps.get(o.processor, 1.0) > 0 else self.cpu_name
                fmax = self.dev.processor(proc).max_clock_hz
                limit = min(o.clock_hz if proc == o.processor else fmax, caps.get(proc, 1.0) * fmax)
                same = [i for i, q in enumerate(opts) if q.processor == proc]
                if not same:
                    raise ConfigError(f"split thermal objective: processor {proc!r} has no head option "
                                      "(search it too, or leave out --processors)")
                below = [i for i in same if opts[i].clock_hz <= limit * (1 + 1e-9)]
                if below:
                    k_new[k] = max(below, key=lambda i: opts[i].clock_hz)
                else:
                    k_new[k] = min(same, key=lambda i: opts[i].clock_hz)
                    scale[k] = opts[k_new[k]].clock_hz / limit
            self.maps[key] = (k_new, scale)
        return self.maps[key]

    def estimate(self, problem: Any, X: np.ndarray) -> dict[str, np.ndarray]:
        """Thermal objective estimates of population ``X`` over the governor levels."""
        self.prepare(problem.costs)
        b = problem.breakdown(X)
        l, k, _ = problem.columns(X)
        transfer = b["upload_s"] + b["download_s"]
        pop = {"l": l, "k": k, "transfer": transfer, "remote": transfer + b["server_s"] + b["rtt_s"],
               "radio": b["upload_j"] + b["download_j"], "on_phone": l > 0}
        radio = load_link(problem.costs.network).radio_state(self.dev.name)
        return self.levels.estimate(lambda caps: self.power_fps(caps, pop, radio), len(X), sustained=self.sustained)

    def power_fps(self, caps: dict[str, float], pop: dict[str, np.ndarray],
                  radio: RadioState | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Power per thermal-spec processor [N, P] and frame rate [N] of the population under ``caps``
        (``radio``: the phone's radio on the link, whose tail heats the modem between frames)."""
        n, cpu, static = len(pop["l"]), self.cpu_name, self.static
        if caps.get(cpu, 1.0) <= 0:
            return np.zeros((n, len(self.spec_idx))), np.zeros(n)
        k_new, scale = self.option_map(caps)
        kk, on_phone, transfer = k_new[pop["k"]], pop["on_phone"], pop["transfer"]
        client_s = self.costs.head_latency_s[kk, pop["l"]] * scale[pop["k"]]
        native_s = self.native[kk, pop["l"]] * scale[pop["k"]]
        host_s = np.zeros(n) if self.costs.host_s is None else host_seconds_at_cap(  # detector pre/post-
            self.costs.host_s[pop["l"]], caps.get(cpu, 1.0))                           # processing on the CPU
        radio_cap = caps.get(MODEM, 1.0)          # modem mitigation stretches the transfers
        period = client_s + host_s + pop["remote"] + (transfer * (1.0 / radio_cap - 1.0) if 0 < radio_cap < 1 else 0.0)
        if radio_cap <= 0:                         # radio off: frames that leave the phone stall
            period = np.where(transfer > 0, np.inf, period)
        inv = np.divide(1.0, period, out=np.zeros_like(period), where=period > 0)
        procs = self.proc[kk]
        head_w = np.where(on_phone, (self.active[kk] - np.array([static[p] for p in procs])) * native_s * inv, 0.0)
        cpu_proc = self.dev.processor(cpu)
        cpu_active = cpu_proc.power_w(max(caps.get(cpu, 1.0), 1e-9) * cpu_proc.max_clock_hz)
        power = np.zeros((n, len(self.spec_idx)))
        for name in set(procs.tolist()):
            power[:, self.spec_idx[name]] += np.where(on_phone & (procs == name), static[name] + head_w, 0.0)
        col = self.spec_idx[cpu]
        power[:, col] += np.where(on_phone & (procs == cpu), 0.0, static[cpu])
        power[:, col] += (cpu_active - static[cpu]) * np.where(on_phone, client_s - native_s, 0.0) * inv
        power[:, col] += (cpu_active - static[cpu]) * self.costs.meta.get("host_cpu_share", 0.0) * host_s * inv
        if MODEM in self.spec_idx:           # transfers, then the tail until the next frame's upload
            tail = np.zeros(n)
            if radio is not None:
                stretched = transfer / radio_cap if 0 < radio_cap < 1 else transfer
                gap = np.maximum(np.where(np.isfinite(period), period, 0.0) - stretched, 0.0)
                tail = np.where(transfer > 0, radio.tail_j(gap), 0.0)
            power[:, self.spec_idx[MODEM]] += (pop["radio"] + tail) * inv
        return power, np.divide(1.0, period, out=np.full_like(period, np.inf), where=period > 0)
