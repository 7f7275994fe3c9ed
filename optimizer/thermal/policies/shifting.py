"""Dynamic model shifting: Play It Cool (Zhou, Liang, Chin, Marculescu; docs/METHODS.md section 6).

A weight-sharing network offers a large and a small variant (slimmable ResNet50 1.0×/0.25×,
top-1 0.768/0.638, Yu et al. ICLR 2019; BERT width/depth variants). The controller samples the
CPU temperature every ``sample_s``::

    avgT = α·avgT + (1 - α)·T_cpu
    grad = β·grad + (1 - β)·d(avgT)/dt          (°C/s)
    large and T_cpu > tLim  → small  (avgT := T_cpu, grad := 0)
    small and grad > gLim   → large

with α = 0.995, β = 0.99 and the published limits (phone: tLim 73 °C, gLim −0.07; Raspberry Pi
4B: tLim 77 °C, gLim −0.02 for CNNs, −0.012 for BERT). Right after the reset ``grad = 0`` is
already above gLim, which would switch back at once; we read the rule as "switch back once the
cooling has slowed", i.e. the small→large test is armed only after ``grad`` has fallen below
gLim. Every switch costs a model reload (``reload_s``, ~1 s on the phone; 0 when the variants
share weights in memory), during which no request is served and the CPU is busy.

The device is the sustained-run simulator's: requests arrive at ``fps`` (a camera or sensor
stream; a request arriving while the CPU is busy is dropped), the CPU is busy ``min(1, fps·t)``
of the time with ``t`` the variant's latency at the current clock cap (``t ∝ 1/cap``), power
``static + dynamic·cap³`` while busy, temperatures from the RC network, caps from the governor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError
from ..plant import PlantLog, ThermalPlant

#: Play It Cool's published controller parameters (docs/METHODS.md section 6)
ALPHA, BETA = 0.995, 0.99
LIMITS: dict[str, dict[str, tuple[float, float]]] = {
    "phone": {"cnn": (73.0, -0.07), "bert": (73.0, -0.07)},
    "raspberry_pi4": {"cnn": (77.0, -0.02), "bert": (77.0, -0.012)},
}
#: default variants and their top-1 accuracy (None: not published)
VARIANTS: dict[str, dict[str, Any]] = {
    "slimmable_resnet50": {"large": {"width": 1.0}, "small": {"width": 0.25},
                           "accuracy": (0.768, 0.638), "family": "cnn"},
    "bert_small": {"large": {"width": 1.0, "depth": 1.0}, "small": {"width": 0.5, "depth": 0.5},
                   "accuracy": (None, None), "family": "bert"},
}
MODES = ("shift", "large", "small")


@dataclass(frozen=True)
class ShiftSetup:
    """Everything a shifting run needs, built once (cost-model latencies of both variants)."""

    device: str
    model: str
    processor: str
    dtype: str
    latency_s: tuple[float, float]           # (large, small) at the maximum clock
    accuracy: tuple[float | None, float | None]
    static_w: float
    dynamic_w: float
    t_lim_c: float
    g_lim: float
    fps: float
    reload_s: float
    variants: tuple[dict, dict] = field(default_factory=lambda: ({}, {}))


@dataclass
class ShiftResult:
    """One run: latency, variant time shares, accuracy-weighted score, throttling."""

    mode: str
    duration_s: float
    mean_latency_s: float
    time_share: dict[str, float]              # large, small, reload
    served: int
    dropped_fraction: float
    accuracy_score: float | None              # mean top-1 over served requests
    switches: int
    throttle_events: int
    time_to_first_throttle_s: float | None
    throttled_fraction: float
    peak_cpu_c: float
    peak_sensor_c: float                      # the governor's sensor (skin on phones)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def shift_setup(device: str, model: str = "slimmable_resnet50", *, processor: str = "cpu",
                dtype: str = "fp32", fps: float | None = None, reload_s: float = 1.0,
                t_lim_c: float | None = None, g_lim: float | None = None,
                accuracy: tuple[float | None, float | None] | None = None) -> ShiftSetup:
    """Build the two variants' latencies with the cost model and pick the published limits.

    ``fps`` defaults to the rate at which the large variant keeps the processor 80 % busy at the
    maximum clock. Limits default to Play It Cool's: Raspberry Pi 4B values on ``raspberry_pi4``,
    the phone values elsewhere.
    """
    from ...cost import build_cost_table
    from ...graph import load_graph
    from ...hardware import load_device

    if model not in VARIANTS:
        from ...errors import UnknownNameError

        raise UnknownNameError("dynamic network", model, tuple(VARIANTS))
    spec = VARIANTS[model]
    dev = load_device(device)
    proc = dev.processor(processor)
    lat = []
    for v in ("large", "small"):
        ct = build_cost_table(load_graph(model, **spec[v]), dev, dtype)
        lat.append(float(ct.latency_s[:, ct.processor_index(processor)].sum()))
    profile = "raspberry_pi4" if dev.name == "raspberry_pi4" else "phone"
    published_t_lim, published_g_lim = LIMITS[profile][spec["family"]]
    rate = 0.8 / lat[0] if fps is None else float(fps)
    if not rate > 0 or reload_s < 0:
        raise ConfigError(f"fps must be > 0 and reload >= 0 s, got fps {fps!r}, reload {reload_s!r}")
    return ShiftSetup(device=dev.name, model=model, processor=processor, dtype=dtype,
                      latency_s=(lat[0], lat[1]), accuracy=tuple(accuracy or spec["accuracy"]),
                      static_w=proc.power.static_w, dynamic_w=proc.power_w() - proc.power.static_w,
                      t_lim_c=published_t_lim if t_lim_c is None else t_lim_c,
                      g_lim=published_g_lim if g_lim is None else g_lim, fps=rate, reload_s=reload_s, variants=(spec["large"], spec["small"]))


class _Controller:
    """Play It Cool's controller state (module docstring): EMA of the CPU temperature, EMA of its
    gradient, the armed flag of the small→large test, and the variant in use."""

    def __init__(self, setup: ShiftSetup, mode: str, ambient_c: float, dt: float) -> None:
        self.setup, self.mode, self.dt = setup, mode, dt
        self.large = mode != "small"
        self.avg_t, self.grad, self.armed = ambient_c, 0.0, False
        self.switches = 0

    def observe(self, t_cpu: float) -> bool:
        """Feed one CPU sample; True when the variant switches (a reload starts)."""
        if self.mode != "shift":
            return False
        prev = self.avg_t
        self.avg_t = ALPHA * self.avg_t + (1 - ALPHA) * t_cpu
        self.grad = BETA * self.grad + (1 - BETA) * (self.avg_t - prev) / self.dt
        if self.large and t_cpu > self.setup.t_lim_c:
            self.large, self.avg_t, self.grad, self.armed = False, t_cpu, 0.0, False
        elif not self.large and self.grad < self.setup.g_lim:
            self.armed = True
            return False
        elif not self.large and self.armed and self.grad > self.setup.g_lim:
            self.large = True
        else:
            return False
        self.switches += 1
        return True


def run_shifting(setup: ShiftSetup, mode: str = "shift", *, duration_s: float = 3600.0,
                 ambient_c: float | None = None, sample_s: float = 0.1) -> ShiftResult:
    """Simulate ``mode`` (``shift``: the controller; ``large``/``small``: always that variant)
    on the device's :class:`~optimizer.thermal.plant.ThermalPlant` (RC + governor)."""
    from ...hardware import load_device
    from ...hardware.thermal_spec import thermal_spec_of

    if mode not in MODES:
        from ...errors import UnknownNameError

        raise UnknownNameError("shifting mode", mode, MODES)
    spec = thermal_spec_of(load_device(setup.device))
    if setup.processor not in spec.processor_names:
        raise ConfigError(f"thermal spec of {setup.device!r} has no processor {setup.processor!r}")
    substeps = max(1, int(round(spec.governor.period_s / sample_s)))
    plant = ThermalPlant(spec, substeps=substeps, ambient_c=ambient_c)
    dt = plant.dt
    n_steps = max(1, int(round(duration_s / dt)))
    cpu_node = spec.node_index(spec.heated_node(setup.processor))
    sensor = spec.node_index(spec.governor.trips[0].sensor) if spec.governor.trips else cpu_node
    cpu_input = spec.processor_names.index(setup.processor)
    controller = _Controller(setup, mode, plant.ambient_c, dt)
    reload_left = 0.0
    t_in = {"large": 0.0, "small": 0.0, "reload": 0.0}
    served = latency_sum = accuracy_sum = arrived = 0.0
    power = np.zeros(len(spec.processor_names))
    cap = 1.0
    for k in range(n_steps):
        if k % substeps == 0:
            cap = float(plant.sample()[cpu_input])
        arrived += setup.fps * dt
        variant = "large" if controller.large else "small"
        if reload_left > 0:
            busy, variant = 1.0, "reload"
            reload_left -= dt
        elif cap <= 0:
            busy = 0.0
        else:
            index = 0 if controller.large else 1
            lat = setup.latency_s[index] / cap
            busy = min(1.0, setup.fps * lat)
            done = busy / lat * dt                       # requests finished in this step
            served += done
            latency_sum += done * lat
            if setup.accuracy[index] is not None:
                accuracy_sum += done * setup.accuracy[index]
        t_in[variant] += dt
        power[cpu_input] = busy * (setup.static_w + setup.dynamic_w * cap ** 3)
        x = plant.step(power)
        plant.record()
        if controller.observe(float(x[cpu_node])):
            reload_left = setup.reload_s
    log = plant.log()
    sums = {"served": served, "arrived": arrived, "latency": latency_sum, "accuracy": accuracy_sum}
    return _shift_result(setup, mode, log, n_steps * dt, t_in, sums, controller.switches, cpu_node, sensor)


