"""Plan schema v1, validated I/O (docs/ARCHITECTURE.md, ``plan/``)."""

from .io import plan_from_dict, plan_to_json, read_plan, shipped_schema, write_plan
from .schema import (
    SCHEMA_VERSION, CrossingTensor, HostStage, ModelRef, Plan, Predicted, Provenance, SearchInfo, Split,
    Stage, new_provenance, plan_json_schema
)

__all__ = [
    "SCHEMA_VERSION", "CrossingTensor", "HostStage", "ModelRef", "Plan", "Predicted", "Provenance",
    "SearchInfo", "Split", "Stage", "new_provenance", "plan_from_dict", "plan_json_schema",
    "plan_to_json", "read_plan", "shipped_schema", "write_plan",
]
