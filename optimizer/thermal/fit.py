"""Thermal models fitted from traces, their evaluation at horizons, and JSON save/load.

Two model families, both ending as a discrete state-space model
``x[k+1] = Ad x[k] + Bd u[k] + c`` whose first ``S`` states are the measured sensors:

``linear``
    SPLASH's model (Jeong 2023; METHODS.md §5): next temperatures linear in all current
    temperatures, the inputs and an offset, ``T[k+1] = Θ·[T[k], u[k], 1]``, fitted one step
    ahead by least squares with a rank-revealing solver (SVD, ``numpy.linalg.lstsq``) or ridge,
    optionally on the last ``window`` samples only (SPLASH refits on a 2000-sample window).
    It is fitted at a multiple of the trace's step chosen by open-loop error on a held-out
    segment (inputs averaged over each step) and made continuous-time by the matrix logarithm
    of its zero-order hold, so it predicts at any step.

``rc``
    A physically constrained RC network (HotSpot-style, Skadron et al. 2003): one node per
    sensor plus optional hidden nodes (board, heat sink), capacities > 0, symmetric
    conductances ≥ 0, conductances to ambient, and non-negative input gains; stable by
    construction (``A = -C⁻¹G``, ``G`` positive definite). By default it is fitted fast on
    one-step error at the linear model's validated step, by variable projection with exact
    discretisation (:class:`_EquationErrorRC`), all sensors at once, warm-started from the
    linear model, with 0 or 1 hidden node chosen on a held-out segment
    (:class:`_EquationErrorRCHidden`). With 2+ hidden nodes or multiple shooting its
    parameters are fitted on the **open-loop** error over each training segment
    (:class:`_VarProRC`, slow). The overall capacity scale is not identifiable from temperatures
    alone and is fixed by ``C_0 = 1``; time constants, gains and predictions are unaffected.

A model fitted at one step predicts a trace at any other: continuous-time models are
re-discretised exactly; a discrete-only model (a given ``fixed`` one, or a linear fit unstable
at its step) gets the trace resampled onto its step, with a note (:func:`align_trace`). How a
linear model was made continuous-time (exact logarithm, or negative-axis modes reflected) is in
``info["discretisation"]``.

Evaluation (:func:`evaluate`) reports RMSE per sensor and overall at each horizon (every start
in every segment, never across a gap) and open loop from each segment's first sample, next to
the persistence baseline ("temperature stays the same").
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
from scipy.linalg import expm, logm
from scipy.optimize import least_squares, lsq_linear, nnls
from scipy.signal import lfilter
from threadpoolctl import threadpool_limits

from ..errors import ConfigError, SchemaError
from ..fileio import atomic_write_json, read_json
from .rc import propagate, zoh
from .trace import Segment, Trace

_log = logging.getLogger(__name__)

MODEL_SCHEMA = "dnnplan.thermal-model"
MODEL_VERSION = 1
ModelKind = Literal["linear", "rc", "fixed"]
#: how a linear model was written (start of ``info["discretisation"]``, see :func:`_continuous_from_discrete`)
EXACT, APPROXIMATE, DISCRETE_ONLY = ("continuous-time, exact", "continuous-time by approximation",
                                     "discrete-time only")
#: ``progress(stage, done, total)``, called as a fit advances (the CLI draws a Rich bar)
ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ThermalModel:
    """A fitted (or given) discrete thermal model over sensors ``temp_names`` and ``input_names``.

    ``A, B, b0`` (``dx/dt = A x + B u + b0``), when present (rc, and linear models with a real
    matrix logarithm), re-discretise it exactly for any step; otherwise it is tied to ``dt_s``.
    """

    kind: ModelKind
    temp_names: tuple[str, ...]
    input_names: tuple[str, ...]
    dt_s: float
    Ad: np.ndarray
    Bd: np.ndarray
    c: np.ndarray
    n_hidden: int = 0
    A: np.ndarray | None = None
    B: np.ndarray | None = None
    b0: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def n_states(self) -> int:
        return self.Ad.shape[0]

    @property
    def continuous_time(self) -> bool:
        """True when the model holds ``dx/dt = A x + B u + b0`` and predicts at any step."""
        return self.A is not None

    def discrete(self, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(Ad, Bd, c)`` for step ``dt``: exact re-discretisation when continuous-time, else the
        fitted step (see :func:`align_trace` for traces at another step)."""
        if abs(dt - self.dt_s) <= 1e-3 * self.dt_s:
            return self.Ad, self.Bd, self.c
        if self.A is None:
            raise ConfigError(f"this {self.kind} model is discrete-time at a {self.dt_s:g} s step and cannot "
                              f"predict at {dt:g} s directly; resample the trace onto its step (align_trace)")
        Ad, Bfull = zoh(self.A, np.column_stack([self.B, self.b0]), dt)
        return Ad, Bfull[:, :-1], Bfull[:, -1]

    def initial_states(self, temps: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        """Full states [K, n] from measured temps [K, S]: hidden nodes at their quasi-steady value."""
        temps = np.atleast_2d(temps)
        if not self.n_hidden:
            return temps.copy()
        S = len(self.temp_names)
        Ahh, Aho = self.A[S:, S:], self.A[S:, :S]
        rhs = temps @ Aho.T + np.atleast_2d(inputs) @ self.B[S:].T + self.b0[S:]
        hidden = -np.linalg.solve(Ahh, rhs.T).T
        return np.column_stack([temps, hidden])

    def time_constants_s(self) -> np.ndarray:
        """Time constants (s), largest first: ``-1/λ(A)`` for rc, ``-dt/ln λ(Ad)`` otherwise."""
        if self.A is not None:
            lam = np.linalg.eigvals(self.A).real
            return np.sort(-1.0 / lam)[::-1]
        lam = np.linalg.eigvals(self.Ad)
        mag = np.clip(np.abs(lam), 1e-300, None)
        with np.errstate(divide="ignore"):
            return np.sort(-self.dt_s / np.log(mag))[::-1]

    def simulate(self, temps0: np.ndarray, inputs: np.ndarray, dt: float | None = None) -> np.ndarray:
        """Open-loop sensor temperatures [K, S] from measured ``temps0`` [S] under inputs [K, M]
        (row 0 is the start; input k acts over step k)."""
        Ad, Bd, c = self.discrete(self.dt_s if dt is None else dt)
        x = self.initial_states(temps0, inputs[:1])[0]
        return propagate(Ad, x, (inputs @ Bd.T + c)[:-1])[:, : len(self.temp_names)]

    # -- persistence -----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {"schema": MODEL_SCHEMA, "version": MODEL_VERSION, "kind": self.kind,
             "temps": list(self.temp_names), "inputs": list(self.input_names), "dt_s": self.dt_s,
             "n_hidden": self.n_hidden, "Ad": self.Ad.tolist(), "Bd": self.Bd.tolist(), "c": self.c.tolist(),
             "time_constants_s": [float(t) for t in self.time_constants_s()], "info": self.info}
        if self.A is not None:
            d.update(A=self.A.tolist(), B=self.B.tolist(), b0=self.b0.tolist())
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "model") -> ThermalModel:
        """Inverse of :meth:`to_dict` (SchemaError names the bad field)."""
        if not isinstance(d, dict) or d.get("schema") != MODEL_SCHEMA:
            raise SchemaError(f"{where}: not a dnnplan thermal model (schema field must be {MODEL_SCHEMA!r})")
        if d.get("version") != MODEL_VERSION:
            raise SchemaError(f"{where}: version {d.get('version')!r} is not supported (expected {MODEL_VERSION})")
        try:
            temps, inputs = tuple(d["temps"]), tuple(d["inputs"])
            S, M = len(temps), len(inputs)
            nh = int(d.get("n_hidden", 0))
            n = S + nh
            arr = {k: np.asarray(d[k], dtype=float) for k in ("Ad", "Bd", "c")}
            shapes = {"Ad": (n, n), "Bd": (n, M), "c": (n,)}
            if d["kind"] == "rc" or "A" in d:
                arr.update({k: np.asarray(d[k], dtype=float) for k in ("A", "B", "b0")})
                shapes.update(A=(n, n), B=(n, M), b0=(n,))
            for k, shp in shapes.items():
                if arr[k].shape != shp or not np.all(np.isfinite(arr[k])):
                    raise SchemaError(f"{where}: field {k!r} must be a finite {shp} array, got shape {arr[k].shape}")
            if d["kind"] not in ("linear", "rc", "fixed"):
                raise SchemaError(f"{where}: kind {d['kind']!r} must be linear, rc or fixed")
            return cls(d["kind"], temps, inputs, float(d["dt_s"]), arr["Ad"], arr["Bd"], arr["c"], nh,
                       arr.get("A"), arr.get("B"), arr.get("b0"), dict(d.get("info", {})))
        except KeyError as exc:
            raise SchemaError(f"{where}: missing field {exc.args[0]!r}") from exc
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{where}: malformed model ({exc})") from exc


