"""Export a plan as deployable artifacts: one TFLite sub-model per part plus ``manifest.json``.

The network is rebuilt in Keras (a zoo builder with a fixed weight seed, or a ``.keras`` file)
and cut at the plan's boundaries in execution order. Every tensor crossing a cut — all of them,
not only the previous layer's output, so cuts inside residual blocks work — becomes an output
of the part that produces it and an input of each later part that reads it (the DAG cut of
:meth:`optimizer.graph.layergraph.LayerGraph.cut_tensors`). Sub-models are Keras functional
models built by re-applying the original layer objects to new ``Input`` tensors in execution
order, so their weights are the full model's weights.

INT8 parts use full-integer post-training quantization (Jacob et al., "Quantization and
Training of Neural Networks for Efficient Integer-Arithmetic-Only Inference", CVPR 2018, as
implemented by the TFLite converter): part ``k`` is calibrated with the float activations that
parts ``0..k-1`` produce on the calibration inputs, i.e. with the statistics the single-file
model sees at that point of the network. Separately converted parts still differ from the
single-file INT8 model in the last float bits of their scales, so multi-part INT8 exports also
convert the single-file model once and align every part to it (quantization parameters of
activations, constants of matched operators, producer parameters at every cut): the parts then
compute exactly what the single-file model computes.

Everything is written into a temporary directory next to ``out_dir`` and renamed at the end:
a failed export leaves no half-written directory.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError, ModelFormatError, SchemaError
from ..fileio import atomic_write_json, read_npz, sha256_bytes, sha256_file, staged_folder
from ..graph.layergraph import LayerGraph
from .manifest import (
    MANIFEST_FILE,
    Calibration,
    Manifest,
    ModelInfo,
    Part,
    Quantization,
    ReferenceModel,
    TensorSpec,
    TopK,
    Wire,
    TensorInfo,
    topk_outputs,
)
from .schema import Plan, plan_input_shapes

DEFAULT_CALIB_SAMPLES = 64
REFERENCE_FILE = "reference.int8.tflite"
FRAME_HEADER_SLACK = 64 * 1024  # bytes allowed in a frame beyond the tensor payload (names, shapes)
_PLAN_DTYPE_TO_NP = {"fp32": "float32", "fp16": "float32", "int8": "int8"}


DEPLOYMENT_FIELDS = ("kind", "model", "device", "stages", "split")


def plan_sha256(plan: Plan) -> str:
    """SHA-256 of the plan's deployment fields (``kind, model, device, stages, split``) as
    canonical JSON: what a manifest records. Predictions, search info and provenance are left
    out, so re-stamping a plan does not invalidate its artifacts; ``split.result`` counts only when
    set, so a plan that leaves it unset hashes as if the field did not exist."""
    import json

    data = plan.model_dump(mode="json", include=set(DEPLOYMENT_FIELDS))
    if data.get("split") and data["split"].get("result") is None:
        data["split"].pop("result", None)
    return sha256_bytes(json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8"))


@dataclass(frozen=True)
class PartRange:
    """One part of a plan as operator ranges of the op-view graph."""

    name: str
    role: str  # stage | head | tail
    first_layer: int
    last_layer: int
    first_op: int
    end_op: int  # exclusive
    processor: str
    threads: int
    dtype: str
    location: str  # device | server


def op_boundaries(plan_graph: LayerGraph) -> list[int]:
    """Op-view boundary of every plan-view boundary 0..L (block view: via ``layer.members``)."""
    sizes = [len(layer.members) or 1 for layer in plan_graph.layers]
    return [0, *np.cumsum(sizes).tolist()]


def plan_parts(plan: Plan, plan_graph: LayerGraph) -> list[PartRange]:
    """The executable parts of ``plan`` (empty head or tail of a split are omitted)."""
    if len(plan_graph) != plan.model.layers:
        raise SchemaError(f"plan: field model.layers: {plan.model.layers} does not match the "
                          f"{len(plan_graph)} {plan_graph.granularity} layers of {plan.model.name}; "
                          "the plan was made for another model or variant")
    ob = op_boundaries(plan_graph)
    n = len(plan_graph)
    parts: list[PartRange] = []
    if plan.kind in ("pipeline", "joint"):
        for k, st in enumerate(plan.stages or []):
            parts.append(PartRange(f"stage{k}", "stage", st.first_layer, st.last_layer,
                                   ob[st.first_layer], ob[st.last_layer + 1], st.processor,
                                   st.threads or 1, st.dtype, "device"))
    split = plan.split
    if plan.kind == "split" and split is not None and split.layer > 0:
        parts.append(PartRange("head", "head", 0, split.layer - 1, 0, ob[split.layer],
                               split.head_processor or "cpu", 1, plan.model.dtype, "device"))
    if plan.kind in ("split", "joint") and split is not None and split.layer < n:
        parts.append(PartRange("tail", "tail", split.layer, n - 1, ob[split.layer], ob[n],
                               split.server or "server", 1, plan.model.dtype, "server"))
    if not parts:
        raise SchemaError("plan: nothing to export (no stages and an empty split)")
    return parts


def kernel_splits(plan_graph: LayerGraph, parts: list[PartRange]) -> list[str]:
    """One line per part that starts inside a runtime kernel: its first op fuses into the
    previous part's last kernel (a batch-norm or activation cut off its convolution,
    :attr:`~optimizer.graph.layergraph.LayerGraph.kernel_anchors`). The runtime cannot fuse
    across parts, so the part pays a kernel and an INT8 rounding the single-file model does not."""
    ops = plan_graph.op_view or plan_graph
    anchors = ops.kernel_anchors
    lines = []
    for pr in parts:
        if 0 < pr.first_op < len(ops) and anchors[pr.first_op] < pr.first_op:
            first, kernel = ops.layers[pr.first_op], ops.layers[int(anchors[pr.first_op])]
            lines.append(f"{pr.name} starts at {first.name!r} ({first.op}), which runs fused in the kernel of "
                         f"{kernel.name!r} before the cut; the parts will not compute exactly what the single "
                         "model computes (map/split with --granularity kernel cuts only between kernels)")
    return lines


def load_plan_model(plan: Plan, model: Any = None, *, seed: int = 0,
                    memory_budget: float | None = None) -> tuple[Any, LayerGraph, int | None]:
    """The Keras model of ``plan``, its op-view LayerGraph, and the weight seed used.

    ``model`` may be a ``keras.Model``, a ``.keras`` path, or None: the zoo builder named by
    the plan with ``keras.utils.set_random_seed(seed)`` first and batch-norm statistics
    re-estimated (:func:`reestimate_batchnorm`, in passes sized by
    :func:`~optimizer.quantize.api.bn_frames_per_pass` from the graph and ``memory_budget`` bytes
    only, default 4 GB), so the same seed and budget give the same weights; or
    the plan's ``.keras`` source file.
    """
    from ..graph.keras_import import graph_from_keras, load_keras_model
    from ..graph.zoo import build_keras, builder, builder_names
    from ..lazy import keras as _keras
    from ..quantize.api import bn_frames_per_pass

    keras = _keras()
    ref = plan.model
    if model is None:
        src = ref.source or ""
        if src.startswith("zoo:") or (not src and ref.name in builder_names()):
            name = src.removeprefix("zoo:") or ref.name
            mod = builder(name)
            keras.utils.set_random_seed(seed)
            km = build_keras(name, **ref.variant)
            with open(mod.__file__, "rb") as fh:
                import json

                ident = sha256_bytes(fh.read() + json.dumps(ref.variant, sort_keys=True).encode())
            graph = graph_from_keras(km, name, block_of=mod.block_of, source=f"zoo:{name}",
                                     source_sha256=ident, fmt="zoo")
            reestimate_batchnorm(km, seed, frames_per_pass=bn_frames_per_pass(graph, memory_budget))
            return km, graph, seed
        if src.endswith(".keras"):
            model = src
        else:
            raise ModelFormatError(f"plan: field model.source: {src!r} cannot be exported; export "
                                   "supports zoo networks and .keras/.tflite/.onnx files (pass --model FILE)")
    if isinstance(model, (str, os.PathLike)):
        from ..graph.keras_import import keras_at_input_shapes

        p = Path(model)
        shapes = plan_input_shapes(plan)
        km, served = keras_at_input_shapes(load_keras_model(p), shapes, str(p))
        graph = graph_from_keras(km, p.stem, source=str(p), source_sha256=sha256_file(p))
        return km, replace(graph, served_input_shapes=served) if served else graph, None
    return model, graph_from_keras(model, getattr(model, "name", "model")), None


def reestimate_batchnorm(model: Any, seed: int, samples: int | None = None,
                         frames_per_pass: int | None = None) -> None:
    """Re-estimate BN statistics of a random-weight zoo model on seeded uniform [-1, 1] inputs
    (``samples`` default :data:`optimizer.graph.zoo.BN_FRAMES`; see
    :func:`optimizer.graph.zoo.reestimate_batchnorm`, which may use fewer of them, in passes of
    ``frames_per_pass`` frames)."""
    from ..graph.zoo import BN_FRAMES
    from ..graph.zoo import reestimate_batchnorm as _reestimate

    samples = BN_FRAMES if samples is None else samples
    rng = np.random.default_rng(seed)
    _reestimate(model, [rng.uniform(-1, 1, (samples, *tuple(t.shape[1:]))).astype(np.float32)
                        for t in model.inputs], frames_per_pass)


#: share of the memory budget (``--memory-budget``, default 4 GB as in quantize) export's Keras
#: calls may fill: the rest is headroom for the converter and the allocator (measured: with the
#: whole 4 GB for calls, exporting ssd_mobilenet_v2_fpnlite at 640x640 peaked at 4.44 GB)
EXPORT_CALL_SHARE = 0.75


def frames_per_call(graph: LayerGraph, first: int = 0, end: int | None = None,
                    budget: float | None = None) -> int:
    """Frames one Keras call over op layers ``first..end-1`` of ``graph`` may take, since a call
    holds every layer output of its frames (:func:`optimizer.quantize.api.frames_within`).

    The call gets :data:`EXPORT_CALL_SHARE` of ``budget`` bytes (default: quantize's 4 GB) less
    what this process already holds beyond the TensorFlow runtime (its resident bytes after
    freed memory is handed back, :func:`~optimizer.quantize.parallel_calibration.release_free_memory`):
    the Keras model, the converter's state and the blocks earlier calls left, which at 640x640
    reach 1-1.5 GB."""
    from ..quantize.api import DEFAULT_MEMORY_BUDGET, frames_within, parse_memory_budget
    from ..quantize.parallel_calibration import MAIN_PROCESS_BYTES, release_free_memory, rss_bytes

    total = parse_memory_budget(DEFAULT_MEMORY_BUDGET) if budget is None else budget
    release_free_memory()
    held = max(0.0, rss_bytes() - MAIN_PROCESS_BYTES)
    return frames_within(sum(la.output_bytes("fp32") for la in graph.layers[first:end]),
                         EXPORT_CALL_SHARE * total - held)


# ---------------------------------------------------------------- Keras sub-models
def _node_index(model: Any) -> dict[str, tuple[Any, Any]]:
    """Op name -> (layer, its call), named as the importer names them: a shared layer's k-th
    call (k > 0) is ``name@k`` (:func:`optimizer.graph.keras_import.graph_from_keras`)."""
    from ..graph.keras_import import _inbound_nodes, flatten_layers

    out: dict[str, tuple[Any, Any]] = {}
    for layer in flatten_layers(model):
        for k, node in enumerate(_inbound_nodes(layer, model)):
            out[layer.name if k == 0 else f"{layer.name}@{k}"] = (layer, node)
    return out


def _keras_tensors(model: Any, nodes: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """Tensor id -> original KerasTensor (model inputs and every layer output)."""
    from ..graph.keras_import import _flat, _tensor_id

    out = {_tensor_id(t): t for t in model.inputs}
    for _, node in nodes.values():
        for t in _flat(node.output_tensors):
            out[_tensor_id(t)] = t
    return out


class KerasCutter:
    """Builds sub-models of one Keras model.

    The layer nodes and tensors of the original graph are indexed once, at construction:
    re-applying a layer adds a node to it, so indexing later would see the sub-models' nodes.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.nodes = _node_index(model)
        self.originals = _keras_tensors(model, self.nodes)

    def submodel(self, graph: LayerGraph, first_op: int, end_op: int, inputs: list[str],
                 outputs: list[str], name: str) -> Any:
        """A Keras functional model computing ops ``[first_op, end_op)`` of ``graph``.

        ``inputs``/``outputs`` are tensor ids; the sub-model's inputs are named ``in0, in1, ...``
        and its outputs are in the order given. The original layer objects are re-applied, so
        weights are shared with the full model.
        """
        from ..graph.keras_import import _flat, _tensor_id
        from ..lazy import keras as _keras

        keras = _keras()
        env: dict[str, Any] = {}
        new_inputs = []
        for k, tid in enumerate(inputs):
            orig = self.originals[tid]
            t = keras.Input(shape=tuple(orig.shape[1:]), dtype=orig.dtype, name=f"in{k}")
            env[tid] = t
            new_inputs.append(t)

        def swap(x: Any) -> Any:
            if isinstance(x, keras.KerasTensor):
                tid = _tensor_id(x)
                if tid not in env:
                    raise ModelFormatError(f"{self.model.name}: part {name} reads tensor {tid!r} that "
                                           "is neither its input nor computed inside it")
                return env[tid]
            return x

        for layer_spec in graph.layers[first_op:end_op]:
            layer, node = self.nodes[layer_spec.name]
            args = keras.tree.map_structure(swap, node.arguments.args)
            kwargs = keras.tree.map_structure(swap, node.arguments.kwargs)
            result = layer(*args, **kwargs)
            for orig, new in zip(_flat(node.output_tensors), _flat(result), strict=True):
                env[_tensor_id(orig)] = new
        return keras.Model(new_inputs, [env[t] for t in outputs], name=name)


def part_io(graph: LayerGraph, first_op: int, end_op: int) -> tuple[list[str], list[str]]:
    """Tensor ids a part reads from earlier parts and produces for later parts (DAG cut)."""
    n = len(graph)
    ins, outs = [], []
    for t in graph.tensors.values():
        inside = [c for c in t.consumers if first_op <= c < end_op]
        if t.producer < first_op and inside:
            ins.append(t)
        if first_op <= t.producer < end_op and any(c >= end_op or c == n for c in t.consumers):
            outs.append(t)
    key = lambda t: (t.producer, t.name)  # noqa: E731
    return [t.name for t in sorted(ins, key=key)], [t.name for t in sorted(outs, key=key)]


# ---------------------------------------------------------------- conversion
def convert_part(submodel: Any, path: Path, dtype: str,
             representative: Callable[[], Iterator[dict[str, np.ndarray]]] | None,
             memory_budget: float | None = None) -> Path:
    """Convert one sub-model to TFLite (fp32, fp16 weights, or full-integer int8).

    Uses :mod:`optimizer.graph.convert` (quiet, atomic); int8 adds the PTQ settings, with the
    calibration ranges recorded by :mod:`optimizer.quantize.ranges` (in several passes where one
    would not fit ``memory_budget`` bytes).
    """
    from ..graph.convert import keras_tflite_converter, keras_to_tflite, run_converter
    from ..lazy import tensorflow
    from ..quantize.parallel_calibration import parallel_calibration

    if dtype != "int8":
        return keras_to_tflite(submodel, path, fp16=dtype == "fp16")
    tf = tensorflow()
    converter = keras_tflite_converter(submodel)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    with parallel_calibration(1, memory_budget=memory_budget):  # LiteRT ranges, in this process
        return run_converter(converter, path, submodel.name)


def part_tensor_specs(path: Path, names: list[str], kind: str) -> list[TensorSpec]:
    """I/O specs of a converted part, read back from its ``serving_default`` signature."""
    from ..lazy import litert_interpreter

    interp = litert_interpreter()(model_path=str(path))
    runner = interp.get_signature_runner("serving_default")
    details = runner.get_input_details() if kind == "inputs" else runner.get_output_details()
    prefix = "in" if kind == "inputs" else "output_"
    specs = []
    for k, name in enumerate(names):
        sig = f"{prefix}{k}"
        if sig not in details:
            raise ModelFormatError(f"{path.name}: converted part has no {kind[:-1]} {sig!r} "
                                   f"(signature has {sorted(details)})")
        d = details[sig]
        scale, zp = d["quantization"]
        q = Quantization(scale=float(scale), zero_point=int(zp)) if scale else None
        specs.append(TensorSpec(name=name, signature_name=sig, index=int(d["index"]),
                                shape=[int(s) for s in d["shape"]], dtype=np.dtype(d["dtype"]).name,
                                quantization=q))
    return specs


def delegate_for(processor: str, role: str) -> str:
    """The runtime delegate a part asks for: GPU, NNAPI (NPU/DSP/TPU) or XNNPACK (CPU); a
    server tail runs plain kernels."""
    if role == "tail":
        return "none"
    p = processor.lower()
    if p.startswith("gpu"):
        return "gpu"
    if p.startswith(("npu", "dsp", "tpu")):
        return "nnapi"
    return "xnnpack"


def manifest_part(pr: PartRange, path: Path, inputs: list[TensorSpec], outputs: list[TensorSpec]) -> Part:
    """The manifest entry of part ``pr`` converted to ``path`` (hash and size read from the file)."""
    return Part(name=pr.name, role=pr.role, file=path.name, sha256=sha256_file(path), bytes=path.stat().st_size,
                first_layer=pr.first_layer, last_layer=pr.last_layer, first_op=pr.first_op,
                last_op=pr.end_op - 1, processor=pr.processor, delegate=delegate_for(pr.processor, pr.role),
                threads=pr.threads, dtype=pr.dtype, location=pr.location, inputs=inputs, outputs=outputs)


# ---------------------------------------------------------------- calibration
def calibration_inputs(graph: LayerGraph, calib: Any, samples: int, seed: int) -> tuple[dict[str, np.ndarray], Calibration]:
    """Calibration batches for the graph inputs: ``synthetic`` (uniform in [-1, 1], i.e. the
    normalised range of the zoo preprocessing), an ``.npz`` file, or a dict of arrays."""
    if calib is None or calib == "synthetic":
        chunks = list(synthetic_chunks(graph, samples, seed))
        data = {t: np.concatenate([c for name, c in chunks if name == t]) for t in graph.inputs}
        return data, Calibration(source="synthetic", samples=samples, seed=seed)
    _check_samples(samples)
    if isinstance(calib, dict):
        arrays, info = calib, Calibration(source="arrays", samples=samples, seed=seed)
    else:
        p = Path(calib)
        arrays = read_npz(p, "no such calibration file; give an .npz file or 'synthetic'", max_rows=samples)
        info = Calibration(source=p.name, samples=samples, seed=seed, file_sha256=sha256_file(p))
    data = {}
    keys = list(arrays)
    for k, t in enumerate(graph.inputs):
        key = t if t in arrays else (t.split(":")[0] if t.split(":")[0] in arrays else
                                     (keys[k] if k < len(keys) else None))
        if key is None:
            raise InputFileError(f"{calib}: no array for network input {t!r}; arrays: {keys}")
        a = np.asarray(arrays[key], dtype=np.float32)
        want = graph.tensors[t].shape
        if a.ndim == len(want):
            a = a[None]
        if tuple(a.shape[1:]) != tuple(want):
            raise InputFileError(f"{calib}: array {key!r} has shape {list(a.shape)}; expected "
                                 f"[N, {', '.join(map(str, want))}] for input {t!r}")
        data[t] = a[:samples]
    info.samples = min(len(v) for v in data.values())
    return data, info


#: synthetic calibration samples drawn at a time (float64 draws: 8 bytes per element)
SYNTHETIC_CHUNK = 16


def _check_samples(samples: int) -> None:
    if samples < 1:
        raise ConfigError(f"--samples {samples}: expected at least 1 calibration sample")


def synthetic_chunks(graph: LayerGraph, samples: int, seed: int) -> Iterator[tuple[str, np.ndarray]]:
    """Seeded synthetic calibration inputs (uniform in [-1, 1], the normalised range of the zoo
    preprocessing) as ``(input, float32 rows)`` chunks of :data:`SYNTHETIC_CHUNK` samples, input
    after input: the same values as one draw of all samples, without its float64 copy."""
    _check_samples(samples)
    rng = np.random.default_rng(seed)
    for t in graph.inputs:
        for start in range(0, samples, SYNTHETIC_CHUNK):
            n = min(SYNTHETIC_CHUNK, samples - start)
            yield t, rng.uniform(-1.0, 1.0, (n, *graph.tensors[t].shape)).astype(np.float32)


def representative_dataset(arrays: list[np.ndarray]) -> Callable[[], Iterator[dict[str, np.ndarray]]]:
    """A TFLite representative dataset yielding one sample per step, keyed ``in0, in1, ...``."""
    def gen() -> Iterator[dict[str, np.ndarray]]:
        for i in range(len(arrays[0])):
            yield {f"in{k}": a[i:i + 1] for k, a in enumerate(arrays)}

    return gen


def predict_float(submodel: Any, arrays: list[np.ndarray], batch: int = 16) -> list[np.ndarray]:
    """Float outputs of a Keras sub-model (the calibration data of the next parts)."""
    outs = list(float_batches(submodel, (lambda a, b: [x[a:b] for x in arrays]), len(arrays[0]), batch))
    return [np.concatenate([o[j] for o in outs]) for j in range(len(outs[0]))]


def float_batches(submodel: Any, rows: Callable[[int, int], list[np.ndarray]], n: int,
                  batch: int) -> Iterator[list[np.ndarray]]:
    """Float outputs of a Keras sub-model on samples ``0..n-1``, ``batch`` at a time
    (``rows(start, stop)``: its inputs for those samples). The calls run as one ``tf.function``:
    an eager functional call holds every layer output of its frames until it returns (1 GB per
    640x640 frame of ssd_resnet50_fpn's backbone), the graph executor frees each once consumed."""
    from ..lazy import tensorflow

    call = tensorflow().function(lambda xs: submodel(xs, training=False))
    for i in range(0, n, batch):
        res = call(rows(i, min(i + batch, n)))
        res = res if isinstance(res, (list, tuple)) else [res]
        yield [np.asarray(r) for r in res]


class CalibrationStore:
    """The float calibration tensors of an export (network inputs and the activations at every
    cut), spilled to one file per tensor in ``folder`` and read back a few samples at a time.

    Part ``k`` is calibrated on the activations parts ``0..k-1`` produce for every calibration
    sample; held in memory, these reach ``samples`` x the cut bytes (ssd_mobilenet_v1_fpn at
    640x640, 64 samples: 1.8 GB), so an export holds one Keras call's frames instead. Files are
    read with plain reads, not memory maps, so what was read is not left resident.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, tuple[Path, np.dtype[Any], tuple[int, ...]]] = {}
        self.counts: dict[str, int] = {}

    def put(self, name: str, rows: np.ndarray) -> None:
        """Append ``rows`` (samples along axis 0) to tensor ``name``."""
        if name not in self.files:
            self.files[name] = (self.folder / f"t{len(self.files)}.bin", rows.dtype, tuple(rows.shape[1:]))
            self.counts[name] = 0
        path, dtype, shape = self.files[name]
        if rows.dtype != dtype or tuple(rows.shape[1:]) != shape:
            raise ModelFormatError(f"tensor {name!r}: calibration rows of shape {list(rows.shape)} {rows.dtype} "
                                   f"after rows of [N, {', '.join(map(str, shape))}] {dtype}")
        with open(path, "ab") as fh:
            fh.write(np.ascontiguousarray(rows).tobytes())
        self.counts[name] += len(rows)

    def rows(self, name: str, start: int, stop: int) -> np.ndarray:
        """Samples ``start..stop-1`` of tensor ``name``."""
        path, dtype, shape = self.files[name]
        per = int(np.prod(shape, dtype=np.int64)) if shape else 1
        stop = min(stop, self.counts[name])
        data = np.fromfile(path, dtype=dtype, count=per * (stop - start), offset=start * per * dtype.itemsize)
        return data.reshape((stop - start, *shape))

    def count(self, name: str) -> int:
        """Samples stored for tensor ``name``."""
        return self.counts[name]

    def representative(self, names: list[str]) -> Callable[[], Iterator[dict[str, np.ndarray]]]:
        """A TFLite representative dataset over tensors ``names`` (one sample per step, keyed
        ``in0, in1, ...`` like :func:`representative_dataset`)."""
        def gen() -> Iterator[dict[str, np.ndarray]]:
            for i in range(self.count(names[0])):
                yield {f"in{k}": self.rows(t, i, i + 1) for k, t in enumerate(names)}

        return gen

    def predict(self, submodel: Any, ins: list[str], outs: list[str], batch: int) -> None:
        """Store the float outputs ``outs`` of a Keras sub-model reading stored tensors ``ins``."""
        n = self.count(ins[0])
        for res in float_batches(submodel, lambda a, b: [self.rows(t, a, b) for t in ins], n, batch):
            for name, r in zip(outs, res, strict=True):
                self.put(name, r)


# ---------------------------------------------------------------- INT8 alignment
class _Int8Reference:
    """The single-file INT8 model of the whole network, as a TFLite object tree.

    Parts quantized separately agree with it only up to the last float bits of their scales
    (their calibrators see float activations computed in a different order), and a random-
    weight network amplifies the resulting one-LSB flips. :meth:`align` therefore copies the
    reference's quantization parameters onto every activation tensor of a part, the reference's
    constants onto every matched operator (so biases quantized against the reference's input
    scales), and makes each part input use its producer's parameters: the parts then compute
    exactly what the single-file model computes.

    Part tensors are matched by structure first (:meth:`_follow`: from the part inputs, each
    operator is the reference operator reading the matched tensors), then by the TensorFlow op
    name the converter gives each tensor. Names alone are not enough: a layer called several
    times (the box head shared by the FPN levels of an SSD) gets scopes numbered in the order a
    model traces its calls (``BoxHead_1``, ``BoxHead_3``, ...), so a part that traces fewer calls
    of it names them after other calls of the single file. The reference tensor of every part
    output is remembered for the parts that read it (:attr:`placed`).
    """

    def __init__(self, path: Path, graph_inputs: list[str], graph_outputs: list[str]) -> None:
        from ..lazy import tensorflow

        tensorflow()
        from tensorflow.lite.tools import flatbuffer_utils

        self.fu = flatbuffer_utils
        self.model = flatbuffer_utils.read_model(str(path))
        sg = self.model.subgraphs[0]
        self.act: dict[str, Any] = {}
        self.ops: dict[str, Any] = {}
        self.producer: dict[int, Any] = {}
        self.readers: dict[int, list[int]] = {}  # tensor -> indices of the operators reading it
        for t in sg.tensors:
            if self._is_activation(self.model, t):
                self.act.setdefault(_op_key(t.name), t.quantization)
        for k, op in enumerate(sg.operators):
            for oi in op.outputs:
                self.ops.setdefault(_op_key(sg.tensors[oi].name), op)
                self.producer[oi] = op
            for ii in dict.fromkeys(op.inputs):
                if ii >= 0:
                    self.readers.setdefault(int(ii), []).append(k)
        sig = self.model.signatureDefs[0]
        by_sig = {tm.name.decode(): tm.tensorIndex for tm in sig.outputs}
        self.outputs = {name: by_sig.get(f"output_{k}") for k, name in enumerate(graph_outputs)}
        by_sig = {tm.name.decode(): tm.tensorIndex for tm in sig.inputs}
        self.input_index = {name: by_sig.get(f"in{k}") for k, name in enumerate(graph_inputs)}
        self.inputs = {name: None if i is None else sg.tensors[i].quantization for name, i in self.input_index.items()}
        #: LayerGraph tensor id -> the reference's tensor, for every part output aligned so far
        self.placed: dict[str, int] = {}

    @staticmethod
    def _is_activation(model: Any, t: Any) -> bool:
        q = t.quantization
        return q is not None and q.scale is not None and len(q.scale) == 1 and not _is_constant(model, t)

    def _follow(self, pm: Any, seeds: dict[int, int]) -> dict[int, int]:
        """Part tensor -> reference tensor for every tensor of part ``pm`` computed, operator by
        operator, from the matched tensors ``seeds`` (its inputs).

        A part operator reading a matched tensor is the reference operator, not yet taken, that
        reads it at the same position with the same operator code, options, constant shapes and
        output shapes (:func:`_same_operator`). Several such operators are told apart by the
        constants they share byte for byte (weights quantize alike in both models), then by op
        name; an operator still ambiguous is left unmatched, and so is what it computes."""
        sg, rsg = pm.subgraphs[0], self.model.subgraphs[0]
        found = dict(seeds)
        taken: set[int] = set()
        for op in sg.operators:
            reads = [ti for ti in op.inputs if ti in found]
            if not reads:
                continue
            cands = [k for k in self.readers.get(found[reads[0]], []) if k not in taken
                     and _same_operator(pm, op, self.model, rsg.operators[k], found)]
            if len(cands) > 1:
                score = {k: _shared_constants(pm, op, self.model, rsg.operators[k]) for k in cands}
                cands = [k for k in cands if score[k] == max(score.values())]
            if len(cands) > 1:
                key = _op_key(sg.tensors[op.outputs[0]].name)
                cands = [k for k in cands if _op_key(rsg.tensors[rsg.operators[k].outputs[0]].name) == key]
            if len(cands) != 1:
                continue
            taken.add(cands[0])
            found.update(zip((int(t) for t in op.outputs), (int(t) for t in rsg.operators[cands[0]].outputs)))
        return found

    def _tensor_index(self, tid: str, shape: list[int]) -> int | None:
        """The reference's tensor holding LayerGraph tensor ``tid`` (by the producing layer's
        op-name scope and the shape), or None."""
        if self.outputs.get(tid) is not None:
            return self.outputs[tid]
        layer = tid.split(":")[0]
        pat = re.compile(rf"^{re.escape(layer)}(_\d+)?/")
        sg = self.model.subgraphs[0]
        found = [i for i, t in enumerate(sg.tensors) if self._is_activation(self.model, t)
                 and pat.match(_op_key(t.name)) and list(t.shape) == shape]
        return found[-1] if found else None

    def align(self, path: Path, part_inputs: list[str], part_outputs: list[str],
              known: dict[str, Quantization]) -> None:
        """Rewrite the INT8 part at ``path`` in place (see the class docstring)."""
        from ..fileio import atomic_write_bytes
        from ..graph.tflite_flatbuffer import write_model

        fu = self.fu
        pm = fu.read_model(str(path))
        sg = pm.subgraphs[0]
        ref_sg = self.model.subgraphs[0]
        sig = pm.signatureDefs[0]
        index = {tm.name.decode(): tm.tensorIndex for tm in list(sig.inputs) + list(sig.outputs)}
        seeds: dict[int, int] = {}
        for k, tid in enumerate(part_inputs):
            ti = index[f"in{k}"]
            ri = self.placed.get(tid, self.input_index.get(tid))
            ri = self._tensor_index(tid, list(sg.tensors[ti].shape)) if ri is None else ri
            if ri is not None:
                seeds[ti] = ri
        matched = self._follow(pm, seeds)
        for i, t in enumerate(sg.tensors):  # activations: by structure, else by op name
            if not self._is_activation(pm, t):
                continue
            if i in matched:
                if self._is_activation(self.model, ref_sg.tensors[matched[i]]):
                    t.quantization = copy.deepcopy(ref_sg.tensors[matched[i]].quantization)
            elif not _signature_named(t.name):  # signature I/O are named after the signature
                q = self.act.get(_op_key(t.name))
                if q is not None:
                    t.quantization = copy.deepcopy(q)
        # part output tensor -> the reference's tensor with the same LayerGraph id
        out_ref: dict[int, int] = {}
        for k, tid in enumerate(part_outputs):
            ti = index[f"output_{k}"]
            ri = matched.get(ti)
            ri = self._tensor_index(tid, list(sg.tensors[ti].shape)) if ri is None else ri
            if ri is not None:
                out_ref[ti] = self.placed[tid] = ri
        for op in sg.operators:  # constants (weights, biases) of matched operators
            ri = matched.get(op.outputs[0], out_ref.get(op.outputs[0]))
            if ri is not None:
                ref = self.producer.get(ri)
            elif not _signature_named(sg.tensors[op.outputs[0]].name):
                ref = self.ops.get(_op_key(sg.tensors[op.outputs[0]].name))
            else:
                ref = None
            if ref is None or len(ref.inputs) != len(op.inputs):
                continue
            for ti, ri in zip(op.inputs, ref.inputs, strict=True):
                if ti < 0 or ri < 0:
                    continue
                t, rt = sg.tensors[ti], ref_sg.tensors[ri]
                data = pm.buffers[t.buffer].data
                if data is not None and len(data) and list(t.shape) == list(rt.shape):
                    pm.buffers[t.buffer].data = self.model.buffers[rt.buffer].data
                    t.quantization = copy.deepcopy(rt.quantization)
        for k, tid in enumerate(part_inputs):  # inputs: exactly the producer's parameters
            t = sg.tensors[index[f"in{k}"]]
            if t.quantization is None or t.quantization.scale is None:
                continue
            q = known.get(tid)
            if q is not None:
                t.quantization.scale, t.quantization.zeroPoint = [q.scale], [q.zero_point]
            elif self.inputs.get(tid) is not None:
                t.quantization = copy.deepcopy(self.inputs[tid])
        for ti, ri in out_ref.items():
            sg.tensors[ti].quantization = copy.deepcopy(self.model.subgraphs[0].tensors[ri].quantization)
        atomic_write_bytes(path, write_model(pm))  # identical vectors stored once, buffers aligned


def _is_constant(model: Any, t: Any) -> bool:
    """Whether tensor ``t`` of ``model`` holds data (weights, biases, shapes)."""
    data = model.buffers[t.buffer].data
    return data is not None and len(data) > 0


def _same_value(a: Any, b: Any) -> bool:
    """Equality of operator options (flatbuffer objects, vectors, scalars), field by field."""
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if hasattr(a, "__dict__") or hasattr(b, "__dict__"):
        return type(a) is type(b) and vars(a).keys() == vars(b).keys() and all(
            _same_value(v, vars(b)[k]) for k, v in vars(a).items())
    return bool(a == b)


def _same_operator(pm: Any, op: Any, rm: Any, ref: Any, found: dict[int, int]) -> bool:
    """Whether reference operator ``ref`` (of model ``rm``) computes what part operator ``op`` (of
    ``pm``) computes, given the matched tensors ``found``: same operator code and options,
    matched tensors read at the same positions (a tensor not matched, such as a shape the part
    computes from a float copy of an activation, where the reference reads no constant),
    constants of the same shape and type where the part has constants, outputs of the same shapes."""
    sg, rsg = pm.subgraphs[0], rm.subgraphs[0]
    code, rcode = pm.operatorCodes[op.opcodeIndex], rm.operatorCodes[ref.opcodeIndex]
    if (max(code.builtinCode, code.deprecatedBuiltinCode) != max(rcode.builtinCode, rcode.deprecatedBuiltinCode)
            or code.customCode != rcode.customCode or len(op.inputs) != len(ref.inputs)
            or len(op.outputs) != len(ref.outputs) or op.builtinOptionsType != ref.builtinOptionsType
            or not _same_value(op.builtinOptions, ref.builtinOptions)):
        return False
    for ti, ri in zip(op.inputs, ref.inputs, strict=True):
        if (ti < 0) != (ri < 0):
            return False
        if ti < 0:
            continue
        t, rt = sg.tensors[ti], rsg.tensors[ri]
        if _is_constant(pm, t):
            if not _is_constant(rm, rt) or list(t.shape) != list(rt.shape) or t.type != rt.type:
                return False
        elif found.get(int(ti), ri) != ri or _is_constant(rm, rt):
            return False
    return all(list(sg.tensors[ti].shape) == list(rsg.tensors[ri].shape)
               for ti, ri in zip(op.outputs, ref.outputs, strict=True))


def _shared_constants(pm: Any, op: Any, rm: Any, ref: Any) -> int:
    """How many constant inputs of ``op`` hold the same bytes as ``ref``'s at that position."""
    sg, rsg = pm.subgraphs[0], rm.subgraphs[0]
    return sum(1 for ti, ri in zip(op.inputs, ref.inputs, strict=True)
               if ti >= 0 and ri >= 0 and _is_constant(pm, sg.tensors[ti]) and _is_constant(rm, rsg.tensors[ri])
               and bytes(pm.buffers[sg.tensors[ti].buffer].data) == bytes(rm.buffers[rsg.tensors[ri].buffer].data))


