"""SPLASH's dispatcher: every request of a frame to one worker, and what that costs the phone.

Each worker (the phone's processors, then the cloud) has a FIFO queue. For a request the
dispatcher estimates each available worker's completion time ``wait + exec`` (``exec`` from a
latency table per request type and worker, by 1 °C bin of the worker's temperature, updated by
EMA with factor 0.1; for the cloud the EMA of the server-reported compute time plus a
communication model ``comm = θ·[RSSI, I, O, 1]`` fitted on the last 200 offloads) and its
temperature rise ``ΔT_w`` (:class:`PeriodEstimates`, from the online model), lets the
:class:`~.splash_policies.Policy` choose, and books the request's energy and busy time per
substep, which the simulated phone then runs (Jeong, SNU 2023; docs/METHODS.md section 5).

A request on a processor runs its native part there and its CPU-fallback part on the CPU, both
slowed by their clock caps (latency ∝ 1/cap, dynamic power ∝ cap³). Offloading holds the radio,
one FIFO resource, for its upload and download; between transfers the radio stays in its tail
state (Huang et al., MobiSys'12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .splash_model import OnlineThermalModel, RunSetup
from .splash_policies import MIN_HEAT_RISE_C, Policy


@dataclass
class PeriodEstimates:
    """What the scheduler knows at the start of a governor period: clock caps per worker, the
    predicted temperature trend and heating gain per worker, the cloud's rise per request type,
    each worker's temperature bin and the workers that are switched on."""

    worker_caps: list[float]
    cpu_cap: float
    trend: list[float]
    gain: list[float]
    cloud_rise: list[float]
    temperature_bin: list[int]
    available: list[int]


