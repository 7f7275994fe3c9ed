"""Artifact manifest v1: the contract between ``dnnplan export`` and an on-device runtime.

An exported plan is a directory holding one ``.tflite`` per part (pipeline stage, split head or
tail) and ``manifest.json``, validated by the models below (JSON Schema shipped as
``schemas/manifest-v1.schema.json``; see ``docs/MANIFEST.md``). Tensors are named by their
LayerGraph tensor id (``"{layer}:{index}"``), so a runtime routes every tensor crossing a
boundary from the part that produces it to each part that reads it, re-quantizing when the producer's
and the consumer's quantization parameters differ.

This module holds the contract's models, :func:`build_manifest` (what an export writes: network
I/O, parts, the split's wire format, identity of the plan and the model) and the checks a runtime
makes when it reads one (:func:`read_manifest`, :func:`verify_artifacts`).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..cost.hostproc import SERVER_TOPK, TOPK_LAYOUT, ssd_head, ssd_head_outputs
from ..errors import InputFileError, SchemaError
from ..fileio import read_json, sha256_bytes, sha256_file

if TYPE_CHECKING:
    from ..graph.layergraph import LayerGraph
    from .parts import PartRange
    from .schema import Plan

MANIFEST_VERSION = 1
MANIFEST_FILE = "manifest.json"
MANIFEST_SCHEMA_FILE = "manifest-v1.schema.json"
FRAME_HEADER_SLACK = 64 * 1024  # bytes allowed in a frame beyond the tensor payload (names, shapes)
#: the plan fields a manifest's ``plan_sha256`` covers
DEPLOYMENT_FIELDS = ("kind", "model", "device", "stages", "split")

ElementType = Literal["float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Quantization(_Strict):
    """Affine quantization ``real = scale * (q - zero_point)`` (per tensor)."""

    scale: float = Field(gt=0)
    zero_point: int


class TensorSpec(_Strict):
    """One input or output of a part (shape includes the batch dimension, which is 1)."""

    name: str = Field(description="LayerGraph tensor id, e.g. 'block_3_add:0'")
    signature_name: str = Field(description="Name in the .tflite 'serving_default' signature")
    index: int = Field(ge=0, description="TFLite tensor index (informative; prefer signature_name)")
    shape: list[int]
    dtype: ElementType
    quantization: Quantization | None = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


class Part(_Strict):
    """One executable sub-model."""

    name: str
    role: Literal["stage", "head", "tail"]
    file: str = Field(description="File name relative to the manifest")
    sha256: str
    bytes: int = Field(ge=0)
    first_layer: int = Field(ge=0, description="First layer (plan granularity), inclusive")
    last_layer: int = Field(ge=0, description="Last layer (plan granularity), inclusive")
    first_op: int = Field(ge=0, description="First operator (op view), inclusive")
    last_op: int = Field(ge=0, description="Last operator (op view), inclusive")
    processor: str
    delegate: Literal["xnnpack", "gpu", "nnapi", "none"] = Field(
        description="Delegate hint for the runtime; 'none' = the default CPU kernels")
    threads: int = Field(ge=1)
    dtype: Literal["fp32", "fp16", "int8"]
    location: Literal["device", "server"] = "device"
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]


class TensorInfo(_Strict):
    """A tensor of the network's interface or of the wire (no TFLite binding)."""

    name: str
    shape: list[int]
    dtype: ElementType
    quantization: Quantization | None = None


class TopK(_Strict):
    """Server-side reduction of an SSD head (plan ``split.result: topk``): instead of the network's
    outputs the server sends the ``k`` anchors of highest class score (``optimizer.runtime.detections``)."""

    k: int = Field(gt=0)
    boxes: str = Field(description="Network output [1, A, 4]: box encodings")
    logits: str = Field(description="Network output [1, A, C]: class logits (column 0 = background when C > 1)")
    outputs: list[TensorInfo] = Field(description="What the server sends and a run returns, per frame")


#: Names of the tensors of a :class:`TopK` response (``optimizer.runtime.detections``).
TOPK_ANCHOR, TOPK_BOX, TOPK_SCORE, TOPK_CLASS = (name for name, _, _ in TOPK_LAYOUT)


def topk_outputs(k: int) -> list[TensorInfo]:
    """The tensors a :class:`TopK` server sends per frame (batch 1): anchor index, box encoding,
    score (best class logit) and class of its ``k`` best anchors (``cost.hostproc.TOPK_LAYOUT``,
    the layout the split cost model charges for)."""
    return [TensorInfo(name=name, shape=[1, k, *shape], dtype=dtype) for name, shape, dtype in TOPK_LAYOUT]


