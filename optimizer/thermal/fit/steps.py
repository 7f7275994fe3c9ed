"""The step a thermal model is fitted at, chosen by open-loop error on a held-out segment.

One-step least squares at a fast logging step (0.1 s on the Odroid-XU3) mostly fits the sensors'
quantisation noise and biases the slow poles. The fits therefore run at a multiple ``q`` of the
trace's step (:data:`FIT_STEP_FACTORS`), with every sample decimated and the inputs averaged over
each new step (:func:`decimate`, :func:`at_step`); ``q`` is the one whose model, fitted on all
but a held-out portion of the trace (:func:`split_for_validation`), predicts that portion best
open loop (:func:`select_step`). docs/METHODS.md section 11 gives the method.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ...errors import ConfigError
from ..trace import Segment, Trace
from .model import ThermalModel, align_trace

#: ``progress(stage, done, total)``, called as a fit advances (the CLI draws a Rich bar)
ProgressFn = Callable[[str, int, int], None]
#: a fit of a trace at a decimation factor: ``fit_at(trace, q)`` -> model
FitAtStep = Callable[[Trace, int], ThermalModel]
#: candidate fit steps, in multiples of the trace's step
FIT_STEP_FACTORS = (1, 2, 5, 10, 20, 50, 100)


def decimate(segment: Segment, q: int) -> Segment:
    """Every q-th sample; the input over each new step is the mean of the q inputs it spans."""
    if q == 1:
        return segment
    K = (len(segment) - 1) // q
    idx = np.arange(K + 1) * q
    u = segment.inputs[: K * q].reshape(K, q, -1).mean(axis=1)
    u = np.vstack([u, segment.inputs[idx[-1]][None, :]])
    return Segment(segment.times_s[idx], segment.temps_c[idx], u)


def at_step(trace: Trace, q: int) -> Trace:
    """The trace decimated by ``q`` (inputs averaged over each new step); short segments dropped."""
    if q == 1:
        return trace
    segs = tuple(s for s in (decimate(s, q) for s in trace.segments) if len(s) >= 2)
    return replace(trace, dt_s=trace.dt_s * q, segments=segs)


def at_trace_step(model: ThermalModel, dt: float) -> ThermalModel:
    """A continuous-time model's discrete matrices stored for the trace's own step ``dt``."""
    if not model.continuous_time or model.dt_s == dt:
        return model
    Ad, Bd, c = model.discrete(dt)
    return replace(model, dt_s=dt, Ad=Ad, Bd=Bd, c=c)


def split_for_validation(trace: Trace) -> tuple[Trace, Trace]:
    """(training portion, held-out portion): the last segment if there are several, else the last quarter."""
    if len(trace.segments) >= 2:
        return replace(trace, segments=trace.segments[:-1]), replace(trace, segments=trace.segments[-1:])
    s = trace.segments[0]
    cut = int(0.75 * len(s))
    head, tail = (Segment(s.times_s[a:b], s.temps_c[a:b], s.inputs[a:b]) for a, b in ((0, cut + 1), (cut, len(s))))
    return replace(trace, segments=(head,)), replace(trace, segments=(tail,))


def open_loop_rmse(model: ThermalModel, trace: Trace) -> float:
    """RMSE (°C) over every sensor of ``model`` simulated from each segment's first sample."""
    trace, _ = align_trace(model, trace)
    squared_error, count = 0.0, 0
    for s in trace.segments:
        pred = model.simulate(s.temps_c[0], s.inputs, trace.dt_s)
        squared_error += float(((pred[1:] - s.temps_c[1:]) ** 2).sum())
        count += (len(s) - 1) * len(model.temp_names)
    return math.sqrt(squared_error / count) if count else math.inf


def select_step(trace: Trace, fit_at: FitAtStep, n_par: int, fit_step_s: float | None, label: str,
                progress: ProgressFn | None) -> tuple[int, list[dict]]:
    """The decimation factor whose model, fitted on the training portion, predicts the held-out portion best
    open loop (or the one giving ``fit_step_s``); returns it and the validation table."""
    if fit_step_s is not None:
        q = int(round(fit_step_s / trace.dt_s))
        if q < 1 or abs(q * trace.dt_s - fit_step_s) > 0.01 * fit_step_s:
            raise ConfigError(f"--fit-step {fit_step_s:g} s must be a whole multiple of the trace's "
                              f"{trace.dt_s:g} s step")
        return q, []
    training, held = split_for_validation(trace)
    table = []
    candidates = [q for q in FIT_STEP_FACTORS
                  if sum(len(s) // q for s in training.segments) >= 3 * n_par or q == 1]
    for i, q in enumerate(candidates):
        if progress:
            progress(f"{label}: validating fit step {q * trace.dt_s:g} s", i, len(candidates))
        try:
            err = open_loop_rmse(fit_at(training, q), held)
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
