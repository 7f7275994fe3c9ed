"""The fitted thermal model: a discrete state-space model, its continuous-time form, JSON I/O.

Every fit of :mod:`optimizer.thermal.fit` ends as ``x[k+1] = Ad x[k] + Bd u[k] + c`` whose first
``S`` states are the measured sensors (:class:`ThermalModel`). A model that also holds its
continuous-time form ``dx/dt = A x + B u + b0`` (rc, and linear models with a real matrix
logarithm) is re-discretised exactly at any step; a discrete-only one (a given ``fixed`` model,
or a linear fit unstable at its step) gets traces resampled onto its own step
(:func:`align_trace`). How a linear model was made continuous-time is recorded in
``info["discretisation"]``, starting with one of :data:`EXACT`, :data:`APPROXIMATE`,
:data:`DISCRETE_ONLY`. Models are written as versioned JSON (:func:`save_model`,
:func:`load_model`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from ...errors import ConfigError, SchemaError
from ...fileio import atomic_write_json, read_json
from ..rc import propagate, zoh
from ..trace import Trace

MODEL_SCHEMA = "dnnplan.thermal-model"
MODEL_VERSION = 1
ModelKind = Literal["linear", "rc", "fixed"]
#: how a linear model was written (start of ``info["discretisation"]``, see
#: :func:`optimizer.thermal.fit.linear.continuous_from_discrete`)
EXACT, APPROXIMATE, DISCRETE_ONLY = ("continuous-time, exact", "continuous-time by approximation",
                                     "discrete-time only")


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

