"""Throttling governor with hysteresis, driven by a :class:`~optimizer.hardware.thermal_spec.GovernorSpec`.

Semantics follow Qualcomm's thermal-engine "monitor" algorithm as configured on Pixel 4
(SPLASH, Jeong 2023; docs/METHODS.md section 5): each trip row watches one sensor; it becomes active when
the sensor reaches ``trip`` and stays active until the sensor falls to ``clear`` or below.
While active, its caps apply; the effective cap of a processor (or cluster) is the lowest of
all active rows'. Android thermal status is the highest level whose trip has been reached; it
drops a level when the sensor falls below that level's ``trip - hysteresis``.

Caps are reported as fractions of each processor's maximum clock (0 = switched off); for a
processor with clusters the fraction is the work-weighted mean of its clusters' fractions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..hardware.thermal_spec import ShareCap, ThermalSpec


@dataclass(frozen=True)
class GovernorEvent:
    """A change of state: a trip row tripped or cleared, or the status level changed."""

    time_s: float
    kind: str          # "trip", "clear", "status", "shutdown"
    detail: str
    temperature_c: float

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "kind": self.kind, "detail": self.detail,
                "temperature_c": round(self.temperature_c, 3)}


@dataclass
class GovernorTrace:
    """A replay: caps [K, P] (fractions), status level index [K] (0 = none), events."""

    times_s: np.ndarray
    processor_names: tuple[str, ...]
    caps: np.ndarray
    status: np.ndarray
    status_names: tuple[str, ...]
    events: list[GovernorEvent] = field(default_factory=list)


class Governor:
    """Stateful hysteresis governor for one thermal spec.

    Parameters
    ----------
    spec
        The device's thermal spec; caps are computed for ``spec.processor_names`` in order.
    """

    def __init__(self, spec: ThermalSpec) -> None:
        self.spec = spec
        gov = spec.governor
        self.processor_names = spec.processor_names
        self._rows = gov.trips
        self._row_sensor = np.array([spec.node_index(r.sensor) for r in self._rows], dtype=int)
        self._row_caps = np.array([self._row_fractions(r.caps) for r in self._rows]).reshape(
            len(self._rows), len(self.processor_names))
        st = gov.status
        self.status_names: tuple[str, ...] = ("none",) + (tuple(lv.name for lv in st.levels) if st else ())
        self._status_trips = np.array([lv.trip_c for lv in st.levels]) if st else np.zeros(0)
        self._status_sensor = spec.node_index(st.sensor) if st else 0
        self._hyst = st.hysteresis_c if st else 0.0
        self.severe_level = self.status_names.index(st.severe) if st else None
        self.reset()

    # -- cap arithmetic ------------------------------------------------------------------------
    def _row_fractions(self, caps: dict) -> list[float]:
        """Caps of one row as per-processor fractions of max clock (1 = uncapped)."""
        out = []
        for p in self.processor_names:
            proc = self.spec.processors[p]
            if proc.clusters:
                frac = 0.0
                for cname, cl in proc.clusters.items():
                    cap = caps.get(f"{p}.{cname}", caps.get(p))
                    frac += cl.weight * _fraction(cap, cl.max_clock_hz)
                out.append(frac)
            else:
                out.append(_fraction(caps.get(p), proc.max_clock_hz))
        return out

    # -- state ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget all state: no row active, status none."""
        self.active = np.zeros(len(self._rows), dtype=bool)
        self.level = 0
        self.shutdown = False

    @property
    def caps(self) -> np.ndarray:
        """Current caps [P] as fractions of the maximum clock (0 = off)."""
        if self.shutdown:
            return np.zeros(len(self.processor_names))
        if not self.active.any():
            return np.ones(len(self.processor_names))
        return self._row_caps[self.active].min(axis=0)

    def update(self, temps_c: np.ndarray, time_s: float = 0.0) -> list[GovernorEvent]:
        """Sample the node temperatures [N] once; update rows and status; return the events."""
        events: list[GovernorEvent] = []
        for i, row in enumerate(self._rows):
            t = float(temps_c[self._row_sensor[i]])
            if not self.active[i] and t >= row.trip_c:
                self.active[i] = True
                events.append(GovernorEvent(time_s, "shutdown" if row.shutdown else "trip",
                                            f"{row.sensor} >= {row.trip_c:g} °C", t))
                if row.shutdown:
                    self.shutdown = True
            elif self.active[i] and t <= row.clear_c:
                self.active[i] = False
                events.append(GovernorEvent(time_s, "clear", f"{row.sensor} <= {row.clear_c:g} °C", t))
        if len(self._status_trips):
            t = float(temps_c[self._status_sensor])
            level = self.level
            while level < len(self._status_trips) and t >= self._status_trips[level]:
                level += 1
            while level > 0 and t < self._status_trips[level - 1] - self._hyst:
                level -= 1
            if level != self.level:
                events.append(GovernorEvent(time_s, "status",
                                            f"{self.status_names[self.level]} -> {self.status_names[level]}", t))
                self.level = level
        return events


def _fraction(cap: float | str | ShareCap | None, max_clock_hz: float | None) -> float:
    if cap is None:
        return 1.0
    if isinstance(cap, ShareCap):
        return cap.fraction
    if cap == "off":
        return 0.0
    return min(1.0, float(cap) / max_clock_hz)


def replay(spec: ThermalSpec, times_s: np.ndarray, temps_c: np.ndarray) -> GovernorTrace:
    """Run the governor over a temperature sequence [K, N] (one row per governor sample).

    Returns caps [K, P] in force after each sample, the status level after each sample and the
    events in order.
    """
    gov = Governor(spec)
    temps = np.atleast_2d(np.asarray(temps_c, float))
    caps = np.empty((len(temps), len(gov.processor_names)))
    status = np.empty(len(temps), dtype=int)
    events: list[GovernorEvent] = []
    for k, (t, row) in enumerate(zip(np.asarray(times_s, float), temps, strict=True)):
        events += gov.update(row, t)
        caps[k] = gov.caps
        status[k] = gov.level
    return GovernorTrace(np.asarray(times_s, float), gov.processor_names, caps, status,
                         gov.status_names, events)
