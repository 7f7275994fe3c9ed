"""Typed requests of the two searches: what the CLI, batch tasks and notebooks ask the workflow for.

A request is a pydantic model with ``extra="forbid"`` (an unknown key is an error, never
ignored; docs/ARCHITECTURE.md, "Conventions"). Field validators turn the
textual forms the command line and job files use ("2 GB", "5 Mbps", "1,1,1", "sustained-fps")
into SI values and canonical names. Errors name the field as the caller knows it: the CLI
passes its option names as ``labels`` (``{"memory_limit": "--memory-limit"}``) through
pydantic's validation context, so ``dnnplan map --memory-limit lots`` and a job file's
``memory_limit: lots`` get the same one-line message, each in its own words.

:func:`parse_request` is the one entry point; it raises :class:`~optimizer.errors.ConfigError`
(exit status 2 in the CLI) with a single line naming the field, the value and what was expected.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from ..errors import ConfigError, UnknownNameError
from ..yamlio import format_loc
from .objectives import pipeline_objective_names, split_objective_names, split_weights

Dtype = Literal["int8", "fp16", "fp32"]
R = TypeVar("R", bound=BaseModel)


def field_label(info: ValidationInfo, field: str) -> str:
    """How the caller names ``field`` (a CLI option, or the field name itself): every request's
    validators name a field this way, so a message speaks the caller's words."""
    labels = (info.context or {}).get("labels") or {}
    return str(labels.get(field, field))


def _quantity(label: str, value: Any, dimension: str, *, positive: bool) -> float | None:
    """A size or rate given as a number (SI) or text with units ("2 GB", "5 Mbps")."""
    from ..hardware.units import parse_quantity

    if value is None:
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) else parse_quantity(str(value), dimension)
    except ValueError as exc:
        raise ConfigError(f"{label} {value!r}: {exc}") from None
    if positive and not number > 0:
        raise ConfigError(f"{label} {value!r}: expected a value > 0")
    if not number >= 0:
        raise ConfigError(f"{label} {value!r}: expected a value >= 0")
    return number


def _names(value: Any) -> Any:
    """``"a,b"`` -> ``["a", "b"]`` (lists pass through)."""
    return [s.strip() for s in value.split(",") if s.strip()] if isinstance(value, str) else value



def _registered_solver(kind: str, name: str) -> str:
    """``name`` if a solver of that name is registered for ``kind`` problems (else UnknownNameError)."""
    from ..search import solver_names

    if name not in solver_names(kind):
        raise UnknownNameError("solver", name, solver_names(kind))
    return name


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="Zoo name or model file")
    device: str = Field(min_length=1, description="Device name (search_spaces/devices) or YAML path")
    seed: int | None = 0
    processors: tuple[str, ...] | None = None
    settings: dict[str, Any] = Field(default_factory=dict, description="Solver settings (checked by the solver)")
    input_shape: dict[str, tuple[int, ...]] | None = Field(
        default=None, description="Input name -> full shape for dynamic dims: 'x:1,3,640,640', a list of those, "
                                  "or a mapping (optimizer.graph.input_shapes)")

    _split_processors = field_validator("processors", mode="before")(_names)

    @field_validator("input_shape", mode="before")
    @classmethod
    def _input_shape(cls, v: Any, info: ValidationInfo) -> Any:
        from ..graph.input_shapes import parse_input_shapes

        return parse_input_shapes(v, field_label(info, "input_shape")) or None

    #: quantity fields: name -> (dimension, must be > 0); '2 GB', '5 Mbps' or a number in SI units
    QUANTITIES: ClassVar[dict[str, tuple[str, bool]]] = {}

    @field_validator("*", mode="before")
    @classmethod
    def _quantities(cls, v: Any, info: ValidationInfo) -> Any:
        spec = cls.QUANTITIES.get(str(info.field_name))
        if spec is None:
            return v
        return _quantity(field_label(info, str(info.field_name)), v, spec[0], positive=spec[1])