def save_model(model: ThermalModel, path: str | Path) -> Path:
    """Write the model as versioned JSON, atomically."""
    return atomic_write_json(path, model.to_dict())


def load_model(path: str | Path) -> ThermalModel:
    """Read a model written by :func:`save_model`."""
    return ThermalModel.from_dict(read_json(path, "thermal model file"), where=str(path))


def fixed_model(Ad: np.ndarray, Bd: np.ndarray, dt_s: float, temp_names: tuple[str, ...],
                input_names: tuple[str, ...], c: np.ndarray | None = None, source: str = "") -> ThermalModel:
    """A given discrete model (e.g. a published ``T[k+1] = A T[k] + B P[k]``) for evaluation."""
    Ad, Bd = np.asarray(Ad, float), np.asarray(Bd, float)
    cc = np.zeros(Ad.shape[0]) if c is None else np.asarray(c, float)
    return ThermalModel("fixed", tuple(temp_names), tuple(input_names), float(dt_s), Ad, Bd, cc,
                        info={"source": source})


# ---------------------------------------------------------------------------------------------
# fit step chosen by validation
# ---------------------------------------------------------------------------------------------
#: candidate fit steps, in multiples of the trace's step
FIT_STEP_FACTORS = (1, 2, 5, 10, 20, 50, 100)


def _at_step(trace: Trace, q: int) -> Trace:
    """The trace decimated by ``q`` (inputs averaged over each new step); short segments dropped."""
    if q == 1:
        return trace
    segs = tuple(s for s in (_decimate(s, q) for s in trace.segments) if len(s) >= 2)
    return replace(trace, dt_s=trace.dt_s * q, segments=segs)


def _split_for_validation(trace: Trace) -> tuple[Trace, Trace]:
    """(fit part, held-out part): the last segment if there are several, else the last quarter."""
    if len(trace.segments) >= 2:
        return replace(trace, segments=trace.segments[:-1]), replace(trace, segments=trace.segments[-1:])
    s = trace.segments[0]
    cut = int(0.75 * len(s))
    head, tail = (Segment(s.times_s[a:b], s.temps_c[a:b], s.inputs[a:b]) for a, b in ((0, cut + 1), (cut, len(s))))
    return replace(trace, segments=(head,)), replace(trace, segments=(tail,))


def _open_loop_rmse(model: ThermalModel, trace: Trace) -> float:
    trace, _ = align_trace(model, trace)
    se, n = 0.0, 0
    for s in trace.segments:
        pred = model.simulate(s.temps_c[0], s.inputs, trace.dt_s)
        se += float(((pred[1:] - s.temps_c[1:]) ** 2).sum())
        n += (len(s) - 1) * len(model.temp_names)
    return math.sqrt(se / n) if n else math.inf


