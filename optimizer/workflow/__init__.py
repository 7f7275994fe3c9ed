"""Workflows: typed requests → plans (see DESIGN.md; above search, plan and thermal, below the
CLI and batch).

The CLI commands, batch tasks and notebooks all go through here, so each can do whatever the
others can (thermal objectives, measured GA fitness, TOPSIS weights)::

    from optimizer.workflow import PipelineRequest, parse_request, plan_pipeline

    outcome = plan_pipeline(parse_request(PipelineRequest, {"model": "mobilenet_v2", "device": "pixel6"}))
    outcome.plan, outcome.result, outcome.problem
"""

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
from .training import learned_model_from_tables

__all__ = ["PipelineRequest", "PipelineSearch", "PlanOutcome", "SplitRequest", "annotate_thermal",
           "finish_pipeline_plan", "learned_model_from_tables", "make_pipeline_plan", "make_split_plan",
           "parse_request", "pipeline_objective_names", "pipeline_problem", "plan_pipeline", "plan_split",
           "prepare_pipeline", "run_split_job", "split_costs", "split_objective_names", "split_weights"]
