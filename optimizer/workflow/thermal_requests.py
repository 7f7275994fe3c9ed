"""Typed requests of the thermal commands: fitting and scoring thermal models, and the policies.

Like :class:`~optimizer.workflow.requests.PipelineRequest` and
:class:`~optimizer.workflow.requests.SplitRequest`, each request is a pydantic model that rejects
unknown keys and checks every value before any work starts; errors name the field as the caller
knows it (the CLI passes its option names as ``labels`` to
:func:`~optimizer.workflow.requests.parse_request`). :mod:`optimizer.workflow.thermal` runs them.

* :class:`ThermalFitRequest`, :class:`ThermalEvalRequest`: ``dnnplan thermal fit|eval``;
* :class:`ScheduleRequest`: SPLASH scheduling (``dnnplan schedule``);
* :class:`TadfRequest`: TADF clocks and HSWD layer splits (``dnnplan tadf``);
* :class:`ShiftRequest`: Play It Cool model shifting (``dnnplan shift``).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..errors import ConfigError, check_between
from .requests import field_label

#: the ambient temperatures the thermal models are meant for (°C)
AMBIENT_RANGE_C = (-50.0, 80.0)
#: the model families ``thermal fit`` fits (:data:`optimizer.thermal.fit.MODEL_FAMILIES`)
ModelFamily = Literal["linear", "rc"]


def _ambient(value: float | None, info: ValidationInfo) -> float | None:
    check_between(field_label(info, str(info.field_name)), value, *AMBIENT_RANGE_C, "a temperature in °C")
    return value


def _positive_duration(value: float, info: ValidationInfo) -> float:
    if not value > 0:
        raise ConfigError(f"{field_label(info, str(info.field_name))} {value!r}: expected simulated seconds > 0")
    return value


class _ThermalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ThermalFitRequest(_ThermalRequest):
    """Fit a thermal model to a logged trace (``dnnplan thermal fit``)."""

    trace: str = Field(min_length=1, description="CSV trace (.csv, .csv.gz) or a shipped one's name")
    time: str = Field(min_length=1, description="Time column (s)")
    temps: str = Field(min_length=1, description="Temperature columns, comma-separated, globs allowed")
    inputs: str = Field(min_length=1, description="Input columns (power, clocks...), globs allowed")
    model: str = "linear"
    window: int | None = Field(default=None, description="linear: fit on the last N samples only")
    ridge: float = Field(default=0.0, description="linear: ridge penalty (0 = SVD least squares)")
    hidden: int | str = Field(default="auto", description="rc: hidden nodes, a whole number or 'auto'")
    fit_step_s: float | None = Field(default=None, description="Fit step (s); default chosen on a held-out segment")
    shooting_s: float | None = Field(default=None, description="rc: multiple-shooting window (s)")
    train_from_s: float | None = None
    train_to_s: float | None = None
    gap_factor: float = Field(default=5.0, description="Split segments at gaps > this x median step")
    seed: int = 0

    @field_validator("model")
    @classmethod
    def _model(cls, v: str, info: ValidationInfo) -> str:
        if v not in ("linear", "rc"):
            raise ConfigError(f"{field_label(info, 'model')} must be linear or rc, got {v!r}")
        return v

    @field_validator("hidden", mode="before")
    @classmethod
    def _hidden(cls, v: Any, info: ValidationInfo) -> int | str:
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
        if v != "auto" and not (isinstance(v, str) and v.isdigit()):
            raise ConfigError(f"{field_label(info, 'hidden')} must be a whole number >= 0 or auto, got {v!r}")
        return v if v == "auto" else int(v)

    @field_validator("ridge")
    @classmethod
    def _ridge(cls, v: float, info: ValidationInfo) -> float:
        if not v >= 0:
            raise ConfigError(f"{field_label(info, 'ridge')} {v!r}: expected a penalty >= 0 (0 = plain least squares)")
        return v

    @property
    def windowed(self) -> bool:
        """True when the fit is limited to ``train_from_s <= t < train_to_s``."""
        return self.train_from_s is not None or self.train_to_s is not None


class ThermalEvalRequest(_ThermalRequest):
    """Score a thermal model on a trace at horizons (``dnnplan thermal eval``)."""

    model_path: str = Field(min_length=1, description="Model JSON written by 'thermal fit'")
    trace: str = Field(min_length=1, description="CSV trace with the model's columns, or a shipped one's name")
    horizons: tuple[str, ...] = Field(default=("1", "10", "60"), description="Steps, or durations with s "
                                                                            "('1,10,60s')")
    from_s: float | None = None
    to_s: float | None = None
    time: str | None = Field(default=None, description="Time column (default: the model's training one)")
    gap_factor: float = 5.0
    train: str | None = Field(default=None, description="Training trace of the ridge reference (default: the "
                                                        "one recorded in the model)")
    ridge_reference: bool = True

    @field_validator("horizons", mode="before")
    @classmethod
    def _horizons(cls, v: Any, info: ValidationInfo) -> Any:
        label = field_label(info, "horizons")
        items = [h.strip() for h in v.split(",")] if isinstance(v, str) else [str(h).strip() for h in v]
        items = [h for h in items if h]
        for item in items:
            try:
                if not math.isfinite(float(item[:-1]) if item.endswith("s") else int(item)):
                    raise ValueError(item)
            except (ValueError, OverflowError):
                raise ConfigError(f"{label}: {item!r} is not a step count (e.g. 10) or a duration (e.g. 60s)") from None
        if not items:
            raise ConfigError(f"{label} is empty")
        return items

    @property
    def windowed(self) -> bool:
        """True when the evaluation is limited to ``from_s <= t < to_s``."""
        return self.from_s is not None or self.to_s is not None


class ScheduleRequest(_ThermalRequest):
    """SPLASH scheduling of a multi-DNN workload over a phone's processors and the cloud."""

    workload: str = Field(min_length=1, description="Workload name (search_spaces/workloads) or YAML path")
    device: str = Field(default="pixel4", min_length=1)
    network: str | None = Field(default="wifi_249", description="Link to the cloud worker; None or 'none': no cloud")
    policy: str = "minheat"
    duration_s: float = 600.0
    fps: float | None = Field(default=None, description="Camera frame rate (default: the workload's)")
    max_fps: bool = Field(default=False, description="Find the highest FPS the policy sustains")
    eta: float = Field(default=0.1, description="SPLASH's eta (minheat penalty / ppt latency weight)")
    ambient_c: float | None = None
    seed: int = 0

    _ambient = field_validator("ambient_c")(_ambient)
    _duration = field_validator("duration_s")(_positive_duration)

    @field_validator("network")
    @classmethod
    def _network(cls, v: str | None) -> str | None:
        return None if v is None or v.lower() == "none" else v

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: str) -> str:
        from ..errors import UnknownNameError
        from ..thermal.policies.splash_policies import POLICIES

        if v not in POLICIES:
            raise UnknownNameError("policy", v, POLICIES)
        return v

    @field_validator("eta")
    @classmethod
    def _eta(cls, v: float, info: ValidationInfo) -> float:
        check_between(field_label(info, "eta"), v, 0.0, 1.0, "SPLASH's eta")
        return v

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ScheduleRequest:
        from ..thermal.policies.splash_policies import POLICY_CLASSES

        if self.max_fps and self.fps is not None:
            raise ConfigError(f"give either {field_label(info, 'fps')} N or {field_label(info, 'max_fps')}, not both")
        if self.network is None and POLICY_CLASSES[self.policy].requires_cloud:
            raise ConfigError(f"{field_label(info, 'policy')} {self.policy} offloads to the cloud; give "
                              f"{field_label(info, 'network')} LINK")
        if self.network is not None:
            from ..hardware import load_link

            load_link(self.network)
        return self


