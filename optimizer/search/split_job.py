"""A small split-search job: every (model, device, seed) of a SmartSplit-style setting.

The job spec (``search_spaces/jobs/smartsplit.yaml``) lists models, devices, one network and
one server, the granularity, the solver and the seeds; :func:`optimizer.workflow.run_split_job`
runs the solver and every baseline on each combination and returns one row per run
(:func:`comparison_row`). (The general batch-job
system, with a result store and parallel execution, is :mod:`optimizer.batch`.)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .split_baselines import BASELINES


class SplitJob(BaseModel):
    """Job spec of a split search over models x devices x seeds (unknown keys are rejected)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["split"] = "split"
    name: str
    description: str = ""
    models: list[str] = Field(min_length=1)
    devices: list[str] = Field(min_length=1)
    network: str
    server: str
    granularity: Literal["op", "kernel", "block"] = "block"
    dtype: Literal["int8", "fp16", "fp32"] = "int8"
    wire_dtypes: list[Literal["int8", "fp16", "fp32"]] = Field(default=["int8", "fp16", "fp32"], min_length=1)
    processors: list[str] | None = Field(default=None, description="Head processors (default: all)")
    cost_model: Literal["table", "smartsplit"] = "table"
    solver: Literal["nsga2", "exact"] = "nsga2"
    population: int = Field(default=40, ge=4)
    generations: int = Field(default=40, ge=1)
    topsis: Literal["paper", "classic"] = "paper"
    weights: list[float] | None = None
    seeds: list[int] = Field(default=[0], min_length=1)
    interior_only: bool = Field(default=False, description="Interior boundaries 1..L-1 only (SmartSplit's "
                                                           "setting; default: 0 and L searched too)")
    include_extremes: bool = Field(default=False, description="Accepted for compatibility, no effect")
    runtime: str | None = Field(default=None, description="Phone inference runtime profile (default: the device's)")


def comparison_row(result: Any, layers: int) -> dict[str, Any]:
    """The chosen split of a split search ``result`` next to every baseline's (JSON-ready).

    Keys: ``layers`` (the network's L), ``chosen`` (decision dict), ``objectives``, ``breakdown``
    (the choice's latency and energy terms: client, upload, server, ...), ``evaluations``, ``front_size``, and for every name in :data:`BASELINES` its ``decision``
    and ``objectives``. ``dnnplan split --job`` and batch split tasks both record this.
    """
    row: dict[str, Any] = {"layers": layers, "chosen": result.best.decision, "objectives": result.best.objectives,
                           "breakdown": dict(result.best.metrics),
                           "evaluations": result.evaluations, "front_size": len(result.front)}
    for b in BASELINES:
        row[b] = {"decision": result.baselines[b].decision, "objectives": result.baselines[b].objectives}
    return row


def split_metrics(row: dict[str, Any]) -> dict[str, float]:
    """Flat numeric columns of a :func:`comparison_row`: ``chosen_split`` and, per baseline,
    ``<name>_split``, ``<name>_latency_s`` and ``<name>_energy_j`` (a batch table's columns)."""
    out = {"chosen_split": row["chosen"]["split"]}
    for b in BASELINES:
        out[f"{b}_split"] = row[b]["decision"]["split"]
        for k in ("latency_s", "energy_j"):
            out[f"{b}_{k}"] = row[b]["objectives"][k]
    return out
