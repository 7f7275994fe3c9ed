"""What the SPLASH scheduler learns online, and the simulated phone it learns it on.

SPLASH (Jeong, SNU 2023; docs/METHODS.md section 5) predicts each worker's temperature with a
linear model refitted online. Here it is one model over every sensor,
``T_{t+1} = T_t + Θ·[T_t, F_t, L_t, I_t, O_t, RSSI, 1]`` (temperatures of all workers and the skin,
clock fractions, per-worker busy fraction, offloaded input/output MB, signal proxy): the union of
SPLASH's processor and cloud models, written in increments so that the ridge shrinks towards
"temperature stays". :class:`OnlineThermalModel` holds the sliding window (2000 samples) and
refits by a rank-revealing least-squares solve; :func:`profiling_run` seeds it with random loads
and clocks, as SPLASH's offline profiling does. :class:`RunSetup` is what a run knows of the
phone: the thermal input and sensor of every worker, the governor period and its substeps, the
model's feature layout, and the power a load draws.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import UnknownNameError
from ...hardware.thermal_spec import ThermalSpec
from ..plant import ThermalPlant
from .workload import CLOUD, WorkerProfiles


def thermal_input_of(worker: str) -> str:
    """The thermal spec's processor a worker heats: the radio (``modem``) for the cloud."""
    return "modem" if worker == CLOUD else worker


def heated_node(spec: ThermalSpec, worker: str) -> str:
    """The RC node whose temperature a worker reads: the one its thermal input heats most."""
    return spec.heated_node(thermal_input_of(worker))


def heat_nodes(spec: ThermalSpec, profiles: WorkerProfiles) -> tuple[list[int], list[int]]:
    """Per worker: the thermal input (processor) index and the node whose temperature it reads."""
    inputs = spec.processor_names
    worker_input, worker_node = [], []
    for w in profiles.workers:
        name = thermal_input_of(w)
        if name not in inputs:
            what = "radio ('modem' processor)" if w == CLOUD else f"processor {w!r}"
            raise UnknownNameError("thermal input", name, inputs,
                                   where=f"thermal spec {spec.device!r} (needed for the {what})")
        worker_input.append(inputs.index(name))
        worker_node.append(spec.node_index(heated_node(spec, w)))
    return worker_input, worker_node


class RunSetup:
    """What a run needs to know of the phone, the workload and the learned model's feature layout:
    features ``[T sensors, caps per thermal input, busy per worker, I MB, O MB, RSSI, 1]``, one
    output per sensor node."""

    def __init__(self, profiles: WorkerProfiles, spec: ThermalSpec, fps: float, substep_s: float,
                 duration_s: float, sensor_resolution_c: float) -> None:
        self.profiles, self.spec, self.fps = profiles, spec, fps
        self.has_cloud = profiles.link is not None
        self.n_workers = len(profiles.workers)
        self.period_s = spec.governor.period_s
        self.substeps = max(1, int(round(self.period_s / substep_s)))
        self.dt_s = self.period_s / self.substeps
        self.n_periods = max(1, int(round(duration_s / self.period_s)))
        self.worker_input, worker_node = heat_nodes(spec, profiles)
        self.cpu_input = spec.processor_names.index(profiles.workers[profiles.meta["cpu_index"]])
        self.sensor_nodes = list(dict.fromkeys(worker_node + [spec.node_index(spec.skin)]))
        self.n_inputs = len(spec.processor_names)
        self.worker_output = [self.sensor_nodes.index(n) for n in worker_node]   # worker -> output column
        self.n_features = len(self.sensor_nodes) + self.n_inputs + self.n_workers + 4
        self.busy_column = len(self.sensor_nodes) + self.n_inputs
        self.offload_column = self.busy_column + self.n_workers
        self.sensor_resolution_c = sensor_resolution_c
        # the phone's radio front end bounds what the link model asks of it (thermal spec max_power)
        radio_limit = float(spec.power_limit_w()[spec.processor_names.index("modem")]) \
            if self.has_cloud else math.inf
        self.radio_up_w = min(profiles.radio_up_w, radio_limit)
        self.radio_down_w = min(profiles.radio_down_w, radio_limit)
        self.radio_tail_w = min(profiles.radio_tail_w, radio_limit)

    def features(self, sensor_temps: np.ndarray, input_caps: np.ndarray, busy_fraction: np.ndarray,
                 in_mb: float, out_mb: float) -> np.ndarray:
        """The model's feature row for one period."""
        return np.concatenate([sensor_temps, input_caps, busy_fraction,
                               [in_mb, out_mb, self.profiles.rssi_proxy_db, 1.0]])

    def read(self, x: np.ndarray) -> np.ndarray:
        """The sensor readings of state ``x``, quantised to the sensor resolution."""
        return np.round(x[self.sensor_nodes] / self.sensor_resolution_c) * self.sensor_resolution_c

    def power_of(self, busy_fraction: np.ndarray, worker_caps: np.ndarray) -> np.ndarray:
        """Input power [thermal inputs] of per-worker busy fractions at per-worker clock fractions."""
        power = np.zeros(self.n_inputs)
        profiles = self.profiles
        for w in range(self.n_workers):
            if profiles.workers[w] == CLOUD:
                # transfers spread over the period: between them the radio stays in its tail
                tail = (1.0 - busy_fraction[w]) * self.radio_tail_w if busy_fraction[w] > 0 else 0.0
                power[self.worker_input[w]] += busy_fraction[w] * self.radio_up_w + tail
            else:
                power[self.worker_input[w]] += busy_fraction[w] * (
                    profiles.static_w[w] + profiles.dynamic_w[w] * worker_caps[w] ** 3)
        return power


