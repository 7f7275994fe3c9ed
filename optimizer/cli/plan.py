"""``dnnplan validate``: check a plan file against schema v1."""

from __future__ import annotations

import typer

from . import app
from .common import console, print_json


@app.command()
def validate(
    plan_file: str = typer.Argument(..., metavar="PLAN.json", help="Plan to check."),
    as_json: bool = typer.Option(False, "--json", help="Print the validated plan as JSON."),
) -> None:
    """Check a plan against schema v1 (fields, types, layer ranges) and its device (every processor
    exists; warns if the device changed since planning); exit 2 naming the bad field."""
    from ..plan import read_plan
    from ..plan.device_check import check_plan_device

    plan = read_plan(plan_file)
    check_plan_device(plan, plan_file)
    if as_json:
        print_json(plan.model_dump(mode="json"))
        return
    where = (f"{len(plan.stages)} stages" if plan.stages else "") + (
        f" split at {plan.split.layer}" if plan.split else "")
    console.print(f"[green]valid[/]: {plan_file} — {plan.kind} plan of {plan.model.name} "
                  f"({plan.model.layers} {plan.model.granularity} layers, {plan.model.dtype}) on "
                  f"{plan.device}: {where.strip()}", highlight=False)
