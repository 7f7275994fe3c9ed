"""The thermal commands, from a typed request to a result: fits, scores and the published policies.

Each function takes a request of :mod:`optimizer.workflow.thermal_requests` (checked before any
work) and returns what the caller prints or saves; the CLI (``dnnplan thermal fit|eval``,
``schedule``, ``tadf``, ``shift``) and notebooks call the same functions.

* :func:`fit_thermal_model`: read the trace, fit a linear or RC model (docs/METHODS.md section 11);
* :func:`evaluate_thermal_model`: RMSE at horizons next to a ridge reference and persistence;
* :func:`run_schedule_request`: SPLASH over a workload (docs/METHODS.md section 5), optionally the
  highest FPS the policy sustains;
* :func:`run_tadf_request`: TADF clocks and HSWD splits (docs/METHODS.md section 4);
* :func:`run_shift_request`: Play It Cool shifting against both fixed variants (docs/METHODS.md
  section 6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..hardware.thermal_spec import ThermalSpec
    from ..thermal.fit import HorizonScore, ProgressFn, ThermalModel
    from ..thermal.policies.shifting import ShiftResult, ShiftSetup
    from ..thermal.policies.splash import ScheduleResult
    from ..thermal.policies.tadf import HswdResult, TadfResult
    from ..thermal.trace import Trace
    from .thermal_requests import (
        ScheduleRequest,
        ShiftRequest,
        TadfRequest,
        ThermalEvalRequest,
        ThermalFitRequest,
    )


def fit_thermal_model(request: ThermalFitRequest, progress: ProgressFn | None = None) -> tuple[ThermalModel, Trace]:
    """The fitted model and the training trace it was fitted on.

    The model's ``info`` records what ``thermal eval`` needs to fit the ridge reference on the
    same training data: the resolved trace path, the training window and the gap factor.
    """
    from ..thermal.fit import fit_model
    from ..thermal.trace import read_trace

    trace = read_trace(request.trace, request.time, request.temps, request.inputs, gap_factor=request.gap_factor)
    if request.windowed:
        trace = trace.window(request.train_from_s, request.train_to_s)
    model = fit_model(trace, request.model, window=request.window, ridge=request.ridge, hidden=request.hidden,
                      shooting_s=request.shooting_s, seed=request.seed, fit_step_s=request.fit_step_s,
                      progress=progress)
    model.info.update(trace_resolved=str(Path(request.trace).resolve()),
                      train_window_s=[request.train_from_s, request.train_to_s], gap_factor=request.gap_factor)
    return model, trace


@dataclass
class ThermalEvaluation:
    """A model scored on a trace: the scores per horizon and what they were computed on."""

    request: ThermalEvalRequest
    model: ThermalModel
    trace: Trace                  # the evaluated trace, at a step the model predicts
    described: str                # the trace as read, before any resampling onto the model's step
    resampled_note: str | None    # why and how the trace was resampled (None: it was not)
    scores: list[HorizonScore]
    train: Trace | None           # the ridge reference's training data (None: no reference)

    @property
    def ridge_reference(self) -> str | None:
        """One sentence on the ridge reference and its training data (None without it)."""
        if self.train is None:
            return None
        return (f"ridge reference: T[k+h]-T[k] ~ current temps, current inputs and the inputs' mean over the "
                f"horizon (one RidgeCV per horizon), fitted on {self.train.path} ({self.train.n_rows} rows)")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the model, the trace and the scores per horizon."""
        return {"model": self.request.model_path, "kind": self.model.kind, "trace": self.request.trace,
                "dt_s": self.trace.dt_s, "rows": self.trace.n_rows, "segments": len(self.trace.segments),
                "breaks": self.trace.breaks, "resampled": self.resampled_note,
                "ridge_reference": self.ridge_reference, "scores": [s.to_dict() for s in self.scores]}


def evaluate_thermal_model(request: ThermalEvalRequest) -> ThermalEvaluation:
    """RMSE per sensor at each horizon and open loop, next to a ridge reference and persistence."""
    from ..thermal.fit import align_trace, evaluate, load_model
    from ..thermal.reference import training_trace
    from ..thermal.trace import read_trace

    model = load_model(request.model_path)
    time_column = request.time or model.info.get("time_column") or "t_s"
    train = None
    if request.ridge_reference:
        info = model.info if request.train is None else {**model.info, "train_window_s": None}
        train = training_trace(info, model.temp_names, model.input_names, request.train, where=request.model_path)
    trace = read_trace(request.trace, time_column, list(model.temp_names), list(model.input_names),
                       gap_factor=request.gap_factor)
    if request.windowed:
        trace = trace.window(request.from_s, request.to_s)
    described = trace.describe()
    trace, note = align_trace(model, trace)
    longest = max(len(segment) for segment in trace.segments) - 1
    horizons = horizon_steps(request.horizons, trace.dt_s, longest, "--horizons")
    scores = evaluate(model, trace, horizons, train=train)
    return ThermalEvaluation(request, model, trace, described, note, scores, train)


