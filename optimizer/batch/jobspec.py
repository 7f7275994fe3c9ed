"""Job files: a grid of searches and/or an explicit task list, validated with pydantic.

A job expands into :class:`TaskSpec` objects, each identified by a stable ``task_id`` (hash of
the canonical task spec and the tool version), so re-running a job finds finished work.

A SmartSplit job file (``kind: split``, :class:`optimizer.search.split_job.SplitJob`, the one
``dnnplan split --job`` prints against its baselines) is read as the same job: its models ×
devices × seeds become a split grid with the same cost model, wire dtypes, head processors,
solver and TOPSIS settings (:func:`job_from_split_job`), so one file runs in both commands.

Example (``search_spaces/jobs/paper_grid.yaml``)::

    name: paper_grid
    defaults: {dtype: int8}
    grid:
      models: [mobilenet_v2, resnet50]
      devices: [pixel6, galaxy_s22]
      seeds: [0, 1, 2, 3, 4]
      map: {solvers: [ga], objectives: [[throughput]], granularity: kernel}
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
from ..bounds import MAX_JOB_TASKS
from ..errors import SchemaError
from ..yamlio import describe_validation_error, line_of, load_model_yaml, read_yaml

Kind = Literal["map", "split"]
DEFAULT_SOLVER: dict[str, str] = {"map": "ga", "split": "nsga2"}
DEFAULT_OBJECTIVES: dict[str, tuple[str, ...]] = {"map": ("throughput",), "split": ("latency", "energy", "memory")}
DEFAULT_SERVER = "smartsplit_i5"
Dtype = Literal["int8", "fp16", "fp32"]
# split-cost options; left out of a task's canonical form (and id) while at their defaults
SPLIT_OPTION_DEFAULTS: dict[str, Any] = {"cost_model": "table", "wire_dtypes": None, "processors": None,
                                         "runtime": None, "include_extremes": False, "interior_only": False, **dict.fromkeys(
                                             ("bandwidth_trace", "risk", "memory_budget", "accuracy_data",
                                              "min_accuracy", "max_mean_increase"))}
# measured GA fitness of map tasks (as ``dnnplan map --measure host`` / ``--measure-cmd``); same rule
MAP_OPTION_DEFAULTS: dict[str, Any] = {"measure": None, "measure_cmd": None}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _objective_list(v: Any) -> Any:
    return [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else v


class TaskDefaults(_Strict):
    """Fields a job may set once for all its tasks."""

    dtype: Literal["int8", "fp16", "fp32"] = "int8"
    granularity: Literal["op", "kernel", "block"] | None = None
    stages: int = Field(default=3, ge=1, le=8)
    server: str | None = None
    memory_limit: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    cost_model: Literal["table", "smartsplit"] = "table"
    wire_dtypes: list[Dtype] | None = Field(default=None, min_length=1)
    processors: list[str] | None = Field(default=None, min_length=1)
    runtime: str | None = None  # the phone's inference runtime (split tasks; default: the device's)
    interior_only: bool = False  # split boundaries 1..L-1 only (SmartSplit's setting)
    include_extremes: bool = False  # accepted for compatibility: the extremes are searched by default
    measure: Literal["host"] | None = None
    measure_cmd: str | None = Field(default=None, min_length=1)
    # split search: uplink trace and risk objective, memory as a budget, accuracy per partition
    # (checked by optimizer.workflow.SplitRequest, as 'dnnplan split' checks its options)
    bandwidth_trace: str | None = None
    risk: str | None = None
    memory_budget: str | None = None
    accuracy_data: str | None = None
    min_accuracy: float | None = None
    max_mean_increase: float | None = None
    # full input shapes of a model file with dynamic dims ('x:1,3,640,640', a list, or a mapping)
    input_shape: str | list[str] | dict[str, list[int]] | None = None

    @field_validator("input_shape")
    @classmethod
    def _input_shape(cls, v: Any) -> Any:
        from ..graph.input_shapes import format_input_shapes, parse_input_shapes

        return None if v is None else (format_input_shapes(parse_input_shapes(v, "input_shape")) or None)


class TaskSpec(TaskDefaults):
    """One search: what to run, on what, with which solver and seed (plus every
    :class:`TaskDefaults` field)."""

    kind: Kind
    model: str
    device: str
    network: str | None = None
    solver: str | None = None
    objectives: list[str] | None = None
    seed: int = 0

    _normalise_objectives = field_validator("objectives", mode="before")(_objective_list)

    @model_validator(mode="after")
    def _complete(self) -> TaskSpec:
        if self.solver is None:
            self.solver = DEFAULT_SOLVER[self.kind]
        if self.objectives is None:
            self.objectives = list(DEFAULT_OBJECTIVES[self.kind])
        if self.granularity is None:
            self.granularity = "kernel" if self.kind == "map" else "block"
        if self.kind == "split" and not self.network:
            raise ValueError("a split task needs a 'network' (e.g. wifi_10)")
        if self.kind == "map":
            self.network = None
            for name, default in SPLIT_OPTION_DEFAULTS.items():
                setattr(self, name, default)
        else:
            for name, default in MAP_OPTION_DEFAULTS.items():
                setattr(self, name, default)
        return self

    def canonical(self) -> dict[str, Any]:
        """The spec as JSON; split-cost and measurement options at their defaults are left out, so
        adding them kept the ids of earlier tasks. A split task's boundary space is written as
        it was before the extremes became the default: ``include_extremes: true`` when 0 and L
        are searched, nothing for the interior only, so a stored run keeps its id exactly when
        it searched the same space."""
        doc = self.model_dump(mode="json")
        if self.kind == "split":
            doc["include_extremes"] = not self.interior_only
        doc["interior_only"] = False
        for name, default in {**SPLIT_OPTION_DEFAULTS, **MAP_OPTION_DEFAULTS, "input_shape": None}.items():
            if doc[name] == default:
                del doc[name]
        return doc

    @property
    def split_key(self) -> tuple[Any, ...]:
        """Split tasks sharing this key (and :attr:`input_key`) share one SplitCosts."""
        return (self.network or "", self.server or DEFAULT_SERVER, self.cost_model,
                tuple(self.wire_dtypes or ()), tuple(self.processors or ()), self.runtime)

    @property
    def task_id(self) -> str:
        """Stable id: hash of the canonical spec and the tool version."""
        text = json.dumps({"task": self.canonical(), "tool": __version__}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def input_key(self) -> tuple[str, str, str, str, tuple[str, ...]]:
        """Tasks sharing this key share one graph and cost table."""
        return (self.model, self.granularity or "op", self.device, self.dtype, tuple(self.input_shape or ()))

    def label(self) -> str:
        net = f"/{self.network}" if self.network else ""
        return f"{self.kind} {self.model} on {self.device}{net} {self.solver} seed={self.seed}"


class SearchGrid(_Strict):
    """Per-search axes of a grid (map or split)."""

    solvers: list[str] = Field(default_factory=list)
    objectives: list[list[str]] = Field(default_factory=list)
    networks: list[str] = Field(default_factory=list)
    granularity: Literal["op", "kernel", "block"] | None = None
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

    @field_validator("name")
    @classmethod
    def _a_folder_name(cls, v: str) -> str:
        """The name is the default run folder ``results/<name>``: one plain component."""
        from ..confine import name_problem

        problem = name_problem(v, single=True)
        if problem is not None:
            raise ValueError(f"the job name becomes the run folder results/<name> and {problem}")
        return v

    def explicit_task(self, i: int) -> TaskSpec:
        """Explicit task ``i`` with the job's defaults applied."""
        return TaskSpec.model_validate({**self.defaults.model_dump(exclude_none=True), **self.tasks[i]})

    def size(self) -> int:
        """Tasks the grid and the explicit list describe (duplicates counted), without building them."""
        n = len(self.tasks)
        g = self.grid
        for sub, networks in ((g.map, 1), (g.split, len(g.split.networks) if g.split else 0)) if g else ():
            if sub is not None:
                n += (len(g.models) * len(g.devices) * len(g.seeds) * networks * max(1, len(sub.solvers))
                      * max(1, len(sub.objectives)))
        return n

    def expand(self) -> list[TaskSpec]:
        """Every task of the job, grid first then the explicit list, duplicates removed."""
        base = self.defaults.model_dump(exclude_none=True)
        out: list[TaskSpec] = []
        if self.size() > MAX_JOB_TASKS:
            raise SchemaError(f"job {self.name!r}: expands to {self.size():,} tasks, over the {MAX_JOB_TASKS:,} one "
                              "job may hold; split it into several jobs")
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