class OnlineThermalModel:
    """SPLASH's sliding-window linear thermal model, least squares with a small ridge.

    The window's Gram matrices ``XᵀX`` and ``XᵀY`` are updated per sample (add the new row,
    remove the one leaving the window), so a refit solves one small system; the solve is
    rank-revealing (SVD, ``numpy.linalg.lstsq``) on column-scaled features, because features
    such as a clock that never moved are collinear with the offset.
    """

    def __init__(self, n_features: int, n_outputs: int, window: int, ridge: float) -> None:
        self.rows_x = np.zeros((window, n_features))
        self.rows_y = np.zeros((window, n_outputs))
        self.gram = np.zeros((n_features, n_features))       # XᵀX over the window
        self.cross = np.zeros((n_features, n_outputs))       # XᵀY over the window
        self.n_added = 0
        self.window = window
        self.ridge = ridge
        self.theta = np.zeros((n_features, n_outputs))

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        """Add one sample (features ``x``, temperature change ``y``), dropping the oldest when full."""
        i = self.n_added % self.window
        if self.n_added >= self.window:
            x_old, y_old = self.rows_x[i], self.rows_y[i]
            self.gram -= np.outer(x_old, x_old)
            self.cross -= np.outer(x_old, y_old)
        self.rows_x[i], self.rows_y[i] = x, y
        self.gram += np.outer(x, x)
        self.cross += np.outer(x, y)
        self.n_added += 1

    def refit(self) -> None:
        """Solve for ``theta`` on the window (kept as it is below 8 samples)."""
        m = min(self.n_added, self.window)
        if m < 8:
            return
        scale = np.maximum(np.abs(self.rows_x[:m]).max(axis=0), 1e-9)
        gram_scaled = self.gram / np.outer(scale, scale) + self.ridge * np.eye(len(scale))
        theta, *_ = np.linalg.lstsq(gram_scaled, self.cross / scale[:, None], rcond=1e-12)
        self.theta = theta / scale[:, None]

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predicted temperature change of every sensor for feature row ``x``."""
        return x @ self.theta


def profiling_run(setup: RunSetup, model: OnlineThermalModel, rng: np.random.Generator, profiling_s: float,
                  ambient_c: float) -> None:
    """SPLASH's offline profiling: random per-worker loads and a DVFS sweep seed the thermal model."""
    profiles, n_workers = setup.profiles, setup.n_workers
    plant = ThermalPlant(setup.spec, setup.period_s, setup.substeps, ambient_c=ambient_c)
    for _ in range(int(profiling_s / setup.period_s)):
        busy = rng.uniform(0.0, 1.0, n_workers) * (rng.uniform(size=n_workers) < 0.6)
        caps = rng.uniform(0.3, 1.0, setup.n_inputs)
        reading = setup.read(plant.x)
        power = setup.power_of(busy, np.array([caps[setup.worker_input[w]] for w in range(n_workers)]))
        for _substep in range(setup.substeps):
            plant.step(power)
        after = setup.read(plant.x)
        in_mb = busy[-1] * setup.period_s / max(profiles.upload_s.mean(), 1e-9) * profiles.in_bytes.mean() / 1e6 \
            if setup.has_cloud else 0.0
        out_mb = in_mb * profiles.out_bytes.mean() / max(profiles.in_bytes.mean(), 1.0) if setup.has_cloud else 0.0
        model.add(setup.features(reading, caps, busy, in_mb, out_mb), after - reading)
    model.refit()
