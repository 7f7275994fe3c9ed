"""SPLASH: thermal-aware multi-DNN scheduling over phone processors and the cloud (Jeong, SNU 2023).

METHODS.md §5. A discrete-event scheduler assigns every inference request of a camera frame
to one worker (the phone's CPU, GPU, DSP, NPU, or the cloud), each with a FIFO queue. The
"real" phone it runs on is the thermal simulator of :mod:`optimizer.thermal`: the device's RC
network advanced exactly every ``substep_s`` under the power the dispatched requests draw, and
its hysteresis governor sampled every ``period_s``. Clock caps slow workers (latency ∝ 1/cap,
dynamic power ∝ cap³); a switched-off processor (Pixel 4's NPU at 51 °C skin) takes no work.
Offloading heats the phone through the radio ("modem" node) while it sends and receives; the
radio is one FIFO resource (a request holds it for its upload and download).

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
request is added, from the fitted model):

* ``minheat``: among workers with ``wait + exec <= SLO`` (the frame period) the least ``ΔT_w``;
  if none meets it, the penalty form ``ΔT_w + η·max(0, SLO_fps - 1/(wait + exec))``;
* ``ppt``: Max-Weighted-PPT, minimise ``η·lat_w/max(lat) + (1-η)·ΔT_w/max|ΔT|`` (both terms
  normalised over the candidate workers so that η weighs commensurable quantities);
* ``heft``: latency-greedy earliest finish time over the processors; ``heft-cloud``: also the cloud.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConfigError, ConstraintError, UnknownNameError
from ...hardware.thermal_spec import ThermalSpec
from ..governor import Governor, GovernorEvent
from ..rc import RCNetwork
from .workload import CLOUD, WorkerProfiles

POLICIES: tuple[str, ...] = ("minheat", "ppt", "heft", "heft-cloud")


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


def run_schedule(profiles: WorkerProfiles, spec: ThermalSpec, policy: str, fps: float, *,
                 duration_s: float = 600.0, eta: float = 0.1, ambient_c: float | None = None,
                 seed: int = 0, window: int = 2000, substep_s: float = 0.1, ema: float = 0.1,
                 ridge: float = 1e-4, profiling_s: float = 120.0, device_jitter: float = 0.03,
                 network_jitter: float = 0.15, sensor_resolution_c: float = 0.1,
                 stop_at_severe: bool = False) -> ScheduleResult:
    """Run ``policy`` over ``profiles``' workload at ``fps`` for ``duration_s`` on the simulated phone.

    Parameters
    ----------
    profiles
        From :func:`~optimizer.thermal.policies.workload.worker_profiles`.
    spec
        The device's thermal spec (RC network and governor).
    policy
        One of :data:`POLICIES`.
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
    import time as _time

    t_wall = _time.perf_counter()
    if policy not in POLICIES:
        raise UnknownNameError("policy", policy, POLICIES)
    if not fps > 0 or not duration_s > 0:
        raise ConfigError(f"fps and duration must be > 0, got fps {fps!r}, duration {duration_s!r} s")
    if not 0.0 <= eta <= 1.0:
        raise ConfigError(f"eta must lie in [0, 1], got {eta!r}")
    has_cloud = profiles.link is not None
    W = len(profiles.workers)
    n_proc = profiles.n_processors
    if policy == "heft":
        allowed = list(range(n_proc))
    else:
        allowed = list(range(W))
    check_slo(profiles, fps, tuple(allowed))
    amb = spec.ambient_c if ambient_c is None else float(ambient_c)
    period = spec.governor.period_s
    sub = max(1, int(round(period / substep_s)))
    dt = period / sub
    n_periods = max(1, int(round(duration_s / period)))
    n_sub = n_periods * sub
    net = RCNetwork.from_spec(spec)
    disc = net.discretise(dt)
    AdT, BdT, ea = disc.Ad.T, disc.Bd.T, disc.ed * amb
    inp, wnode = _heat_nodes(spec, profiles)
    cpu_in = spec.processor_names.index(profiles.workers[profiles.meta["cpu_index"]])
    skin = spec.node_index(spec.skin)
    sensor_nodes = list(dict.fromkeys(wnode + [skin]))
    M, N = len(spec.processor_names), len(spec.node_names)
    rng = np.random.default_rng(seed)

    # ---- features of the linear model: [T sensors, caps M, busy W, I MB, O MB, RSSI, 1] ---------
    n_feat = len(sensor_nodes) + M + W + 4
    targets = [sensor_nodes.index(n) for n in wnode]           # worker -> output column
    model = _OnlineModel(n_feat, len(sensor_nodes), window, ridge)
    col_busy = len(sensor_nodes) + M
    col_in = col_busy + W
    rssi = profiles.rssi_proxy_db

    def features(temps_s, caps_in, busy_f, in_mb, out_mb):
        return np.concatenate([temps_s, caps_in, busy_f, [in_mb, out_mb, rssi, 1.0]])

    static = profiles.static_w
    dyn = profiles.dynamic_w
    # the phone's radio front end bounds what the link model asks of it (thermal spec max_power)
    radio_limit = float(spec.power_limit_w()[spec.processor_names.index("modem")]) if has_cloud else math.inf
    radio_up_w, radio_down_w = min(profiles.radio_up_w, radio_limit), min(profiles.radio_down_w, radio_limit)

    def power_of(busy_frac: np.ndarray, caps_w: np.ndarray) -> np.ndarray:
        p = np.zeros(M)
        for w in range(W):
            if profiles.workers[w] == CLOUD:
                p[inp[w]] += busy_frac[w] * radio_up_w
            else:
                p[inp[w]] += busy_frac[w] * (static[w] + dyn[w] * caps_w[w] ** 3)
        return p

    # ---- offline profiling run: random per-worker loads, seeds the model -------------------------
    x = np.full(N, amb)
    for _ in range(int(profiling_s / period)):
        bf = rng.uniform(0.0, 1.0, W) * (rng.uniform(size=W) < 0.6)
        cp = rng.uniform(0.3, 1.0, M)                          # DVFS sweep while profiling
        reading = np.round(x[sensor_nodes] / sensor_resolution_c) * sensor_resolution_c
        pw = power_of(bf, np.array([cp[inp[w]] for w in range(W)]))
        for _s in range(sub):
            x = x @ AdT + pw @ BdT + ea
        nxt = np.round(x[sensor_nodes] / sensor_resolution_c) * sensor_resolution_c
        mb = bf[-1] * period / max(profiles.upload_s.mean(), 1e-9) * profiles.in_bytes.mean() / 1e6 \
            if has_cloud else 0.0
        mb_out = mb * profiles.out_bytes.mean() / max(profiles.in_bytes.mean(), 1.0) if has_cloud else 0.0
        model.add(features(reading, cp, bf, mb, mb_out), nxt - reading)
    model.refit()

    # ---- run state ---------------------------------------------------------------------------------
    gov = Governor(spec)
    x = np.full(N, amb)
    pad = n_sub + 2
    energy = np.zeros((pad, M))
    busy = np.zeros((pad, W))
    io = np.zeros((n_periods + 2, 2))
    free = [0.0] * W
    R = len(profiles.labels)
    seq = np.repeat(np.arange(R), profiles.counts)
    per_frame = len(seq)
    n_frames = int(math.floor(n_periods * period * fps + 1e-9))
    jit_dev = rng.lognormal(0.0, device_jitter, n_frames * per_frame)
    jit_net = rng.lognormal(0.0, network_jitter, n_frames * per_frame)
    native = profiles.native_s.tolist()
    fb = profiles.fallback_s.tolist()
    jd = jit_dev.tolist()
    jn = jit_net.tolist()
    up_s, down_s, srv_s = profiles.upload_s.tolist(), profiles.download_s.tolist(), profiles.server_s.tolist()
    in_mb = (profiles.in_bytes / 1e6).tolist()
    out_mb = (profiles.out_bytes / 1e6).tolist()
    rtt, radio_up, radio_down = profiles.rtt_s, radio_up_w, radio_down_w
    st_l, dy_l = static.tolist(), dyn.tolist()
    cloud_w = W - 1 if has_cloud else -1
    cpu_w = int(profiles.meta["cpu_index"])
    est_tab: list[list[dict[int, float]]] = [[{} for _ in range(W)] for _ in range(R)]
    last_est = [[native[r][w] + fb[r][w] for w in range(W)] for r in range(R)]
    comp_ema = list(srv_s)
    comm_est = [rtt + up_s[r] + down_s[r] for r in range(R)]
    comm_X: list[list[float]] = []
    comm_y: list[float] = []
    slo = 1.0 / fps
    inv_dt = 1.0 / dt
    e_rows = [[0.0] * M for _ in range(pad)]
    b_rows = [[0.0] * W for _ in range(pad)]

    def spread(rows: list, col: int, s: float, e: float, total: float) -> None:
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

    temps_log = np.empty((n_periods, N))
    status_log = np.empty(n_periods, dtype=int)
    caps_log = np.empty((n_periods, M))
    events: list[GovernorEvent] = []
    err_model: list[np.ndarray] = []
    err_persist: list[np.ndarray] = []
    prev_busy = np.zeros(W)
    prev_io = (0.0, 0.0)
    req = 0
    frame = 0
    mode = {"minheat": 0, "ppt": 1}.get(policy, 2)
    seq_l = seq.tolist()
    fd_l = [0.0] * n_frames
    lat_l = [0.0] * (n_frames * per_frame)
    wo_l = [0] * (n_frames * per_frame)
    for p in range(n_periods):
        t0 = p * period
        events += gov.update(x, t0)
        caps_in = gov.caps
        # the cloud worker's cap is the radio's (modem thermal mitigation caps its throughput)
        caps_w = [float(caps_in[inp[w]]) for w in range(W)]
        cpu_cap = float(caps_in[cpu_in])
        reading = np.round(x[sensor_nodes] / sensor_resolution_c) * sensor_resolution_c
        # trend over the next period at last period's load, and the heating gain per busy second
        pred = model.predict(features(reading, caps_in, prev_busy, *prev_io))
        trend = [float(pred[targets[w]]) for w in range(W)]
        gain = [max(0.0, float(model.theta[col_busy + w, targets[w]])) / period for w in range(W)]
        cloud_dT = [0.0] * R
        if has_cloud:
            g_in = float(model.theta[col_in, targets[-1]])
            g_out = float(model.theta[col_in + 1, targets[-1]])
            cloud_dT = [trend[cloud_w] + max(0.0, gain[cloud_w] * (up_s[r] + down_s[r]) + g_in * in_mb[r]
                                             + g_out * out_mb[r])
                        for r in range(R)]
        wtemp = [int(reading[targets[w]]) for w in range(W)]
        avail = [w for w in allowed if caps_w[w] > 0]
        # ---- dispatch this period's frames ----------------------------------------------------
        t_end = t0 + period
        while not avail and frame < n_frames and frame / fps < t_end - 1e-12:
            fd_l[frame] = math.inf      # every worker off (thermal shutdown): the frame is lost
            lat_l[req:req + per_frame] = [math.inf] * per_frame
            frame += 1
            req += per_frame
        while frame < n_frames and frame / fps < t_end - 1e-12:
            now = frame / fps
            done = now
            for r in seq_l:
                best_w = -1
                best = math.inf
                if mode == 1:
                    ws, ls, ds = [], [], []
                feas_w, feas_d = -1, math.inf
                for w in avail:
                    wait = free[w] - now if free[w] > now else 0.0
                    if w == cloud_w:
                        tot = wait + comp_ema[r] + comm_est[r]
                        dT = cloud_dT[r]
                    else:
                        est = est_tab[r][w].get(wtemp[w])
                        if est is None:
                            est = last_est[r][w]
                        tot = wait + est
                        dT = trend[w] + gain[w] * est
                    if mode == 2:
                        if tot < best:
                            best, best_w = tot, w
                    elif mode == 0:
                        if tot <= slo and dT < feas_d:
                            feas_d, feas_w = dT, w
                        sc = dT + eta * max(0.0, fps - 1.0 / tot)
                        if sc < best:
                            best, best_w = sc, w
                    else:
                        ws.append(w)
                        ls.append(tot)
                        ds.append(dT)
                if mode == 0 and feas_w >= 0:
                    best_w = feas_w
                elif mode == 1:
                    lmax = max(ls) or 1.0
                    dmax = max(abs(d) for d in ds) or 1.0
                    for i in range(len(ws)):
                        sc = eta * ls[i] / lmax + (1 - eta) * ds[i] / dmax
                        if sc < best:
                            best, best_w = sc, ws[i]
                w = best_w
                start = free[w] if free[w] > now else now
                if w == cloud_w:
                    j = jn[req] / caps_w[w]
                    up = up_s[r] * j
                    down = down_s[r] * j
                    comm = rtt * j + up + down
                    comp = srv_s[r] * jd[req]
                    lat = comm + comp
                    # one radio: it sends and receives this request's bytes before the next
                    free[w] = start + up + down
                    spread(e_rows, inp[w], start, start + up + down, radio_up * up + radio_down * down)
                    spread(b_rows, w, start, start + up + down, up + down)
                    pi = int(start / period)
                    if pi < len(io):
                        io[pi, 0] += in_mb[r]
                        io[pi, 1] += out_mb[r]
                    comp_ema[r] = (1 - ema) * comp_ema[r] + ema * comp
                    comm_X.append([rssi, in_mb[r], out_mb[r], 1.0])
                    comm_y.append(comm)
                else:
                    c = caps_w[w]
                    j = jd[req]
                    t_nat = native[r][w] / c * j
                    t_fb = fb[r][w] / cpu_cap * j if fb[r][w] > 0 else 0.0
                    lat = t_nat + t_fb
                    free[w] = start + lat
                    spread(e_rows, inp[w], start, start + t_nat, (st_l[w] + dy_l[w] * c ** 3) * t_nat)
                    if t_fb > 0:
                        spread(e_rows, cpu_in, start + t_nat, start + lat,
                               (st_l[cpu_w] + dy_l[cpu_w] * cpu_cap ** 3) * t_fb)
                    spread(b_rows, w, start, start + lat, lat)
                    tab = est_tab[r][w]
                    b = wtemp[w]
                    v = (1 - ema) * tab.get(b, last_est[r][w]) + ema * lat
                    tab[b] = v
                    last_est[r][w] = v
                fin = start + lat
                lat_l[req] = fin - now
                wo_l[req] = w
                if fin > done:
                    done = fin
                req += 1
            fd_l[frame] = done - now
            frame += 1
        if has_cloud and len(comm_y) >= 4:
            del comm_X[:-200], comm_y[:-200]
            th, *_ = np.linalg.lstsq(np.asarray(comm_X), np.asarray(comm_y), rcond=1e-10)
            comm_est = [float(th @ (rssi, in_mb[r], out_mb[r], 1.0)) for r in range(R)]
        k0 = p * sub
        energy[k0:k0 + sub] = e_rows[k0:k0 + sub]
        busy[k0:k0 + sub] = b_rows[k0:k0 + sub]
        # ---- advance the RC network over the period ---------------------------------------------
        k0 = p * sub
        pw = energy[k0:k0 + sub] * inv_dt                      # [sub, M] W
        for s in range(sub):
            x = x @ AdT + pw[s] @ BdT + ea
        bf = busy[k0:k0 + sub].sum(axis=0) / period
        nxt = np.round(x[sensor_nodes] / sensor_resolution_c) * sensor_resolution_c
        xf = features(reading, caps_in, bf, io[p, 0], io[p, 1])
        pred = reading + model.predict(xf)
        err_model.append(pred[targets] - nxt[targets])
        err_persist.append(reading[targets] - nxt[targets])
        model.add(xf, nxt - reading)
        model.refit()
        prev_busy, prev_io = bf, (io[p, 0], io[p, 1])
        temps_log[p], status_log[p], caps_log[p] = x, gov.level, caps_in
        if stop_at_severe and gov.severe_level is not None and gov.level >= gov.severe_level:
            n_periods = p + 1
            temps_log, status_log, caps_log = temps_log[:n_periods], status_log[:n_periods], caps_log[:n_periods]
            break

    times = period * np.arange(1, n_periods + 1)
    sev = None
    if gov.severe_level is not None:
        hit = np.flatnonzero(status_log >= gov.severe_level)
        sev = float(times[hit[0]] - period) if len(hit) else None
    thr = np.flatnonzero((caps_log < 1 - 1e-9).any(axis=1))
    first = float(times[thr[0]] - period) if len(thr) else None
    frame_done = np.asarray(fd_l[:frame])
    lat_all = np.asarray(lat_l[:req])
    served = np.isfinite(lat_all)                     # requests lost in a thermal shutdown are not
    lat_done = lat_all[served]                        # served: SLO misses, outside the latency figures
    worker_of = np.asarray(wo_l[:req], dtype=int)[served]
    em, ep = np.asarray(err_model), np.asarray(err_persist)
    rmse = {profiles.workers[w]: {"model": float(np.sqrt(np.mean(em[:, w] ** 2))),
                                  "persistence": float(np.sqrt(np.mean(ep[:, w] ** 2)))} for w in range(W)}
    counts = np.bincount(worker_of, minlength=W)
    return ScheduleResult(
        policy=policy, workload=profiles.workload, device=profiles.device, link=profiles.link,
        fps=float(fps), duration_s=n_periods * period, ambient_c=amb, workers=profiles.workers,
        time_to_severe_s=sev, time_to_first_throttle_s=first,
        slo_rate=float(np.mean(frame_done <= slo + 1e-12)) if frame else 0.0,
        request_slo_rate=float(np.mean(lat_all <= slo + 1e-12)) if req else 0.0,
        mean_latency_s=float(lat_done.mean()) if len(lat_done) else 0.0,
        p95_latency_s=float(np.percentile(lat_done, 95)) if len(lat_done) else 0.0,
        share={profiles.workers[w]: float(counts[w] / max(req, 1)) for w in range(W)},
        peak_temp_c={n: float(temps_log[:, i].max()) for i, n in enumerate(spec.node_names)},
        final_temp_c={n: float(temps_log[-1, i]) for i, n in enumerate(spec.node_names)},
        model_rmse_c=rmse, times_s=times, node_names=spec.node_names, temps_c=temps_log,
        status=status_log, status_names=gov.status_names, events=events,
        wall_s=_time.perf_counter() - t_wall)


