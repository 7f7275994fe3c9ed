"""Schema of a device's thermal section: RC network, processor→node heat map, throttling governor.

A thermal spec lives in ``search_spaces/thermal/<device>.yaml`` and is self-contained: the
device file only names it. Values are SI inside (J/K, W/K, °C, Hz, s); the YAML may write them
with units ("0.8 W/K", "940.8 MHz", "25 °C", "1 s"); a bare number is SI. Every section carries
a ``source`` string (a paper table, a vendor configuration, or "calibrated to ...").

The RC network is the lumped model ``C dT/dt = -G (T - T_amb 1) + S P`` of Skadron et al.
(HotSpot, ISCA 2003) used by SPLASH and TADF (docs/METHODS.md sections 4-5): nodes with heat capacities,
conductances between nodes and to ambient, and an explicit map saying which processor's power
heats which node (``processors.<name>.heats``: node → share of that processor's power).

The governor is data: a trip table in the style of Qualcomm's thermal-engine "monitor"
algorithm (a row trips at ``trip`` and clears at ``clear`` on one sensor node and caps clocks
while active) plus Android thermal status levels with one hysteresis (docs/METHODS.md section 5).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..errors import ConfigError, UnknownNameError
from .loader import ShippedYaml, device_names, load_device
from .schema import Device
from .units import parse_quantity, reject_duplicates

#: name of the ambient pseudo-node in ``conductances``
AMBIENT = "ambient"

def parse_thermal_quantity(value: object, dimension: str) -> float:
    """A number (SI) or "<number> <unit>" string of ``dimension`` in SI (see :mod:`.units`)."""
    return parse_quantity(value, dimension)


def _q(dimension: str) -> BeforeValidator:
    return BeforeValidator(lambda v: parse_thermal_quantity(v, dimension))


Capacitance = Annotated[float, _q("capacitance"), Field(gt=0)]
Conductance = Annotated[float, _q("conductance"), Field(ge=0)]
Celsius = Annotated[float, _q("temperature"), Field(gt=-100, lt=300)]
Hertz = Annotated[float, _q("frequency"), Field(gt=0)]
Seconds = Annotated[float, _q("time"), Field(gt=0)]
Share = Annotated[float, Field(gt=0, le=1)]


class ShareCap(BaseModel):
    """A cap written as a percentage of the processor's maximum ("50 %"): for a processor without
    a clock in the spec, such as the radio, whose cap limits its throughput (duty)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fraction: Annotated[float, Field(ge=0, le=1)]


def _cap_value(v: object) -> float | str | ShareCap:
    if isinstance(v, (ShareCap, dict)):      # a model, or its dump ({"fraction": f})
        return v
    if isinstance(v, str) and v.strip().lower() == "off":
        return "off"
    if isinstance(v, str) and v.strip().endswith("%"):
        try:
            pct = float(v.strip()[:-1])
        except ValueError:
            raise ValueError(f"cap {v!r}: expected a percentage such as '50 %'") from None
        if not 0 <= pct <= 100:
            raise ValueError(f"cap {v!r}: a percentage must lie in 0-100 %")
        return ShareCap(fraction=pct / 100.0)
    return parse_thermal_quantity(v, "frequency")


#: a clock cap: Hz, "off" (the processor is switched off) or "NN %" of the processor's maximum
Cap = Annotated[float | Literal["off"] | ShareCap, BeforeValidator(_cap_value)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Cluster(_Model):
    """A CPU cluster with its own clock; ``weight`` = its share of the processor's DNN work."""

    max_clock_hz: Hertz = Field(alias="max_clock")
    weight: Annotated[float, Field(ge=0, le=1)]


class ThermalProcessor(_Model):
    """Where a processor's power goes (node → share, shares sum to 1) and its maximum clock.

    Caps are turned into a fraction of the maximum clock; for a processor with clusters the
    fraction is the work-weighted mean of the clusters' fractions. ``max_clock`` may be left out
    for a processor the governor only switches off. ``full_load`` is the processor's power under
    the sustained full load the RC parameters were calibrated with, ``static`` the part of it
    that does not scale with the clock (leakage, uncore). ``max_power`` bounds the power the
    processor can draw: for the radio (``modem``), the phone's front end, which Huang et al.'s
    linear model (MobiSys 2012, fitted at a few Mbps) overshoots at higher rates. ``heat_scale``
    multiplies the power drawn before it heats the nodes: for the radio, the phone's radio chain
    (baseband, front end, network-stack work on the SoC) relative to the link model's reference
    phone; 1 for processors whose power comes from the device's own cost model.
    """

    heats: dict[str, Share] = Field(min_length=1)
    max_clock_hz: Hertz | None = Field(default=None, alias="max_clock")
    clusters: dict[str, Cluster] = Field(default_factory=dict)
    full_load_w: Annotated[float, _q("power"), Field(ge=0)] | None = Field(default=None, alias="full_load")
    static_w: Annotated[float, _q("power"), Field(ge=0)] = Field(default=0.0, alias="static")
    heat_scale: Annotated[float, Field(gt=0, le=10)] = 1.0
    max_power_w: Annotated[float, _q("power"), Field(gt=0)] | None = Field(default=None, alias="max_power")
    source: str

    @model_validator(mode="after")
    def _check(self) -> ThermalProcessor:
        total = sum(self.heats.values())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"heats shares must sum to 1, got {total:g}")
        if self.clusters:
            w = sum(c.weight for c in self.clusters.values())
            if abs(w - 1.0) > 1e-6:
                raise ValueError(f"cluster weights must sum to 1, got {w:g}")
        return self


