"""The open-loop RC fit: a stable RC network fitted to the simulated response of every segment.

Used for 2+ hidden nodes and for multiple shooting (``thermal fit --model rc --hidden 2``,
``--shooting S``); slower than the one-step fit of :mod:`.rc_equation_error`. The capacities and
conductances are searched by ``scipy.optimize.least_squares``; for each candidate the input gains
and the ambient, on which the simulated temperatures depend linearly, are solved exactly by
bounded linear least squares (variable projection, Golub & Pereyra 1973; docs/METHODS.md
section 11).
"""

from __future__ import annotations

import logging
import math

import numpy as np
from scipy.optimize import least_squares, lsq_linear
from scipy.signal import lfilter
from threadpoolctl import threadpool_limits

from ...errors import ConfigError
from ..rc import zoh
from ..trace import Segment, Trace
from .model import ThermalModel
from .rc_layout import RCLayout
from .steps import decimate

_log = logging.getLogger(__name__)


class OpenLoopRCProblem:
    """Variable projection (Golub & Pereyra 1973) for the open-loop RC fit.

    For fixed capacities and conductances the simulated sensor temperatures are affine in the
    input map ``S`` and the ambient ``T_amb`` (the initial state of hidden nodes included), so
    those are solved exactly by bounded linear least squares (``S >= 0``) inside every
    evaluation; ``least_squares`` only searches the conductances and capacities. Simulation
    is exact ZOH in modal coordinates (``A = V diag(λ) V⁻¹``, one first-order filter per mode).

    ``c, g, ga`` are the capacities, pair conductances and ambient conductances of
    :meth:`RCLayout.unpack`; ``segments`` are simulated from their first sample, each weighted
    by ``weights``.
    """

    def __init__(self, segments: list[Segment], S: int, hidden: int, dt: float, weights: list[float]) -> None:
        self.segments, self.S, self.hidden, self.dt = segments, S, hidden, dt
        self.layout = RCLayout(S + hidden, segments[0].inputs.shape[1])
        self.weights = weights
        self.target = np.concatenate([w * sg.temps_c[1:].ravel() for sg, w in zip(segments, weights, strict=True)])
        self.steps = [np.arange(len(sg) - 1, dtype=float) + 1.0 for sg in segments]

    def design(self, th: np.ndarray):
        """(Φ [rows, n·M+1], fixed part [rows], A, c, ga) for nonlinear parameters ``th``."""
        layout, S, dt = self.layout, self.S, self.dt
        n, M = layout.n, layout.M
        c, g, ga = layout.unpack(th)
        G = np.diag(g.sum(axis=1) + ga) - g
        A = -G / c[:, None]
        r = 1.0 / np.sqrt(c)
        lam, q = np.linalg.eigh(-(r[:, None] * G * r[None, :]))
        V, Vinv = r[:, None] * q, q.T / r[None, :]
        a = np.exp(lam * dt)
        gain = (a - 1.0) / lam
        # columns: S[i, m] (node i, input m) in row-major order, then T_amb
        col_b = np.zeros((n, layout.n_linear))                    # continuous drive of each column
        for i in range(n):
            col_b[i, i * M:(i + 1) * M] = 1.0 / c[i]
        col_b[:, -1] = ga / c
        Vo = V[:S]                                              # observed rows
        if self.hidden:
            Ahh_inv = np.linalg.inv(A[S:, S:])
            Aho = A[S:, :S]
        Phi, fixed = [], []
        for sg, w, kk in zip(self.segments, self.weights, self.steps, strict=True):
            U = np.column_stack([sg.inputs, np.ones(len(sg))])     # [K, M+1]
            # F[k, l, j] = sum_{i<k} a_l^{k-1-i} U[i, j] * gain_l  (k = 1..K-1)
            F = np.empty((len(sg) - 1, n, M + 1))
            for mode in range(n):
                F[:, mode, :] = lfilter([1.0], [1.0, -a[mode]], U[:-1], axis=0) * gain[mode]
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
                dx0 = np.zeros((n, layout.n_linear))
                u0 = np.concatenate([sg.inputs[0], [1.0]])
                dx0[S:] = -Ahh_inv @ (col_b[S:] * u0[src][None, :])
                forced = forced + np.tensordot(powk[:, :, None] * (Vinv @ dx0)[None], Vo,
                                               axes=([1], [1])).transpose(0, 2, 1)
            Phi.append(w * forced.reshape(-1, layout.n_linear))
            fixed.append(w * free.ravel())
        return np.vstack(Phi), np.concatenate(fixed), A, c, ga

    def solve_linear(self, th: np.ndarray):
        """``(linear parameters, weighted residuals, A, c, ga)`` for nonlinear parameters ``th``: the
        input map (``>= 0``) and the ambient by bounded least squares."""
        Phi, fixed, A, c, ga = self.design(th)
        lo = np.zeros(self.layout.n_linear)
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
        """The weighted open-loop residuals (what ``least_squares`` minimises)."""
        return self.solve_linear(th)[1]


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
    layout = RCLayout(S + hidden, M)
    n_par = layout.size + layout.n_linear
    n_obs = sum((len(s) - 1) * S for s in trace.segments)
    if n_obs < n_par:
        raise ConfigError(f"{trace.path}: {n_obs} observations to fit, but the rc model has {n_par} "
                          f"parameters; give more rows (or fewer columns / hidden nodes)")
    q = max(1, math.ceil(trace.n_rows / max_samples))
    dt = trace.dt_s * q
    segments = [s for s in (decimate(s, q) for s in trace.segments) if len(s) >= 2]
    span = sum(len(s) - 1 for s in segments) * dt
    windows, weights = _shooting_windows(segments, shooting_s, dt)
    problem = OpenLoopRCProblem(windows, S, hidden, dt, weights)
    rng = np.random.default_rng(seed)
    best = None
    with threadpool_limits(1):   # small dense problems: BLAS threads only contend
        for k, tau0 in enumerate((span / 20.0, span / 200.0, span / 2.0)):
            tau0 = max(tau0, 3 * dt)
            th = np.full(layout.size, math.log(1.0 / tau0))
            th[: layout.n - 1] = 0.0
            if k:
                th += rng.normal(0.0, 0.5, layout.size)
            res = least_squares(problem.residuals, th, bounds=(-30.0, 15.0), x_scale=1.0,
                                max_nfev=max_nfev, method="trf")
            _log.debug("rc start %d: cost %.4g after %d evaluations (%s)", k, res.cost, res.nfev, res.message)
            if best is None or res.cost < best.cost:
                best = res
        linear, residuals, A, capacity, ambient_conductance = problem.solve_linear(best.x)
    input_map = linear[:-1].reshape(layout.n, M)
    ambient_c = float(linear[-1])
    B = input_map / capacity[:, None]
    b0 = ambient_conductance * ambient_c / capacity
    Ad, Bfull_d = zoh(A, np.column_stack([B, b0]), trace.dt_s)
    n_fit = sum((len(sg) - 1) * S for sg in segments)
    squared_error = float(np.sum(residuals[:n_fit] ** 2)) / weights[0] ** 2
    _, conductance, _ = layout.unpack(best.x)
    return ThermalModel(
        "rc", trace.temp_names, trace.input_names, trace.dt_s, Ad, Bfull_d[:, :-1], Bfull_d[:, -1], hidden,
        A, B, b0,
        info={"solver": "variable projection: scipy.optimize.least_squares (trf) over conductances and "
                        "capacities, bounded linear least squares for input gains and ambient; "
                        "open-loop error", "hidden_nodes": hidden,
              "ambient_c": ambient_c, "capacitance_rel": capacity.tolist(), "conductance_rel": conductance.tolist(),
              "ambient_conductance_rel": ambient_conductance.tolist(), "input_map_rel": input_map.tolist(),
              "evaluations": int(best.nfev), "parameters": n_par, "fit_step_s": dt,
              "train_open_loop_rmse_c": math.sqrt(squared_error / n_fit)})


def _shooting_windows(segments: list[Segment], shooting_s: float | None,
                      dt: float) -> tuple[list[Segment], list[float]]:
    """Open loop over every segment, plus (multiple shooting) windows of ``shooting_s`` restarted
    from the measured state: the first fits the slow modes and gains, the second the fast ones.
    Returns the windows and their weights (each family weighs as much as the other)."""
    n_open = sum(len(s) - 1 for s in segments)
    windows, weights = list(segments), [1.0 / math.sqrt(n_open)] * len(segments)
    if shooting_s:
        length = max(2, int(round(shooting_s / dt)) + 1)
        chunks = [Segment(s.times_s[i:i + length], s.temps_c[i:i + length], s.inputs[i:i + length])
                  for s in segments for i in range(0, len(s) - length + 1, length - 1)]
        if chunks:
            n_chunk = sum(len(c) - 1 for c in chunks)
            windows += chunks
            weights += [1.0 / math.sqrt(n_chunk)] * len(chunks)
    return windows, weights