def _signature_named(name: bytes | str) -> bool:
    """Tensors the converter names after the signature (``serving_default_in0:0``,
    ``StatefulPartitionedCall_1:0``) rather than after the TensorFlow op computing them."""
    text = name.decode() if isinstance(name, bytes) else name
    return text.startswith(("serving_default_", "StatefulPartitionedCall"))


def _op_key(name: bytes | str) -> str:
    """``b"stage1_1/block_3_add_1/Add;..."`` -> ``"block_3_add_1/Add"`` (model scope dropped)."""
    first = (name.decode() if isinstance(name, bytes) else name).split(";")[0]
    return first.split("/", 1)[1] if "/" in first else first


# ---------------------------------------------------------------- export
def _prepare_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir}: exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MANIFEST_FILE).is_file():
        raise ConfigError(f"--out {out_dir}: directory exists and is not a dnnplan export "
                          "(no manifest.json); choose another directory")


def export_plan(plan: Plan, out_dir: str | os.PathLike[str], *, model: Any = None, calib: Any = None,
                samples: int = DEFAULT_CALIB_SAMPLES, seed: int = 0, keep_reference: bool = False,
                memory_budget: float | str = "4GB", progress: Callable[[str], None] | None = None,
                note: Callable[[str], None] | None = None) -> Manifest:
    """Write the artifacts of ``plan`` into ``out_dir`` and return their manifest.

    Parameters
    ----------
    plan : Plan
        A pipeline, split or joint plan.
    out_dir : path-like
        Destination directory (created; an earlier export there is replaced atomically).
    model : keras.Model or path, optional
        The network; default: the plan's zoo builder with weights seeded by ``seed``.
    calib : {"synthetic", path, dict}, optional
        INT8 calibration inputs (default synthetic); ignored for fp32/fp16 parts.
    samples : int
        Calibration samples.
    seed : int
        Weight seed of zoo networks and seed of synthetic calibration data.
    keep_reference : bool
        Also ship the single-file INT8 model that multi-part INT8 exports are aligned to
        (``reference.int8.tflite``, listed in the manifest), for validation on the device.
    memory_budget : float or str
        Peak resident memory to plan for, bytes or a size such as ``"4GB"`` (quantize's
        ``--memory-budget``): it sets the frames of every Keras call (batch-norm passes of zoo
        networks, the float activations that calibrate later parts; :func:`frames_per_call`);
        calibration tensors stay on disk (:class:`CalibrationStore`), not growing with ``samples``.
    progress, note : callable, optional
        Called with a short message before each conversion; with what the user should know
        about the plan (:func:`kernel_splits`).
    """
    import tempfile

    from .. import __version__
    from ..quantize.api import parse_memory_budget

    budget = parse_memory_budget(memory_budget)
    out = Path(out_dir)
    _prepare_out_dir(out)
    if (file_model := _model_file(plan, model)) is not None:
        return _export_file(plan, out, file_model, progress)
    keras_model, op_graph, weight_seed = load_plan_model(plan, model, seed=seed, memory_budget=budget)
    cutter = KerasCutter(keras_model)
    plan_graph = op_graph.with_granularity(plan.model.granularity)
    parts = plan_parts(plan, plan_graph)
    for line in kernel_splits(plan_graph, parts) if note else ():
        note(line)
    needs_int8 = any(p.dtype == "int8" for p in parts)
    with staged_folder(out, "export folder") as tmp, tempfile.TemporaryDirectory(prefix="dnnplan-export-") as spill:
        store = CalibrationStore(Path(spill))
        calib_info = _fill_calibration(store, op_graph, calib, samples, seed) if needs_int8 else None
        reference, ref_info = (_int8_reference(cutter, op_graph, tmp, store, keep_reference, progress, budget)
                               if needs_int8 and len(parts) > 1 else (None, None))
        known: dict[str, Quantization] = {}
        manifest_parts: list[Part] = []
        for pr in parts:
            ins, outs = part_io(op_graph, pr.first_op, pr.end_op)
            sub = cutter.submodel(op_graph, pr.first_op, pr.end_op, ins, outs, pr.name)
            rep = store.representative(ins) if pr.dtype == "int8" else None
            if progress:
                progress(f"converting {pr.name} (layers {pr.first_layer}-{pr.last_layer}, {pr.dtype})")
            fname = f"{pr.name}.tflite"
            convert_part(sub, tmp / fname, pr.dtype, rep, budget)
            if reference is not None and pr.dtype == "int8":
                reference.align(tmp / fname, ins, outs, known)
            if needs_int8 and pr is not parts[-1]:
                store.predict(sub, ins, outs, frames_per_call(op_graph, pr.first_op, pr.end_op, budget))
            manifest_parts.append(manifest_part(pr, tmp / fname, part_tensor_specs(tmp / fname, ins, "inputs"),
                                                part_tensor_specs(tmp / fname, outs, "outputs")))
            known.update({t.name: t.quantization for t in manifest_parts[-1].outputs if t.quantization})
        if keep_reference and ref_info is None:
            ref_info = _kept_reference(plan, cutter, op_graph, tmp, store, needs_int8, progress, budget)
        if calib_info is not None:
            calib_info.aligned_to_single_file = reference is not None
        manifest = build_manifest(plan, op_graph, manifest_parts, weight_seed, calib_info, __version__)
        manifest.reference = ref_info
        manifest = Manifest.model_validate(manifest.model_dump())
        atomic_write_json(tmp / MANIFEST_FILE, manifest.model_dump(mode="json"))
    return manifest


