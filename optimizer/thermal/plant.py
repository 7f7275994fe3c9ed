"""The simulated phone: one RC network stepped exactly, one hysteresis governor, one log, one set of metrics.

Every closed-loop thermal simulation (the sustained-run engine :func:`~optimizer.thermal.simulate.simulate`,
SPLASH's scheduler, Play It Cool's model shifting) runs the same plant:

* the RC network of the device's thermal spec (:class:`~optimizer.thermal.rc.RCNetwork`, HotSpot-style
  compact model, Skadron et al. ISCA 2003), advanced by its exact zero-order-hold discretisation
  (Van Loan 1978, ``scipy.linalg.expm``) over a step ``dt = period / substeps`` with the inputs held;
* the device's governor (:class:`~optimizer.thermal.governor.Governor`, Qualcomm thermal-engine
  "monitor" semantics as on Pixel 4, SPLASH, Jeong 2023; docs/METHODS.md section 5), sampled by the caller,
  normally once every ``period`` (the thermal-engine polling period).

The caller decides what draws power; the plant only integrates it. Its :class:`PlantLog` holds what
was sampled and recorded and gives the shared metrics, each defined once:

* **time to first throttle**: the time of the first governor sample after which some processor's
  clock cap is below its maximum (a trip row that caps nothing does not count; a shutdown does);
* **throttled fraction**: the share of governor samples after which some cap is below maximum;
* **time to severe**: the time of the first sample at which the Android thermal status reaches
  the spec's ``severe`` level (``None`` when the spec has no status ladder or it never got there);
* **peak die / skin / node temperature**: the maximum over the recorded states (the caller records
  after each step, or after each period, and the figures are over exactly those states);
* **energy**: joules drawn per input, the held power times the step, summed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from ..hardware.thermal_spec import ThermalSpec
from .governor import Governor, GovernorEvent
from .rc import RCNetwork

#: a cap counts as throttling when it is below ``1 - THROTTLE_TOL`` of the maximum clock
THROTTLE_TOL = 1e-9


@dataclass(frozen=True)
class PlantLog:
    """What a :class:`ThermalPlant` sampled and recorded, and the metrics defined on it.

    Governor samples: ``sample_times_s`` [S], ``caps`` [S, P] (fractions in force after each
    sample), ``status`` [S]. Recorded states: ``times_s`` [K], ``temps_c`` [K, N], ``energy_j``
    [K, M] (joules per input since the previous record).
    """

    sample_times_s: np.ndarray
    caps: np.ndarray
    status: np.ndarray
    times_s: np.ndarray
    temps_c: np.ndarray
    energy_j: np.ndarray
    events: list[GovernorEvent]
    status_names: tuple[str, ...]
    severe_level: int | None
    die_index: np.ndarray
    skin_index: int

    @property
    def throttled(self) -> np.ndarray:
        """[S] True where some processor's cap is below its maximum after the sample."""
        return (self.caps < 1.0 - THROTTLE_TOL).any(axis=1)

    def time_to_first_throttle_s(self) -> float | None:
        """Time of the first sample after which some cap is below maximum (``None``: never)."""
        hit = np.flatnonzero(self.throttled)
        return float(self.sample_times_s[hit[0]]) if len(hit) else None

    def throttled_fraction(self) -> float:
        """Share of governor samples after which some cap is below maximum."""
        return float(self.throttled.mean()) if len(self.caps) else 0.0

    def time_to_severe_s(self) -> float | None:
        """Time of the first sample at the status ``severe`` or above (``None``: never, or no ladder)."""
        if self.severe_level is None:
            return None
        hit = np.flatnonzero(self.status >= self.severe_level)
        return float(self.sample_times_s[hit[0]]) if len(hit) else None

    def peak_c(self) -> np.ndarray:
        """[N] hottest recorded temperature of every node."""
        return self.temps_c.max(axis=0)

    def peak_die_c(self) -> float:
        """Hottest recorded die temperature (all nodes when the spec names no die)."""
        return float(self.temps_c[:, self.die_index].max())

    def peak_skin_c(self) -> float:
        """Hottest recorded skin temperature."""
        return float(self.temps_c[:, self.skin_index].max())

    def energy_total_j(self) -> np.ndarray:
        """[M] joules drawn per input over the whole run."""
        return self.energy_j.sum(axis=0)