def max_sustainable_fps(profiles: WorkerProfiles, spec: ThermalSpec, policy: str, *,
                        min_slo: float = 0.9, resolution_fps: float = 0.25, fps_low: float = 0.5,
                        **kwargs) -> tuple[float, ScheduleResult | None]:
    """Highest FPS at which ``policy`` runs the whole duration without reaching thermal status
    "severe" and meets the frame SLO for at least ``min_slo`` of the frames (bisection).

    Returns ``(fps, result at that fps)``; ``(0.0, None)`` if even ``fps_low`` fails.
    """
    allowed = list(range(profiles.n_processors)) if policy == "heft" else None
    hi = capacity_fps(profiles, allowed)
    best: tuple[float, ScheduleResult | None] = (0.0, None)

    def ok(f: float) -> ScheduleResult | None:
        try:
            res = run_schedule(profiles, spec, policy, f, stop_at_severe=True, **kwargs)
        except ConstraintError:
            return None
        return res if res.time_to_severe_s is None and res.slo_rate >= min_slo else None

    lo = fps_low
    res = ok(lo)
    if res is None:
        return best
    best = (lo, res)
    res = ok(hi)
    if res is not None:
        return hi, res
    while hi - lo > resolution_fps:
        mid = 0.5 * (lo + hi)
        res = ok(mid)
        if res is not None:
            lo, best = mid, (mid, res)
        else:
            hi = mid
    return best