def job_from_split_job(split_job: Any) -> JobSpec:
    """The batch job of a SmartSplit job file (:class:`~optimizer.search.split_job.SplitJob`):
    one split task per model × device × seed with the file's costs, solver and TOPSIS settings."""
    sj = split_job
    settings: dict[str, Any] = {"topsis_variant": sj.topsis}
    if sj.weights is not None:
        settings["weights"] = list(sj.weights)
    if sj.solver == "nsga2":
        settings.update(population=sj.population, generations=sj.generations)
    defaults = TaskDefaults(dtype=sj.dtype, granularity=sj.granularity, server=sj.server,
                            cost_model=sj.cost_model, wire_dtypes=list(sj.wire_dtypes),
                            processors=list(sj.processors) if sj.processors else None, runtime=sj.runtime,
                            interior_only=sj.interior_only, include_extremes=sj.include_extremes)
    grid = Grid(models=list(sj.models), devices=list(sj.devices), seeds=list(sj.seeds),
                split=SearchGrid(networks=[sj.network], solvers=[sj.solver], settings=settings))
    return JobSpec(name=sj.name, description=sj.description, defaults=defaults, grid=grid)


def load_job(path: str | os.PathLike[str]) -> JobSpec:
    """Read and validate a job file (batch format, or a ``kind: split`` SmartSplit job) given by
    path or by name in ``jobs/`` of the search spaces; an empty expansion is an error."""
    from ..shipped import resolve

    path = resolve(path, "jobs", "job")
    data, node = read_yaml(path)
    if isinstance(data, dict) and data.get("kind") == "split":
        from ..search.split_job import SplitJob

        split_job = load_model_yaml(path, SplitJob)
        try:
            return job_from_split_job(split_job)
        except ValidationError as exc:
            raise SchemaError(f"{path}: as a batch job: {describe_validation_error(exc)}") from None
    job = load_model_yaml(path, JobSpec)
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
