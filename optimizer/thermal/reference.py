"""A learned reference for thermal models: ridge regression h steps ahead (scikit-learn).

Every score of a physical model (:func:`optimizer.thermal.fit.evaluate`) is printed next to
persistence ("temperature stays the same") and next to the simplest learned predictor fitted
on the same training data, so a score says whether the physics earns its keep.

The reference is a *direct* multi-horizon regression, one model per horizon ``h`` (Ben Taieb
et al., "A review and comparison of strategies for multi-step ahead time series forecasting",
Expert Syst. Appl. 39(8), 2012): features are the current temperatures ``T[k]``, the current
inputs ``u[k]`` and the mean of the inputs over the horizon ``u[k..k+h-1]`` (the physical model
is simulated with the whole input sequence, so the reference sees its mean); the target is the
change ``T[k+h] - T[k]``, so the penalty shrinks towards persistence. Features are standardised
and the penalty is chosen per horizon by efficient leave-one-out cross-validation
(:class:`sklearn.linear_model.RidgeCV`, Hoerl & Kennard 1970). Pairs never cross a segment
boundary (a reset or a gap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputFileError
from .trace import Trace, read_trace

#: ridge penalties tried by leave-one-out cross-validation (on standardised features)
ALPHAS = tuple(float(a) for a in np.logspace(-3, 4, 15))


def _pairs(trace: Trace, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(features, T[k], T[k+h])`` for every start ``k`` with ``k + h`` in the same segment."""
    X, T0, Th = [], [], []
    for s in trace.segments:
        K = len(s) - h
        if K <= 0:
            continue
        csum = np.vstack([np.zeros(s.inputs.shape[1]), np.cumsum(s.inputs, axis=0)])
        mean_u = (csum[h:h + K] - csum[:K]) / h
        X.append(np.column_stack([s.temps_c[:K], s.inputs[:K], mean_u]))
        T0.append(s.temps_c[:K])
        Th.append(s.temps_c[h:h + K])
    if not X:
        return np.empty((0, 0)), np.empty((0, 0)), np.empty((0, 0))
    return np.vstack(X), np.vstack(T0), np.vstack(Th)


@dataclass
class RidgeReference:
    """Ridge regressions ``T[k+h] - T[k] ~ [T[k], u[k], mean u[k..k+h-1]]``, one per horizon,
    fitted on ``train`` at its step (:data:`ALPHAS` by leave-one-out)."""

    train: Trace
    models: dict[int, object] = field(default_factory=dict)

    def fit(self, h: int):
        """The fitted pipeline for horizon ``h`` (cached); None when no training pair spans ``h``."""
        if h not in self.models:
            from sklearn.linear_model import RidgeCV
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import StandardScaler

            X, T0, Th = _pairs(self.train, h)
            self.models[h] = (make_pipeline(StandardScaler(), RidgeCV(alphas=ALPHAS)).fit(X, Th - T0)
                              if len(X) > X.shape[1] else None)
        return self.models[h]

    def squared_errors(self, trace: Trace, h: int) -> np.ndarray | None:
        """Sum over every start of the squared error per sensor ``[S]`` at horizon ``h`` on
        ``trace`` (same starts as :func:`~optimizer.thermal.fit.evaluate`), or None when the
        training data has no pair ``h`` steps apart."""
        pipe = self.fit(h)
        X, T0, Th = _pairs(trace, h)
        if pipe is None:
            return None
        if not len(X):
            return np.zeros(len(trace.temp_names))
        # scikit-learn returns 1-D predictions for a one-column target: keep [n, S]
        return ((T0 + pipe.predict(X).reshape(Th.shape) - Th) ** 2).sum(axis=0)

    def alpha(self, h: int) -> float | None:
        """The penalty chosen for horizon ``h``."""
        pipe = self.fit(h)
        return None if pipe is None else float(pipe[-1].alpha_)


def training_trace(info: dict, temps: tuple[str, ...], inputs: tuple[str, ...], path: str | Path | None = None,
                   where: str = "model") -> Trace:
    """The training data recorded in a fitted model's ``info`` (trace file, time column, the
    ``--train-from/--train-to`` window and gap factor), read again; ``path`` overrides the file.

    Raises
    ------
    InputFileError
        The recorded file is gone (and no ``path`` given).
    """
    given = path or info.get("trace")
    candidates = [Path(given)] if given else []
    if path is None and info.get("trace_resolved"):
        candidates.append(Path(info["trace_resolved"]))
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise InputFileError(f"{where}: its training trace {given!r} is not found; give the training log with "
                             f"--train PATH (or --no-ridge to skip the ridge reference)")
    tr = read_trace(found, info.get("time_column") or "t_s", list(temps), list(inputs),
                    gap_factor=float(info.get("gap_factor", 5.0)))
    lo, hi = info.get("train_window_s") or (None, None)
    return tr.window(lo, hi) if (lo is not None or hi is not None) else tr


def at_step(train: Trace, dt: float) -> Trace:
    """``train`` at step ``dt`` (resampled, inputs averaged over each step) unless already there."""
    if abs(train.dt_s - dt) <= 1e-3 * dt:
        return train
    try:
        return train.resample(dt, hold_inputs=True)
    except ConfigError as exc:
        raise ConfigError(f"the ridge reference cannot be fitted at {dt:g} s: {exc}") from exc