def _fill_calibration(store: CalibrationStore, op_graph: LayerGraph, calib: Any, samples: int,
                      seed: int) -> Calibration:
    """Put the network inputs' INT8 calibration samples into ``store`` (synthetic ones drawn chunk
    by chunk, so they are never all held) and return their description for the manifest."""
    if calib is None or calib == "synthetic":
        for t, rows in synthetic_chunks(op_graph, samples, seed):
            store.put(t, rows)
        return Calibration(source="synthetic", samples=samples, seed=seed)
    calib_data, calib_info = calibration_inputs(op_graph, calib, samples, seed)
    for t in op_graph.inputs:
        store.put(t, calib_data[t])
    return calib_info


def _kept_reference(plan: Plan, cutter: KerasCutter, op_graph: LayerGraph, tmp: Path, store: CalibrationStore,
                    needs_int8: bool, progress: Callable[[str], None] | None, budget: float | None = None) -> Any:
    """The single-file reference ``--keep-reference`` ships when no INT8 alignment made one."""
    ref_dtype = "int8" if needs_int8 else ("fp16" if plan.model.dtype == "fp16" else "fp32")
    if progress:
        progress(f"converting the single-file {ref_dtype} reference (--keep-reference)")
    return _single_file_reference(cutter, op_graph, tmp, ref_dtype, store, budget)


