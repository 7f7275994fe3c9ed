"""The default RC fit: a stable RC network fitted on one-step (equation) error, all sensors at once.

The linear model is fitted first (:func:`.linear.fit_linear`, its step validated on a held-out
segment); the RC network is then fitted at that step by variable projection with exact
discretisation (:class:`EquationErrorRC`), warm-started from the linear model's continuous
``A``, with 0 or 1 hidden node (:class:`EquationErrorRCHidden`) chosen on a held-out segment.
2+ hidden nodes and multiple shooting go to the slower open-loop fit
(:func:`.rc_open_loop.fit_rc_open_loop`). docs/METHODS.md section 11 gives the method.
"""

from __future__ import annotations

import logging
import math

import numpy as np
from scipy.linalg import expm
from scipy.optimize import least_squares, nnls
from scipy.signal import lfilter
from threadpoolctl import threadpool_limits

from ...errors import ConfigError
from ..rc import zoh
from ..trace import Trace
from .linear import fit_linear
from .model import ThermalModel
from .rc_layout import RCLayout
from .rc_open_loop import fit_rc_open_loop
from .steps import ProgressFn, at_step, at_trace_step, open_loop_rmse, split_for_validation

_log = logging.getLogger(__name__)


class EquationErrorRC:
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
        self.layout = RCLayout(S, len(trace.input_names))
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
        """``(A, Ad, Γ)`` of log parameters ``th`` (``c, g, ga``: capacities, pair and ambient
        conductances, :meth:`RCLayout.unpack`)."""
        c, g, ga = self.layout.unpack(th)
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
        Bs = np.zeros((Zr.shape[1], self.layout.M))
        if self.Ru.shape[1]:
            for i in range(Zr.shape[1]):
                Bs[i, self.active] = nnls(self.Ru, Zr[:, i], maxiter=50 * self.Ru.shape[1])[0]
        return Bs

    def warm_start(self, A_lin: np.ndarray | None) -> np.ndarray:
        """Log parameters of an RC network near a linear model's continuous ``A`` (unit
        capacities, conductances from its symmetrised off-diagonal part), else uniform."""
        layout = self.layout
        th = np.full(layout.size, math.log(0.1 / self.h))
        th[: layout.n - 1] = 0.0
        if A_lin is None:
            return th
        floor = 1e-3 * np.abs(np.diag(A_lin)).mean()
        sym = 0.5 * (A_lin + A_lin.T)
        g = np.maximum(sym[layout.pairs], floor)
        ga = np.maximum(-A_lin.sum(axis=1), floor)
        n_pairs = len(layout.pairs[0])
        th[layout.n - 1: layout.n - 1 + n_pairs] = np.log(g)
        th[layout.n - 1 + n_pairs:] = np.log(ga)
        return th


class EquationErrorRCHidden(EquationErrorRC):
    """:class:`EquationErrorRC` with one unmeasured node (board/heat sink) not heated by the
    inputs: its temperature is simulated from the measured sensors, ``h[k+1] = a h[k] +
    g (A_hs x[k] + b0_h)`` (exact hold of the sampled sensors, quasi-steady start in each
    segment), and enters the sensors' one-step error as a known regressor. ``b0_h > 0`` (its
    ambient drive) is one more searched parameter; the part of ``h`` outside the span of the
    QR basis adds its exact share to the residual norm."""

    def __init__(self, trace: Trace) -> None:
        super().__init__(trace)
        S = len(trace.temp_names)
        self.S = S
        self.layout = RCLayout(S + 1, len(trace.input_names))
        self.x0_segs = [s.temps_c[:-1] for s in trace.segments]
        U = np.vstack([s.inputs[:-1] for s in trace.segments])
        Uc = ((U - self.u_mean) / self.scale)[:, self.active]
        X0 = np.vstack(self.x0_segs)
        X1 = np.vstack([s.temps_c[1:] for s in trace.segments])
        self.Q, _ = np.linalg.qr(np.column_stack([Uc, X0 - self.x0_mean, X1 - self.x1_mean]))

    def _hidden_path(self, A: np.ndarray, b0h: float) -> np.ndarray:
        """The hidden node's temperature at every row, simulated from the measured sensors."""
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
        """:meth:`EquationErrorRC.gains` with the hidden node's ambient drive as the last parameter."""
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
        B = np.vstack([Bs / self.scale, np.zeros((1, self.layout.M))])
        b0 = np.concatenate([z_mean - B[:S] @ self.u_mean, [b0h]])
        E = (Zr - self.Ru @ Bs[:, self.active].T) @ Gss.T
        return A, B, b0, np.concatenate([E.ravel(), -h_perp * Ash])

    def warm_start_from(self, th0: np.ndarray, x_mean: float) -> np.ndarray:
        """Log parameters extending a hidden-free solution ``th0`` by a slow node weakly coupled
        to every sensor, at about the sensors' mean temperature."""
        S, small = self.S, RCLayout(self.S, self.layout.M)
        c, g, ga = small.unpack(th0)
        n = S + 1
        G = np.zeros((n, n))
        G[:S, :S] = g
        G[:S, S] = G[S, :S] = 0.5 * np.mean(ga)
        ga1 = np.concatenate([0.5 * ga, [0.5 * np.sum(ga)]])
        c1 = np.concatenate([c, [c.sum()]])
        th = np.concatenate([np.log(c1[1:]), np.log(np.maximum(G[self.layout.pairs], 1e-12)), np.log(ga1)])
        b0h = ga1[-1] * max(x_mean - 10.0, 1.0) / c1[-1]
        return np.concatenate([th, [math.log(b0h)]])


