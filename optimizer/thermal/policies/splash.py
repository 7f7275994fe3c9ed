"""SPLASH: thermal-aware multi-DNN scheduling over phone processors and the cloud (Jeong, SNU 2023).

docs/METHODS.md section 5. A discrete-event scheduler assigns every inference request of a camera
frame to one worker (the phone's CPU, GPU, DSP, NPU, or the cloud), each with a FIFO queue. The
"real" phone it runs on is the thermal simulator of :mod:`optimizer.thermal`: the device's RC
network advanced exactly every ``substep_s`` under the power the dispatched requests draw, and
its hysteresis governor sampled every ``period_s``. Clock caps slow workers (latency ∝ 1/cap,
dynamic power ∝ cap³); a switched-off processor (Pixel 4's NPU at 51 °C skin) takes no work.
Offloading heats the phone through the radio ("modem" node) while it sends and receives, and in
its tail state after each transfer (Huang et al., MobiSys'12: the radio holds a high power for
``tail_s`` before it sleeps; at a camera rate the next transfer comes first, so it never sleeps).

A run (:func:`run_schedule`) is made of:

* :mod:`.splash_model`: what the scheduler learns online (a sliding-window linear thermal model
  seeded by a profiling run) and the run's view of the phone;
* :mod:`.splash_dispatch`: queues, latency tables, the communication model, and the energy and
  busy time each dispatched request books on the phone;
* :mod:`.splash_policies`: the dispatch rules ``minheat``, ``ppt``, ``heft``, ``heft-cloud``.

:func:`max_sustainable_fps` searches the highest frame rate a policy sustains without throttling.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConfigError, ConstraintError, UnknownNameError
from ...hardware.thermal_spec import ThermalSpec
from ..governor import GovernorEvent
from ..plant import PlantLog, ThermalPlant
from .splash_dispatch import Dispatcher, period_estimates
from .splash_model import OnlineThermalModel, RunSetup, profiling_run
from .splash_policies import POLICIES, POLICY_CLASSES
from .workload import WorkerProfiles


@dataclass
class ScheduleResult:
    """Outcome of one scheduled run (per-second series are sampled at the governor period)."""

    policy: str
    workload: str
    device: str
    link: str | None
    fps: float
    duration_s: float
    ambient_c: float
    workers: tuple[str, ...]
    time_to_severe_s: float | None
    time_to_first_throttle_s: float | None
    slo_rate: float                        # frames whose requests all finished within the period
    request_slo_rate: float
    mean_latency_s: float
    p95_latency_s: float
    share: dict[str, float]                # fraction of requests per worker
    peak_temp_c: dict[str, float]          # per RC node
    final_temp_c: dict[str, float]
    model_rmse_c: dict[str, dict[str, float]]   # worker -> {"model", "persistence"}
    times_s: np.ndarray
    node_names: tuple[str, ...]
    temps_c: np.ndarray                    # [K, N]
    status: np.ndarray                     # [K]
    status_names: tuple[str, ...]
    events: list[GovernorEvent] = field(default_factory=list)
    wall_s: float = 0.0

    def summary(self) -> dict:
        """Headline figures, JSON-ready."""
        return {"policy": self.policy, "workload": self.workload, "device": self.device,
                "link": self.link, "fps": self.fps, "duration_s": self.duration_s,
                "ambient_c": self.ambient_c, "time_to_severe_s": self.time_to_severe_s,
                "time_to_first_throttle_s": self.time_to_first_throttle_s,
                "slo_rate": self.slo_rate, "request_slo_rate": self.request_slo_rate,
                "mean_latency_ms": 1e3 * self.mean_latency_s, "p95_latency_ms": 1e3 * self.p95_latency_s,
                "share": self.share, "peak_temp_c": self.peak_temp_c, "final_temp_c": self.final_temp_c,
                "model_rmse_c": self.model_rmse_c, "throttle_events": sum(e.kind == "trip" for e in self.events),
                "wall_s": self.wall_s}

    def to_dict(self) -> dict:
        """Summary plus the per-second temperature and status series."""
        return {**self.summary(), "times_s": self.times_s.tolist(),
                "temps_c": {n: self.temps_c[:, i].round(3).tolist() for i, n in enumerate(self.node_names)},
                "status": [self.status_names[s] for s in self.status],
                "event_log": [e.to_dict() for e in self.events]}


def check_slo(profiles: WorkerProfiles, fps: float, workers: tuple[int, ...] | None = None) -> None:
    """Raise :class:`ConstraintError` if some request type meets the frame-period SLO on no worker.

    The message names the request, the fastest worker and the reachable rates: the FPS at
    which that request alone meets the SLO, and the aggregate capacity bound of all workers.
    """
    lat = profiles.latency_s
    idx = list(range(len(profiles.workers))) if workers is None else list(workers)
    slo = 1.0 / fps
    best = lat[:, idx].min(axis=1)
    bad = np.flatnonzero(best > slo)
    if len(bad):
        r = int(bad[0])
        w = idx[int(np.argmin(lat[r, idx]))]
        raise ConstraintError(
            f"SLO of {1e3 * slo:.1f} ms ({fps:g} FPS) cannot be met by any worker for "
            f"{profiles.labels[r]}: fastest is {profiles.workers[w]} at {1e3 * best[r]:.2f} ms; "
            f"reachable: at most {1.0 / best.max():.1f} FPS per request, "
            f"{capacity_fps(profiles, idx):.1f} FPS for the whole workload on all workers")


def capacity_fps(profiles: WorkerProfiles, workers: list[int] | None = None) -> float:
    """Upper bound on frames/s: all workers busy in parallel, each on its own share (no heat)."""
    idx = list(range(len(profiles.workers))) if workers is None else workers
    per_frame = profiles.counts @ profiles.latency_s[:, idx]          # [W'] s per frame alone
    return float(np.sum(1.0 / per_frame))


def run_schedule(profiles: WorkerProfiles, spec: ThermalSpec, policy: str, fps: float, *,
                 duration_s: float = 600.0, eta: float = 0.1, ambient_c: float | None = None,
                 seed: int = 0, window: int = 2000, substep_s: float = 0.1, ema: float = 0.1,
                 ridge: float = 1e-4, profiling_s: float = 120.0, device_jitter: float = 0.03,
                 network_jitter: float = 0.15, sensor_resolution_c: float = 0.1,
                 stop_at_severe: bool = False) -> ScheduleResult:
    """Run ``policy`` over ``profiles``' workload at ``fps`` for ``duration_s`` on the simulated phone
    (:class:`~optimizer.thermal.plant.ThermalPlant`: RC network stepped every ``substep_s``, governor
    sampled every period).

    Parameters
    ----------
    profiles
        From :func:`~optimizer.thermal.policies.workload.worker_profiles`.
    spec
        The device's thermal spec (RC network and governor).
    policy
        One of :data:`POLICIES` (the :class:`Policy` strategies of :data:`POLICY_CLASSES`).
    fps
        Camera frame rate; the SLO of each request is the frame period.
    eta
        SPLASH's η (penalty weight for ``minheat``, latency weight for ``ppt``).
    seed
        Seeds the latency jitter (lognormal, ``device_jitter``/``network_jitter``) and profiling.
    window, substep_s, ema, ridge, profiling_s, sensor_resolution_c
        Sliding-window length (samples), RC step, latency-table EMA factor, ridge weight,
        length of the offline profiling run that seeds the thermal model, sensor quantum.
    stop_at_severe
        End the run at the first "severe" status (the FPS search needs no more); the result's
        ``duration_s`` is then the time simulated.

    Returns
    -------
    ScheduleResult
    """
    t_wall = time.perf_counter()
    if policy not in POLICIES:
        raise UnknownNameError("policy", policy, POLICIES)
    if not fps > 0 or not duration_s > 0:
        raise ConfigError(f"fps and duration must be > 0, got fps {fps!r}, duration {duration_s!r} s")
    if not 0.0 <= eta <= 1.0:
        raise ConfigError(f"eta must lie in [0, 1], got {eta!r}")
    rule = POLICY_CLASSES[policy](eta, fps)
    allowed = allowed_workers(profiles, policy)
    check_slo(profiles, fps, tuple(allowed))
    ambient = spec.ambient_c if ambient_c is None else float(ambient_c)
    setup = RunSetup(profiles, spec, fps, substep_s, duration_s, sensor_resolution_c)
    rng = np.random.default_rng(seed)
    model = OnlineThermalModel(setup.n_features, len(setup.sensor_nodes), window, ridge)
    profiling_run(setup, model, rng, profiling_s, ambient)
    dispatcher = Dispatcher(setup, rule, rng, device_jitter, network_jitter, ema)
    plant = ThermalPlant(spec, setup.period_s, setup.substeps, ambient_c=ambient)
    model_errors: list[np.ndarray] = []
    persistence_errors: list[np.ndarray] = []
    previous_busy, previous_offload_mb = np.zeros(setup.n_workers), (0.0, 0.0)
    output = setup.worker_output
    for p in range(setup.n_periods):
        input_caps = plant.sample()
        reading = setup.read(plant.x)
        dispatcher.dispatch(p * setup.period_s + setup.period_s,
                            period_estimates(setup, model, input_caps, reading, previous_busy, previous_offload_mb,
                                             dispatcher, allowed))
        dispatcher.refit_comm()
        power, busy = dispatcher.period_load(p)
        plant.run(power)
        plant.record()
        after = setup.read(plant.x)
        offload_mb = (dispatcher.offload_mb[p, 0], dispatcher.offload_mb[p, 1])
        features = setup.features(reading, input_caps, busy, *offload_mb)
        predicted = reading + model.predict(features)
        model_errors.append(predicted[output] - after[output])
        persistence_errors.append(reading[output] - after[output])
        model.add(features, after - reading)
        model.refit()
        previous_busy, previous_offload_mb = busy, offload_mb
        governor = plant.governor
        if stop_at_severe and governor.severe_level is not None and governor.level >= governor.severe_level:
            break
    errors = (np.asarray(model_errors), np.asarray(persistence_errors))
    return _schedule_result(setup, policy, plant.log(), dispatcher, errors, ambient, time.perf_counter() - t_wall)


def allowed_workers(profiles: WorkerProfiles, policy: str) -> list[int]:
    """The workers ``policy`` may use: the processors, and the cloud unless the policy keeps off it."""
    if policy not in POLICY_CLASSES:
        raise UnknownNameError("policy", policy, POLICIES)
    return list(range(len(profiles.workers) if POLICY_CLASSES[policy].cloud else profiles.n_processors))


def _schedule_result(setup: RunSetup, policy: str, log: PlantLog, dispatcher: Dispatcher,
                     errors: tuple[np.ndarray, np.ndarray], ambient_c: float, wall_s: float) -> ScheduleResult:
    """The :class:`ScheduleResult` of a run from the plant's log and the dispatcher's records;
    ``errors`` are the online model's and persistence's one-period errors [periods, workers]."""
    profiles, n_workers, n_requests, slo = setup.profiles, setup.n_workers, dispatcher.request, 1.0 / setup.fps
    frame_done = np.asarray(dispatcher.frame_done[:dispatcher.frame])
    latency_all = np.asarray(dispatcher.latency[:n_requests])
    served = np.isfinite(latency_all)                     # requests lost in a thermal shutdown are not
    latency_served = latency_all[served]                  # served: SLO misses, outside the latency figures
    counts = np.bincount(np.asarray(dispatcher.worker_of[:n_requests], dtype=int)[served], minlength=n_workers)
    model_errors, persistence_errors = errors
    rmse = {profiles.workers[w]: {"model": float(np.sqrt(np.mean(model_errors[:, w] ** 2))),
                                  "persistence": float(np.sqrt(np.mean(persistence_errors[:, w] ** 2)))}
            for w in range(n_workers)}
    peak, names = log.peak_c(), setup.spec.node_names
    return ScheduleResult(
        policy=policy, workload=profiles.workload, device=profiles.device, link=profiles.link,
        fps=float(setup.fps), duration_s=len(log.times_s) * setup.period_s, ambient_c=ambient_c,
        workers=profiles.workers, time_to_severe_s=log.time_to_severe_s(),
        time_to_first_throttle_s=log.time_to_first_throttle_s(),
        slo_rate=float(np.mean(frame_done <= slo + 1e-12)) if dispatcher.frame else 0.0,
        request_slo_rate=float(np.mean(latency_all <= slo + 1e-12)) if n_requests else 0.0,
        mean_latency_s=float(latency_served.mean()) if len(latency_served) else 0.0,
        p95_latency_s=float(np.percentile(latency_served, 95)) if len(latency_served) else 0.0,
        share={profiles.workers[w]: float(counts[w] / max(n_requests, 1)) for w in range(n_workers)},
        peak_temp_c={n: float(peak[i]) for i, n in enumerate(names)},
        final_temp_c={n: float(log.temps_c[-1, i]) for i, n in enumerate(names)},
        model_rmse_c=rmse, times_s=log.times_s, node_names=names, temps_c=log.temps_c,
        status=log.status, status_names=log.status_names, events=log.events, wall_s=wall_s)


def max_sustainable_fps(profiles: WorkerProfiles, spec: ThermalSpec, policy: str, *,
                        min_slo: float = 0.9, resolution_fps: float = 0.5, fps_low: float = 0.5,
                        progress: Callable[[float, float], None] | None = None,
                        **kwargs) -> tuple[float, ScheduleResult | None]:
    """Highest FPS up to which ``policy`` runs the whole duration without reaching thermal status
    "severe" and meets the frame SLO for at least ``min_slo`` of the frames.

    The rates tried are the grid ``fps_low + k * resolution_fps`` up to the workers' capacity,
    in ascending order; the answer is the last rate before the first failure (then every rate
    tried below it passes too). A bisection is not used because success is not monotone in the
    rate: the policies' choices change with it, so a policy may pass at one rate, fail a little
    above it and pass again higher up, and a bisection's answer would depend on its path. ``progress(rate, capacity)`` is called before each run. Returns
    ``(fps, result at that fps)``; ``(0.0, None)`` if ``fps_low`` fails.
    """
    if not resolution_fps > 0:
        raise ConfigError(f"resolution_fps {resolution_fps!r}: expected a step in FPS > 0")
    hi = capacity_fps(profiles, allowed_workers(profiles, policy))

    def ok(f: float) -> ScheduleResult | None:
        try:
            res = run_schedule(profiles, spec, policy, f, stop_at_severe=True, **kwargs)
        except ConstraintError:
            return None
        return res if res.time_to_severe_s is None and res.slo_rate >= min_slo else None

    best: tuple[float, ScheduleResult | None] = (0.0, None)
    rates = [float(f) for f in np.arange(fps_low, hi + 1e-9, resolution_fps)]
    for f in rates + ([hi] if not rates or rates[-1] < hi else []):
        if progress is not None:
            progress(f, hi)
        res = ok(f)
        if res is None:
            break
        best = (f, res)
    return best