class ThermalNode(_Model):
    """One lumped node: a die, the board/PCB, the battery, the skin (back cover)."""

    name: str
    kind: Literal["die", "board", "battery", "skin", "other"]
    capacitance_j_per_k: Capacitance = Field(alias="capacitance")
    source: str


class Coupling(_Model):
    """A thermal conductance between two nodes, or between a node and ``ambient``."""

    between: tuple[str, str]
    conductance_w_per_k: Conductance = Field(alias="conductance")
    source: str


class TripRow(_Model):
    """A governor row: when ``sensor`` reaches ``trip`` the caps apply until it falls to ``clear``.

    Caps are keyed by processor (``gpu``) or processor.cluster (``cpu.prime``); values are clocks,
    "off", or "NN %" of the processor's maximum (the radio: a cap on its throughput, modelling a
    modem's thermal mitigation). Rows may watch the skin or a die sensor (die rows: the SoC's
    passive and critical trip points). ``shutdown: true`` marks the emergency shutdown row.
    """

    sensor: str
    trip_c: Celsius = Field(alias="trip")
    clear_c: Celsius = Field(alias="clear")
    caps: dict[str, Cap] = Field(default_factory=dict)
    shutdown: bool = False
    source: str

    @model_validator(mode="after")
    def _check(self) -> TripRow:
        if self.clear_c > self.trip_c:
            raise ValueError(f"clear ({self.clear_c:g} °C) must not exceed trip ({self.trip_c:g} °C)")
        if not self.caps and not self.shutdown:
            raise ValueError("a trip row needs caps or shutdown: true")
        return self


class StatusLevel(_Model):
    """An Android thermal status level (light, moderate, severe, critical, emergency, shutdown)."""

    name: str
    trip_c: Celsius = Field(alias="trip")


class StatusLevels(_Model):
    """Status levels on one sensor, raised at ``trip``, lowered below ``trip - hysteresis``."""

    sensor: str
    hysteresis_c: Annotated[float, _q("temperature"), Field(ge=0)] = Field(alias="hysteresis")
    levels: list[StatusLevel] = Field(min_length=1)
    severe: str = "severe"
    source: str

    @model_validator(mode="after")
    def _check(self) -> StatusLevels:
        trips = [lv.trip_c for lv in self.levels]
        if trips != sorted(trips) or len(set(trips)) != len(trips):
            raise ValueError(f"status levels must have strictly increasing trips, got {trips}")
        names = [lv.name for lv in self.levels]
        if self.severe not in names:
            raise ValueError(f"severe level {self.severe!r} is not one of the levels {names}")
        return self


class GovernorSpec(_Model):
    """The throttling governor: sampling period, trip table and status levels."""

    period_s: Seconds = Field(alias="period")
    trips: list[TripRow] = Field(default_factory=list)
    status: StatusLevels | None = None
    source: str


