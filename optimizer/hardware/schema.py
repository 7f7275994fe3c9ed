"""Pydantic schemas of the hardware files: Device (processors, hand-off), Link (radio model).

Values are SI inside (Hz, B, s, W, J, MAC/s); the YAML may write them with units (see
:mod:`optimizer.hardware.units`). Attribute names carry their unit (``memory_bytes``); the YAML
key is the unit-free alias (``memory: 4 GB``). Every section carries a ``source`` string
(spec sheet, paper table, or "calibrated from ...").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from ..errors import UnknownNameError
from ..graph.kernel_families import KERNEL_FALLBACK, KERNEL_FAMILIES
from ..graph.layergraph import OP_FAMILIES
from .units import (
    Bitrate,
    ByteRate,
    Bytes,
    Fraction,
    Frequency,
    JoulesPerByte,
    MacRate,
    Seconds,
    Upsilon,
    Watts,
    WattsPerBitrate,
    reject_duplicates,
)

ProcessorKind = Literal["cpu", "gpu", "npu", "dsp", "tpu", "cloud"]
PROCESSOR_KINDS: tuple[str, ...] = ("cpu", "gpu", "npu", "dsp", "tpu", "cloud")
DTYPES: tuple[str, ...] = ("fp32", "fp16", "int8")

#: core microarchitectures a CPU processor's clusters may declare (Arm Cortex names; ``x86`` for
#: desktop/server cores); efficiency per (class, runtime) is shared across devices
#: (``search_spaces/calibration/cores.yaml``, :mod:`optimizer.hardware.cores`; docs/METHODS.md section 8b)
CORE_CLASSES: tuple[str, ...] = ("A53", "A55", "A57", "A72", "A73", "A75", "A76", "A77", "A78", "X1", "X2",
                                 "A510", "A710", "x86")
#: vendor core names -> the Arm core they derive from (Qualcomm product briefs; AnandTech reviews)
CORE_ALIASES: dict[str, str] = {
    "Kryo 260 Gold": "A73", "Kryo 260 Silver": "A53", "Kryo 385 Gold": "A75", "Kryo 385 Silver": "A55",
    "Kryo 485 Gold": "A76", "Kryo 485 Silver": "A55", "Kryo 585 Gold": "A77", "Kryo 585 Silver": "A55",
    "Kryo 680 Prime": "X1", "Kryo 680 Gold": "A78", "Kryo 680 Silver": "A55",
}

Positive = Field(gt=0)
NonNegative = Field(ge=0)


class StrictModel(BaseModel):
    """Base of the device-file models: unknown keys refused, frozen, fields by name or alias."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class PowerLevel(StrictModel):
    """Measured active power at one clock level."""

    clock_hz: Annotated[Frequency, Positive] = Field(alias="clock")
    power_w: Annotated[Watts, NonNegative] = Field(alias="power")


class PowerModel(StrictModel):
    """Active power of a processor: ``P = P_static + Upsilon * f^3`` (Zhang et al. 2023, TADF)
    or a per-level table (linear interpolation between levels).

    Give exactly one of ``upsilon`` (W/Hz^3), ``dynamic_at_max`` (the dynamic power at the
    highest clock, from which ``Upsilon = dynamic_at_max / f_max^3``) or ``levels``.
    """

    static_w: Annotated[Watts, NonNegative] = Field(0.0, alias="static")
    upsilon_w_per_hz3: Annotated[Upsilon, NonNegative] | None = Field(None, alias="upsilon")
    dynamic_at_max_w: Annotated[Watts, NonNegative] | None = Field(None, alias="dynamic_at_max")
    levels: list[PowerLevel] | None = None
    source: str

    @model_validator(mode="after")
    def _one_form(self) -> PowerModel:
        given = [k for k in ("upsilon_w_per_hz3", "dynamic_at_max_w", "levels") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of upsilon, dynamic_at_max or levels "
                             f"(got {', '.join(given) or 'none'})")
        if self.levels is not None and len(self.levels) == 0:
            raise ValueError("levels must not be empty")
        return self

    def power_w(self, clock_hz: float, max_clock_hz: float) -> float:
        """Active power (W) at ``clock_hz``."""
        if self.levels is not None:
            clocks = [lv.clock_hz for lv in self.levels]
            powers = [lv.power_w for lv in self.levels]
            return float(np.interp(clock_hz, clocks, powers))
        upsilon = (self.upsilon_w_per_hz3 if self.upsilon_w_per_hz3 is not None
                   else float(self.dynamic_at_max_w) / max_clock_hz**3)
        return self.static_w + upsilon * clock_hz**3


