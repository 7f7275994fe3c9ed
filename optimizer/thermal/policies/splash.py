"""SPLASH: thermal-aware multi-DNN scheduling over phone processors and the cloud (Jeong, SNU 2023).

METHODS.md §5. A discrete-event scheduler assigns every inference request of a camera frame
to one worker (the phone's CPU, GPU, DSP, NPU, or the cloud), each with a FIFO queue. The
"real" phone it runs on is the thermal simulator of :mod:`optimizer.thermal`: the device's RC
network advanced exactly every ``substep_s`` under the power the dispatched requests draw, and
its hysteresis governor sampled every ``period_s``. Clock caps slow workers (latency ∝ 1/cap,
dynamic power ∝ cap³); a switched-off processor (Pixel 4's NPU at 51 °C skin) takes no work.
Offloading heats the phone through the radio ("modem" node) while it sends and receives, and in
its tail state after each transfer (Huang et al., MobiSys'12: the radio holds a high power for
``tail_s`` before it sleeps; at a camera rate the next transfer comes first, so it never sleeps);
the radio is one FIFO resource (a request holds it for its upload and download).

What the scheduler knows is what SPLASH learns online:

* a linear thermal model ``T_{t+1} = T_t + Θ·[T_t, F_t, L_t, I_t, O_t, RSSI, 1]`` (temperatures of
  all workers and the skin, clock fractions, per-worker busy fraction, offloaded input/output
  MB, signal proxy) — the union of SPLASH's processor and cloud models, written in increments
  so that the ridge shrinks towards "temperature stays" — seeded by a short profiling run
  (random loads and clocks) and refitted every period on a sliding window (2000 samples) by a
  rank-revealing least-squares solve (SVD, ``numpy.linalg.lstsq``) with a small ridge;
* latency tables per (request type, processor) by 1 °C bin of the worker's temperature, updated
  by EMA (factor 0.1); cloud latency = EMA of the server-reported compute time + a
  communication model ``comm = θ·[RSSI, I, O, 1]`` fitted on the last 200 offloads.

Policies (per request; ``wait`` = time until the worker's queue drains, ``exec`` = table
estimate, ``ΔT_w`` = predicted rise of the worker's own temperature over the next period if the
request is added, from the fitted model, floored at :data:`MIN_HEAT_RISE_C` as SPLASH's code does):

* ``minheat``: among workers with ``wait + exec <= SLO`` (the frame period) the least ``ΔT_w``;
  if none meets it, the penalty form ``ΔT_w + η·max(0, SLO_fps - 1/(wait + exec))``;
* ``ppt``: Max-Weighted-PPT, minimise ``η·lat_w/max(lat) + (1-η)·ΔT_w/max|ΔT|`` (both terms
  normalised over the candidate workers so that η weighs commensurable quantities);
* ``heft``: latency-greedy earliest finish time over the processors; ``heft-cloud``: also the cloud.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConfigError, ConstraintError, UnknownNameError
from ...hardware.thermal_spec import ThermalSpec
from ..governor import GovernorEvent
from ..plant import PlantLog, ThermalPlant
from .workload import CLOUD, WorkerProfiles

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


def _heat_nodes(spec: ThermalSpec, profiles: WorkerProfiles) -> tuple[list[int], list[int]]:
    """Per worker: the thermal input (processor) index and the node whose temperature it reads."""
    inputs = spec.processor_names
    inp, node = [], []
    for w in profiles.workers:
        name = "modem" if w == CLOUD else w
        if name not in inputs:
            what = "radio ('modem' processor)" if w == CLOUD else f"processor {w!r}"
            raise UnknownNameError("thermal input", name, inputs,
                                   where=f"thermal spec {spec.device!r} (needed for the {what})")
        inp.append(inputs.index(name))
        heats = spec.processors[name].heats
        node.append(spec.node_index(max(heats, key=heats.get)))
    return inp, node


class _OnlineModel:
    """SPLASH's sliding-window linear thermal model, least squares with a small ridge.

    The window's Gram matrices ``XᵀX`` and ``XᵀY`` are updated per sample (add the new row,
    remove the one leaving the window), so a refit solves one small system; the solve is
    rank-revealing (SVD, ``numpy.linalg.lstsq``) on column-scaled features, because features
    such as a clock that never moved are collinear with the offset.
    """

    def __init__(self, n_feat: int, n_out: int, window: int, ridge: float) -> None:
        self.X = np.zeros((window, n_feat))
        self.Y = np.zeros((window, n_out))
        self.G = np.zeros((n_feat, n_feat))
        self.H = np.zeros((n_feat, n_out))
        self.n = 0
        self.window = window
        self.ridge = ridge
        self.theta = np.zeros((n_feat, n_out))

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        i = self.n % self.window
        if self.n >= self.window:
            xo, yo = self.X[i], self.Y[i]
            self.G -= np.outer(xo, xo)
            self.H -= np.outer(xo, yo)
        self.X[i], self.Y[i] = x, y
        self.G += np.outer(x, x)
        self.H += np.outer(x, y)
        self.n += 1

    def refit(self) -> None:
        m = min(self.n, self.window)
        if m < 8:
            return
        s = np.maximum(np.abs(self.X[:m]).max(axis=0), 1e-9)
        Gs = self.G / np.outer(s, s) + self.ridge * np.eye(len(s))
        th, *_ = np.linalg.lstsq(Gs, self.H / s[:, None], rcond=1e-12)
        self.theta = th / s[:, None]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return x @ self.theta


#: Floor of a predicted temperature rise ΔT_w (°C). SPLASH's implementation sets a predicted
#: change <= 0 to an epsilon of one sensor unit, 1 m°C (mrsnu/band,
#: ``tensorflow/lite/planner/thermal_aware_slo_scheduler.cc``): a worker predicted to cool is not
#: preferred for it, so noise in the fitted trend cannot outweigh latency.
MIN_HEAT_RISE_C = 1e-3


class Policy(ABC):
    """A SPLASH dispatch rule (strategy): picks one worker for a request from the candidates.

    ``choose(workers, total_s, heat_c)`` gets the available workers (in worker order), each one's
    estimated completion time ``wait + exec`` and its predicted temperature rise ``ΔT_w``; ties go
    to the first worker. ``cloud`` says whether the cloud worker may be used.
    """

    name = ""
    cloud = True

    def __init__(self, eta: float, fps: float) -> None:
        self.eta, self.fps, self.slo = eta, fps, 1.0 / fps

    @abstractmethod
    def choose(self, workers: list[int], total_s: list[float], heat_c: list[float]) -> int:
        """The chosen worker."""


class MinHeat(Policy):
    """Least ``ΔT_w`` among workers meeting the SLO; else the penalty ``ΔT_w + η·max(0, fps - 1/total)``."""

    name = "minheat"

    def choose(self, workers: list[int], total_s: list[float], heat_c: list[float]) -> int:
        slo, eta, fps = self.slo, self.eta, self.fps
        feas_w, feas_d, best_w, best = -1, math.inf, -1, math.inf
        for w, tot, dT in zip(workers, total_s, heat_c):
            if tot <= slo and dT < feas_d:
                feas_d, feas_w = dT, w
            short = fps - 1.0 / tot                   # FPS short of the camera rate, if any
            sc = dT + eta * (short if short > 0.0 else 0.0)
            if sc < best:
                best, best_w = sc, w
        return feas_w if feas_w >= 0 else best_w


class MaxWeightedPPT(Policy):
    """Least ``η·total/max(total) + (1-η)·ΔT_w/max|ΔT|`` (both terms normalised over the candidates)."""

    name = "ppt"

    def choose(self, workers: list[int], total_s: list[float], heat_c: list[float]) -> int:
        lmax = max(total_s) or 1.0
        dmax = max(abs(d) for d in heat_c) or 1.0
        eta = self.eta
        return _first_min(workers, [eta * tot / lmax + (1 - eta) * dT / dmax for tot, dT in zip(total_s, heat_c)])


class Heft(Policy):
    """Earliest finish time over the phone's processors (latency-greedy, no heat)."""

    name = "heft"
    cloud = False

    def choose(self, workers: list[int], total_s: list[float], heat_c: list[float]) -> int:
        return _first_min(workers, total_s)