class Wire(_Strict):
    """The split's transport (see ``docs/MANIFEST.md`` for the frame layout)."""

    protocol: Literal["dnnplan-tcp"] = "dnnplan-tcp"
    protocol_version: int = Field(default=3, description="Wire protocol version the server speaks (3: with a "
                                  "shared token, a HELLO exchange of nonces per connection and HMAC-SHA256 "
                                  "signing with its session key; without one it reads version-1 and -2 "
                                  "frames too)")
    byte_order: Literal["little"] = "little"
    max_frame_bytes: int = Field(gt=0)
    request: list[TensorInfo] = Field(description="Tensors of a request frame (head -> tail)")
    response: list[TensorInfo] = Field(description="Tensors of a response frame (tail -> head)")
    request_bytes: int = Field(ge=0, description="Tensor payload bytes of one request")
    result: TopK | None = Field(default=None, description="Set when the server reduces an SSD head's outputs "
                                "to its best anchors; the response then holds result.outputs")


class ModelInfo(_Strict):
    name: str
    sha256: str
    granularity: Literal["op", "kernel", "block"]
    layers: int = Field(ge=1)
    ops: int = Field(ge=1, description="Operator count (op view)")
    source: str
    variant: dict[str, Any] = Field(default_factory=dict)
    weight_seed: int | None = Field(description="Seed of the random zoo weights; null for a model file")
    input_shapes: dict[str, list[int]] | None = Field(
        default=None, description="Full input shapes the model was imported at (--input-shape); null: the file's own")


class Calibration(_Strict):
    source: str = Field(description="'synthetic' or the .npz file name")
    samples: int = Field(ge=0)
    seed: int
    file_sha256: str | None = None
    aligned_to_single_file: bool = Field(
        default=False, description="Parts carry the quantization parameters and constants of the "
        "single-file INT8 model (multi-part INT8 exports), so they compute what it computes")


class ReferenceModel(_Strict):
    """The single-file INT8 model a multi-part INT8 export is aligned to (optional)."""

    file: str
    sha256: str
    bytes: int = Field(ge=0)


