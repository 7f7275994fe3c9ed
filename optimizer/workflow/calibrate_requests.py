"""Typed requests of ``dnnplan calibrate``: which options go with which mode, and their values.

Like :class:`~optimizer.workflow.requests.PipelineRequest`, each request is a frozen pydantic
model checked before any work starts, and its errors name a field as the caller knows it (the CLI
passes its option names as ``labels``). :func:`parse_calibrate_request` picks the mode from the
options given and refuses options of another mode; :mod:`optimizer.workflow.calibrate` runs the
requests.

* :class:`ProfileFitRequest`: a device's processor fitted to per-operator profiles
  (``--from-profile``);
* :class:`ProbeRequest`: single-kernel probes measured and fitted, networks validated
  (``--probes``, ``--validate``);
* :class:`FidelityReportRequest`: the cost model against published figures (``--report``); the
  report itself is in the report layer (:mod:`optimizer.report.fidelity`), above this one, so
  the CLI runs it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from ..errors import ConfigError
from .requests import field_label, parse_request

#: the keys :func:`parse_calibrate_request` reads for each mode (request field names)
PROFILE_FIELDS = ("device", "profiles", "models", "processor", "dtype", "out", "input_shape")
PROBE_FIELDS = ("device", "processor", "probes", "runner", "threads", "measure_cmd", "runtime", "probe_format",
                "delegate", "serial", "dtype", "families", "near", "networks", "seed", "table", "out")
REPORT_FIELDS = ("report", "published", "pipeline", "strict", "device", "models", "processor", "out", "input_shape")


def _names(value: Any) -> Any:
    """``"a,b"`` (or None) -> ``("a", "b")``; sequences pass through."""
    if value is None:
        return ()
    return tuple(t.strip() for t in value.split(",") if t.strip()) if isinstance(value, str) else value


def _yaml_out(out: str | None, info: ValidationInfo, what: str) -> None:
    if out is not None and not out.endswith((".yaml", ".yml")):
        raise ConfigError(f"{field_label(info, 'out')} {out!r}: {what}")


class _CalibrateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProfileFitRequest(_CalibrateRequest):
    """Fit ``processor`` of ``device`` to per-operator profiles of ``models`` (``--from-profile``):
    the analytic model's parameters, or the corrections of the processor's probe predictor."""

    device: str | None = None
    profiles: tuple[str, ...]
    models: tuple[str, ...] = ()
    processor: str | None = None
    dtype: str = "fp32"
    out: str | None = None
    input_shape: dict[str, tuple[int, ...]] | None = None

    @field_validator("input_shape", mode="before")
    @classmethod
    def _input_shape(cls, v: Any, info: ValidationInfo) -> Any:
        from ..graph.input_shapes import parse_input_shapes

        return parse_input_shapes(v, field_label(info, "input_shape")) or None

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ProfileFitRequest:
        from ..hardware.schema import DTYPES

        def label(field: str) -> str:
            return field_label(info, field)

        if self.device is None:
            raise ConfigError(f"{label('profiles')} needs {label('device')} D (the device whose processor the "
                              "profiles are fitted to)")
        if not self.models:
            raise ConfigError(f"{label('profiles')} needs {label('models')} M (the zoo name or model file each "
                              "profile was taken of)")
        if len(self.models) not in (1, len(self.profiles)):
            raise ConfigError(f"give one {label('models')} for all profiles or one per {label('profiles')} (got "
                              f"{len(self.models)} models for {len(self.profiles)} profiles)")
        if self.dtype not in DTYPES:
            raise ConfigError(f"{label('dtype')} {self.dtype!r} is not valid; expected one of {', '.join(DTYPES)}")
        _yaml_out(self.out, info, "the fitted device is a .yaml file")
        return self

    @property
    def model_of_each_profile(self) -> list[str]:
        """The model each profile was taken of, in the profiles' order."""
        return list(self.models) * len(self.profiles) if len(self.models) == 1 else list(self.models)