def _int8_reference(cutter: KerasCutter, op_graph: LayerGraph, tmp: Path, store: CalibrationStore,
                    keep: bool, progress: Callable[[str], None] | None,
                    budget: float | None = None) -> tuple[_Int8Reference, ReferenceModel | None]:
    """The single-file INT8 model whose quantization parameters the INT8 parts are aligned to
    (kept in the artifacts with ``keep``)."""
    if progress:
        progress("converting the single-file INT8 reference (quantization parameters)")
    ref_path = tmp / REFERENCE_FILE
    full = cutter.submodel(op_graph, 0, len(op_graph), list(op_graph.inputs), list(op_graph.outputs), "full")
    convert_part(full, ref_path, "int8", store.representative(list(op_graph.inputs)), budget)
    reference = _Int8Reference(ref_path, list(op_graph.inputs), list(op_graph.outputs))
    if not keep:
        ref_path.unlink()
        return reference, None
    return reference, ReferenceModel(file=REFERENCE_FILE, sha256=sha256_file(ref_path), bytes=ref_path.stat().st_size)


def _single_file_reference(cutter: KerasCutter, op_graph: LayerGraph, tmp: Path, dtype: str,
                           store: CalibrationStore, budget: float | None = None) -> ReferenceModel:
    """The whole network converted once at ``dtype`` into ``tmp`` (``--keep-reference`` of an
    export that is not aligned to a single-file INT8 model), for ``dnnplan run --check``."""
    path = tmp / f"reference.{dtype}.tflite"
    full = cutter.submodel(op_graph, 0, len(op_graph), list(op_graph.inputs), list(op_graph.outputs), "full")
    rep = store.representative(list(op_graph.inputs)) if dtype == "int8" else None
    convert_part(full, path, dtype, rep, budget)
    return ReferenceModel(file=path.name, sha256=sha256_file(path), bytes=path.stat().st_size)


