"""SPLASH's linear thermal model, fitted by least squares and made continuous-time.

``T[k+1] = Θ·[T[k], u[k], 1]``: next temperatures linear in all current temperatures, the inputs
and an offset (Jeong 2023, docs/METHODS.md section 5), fitted one step ahead with a rank-revealing
solver (SVD, ``numpy.linalg.lstsq``) or ridge, optionally on the last ``window`` samples only
(SPLASH refits on a 2000-sample window). It is fitted at a validated multiple of the trace's step
(:mod:`.steps`) and turned continuous-time by the matrix logarithm of its zero-order hold
(:func:`continuous_from_discrete`), so it predicts at any step (docs/METHODS.md section 11).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.linalg import logm

from ...errors import ConfigError
from ..rc import zoh
from ..trace import Trace
from .model import APPROXIMATE, DISCRETE_ONLY, EXACT, ThermalModel
from .steps import ProgressFn, at_step, at_trace_step, select_step


def fit_linear(trace: Trace, ridge: float = 0.0, window: int | None = None, fit_step_s: float | None = None,
               progress: ProgressFn | None = None) -> ThermalModel:
    """Fit SPLASH's ``T[k+1] = Θ·[T[k], u[k], 1]`` by least squares at a validated step.

    One-step least squares at a fast logging step (0.1 s on the Odroid) mostly fits sensor
    quantisation noise and biases the slow poles (errors in variables). The model is therefore
    fitted at a step ``q × dt`` (inputs averaged over each step, ``q`` chosen among
    :data:`.steps.FIT_STEP_FACTORS` by open-loop error on a held-out segment, see
    :func:`.steps.select_step`), then converted to continuous time by the matrix logarithm of the
    augmented ``[[Ad, Bd, c], [0, I]]`` (the inverse of the zero-order hold; Van Loan 1978), so
    it predicts at any step. If that logarithm is not real the model stays discrete at ``q × dt``.

    Parameters
    ----------
    trace
        Training data (transitions are taken inside segments only).
    ridge
        Ridge penalty on standardised regressors (0 = minimum-norm least squares via SVD).
    window
        Use only the last ``window`` transitions at the trace's own step (SPLASH's sliding
        window; Jeong 2023); implies no step selection.
    fit_step_s
        Fit at this step instead of validating one (a whole multiple of the trace's step).
    progress
        Called as the validation advances.
    """
    if window is not None:
        if window < 1:
            raise ConfigError(f"--window must be >= 1, got {window}")
        fit_step_s = trace.dt_s
    n_par = len(trace.temp_names) + len(trace.input_names) + 1
    n_transitions = sum(len(s) - 1 for s in trace.segments)
    if n_transitions < n_par:
        raise ConfigError(f"{trace.path}: {n_transitions} transitions to fit, but the linear model has {n_par} "
                          f"parameters per sensor; give more rows (or fewer columns)")
    q, table = select_step(trace, lambda portion, factor: _least_squares_at_trace_step(at_step(portion, factor), ridge, None),
                           n_par, fit_step_s, "linear", progress)
    model = at_trace_step(_least_squares_at_trace_step(at_step(trace, q), ridge, window), trace.dt_s)
    model.info.update(fit_step_s=q * trace.dt_s, validation=table)
    return model


def _least_squares_at_trace_step(trace: Trace, ridge: float, window: int | None) -> ThermalModel:
    """One-step least squares at the trace's step, made continuous-time where possible."""
    X, Y = [], []
    for s in trace.segments:
        X.append(np.column_stack([s.temps_c[:-1], s.inputs[:-1], np.ones(len(s) - 1)]))
        Y.append(s.temps_c[1:])
    if not X:
        raise ConfigError(f"{trace.path}: no segment of 2 or more samples at a {trace.dt_s:g} s step")
    X, Y = np.vstack(X), np.vstack(Y)
    if window is not None:
        X, Y = X[-window:], Y[-window:]
    S, M = len(trace.temp_names), len(trace.input_names)
    n_par = S + M + 1
    if len(X) < n_par:
        raise ConfigError(f"{trace.path}: {len(X)} transitions to fit, but the linear model has {n_par} "
                          f"parameters per sensor; give more rows (or fewer columns)")
    theta = _ridge_solve(X, Y, ridge)                       # [S+M+1, S]
    Ad, Bd, c = theta[:S].T, theta[S:S + M].T, theta[-1]
    resid = X @ theta - Y
    info = {"solver": "ridge" if ridge else "lstsq (SVD)", "ridge": ridge, "window": window,
            "transitions": len(X), "train_one_step_rmse_c": float(np.sqrt(np.mean(resid**2)))}
    cont, how = continuous_from_discrete(Ad, Bd, c, trace.dt_s)
    info["discretisation"] = how
    if cont is None:
        return ThermalModel("linear", trace.temp_names, trace.input_names, trace.dt_s, Ad, Bd, c, info=info)
    model = ThermalModel("linear", trace.temp_names, trace.input_names, trace.dt_s, Ad, Bd, c, 0, *cont, info=info)
    if how.startswith(APPROXIMATE):      # the fit-step matrices become the continuous model's own
        Ad2, Bfull = zoh(cont[0], np.column_stack([cont[1], cont[2]]), trace.dt_s)
        model = replace(model, Ad=Ad2, Bd=Bfull[:, :-1], c=Bfull[:, -1])
        info["train_one_step_rmse_c_before_reflection"] = info["train_one_step_rmse_c"]
        info["train_one_step_rmse_c"] = float(np.sqrt(np.mean((X @ np.vstack([model.Ad.T, model.Bd.T, model.c])
                                                                 - Y) ** 2)))
    return model


def continuous_from_discrete(Ad, Bd, c, dt: float) -> tuple[tuple | None, str]:
    """``((A, B, b0), how)``: a continuous-time model whose zero-order hold at ``dt`` is, or
    approximates, ``(Ad, Bd, c)``, and one sentence saying which (``None`` and why when there is none).

    1. Exact: the principal matrix logarithm of the augmented ``[[Ad, Bd, c], [0, I]]`` (the
       inverse of the zero-order hold; Van Loan 1978), when it is real and stable.
    2. Approximate: an eigenvalue of ``Ad`` on the negative real axis (a mode that flips sign at
       every step, usually noise fitted at a fast step) has no real logarithm (Higham,
       *Functions of Matrices*, 2008, Thm 1.23), so ``logm`` gives a complex result. Each such
       eigenvalue ``λ`` is replaced by ``|λ|`` (the same decay per step, without the flip), ``A``
       is taken from the modified eigendecomposition and ``B, b0`` are set so that the
       steady state ``(I - Ad)⁻¹ (Bd u + c)`` is kept exactly; the other modes are unchanged.
    3. None: ``Ad`` has an eigenvalue of modulus >= 1 (the fitted model is unstable at ``dt``).
    """
    n, m = Bd.shape
    lam, V = np.linalg.eig(Ad)
    if np.abs(lam).max() >= 1.0:
        k = int(np.argmax(np.abs(lam)))
        return None, (f"{DISCRETE_ONLY}: the fitted Ad has eigenvalue {complex(lam[k]):.4g} of modulus "
                      f">= 1 (unstable at the {dt:.4g} s fit step), so it has no stable continuous-time "
                      f"form; traces at other steps are resampled onto {dt:.4g} s")
    aug = np.eye(n + m + 1)
    aug[:n, :n], aug[:n, n:n + m], aug[:n, -1] = Ad, Bd, c
    with np.errstate(all="ignore"):
        try:
            L = logm(aug)
        except (ValueError, np.linalg.LinAlgError):
            L = np.full_like(aug, np.nan)
    if np.all(np.isfinite(L)) and np.abs(np.imag(L)).max() <= 1e-6 * max(1.0, np.abs(L).max()):
        L = np.real(L) / dt
        if np.linalg.eigvals(L[:n, :n]).real.max() < 0:
            return (L[:n, :n], L[:n, n:n + m], L[:n, -1]), f"{EXACT}: real matrix logarithm of its zero-order hold"
    neg = (np.abs(lam.imag) <= 1e-9 * np.maximum(1.0, np.abs(lam))) & (lam.real <= 0)
    lam2 = np.where(neg, np.maximum(np.abs(lam), 1e-12), lam).astype(complex)
    try:
        if np.linalg.cond(V) > 1e10:
            raise np.linalg.LinAlgError("defective")
        A = np.real(V @ np.diag(np.log(lam2)) @ np.linalg.inv(V)) / dt
        gain = np.linalg.solve(np.eye(n) - Ad, np.column_stack([Bd, c]))     # steady state per unit input
    except np.linalg.LinAlgError:
        return None, (f"{DISCRETE_ONLY}: Ad is not diagonalisable, so its matrix logarithm cannot be "
                      f"made real; traces at other steps are resampled onto {dt:.4g} s")
    Bfull = -A @ gain
    flipped = ", ".join(f"{v.real:.3g}" for v in lam[neg])
    return (A, Bfull[:, :-1], Bfull[:, -1]), (
        f"{APPROXIMATE}: the matrix logarithm is not real (Ad has {int(neg.sum())} eigenvalue(s) on the negative "
        f"real axis: {flipped}); those modes were reflected to |λ| (same decay per {dt:.4g} s step, no sign "
        f"flip), steady-state gains kept")


def _ridge_solve(X: np.ndarray, Y: np.ndarray, ridge: float) -> np.ndarray:
    """Least squares with SVD (rank-revealing) on column-scaled regressors, optional ridge."""
    scale = np.sqrt(np.mean(X**2, axis=0))
    scale[scale == 0] = 1.0
    Xs = X / scale
    if ridge > 0:
        Xs = np.vstack([Xs, math.sqrt(ridge * len(X)) * np.eye(X.shape[1])])
        Y = np.vstack([Y, np.zeros((X.shape[1], Y.shape[1]))])
    theta, *_ = np.linalg.lstsq(Xs, Y, rcond=None)
    return theta / scale[:, None]