class HeftCloud(Heft):
    """Earliest finish time over the processors and the cloud."""

    name = "heft-cloud"
    cloud = True


def _first_min(workers: list[int], scores: list[float]) -> int:
    """The worker with the least score; the first one on ties."""
    best_w, best = -1, math.inf
    for w, sc in zip(workers, scores):
        if sc < best:
            best, best_w = sc, w
    return best_w


POLICY_CLASSES: dict[str, type[Policy]] = {p.name: p for p in (MinHeat, MaxWeightedPPT, Heft, HeftCloud)}
POLICIES: tuple[str, ...] = tuple(POLICY_CLASSES)


class _Setup:
    """What a run needs to know of the phone, the workload and the learned model's feature layout:
    features ``[T sensors, caps M, busy W, I MB, O MB, RSSI, 1]``, one output per sensor node."""

    def __init__(self, profiles: WorkerProfiles, spec: ThermalSpec, fps: float, substep_s: float,
                 duration_s: float, sensor_resolution_c: float) -> None:
        self.profiles, self.spec, self.fps = profiles, spec, fps
        self.has_cloud = profiles.link is not None
        self.W = len(profiles.workers)
        self.period = spec.governor.period_s
        self.sub = max(1, int(round(self.period / substep_s)))
        self.dt = self.period / self.sub
        self.n_periods = max(1, int(round(duration_s / self.period)))
        self.inp, wnode = _heat_nodes(spec, profiles)
        self.cpu_in = spec.processor_names.index(profiles.workers[profiles.meta["cpu_index"]])
        self.sensor_nodes = list(dict.fromkeys(wnode + [spec.node_index(spec.skin)]))
        self.M = len(spec.processor_names)
        self.targets = [self.sensor_nodes.index(n) for n in wnode]     # worker -> output column
        self.n_feat = len(self.sensor_nodes) + self.M + self.W + 4
        self.col_busy = len(self.sensor_nodes) + self.M
        self.col_in = self.col_busy + self.W
        self.resolution = sensor_resolution_c
        # the phone's radio front end bounds what the link model asks of it (thermal spec max_power)
        radio_limit = float(spec.power_limit_w()[spec.processor_names.index("modem")]) \
            if self.has_cloud else math.inf
        self.radio_up_w = min(profiles.radio_up_w, radio_limit)
        self.radio_down_w = min(profiles.radio_down_w, radio_limit)
        self.radio_tail_w = min(profiles.radio_tail_w, radio_limit)

    def features(self, temps_s, caps_in, busy_f, in_mb, out_mb) -> np.ndarray:
        return np.concatenate([temps_s, caps_in, busy_f, [in_mb, out_mb, self.profiles.rssi_proxy_db, 1.0]])

    def read(self, x: np.ndarray) -> np.ndarray:
        """The sensor readings of state ``x``, quantised to the sensor resolution."""
        return np.round(x[self.sensor_nodes] / self.resolution) * self.resolution

    def power_of(self, busy_frac: np.ndarray, caps_w: np.ndarray) -> np.ndarray:
        """[M] input power of per-worker busy fractions at per-worker clock fractions."""
        p = np.zeros(self.M)
        prof = self.profiles
        for w in range(self.W):
            if prof.workers[w] == CLOUD:
                # transfers spread over the period: between them the radio stays in its tail
                tail = (1.0 - busy_frac[w]) * self.radio_tail_w if busy_frac[w] > 0 else 0.0
                p[self.inp[w]] += busy_frac[w] * self.radio_up_w + tail
            else:
                p[self.inp[w]] += busy_frac[w] * (prof.static_w[w] + prof.dynamic_w[w] * caps_w[w] ** 3)
        return p


