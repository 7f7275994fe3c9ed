"""Sustained-run simulation: RC temperatures, governor caps and throughput over time.

The engine alternates, every governor period ``dt`` (1 s on Pixel 4's thermal-engine):

1. the governor samples the node temperatures and sets clock caps per processor;
2. the workload maps the caps to per-processor power and throughput;
3. the RC network advances ``dt`` exactly (zero-order hold) under that power.

Workload interface (anything callable): ``workload(caps) -> WorkloadPoint`` where ``caps`` is a
mapping processor name → fraction of that processor's maximum clock in [0, 1] (0 = switched
off) and the point holds ``power_w`` (processor name → W; unnamed processors draw 0) and
``fps``. Results are cached per distinct caps, so a workload may be slow (a cost-model call).
:class:`ScaledWorkload` is a ready-made one (dynamic power ∝ f³ as in TADF, Zhang et al. 2023;
stage throughput ∝ f).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..errors import ConfigError
from ..hardware.thermal_spec import ThermalSpec
from .governor import GovernorEvent
from .plant import ThermalPlant
from .rc import RCNetwork


@dataclass(frozen=True)
class WorkloadPoint:
    """What a workload does under given caps: power per processor (W) and throughput (FPS)."""

    power_w: Mapping[str, float]
    fps: float


Workload = Callable[[Mapping[str, float]], WorkloadPoint]


@dataclass(frozen=True)
class ScaledWorkload:
    """A workload whose processors scale with their clock cap.

    Power of processor p at clock fraction f: ``idle_w[p] + (full_w[p] - idle_w[p]) * f**exponent``
    (dynamic power ∝ f V² ≈ f³, TADF's ``P = Υ f³``); a switched-off processor draws nothing.
    Throughput of p: ``fps_at_max[p] * f``. ``combine="pipeline"`` → the slowest stage sets
    the FPS (Park & Ha's pipeline, 1 / max stage time); ``"parallel"`` → independent tasks,
    FPS add up (SPLASH's multi-DNN load).
    """

    full_w: Mapping[str, float]
    fps_at_max: Mapping[str, float]
    idle_w: Mapping[str, float] = field(default_factory=dict)
    exponent: float = 3.0
    combine: Literal["pipeline", "parallel"] = "pipeline"

    def __call__(self, caps: Mapping[str, float]) -> WorkloadPoint:
        power = {}
        for p, full in self.full_w.items():
            f = caps.get(p, 1.0)
            idle = self.idle_w.get(p, 0.0)
            power[p] = 0.0 if f <= 0 else idle + (full - idle) * f ** self.exponent
        rates = [self.fps_at_max[p] * caps.get(p, 1.0) for p in self.fps_at_max]
        fps = (min(rates) if self.combine == "pipeline" else sum(rates)) if rates else 0.0
        return WorkloadPoint(power, fps)


def reference_workload(spec: ThermalSpec, fps_at_max: Mapping[str, float] | None = None,
                       combine: Literal["pipeline", "parallel"] = "parallel") -> ScaledWorkload:
    """The calibration load of ``spec``: every processor at its ``full_load`` (static part from
    ``static``), throughput ``fps_at_max`` per processor (default 1 FPS each)."""
    full = {p: w for p, w in spec.full_load_w().items() if w > 0}
    if not full:
        raise ConfigError(f"thermal spec {spec.device!r} gives no full_load for any processor")
    static = {p: min(spec.static_w()[p], w) for p, w in full.items()}
    fps = dict(fps_at_max) if fps_at_max is not None else {p: 1.0 for p in full}
    return ScaledWorkload(full_w=full, fps_at_max=fps, idle_w=static, combine=combine)


def stress_workload(spec: ThermalSpec, at_least_w: Mapping[str, float]) -> ScaledWorkload:
    """The calibration load of ``spec`` with each processor drawing at least ``at_least_w[p]``
    (e.g. the device's maximum active power, and the radio at full offload): the walk that checks
    the die limits of a spec. Processors named only in ``at_least_w`` are added."""
    full = dict(spec.full_load_w())
    for p, w in at_least_w.items():
        full[p] = max(full.get(p) or 0.0, float(w))
    full = {p: w for p, w in full.items() if w > 0}
    static = spec.static_w()
    return ScaledWorkload(full_w=full, fps_at_max=dict.fromkeys(full, 1.0),
                          idle_w={p: min(static.get(p, 0.0), w) for p, w in full.items()}, combine="parallel")


@dataclass
class SimulationResult:
    """Time series and summary of one sustained run (arrays have one row per step, after it)."""

    device: str
    ambient_c: float
    step_s: float
    times_s: np.ndarray              # [K] end of each step
    node_names: tuple[str, ...]
    temps_c: np.ndarray              # [K, N]
    processor_names: tuple[str, ...]
    caps: np.ndarray                 # [K, P] clock fractions in force during each step
    power_w: np.ndarray              # [K, P]
    fps: np.ndarray                  # [K]
    status: np.ndarray               # [K] status level index in force during each step
    status_names: tuple[str, ...]
    events: list[GovernorEvent]
    skin_node: str
    die_nodes: tuple[str, ...]
    time_to_first_throttle_s: float | None
    time_to_severe_s: float | None
    sustained_fps: float
    peak_skin_c: float
    peak_die_c: float
    #: what the run leaves out (e.g. a power source the spec has no node for), one line each
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        """The headline figures as a JSON-ready dict (``notes`` only when there are any)."""
        return {
            "device": self.device, "ambient_c": self.ambient_c,
            "duration_s": float(self.times_s[-1]) if len(self.times_s) else 0.0,
            "time_to_first_throttle_s": self.time_to_first_throttle_s,
            "time_to_severe_s": self.time_to_severe_s,
            "sustained_fps": self.sustained_fps,
            "initial_fps": float(self.fps[0]) if len(self.fps) else 0.0,
            "peak_skin_c": self.peak_skin_c, "peak_die_c": self.peak_die_c,
            "events": len(self.events),
            **({"notes": list(self.notes)} if self.notes else {}),
        }

    def to_dict(self) -> dict:
        """Summary plus the full time series and events."""
        return {**self.summary(),
                "times_s": self.times_s.tolist(),
                "temps_c": {n: self.temps_c[:, i].round(3).tolist() for i, n in enumerate(self.node_names)},
                "caps": {p: self.caps[:, j].round(4).tolist() for j, p in enumerate(self.processor_names)},
                "power_w": {p: self.power_w[:, j].round(4).tolist() for j, p in enumerate(self.processor_names)},
                "fps": self.fps.round(4).tolist(),
                "status": [self.status_names[s] for s in self.status],
                "event_log": [e.to_dict() for e in self.events]}


def simulate(spec: ThermalSpec, workload: Workload, *, duration_s: float = 600.0,
             ambient_c: float | None = None, step_s: float | None = None,
             initial_c: np.ndarray | float | None = None, sustained_window_s: float = 60.0) -> SimulationResult:
    """Run ``workload`` on the device of ``spec`` for ``duration_s`` under its governor.

    Parameters
    ----------
    spec
        The device's thermal spec (RC network + governor).
    workload
        ``caps -> WorkloadPoint``; see the module docstring.
    duration_s
        Simulated time (default 10 minutes, SPLASH's run length).
    ambient_c
        Ambient temperature (default: the spec's ``ambient``).
    step_s
        Simulation step (default: the governor's sampling period).
    initial_c
        Initial node temperatures (scalar or [N]; default: everything at ambient).
    sustained_window_s
        The sustained FPS is the mean over this final window (default: the last minute).

    Returns
    -------
    SimulationResult
    """
    amb = spec.ambient_c if ambient_c is None else float(ambient_c)
    dt = spec.governor.period_s if step_s is None else float(step_s)
    if not duration_s > 0 or not dt > 0:
        raise ConfigError(f"duration and step must be > 0 s, got duration {duration_s!r}, step {dt!r}")
    n_steps = max(1, int(round(duration_s / dt)))
    plant = ThermalPlant(spec, dt, ambient_c=amb, initial_c=initial_c)
    procs = spec.processor_names
    power = np.empty((n_steps, len(procs)))
    fps = np.empty(n_steps)
    point = _CachedWorkload(spec, workload)
    for k in range(n_steps):
        power[k], fps[k] = point(plant.sample())
        plant.step(power[k])
        plant.record()
    log = plant.log()
    times = log.times_s
    win = times > times[-1] - sustained_window_s
    return SimulationResult(
        device=spec.device, ambient_c=amb, step_s=dt, times_s=times, node_names=spec.node_names,
        temps_c=log.temps_c, processor_names=procs, caps=log.caps, power_w=power, fps=fps, status=log.status,
        status_names=log.status_names, events=log.events, skin_node=spec.skin, die_nodes=spec.die_nodes,
        time_to_first_throttle_s=log.time_to_first_throttle_s(), time_to_severe_s=log.time_to_severe_s(),
        sustained_fps=float(fps[win].mean()), peak_skin_c=log.peak_skin_c(), peak_die_c=log.peak_die_c())


class _CachedWorkload:
    """``caps [P] -> (power [P] W within the spec's max_power, fps)``, one workload call per distinct caps."""

    def __init__(self, spec: ThermalSpec, workload: Workload) -> None:
        self.spec, self.workload = spec, workload
        self.limit = spec.power_limit_w()          # e.g. the phone's radio front end (max_power)
        self.cache: dict[tuple, tuple[np.ndarray, float]] = {}

    def __call__(self, caps: np.ndarray) -> tuple[np.ndarray, float]:
        key = tuple(np.round(caps, 9))
        if key not in self.cache:
            procs = self.spec.processor_names
            pt = self.workload(dict(zip(procs, caps.tolist(), strict=True)))
            unknown = sorted(set(pt.power_w) - set(procs))
            if unknown:
                raise ConfigError(f"workload reports power for {unknown[0]!r}, which the thermal spec of "
                                  f"{self.spec.device!r} does not know; valid: {', '.join(procs)}")
            drawn = np.array([float(pt.power_w.get(p, 0.0)) for p in procs])
            self.cache[key] = (np.minimum(drawn, self.limit), float(pt.fps))
        return self.cache[key]


class SteadyStateObjective:
    """Vectorised thermal objectives for searches (no governor, constant power per candidate).

    For constant power the RC response from ambient rises monotonically (``A`` is Metzler and
    stable), so the peak temperature is the steady state ``T_amb + K P`` — one matrix product
    for a whole population.

    Parameters
    ----------
    spec
        Thermal spec; inputs are ``spec.processor_names`` in order.
    """

    def __init__(self, spec: ThermalSpec) -> None:
        self.spec = spec
        self.network = RCNetwork.from_spec(spec)
        self._die = np.array([spec.node_index(n) for n in spec.die_nodes] or range(len(spec.node_names)))
        self._skin = spec.node_index(spec.skin)

    def steady_temps(self, power_w: np.ndarray, ambient_c: float | None = None) -> np.ndarray:
        """[K, N] steady node temperatures for per-processor power [K, P]."""
        amb = self.spec.ambient_c if ambient_c is None else ambient_c
        return self.network.steady_state(np.atleast_2d(power_w), amb)

    def peak_die_c(self, power_w: np.ndarray, ambient_c: float | None = None) -> np.ndarray:
        """[K] hottest die node at steady state."""
        return self.steady_temps(power_w, ambient_c)[:, self._die].max(axis=1)

    def peak_skin_c(self, power_w: np.ndarray, ambient_c: float | None = None) -> np.ndarray:
        """[K] skin temperature at steady state."""
        return self.steady_temps(power_w, ambient_c)[:, self._skin]

    def time_to_threshold_s(self, power_w: np.ndarray, node: str, threshold_c: float,
                            ambient_c: float | None = None, horizon_s: float = 600.0,
                            resolution_s: float = 1.0) -> np.ndarray:
        """[K] first time ``node`` reaches ``threshold_c`` from ambient (inf if not within the horizon),
        on a grid of ``resolution_s`` using the closed-form modal response."""
        amb = self.spec.ambient_c if ambient_c is None else ambient_c
        t = np.arange(0.0, horizon_s + resolution_s / 2, resolution_s)
        temps = self.network.node_response(power_w, t, self.spec.node_index(node), amb)
        hit = temps >= threshold_c
        return np.where(hit.any(axis=1), t[hit.argmax(axis=1)], np.inf)

    def time_to_first_trip_s(self, power_w: np.ndarray, ambient_c: float | None = None,
                             horizon_s: float = 600.0) -> np.ndarray:
        """[K] first time any governor trip row would fire under constant power (inf if none)."""
        amb = self.spec.ambient_c if ambient_c is None else ambient_c
        t = np.arange(0.0, horizon_s + 0.5, 1.0)
        out = np.full(np.atleast_2d(power_w).shape[0], np.inf)
        rows = [r for r in self.spec.governor.trips if not r.shutdown] or self.spec.governor.trips
        for sensor in sorted({r.sensor for r in rows}):
            temps = self.network.node_response(power_w, t, self.spec.node_index(sensor), amb)
            hit = temps >= min(r.trip_c for r in rows if r.sensor == sensor)
            out = np.minimum(out, np.where(hit.any(axis=1), t[hit.argmax(axis=1)], np.inf))
        return out