def _model_file(plan: Plan, model: Any) -> Path | None:
    """The ``.tflite``/``.onnx`` file a plan is exported from (``model`` or the plan's source),
    or None for zoo networks and Keras models."""
    from .export_files import FILE_FORMATS

    ref = model if isinstance(model, (str, os.PathLike)) else (plan.model.source if model is None else None)
    if ref is None or Path(str(ref)).suffix.lower() not in FILE_FORMATS:
        return None
    path = Path(str(ref))
    if not path.is_file():
        raise InputFileError(f"{path}: model file of the plan is missing; pass --model FILE")
    return path


def _export_file(plan: Plan, out: Path, path: Path, progress: Callable[[str], None] | None) -> Manifest:
    """Export a plan of a ``.tflite``/``.onnx`` file: parts cut in the file's own format
    (:mod:`optimizer.plan.export_files`), in the file's dtype, no conversion."""
    from .. import __version__
    from ..graph.loader import load_graph_file
    from .export_files import file_cutter

    op_graph = load_graph_file(path, "op", plan_input_shapes(plan))
    if plan.model.sha256 and op_graph.source_sha256 != plan.model.sha256:
        raise SchemaError(f"plan: field model.sha256: {plan.model.sha256[:12]}... does not match {path} "
                          f"({op_graph.source_sha256[:12]}...); make the plan from this file or pass --model")
    parts = plan_parts(plan, op_graph.with_granularity(plan.model.granularity))
    cutter = file_cutter(path, op_graph)
    cutter.check_cuttable(len(parts))
    file_dtype = op_graph.weight_dtype if op_graph.weight_dtype in ("fp32", "fp16", "int8") else "fp32"
    with staged_folder(out, "export folder") as tmp:
        manifest_parts: list[Part] = []
        for pr in parts:
            ins, outs = part_io(op_graph, pr.first_op, pr.end_op)
            custom = sorted({la.op_type for la in op_graph.layers[pr.first_op:pr.end_op] if la.op == "custom"})
            if progress:
                note = f"; keeps custom operators {', '.join(custom)} (CPU kernels)" if custom else ""
                progress(f"cutting {pr.name} (layers {pr.first_layer}-{pr.last_layer}) from {path.name}{note}")
            fname = f"{pr.name}{cutter.suffix}"
            in_specs, out_specs = cutter.write(pr.first_op, pr.end_op, ins, outs, tmp / fname, pr.name, len(parts))
            manifest_parts.append(manifest_part(replace(pr, dtype=file_dtype), tmp / fname, in_specs, out_specs))
        manifest = build_manifest(plan, op_graph, manifest_parts, None, None, __version__)
        manifest = Manifest.model_validate(manifest.model_dump())
        atomic_write_json(tmp / MANIFEST_FILE, manifest.model_dump(mode="json"))
    return manifest