def _profiling_run(s: _Setup, model: _OnlineModel, rng: np.random.Generator, profiling_s: float,
                   ambient_c: float) -> None:
    """SPLASH's offline profiling: random per-worker loads and a DVFS sweep seed the thermal model."""
    prof, W = s.profiles, s.W
    plant = ThermalPlant(s.spec, s.period, s.sub, ambient_c=ambient_c)
    for _ in range(int(profiling_s / s.period)):
        bf = rng.uniform(0.0, 1.0, W) * (rng.uniform(size=W) < 0.6)
        cp = rng.uniform(0.3, 1.0, s.M)
        reading = s.read(plant.x)
        pw = s.power_of(bf, np.array([cp[s.inp[w]] for w in range(W)]))
        for _s in range(s.sub):
            plant.step(pw)
        nxt = s.read(plant.x)
        mb = bf[-1] * s.period / max(prof.upload_s.mean(), 1e-9) * prof.in_bytes.mean() / 1e6 \
            if s.has_cloud else 0.0
        mb_out = mb * prof.out_bytes.mean() / max(prof.in_bytes.mean(), 1.0) if s.has_cloud else 0.0
        model.add(s.features(reading, cp, bf, mb, mb_out), nxt - reading)
    model.refit()


@dataclass
class _Period:
    """What the scheduler knows at the start of a governor period: clock caps per worker, the
    predicted temperature trend and heating gain per worker, the cloud's rise per request type,
    each worker's temperature bin and the workers that are switched on."""

    caps_w: list[float]
    cpu_cap: float
    trend: list[float]
    gain: list[float]
    cloud_dT: list[float]
    wtemp: list[int]
    avail: list[int]