class ProbeRequest(_CalibrateRequest):
    """Measure ``probes`` single-kernel models on ``processor`` of ``device`` and fit its
    predictors, and/or time whole ``networks`` against them (``--probes``, ``--validate``;
    :mod:`optimizer.measure.device_predictors`)."""

    device: str | None = None
    processor: str | None = None
    probes: int | None = None
    runner: str = "litert"
    threads: int = 1
    measure_cmd: str | None = None
    runtime: str | None = None
    probe_format: str = "tflite"
    delegate: str = "xnnpack"
    serial: str | None = None
    dtype: str = "fp32"
    families: tuple[str, ...] = ()
    near: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()  # the networks validated against the predictors
    seed: int = 0
    table: str | None = None
    out: str | None = None

    _lists = field_validator("families", "near", "networks", mode="before")(_names)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ProbeRequest:
        from ..measure.probes import check_families

        def label(field: str) -> str:
            return field_label(info, field)

        if self.device is None:
            raise ConfigError(f"{label('probes')}/{label('networks')} need {label('device')} D (the device whose "
                              "processor is probed)")
        if self.dtype not in ("fp32", "int8"):
            raise ConfigError(f"{label('dtype')} {self.dtype!r}: probes and validation run at fp32 or int8")
        if self.probes is not None and self.probes < 1:
            raise ConfigError(f"{label('probes')} {self.probes}: give a positive number of probes")
        _yaml_out(self.out, info, "the device file is a .yaml file")
        check_families(self.families)
        return self

    @property
    def settings(self) -> Any:
        """The runner and its options (:class:`optimizer.measure.device_predictors.RunnerSettings`)."""
        from ..measure.device_predictors import RunnerSettings

        return RunnerSettings(self.runner, self.threads, self.measure_cmd, self.runtime, self.probe_format,
                              self.delegate, self.serial)


class FidelityReportRequest(_CalibrateRequest):
    """Modeled against published figures for every published point and fact (``--report``;
    :func:`optimizer.report.fidelity.fidelity_report`); the fitting options are refused."""

    report: bool = False
    published: str | None = None
    pipeline: bool = True
    strict: bool = False
    device: str | None = None
    models: tuple[str, ...] | None = None
    processor: str | None = None
    out: str | None = None
    input_shape: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> FidelityReportRequest:
        for field in ("device", "models", "processor", "out", "input_shape"):
            if getattr(self, field):
                raise ConfigError(f"calibrate {field_label(info, field)} is only used with "
                                  f"{field_label(info, 'profiles')} FILE")
        if not self.report:
            raise ConfigError(f"calibrate: give {field_label(info, 'report')}, or {field_label(info, 'device')} D "
                              f"{field_label(info, 'profiles')} FILE {field_label(info, 'models')} M "
                              f"[{field_label(info, 'out')} D.yaml]")
        return self


def parse_calibrate_request(options: dict[str, Any], *, labels: dict[str, str] | None = None
                            ) -> ProbeRequest | ProfileFitRequest | FidelityReportRequest:
    """The request of the mode ``options`` ask for: probes or validation when ``probes`` or
    ``networks`` is given, a profile fit when ``profiles`` is, else the fidelity report.

    Parameters
    ----------
    options
        Field values of the three requests (a key missing or None takes the field's default);
        each mode reads its own (:data:`PROBE_FIELDS`, :data:`PROFILE_FIELDS`,
        :data:`REPORT_FIELDS`).
    labels
        How the caller names fields in errors (the CLI's option names).

    Raises
    ------
    ConfigError
        One line naming the option of another mode, or the field, its value and what was expected.
    """
    labels = labels or {}

    def label(field: str) -> str:
        return labels.get(field, field)

    def given(fields: tuple[str, ...], mode: str) -> dict[str, Any]:
        _refuse_other_modes(options, fields, mode, label)
        return {k: options[k] for k in fields if options.get(k) is not None}

    if options.get("probes") is not None or options.get("networks"):
        if options.get("profiles") or options.get("report"):
            raise ConfigError(f"calibrate: {label('probes')}/{label('networks')} cannot be combined with "
                              f"{label('profiles')} or {label('report')}")
        return parse_request(ProbeRequest, given(PROBE_FIELDS, f"{label('probes')}/{label('networks')}"),
                             labels=labels)
    if options.get("profiles"):
        return parse_request(ProfileFitRequest, given(PROFILE_FIELDS, label("profiles")), labels=labels)
    return parse_request(FidelityReportRequest, given(REPORT_FIELDS, label("report")), labels=labels)


def _refuse_other_modes(options: dict[str, Any], fields: tuple[str, ...], mode: str, label: Any) -> None:
    """An option set away from its default that the chosen mode does not read is an error (it
    would be ignored silently), naming the option and the mode it goes with."""
    defaults: dict[str, Any] = {}
    for request in (FidelityReportRequest, ProfileFitRequest, ProbeRequest):
        defaults.update({k: f.default for k, f in request.model_fields.items()})
    for key, value in options.items():
        if key in fields or value is None or value is False or value == () or value == [] or value == defaults.get(key):
            continue
        owner = next(m for m, fs in (("probes", PROBE_FIELDS), ("profiles", PROFILE_FIELDS), ("report", REPORT_FIELDS))
                     if key in fs)
        goes_with = f"{label('probes')}/{label('networks')}" if owner == "probes" else label(owner)
        raise ConfigError(f"calibrate: {label(key)} {value!r} goes with {goes_with}, not with {mode}; leave it out")