def _select_step(trace: Trace, fit_at, n_par: int, fit_step_s: float | None, label: str,
                 progress: ProgressFn | None) -> tuple[int, list[dict]]:
    """The decimation factor whose model, fitted on the fit part, predicts the held-out part best
    open loop (or the one giving ``fit_step_s``); returns it and the validation table."""
    if fit_step_s is not None:
        q = int(round(fit_step_s / trace.dt_s))
        if q < 1 or abs(q * trace.dt_s - fit_step_s) > 0.01 * fit_step_s:
            raise ConfigError(f"--fit-step {fit_step_s:g} s must be a whole multiple of the trace's "
                              f"{trace.dt_s:g} s step")
        return q, []
    fit_part, held = _split_for_validation(trace)
    table = []
    candidates = [q for q in FIT_STEP_FACTORS
                  if sum(len(s) // q for s in fit_part.segments) >= 3 * n_par or q == 1]
    for i, q in enumerate(candidates):
        if progress:
            progress(f"{label}: validating fit step {q * trace.dt_s:g} s", i, len(candidates))
        try:
            err = _open_loop_rmse(fit_at(fit_part, q), held)
        except (ConfigError, np.linalg.LinAlgError):
            err = math.inf
        table.append({"fit_step_s": q * trace.dt_s, "held_out_open_loop_rmse_c": err})
    if progress:
        progress(f"{label}: validated {len(candidates)} fit steps", len(candidates), len(candidates))
    best = min(range(len(table)), key=lambda i: table[i]["held_out_open_loop_rmse_c"])
    if not math.isfinite(table[best]["held_out_open_loop_rmse_c"]):
        raise ConfigError(f"{trace.path}: no fit step gives a usable {label} model on the held-out "
                          f"segment; give a longer trace")
    return candidates[best], table


# ---------------------------------------------------------------------------------------------
# linear (SPLASH)
# ---------------------------------------------------------------------------------------------
def fit_linear(trace: Trace, ridge: float = 0.0, window: int | None = None, fit_step_s: float | None = None,
               progress: ProgressFn | None = None) -> ThermalModel:
    """Fit SPLASH's ``T[k+1] = Θ·[T[k], u[k], 1]`` by least squares at a validated step.

    One-step least squares at a fast logging step (0.1 s on the Odroid) mostly fits sensor
    quantisation noise and biases the slow poles (errors in variables). The model is therefore
    fitted at a step ``q × dt`` (inputs averaged over each step, ``q`` chosen among
    :data:`FIT_STEP_FACTORS` by open-loop error on a held-out segment, see
    :func:`_select_step`), then converted to continuous time by the matrix logarithm of the
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
    n_tr = sum(len(s) - 1 for s in trace.segments)
    if n_tr < n_par:
        raise ConfigError(f"{trace.path}: {n_tr} transitions to fit, but the linear model has {n_par} "
                          f"parameters per sensor; give more rows (or fewer columns)")
    q, table = _select_step(trace, lambda tr, q_: _linear_at(_at_step(tr, q_), ridge, None), n_par,
                            fit_step_s, "linear", progress)
    m = _at_trace_step(_linear_at(_at_step(trace, q), ridge, window), trace.dt_s)
    m.info.update(fit_step_s=q * trace.dt_s, validation=table)
    return m


def _at_trace_step(model: ThermalModel, dt: float) -> ThermalModel:
    """A continuous-time model's discrete matrices stored for the trace's own step ``dt``."""
    if not model.continuous_time or model.dt_s == dt:
        return model
    Ad, Bd, c = model.discrete(dt)
    return replace(model, dt_s=dt, Ad=Ad, Bd=Bd, c=c)


def _linear_at(trace: Trace, ridge: float, window: int | None) -> ThermalModel:
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
    cont, how = _continuous_from_discrete(Ad, Bd, c, trace.dt_s)
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


def _continuous_from_discrete(Ad, Bd, c, dt: float) -> tuple[tuple | None, str]:
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


# ---------------------------------------------------------------------------------------------
# rc (physically constrained, open-loop fitted)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _RCLayout:
    """Nonlinear parameters of the RC fit: log capacities (node 0 fixed at 1), log pair
    conductances, log ambient conductances. The input map and the ambient are linear."""

    n: int      # nodes (sensors + hidden)
    M: int      # inputs

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        return np.triu_indices(self.n, 1)

    @property
    def size(self) -> int:
        return (self.n - 1) + len(self.pairs[0]) + self.n

    @property
    def n_linear(self) -> int:
        return self.n * self.M + 1

    def unpack(self, th: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = self.n
        c = np.exp(np.concatenate([[0.0], th[: n - 1]]))
        npair = len(self.pairs[0])
        g = np.zeros((n, n))
        g[self.pairs] = np.exp(th[n - 1: n - 1 + npair])
        g = g + g.T
        ga = np.exp(th[n - 1 + npair:])
        return c, g, ga


class _VarProRC:
    """Variable projection (Golub & Pereyra 1973) for the open-loop RC fit.

    For fixed capacities and conductances the simulated sensor temperatures are affine in the
    input map ``S`` and the ambient ``T_amb`` (the initial state of hidden nodes included), so
    those are solved exactly by bounded linear least squares (``S >= 0``) inside every
    evaluation; ``least_squares`` only searches the conductances and capacities. Simulation
    is exact ZOH in modal coordinates (``A = V diag(λ) V⁻¹``, one first-order filter per mode).
    """

    def __init__(self, segs, S: int, hidden: int, dt: float, weights: list[float]) -> None:
        self.segs, self.S, self.hidden, self.dt = segs, S, hidden, dt
        self.lay = _RCLayout(S + hidden, segs[0].inputs.shape[1])
        self.w = weights
        self.target = np.concatenate([w * sg.temps_c[1:].ravel() for sg, w in zip(segs, self.w, strict=True)])
        self.steps = [np.arange(len(sg) - 1, dtype=float) + 1.0 for sg in segs]

    def design(self, th: np.ndarray):
        """(Φ [rows, n·M+1], fixed part [rows], A, c, ga) for nonlinear parameters ``th``."""
        lay, S, dt = self.lay, self.S, self.dt
        n, M = lay.n, lay.M
        c, g, ga = lay.unpack(th)
        G = np.diag(g.sum(axis=1) + ga) - g
        A = -G / c[:, None]
        r = 1.0 / np.sqrt(c)
        lam, q = np.linalg.eigh(-(r[:, None] * G * r[None, :]))
        V, Vinv = r[:, None] * q, q.T / r[None, :]
        a = np.exp(lam * dt)
        gain = (a - 1.0) / lam
        # columns: S[i, m] (node i, input m) in row-major order, then T_amb
        col_b = np.zeros((n, lay.n_linear))                    # continuous drive of each column
        for i in range(n):
            col_b[i, i * M:(i + 1) * M] = 1.0 / c[i]
        col_b[:, -1] = ga / c
        Vo = V[:S]                                              # observed rows
        if self.hidden:
            Ahh_inv = np.linalg.inv(A[S:, S:])
            Aho = A[S:, :S]
        Phi, fixed = [], []
        for sg, w, kk in zip(self.segs, self.w, self.steps, strict=True):
            U = np.column_stack([sg.inputs, np.ones(len(sg))])     # [K, M+1]
            # F[k, l, j] = sum_{i<k} a_l^{k-1-i} U[i, j] * gain_l  (k = 1..K-1)
            F = np.empty((len(sg) - 1, n, M + 1))
            for l_ in range(n):
                F[:, l_, :] = lfilter([1.0], [1.0, -a[l_]], U[:-1], axis=0) * gain[l_]
            # forced response of column (i, m): Vo @ (F[:, :, m] * Vinv[:, i] * drive)
            modal_b = Vinv @ col_b                                  # [n modes, cols]
            src = np.concatenate([np.tile(np.arange(M), n), [M]])
            H = F[:, :, src] * modal_b[None]                        # [K-1, n, cols]
            forced = np.tensordot(H, Vo, axes=([1], [1])).transpose(0, 2, 1)   # [K-1, S, cols]
            x0 = sg.temps_c[0]
            powk = a[None, :] ** kk[:, None]                        # [K-1, n]
            x0_full = np.concatenate([x0, -Ahh_inv @ (Aho @ x0)]) if self.hidden else x0
            free = (powk * (Vinv @ x0_full)[None, :]) @ Vo.T       # [K-1, S]
            if self.hidden:
                # hidden initial state is quasi-steady: it depends linearly on S[h, :] and T_amb
                dx0 = np.zeros((n, lay.n_linear))
                u0 = np.concatenate([sg.inputs[0], [1.0]])
                dx0[S:] = -Ahh_inv @ (col_b[S:] * u0[src][None, :])
                forced = forced + np.tensordot(powk[:, :, None] * (Vinv @ dx0)[None], Vo,
                                               axes=([1], [1])).transpose(0, 2, 1)
            Phi.append(w * forced.reshape(-1, lay.n_linear))
            fixed.append(w * free.ravel())
        return np.vstack(Phi), np.concatenate(fixed), A, c, ga

    def solve_linear(self, th: np.ndarray):
        Phi, fixed, A, c, ga = self.design(th)
        lo = np.zeros(self.lay.n_linear)
        lo[-1] = -np.inf
        scale = np.sqrt((Phi**2).mean(axis=0))
        scale[scale == 0] = 1.0
        # tall problem: reduce to a square system via the Cholesky factor of the normal matrix
        Ps = Phi / scale
        y = self.target - fixed
        gram = Ps.T @ Ps
        gram[np.diag_indices_from(gram)] += 1e-10 * np.trace(gram) / len(gram)
        L = np.linalg.cholesky(gram)
        sol = lsq_linear(L.T, np.linalg.solve(L, Ps.T @ y), bounds=(lo, np.inf), method="bvls")
        beta = sol.x / scale
        return beta, Phi @ beta + fixed - self.target, A, c, ga

    def residuals(self, th: np.ndarray) -> np.ndarray:
        return self.solve_linear(th)[1]


class _EquationErrorRC:
    """Separable RC fit on one-step (equation) error at a step ``h``, all sensors at once.

    For fixed capacities and conductances (``A = -C⁻¹G``, stable by construction) the exact
    zero-order hold gives ``x[k+1] - Ad x[k] = Γ (B u[k] + b0)`` with ``Ad = expm(A h)`` and
    ``Γ = A⁻¹(Ad - I)``. So ``Z = Γ⁻¹(x[k+1] - Ad x[k])`` is linear in the input gains: each
    node's row of ``B`` (``>= 0``) and its offset ``b0`` come from a non-negative least-squares
    problem of ``M`` unknowns on a QR factor of the centred inputs computed once (variable
    projection, Golub & Pereyra 1973). ``least_squares`` searches only the log capacities and
    conductances; residuals are mapped back to °C by ``Γ``.
    """

    def __init__(self, trace: Trace) -> None:
        S = len(trace.temp_names)
        self.lay = _RCLayout(S, len(trace.input_names))
        self.h = trace.dt_s
        X0 = np.vstack([s.temps_c[:-1] for s in trace.segments])
        X1 = np.vstack([s.temps_c[1:] for s in trace.segments])
        U = np.vstack([s.inputs[:-1] for s in trace.segments])
        self.n_rows = len(U)
        self.u_mean, self.x0_mean, self.x1_mean = U.mean(axis=0), X0.mean(axis=0), X1.mean(axis=0)
        scale = U.std(axis=0)
        self.active = scale > 1e-12 * (1.0 + np.abs(self.u_mean))
        self.scale = np.where(self.active, scale, 1.0)
        Uc = ((U - self.u_mean) / self.scale)[:, self.active]
        # every residual lies in the span of [Uc, X0c, X1c]: one QR here shrinks the residual
        # vector from K·n to (M + 2n)·n entries with the same norm (Golub & Van Loan §5.3)
        _, R = np.linalg.qr(np.column_stack([Uc, X0 - self.x0_mean, X1 - self.x1_mean]))
        ma = Uc.shape[1]
        self.Ru, self.R0, self.R1 = R[:, :ma], R[:, ma:ma + S], R[:, ma + S:]

    def unpack(self, th: np.ndarray):
        c, g, ga = self.lay.unpack(th)
        A = -(np.diag(g.sum(axis=1) + ga) - g) / c[:, None]
        Ad = expm(A * self.h)
        Gam = np.linalg.solve(A, Ad - np.eye(len(A)))
        return A, Ad, Gam

    def gains(self, th: np.ndarray):
        """``(A, B [n, M], b0 [n], residuals)`` for log parameters ``th``; the residuals have the
        norm of the one-step errors in °C over all rows and sensors."""
        A, Ad, Gam = self.unpack(th)
        Zr = np.linalg.solve(Gam, (self.R1 - self.R0 @ Ad.T).T).T          # [p, n], centred
        z_mean = np.linalg.solve(Gam, self.x1_mean - Ad @ self.x0_mean)
        Bs = self._nonneg_gains(Zr)
        B = Bs / self.scale
        b0 = z_mean - B @ self.u_mean
        E = (Zr - self.Ru @ Bs[:, self.active].T) @ Gam.T
        return A, B, b0, E.ravel()

    def _nonneg_gains(self, Zr: np.ndarray) -> np.ndarray:
        """Scaled input gains [nodes, M] ``>= 0``: one NNLS per column of ``Zr`` on ``Ru``."""
        Bs = np.zeros((Zr.shape[1], self.lay.M))
        if self.Ru.shape[1]:
            for i in range(Zr.shape[1]):
                Bs[i, self.active] = nnls(self.Ru, Zr[:, i], maxiter=50 * self.Ru.shape[1])[0]
        return Bs

    def warm_start(self, A_lin: np.ndarray | None) -> np.ndarray:
        """Log parameters of an RC network near a linear model's continuous ``A`` (unit
        capacities, conductances from its symmetrised off-diagonal part), else uniform."""
        lay = self.lay
        th = np.full(lay.size, math.log(0.1 / self.h))
        th[: lay.n - 1] = 0.0
        if A_lin is None:
            return th
        floor = 1e-3 * np.abs(np.diag(A_lin)).mean()
        sym = 0.5 * (A_lin + A_lin.T)
        g = np.maximum(sym[lay.pairs], floor)
        ga = np.maximum(-A_lin.sum(axis=1), floor)
        npair = len(lay.pairs[0])
        th[lay.n - 1: lay.n - 1 + npair] = np.log(g)
        th[lay.n - 1 + npair:] = np.log(ga)
        return th


class _EquationErrorRCHidden(_EquationErrorRC):
    """:class:`_EquationErrorRC` with one unmeasured node (board/heat sink) not heated by the
    inputs: its temperature is simulated from the measured sensors, ``h[k+1] = a h[k] +
    g (A_hs x[k] + b0_h)`` (exact hold of the sampled sensors, quasi-steady start in each
    segment), and enters the sensors' one-step error as a known regressor. ``b0_h > 0`` (its
    ambient drive) is one more searched parameter; the part of ``h`` outside the span of the
    QR basis adds its exact share to the residual norm."""

    def __init__(self, trace: Trace) -> None:
        super().__init__(trace)
        S = len(trace.temp_names)
        self.S = S
        self.lay = _RCLayout(S + 1, len(trace.input_names))
        self.x0_segs = [s.temps_c[:-1] for s in trace.segments]
        U = np.vstack([s.inputs[:-1] for s in trace.segments])
        Uc = ((U - self.u_mean) / self.scale)[:, self.active]
        X0 = np.vstack(self.x0_segs)
        X1 = np.vstack([s.temps_c[1:] for s in trace.segments])
        self.Q, _ = np.linalg.qr(np.column_stack([Uc, X0 - self.x0_mean, X1 - self.x1_mean]))

    def _hidden_path(self, A: np.ndarray, b0h: float) -> np.ndarray:
        ahh, ahs = A[self.S, self.S], A[self.S, :self.S]
        a = math.exp(ahh * self.h)
        g = (a - 1.0) / ahh
        out = []
        for x in self.x0_segs:
            d = x @ ahs + b0h
            h0 = -d[0] / ahh
            y = lfilter([g], [1.0, -a], d, zi=[a * h0])[0]
            out.append(np.concatenate([[h0], y[:-1]]))
        return np.concatenate(out)

    def gains(self, th: np.ndarray):
        S = self.S
        b0h = math.exp(th[-1])
        A, Ad, Gam = self.unpack(th[:-1])
        hpath = self._hidden_path(A, b0h)
        hc = hpath - hpath.mean()
        qh = self.Q.T @ hc
        h_perp = math.sqrt(max(float(hc @ hc - qh @ qh), 0.0))
        Gss, Ash = Gam[:S, :S], Ad[:S, S]
        Yr = self.R1 - self.R0 @ Ad[:S, :S].T - np.outer(qh, Ash)
        Zr = np.linalg.solve(Gss, Yr.T).T
        z_mean = np.linalg.solve(Gss, self.x1_mean - Ad[:S, :S] @ self.x0_mean - Ash * hpath.mean()
                                 - Gam[:S, S] * b0h)
        Bs = self._nonneg_gains(Zr)
        B = np.vstack([Bs / self.scale, np.zeros((1, self.lay.M))])
        b0 = np.concatenate([z_mean - B[:S] @ self.u_mean, [b0h]])
        E = (Zr - self.Ru @ Bs[:, self.active].T) @ Gss.T
        return A, B, b0, np.concatenate([E.ravel(), -h_perp * Ash])

    def warm_start_from(self, th0: np.ndarray, x_mean: float) -> np.ndarray:
        """Log parameters extending a hidden-free solution ``th0`` by a slow node weakly coupled
        to every sensor, at about the sensors' mean temperature."""
        S, small = self.S, _RCLayout(self.S, self.lay.M)
        c, g, ga = small.unpack(th0)
        n = S + 1
        G = np.zeros((n, n))
        G[:S, :S] = g
        G[:S, S] = G[S, :S] = 0.5 * np.mean(ga)
        ga1 = np.concatenate([0.5 * ga, [0.5 * np.sum(ga)]])
        c1 = np.concatenate([c, [c.sum()]])
        th = np.concatenate([np.log(c1[1:]), np.log(np.maximum(G[self.lay.pairs], 1e-12)), np.log(ga1)])
        b0h = ga1[-1] * max(x_mean - 10.0, 1.0) / c1[-1]
        return np.concatenate([th, [math.log(b0h)]])