def _shift_result(setup: ShiftSetup, mode: str, log: PlantLog, total: float, t_in: dict[str, float],
                  sums: dict[str, float], switches: int, cpu_node: int, sensor: int) -> ShiftResult:
    """The :class:`ShiftResult` of a run from its plant log and the request sums (served, arrived,
    latency and accuracy weighted by served requests)."""
    served, arrived, latency_sum, accuracy_sum = sums["served"], sums["arrived"], sums["latency"], sums["accuracy"]
    used = {"shift": (0, 1), "large": (0,), "small": (1,)}[mode]
    has_acc = all(setup.accuracy[v] is not None for v in used)
    peak = log.peak_c()
    return ShiftResult(
        mode=mode, duration_s=total, mean_latency_s=latency_sum / served if served else float("nan"),
        time_share={k: v / total for k, v in t_in.items()}, served=int(round(served)),
        dropped_fraction=float(max(0.0, 1 - served / arrived)) if arrived else 0.0,
        accuracy_score=accuracy_sum / served if (served and has_acc) else None, switches=switches,
        throttle_events=sum(e.kind == "trip" for e in log.events),
        time_to_first_throttle_s=log.time_to_first_throttle_s(), throttled_fraction=log.throttled_fraction(),
        peak_cpu_c=float(peak[cpu_node]), peak_sensor_c=float(peak[sensor]))


def compare_shifting(setup: ShiftSetup, *, duration_s: float = 3600.0,
                     ambient_c: float | None = None) -> dict[str, ShiftResult]:
    """The controller against always-large and always-small, same device and load."""
    return {m: run_shifting(setup, m, duration_s=duration_s, ambient_c=ambient_c) for m in MODES}
