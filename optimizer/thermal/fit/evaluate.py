"""A thermal model scored on a trace: RMSE per sensor at each horizon and open loop.

:func:`evaluate` predicts ``h`` steps ahead from every start in every segment (never across a
gap) and open loop from each segment's first sample, next to persistence ("the temperature stays
the same") and, when the model's training data is given, a ridge regression fitted on it
(:mod:`optimizer.thermal.reference`). docs/METHODS.md section 11 gives the scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError
from ..trace import Trace
from .model import ThermalModel, align_trace


@dataclass
class HorizonScore:
    """RMSE (°C) per sensor and overall of the model, of persistence and (when a training trace
    was given) of the ridge reference (:mod:`optimizer.thermal.reference`) at one horizon."""

    label: str
    steps: int | None            # None = open loop
    seconds: float | None
    n: int
    rmse_c: dict[str, float]
    persistence_rmse_c: dict[str, float]
    ridge_rmse_c: dict[str, float] | None = None

    def to_dict(self) -> dict:
        return {"horizon": self.label, "steps": self.steps, "seconds": self.seconds, "n": self.n,
                "rmse_c": self.rmse_c, "persistence_rmse_c": self.persistence_rmse_c,
                "ridge_rmse_c": self.ridge_rmse_c}



def evaluate(model: ThermalModel, trace: Trace, horizons: list[int],
             train: Trace | None = None) -> list[HorizonScore]:
    """RMSE at each horizon (steps) from every start, and open loop from each segment start.

    Parameters
    ----------
    model, trace
        The model and the trace to score it on (resampled onto a discrete-only model's step,
        :func:`align_trace`).
    horizons
        Horizons in steps of the (aligned) trace.
    train
        The model's training data: a ridge reference (:class:`~optimizer.thermal.reference.RidgeReference`)
        is fitted on it at the evaluated step and scored on the same starts (``ridge_rmse_c``).

    Raises
    ------
    ConfigError
        The trace's columns differ from the model's, or a horizon is < 1.
    """
    from ..reference import RidgeReference, at_step

    for tr in (trace, train) if train is not None else (trace,):
        if tr.temp_names != model.temp_names or tr.input_names != model.input_names:
            raise ConfigError(f"{tr.path}: columns differ from the model's: model temps "
                              f"{','.join(model.temp_names)} inputs {','.join(model.input_names)}; trace temps "
                              f"{','.join(tr.temp_names)} inputs {','.join(tr.input_names)}")
    if any(h < 1 for h in horizons):
        raise ConfigError(f"horizons must be >= 1 step, got {horizons}")
    trace, _ = align_trace(model, trace)
    ridge = RidgeReference(at_step(train, trace.dt_s)) if train is not None else None
    Ad, Bd, c = model.discrete(trace.dt_s)
    S = len(model.temp_names)
    names = list(model.temp_names)
    out = []
    for h in horizons:
        model_sq, persistence_sq, count = np.zeros(S), np.zeros(S), 0
        for s in trace.segments:
            K = len(s) - h
            if K <= 0:
                continue
            X = model.initial_states(s.temps_c[:K], s.inputs[:K])
            for j in range(h):
                X = X @ Ad.T + s.inputs[j:j + K] @ Bd.T + c
            target = s.temps_c[h:h + K]
            model_sq += ((X[:, :S] - target) ** 2).sum(axis=0)
            persistence_sq += ((s.temps_c[:K] - target) ** 2).sum(axis=0)
            count += K
        ridge_sq = ridge.squared_errors(trace, h) if ridge is not None else None
        out.append(_horizon_score(f"{h} steps", h, h * trace.dt_s, count, names, model_sq, persistence_sq, ridge_sq))
    model_sq, persistence_sq, count = np.zeros(S), np.zeros(S), 0
    for s in trace.segments:
        pred = model.simulate(s.temps_c[0], s.inputs, trace.dt_s)
        model_sq += ((pred[1:] - s.temps_c[1:]) ** 2).sum(axis=0)
        persistence_sq += ((s.temps_c[0] - s.temps_c[1:]) ** 2).sum(axis=0)
        count += len(s) - 1
    out.append(_horizon_score("open loop", None, None, count, names, model_sq, persistence_sq))
    return out


def _horizon_score(label: str, steps: int | None, seconds: float | None, count: int, names: list[str],
                   model_sq: np.ndarray, persistence_sq: np.ndarray,
                   ridge_sq: np.ndarray | None = None) -> HorizonScore:
    """The :class:`HorizonScore` of summed squared errors per sensor over ``count`` starts: of the
    model, of persistence and (when given) of the ridge reference."""
    if count == 0:
        nan = {k: float("nan") for k in [*names, "overall"]}
        return HorizonScore(label, steps, seconds, 0, nan, dict(nan), dict(nan) if ridge_sq is not None else None)

    def rmse(squared: np.ndarray) -> dict[str, float]:
        per_sensor = {k: float(np.sqrt(squared[i] / count)) for i, k in enumerate(names)}
        per_sensor["overall"] = float(np.sqrt(squared.sum() / (count * len(names))))
        return per_sensor
    return HorizonScore(label, steps, seconds, count, rmse(model_sq), rmse(persistence_sq),
                        rmse(ridge_sq) if ridge_sq is not None else None)