def fit_rc_equation_error(trace: Trace, A_lin: np.ndarray | None, max_nfev: int,
                          progress: ProgressFn | None = None, hidden: int = 0,
                          th0: np.ndarray | None = None) -> tuple[ThermalModel, np.ndarray]:
    """Fit :class:`EquationErrorRC` (``hidden=0``, warm start from ``A_lin``) or
    :class:`EquationErrorRCHidden` (``hidden=1``, warm start from the hidden-free ``th0``) at
    the trace's step; returns the model and its log parameters."""
    problem: EquationErrorRC
    if hidden:
        problem = EquationErrorRCHidden(trace)
        start = np.clip(problem.warm_start_from(th0, float(np.mean(problem.x0_mean))), -29.0, 14.0)
    else:
        problem = EquationErrorRC(trace)
        start = problem.warm_start(A_lin)
    calls = [0]
    n_jac = len(start) + 1
    label = f"rc, {hidden} hidden node(s)"

    def residuals(th):
        calls[0] += 1
        if progress and calls[0] % n_jac == 0:
            progress(f"{label}: least squares, {calls[0] // n_jac} Jacobians", calls[0] // n_jac, max_nfev)
        return problem.gains(th)[3]

    with threadpool_limits(1):
        res = least_squares(residuals, start, bounds=(-30.0, 15.0), max_nfev=max_nfev * n_jac, method="trf")
        A, B, b0, resid = problem.gains(res.x)
    Ad, Bfull = zoh(A, np.column_stack([B, b0]), trace.dt_s)
    capacity, conductance, ambient_conductance = problem.layout.unpack(res.x[:problem.layout.size])
    S = len(trace.temp_names)
    model = ThermalModel(
        "rc", trace.temp_names, trace.input_names, trace.dt_s, Ad, Bfull[:, :-1], Bfull[:, -1], hidden, A, B, b0,
        info={"solver": "variable projection on one-step error at the fit step: scipy.optimize.least_squares "
                        "(trf) over log capacities and conductances, non-negative least squares for the "
                        "input gains of every sensor, free offset per sensor"
                        + ("; hidden node simulated from the sensors" if hidden else ""), "hidden_nodes": hidden,
              "zero_input_steady_c": np.linalg.solve(-A, b0).tolist(), "capacitance_rel": capacity.tolist(),
              "conductance_rel": conductance.tolist(), "ambient_conductance_rel": ambient_conductance.tolist(),
              "evaluations": int(res.nfev), "parameters": len(start) + S * (problem.layout.M + 1),
              "train_one_step_rmse_c": float(np.linalg.norm(resid) / math.sqrt(problem.n_rows * S))})
    return model, res.x


def fit_rc(trace: Trace, hidden: int | str = "auto", *, seed: int = 0, fit_step_s: float | None = None,
           shooting_s: float | None = None, max_nfev: int = 60,
           progress: ProgressFn | None = None) -> ThermalModel:
    """Fit a stable RC network (non-negative input gains) to a trace, fast, at a validated step.

    The linear model is fitted first (its fit step validated on a held-out segment,
    :func:`.linear.fit_linear`); the RC network is then fitted at that step on one-step error by
    variable projection with exact discretisation (:class:`EquationErrorRC`), all sensors at
    once, warm-started from the linear model's continuous ``A``; a network with one hidden node
    (board/heat sink, :class:`EquationErrorRCHidden`) is warm-started from that one. With
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
    n_par, n_obs = RCLayout(S, M).size + S * (M + 1), sum((len(s) - 1) * S for s in trace.segments)
    if n_obs < n_par:
        raise ConfigError(f"{trace.path}: {n_obs} observations to fit, but the rc model has {n_par} "
                          f"parameters; give more rows (or fewer columns)")
    linear = fit_linear(trace, fit_step_s=fit_step_s, progress=progress)
    q = int(round(linear.info["fit_step_s"] / trace.dt_s))

    def fit_candidates(portion: Trace, most: int) -> dict[int, ThermalModel]:
        """The fits of ``portion`` with 0 and (``most`` 1) 1 hidden node, by hidden-node count."""
        no_hidden, th0 = fit_rc_equation_error(at_step(portion, q), linear.A, max_nfev, progress)
        if most == 0:
            return {0: no_hidden}
        return {0: no_hidden,
                1: fit_rc_equation_error(at_step(portion, q), None, max_nfev, progress, hidden=1, th0=th0)[0]}

    table = []
    if auto:
        training, held = split_for_validation(trace)
        try:
            table = [{"hidden_nodes": h, "held_out_open_loop_rmse_c": open_loop_rmse(m, held)}
                     for h, m in fit_candidates(training, 1).items()]
        except (ConfigError, np.linalg.LinAlgError, ValueError) as exc:   # too little data to hold out
            _log.info("rc: hidden-node validation skipped (%s); 0 hidden nodes", exc)
            hidden = 0
    best = min(table, key=lambda r: r["held_out_open_loop_rmse_c"])["hidden_nodes"] if table else hidden
    model = at_trace_step(fit_candidates(trace, best)[best], trace.dt_s)
    model.info.update(fit_step_s=q * trace.dt_s, hidden_validation=table,
                      linear_warm_start_fit_step_s=linear.info["fit_step_s"],
                      step_validation=linear.info["validation"])
    return model