def horizon_steps(horizons: tuple[str, ...], dt: float, max_steps: int, label: str) -> list[int]:
    """Horizons in steps of ``dt`` from step counts (``10``) or durations (``60s``); each within
    ``[1, max_steps]`` (the longest segment's steps: a longer horizon has no start to score)."""
    out = []
    for horizon in horizons:
        steps = round(float(horizon[:-1]) / dt) if horizon.endswith("s") else int(horizon)
        if steps < 1:
            raise ConfigError(f"{label}: {horizon!r} is shorter than one step ({dt:g} s)")
        if steps > max_steps:
            raise ConfigError(f"{label}: {horizon!r} is {steps} steps, longer than the trace's longest segment "
                              f"({max_steps} steps of {dt:g} s): no start can be scored; give at most {max_steps}")
        out.append(steps)
    return out


@dataclass
class ScheduleOutcome:
    """A SPLASH run and its setting; ``max_fps`` is the rate found by the FPS search (None without one)."""

    request: ScheduleRequest
    workload: Any                 # the WorkloadSpec that was run
    spec: ThermalSpec
    result: ScheduleResult
    max_fps: float | None = None

    def heated_node(self, worker: str) -> str:
        """The RC node a worker's heat mostly goes to (the radio's for the cloud)."""
        from ..thermal.policies.splash_model import heated_node

        return heated_node(self.spec, worker)


#: ``progress(rate, capacity)`` before each run of the FPS search
RateProgress = Callable[[float, float], None]
#: ``progress(message)`` before the profiling of a workload (seconds of cost-model work)
StepProgress = Callable[[str], None]


def run_schedule_request(request: ScheduleRequest, *, on_profiling: StepProgress | None = None,
                         on_rate: RateProgress | None = None) -> ScheduleOutcome:
    """SPLASH scheduling of ``request.workload``: one run at ``fps`` (default the workload's), or with
    ``max_fps`` the highest rate the policy sustains and the run at it."""
    from ..hardware import load_device
    from ..hardware.thermal_spec import thermal_spec_of
    from ..thermal.policies.splash import max_sustainable_fps, run_schedule
    from ..thermal.policies.workload import load_workload, worker_profiles

    workload = load_workload(request.workload)
    spec = thermal_spec_of(load_device(request.device))
    if on_profiling is not None:
        on_profiling(f"profiling {workload.name} on {request.device} (cost model) ...")
    profiles = worker_profiles(workload, request.device, request.network)
    settings = dict(duration_s=request.duration_s, eta=request.eta, ambient_c=request.ambient_c, seed=request.seed)
    if not request.max_fps:
        fps = workload.fps if request.fps is None else request.fps
        return ScheduleOutcome(request, workload, spec, run_schedule(profiles, spec, request.policy, fps, **settings))
    found, at_found = max_sustainable_fps(profiles, spec, request.policy, progress=on_rate, **settings)
    if at_found is None:
        raise ConfigError(f"{request.policy} cannot run {workload.name} on {request.device} even at 0.5 FPS for "
                          f"{request.duration_s:g} s without reaching thermal status severe")
    result = run_schedule(profiles, spec, request.policy, found, **settings)
    return ScheduleOutcome(request, workload, spec, result, max_fps=found)


def run_tadf_request(request: TadfRequest) -> tuple[TadfResult, HswdResult]:
    """TADF's clocks on ``request.device`` and HSWD's layer splits of ``request.model`` at them."""
    from ..graph import load_graph
    from ..thermal.policies.tadf import hswd, tadf

    clocks = tadf(request.device, request.ambient_c, request.tmax_c, request.theta_c)
    return clocks, hswd(load_graph(request.model), request.device, clocks.clock_hz, request.dtype)


def run_shift_request(request: ShiftRequest) -> tuple[ShiftSetup, dict[str, ShiftResult]]:
    """Play It Cool's shifting and the always-large and always-small runs of ``request.model``."""
    from ..thermal.policies.shifting import compare_shifting, shift_setup

    setup = shift_setup(request.device, request.model, dtype=request.dtype, fps=request.fps,
                        reload_s=request.reload_s)
    return setup, compare_shifting(setup, duration_s=request.duration_s, ambient_c=request.ambient_c)