def _rc_equation_error(trace: Trace, A_lin: np.ndarray | None, max_nfev: int,
                       progress: ProgressFn | None = None, hidden: int = 0,
                       th0: np.ndarray | None = None) -> tuple[ThermalModel, np.ndarray]:
    """Fit :class:`_EquationErrorRC` (``hidden=0``, warm start from ``A_lin``) or
    :class:`_EquationErrorRCHidden` (``hidden=1``, warm start from the hidden-free ``th0``) at
    the trace's step; returns the model and its log parameters."""
    if hidden:
        pb = _EquationErrorRCHidden(trace)
        start = np.clip(pb.warm_start_from(th0, float(np.mean(pb.x0_mean))), -29.0, 14.0)
    else:
        pb = _EquationErrorRC(trace)
        start = pb.warm_start(A_lin)
    calls = [0]
    n_jac = len(start) + 1
    label = f"rc, {hidden} hidden node(s)"

    def fun(th):
        calls[0] += 1
        if progress and calls[0] % n_jac == 0:
            progress(f"{label}: least squares, {calls[0] // n_jac} Jacobians", calls[0] // n_jac, max_nfev)
        return pb.gains(th)[3]

    with threadpool_limits(1):
        res = least_squares(fun, start, bounds=(-30.0, 15.0), max_nfev=max_nfev * n_jac, method="trf")
        A, B, b0, resid = pb.gains(res.x)
    Ad, Bfull = zoh(A, np.column_stack([B, b0]), trace.dt_s)
    c_, g_, ga_ = pb.lay.unpack(res.x[:pb.lay.size])
    S = len(trace.temp_names)
    model = ThermalModel(
        "rc", trace.temp_names, trace.input_names, trace.dt_s, Ad, Bfull[:, :-1], Bfull[:, -1], hidden, A, B, b0,
        info={"solver": "variable projection on one-step error at the fit step: scipy.optimize.least_squares "
                        "(trf) over log capacities and conductances, non-negative least squares for the "
                        "input gains of every sensor, free offset per sensor"
                        + ("; hidden node simulated from the sensors" if hidden else ""), "hidden_nodes": hidden,
              "zero_input_steady_c": np.linalg.solve(-A, b0).tolist(), "capacitance_rel": c_.tolist(),
              "conductance_rel": g_.tolist(), "ambient_conductance_rel": ga_.tolist(),
              "evaluations": int(res.nfev), "parameters": len(start) + S * (pb.lay.M + 1),
              "train_one_step_rmse_c": float(np.linalg.norm(resid) / math.sqrt(pb.n_rows * S))})
    return model, res.x


def fit_rc(trace: Trace, hidden: int | str = "auto", *, seed: int = 0, fit_step_s: float | None = None,
           shooting_s: float | None = None, max_nfev: int = 60,
           progress: ProgressFn | None = None) -> ThermalModel:
    """Fit a stable RC network (non-negative input gains) to a trace, fast, at a validated step.

    The linear model is fitted first (its fit step validated on a held-out segment,
    :func:`fit_linear`); the RC network is then fitted at that step on one-step error by
    variable projection with exact discretisation (:class:`_EquationErrorRC`), all sensors at
    once, warm-started from the linear model's continuous ``A``; a network with one hidden node
    (board/heat sink, :class:`_EquationErrorRCHidden`) is warm-started from that one. With
    ``hidden="auto"`` both are fitted on all but a held-out segment and the one with the lower
    open-loop error there is refitted on the whole trace.

    Parameters
    ----------
    hidden
        "auto" (default: 0 or 1 by validation), 0 or 1 (no validation), or >= 2 (the slower
        open-loop fit, :func:`fit_rc_open_loop`).
    fit_step_s
        Fit at this step instead of validating one.
    shooting_s
        Open-loop fit with multiple shooting (see :func:`fit_rc_open_loop`).
    max_nfev
        Budget of the nonlinear search, in Jacobians.
    """
    auto = hidden == "auto"
    if not auto and (not isinstance(hidden, int) or hidden < 0):
        raise ConfigError(f"--hidden must be an integer >= 0 or auto, got {hidden!r}")
    if (not auto and hidden > 1) or shooting_s:
        if progress:
            progress(f"rc: open-loop fit with {0 if auto else hidden} hidden node(s)", 0, 1)
        return fit_rc_open_loop(trace, hidden=0 if auto else hidden, seed=seed, shooting_s=shooting_s)
    S, M = len(trace.temp_names), len(trace.input_names)
    n_par, n_obs = _RCLayout(S, M).size + S * (M + 1), sum((len(s) - 1) * S for s in trace.segments)
    if n_obs < n_par:
        raise ConfigError(f"{trace.path}: {n_obs} observations to fit, but the rc model has {n_par} "
                          f"parameters; give more rows (or fewer columns)")
    lin = fit_linear(trace, fit_step_s=fit_step_s, progress=progress)
    q = int(round(lin.info["fit_step_s"] / trace.dt_s))

    def fit_candidates(tr: Trace, most: int) -> dict[int, ThermalModel]:
        m0, th0 = _rc_equation_error(_at_step(tr, q), lin.A, max_nfev, progress)
        if most == 0:
            return {0: m0}
        return {0: m0, 1: _rc_equation_error(_at_step(tr, q), None, max_nfev, progress, hidden=1, th0=th0)[0]}

    table = []
    if auto:
        fit_part, held = _split_for_validation(trace)
        try:
            table = [{"hidden_nodes": h, "held_out_open_loop_rmse_c": _open_loop_rmse(m, held)}
                     for h, m in fit_candidates(fit_part, 1).items()]
        except (ConfigError, np.linalg.LinAlgError, ValueError) as exc:   # too little data to hold out
            _log.info("rc: hidden-node validation skipped (%s); 0 hidden nodes", exc)
            hidden = 0
    best = min(table, key=lambda r: r["held_out_open_loop_rmse_c"])["hidden_nodes"] if table else hidden
    model = _at_trace_step(fit_candidates(trace, best)[best], trace.dt_s)
    model.info.update(fit_step_s=q * trace.dt_s, hidden_validation=table,
                      linear_warm_start_fit_step_s=lin.info["fit_step_s"], step_validation=lin.info["validation"])
    return model


def fit_rc_open_loop(trace: Trace, hidden: int = 0, max_nfev: int = 100, seed: int = 0,
                     max_samples: int = 2000, shooting_s: float | None = None) -> ThermalModel:
    """Fit a stable RC network to the open-loop response of every training segment.

    Parameters
    ----------
    trace
        Training data; each segment is simulated from its first sample.
    hidden
        Unmeasured nodes to add (e.g. 1 for a board/heat-sink node).
    max_nfev
        Budget of function evaluations per start of ``least_squares``.
    seed
        Seed of the random perturbation of the second and later starts.
    max_samples
        Longer traces are fitted on every q-th sample (q = ceil(rows / max_samples)) with inputs
        averaged over each block; the continuous model is then discretised exactly at the
        trace's own step, so predictions keep the original resolution.
    shooting_s
        Also fit windows of this length restarted from the measured state (multiple
        shooting), weighted equally with the open-loop error; None = open loop only.
    """
    if hidden < 0:
        raise ConfigError(f"--hidden must be >= 0, got {hidden}")
    S, M = len(trace.temp_names), len(trace.input_names)
    lay = _RCLayout(S + hidden, M)
    n_par = lay.size + lay.n_linear
    n_obs = sum((len(s) - 1) * S for s in trace.segments)
    if n_obs < n_par:
        raise ConfigError(f"{trace.path}: {n_obs} observations to fit, but the rc model has {n_par} "
                          f"parameters; give more rows (or fewer columns / hidden nodes)")
    q = max(1, math.ceil(trace.n_rows / max_samples))
    dt = trace.dt_s * q
    segs = [s for s in (_decimate(s, q) for s in trace.segments) if len(s) >= 2]
    span = sum(len(s) - 1 for s in segs) * dt
    parts, weights = _shooting_parts(segs, shooting_s, dt)
    vp = _VarProRC(parts, S, hidden, dt, weights)
    rng = np.random.default_rng(seed)
    best = None
    with threadpool_limits(1):   # small dense problems: BLAS threads only contend
        for k, tau0 in enumerate((span / 20.0, span / 200.0, span / 2.0)):
            tau0 = max(tau0, 3 * dt)
            th = np.full(lay.size, math.log(1.0 / tau0))
            th[: lay.n - 1] = 0.0
            if k:
                th += rng.normal(0.0, 0.5, lay.size)
            res = least_squares(vp.residuals, th, bounds=(-30.0, 15.0), x_scale=1.0,
                                max_nfev=max_nfev, method="trf")
            _log.debug("rc start %d: cost %.4g after %d evaluations (%s)", k, res.cost, res.nfev, res.message)
            if best is None or res.cost < best.cost:
                best = res
        beta, resid, A, c_, ga_ = vp.solve_linear(best.x)
    s_ = beta[:-1].reshape(lay.n, M)
    tamb = float(beta[-1])
    B = s_ / c_[:, None]
    b0 = ga_ * tamb / c_
    Ad, Bfull_d = zoh(A, np.column_stack([B, b0]), trace.dt_s)
    n_fit = sum((len(sg) - 1) * S for sg in segs)
    sq = float(np.sum(resid[:n_fit] ** 2)) / weights[0] ** 2
    _, g_, _ = lay.unpack(best.x)
    return ThermalModel(
        "rc", trace.temp_names, trace.input_names, trace.dt_s, Ad, Bfull_d[:, :-1], Bfull_d[:, -1], hidden,
        A, B, b0,
        info={"solver": "variable projection: scipy.optimize.least_squares (trf) over conductances and "
                        "capacities, bounded linear least squares for input gains and ambient; "
                        "open-loop error", "hidden_nodes": hidden,
              "ambient_c": tamb, "capacitance_rel": c_.tolist(), "conductance_rel": g_.tolist(),
              "ambient_conductance_rel": ga_.tolist(), "input_map_rel": s_.tolist(),
              "evaluations": int(best.nfev), "parameters": n_par, "fit_step_s": dt,
              "train_open_loop_rmse_c": math.sqrt(sq / n_fit)})


def _shooting_parts(segs: list, shooting_s: float | None, dt: float) -> tuple[list, list[float]]:
    """Open loop over every segment, plus (multiple shooting) windows of ``shooting_s`` restarted
    from the measured state: the first fits the slow modes and gains, the second the fast ones.
    Returns the parts and their weights (each family weighs as much as the other)."""
    n_open = sum(len(s) - 1 for s in segs)
    parts, weights = list(segs), [1.0 / math.sqrt(n_open)] * len(segs)
    if shooting_s:
        w_len = max(2, int(round(shooting_s / dt)) + 1)
        chunks = [Segment(s.times_s[i:i + w_len], s.temps_c[i:i + w_len], s.inputs[i:i + w_len])
                  for s in segs for i in range(0, len(s) - w_len + 1, w_len - 1)]
        if chunks:
            n_chunk = sum(len(c) - 1 for c in chunks)
            parts += chunks
            weights += [1.0 / math.sqrt(n_chunk)] * len(chunks)
    return parts, weights


def _decimate(seg, q: int):
    """Every q-th sample; the input over each new step is the mean of the q inputs it spans."""
    if q == 1:
        return seg
    K = (len(seg) - 1) // q
    idx = np.arange(K + 1) * q
    u = seg.inputs[: K * q].reshape(K, q, -1).mean(axis=1)
    u = np.vstack([u, seg.inputs[idx[-1]][None, :]])
    return Segment(seg.times_s[idx], seg.temps_c[idx], u)


def fit_model(trace: Trace, model: str = "linear", *, window: int | None = None, ridge: float = 0.0,
              hidden: int | str = "auto", shooting_s: float | None = None, seed: int = 0,
              fit_step_s: float | None = None, progress: ProgressFn | None = None) -> ThermalModel:
    """Fit ``model`` ("linear" or "rc") on ``trace`` and record the training range in ``info``."""
    if model == "linear":
        if hidden not in (None, 0, "auto") or shooting_s:
            raise ConfigError("--hidden and --shooting apply to the rc model only")
        m = fit_linear(trace, ridge=ridge, window=window, fit_step_s=fit_step_s, progress=progress)
    elif model == "rc":
        if window is not None:
            raise ConfigError("--window applies to the linear model only")
        m = fit_rc(trace, hidden=hidden, shooting_s=shooting_s, seed=seed, fit_step_s=fit_step_s,
                   progress=progress)
    else:
        raise ConfigError(f"--model must be linear or rc, got {model!r}")
    m.info.setdefault("discretisation", f"{EXACT}: an RC network fitted in continuous time")
    m.info.update(trace=trace.path, time_column=trace.time_name, train_from_s=float(trace.segments[0].times_s[0]),
                  train_to_s=float(trace.segments[-1].times_s[-1]), segments=len(trace.segments),
                  rows=trace.n_rows, resampled=trace.resampled, breaks=trace.breaks,
                  continuous_time=m.continuous_time)
    return m


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------
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


def align_trace(model: ThermalModel, trace: Trace) -> tuple[Trace, str | None]:
    """``trace`` at a step the model predicts, and a note when it had to be resampled.

    A continuous-time model (rc, and linear with a real or approximated matrix logarithm) is
    re-discretised exactly at the trace's step. A discrete-only model (a given ``fixed``
    model, or a fitted one that was unstable at its step) gets the trace resampled onto its
    own step: temperatures interpolated linearly, inputs averaged over each step under a
    zero-order hold, as the fits decimate (:meth:`Trace.resample`). Horizons in steps are then
    steps of the model.
    """
    if model.continuous_time or abs(trace.dt_s - model.dt_s) <= 1e-3 * model.dt_s:
        return trace, None
    note = (f"the {model.kind} model is discrete-time at {model.dt_s:.4g} s: trace step {trace.dt_s:.4g} s "
            f"resampled onto the model's {model.dt_s:.4g} s step (temperatures interpolated, inputs averaged "
            f"over each step); horizons in steps are {model.dt_s:.4g} s steps")
    return trace.resample(model.dt_s, hold_inputs=True), note


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
    from .reference import RidgeReference, at_step

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
        se, pe, n = np.zeros(S), np.zeros(S), 0
        for s in trace.segments:
            K = len(s) - h
            if K <= 0:
                continue
            X = model.initial_states(s.temps_c[:K], s.inputs[:K])
            for j in range(h):
                X = X @ Ad.T + s.inputs[j:j + K] @ Bd.T + c
            target = s.temps_c[h:h + K]
            se += ((X[:, :S] - target) ** 2).sum(axis=0)
            pe += ((s.temps_c[:K] - target) ** 2).sum(axis=0)
            n += K
        re = ridge.squared_errors(trace, h) if ridge is not None else None
        out.append(_score(f"{h} steps", h, h * trace.dt_s, n, se, pe, names, re))
    se, pe, n = np.zeros(S), np.zeros(S), 0
    for s in trace.segments:
        pred = model.simulate(s.temps_c[0], s.inputs, trace.dt_s)
        se += ((pred[1:] - s.temps_c[1:]) ** 2).sum(axis=0)
        pe += ((s.temps_c[0] - s.temps_c[1:]) ** 2).sum(axis=0)
        n += len(s) - 1
    out.append(_score("open loop", None, None, n, se, pe, names))
    return out


def _score(label, steps, seconds, n, se, pe, names, re=None) -> HorizonScore:
    if n == 0:
        nan = {k: float("nan") for k in [*names, "overall"]}
        return HorizonScore(label, steps, seconds, 0, nan, dict(nan), dict(nan) if re is not None else None)

    def per(v):
        d = {k: float(np.sqrt(v[i] / n)) for i, k in enumerate(names)}
        d["overall"] = float(np.sqrt(v.sum() / (n * len(names))))
        return d
    return HorizonScore(label, steps, seconds, n, per(se), per(pe), per(re) if re is not None else None)
