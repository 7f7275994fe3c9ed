"""Job files: a grid of searches and/or an explicit task list, validated with pydantic.

A job expands into :class:`TaskSpec` objects, each identified by a stable ``task_id`` (hash of
the canonical task spec and the tool version), so re-running a job finds finished work.

Example (``search_spaces/jobs/paper_grid.yaml``)::

    name: paper_grid
    defaults: {dtype: int8}
    grid:
      models: [mobilenet_v2, resnet50]
      devices: [pixel6, galaxy_s22]
      seeds: [0, 1, 2, 3, 4]
      map: {solvers: [ga], objectives: [[throughput]], granularity: op}
      split: {networks: [wifi_10], solvers: [nsga2], granularity: block}
    tasks:
      - {kind: split, model: alexnet, device: galaxy_j6, network: wifi_10, solver: exact}
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .. import __version__
from ..errors import SchemaError
from ..yamlio import describe_validation_error, line_of, load_model_yaml, read_yaml

Kind = Literal["map", "split"]
DEFAULT_SOLVER: dict[str, str] = {"map": "ga", "split": "nsga2"}
DEFAULT_OBJECTIVES: dict[str, tuple[str, ...]] = {"map": ("throughput",), "split": ("latency", "energy", "memory")}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _objective_list(v: Any) -> Any:
    return [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else v


class TaskDefaults(_Strict):
    """Fields a job may set once for all its tasks."""

    dtype: Literal["int8", "fp16", "fp32"] = "int8"
    granularity: Literal["op", "block"] | None = None
    stages: int = Field(default=3, ge=1, le=8)
    server: str | None = None
    memory_limit: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)


class TaskSpec(_Strict):
    """One search: what to run, on what, with which solver and seed."""

    kind: Kind
    model: str
    device: str
    network: str | None = None
    server: str | None = None
    solver: str | None = None
    objectives: list[str] | None = None
    seed: int = 0
    dtype: Literal["int8", "fp16", "fp32"] = "int8"
    granularity: Literal["op", "block"] | None = None
    stages: int = Field(default=3, ge=1, le=8)
    memory_limit: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)

    _normalise_objectives = field_validator("objectives", mode="before")(_objective_list)

    @model_validator(mode="after")
    def _complete(self) -> TaskSpec:
        if self.solver is None:
            self.solver = DEFAULT_SOLVER[self.kind]
        if self.objectives is None:
            self.objectives = list(DEFAULT_OBJECTIVES[self.kind])
        if self.granularity is None:
            self.granularity = "op" if self.kind == "map" else "block"
        if self.kind == "split" and not self.network:
            raise ValueError("a split task needs a 'network' (e.g. wifi_10)")
        if self.kind == "map":
            self.network = None
        return self

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def task_id(self) -> str:
        """Stable id: hash of the canonical spec and the tool version."""
        text = json.dumps({"task": self.canonical(), "tool": __version__}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def input_key(self) -> tuple[str, str, str, str]:
        """Tasks sharing this key share one graph and cost table."""
        return (self.model, self.granularity or "op", self.device, self.dtype)

    def label(self) -> str:
        net = f"/{self.network}" if self.network else ""
        return f"{self.kind} {self.model} on {self.device}{net} {self.solver} seed={self.seed}"


class SearchGrid(_Strict):
    """Per-search axes of a grid (map or split)."""

    solvers: list[str] = Field(default_factory=list)
    objectives: list[list[str]] = Field(default_factory=list)
    networks: list[str] = Field(default_factory=list)
    granularity: Literal["op", "block"] | None = None
    settings: dict[str, Any] = Field(default_factory=dict)

    @field_validator("objectives", mode="before")
    @classmethod
    def _objective_sets(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [_objective_list(item) if isinstance(item, str) else item for item in v]
        return v


class Grid(_Strict):
    """The cartesian product models × devices × (networks) × solvers × objectives × seeds."""

    models: list[str] = Field(min_length=1)
    devices: list[str] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    map: SearchGrid | None = None
    split: SearchGrid | None = None

    @model_validator(mode="after")
    def _some_search(self) -> Grid:
        if self.map is None and self.split is None:
            raise ValueError("a grid needs a 'map' and/or a 'split' section")
        if self.split is not None and not self.split.networks:
            raise ValueError("grid.split needs at least one network in 'networks'")
        return self


class JobSpec(_Strict):
    """A batch job file."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    defaults: TaskDefaults = Field(default_factory=TaskDefaults)
    grid: Grid | None = None
    tasks: list[dict[str, Any]] = Field(default_factory=list)

    def explicit_task(self, i: int) -> TaskSpec:
        """Explicit task ``i`` with the job's defaults applied."""
        return TaskSpec.model_validate({**self.defaults.model_dump(exclude_none=True), **self.tasks[i]})

    def expand(self) -> list[TaskSpec]:
        """Every task of the job, grid first then the explicit list, duplicates removed."""
        base = self.defaults.model_dump(exclude_none=True)
        out: list[TaskSpec] = []
        if self.grid is not None:
            g = self.grid
            for kind, sub in (("map", g.map), ("split", g.split)):
                if sub is None:
                    continue
                solvers = sub.solvers or [DEFAULT_SOLVER[kind]]
                objectives = sub.objectives or [list(DEFAULT_OBJECTIVES[kind])]
                networks: list[str | None] = list(sub.networks) if kind == "split" else [None]
                for model, device, net, solver, objs, seed in itertools.product(
                        g.models, g.devices, networks, solvers, objectives, g.seeds):
                    spec = {**base, "kind": kind, "model": model, "device": device, "network": net,
                            "solver": solver, "objectives": objs, "seed": seed,
                            "settings": {**base.get("settings", {}), **sub.settings}}
                    if sub.granularity:
                        spec["granularity"] = sub.granularity
                    out.append(TaskSpec.model_validate(spec))
        for i in range(len(self.tasks)):
            try:
                out.append(self.explicit_task(i))
            except ValidationError as exc:
                raise SchemaError(f"job {self.name!r}: tasks[{i}]: {describe_validation_error(exc)}") from None
        unique: dict[str, TaskSpec] = {}
        for t in out:
            unique.setdefault(t.task_id, t)
        return list(unique.values())


def load_job(path: str | os.PathLike[str]) -> JobSpec:
    """Read and validate a job file; an empty expansion is an error."""
    job = load_model_yaml(path, JobSpec)
    _, node = read_yaml(path)
    for i in range(len(job.tasks)):
        try:
            job.explicit_task(i)
        except ValidationError as exc:
            loc = ("tasks", i, *exc.errors()[0]["loc"])
            raise SchemaError(f"{path}{line_of(node, loc)}: tasks[{i}]: {describe_validation_error(exc)}") from None
    if not job.grid and not job.tasks:
        raise SchemaError(f"{path}: the job has no 'grid' and no 'tasks'; it would run nothing")
    tasks = job.expand()
    if not tasks:
        raise SchemaError(f"{path}: the job expands to no tasks (an axis of the grid is empty)")
    return job