OpList = Literal["all"] | list[str]


class CoreCluster(StrictModel):
    """Cores of one microarchitecture and clock that a CPU processor's threads run on (one
    big.LITTLE cluster, or the part of it the runtime's threads use)."""

    core: str
    count: Annotated[int, Positive]
    clock_hz: Annotated[Frequency, Positive] = Field(alias="clock")

    @field_validator("core")
    @classmethod
    def _known_core(cls, v: str) -> str:
        v = CORE_ALIASES.get(v, v)
        if v not in CORE_CLASSES:
            raise ValueError(f"unknown core class {v!r}; expected one of {', '.join(CORE_CLASSES)} "
                             f"(or a Kryo name: {', '.join(CORE_ALIASES)})")
        return v


class RuntimeProfile(StrictModel):
    """How one processor performs under a runtime other than its device's default one (e.g.
    PyTorch Mobile FP32 without XNNPACK vs TFLite XNNPACK; docs/METHODS.md section 8). Fields left
    out keep the processor's own values; ``efficiency`` replaces the efficiency table's shape.
    Where the shared core table (:mod:`optimizer.hardware.cores`) rates the processor's clusters
    under this runtime, those rates set the overall level unless ``override`` gives the sourced
    reason for this device's ``efficiency`` to stand instead."""

    efficiency: dict[str, Annotated[Fraction, Field(gt=0, le=4)]] | None = None
    override: str | None = None
    memory_bandwidth_bytes_per_s: Annotated[ByteRate, Positive] | None = Field(None, alias="memory_bandwidth")
    layer_overhead_s: Annotated[Seconds, NonNegative] | None = Field(None, alias="layer_overhead")
    invoke_overhead_s: Annotated[Seconds, NonNegative] | None = Field(None, alias="invoke_overhead")
    source: str


class ValidatedBand(StrictModel):
    """How far a predictor's whole-network latencies were from measured ones (``dnnplan calibrate
    --validate``): relative errors ``predicted / measured - 1`` over the validation networks."""

    runner: str
    models: list[str] = Field(min_length=1)
    error_min: float
    error_max: float
    median_abs_error: Annotated[float, NonNegative]
    within_10pct: Annotated[float, Field(ge=0, le=1)]
    date: str


class Predictor(StrictModel):
    """A per-device latency predictor of one processor (nn-Meter, Zhang et al., MobiSys 2021): the
    probe table measured under ``runtime`` at ``dtype`` with ``threads`` threads, from which
    :mod:`optimizer.cost.predictor` fits one regressor per kernel family when the device loads.

    ``table`` is a path relative to the device file (absolute paths are kept). ``corrections``
    are per-kernel-family factors fitted to the user's own profiles (``dnnplan calibrate
    --from-profile``; ``default`` for the families no profile timed); ``validated`` the error
    band of ``dnnplan calibrate --validate``."""

    runtime: str
    dtype: Literal["fp32", "fp16", "int8"]
    threads: Annotated[int, Positive]
    table: str
    seed: Annotated[int, NonNegative] = 0
    corrections: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)
    corrections_source: str | None = None
    validated: ValidatedBand | None = None
    #: folder of the device file the entry was read from (set by Device)
    _folder: str = PrivateAttr("")

    @field_validator("corrections")
    @classmethod
    def _correction_families(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k in v if k not in KERNEL_FAMILIES and k != "default"]
        if bad:
            raise ValueError(f"unknown kernel family {bad[0]!r}; expected default or one of {', '.join(KERNEL_FAMILIES)}")
        return v

    @property
    def table_path(self) -> Path:
        """The probe table: ``table`` resolved against the device file's folder."""
        p = Path(self.table)
        return p if p.is_absolute() or not self._folder else Path(self._folder) / p