class Manifest(_Strict):
    """Manifest v1 of an exported plan."""

    manifest_version: Literal[1] = MANIFEST_VERSION
    kind: Literal["pipeline", "split", "joint"]
    plan_sha256: str = Field(description="SHA-256 of the plan's deployment fields (kind, model, "
                             "device, stages, split) as canonical JSON")
    device: str
    dtype: Literal["fp32", "fp16", "int8"]
    model: ModelInfo
    inputs: list[TensorInfo] = Field(description="The network's inputs, as the caller supplies them (float)")
    outputs: list[TensorInfo] = Field(description="The network's outputs, as the parts produce them")
    parts: list[Part] = Field(min_length=1)
    wire: Wire | None = None
    calibration: Calibration | None = None
    reference: ReferenceModel | None = Field(
        default=None, description="Single-file INT8 model the parts are aligned to, when shipped")
    tool_version: str
    created_at: str

    @model_validator(mode="after")
    def _routable(self) -> Manifest:
        have = {t.name for t in self.inputs}
        for k, part in enumerate(self.parts):
            for t in part.inputs:
                if t.name not in have:
                    raise ValueError(f"parts[{k}] ({part.name}) reads tensor {t.name!r} that no earlier "
                                     "part produces")
            have.update(t.name for t in part.outputs)
        missing = [t.name for t in self.outputs if t.name not in have]
        if missing:
            raise ValueError(f"network output {missing[0]!r} is produced by no part")
        if self.kind in ("split", "joint") and self.wire is None and any(p.location == "server" for p in self.parts):
            raise ValueError(f"a {self.kind} manifest with a server part needs a 'wire' section")
        return self

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise SchemaError(f"manifest: no part named {name!r}; parts: {', '.join(p.name for p in self.parts)}")

    @property
    def device_parts(self) -> list[Part]:
        return [p for p in self.parts if p.location == "device"]

    @property
    def server_parts(self) -> list[Part]:
        return [p for p in self.parts if p.location == "server"]

    @property
    def result_outputs(self) -> list[TensorInfo]:
        """What a run of the deployment returns: the network's outputs, or the server's top-k
        detections when the wire reduces them (:class:`TopK`)."""
        return self.wire.result.outputs if self.wire is not None and self.wire.result is not None else self.outputs


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`Manifest` (what ``schemas/manifest-v1.schema.json`` ships)."""
    schema = Manifest.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://dnnplan.dev/schemas/manifest-v1.schema.json"
    return schema


def shipped_manifest_schema() -> dict[str, Any]:
    """The manifest JSON Schema file shipped inside the package."""
    return json.loads(resources.files("optimizer.plan").joinpath("schemas", MANIFEST_SCHEMA_FILE).read_text())


def read_manifest(artifacts_dir: str | os.PathLike[str], *, verify: bool = True) -> Manifest:
    """Load ``DIR/manifest.json``; with ``verify``, check every part's file and SHA-256.

    Raises
    ------
    InputFileError
        The directory, the manifest or a part file is missing, or a file's SHA-256 differs.
    SchemaError
        The manifest does not validate.
    """
    d = Path(artifacts_dir)
    if not d.is_dir():
        raise InputFileError(f"{d}: no such artifacts directory; create one with 'dnnplan export'")
    path = d / MANIFEST_FILE
    if not path.is_file():
        raise InputFileError(f"{path}: no manifest; is {d} a directory written by 'dnnplan export'?")
    data = read_json(path, "manifest")
    if isinstance(data, dict) and data.get("manifest_version", MANIFEST_VERSION) != MANIFEST_VERSION:
        raise SchemaError(f"{path}: field manifest_version: {data.get('manifest_version')!r} is not "
                          f"supported; this dnnplan reads version {MANIFEST_VERSION}")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        from .io import format_validation_error

        raise SchemaError(format_validation_error(str(path), exc)) from None
    for field, _, file, _ in manifest_files(manifest):
        artifact_path(d, file, f"{path}: field {field}")
    if verify:
        verify_artifacts(manifest, d)
    return manifest


def manifest_files(manifest: Manifest) -> list[tuple[str, str, str, str]]:
    """``(field, part name, file, sha256)`` of every file a manifest names."""
    files = [(f"parts[{k}].file", p.name, p.file, p.sha256) for k, p in enumerate(manifest.parts)]
    if manifest.reference is not None:
        files.append(("reference.file", "reference", manifest.reference.file, manifest.reference.sha256))
    return files


def artifact_path(artifacts_dir: str | os.PathLike[str], file: str, field: str) -> Path:
    """The path of a file a manifest names, refused (:class:`SchemaError` naming ``field``) when it
    is absolute, has ``..`` or leads out of the artifacts folder through a symbolic link."""
    from ..confine import inside

    return inside(artifacts_dir, file, field, error=SchemaError)


def verify_artifacts(manifest: Manifest, artifacts_dir: str | os.PathLike[str]) -> None:
    """Check that every part's file lies inside ``artifacts_dir``, exists and has the manifest's SHA-256."""
    d = Path(artifacts_dir)
    for field, name, file, sha in manifest_files(manifest):
        f = artifact_path(d, file, f"manifest field {field}")
        if not f.is_file():
            raise InputFileError(f"{f}: artifact of part {name!r} is missing; re-run 'dnnplan export'")
        digest = sha256_file(f)
        if digest != sha:
            raise InputFileError(f"{f}: sha256 {digest[:16]}... does not match the manifest's "
                                 f"{sha[:16]}... for part {name!r}; the artifact was "
                                 "modified or belongs to another export")


def check_manifest_matches(manifest: Manifest, plan_sha256: str, where: str) -> None:
    """Refuse artifacts exported from a different plan."""
    if manifest.plan_sha256 != plan_sha256:
        raise InputFileError(f"{where}: the artifacts were exported from another plan (manifest "
                             f"plan_sha256 {manifest.plan_sha256[:16]}..., this plan {plan_sha256[:16]}...); "
                             "re-run 'dnnplan export' for this plan")


# ---------------------------------------------------------------- writing (dnnplan export)
def plan_sha256(plan: Plan) -> str:
    """SHA-256 of the plan's deployment fields (``kind, model, device, stages, split``) as
    canonical JSON: what a manifest records. Predictions, search info and provenance are left
    out, so re-stamping a plan does not invalidate its artifacts; ``split.result`` counts only when
    set, so a plan that leaves it unset hashes as if the field did not exist."""
    data = plan.model_dump(mode="json", include=set(DEPLOYMENT_FIELDS))
    if data.get("split") and data["split"].get("result") is None:
        data["split"].pop("result", None)
    return sha256_bytes(json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8"))


def delegate_for(processor: str, role: str) -> str:
    """The runtime delegate a part asks for: GPU, NNAPI (NPU/DSP/TPU) or XNNPACK (CPU); a
    server tail runs plain kernels."""
    if role == "tail":
        return "none"
    kind = processor.lower()
    if kind.startswith("gpu"):
        return "gpu"
    if kind.startswith(("npu", "dsp", "tpu")):
        return "nnapi"
    return "xnnpack"


def manifest_part(part: PartRange, path: Path, inputs: list[TensorSpec], outputs: list[TensorSpec]) -> Part:
    """The manifest entry of ``part`` converted to ``path`` (hash and size read from the file)."""
    return Part(name=part.name, role=part.role, file=path.name, sha256=sha256_file(path), bytes=path.stat().st_size,
                first_layer=part.first_layer, last_layer=part.last_layer, first_op=part.first_op,
                last_op=part.end_op - 1, processor=part.processor, delegate=delegate_for(part.processor, part.role),
                threads=part.threads, dtype=part.dtype, location=part.location, inputs=inputs, outputs=outputs)


def _server_topk(plan: Plan, op_graph: LayerGraph) -> TopK | None:
    """The wire's top-k reduction when the plan's server sends an SSD head's best anchors."""
    if plan.split is None or plan.split.result != "topk":
        return None
    names, head = ssd_head_outputs(op_graph), ssd_head(op_graph)
    if names is None or head is None:
        raise SchemaError(f"plan split.result 'topk': {op_graph.name} has no SSD head (outputs [A, 4] and "
                          "[A, C]); make the plan again with --result raw")
    k = min(SERVER_TOPK, head[0])
    return TopK(k=k, boxes=names[0], logits=names[1], outputs=topk_outputs(k))