@dataclass
class ThermalPlant:
    """RC network + governor of one device, stepped ``dt = period_s / substeps`` at a time.

    Parameters
    ----------
    spec
        The device's thermal spec.
    period_s
        Governor sampling period (default: the spec's); the plant's clock counts whole periods
        and substeps, so sample ``p`` happens at exactly ``p * period_s``.
    substeps
        RC steps per period (>= 1).
    ambient_c, initial_c
        Ambient temperature (default: the spec's) and initial node temperatures (scalar or [N];
        default: everything at ambient).
    """

    spec: ThermalSpec
    period_s: float | None = None
    substeps: int = 1
    ambient_c: float | None = None
    initial_c: np.ndarray | float | None = None
    x: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        spec = self.spec
        self.period_s = spec.governor.period_s if self.period_s is None else float(self.period_s)
        if not self.period_s > 0 or self.substeps < 1:
            raise ConfigError(f"plant period must be > 0 s and substeps >= 1, got {self.period_s!r}, "
                              f"{self.substeps!r}")
        self.ambient_c = spec.ambient_c if self.ambient_c is None else float(self.ambient_c)
        self.dt = self.period_s / self.substeps
        self.network = RCNetwork.from_spec(spec)
        disc = self.network.discretise(self.dt)
        self._AdT, self._BdT, self._drift = disc.Ad.T, disc.Bd.T, disc.ed * self.ambient_c
        self.governor = Governor(spec)
        n = len(spec.node_names)
        self.x = np.full(n, self.ambient_c) if self.initial_c is None else \
            np.broadcast_to(np.asarray(self.initial_c, float), (n,)).copy()
        self.steps = 0
        self.events: list[GovernorEvent] = []
        self._samples: list[tuple[float, np.ndarray, int]] = []
        self._records: list[tuple[float, np.ndarray, np.ndarray]] = []
        self._energy = np.zeros(len(spec.processor_names))

    @property
    def time_s(self) -> float:
        """Simulated time after the steps taken so far."""
        p, s = divmod(self.steps, self.substeps)
        return p * self.period_s + s * self.dt

    def sample(self) -> np.ndarray:
        """Let the governor read the node temperatures now; log and return the caps [P] it sets."""
        t = self.time_s
        self.events += self.governor.update(self.x, t)
        caps = self.governor.caps
        self._samples.append((t, caps, self.governor.level))
        return caps

    def step(self, power_w: np.ndarray) -> np.ndarray:
        """Advance one step ``dt`` under per-input power [M] (W) held over it; returns the state [N]."""
        self.x = self.x @ self._AdT + power_w @ self._BdT + self._drift
        self._energy = self._energy + power_w * self.dt
        self.steps += 1
        return self.x

    def run(self, power_w: np.ndarray) -> np.ndarray:
        """Advance one step per row of ``power_w`` [S, M]; returns the final state [N]."""
        for row in power_w:
            self.step(row)
        return self.x

    def record(self) -> None:
        """Log the current state (time, temperatures, energy since the previous record)."""
        self._records.append((self.time_s, self.x, self._energy))
        self._energy = np.zeros(len(self._energy))

    def log(self) -> PlantLog:
        """Everything sampled and recorded so far, with the shared metrics."""
        spec = self.spec
        P, N, M = len(self.governor.processor_names), len(spec.node_names), len(spec.processor_names)
        st, rc = self._samples, self._records
        return PlantLog(
            sample_times_s=np.array([s[0] for s in st], dtype=float),
            caps=np.array([s[1] for s in st], dtype=float).reshape(len(st), P),
            status=np.array([s[2] for s in st], dtype=int),
            times_s=np.array([r[0] for r in rc], dtype=float),
            temps_c=np.array([r[1] for r in rc], dtype=float).reshape(len(rc), N),
            energy_j=np.array([r[2] for r in rc], dtype=float).reshape(len(rc), M),
            events=list(self.events), status_names=self.governor.status_names,
            severe_level=self.governor.severe_level,
            die_index=np.array([spec.node_index(n) for n in spec.die_nodes] or range(N), dtype=int),
            skin_index=spec.node_index(spec.skin))