class Processor(StrictModel):
    """One processor of a device (or a server's compute, kind ``cloud``).

    Latency model (analytic backend): a layer of ``m`` MACs moving ``b`` bytes takes
    ``overhead + max(m / (peak[dtype] * eff[op] * f / f_max), b / memory_bandwidth)``, a
    roofline (Williams et al., CACM 2009) with a per-layer dispatch overhead. ``eff`` is the
    achieved fraction of peak counted in direct-convolution MACs; it may exceed 1 (up to 4)
    where runtimes use fast algorithms such as Winograd (Lavin & Gray, CVPR 2016).
    """

    name: str
    kind: ProcessorKind
    cores: Annotated[int, Positive]
    clock_levels_hz: list[Annotated[Frequency, Positive]] = Field(alias="clock_levels", min_length=1)
    peak_macs_per_s: dict[str, Annotated[MacRate, Positive]] = Field(alias="peak_macs")
    efficiency: dict[str, Annotated[Fraction, Field(gt=0, le=4)]]
    memory_bandwidth_bytes_per_s: Annotated[ByteRate, Positive] = Field(alias="memory_bandwidth")
    layer_overhead_s: Annotated[Seconds, NonNegative] = Field(alias="layer_overhead")
    #: on-chip memory (VTCM/SRAM) and its bandwidth: a layer whose bytes fit runs at that bandwidth
    onchip_memory_bytes: Annotated[Bytes, Positive] | None = Field(None, alias="onchip_memory")
    onchip_bandwidth_bytes_per_s: Annotated[ByteRate, Positive] | None = Field(None, alias="onchip_bandwidth")
    #: fixed cost of one call into this processor's runtime/delegate (once per stage, not per layer)
    invoke_overhead_s: Annotated[Seconds, NonNegative] = Field(0.0, alias="invoke_overhead")
    #: most delegate partitions a stage hands to this processor (0 = no limit); later runs of
    #: supported ops stay on the CPU (TFLite GPU delegate default 1, NNAPI 3)
    max_delegated_partitions: Annotated[int, Field(ge=0)] = 0
    #: on-chip parameter cache: a stage whose weights exceed it streams the excess from DRAM at
    #: ``memory_bandwidth`` on every call (Coral, "Edge TPU parameter data caching"; docs/METHODS.md section 8b)
    parameter_cache_bytes: Annotated[Bytes, Positive] | None = Field(None, alias="parameter_cache")
    #: profiles of non-default runtimes (e.g. ``pytorch``), see Device.runtime
    runtime_profiles: dict[str, RuntimeProfile] = Field(default_factory=dict, alias="runtimes")
    #: the cores the processor's threads run on (a CPU's big.LITTLE clusters); with them the shared
    #: core table sets the processor's rate per runtime (:mod:`optimizer.hardware.cores`)
    clusters: list[CoreCluster] | None = None
    supported_ops: dict[str, OpList]
    #: per-device latency predictors (probe tables) by runtime, dtype and threads
    predictors: list[Predictor] = Field(default_factory=list)
    #: operator types this processor's delegate cannot run at a dtype although it runs their op
    #: family (TFLite builtin names, e.g. ``RELU_0_TO_1``; ONNX/Keras types match after CamelCase ->
    #: UPPER_SNAKE, ``HardSigmoid`` -> ``HARD_SIGMOID``): they fall back to the CPU as kernels of
    #: their own, each a delegate partition boundary (published delegate op lists, cited in ``source``)
    unsupported_op_types: dict[str, list[str]] = Field(default_factory=dict, alias="unsupported_ops")
    power: PowerModel
    memory_bytes: Annotated[Bytes, Positive] | None = Field(None, alias="memory")
    source: str

    #: the device's default runtime (set by Device): the core-table runtime for ``runtime=None``
    #: (:func:`optimizer.hardware.cores.family_scales`)
    _default_runtime: str = PrivateAttr("tflite")

    @field_validator("clock_levels_hz")
    @classmethod
    def _ascending(cls, v: list[float]) -> list[float]:
        if any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError("clock levels must be strictly ascending (the maximum last)")
        return v

    @field_validator("peak_macs_per_s", "supported_ops", "unsupported_op_types")
    @classmethod
    def _dtypes(cls, v: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in v if k not in DTYPES]
        if bad:
            raise ValueError(f"unknown dtype {bad[0]!r}; expected one of {', '.join(DTYPES)}")
        return v

    @field_validator("efficiency")
    @classmethod
    def _families(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k in v if k not in OP_FAMILIES and k not in KERNEL_FAMILIES and k != "default"]
        if bad:
            raise ValueError(f"unknown op family {bad[0]!r}; expected default, an op family "
                             f"({', '.join(OP_FAMILIES)}) or a kernel family ({', '.join(KERNEL_FAMILIES)})")
        if "default" not in v:
            raise ValueError("efficiency needs a 'default' entry (used for op families not listed)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Processor:
        if not (self.name == self.kind or self.name.startswith(self.kind)):
            raise ValueError(f"processor name {self.name!r} must equal or start with its kind {self.kind!r}")
        for dtype, ops in self.supported_ops.items():
            if dtype not in self.peak_macs_per_s:
                raise ValueError(f"supported_ops lists dtype {dtype!r} but peak_macs has no entry for it")
            if ops != "all":
                bad = [op for op in ops if op not in OP_FAMILIES]
                if bad:
                    raise ValueError(f"supported_ops.{dtype}: unknown op family {bad[0]!r}; expected "
                                     f"'all' or a list of {', '.join(OP_FAMILIES)}")
        if self.clusters is not None:
            n = sum(c.count for c in self.clusters)
            if n != self.cores:
                raise ValueError(f"clusters hold {n} cores but cores is {self.cores}; list exactly the cores the "
                                 "processor's threads run on (counts summing to cores)")
            fast = [c for c in self.clusters if c.clock_hz > self.max_clock_hz * (1 + 1e-9)]
            if fast:
                raise ValueError(f"cluster {fast[0].core} clock {fast[0].clock_hz / 1e9:.4g} GHz is above the "
                                 f"processor's highest clock level {self.max_clock_hz / 1e9:.4g} GHz")
        return self

    @property
    def max_clock_hz(self) -> float:
        return self.clock_levels_hz[-1]

    def op_efficiency(self, op: str, runtime: str | None = None, kernel: str | None = None) -> float:
        """Fraction of peak reached by op family ``op`` (under ``runtime``; None = the default):
        the entry of its kernel family ``kernel`` (graph/kernel_families.py) when the table has
        one, else of that family's ``KERNEL_FALLBACK`` kernel family, else of ``op``, else
        ``default``."""
        prof = self.runtime_profiles.get(runtime) if runtime is not None else None
        eff = (prof.efficiency if prof is not None and prof.efficiency else self.efficiency)
        for key in (kernel, KERNEL_FALLBACK.get(kernel or "")):
            if key is not None and key in eff:
                return eff[key]
        return eff.get(op, eff.get("default", self.efficiency["default"]))

    def runtime_value(self, field_name: str, runtime: str | None) -> float:
        """``layer_overhead_s``/``memory_bandwidth_bytes_per_s``/``invoke_overhead_s`` under ``runtime``."""
        prof = self.runtime_profiles.get(runtime) if runtime is not None else None
        value = getattr(prof, field_name) if prof is not None else None
        return float(value) if value is not None else float(getattr(self, field_name))

    def predictor(self, runtime: str, dtype: str, threads: int | None = None) -> Predictor | None:
        """The predictor of ``runtime`` and ``dtype`` at ``threads`` threads (default: this
        processor's ``cores``, the threads its runtime uses), None when the file lists none. A
        runtime also matches the one predictor of a more specific runtime of it (``tflite``:
        ``tflite_xnnpack``, the TFLite build's CPU path)."""
        want = self.cores if threads is None else threads
        fits = [p for p in self.predictors if p.dtype == dtype and p.threads == want]
        exact = [p for p in fits if p.runtime == runtime]
        special = [p for p in fits if p.runtime.startswith(f"{runtime}_")]
        return exact[0] if exact else special[0] if len(special) == 1 else None

    def supports(self, op: str, dtype: str) -> bool:
        """Whether ``op`` runs natively here at ``dtype`` (otherwise it falls back to the CPU)."""
        ops = self.supported_ops.get(dtype)
        if ops is None:
            return False
        if op == "custom":  # custom/unknown operators have kernels for the CPU only
            return self.kind in ("cpu", "cloud")
        return ops == "all" or op in ops

    def supports_type(self, op_type: str, dtype: str) -> bool:
        """Whether this processor's delegate runs operator type ``op_type`` at ``dtype`` (its op
        family's support is :meth:`supports`)."""
        return canonical_op_type(op_type) not in self.unsupported_op_types.get(dtype, ())

    def peak_at(self, dtype: str, clock_hz: float | None = None) -> float:
        """Peak MAC/s at ``dtype`` and clock (default: max); 0 if the dtype is unsupported."""
        peak = self.peak_macs_per_s.get(dtype, 0.0)
        f = self.max_clock_hz if clock_hz is None else clock_hz
        return peak * f / self.max_clock_hz

    def power_w(self, clock_hz: float | None = None) -> float:
        """Active power (W) at ``clock_hz`` (default: max clock)."""
        return self.power.power_w(self.max_clock_hz if clock_hz is None else clock_hz, self.max_clock_hz)


def canonical_op_type(op_type: str) -> str:
    """An operator type in TFLite's builtin spelling: ``HARD_SWISH`` stays, ``HardSwish`` (ONNX) and
    ``hard_swish`` become ``HARD_SWISH``."""
    import re

    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op_type).upper()