class PipelineRequest(_Request):
    """Map a network onto a phone's processors as a pipeline (``dnnplan map``, batch ``map`` tasks)."""

    QUANTITIES: ClassVar[dict[str, tuple[str, bool]]] = {"memory_limit": ("bytes", True)}

    dtype: Dtype | None = Field(default=None, description="Default int8; fp32 with measure='host'")
    granularity: Literal["op", "kernel", "block"] = "kernel"
    solver: str = "ga"
    objectives: tuple[str, ...] = ("throughput",)
    stages: int | None = Field(default=None, ge=1, description="Most stages (default: min(3, processors allowed))")
    memory_limit: float | None = Field(default=None, description="Per-processor memory cap, bytes or '2 GB'")
    cpu_cores: int | None = Field(default=None, ge=1)
    pre_s: float | None = Field(default=None, ge=0, description="CPU pre-processing per frame, s "
                                "(default: a detector's modeled resize/normalise, else 0)")
    post_s: float | None = Field(default=None, ge=0, description="CPU post-processing per frame, s "
                                 "(default: a detector's modeled decode/NMS, else 0)")
    variant: dict[str, Any] = Field(default_factory=dict, description="Zoo builder arguments")
    measure: str | None = Field(default=None, description="'host': GA fitness measured on this host")
    measure_cmd: str | None = Field(default=None, description="External measurement command (PROTOCOL.md)")
    measure_repeats: int | None = Field(default=None, ge=1)
    measure_frames: int = Field(default=100, ge=1)
    measure_cache: str | None = Field(default=None, description="JSON-lines cache of measurements")
    measure_cache_mb: float = 2048.0

    @field_validator("objectives", mode="before")
    @classmethod
    def _objectives(cls, v: Any) -> Any:
        names = _names(v)
        return pipeline_objective_names(names) if isinstance(names, list | tuple) else names

    @field_validator("solver")
    @classmethod
    def _solver(cls, v: str) -> str:
        return _registered_solver("pipeline", v)

    @field_validator("measure")
    @classmethod
    def _measure(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and v != "host":
            raise ConfigError(f"{field_label(info, 'measure')} {v!r}: expected 'host' (or use "
                              f"{field_label(info, 'measure_cmd')})")
        return v

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> PipelineRequest:
        solver = field_label(info, "solver")
        if self.settings.get("resume") and self.solver != "ga":
            raise ConfigError(f"{field_label(info, 'resume')} applies to {solver} ga, not {self.solver!r}")
        if self.measure_cmd is not None and self.solver != "ga":
            raise ConfigError(f"{field_label(info, 'measure_cmd')} applies to {solver} ga, not {self.solver!r}")
        if self.measure is not None:
            if self.measure_cmd is not None:
                raise ConfigError(f"{field_label(info, 'measure')} host and {field_label(info, 'measure_cmd')} both given; "
                                  "choose one measurement source")
            if self.solver != "ga":
                raise ConfigError(f"{field_label(info, 'measure')} host applies to {solver} ga, not {self.solver!r}")
        return self

    @property
    def compute_dtype(self) -> str:
        """``dtype``, defaulting to fp32 when measuring on the host (its stages run float) else int8."""
        return self.dtype or ("fp32" if self.measure == "host" else "int8")

    @property
    def thermal_objectives(self) -> tuple[str, ...]:
        """The thermal objectives among ``objectives`` (canonical names)."""
        from ..search.thermal_objectives import THERMAL_OBJECTIVES

        return tuple(o for o in self.objectives if o in THERMAL_OBJECTIVES)


class SplitRequest(_Request):
    """Split a network between phone and server (``dnnplan split``, batch ``split`` tasks)."""

    QUANTITIES: ClassVar[dict[str, tuple[str, bool]]] = {
        "memory_limit": ("bytes", False), "memory_budget": ("bytes", True), "bandwidth_bps": ("bitrate", True)}

    network: str = Field(min_length=1, description="Link (search_spaces/networks)")
    server: str = "smartsplit_i5"
    solver: str = "nsga2"
    granularity: Literal["op", "kernel", "block"] = "block"
    dtype: Dtype = "int8"
    wire_dtypes: tuple[str, ...] = ("int8", "fp16", "fp32")
    cost_model: str = "table"
    runtime: str | None = Field(default=None, description="Inference runtime profile of the device")
    memory_limit: float | None = Field(default=None, description="Head memory budget, bytes or '1 GB'")
    memory_budget: float | None = Field(default=None, description="Head memory as a constraint, not an objective: "
                                                                  "limit = budget and memory's TOPSIS weight 0")
    bandwidth_bps: float | None = Field(default=None, description="Link bandwidth override, bit/s or '5 Mbps'")
    interior_only: bool = Field(default=False, description="Search the interior split boundaries 1..L-1 only "
                                                           "(SmartSplit's setting); by default 0 (all on the "
                                                           "server) and L (all on the phone) are candidates")
    include_extremes: bool = Field(default=False, description="Accepted for compatibility, no effect: the "
                                                              "extremes are searched unless interior_only")
    objectives: tuple[str, ...] = ("latency", "energy", "memory")
    weights: tuple[float, ...] | None = None
    topsis: str = "paper"
    bandwidth_trace: str | None = Field(default=None, description="Uplink trace (Mahimahi or t_s,mbps CSV)")
    risk: str | None = Field(default=None, description="Risk objective over the trace: mean, pNN, cvarNN, "
                                                       "regret (default cvar95 with a trace)")
    trace_step_s: float = Field(default=0.1, gt=0, description="Spacing of the trace's upload start samples")
    max_mean_increase: float | None = Field(
        default=None, description="Expected latency over the trace at most this fraction above the least "
                                  "(fraction or '5%'; a constraint next to the risk objective)")
    accuracy_data: str | None = Field(default=None, description="Labelled .npz (x, y[, calib]) for the accuracy "
                                                                "of each partition (model: a .keras file)")
    min_accuracy: float | None = Field(default=None, description="Top-1 accuracy floor (fraction or '95%')")
    result: Literal["auto", "raw", "topk"] = Field(
        default="auto", description="What the server sends back: the network's raw outputs, or for an SSD "
                                    "head its 100 best anchors (topk); auto: topk for SSD heads")

    _split_wire = field_validator("wire_dtypes", mode="before")(_names)

    @field_validator("min_accuracy", "max_mean_increase", mode="before")
    @classmethod
    def _fraction(cls, v: Any, info: ValidationInfo) -> float | None:
        if v is None:
            return None
        text = str(v).strip()
        try:
            value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            value = float("nan")
        if not 0 <= value <= 1:
            example = "95%" if info.field_name == "min_accuracy" else "5%"
            raise ConfigError(f"{field_label(info, str(info.field_name))} {v!r}: expected a fraction in 0..1 or a "
                              f"percentage such as {example}")
        return value

    @field_validator("objectives", mode="before")
    @classmethod
    def _objectives(cls, v: Any) -> Any:
        names = _names(v)
        return split_objective_names(names) if isinstance(names, list | tuple) else names

    @field_validator("weights", mode="before")
    @classmethod
    def _weights(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, str):
            try:
                return [float(x) for x in v.split(",")]
            except ValueError:
                raise ConfigError(f"{field_label(info, 'weights')} {v!r}: expected comma-separated numbers, "
                                  "e.g. 1,1,1") from None
        return v

    @field_validator("solver")
    @classmethod
    def _solver(cls, v: str) -> str:
        return _registered_solver("split", v)

    @field_validator("cost_model", "topsis")
    @classmethod
    def _choice(cls, v: str, info: ValidationInfo) -> str:
        from ..search.decision import VARIANTS
        from ..search.split import COST_MODELS

        choices = COST_MODELS if info.field_name == "cost_model" else VARIANTS
        if v not in choices:
            raise ConfigError(f"{field_label(info, str(info.field_name))} {v!r}: expected one of {', '.join(choices)}")
        return v

    @field_validator("risk")
    @classmethod
    def _risk(cls, v: str | None, info: ValidationInfo) -> str | None:
        from ..search.split_risk import parse_risk

        if v is None:
            return None
        try:
            parse_risk(v)
        except ConfigError as exc:
            raise ConfigError(f"{field_label(info, 'risk')} {v!r}: {str(exc).split(': ', 1)[1]}") from None
        return v.strip().lower()

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> SplitRequest:
        if self.memory_budget is not None and self.memory_limit is not None:
            raise ConfigError(f"{field_label(info, 'memory_budget')} and {field_label(info, 'memory_limit')} both given; "
                              "choose one (a budget also takes memory out of the TOPSIS weights)")
        if self.min_accuracy is not None and self.accuracy_data is None:
            raise ConfigError(f"{field_label(info, 'min_accuracy')} needs {field_label(info, 'accuracy_data')} "
                              "(a labelled .npz with arrays x and y)")
        if self.accuracy_data is not None and not self.model.endswith(".keras"):
            raise ConfigError(f"{field_label(info, 'accuracy_data')}: model {self.model!r} is not a .keras file; "
                              "accuracy per partition runs the Keras model's parts")
        if self.risk is not None and self.bandwidth_trace is None:
            raise ConfigError(f"{field_label(info, 'risk')} {self.risk}: needs {field_label(info, 'bandwidth_trace')}")
        if self.max_mean_increase is not None and self.bandwidth_trace is None:
            raise ConfigError(f"{field_label(info, 'max_mean_increase')} {self.max_mean_increase:g}: needs "
                              f"{field_label(info, 'bandwidth_trace')} (the mean is over the trace)")
        if self.weights is not None:
            split_weights(self.weights, self.all_objectives, field_label(info, "weights"))
        if self.interior_only and self.include_extremes:
            raise ConfigError(f"{field_label(info, 'interior_only')} and {field_label(info, 'include_extremes')} contradict "
                              f"each other; the extremes are searched by default, so drop "
                              f"{field_label(info, 'include_extremes')}")
        return self

    @property
    def head_memory_limit(self) -> float | None:
        """The head-memory constraint: the budget, else the limit (None = the device's memory)."""
        return self.memory_budget if self.memory_budget is not None else self.memory_limit

    @property
    def risk_objective(self) -> str | None:
        """The risk objective's name (``latency_cvar95_s``...) when a bandwidth trace is given."""
        from ..search.split_risk import risk_objective_name

        return None if self.bandwidth_trace is None else risk_objective_name(self.risk or "cvar95")

    @property
    def all_objectives(self) -> tuple[str, ...]:
        """Objectives in TOPSIS weight order: latency, energy, memory, thermal ones, then the risk one."""
        return self.objectives + ((self.risk_objective,) if self.risk_objective else ())

    @property
    def thermal_objectives(self) -> tuple[str, ...]:
        """The thermal objectives appended to latency, energy and memory (canonical names)."""
        return self.objectives[3:]


def parse_request(cls: type[R], data: dict[str, Any], *, labels: dict[str, str] | None = None) -> R:
    """Validate ``data`` as a ``cls`` request.

    Parameters
    ----------
    cls
        A request class: :class:`PipelineRequest`, :class:`SplitRequest`, or one of
        :mod:`optimizer.workflow.thermal_requests`.
    data
        Field values (textual forms accepted, see the module docstring).
    labels
        How the caller names fields in errors (the CLI's option names); default: field names.

    Raises
    ------
    ConfigError
        One line naming the field (or unknown key), the value and what was expected.
    """
    try:
        return cls.model_validate(data, context={"labels": labels or {}})
    except ValidationError as exc:
        raise ConfigError(describe_request_error(cls, exc, labels or {})) from None


def describe_request_error(cls: type[BaseModel], exc: ValidationError, labels: dict[str, str]) -> str:
    """One line for the first error of ``exc``: unknown key with the valid ones, or field, value
    and pydantic's statement of what was expected."""
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    field = str(loc[0]) if loc else ""
    if err["type"] == "extra_forbidden":
        return (f"{cls.__name__}: unknown field {field!r}; valid: "
                f"{', '.join(sorted(cls.model_fields))}")
    where = format_loc((labels.get(field, field), *loc[1:]))
    got = err.get("input")
    shown = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"{cls.__name__}: {where}: {err['msg'].removeprefix('Value error, ')}{shown}"
