"""Workflows: typed requests → plans and thermal results (docs/ARCHITECTURE.md; above search, plan
and thermal, below the CLI and batch).

The CLI commands, batch tasks and notebooks all go through here, so each can do whatever the
others can (thermal objectives, measured GA fitness, TOPSIS weights); the thermal commands
(``thermal fit|eval``, ``schedule``, ``tadf``, ``shift``) have their requests in
:mod:`.thermal_requests` and their runs in :mod:`.thermal`, ``calibrate``'s in
:mod:`.calibrate_requests` and :mod:`.calibrate`::

    from optimizer.workflow import PipelineRequest, parse_request, plan_pipeline

    outcome = plan_pipeline(parse_request(PipelineRequest, {"model": "mobilenet_v2", "device": "pixel6"}))
    outcome.plan, outcome.result, outcome.problem
"""

from .calibrate import ProbeOutcome, ProfileFitOutcome, fit_device_to_profiles, probe_device
from .calibrate_requests import FidelityReportRequest, ProbeRequest, ProfileFitRequest, parse_calibrate_request
from .objectives import pipeline_objective_names, split_objective_names, split_weights
from .outcome import PlanOutcome, annotate_thermal
from .pipeline import (
    PipelineSearch,
    finish_pipeline_plan,
    make_pipeline_plan,
    pipeline_problem,
    plan_pipeline,
    prepare_pipeline,
)
from .requests import PipelineRequest, SplitRequest, parse_request
from .split import make_split_plan, plan_split, run_split_job, split_costs
from .thermal import (
    ScheduleOutcome,
    ThermalEvaluation,
    evaluate_thermal_model,
    fit_thermal_model,
    run_schedule_request,
    run_shift_request,
    run_tadf_request,
)
from .thermal_requests import ScheduleRequest, ShiftRequest, TadfRequest, ThermalEvalRequest, ThermalFitRequest
from .training import learned_model_from_tables

__all__ = ["FidelityReportRequest", "PipelineRequest", "PipelineSearch", "PlanOutcome", "ProbeOutcome", "ProbeRequest",
           "ProfileFitOutcome", "ProfileFitRequest", "ScheduleOutcome", "ScheduleRequest", "ShiftRequest",
           "SplitRequest", "TadfRequest", "ThermalEvalRequest", "ThermalEvaluation", "ThermalFitRequest",
           "annotate_thermal", "evaluate_thermal_model", "finish_pipeline_plan", "fit_device_to_profiles",
           "fit_thermal_model", "learned_model_from_tables", "make_pipeline_plan", "make_split_plan",
           "parse_calibrate_request", "parse_request", "pipeline_objective_names", "pipeline_problem", "plan_pipeline",
           "plan_split", "prepare_pipeline", "probe_device", "run_schedule_request", "run_shift_request",
           "run_split_job", "run_tadf_request", "split_costs", "split_objective_names", "split_weights"]