def _server_topk(plan: Plan, op_graph: LayerGraph) -> TopK | None:
    """The wire's top-k reduction when the plan's server sends an SSD head's best anchors."""
    if plan.split is None or plan.split.result != "topk":
        return None
    from ..cost.hostproc import SERVER_TOPK, ssd_head, ssd_head_outputs

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
        req_bytes = sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in request)
        resp_bytes = sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in response)
        wire = Wire(max_frame_bytes=max(req_bytes, resp_bytes) + FRAME_HEADER_SLACK, request=request,
                    response=response, request_bytes=req_bytes, result=topk)
    model = ModelInfo(name=plan.model.name, sha256=plan.model.sha256, granularity=plan.model.granularity,
                      layers=plan.model.layers, ops=len(op_graph), source=plan.model.source or op_graph.source,
                      variant=dict(plan.model.variant), weight_seed=weight_seed,
                      input_shapes=plan.model.input_shapes)
    return Manifest(kind=plan.kind, plan_sha256=plan_sha256(plan), device=plan.device,
                    dtype=plan.model.dtype, model=model, inputs=net_inputs, outputs=net_outputs,
                    parts=parts, wire=wire, calibration=calib, tool_version=version,
                    created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def plan_for_cuts(model: str, cuts: list[int], *, kind: str = "pipeline", dtype: str = "fp32",
                  granularity: str = "op", variant: dict[str, Any] | None = None,
                  processors: list[str] | None = None, threads: int = 1, device: str = "host",
                  solver: str = "manual", input_shapes: dict[str, tuple[int, ...]] | None = None) -> Plan:
    """A plan with hand-chosen boundaries (for tests, demos and benchmarks).

    ``cuts`` are boundaries in the ``granularity`` view: a pipeline gets ``len(cuts) + 1``
    stages on ``processors`` (default ``cpu0, cpu1, ...``); a split takes ``cuts[0]`` as its
    boundary, with the crossing tensors of :meth:`LayerGraph.cut_tensors`. ``input_shapes``: of a
    model file with dynamic dims (``--input-shape``), recorded in ``model.input_shapes``.
    """
    from ..graph import load_graph
    from .schema import CrossingTensor, ModelRef, SearchInfo, Split, Stage, model_input_shapes, new_provenance

    variant = dict(variant or {})
    graph = load_graph(model, granularity, input_shapes=input_shapes, **variant)
    n = len(graph)
    ref = ModelRef(name=graph.name, sha256=graph.source_sha256, layers=n, granularity=granularity,
                   dtype=dtype, source=graph.source or None, variant=variant, input_shapes=model_input_shapes(graph))
    search = SearchInfo(solver=solver, settings={"cuts": list(cuts)})
    if kind == "pipeline":
        bounds = [0, *cuts, n]
        if sorted(set(bounds)) != bounds:
            raise ConfigError(f"cuts {cuts}: expected strictly increasing boundaries inside 1..{n - 1}")
        procs = processors or [f"cpu{k}" for k in range(len(bounds) - 1)]
        stages = [Stage(processor=procs[k], first_layer=a, last_layer=b - 1, threads=threads, dtype=dtype)
                  for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        return Plan(kind="pipeline", model=ref, device=device, stages=stages, search=search,
                    provenance=new_provenance())
    if kind == "split":
        if len(cuts) != 1 or not 0 <= cuts[0] <= n:
            raise ConfigError(f"cuts {cuts}: a split takes one boundary in 0..{n}")
        wire_dtype = dtype
        tensors = [CrossingTensor(name=t.name, shape=list(t.shape), dtype=wire_dtype, bytes=t.nbytes(wire_dtype))
                   for t in graph.cut_tensors(cuts[0])]
        split = Split(layer=cuts[0], tensors=tensors, bytes=sum(t.bytes for t in tensors),
                      head_processor=(processors or ["cpu0"])[0], wire_dtype=wire_dtype, server="server")
        return Plan(kind="split", model=ref, device=device, split=split, search=search,
                    provenance=new_provenance())
    raise ConfigError(f"kind {kind!r}: expected pipeline or split")