class ThermalSpec(_Model):
    """A device's thermal section: RC network, processor heat map, skin node, governor."""

    device: str
    ambient_c: Celsius = Field(alias="ambient")
    skin: str
    nodes: list[ThermalNode] = Field(min_length=1)
    couplings: list[Coupling] = Field(min_length=1)
    processors: dict[str, ThermalProcessor] = Field(min_length=1)
    governor: GovernorSpec
    calibration: str = ""
    source: str

    @model_validator(mode="after")
    def _check(self) -> ThermalSpec:
        names = [n.name for n in self.nodes]
        reject_duplicates(names, "node name")
        if AMBIENT in names:
            raise ValueError(f"{AMBIENT!r} is reserved for the ambient; rename that node")
        valid = ", ".join(names)
        if self.skin not in names:
            raise ValueError(f"skin: unknown node {self.skin!r}; valid: {valid}")
        seen: set[frozenset[str]] = set()
        for i, c in enumerate(self.couplings):
            a, b = c.between
            for n in (a, b):
                if n != AMBIENT and n not in names:
                    raise ValueError(f"couplings[{i}]: unknown node {n!r}; valid: {valid}, {AMBIENT}")
            if a == b:
                raise ValueError(f"couplings[{i}]: a node cannot couple to itself ({a!r})")
            key = frozenset((a, b))
            if key in seen:
                raise ValueError(f"couplings[{i}]: {a!r}-{b!r} given twice")
            seen.add(key)
        if not any(AMBIENT in c.between and c.conductance_w_per_k > 0 for c in self.couplings):
            raise ValueError("no node couples to ambient: temperatures would grow without bound")
        for p, proc in self.processors.items():
            for n in proc.heats:
                if n not in names:
                    raise ValueError(f"processors.{p}.heats: unknown node {n!r}; valid: {valid}")
        for i, row in enumerate(self.governor.trips):
            if row.sensor not in names:
                raise ValueError(f"governor.trips[{i}].sensor: unknown node {row.sensor!r}; valid: {valid}")
            for key in row.caps:
                proc, _, cluster = key.partition(".")
                if proc not in self.processors:
                    raise ValueError(f"governor.trips[{i}].caps: unknown processor {proc!r}; "
                                     f"valid: {', '.join(self.processors)}")
                value = row.caps[key]
                if not isinstance(value, ShareCap) and value != "off" and not cluster and self.processors[proc].max_clock_hz is None:
                    raise ValueError(f"governor.trips[{i}].caps.{key}: a clock cap needs "
                                     f"processors.{proc}.max_clock")
                if cluster and cluster not in self.processors[proc].clusters:
                    raise ValueError(f"governor.trips[{i}].caps: unknown cluster {key!r}; valid: "
                                     f"{', '.join(proc + '.' + c for c in self.processors[proc].clusters)}")
        if self.governor.status is not None and self.governor.status.sensor not in names:
            raise ValueError(f"governor.status.sensor: unknown node {self.governor.status.sensor!r}; "
                             f"valid: {valid}")
        return self

    @property
    def node_names(self) -> tuple[str, ...]:
        """Node names in the order of the RC matrices' rows."""
        return tuple(n.name for n in self.nodes)

    def node_index(self, name: str) -> int:
        """Index of node ``name`` (UnknownNameError lists the valid ones)."""
        if name not in self.node_names:
            raise UnknownNameError("thermal node", name, self.node_names, where=f"thermal spec {self.device!r}")
        return self.node_names.index(name)

    def heated_node(self, processor: str) -> str:
        """The node ``processor`` heats most: the one whose temperature it reads (a die, or the
        modem for the radio)."""
        heats = self.processors[processor].heats
        return max(heats, key=heats.__getitem__)

    @property
    def processor_names(self) -> tuple[str, ...]:
        """Processor names in the order of every per-processor array (power limits, caps)."""
        return tuple(self.processors)

    def full_load_w(self) -> dict[str, float]:
        """The calibration load: processor → W (processors without ``full_load`` are left out)."""
        return {p: v.full_load_w for p, v in self.processors.items() if v.full_load_w is not None}

    def power_limit_w(self) -> np.ndarray:
        """[P] most power each processor can draw (``max_power``; inf where not given)."""
        return np.array([np.inf if p.max_power_w is None else p.max_power_w for p in self.processors.values()])

    def static_w(self) -> dict[str, float]:
        """Clock-independent power per processor while it is on (W)."""
        return {p: v.static_w for p, v in self.processors.items()}

    @property
    def die_nodes(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes if n.kind == "die")


#: thermal specs shipped in ``search_spaces/thermal/`` (one per device name)
THERMAL_SPECS = ShippedYaml("thermal", "thermal spec", ThermalSpec)
available_thermal_specs, load_thermal_spec = THERMAL_SPECS.names, THERMAL_SPECS.load


def devices_with_thermal() -> list[str]:
    """Names of the shipped devices whose file names a thermal spec."""
    out = []
    for name in device_names():
        try:
            if load_device(name).thermal is not None:
                out.append(name)
        except Exception:  # noqa: BLE001 - a broken device file must not hide the others
            continue
    return out


def thermal_spec_of(device: Device) -> ThermalSpec:
    """The device's thermal spec, or a ConfigError naming the device and those that have one."""
    if device.thermal is None:
        raise ConfigError(f"device {device.name!r} has no thermal section (no 'thermal:' entry in its file); "
                          f"devices with one: {', '.join(devices_with_thermal())}")
    return load_thermal_spec(device.thermal)