class HandoffCost(StrictModel):
    """Cost of passing ``n`` bytes between two processors: ``latency + n / bandwidth`` seconds
    and ``n * energy_per_byte`` joules."""

    latency_s: Annotated[Seconds, NonNegative] = Field(alias="latency")
    bandwidth_bytes_per_s: Annotated[ByteRate, Positive] = Field(alias="bandwidth")
    energy_j_per_byte: Annotated[JoulesPerByte, NonNegative] = Field(0.0, alias="energy_per_byte")


class HandoffPair(HandoffCost):
    between: tuple[str, str]


class Handoff(StrictModel):
    """Processor-to-processor hand-off: a default cost and symmetric per-pair overrides."""

    default: HandoffCost
    pairs: list[HandoffPair] = Field(default_factory=list)
    source: str


class Device(StrictModel):
    """A phone, board, workstation or server: its processors, hand-off costs, idle power,
    memory and the name of its thermal spec (``search_spaces/thermal/<name>.yaml``, loaded by
    :func:`optimizer.hardware.thermal_spec.thermal_spec_of`)."""

    name: str
    description: str = ""
    memory_bytes: Annotated[Bytes, Positive] = Field(alias="memory")
    idle_power_w: Annotated[Watts, NonNegative] = Field(alias="idle_power")
    thermal: str | None = None
    #: the inference runtime the efficiencies describe (e.g. tflite_xnnpack, tensorrt); other
    #: runtimes scale them by each processor's ``runtimes`` entry
    runtime: str = "tflite"
    #: CPU cores that inference and pre/post-processing threads share (pipeline contention);
    #: None = the pipeline default (8)
    cpu_cores: Annotated[int, Positive] | None = None
    processors: list[Processor] = Field(min_length=1)
    handoff: Handoff
    source: str

    @model_validator(mode="after")
    def _names(self, info: ValidationInfo) -> Device:
        folder = str(Path(str((info.context or {}).get("file", ""))).parent) if info.context else ""
        for p in self.processors:
            p._default_runtime = self.runtime
            for pred in p.predictors:
                pred._folder = folder
            keys = [(pred.runtime, pred.dtype, pred.threads) for pred in p.predictors]
            reject_duplicates([f"{r}/{d}/{t} threads" for r, d, t in keys], f"predictor of processor {p.name!r}")
        names = [p.name for p in self.processors]
        reject_duplicates(names, "processor name")
        for i, pair in enumerate(self.handoff.pairs):
            for n in pair.between:
                if n not in names:
                    raise ValueError(f"handoff.pairs[{i}]: unknown processor {n!r}; valid: {', '.join(names)}")
        return self

    @property
    def processor_names(self) -> tuple[str, ...]:
        """Processor names in file order (the order of a cost table's columns)."""
        return tuple(p.name for p in self.processors)

    @property
    def runtimes(self) -> tuple[str, ...]:
        """The default runtime, then every runtime a processor has an efficiency profile or a
        predictor for."""
        names = [self.runtime]
        for p in self.processors:
            names += [r for r in p.runtime_profiles if r not in names]
            names += [q.runtime for q in p.predictors if q.runtime not in names]
        return tuple(names)

    @property
    def has_predictors(self) -> bool:
        """Whether any processor names a probe table (the ``predicted`` backend is then the default)."""
        return any(p.predictors for p in self.processors)

    def check_runtime(self, runtime: str | None) -> str | None:
        """``runtime`` if this device knows it, None for its default; raises UnknownNameError."""
        if runtime is None or runtime == self.runtime:
            return None
        if runtime not in self.runtimes:
            raise UnknownNameError("runtime", runtime, self.runtimes, where=f"device {self.name!r}")
        return runtime

    def processor(self, name: str) -> Processor:
        """The processor called ``name`` (UnknownNameError lists the valid ones)."""
        for p in self.processors:
            if p.name == name:
                return p
        raise UnknownNameError("processor", name, self.processor_names, where=f"device {self.name!r}")

    def processor_index(self, name: str) -> int:
        return self.processor_names.index(self.processor(name).name)

    @property
    def fallback_index(self) -> int:
        """Index of the processor unsupported ops fall back to: the first ``cpu``, else the first."""
        for i, p in enumerate(self.processors):
            if p.kind == "cpu":
                return i
        return 0

    def handoff_matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(latency_s, s_per_byte, j_per_byte) as [P, P] arrays; zero on the diagonal."""
        n = len(self.processors)
        d = self.handoff.default
        lat = np.full((n, n), d.latency_s)
        spb = np.full((n, n), 1.0 / d.bandwidth_bytes_per_s)
        jpb = np.full((n, n), d.energy_j_per_byte)
        names = self.processor_names
        for pair in self.handoff.pairs:
            i, j = names.index(pair.between[0]), names.index(pair.between[1])
            for a, b in ((i, j), (j, i)):
                lat[a, b] = pair.latency_s
                spb[a, b] = 1.0 / pair.bandwidth_bytes_per_s
                jpb[a, b] = pair.energy_j_per_byte
        for m in (lat, spb, jpb):
            np.fill_diagonal(m, 0.0)
        return lat, spb, jpb


class PhoneRadio(StrictModel):
    """One phone's measured radio powers on one technology: the controller's TX, RX and awake-idle
    current at its operating voltage, as the phone's Android ``power_profile.xml`` gives them
    (``wifi.controller.tx|rx|idle`` × ``wifi.controller.voltage``). They replace the generic
    Huang et al. model (and its assumed cap) for that phone."""

    tx_power_w: Annotated[Watts, Positive] = Field(alias="tx_power")
    rx_power_w: Annotated[Watts, Positive] = Field(alias="rx_power")
    idle_power_w: Annotated[Watts, NonNegative] = Field(alias="idle_power")
    source: str


class RadioState(NamedTuple):
    """The radio powers one phone draws on a link: sending, receiving, and in the tail (the
    high-power state the radio holds for ``tail_s`` after each transfer before it sleeps)."""

    up_w: float
    down_w: float
    tail_w: float
    tail_s: float
    source: str

    def tail_j(self, gap_s: float | np.ndarray) -> float | np.ndarray:
        """Tail energy after a transfer followed by ``gap_s`` seconds of silence: the radio
        holds ``tail_w`` for ``min(gap, tail_s)`` (Huang et al., MobiSys'12, tail of Table 3)."""
        return self.tail_w * np.minimum(gap_s, self.tail_s)


class RadioPower(StrictModel):
    """Huang et al. (MobiSys'12) radio power: while transferring, ``P = alpha * tau + beta`` with
    ``tau`` the achieved throughput (alpha in W per bit/s, beta in W); after each transfer the
    radio stays in a high-power tail state (``tail_power`` for ``tail_time``, Huang et al.
    Table 3) before it sleeps, so requests closer together than ``tail_time`` keep it awake.
    ``max_power_w`` caps the transfer power: the linear model was fitted at throughputs of a few
    to tens of Mbps and would give tens of watts at hundreds of Mbps. ``phones`` holds measured
    per-phone radio powers (:class:`PhoneRadio`), which replace the generic model and its cap
    for those phones (:meth:`Link.radio_state`)."""

    alpha_u_w_per_bps: Annotated[WattsPerBitrate, NonNegative] = Field(alias="alpha_u")
    alpha_d_w_per_bps: Annotated[WattsPerBitrate, NonNegative] = Field(alias="alpha_d")
    beta_w: Annotated[Watts, NonNegative] = Field(alias="beta")
    max_power_w: Annotated[Watts, Positive] | None = Field(default=None, alias="max_power")
    tail_power_w: Annotated[Watts, NonNegative] = Field(0.0, alias="tail_power")
    tail_time_s: Annotated[Seconds, NonNegative] = Field(0.0, alias="tail_time")
    phones: dict[str, PhoneRadio] = Field(default_factory=dict)
    source: str

    @field_validator("phones")
    @classmethod
    def _known_phones(cls, v: dict[str, PhoneRadio]) -> dict[str, PhoneRadio]:
        if v:
            from .. import shipped

            names = shipped.names("devices")
            bad = sorted(set(v) - set(names))
            if bad:
                raise ValueError(f"unknown device {bad[0]!r} in radio.phones; valid: {', '.join(names)}")
        return v

    def power_w(self, alpha_w_per_bps: float, tau_bps: float) -> float:
        """``alpha * tau + beta``, capped at ``max_power_w`` when set."""
        p = alpha_w_per_bps * tau_bps + self.beta_w
        return p if self.max_power_w is None else min(p, self.max_power_w)


class Link(StrictModel):
    """A phone-to-server network link: bandwidths, round-trip time and radio power model."""

    name: str
    description: str = ""
    technology: Literal["wifi", "lte", "5g", "ethernet"]
    uplink_bps: Annotated[Bitrate, Positive] = Field(alias="uplink")
    downlink_bps: Annotated[Bitrate, Positive] = Field(alias="downlink")
    rtt_s: Annotated[Seconds, NonNegative] = Field(alias="rtt")
    radio: RadioPower
    source: str

    def upload_s(self, nbytes: float | np.ndarray) -> float | np.ndarray:
        """Seconds to send ``nbytes`` up (SmartSplit ``T_upload = I / B``; RTT not included)."""
        return nbytes * 8.0 / self.uplink_bps

    def download_s(self, nbytes: float | np.ndarray) -> float | np.ndarray:
        """Seconds to receive ``nbytes`` (``T_download = d / B``; RTT not included)."""
        return nbytes * 8.0 / self.downlink_bps

    @property
    def upload_power_w(self) -> float:
        """Radio power while sending at the link's throughput: ``alpha_u * tau_u + beta`` (capped)."""
        return self.radio.power_w(self.radio.alpha_u_w_per_bps, self.uplink_bps)

    @property
    def download_power_w(self) -> float:
        """Radio power while receiving: ``alpha_d * tau_d + beta``."""
        return self.radio.power_w(self.radio.alpha_d_w_per_bps, self.downlink_bps)

    def radio_state(self, device: str | None = None) -> RadioState:
        """The radio powers ``device`` draws on this link: its measured powers where the link
        lists the phone (``radio.phones``), else the generic model (capped transfer power, the
        link's tail). The tail state of a listed phone is its awake-idle power."""
        r = self.radio
        ph = r.phones.get(device) if device else None
        if ph is not None:
            return RadioState(ph.tx_power_w, ph.rx_power_w, ph.idle_power_w, r.tail_time_s,
                              f"{device}: {ph.source}; tail time: {r.source}")
        return RadioState(self.upload_power_w, self.download_power_w, r.tail_power_w, r.tail_time_s, r.source)

    def upload_j(self, nbytes: float | np.ndarray) -> float | np.ndarray:
        """Phone energy to send ``nbytes``: ``(alpha_u tau_u + beta) I / B`` (SmartSplit, Huang et al.)."""
        return self.upload_power_w * self.upload_s(nbytes)

    def download_j(self, nbytes: float | np.ndarray) -> float | np.ndarray:
        """Phone energy to receive ``nbytes``: ``(alpha_d tau_d + beta) d / B``."""
        return self.download_power_w * self.download_s(nbytes)

    def round_trip_s(self, up_bytes: float, down_bytes: float = 0.0) -> float:
        """RTT plus upload and download time of one request."""
        return self.rtt_s + float(self.upload_s(up_bytes)) + float(self.download_s(down_bytes))
