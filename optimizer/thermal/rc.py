"""Lumped RC thermal network with exact zero-order-hold discretisation.

Continuous model (HotSpot-style compact model, Skadron et al., ISCA 2003; the single-node
form ``T(t) = T(0) e^{-t/RC} + (T_env + P R)(1 - e^{-t/RC})`` is TADF's, Zhang et al. 2023)::

    C dT/dt = -L T - diag(g_amb) (T - T_amb) + S P

with ``C`` the node heat capacities (J/K), ``L`` the Laplacian of the node-to-node
conductances (W/K), ``g_amb`` the conductances to ambient, ``S`` the input map (share of input
``m``'s power heating node ``n``) and ``P`` the inputs (W). With ``G = L + diag(g_amb)``
symmetric positive definite, ``A = -C⁻¹G`` has real negative eigenvalues: the model is stable
and its time constants are ``-1/λ``.

Discretisation over a step ``dt`` holds inputs constant (zero-order hold) and is exact for any
``dt`` (Van Loan's augmented-matrix exponential, ``scipy.linalg.expm``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import expm

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..hardware.thermal_spec import ThermalSpec


@dataclass(frozen=True)
class DiscreteThermalModel:
    """``x[k+1] = Ad x[k] + Bd u[k] + ed * T_amb``, exact for step ``dt`` (zero-order hold)."""

    Ad: np.ndarray
    Bd: np.ndarray
    ed: np.ndarray
    dt: float

    def step(self, x: np.ndarray, u: np.ndarray, ambient_c: float) -> np.ndarray:
        """One step; ``x`` may be [N] or [K, N] (K states advanced at once) with ``u`` alike."""
        return x @ self.Ad.T + u @ self.Bd.T + self.ed * ambient_c

    def simulate(self, x0: np.ndarray, inputs: np.ndarray, ambient_c: float) -> np.ndarray:
        """States [K+1, N] from ``x0`` under inputs [K, M] held over each step."""
        inputs = np.atleast_2d(np.asarray(inputs, dtype=float))
        return propagate(self.Ad, x0, inputs @ self.Bd.T + self.ed * ambient_c)


@dataclass(frozen=True)
class RCNetwork:
    """An N-node RC network with M inputs (see the module docstring for the equations).

    Parameters
    ----------
    node_names, input_names
        Names of the N nodes and the M inputs (processors, or trace columns).
    capacitance_j_per_k
        [N] heat capacities.
    conductance_w_per_k
        [N, N] symmetric node-to-node conductances (diagonal ignored).
    ambient_conductance_w_per_k
        [N] conductances to ambient (at least one positive).
    input_map
        [N, M] non-negative: how much of input m's power (W) heats node n.
    """

    node_names: tuple[str, ...]
    input_names: tuple[str, ...]
    capacitance_j_per_k: np.ndarray
    conductance_w_per_k: np.ndarray
    ambient_conductance_w_per_k: np.ndarray
    input_map: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        n, m = len(self.node_names), len(self.input_names)
        c = np.asarray(self.capacitance_j_per_k, float)
        g = np.asarray(self.conductance_w_per_k, float)
        ga = np.asarray(self.ambient_conductance_w_per_k, float)
        s = np.asarray(self.input_map, float).reshape(n, m)
        if c.shape != (n,) or g.shape != (n, n) or ga.shape != (n,):
            raise ConfigError(f"RC network shapes: C {c.shape}, G {g.shape}, g_amb {ga.shape}; expected "
                              f"({n},), ({n}, {n}), ({n},)")
        if np.any(c <= 0) or np.any(g < 0) or np.any(ga < 0) or np.any(s < 0):
            raise ConfigError("RC network: capacitances must be > 0, conductances and input map >= 0")
        if not np.allclose(g, g.T):
            raise ConfigError("RC network: node-to-node conductances must be symmetric")
        if not np.any(ga > 0):
            raise ConfigError("RC network: no node couples to ambient")
        for name, arr in (("capacitance_j_per_k", c), ("conductance_w_per_k", g),
                          ("ambient_conductance_w_per_k", ga), ("input_map", s)):
            arr = arr.copy()
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @classmethod
    def from_spec(cls, spec: ThermalSpec) -> RCNetwork:
        """The network of a device's thermal spec; inputs are its processors, in spec order.

        Input ``p`` heats node ``n`` by ``heats[n] * heat_scale`` per reported watt."""
        names = spec.node_names
        idx = {n: i for i, n in enumerate(names)}
        n = len(names)
        g = np.zeros((n, n))
        ga = np.zeros(n)
        for c in spec.couplings:
            a, b = c.between
            if "ambient" in (a, b):
                ga[idx[b if a == "ambient" else a]] += c.conductance_w_per_k
            else:
                g[idx[a], idx[b]] += c.conductance_w_per_k
                g[idx[b], idx[a]] += c.conductance_w_per_k
        procs = spec.processor_names
        s = np.zeros((n, len(procs)))
        for j, p in enumerate(procs):
            proc = spec.processors[p]
            for node, share in proc.heats.items():
                s[idx[node], j] += share * proc.heat_scale
        return cls(names, procs, np.array([nd.capacitance_j_per_k for nd in spec.nodes]), g, ga, s)

    # -- continuous model -------------------------------------------------------------------
    @property
    def total_conductance(self) -> np.ndarray:
        """``G = L + diag(g_amb)`` [N, N] (symmetric positive definite)."""
        g = self.conductance_w_per_k.copy()
        np.fill_diagonal(g, 0.0)
        lap = np.diag(g.sum(axis=1)) - g
        return lap + np.diag(self.ambient_conductance_w_per_k)

    def continuous(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(A, B, e)`` of ``dT/dt = A T + B P + e T_amb``."""
        cinv = 1.0 / self.capacitance_j_per_k
        A = -cinv[:, None] * self.total_conductance
        B = cinv[:, None] * self.input_map
        e = cinv * self.ambient_conductance_w_per_k
        return A, B, e

    def time_constants_s(self) -> np.ndarray:
        """Time constants ``-1/λ`` of the network, largest first (s)."""
        return _time_constants(self.continuous()[0])

    def discretise(self, dt: float) -> DiscreteThermalModel:
        """Exact zero-order-hold discretisation for step ``dt`` (cached per ``dt``)."""
        if not dt > 0:
            raise ConfigError(f"time step must be > 0 s, got {dt!r}")
        key = round(float(dt), 12)
        if key not in self._cache:
            A, B, e = self.continuous()
            self._cache[key] = zoh(A, np.column_stack([B, e]), dt)
        Ad, Bfull = self._cache[key]
        return DiscreteThermalModel(Ad, Bfull[:, :-1], Bfull[:, -1], float(dt))

    # -- closed forms ----------------------------------------------------------------------------
    def steady_gain(self) -> np.ndarray:
        """``K`` [N, M] with steady state ``T = T_amb + K P`` (``G⁻¹ S``, cached)."""
        if "K" not in self._cache:
            self._cache["K"] = np.linalg.solve(self.total_conductance, self.input_map)
        return self._cache["K"]

    def steady_state(self, power_w: np.ndarray, ambient_c: float) -> np.ndarray:
        """Steady temperatures [..., N] for constant inputs [..., M] (vectorised over candidates)."""
        return ambient_c + np.asarray(power_w, float) @ self.steady_gain().T

    def modes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(λ [N], V [N, N], V⁻¹)`` with ``A = V diag(λ) V⁻¹``, via the symmetric form
        ``C^{-1/2} G C^{-1/2}`` (real eigenvalues, well-conditioned)."""
        if "modes" not in self._cache:
            r = 1.0 / np.sqrt(self.capacitance_j_per_k)
            sym = -(r[:, None] * self.total_conductance * r[None, :])
            lam, q = np.linalg.eigh(sym)
            self._cache["modes"] = (lam, r[:, None] * q, q.T / r[None, :])
        return self._cache["modes"]

    def response(self, power_w: np.ndarray, times_s: np.ndarray, ambient_c: float,
                 initial_c: np.ndarray | float | None = None) -> np.ndarray:
        """Closed-form temperatures under constant inputs, for many candidates at once.

        Parameters
        ----------
        power_w
            [K, M] constant input powers of K candidates.
        times_s
            [J] times after the start.
        initial_c
            [N] or [K, N] initial temperatures (default: everything at ambient).

        Returns
        -------
        numpy.ndarray
            [K, J, N] temperatures.
        """
        p = np.atleast_2d(np.asarray(power_w, float))
        t = np.asarray(times_s, float)
        tss = self.steady_state(p, ambient_c)                       # [K, N]
        x0 = np.full_like(tss, ambient_c) if initial_c is None else np.broadcast_to(initial_c, tss.shape)
        lam, V, Vinv = self.modes()
        z = (x0 - tss) @ Vinv.T                                      # [K, N] modal deviations
        decay = np.exp(np.outer(t, lam))                             # [J, N]
        return tss[:, None, :] + np.einsum("kn,jn,mn->kjm", z, decay, V)


    def node_response(self, power_w: np.ndarray, times_s: np.ndarray, node: int, ambient_c: float) -> np.ndarray:
        """[K, J] temperature of one node under constant inputs [K, M] from ambient (closed form)."""
        p = np.atleast_2d(np.asarray(power_w, float))
        lam, V, Vinv = self.modes()
        tss = self.steady_state(p, ambient_c)
        z = (ambient_c - tss) @ Vinv.T                               # [K, n modes]
        decay = np.exp(np.outer(np.asarray(times_s, float), lam))    # [J, n]
        return tss[:, node][:, None] + (z * V[node][None, :]) @ decay.T


def zoh(A: np.ndarray, B: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact zero-order-hold discretisation ``(Ad, Bd)`` of ``dx/dt = A x + B u`` (Van Loan 1978):
    ``expm([[A, B], [0, 0]] dt) = [[Ad, Bd], [0, I]]``."""
    n, m = A.shape[0], B.shape[1]
    aug = np.zeros((n + m, n + m))
    aug[:n, :n] = A
    aug[:n, n:] = B
    e = expm(aug * dt)
    return e[:n, :n], e[:n, n:]


def propagate(Ad: np.ndarray, x0: np.ndarray, drive: np.ndarray) -> np.ndarray:
    """States [K+1, N] of ``x[k+1] = Ad x[k] + drive[k]`` from ``x0`` [N] under ``drive`` [K, N]
    (the discrete model with inputs and ambient already mapped to node heating per step)."""
    out = np.empty((len(drive) + 1, len(x0)))
    out[0] = x0
    x = np.asarray(x0, dtype=float)
    AdT = Ad.T
    for k in range(len(drive)):
        x = x @ AdT + drive[k]
        out[k + 1] = x
    return out


def _time_constants(A: np.ndarray) -> np.ndarray:
    lam = np.linalg.eigvals(A).real
    return np.sort(-1.0 / lam)[::-1]