class TadfRequest(_ThermalRequest):
    """TADF clock choice under ``tmax_c`` and HSWD per-layer CPU/GPU split (``dnnplan tadf``)."""

    model: str = Field(min_length=1, description="Zoo name or model file")
    device: str = Field(default="jetson_nano", min_length=1)
    ambient_c: float = 40.0
    tmax_c: float = Field(default=85.0, description="Steady-state limit T_max (°C)")
    theta_c: float = Field(default=0.5, description="Bisection tolerance θ (°C)")
    dtype: str = "fp32"

    @field_validator("theta_c")
    @classmethod
    def _theta(cls, v: float, info: ValidationInfo) -> float:
        check_between(field_label(info, "theta_c"), v, 1e-3, 50.0, "a tolerance in °C")
        return v


class ShiftRequest(_ThermalRequest):
    """Play It Cool dynamic model shifting vs always-large and always-small (``dnnplan shift``)."""

    model: str = "slimmable_resnet50"
    device: str = Field(default="pixel4", min_length=1)
    duration_s: float = 3600.0
    fps: float | None = Field(default=None, description="Request rate (default: large variant 80 % busy)")
    reload_s: float = Field(default=1.0, description="Model reload time per switch (s); 0 = shared weights")
    ambient_c: float | None = None
    dtype: str = "fp32"

    _duration = field_validator("duration_s")(_positive_duration)
    _ambient = field_validator("ambient_c")(_ambient)
