"""Plan schema v1: the deployable plan an on-device runtime consumes (pydantic v2).

A plan says where each layer runs — a pipeline of stages over processors, or a split between
phone and server — together with predicted metrics, how it was found, and where it came from.
The JSON Schema exported from these models ships as ``schemas/plan-v1.schema.json``.

Layer indices are 0-based positions in the plan's LayerGraph view (``model.granularity``);
``first_layer``/``last_layer`` are inclusive. A split's ``layer`` is the boundary: layers
``0..layer-1`` run on the phone, ``layer..L-1`` on the server (0 = all on the server,
L = all on the phone).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 1

DTypeName = Literal["fp32", "fp16", "int8"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelRef(_Strict):
    """Identity of the network the plan was made for."""

    name: str
    sha256: str = Field(description="SHA-256 of the model file, or of the zoo builder + variant")
    layers: int = Field(ge=1, description="Layer count in this granularity")
    granularity: Literal["op", "kernel", "block"] = "op"
    dtype: DTypeName = "int8"
    source: str | None = Field(default=None, description="File path or zoo:<name>")
    variant: dict[str, Any] = Field(default_factory=dict, description="Zoo builder arguments")
    input_shapes: dict[str, list[int]] | None = Field(
        default=None, description="Full input shapes (batch included, the file's layout) the model was imported "
                                  "at (--input-shape); null: the file's own shapes")


def model_input_shapes(graph: Any) -> dict[str, list[int]] | None:
    """``ModelRef.input_shapes`` of a LayerGraph (what ``--input-shape`` fixed at import)."""
    served = getattr(graph, "served_input_shapes", None)
    return {k: [int(d) for d in v] for k, v in served.items()} if served else None


def plan_input_shapes(plan: Plan) -> dict[str, tuple[int, ...]] | None:
    """The input shapes a plan's model was imported at (``model.input_shapes``), None if none:
    what ``load_graph(..., input_shapes=...)`` takes to import the plan's graph again."""
    shapes = plan.model.input_shapes
    return {k: tuple(int(d) for d in v) for k, v in shapes.items()} if shapes else None


class Stage(_Strict):
    """One inference stage of a pipeline: consecutive layers on one processor."""

    processor: str
    first_layer: int = Field(ge=0)
    last_layer: int = Field(ge=0)
    threads: int | None = Field(default=None, ge=1)
    dtype: DTypeName = "int8"
    predicted_time_s: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Stage:
        if self.last_layer < self.first_layer:
            raise ValueError(f"last_layer {self.last_layer} < first_layer {self.first_layer}")
        return self


class HostStage(_Strict):
    """Pre- or post-processing stage (Park & Ha: CPU, 2 threads)."""

    processor: str = "cpu"
    threads: int = Field(default=2, ge=1)
    predicted_time_s: float | None = Field(default=None, ge=0)


class CrossingTensor(_Strict):
    """A tensor crossing a boundary (of a split or between two stages)."""

    name: str
    shape: list[int]
    dtype: DTypeName
    bytes: int = Field(ge=0)


class Split(_Strict):
    """The boundary where the network is divided between phone (head) and server (tail)."""

    layer: int = Field(ge=0, description="Boundary: layers [0, layer) run on the phone")
    tensors: list[CrossingTensor] = Field(default_factory=list)
    bytes: int = Field(ge=0, description="Bytes uploaded at the boundary (all crossing tensors)")
    head_processor: str | None = None
    head_clock_hz: float | None = Field(default=None, gt=0)
    wire_dtype: DTypeName = "fp32"
    server: str | None = None
    result: Literal["topk"] | None = Field(
        default=None, description="What the server sends back: null = the network's outputs; 'topk' = an SSD "
        "head's 100 best anchors (index, box encoding, score, class), which the phone decodes")


class Predicted(_Strict):
    """Predicted metrics; null where not computed."""

    throughput_fps: float | None = None
    latency_s: float | None = None
    energy_j: float | None = None
    memory_bytes: float | None = None
    peak_temp_c: float | None = None
    time_to_throttle_s: float | None = None
    sustained_fps: float | None = None
    extra: dict[str, float] = Field(default_factory=dict)


class SearchInfo(_Strict):
    """How the plan was found."""

    solver: str
    seed: int | None = None
    objectives: list[str] = Field(default_factory=list)
    evaluations: int = Field(default=0, ge=0)
    space_size: float | None = Field(default=None, ge=0, description="Distinct candidates in the space")
    explored_fraction: float | None = Field(default=None, ge=0)
    wall_time_s: float | None = Field(default=None, ge=0)
    settings: dict[str, Any] = Field(default_factory=dict)
    decision: dict[str, Any] | None = Field(default=None, description="e.g. TOPSIS variant and weights")
    baselines: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Provenance(_Strict):
    """Where the plan came from."""

    tool_version: str
    created_at: str
    inputs: dict[str, str] = Field(default_factory=dict, description="Input name -> sha256")
    command: str | None = None


class Plan(_Strict):
    """A deployable plan (schema version 1)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["pipeline", "split", "joint"]
    model: ModelRef
    device: str
    network: str | None = None
    preprocess: HostStage | None = None
    stages: list[Stage] | None = None
    postprocess: HostStage | None = None
    split: Split | None = None
    predicted: Predicted = Field(default_factory=Predicted)
    thermal_policy: dict[str, Any] | None = None
    search: SearchInfo
    provenance: Provenance

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        n = self.model.layers
        if self.kind in ("pipeline", "joint"):
            if not self.stages:
                raise ValueError(f"a {self.kind} plan needs at least one stage in 'stages'")
            expected = 0
            seen: set[str] = set()
            for k, st in enumerate(self.stages):
                if st.first_layer != expected:
                    raise ValueError(f"stages[{k}].first_layer is {st.first_layer}, expected {expected} "
                                     "(stages must cover consecutive layers in order)")
                if st.processor in seen:
                    raise ValueError(f"stages[{k}].processor {st.processor!r} is used by an earlier stage")
                seen.add(st.processor)
                expected = st.last_layer + 1
            end = self.split.layer if self.kind == "joint" and self.split is not None else n
            if expected != end:
                raise ValueError(f"stages end at layer {expected - 1} but must end at layer {end - 1} "
                                 f"(the model has {n} layers)")
        if self.kind in ("split", "joint"):
            if self.split is None:
                raise ValueError(f"a {self.kind} plan needs a 'split' section")
            if self.split.layer > n:
                raise ValueError(f"split.layer {self.split.layer} exceeds the model's {n} layers")
        if self.kind == "split" and self.stages:
            raise ValueError("a split plan has no 'stages' (use kind 'joint')")
        return self


def new_provenance(inputs: dict[str, str] | None = None, command: str | None = None) -> Provenance:
    """Provenance stamped with this tool's version and the current UTC time."""
    from .. import __version__

    return Provenance(tool_version=__version__,
                      created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      inputs=dict(inputs or {}), command=command)


def plan_json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`Plan` (what ``schemas/plan-v1.schema.json`` ships)."""
    schema = Plan.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://dnnplan.dev/schemas/plan-v1.schema.json"
    return schema