class Dispatcher:
    """Queues, latency tables, the communication model and the per-substep energy and busy
    bookkeeping of one run; dispatches frames request by request with a :class:`Policy`."""

    def __init__(self, setup: RunSetup, policy: Policy, rng: np.random.Generator, device_jitter: float,
                 network_jitter: float, ema: float) -> None:
        profiles, n_workers = setup.profiles, setup.n_workers
        self.setup, self.policy, self.ema = setup, policy, ema
        n_types = len(profiles.labels)
        self.sequence = np.repeat(np.arange(n_types), profiles.counts).tolist()   # request types of a frame
        self.per_frame = len(self.sequence)
        self.n_frames = int(math.floor(setup.n_periods * setup.period_s * setup.fps + 1e-9))
        n_requests = self.n_frames * self.per_frame
        self.device_jitter = rng.lognormal(0.0, device_jitter, n_requests).tolist()
        self.network_jitter = rng.lognormal(0.0, network_jitter, n_requests).tolist()
        self.native_s, self.fallback_s = profiles.native_s.tolist(), profiles.fallback_s.tolist()
        self.upload_s, self.download_s = profiles.upload_s.tolist(), profiles.download_s.tolist()
        self.server_s = profiles.server_s.tolist()
        self.in_mb, self.out_mb = (profiles.in_bytes / 1e6).tolist(), (profiles.out_bytes / 1e6).tolist()
        self.static_w, self.dynamic_w = profiles.static_w.tolist(), profiles.dynamic_w.tolist()
        self.cloud_worker = n_workers - 1 if setup.has_cloud else -1
        self.cpu_worker = int(profiles.meta["cpu_index"])
        # latency table: [request type][worker] {temperature bin: seconds}, and the last estimate
        self.latency_table: list[list[dict[int, float]]] = [[{} for _ in range(n_workers)] for _ in range(n_types)]
        self.last_estimate = [[self.native_s[r][w] + self.fallback_s[r][w] for w in range(n_workers)]
                              for r in range(n_types)]
        self.server_ema = list(self.server_s)
        self.comm_estimate = [profiles.rtt_s + self.upload_s[r] + self.download_s[r] for r in range(n_types)]
        self.comm_features: list[list[float]] = []
        self.comm_seconds: list[float] = []
        self.n_rows = setup.n_periods * setup.substeps + 2
        self.dt_s, self.inv_dt = setup.dt_s, 1.0 / setup.dt_s
        self.energy_rows = [[0.0] * setup.n_inputs for _ in range(self.n_rows)]   # J per substep and input
        self.busy_rows = [[0.0] * n_workers for _ in range(self.n_rows)]          # s per substep and worker
        self.offload_mb = np.zeros((setup.n_periods + 2, 2))                     # MB in/out per period
        self.free_at = [0.0] * n_workers
        self.radio_end = -math.inf             # end of the radio's last transfer
        self.frame_done = [0.0] * self.n_frames
        self.latency = [0.0] * n_requests
        self.worker_of = [0] * n_requests
        self.request = self.frame = 0

    def dispatch(self, t_end: float, estimates: PeriodEstimates) -> None:
        """Dispatch every frame that arrives before ``t_end``; with every worker off (thermal
        shutdown) the frames are lost."""
        fps = self.setup.fps
        while self.frame < self.n_frames and self.frame / fps < t_end - 1e-12:
            if estimates.available:
                self.frame_done[self.frame] = self._frame(self.frame / fps, estimates)
            else:
                self.frame_done[self.frame] = math.inf
                self.latency[self.request:self.request + self.per_frame] = [math.inf] * self.per_frame
                self.request += self.per_frame
            self.frame += 1

    def _frame(self, now: float, estimates: PeriodEstimates) -> float:
        """Dispatch one frame's requests arriving at ``now``; returns the frame's completion delay.

        A request on a processor runs its native part there and its CPU-fallback part on the CPU
        (both slowed by their clock caps), and updates the latency table of the worker's
        temperature bin by EMA; a request for the cloud goes to :meth:`_offload`."""
        # locals for speed: this loop runs once per request
        free_at, cloud_worker, choose, spread = self.free_at, self.cloud_worker, self.policy.choose, self._spread
        latency_table, last_estimate = self.latency_table, self.last_estimate
        server_ema, comm_estimate = self.server_ema, self.comm_estimate
        available, temperature_bin = estimates.available, estimates.temperature_bin
        trend, gain, cloud_rise = estimates.trend, estimates.gain, estimates.cloud_rise
        worker_caps, cpu_cap = estimates.worker_caps, estimates.cpu_cap
        worker_input, energy_rows, busy_rows = self.setup.worker_input, self.energy_rows, self.busy_rows
        native_s, fallback_s, device_jitter = self.native_s, self.fallback_s, self.device_jitter
        static_w, dynamic_w, ema = self.static_w, self.dynamic_w, self.ema
        fallback_w = static_w[self.cpu_worker] + dynamic_w[self.cpu_worker] * cpu_cap ** 3   # CPU power of fallback
        done = now
        for r in self.sequence:
            totals, rises = [], []
            for w in available:
                wait = free_at[w] - now if free_at[w] > now else 0.0
                if w == cloud_worker:
                    totals.append(wait + server_ema[r] + comm_estimate[r])
                    rise = cloud_rise[r]
                else:
                    estimate = latency_table[r][w].get(temperature_bin[w])
                    if estimate is None:
                        estimate = last_estimate[r][w]
                    totals.append(wait + estimate)
                    rise = trend[w] + gain[w] * estimate
                rises.append(rise if rise > MIN_HEAT_RISE_C else MIN_HEAT_RISE_C)
            w = choose(available, totals, rises)
            start = free_at[w] if free_at[w] > now else now
            if w == cloud_worker:
                latency = self._offload(r, w, start, estimates)
            else:
                cap, jitter = worker_caps[w], device_jitter[self.request]
                t_native = native_s[r][w] / cap * jitter
                t_fallback = fallback_s[r][w] / cpu_cap * jitter if fallback_s[r][w] > 0 else 0.0
                latency = t_native + t_fallback
                free_at[w] = start + latency
                spread(energy_rows, worker_input[w], start, start + t_native,
                       (static_w[w] + dynamic_w[w] * cap ** 3) * t_native)
                if t_fallback > 0:
                    spread(energy_rows, self.setup.cpu_input, start + t_native, start + latency, fallback_w * t_fallback)
                spread(busy_rows, w, start, start + latency, latency)
                table, temperature = latency_table[r][w], temperature_bin[w]
                value = (1 - ema) * table.get(temperature, last_estimate[r][w]) + ema * latency
                table[temperature] = value
                last_estimate[r][w] = value
            finish = start + latency
            self.latency[self.request] = finish - now
            self.worker_of[self.request] = w
            if finish > done:
                done = finish
            self.request += 1
        return done - now

    def _offload(self, r: int, w: int, start: float, estimates: PeriodEstimates) -> float:
        """Send request ``r`` to the cloud at ``start``: one radio sends and receives its bytes
        before the next; returns its latency."""
        setup, request = self.setup, self.request
        jitter = self.network_jitter[request] / estimates.worker_caps[w]
        up, down = self.upload_s[r] * jitter, self.download_s[r] * jitter
        comm = setup.profiles.rtt_s * jitter + up + down
        compute = self.server_s[r] * self.device_jitter[request]
        self.free_at[w] = start + up + down
        self._spread(self.energy_rows, setup.worker_input[w], start, start + up + down,
                     setup.radio_up_w * up + setup.radio_down_w * down)
        tail = min(start - self.radio_end, setup.profiles.radio_tail_s)
        if setup.radio_tail_w > 0 and tail > 0 and self.radio_end > -math.inf:   # tail since the last transfer
            self._spread(self.energy_rows, setup.worker_input[w], self.radio_end, self.radio_end + tail,
                         setup.radio_tail_w * tail)
        self.radio_end = start + up + down
        self._spread(self.busy_rows, w, start, start + up + down, up + down)
        period = int(start / setup.period_s)
        if period < len(self.offload_mb):
            self.offload_mb[period, 0] += self.in_mb[r]
            self.offload_mb[period, 1] += self.out_mb[r]
        self.server_ema[r] = (1 - self.ema) * self.server_ema[r] + self.ema * compute
        self.comm_features.append([setup.profiles.rssi_proxy_db, self.in_mb[r], self.out_mb[r], 1.0])
        self.comm_seconds.append(comm)
        return comm + compute

    def _spread(self, rows: list, col: int, s: float, e: float, total: float) -> None:
        """Add ``total`` to column ``col`` of the substep rows, spread evenly over ``[s, e)``."""
        dt, inv_dt, n_rows = self.dt_s, self.inv_dt, self.n_rows
        k0 = int(s * inv_dt)
        if k0 >= n_rows:
            return
        k1 = int(e * inv_dt)
        if k1 == k0 or e <= s:
            rows[k0][col] += total
            return
        rate = total / (e - s)
        for k in range(k0, min(k1, n_rows - 1) + 1):
            lo = k * dt if k * dt > s else s
            hi = (k + 1) * dt if (k + 1) * dt < e else e
            if hi > lo:
                rows[k][col] += rate * (hi - lo)

    def refit_comm(self) -> None:
        """Refit the communication model ``comm = θ·[RSSI, I, O, 1]`` on the last 200 offloads."""
        if not self.setup.has_cloud or len(self.comm_seconds) < 4:
            return
        del self.comm_features[:-200], self.comm_seconds[:-200]
        theta, *_ = np.linalg.lstsq(np.asarray(self.comm_features), np.asarray(self.comm_seconds), rcond=1e-10)
        rssi = self.setup.profiles.rssi_proxy_db
        self.comm_estimate = [float(theta @ (rssi, self.in_mb[r], self.out_mb[r], 1.0))
                              for r in range(len(self.comm_estimate))]

    def period_load(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Period ``p``'s input power per substep [substeps, inputs] (W) and per-worker busy fraction."""
        setup = self.setup
        k0 = p * setup.substeps
        power = np.asarray(self.energy_rows[k0:k0 + setup.substeps], dtype=float) * (1.0 / setup.dt_s)
        busy = np.asarray(self.busy_rows[k0:k0 + setup.substeps], dtype=float).sum(axis=0) / setup.period_s
        return power, busy


def period_estimates(setup: RunSetup, model: OnlineThermalModel, input_caps: np.ndarray, reading: np.ndarray,
                     previous_busy: np.ndarray, previous_offload_mb: tuple[float, float], dispatcher: Dispatcher,
                     allowed: list[int]) -> PeriodEstimates:
    """The scheduler's estimates for the period starting now: the trend over the next period at last
    period's load, and the heating gain per busy second, from the online model."""
    n_workers, output = setup.n_workers, setup.worker_output
    # the cloud worker's cap is the radio's (modem thermal mitigation caps its throughput)
    worker_caps = [float(input_caps[setup.worker_input[w]]) for w in range(n_workers)]
    predicted = model.predict(setup.features(reading, input_caps, previous_busy, *previous_offload_mb))
    trend = [float(predicted[output[w]]) for w in range(n_workers)]
    gain = [max(0.0, float(model.theta[setup.busy_column + w, output[w]])) / setup.period_s
            for w in range(n_workers)]
    cloud_rise = [0.0] * len(dispatcher.comm_estimate)
    if setup.has_cloud:
        cloud = dispatcher.cloud_worker
        gain_in = float(model.theta[setup.offload_column, output[-1]])
        gain_out = float(model.theta[setup.offload_column + 1, output[-1]])
        cloud_rise = [trend[cloud] + max(0.0, gain[cloud] * (dispatcher.upload_s[r] + dispatcher.download_s[r])
                                         + gain_in * dispatcher.in_mb[r] + gain_out * dispatcher.out_mb[r])
                      for r in range(len(cloud_rise))]
    return PeriodEstimates(worker_caps=worker_caps, cpu_cap=float(input_caps[setup.cpu_input]), trend=trend,
                           gain=gain, cloud_rise=cloud_rise,
                           temperature_bin=[int(reading[output[w]]) for w in range(n_workers)],
                           available=[w for w in allowed if worker_caps[w] > 0])