def _network_input_dtype(spec: TensorSpec | None) -> str:
    """The dtype frames of a network input have: the reading part's when it takes integers as
    they are (token or byte ids of a model file), else float32 (images; an INT8 part quantizes them)."""
    if spec is not None and spec.quantization is None and np.issubdtype(np.dtype(spec.dtype), np.integer):
        return spec.dtype
    return "float32"


def build_manifest(plan: Plan, op_graph: LayerGraph, parts: list[Part], weight_seed: int | None,
                   calib: Calibration | None, version: str) -> Manifest:
    """The manifest of ``plan``'s converted ``parts``: network I/O, the split's wire format
    (request/response tensors and the largest frame), model identity and provenance."""
    produced = {t.name: t for p in parts for t in p.outputs}
    read = {t.name: t for p in reversed(parts) for t in p.inputs}
    net_inputs = [TensorInfo(name=t, shape=[1, *op_graph.tensors[t].shape], dtype=_network_input_dtype(read.get(t)))
                  for t in op_graph.inputs]
    net_outputs = [TensorInfo(name=t, shape=produced[t].shape, dtype=produced[t].dtype,
                              quantization=produced[t].quantization) for t in op_graph.outputs]
    wire = None
    device_parts = [p for p in parts if p.location == "device"]
    server_parts = [p for p in parts if p.location == "server"]
    if server_parts:
        tail = server_parts[0]
        have = {t.name: t for p in device_parts for t in p.outputs}
        have.update({t.name: t for t in net_inputs})
        request = [TensorInfo(name=t.name, shape=have[t.name].shape, dtype=have[t.name].dtype,
                              quantization=have[t.name].quantization) for t in tail.inputs]
        response = [TensorInfo(name=t.name, shape=t.shape, dtype=t.dtype, quantization=t.quantization)
                    for t in tail.outputs]
        topk = _server_topk(plan, op_graph)
        if topk is not None:
            response = topk.outputs
        request_bytes = sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in request)
        response_bytes = sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in response)
        wire = Wire(max_frame_bytes=max(request_bytes, response_bytes) + FRAME_HEADER_SLACK, request=request,
                    response=response, request_bytes=request_bytes, result=topk)
    model = ModelInfo(name=plan.model.name, sha256=plan.model.sha256, granularity=plan.model.granularity,
                      layers=plan.model.layers, ops=len(op_graph), source=plan.model.source or op_graph.source,
                      variant=dict(plan.model.variant), weight_seed=weight_seed,
                      input_shapes=plan.model.input_shapes)
    return Manifest(kind=plan.kind, plan_sha256=plan_sha256(plan), device=plan.device,
                    dtype=plan.model.dtype, model=model, inputs=net_inputs, outputs=net_outputs,
                    parts=parts, wire=wire, calibration=calib, tool_version=version,
                    created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
