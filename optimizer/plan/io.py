"""Read, validate and write plans. Writes are atomic; errors name the file and the field."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import SchemaError
from ..fileio import atomic_write_text, read_json
from ..yamlio import describe_validation_error
from .schema import Plan, plan_json_schema

SCHEMA_FILE = "plan-v1.schema.json"


def shipped_schema() -> dict[str, Any]:
    """The JSON Schema file shipped inside the package."""
    return json.loads(resources.files("optimizer.plan").joinpath("schemas", SCHEMA_FILE).read_text())


def format_validation_error(where: str, exc: ValidationError) -> str:
    """First pydantic error as one line: ``FILE: field a.b[2].c: message (got VALUE)``."""
    return f"{where}: {describe_validation_error(exc)}"


def plan_from_dict(data: Any, where: str = "plan") -> Plan:
    """Validate a decoded JSON object as a plan."""
    if not isinstance(data, dict):
        raise SchemaError(f"{where}: a plan must be a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if version is not None and version != 1:
        raise SchemaError(f"{where}: field schema_version: {version!r} is not supported; this dnnplan "
                          "reads version 1 (upgrade dnnplan or re-export the plan)")
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise SchemaError(format_validation_error(where, exc)) from None


def read_plan(path: str | os.PathLike[str]) -> Plan:
    """Load and validate ``path``."""
    return plan_from_dict(read_json(path, "plan file"), str(path))


def plan_to_json(plan: Plan) -> str:
    """Canonical JSON text of a plan."""
    return plan.model_dump_json(indent=2) + "\n"


def write_plan(plan: Plan, path: str | os.PathLike[str]) -> Path:
    """Validate again and write atomically."""
    Plan.model_validate(plan.model_dump())
    return atomic_write_text(path, plan_to_json(plan))


def write_schema(path: str | os.PathLike[str]) -> Path:
    """Regenerate the shipped JSON Schema file (used when the schema changes)."""
    return atomic_write_text(path, json.dumps(plan_json_schema(), indent=2) + "\n")