class _Dispatcher:
    """Queues, latency tables, the communication model and the per-substep energy and busy
    bookkeeping of one run; dispatches frames request by request with a :class:`Policy`."""

    def __init__(self, s: _Setup, policy: Policy, rng: np.random.Generator, device_jitter: float,
                 network_jitter: float, ema: float) -> None:
        prof, W = s.profiles, s.W
        self.s, self.policy, self.ema = s, policy, ema
        R = len(prof.labels)
        self.seq = np.repeat(np.arange(R), prof.counts).tolist()
        self.per_frame = len(self.seq)
        self.n_frames = int(math.floor(s.n_periods * s.period * s.fps + 1e-9))
        n_req = self.n_frames * self.per_frame
        self.jd = rng.lognormal(0.0, device_jitter, n_req).tolist()
        self.jn = rng.lognormal(0.0, network_jitter, n_req).tolist()
        self.native, self.fb = prof.native_s.tolist(), prof.fallback_s.tolist()
        self.up_s, self.down_s = prof.upload_s.tolist(), prof.download_s.tolist()
        self.srv_s = prof.server_s.tolist()
        self.in_mb, self.out_mb = (prof.in_bytes / 1e6).tolist(), (prof.out_bytes / 1e6).tolist()
        self.st_l, self.dy_l = prof.static_w.tolist(), prof.dynamic_w.tolist()
        self.cloud_w = W - 1 if s.has_cloud else -1
        self.cpu_w = int(prof.meta["cpu_index"])
        self.est_tab: list[list[dict[int, float]]] = [[{} for _ in range(W)] for _ in range(R)]
        self.last_est = [[self.native[r][w] + self.fb[r][w] for w in range(W)] for r in range(R)]
        self.comp_ema = list(self.srv_s)
        self.comm_est = [prof.rtt_s + self.up_s[r] + self.down_s[r] for r in range(R)]
        self.comm_X: list[list[float]] = []
        self.comm_y: list[float] = []
        self.pad = s.n_periods * s.sub + 2
        self.dt, self.inv_dt = s.dt, 1.0 / s.dt
        self.e_rows = [[0.0] * s.M for _ in range(self.pad)]
        self.b_rows = [[0.0] * W for _ in range(self.pad)]
        self.io = np.zeros((s.n_periods + 2, 2))
        self.free = [0.0] * W
        self.radio_end = -math.inf             # end of the radio's last transfer
        self.frame_done = [0.0] * self.n_frames
        self.latency = [0.0] * n_req
        self.worker_of = [0] * n_req
        self.req = self.frame = 0

    def dispatch(self, t_end: float, per: _Period) -> None:
        """Dispatch every frame that arrives before ``t_end``; with every worker off (thermal
        shutdown) the frames are lost."""
        fps = self.s.fps
        while self.frame < self.n_frames and self.frame / fps < t_end - 1e-12:
            if per.avail:
                self.frame_done[self.frame] = self._frame(self.frame / fps, per)
            else:
                self.frame_done[self.frame] = math.inf
                self.latency[self.req:self.req + self.per_frame] = [math.inf] * self.per_frame
                self.req += self.per_frame
            self.frame += 1

    def _frame(self, now: float, per: _Period) -> float:
        """Dispatch one frame's requests arriving at ``now``; returns the frame's completion delay.

        A request on a processor runs its native part there and its CPU-fallback part on the CPU
        (both slowed by their clock caps), and updates the latency table of the worker's
        temperature bin by EMA; a request for the cloud goes to :meth:`_offload`."""
        free, cloud_w, choose, spread = self.free, self.cloud_w, self.policy.choose, self._spread
        est_tab, last_est, comp_ema, comm_est = self.est_tab, self.last_est, self.comp_ema, self.comm_est
        avail, wtemp, trend, gain, cloud_dT = per.avail, per.wtemp, per.trend, per.gain, per.cloud_dT
        caps_w, cpu_cap, inp, e_rows, b_rows = per.caps_w, per.cpu_cap, self.s.inp, self.e_rows, self.b_rows
        native, fb, jd, st_l, dy_l, ema = self.native, self.fb, self.jd, self.st_l, self.dy_l, self.ema
        fb_w = st_l[self.cpu_w] + dy_l[self.cpu_w] * cpu_cap ** 3          # W of the CPU fallback
        done = now
        for r in self.seq:
            tots, dts = [], []
            for w in avail:
                wait = free[w] - now if free[w] > now else 0.0
                if w == cloud_w:
                    tots.append(wait + comp_ema[r] + comm_est[r])
                    dT = cloud_dT[r]
                else:
                    est = est_tab[r][w].get(wtemp[w])
                    if est is None:
                        est = last_est[r][w]
                    tots.append(wait + est)
                    dT = trend[w] + gain[w] * est
                dts.append(dT if dT > MIN_HEAT_RISE_C else MIN_HEAT_RISE_C)
            w = choose(avail, tots, dts)
            start = free[w] if free[w] > now else now
            if w == cloud_w:
                lat = self._offload(r, w, start, per)
            else:
                c, j = caps_w[w], jd[self.req]
                t_nat = native[r][w] / c * j
                t_fb = fb[r][w] / cpu_cap * j if fb[r][w] > 0 else 0.0
                lat = t_nat + t_fb
                free[w] = start + lat
                spread(e_rows, inp[w], start, start + t_nat, (st_l[w] + dy_l[w] * c ** 3) * t_nat)
                if t_fb > 0:
                    spread(e_rows, self.s.cpu_in, start + t_nat, start + lat, fb_w * t_fb)
                spread(b_rows, w, start, start + lat, lat)
                tab, b = est_tab[r][w], wtemp[w]
                v = (1 - ema) * tab.get(b, last_est[r][w]) + ema * lat
                tab[b] = v
                last_est[r][w] = v
            fin = start + lat
            self.latency[self.req] = fin - now
            self.worker_of[self.req] = w
            if fin > done:
                done = fin
            self.req += 1
        return done - now

    def _offload(self, r: int, w: int, start: float, per: _Period) -> float:
        """Send request ``r`` to the cloud at ``start``: one radio sends and receives its bytes
        before the next; returns its latency."""
        s, req = self.s, self.req
        j = self.jn[req] / per.caps_w[w]
        up, down = self.up_s[r] * j, self.down_s[r] * j
        comm = s.profiles.rtt_s * j + up + down
        comp = self.srv_s[r] * self.jd[req]
        self.free[w] = start + up + down
        self._spread(self.e_rows, s.inp[w], start, start + up + down, s.radio_up_w * up + s.radio_down_w * down)
        tail = min(start - self.radio_end, s.profiles.radio_tail_s)
        if s.radio_tail_w > 0 and tail > 0 and self.radio_end > -math.inf:   # tail since the last transfer
            self._spread(self.e_rows, s.inp[w], self.radio_end, self.radio_end + tail, s.radio_tail_w * tail)
        self.radio_end = start + up + down
        self._spread(self.b_rows, w, start, start + up + down, up + down)
        pi = int(start / s.period)
        if pi < len(self.io):
            self.io[pi, 0] += self.in_mb[r]
            self.io[pi, 1] += self.out_mb[r]
        self.comp_ema[r] = (1 - self.ema) * self.comp_ema[r] + self.ema * comp
        self.comm_X.append([s.profiles.rssi_proxy_db, self.in_mb[r], self.out_mb[r], 1.0])
        self.comm_y.append(comm)
        return comm + comp

    def _spread(self, rows: list, col: int, s: float, e: float, total: float) -> None:
        """Add ``total`` to column ``col`` of the substep rows, spread evenly over ``[s, e)``."""
        dt, inv_dt, pad = self.dt, self.inv_dt, self.pad
        k0 = int(s * inv_dt)
        if k0 >= pad:
            return
        k1 = int(e * inv_dt)
        if k1 == k0 or e <= s:
            rows[k0][col] += total
            return
        rate = total / (e - s)
        for k in range(k0, min(k1, pad - 1) + 1):
            lo = k * dt if k * dt > s else s
            hi = (k + 1) * dt if (k + 1) * dt < e else e
            if hi > lo:
                rows[k][col] += rate * (hi - lo)

    def refit_comm(self) -> None:
        """Refit the communication model ``comm = θ·[RSSI, I, O, 1]`` on the last 200 offloads."""
        if not self.s.has_cloud or len(self.comm_y) < 4:
            return
        del self.comm_X[:-200], self.comm_y[:-200]
        th, *_ = np.linalg.lstsq(np.asarray(self.comm_X), np.asarray(self.comm_y), rcond=1e-10)
        rssi = self.s.profiles.rssi_proxy_db
        self.comm_est = [float(th @ (rssi, self.in_mb[r], self.out_mb[r], 1.0)) for r in range(len(self.comm_est))]

    def period_load(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Period ``p``'s input power per substep [sub, M] (W) and per-worker busy fraction [W]."""
        s = self.s
        k0 = p * s.sub
        power = np.asarray(self.e_rows[k0:k0 + s.sub], dtype=float) * (1.0 / s.dt)
        busy = np.asarray(self.b_rows[k0:k0 + s.sub], dtype=float).sum(axis=0) / s.period
        return power, busy


def _period_view(s: _Setup, model: _OnlineModel, caps_in: np.ndarray, reading: np.ndarray,
                 prev_busy: np.ndarray, prev_io: tuple[float, float], d: _Dispatcher,
                 allowed: list[int]) -> _Period:
    """The scheduler's estimates for the period starting now: the trend over the next period at last
    period's load, and the heating gain per busy second, from the online model."""
    W, tg = s.W, s.targets
    # the cloud worker's cap is the radio's (modem thermal mitigation caps its throughput)
    caps_w = [float(caps_in[s.inp[w]]) for w in range(W)]
    pred = model.predict(s.features(reading, caps_in, prev_busy, *prev_io))
    trend = [float(pred[tg[w]]) for w in range(W)]
    gain = [max(0.0, float(model.theta[s.col_busy + w, tg[w]])) / s.period for w in range(W)]
    cloud_dT = [0.0] * len(d.comm_est)
    if s.has_cloud:
        cw = d.cloud_w
        g_in = float(model.theta[s.col_in, tg[-1]])
        g_out = float(model.theta[s.col_in + 1, tg[-1]])
        cloud_dT = [trend[cw] + max(0.0, gain[cw] * (d.up_s[r] + d.down_s[r]) + g_in * d.in_mb[r]
                                    + g_out * d.out_mb[r]) for r in range(len(cloud_dT))]
    return _Period(caps_w=caps_w, cpu_cap=float(caps_in[s.cpu_in]), trend=trend, gain=gain, cloud_dT=cloud_dT,
                   wtemp=[int(reading[tg[w]]) for w in range(W)], avail=[w for w in allowed if caps_w[w] > 0])


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
    allowed = list(range(len(profiles.workers) if rule.cloud else profiles.n_processors))
    check_slo(profiles, fps, tuple(allowed))
    amb = spec.ambient_c if ambient_c is None else float(ambient_c)
    s = _Setup(profiles, spec, fps, substep_s, duration_s, sensor_resolution_c)
    rng = np.random.default_rng(seed)
    model = _OnlineModel(s.n_feat, len(s.sensor_nodes), window, ridge)
    _profiling_run(s, model, rng, profiling_s, amb)
    d = _Dispatcher(s, rule, rng, device_jitter, network_jitter, ema)
    plant = ThermalPlant(spec, s.period, s.sub, ambient_c=amb)
    err_model: list[np.ndarray] = []
    err_persist: list[np.ndarray] = []
    prev_busy, prev_io = np.zeros(s.W), (0.0, 0.0)
    tg = s.targets
    for p in range(s.n_periods):
        caps_in = plant.sample()
        reading = s.read(plant.x)
        d.dispatch(p * s.period + s.period, _period_view(s, model, caps_in, reading, prev_busy, prev_io, d, allowed))
        d.refit_comm()
        power, bf = d.period_load(p)
        plant.run(power)
        plant.record()
        nxt = s.read(plant.x)
        xf = s.features(reading, caps_in, bf, d.io[p, 0], d.io[p, 1])
        pred = reading + model.predict(xf)
        err_model.append(pred[tg] - nxt[tg])
        err_persist.append(reading[tg] - nxt[tg])
        model.add(xf, nxt - reading)
        model.refit()
        prev_busy, prev_io = bf, (d.io[p, 0], d.io[p, 1])
        gov = plant.governor
        if stop_at_severe and gov.severe_level is not None and gov.level >= gov.severe_level:
            break
    errors = (np.asarray(err_model), np.asarray(err_persist))
    return _schedule_result(s, policy, plant.log(), d, errors, amb, time.perf_counter() - t_wall)


def _schedule_result(s: _Setup, policy: str, log: PlantLog, d: _Dispatcher,
                     errors: tuple[np.ndarray, np.ndarray], ambient_c: float, wall_s: float) -> ScheduleResult:
    """The :class:`ScheduleResult` of a run from the plant's log and the dispatcher's records;
    ``errors`` are the online model's and persistence's one-period errors [periods, W]."""
    prof, W, req, slo = s.profiles, s.W, d.req, 1.0 / s.fps
    frame_done = np.asarray(d.frame_done[:d.frame])
    lat_all = np.asarray(d.latency[:req])
    served = np.isfinite(lat_all)                     # requests lost in a thermal shutdown are not
    lat_done = lat_all[served]                        # served: SLO misses, outside the latency figures
    counts = np.bincount(np.asarray(d.worker_of[:req], dtype=int)[served], minlength=W)
    em, ep = errors
    rmse = {prof.workers[w]: {"model": float(np.sqrt(np.mean(em[:, w] ** 2))),
                              "persistence": float(np.sqrt(np.mean(ep[:, w] ** 2)))} for w in range(W)}
    peak, names = log.peak_c(), s.spec.node_names
    return ScheduleResult(
        policy=policy, workload=prof.workload, device=prof.device, link=prof.link,
        fps=float(s.fps), duration_s=len(log.times_s) * s.period, ambient_c=ambient_c, workers=prof.workers,
        time_to_severe_s=log.time_to_severe_s(), time_to_first_throttle_s=log.time_to_first_throttle_s(),
        slo_rate=float(np.mean(frame_done <= slo + 1e-12)) if d.frame else 0.0,
        request_slo_rate=float(np.mean(lat_all <= slo + 1e-12)) if req else 0.0,
        mean_latency_s=float(lat_done.mean()) if len(lat_done) else 0.0,
        p95_latency_s=float(np.percentile(lat_done, 95)) if len(lat_done) else 0.0,
        share={prof.workers[w]: float(counts[w] / max(req, 1)) for w in range(W)},
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
    rate: the policies' choices change with it (Min-Heat on ``live_video_analytics``, pixel4 over
    wifi_249 passes at 11.0 FPS, fails at 11.2-11.8, passes at 12.0), so a bisection's answer
    depended on its path. ``progress(rate, capacity)`` is called before each run. Returns
    ``(fps, result at that fps)``; ``(0.0, None)`` if ``fps_low`` fails.
    """
    if not resolution_fps > 0:
        raise ConfigError(f"resolution_fps {resolution_fps!r}: expected a step in FPS > 0")
    allowed = list(range(profiles.n_processors)) if policy == "heft" else None
    hi = capacity_fps(profiles, allowed)

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
