"""One entry point for the thermal fits: a model family by name, with the training range recorded."""

from __future__ import annotations

from ...errors import ConfigError
from ..trace import Trace
from .linear import fit_linear
from .model import EXACT, ThermalModel
from .rc_equation_error import fit_rc
from .steps import ProgressFn

#: the model families :func:`fit_model` fits
MODEL_FAMILIES = ("linear", "rc")


def fit_model(trace: Trace, model: str = "linear", *, window: int | None = None, ridge: float = 0.0,
              hidden: int | str = "auto", shooting_s: float | None = None, seed: int = 0,
              fit_step_s: float | None = None, progress: ProgressFn | None = None) -> ThermalModel:
    """Fit ``model`` ("linear" or "rc") on ``trace`` and record the training range in ``info``."""
    if model == "linear":
        if hidden not in (None, 0, "auto") or shooting_s:
            raise ConfigError("--hidden and --shooting apply to the rc model only")
        fitted = fit_linear(trace, ridge=ridge, window=window, fit_step_s=fit_step_s, progress=progress)
    elif model == "rc":
        if window is not None:
            raise ConfigError("--window applies to the linear model only")
        fitted = fit_rc(trace, hidden=hidden, shooting_s=shooting_s, seed=seed, fit_step_s=fit_step_s,
                        progress=progress)
    else:
        raise ConfigError(f"--model must be linear or rc, got {model!r}")
    fitted.info.setdefault("discretisation", f"{EXACT}: an RC network fitted in continuous time")
    fitted.info.update(trace=trace.path, time_column=trace.time_name,
                       train_from_s=float(trace.segments[0].times_s[0]),
                       train_to_s=float(trace.segments[-1].times_s[-1]), segments=len(trace.segments),
                       rows=trace.n_rows, resampled=trace.resampled, breaks=trace.breaks,
                       continuous_time=fitted.continuous_time)
    return fitted
