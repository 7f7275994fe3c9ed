"""Export a plan as deployable artifacts: one submodel-model per part plus ``manifest.json``.

This module is the export driver: it takes the parts of a plan (:mod:`optimizer.plan.parts`) and
writes each into a temporary folder next to ``out_dir``, renamed at the end, so a failed export
leaves no half-written folder. Plans of zoo networks and ``.keras`` files are rebuilt in Keras
(:mod:`optimizer.plan.keras_model`), each part built as a submodel-model
(:mod:`optimizer.plan.keras_submodels`) and converted to TFLite (:mod:`optimizer.plan.tflite_convert`);
INT8 parts are calibrated with the float activations the earlier parts produce
(:mod:`optimizer.plan.calibration_data`) and, when there are several, aligned to the single-file INT8
model (:mod:`optimizer.plan.int8_alignment`), so the parts compute exactly what it computes. Plans of
``.tflite``/``.onnx`` files are cut in the file's own format (:mod:`optimizer.plan.export_files`).
Every part written is loaded and run once (:mod:`optimizer.plan.part_load`) and described in the
manifest (:mod:`optimizer.plan.manifest`).

The public names of those modules that callers used to import from here are re-exported.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputFileError, SchemaError
from ..fileio import atomic_write_json, sha256_file, staged_folder
from ..graph.layergraph import LayerGraph
from .calibration_data import (
    DEFAULT_CALIB_SAMPLES, EXPORT_CALL_SHARE, SYNTHETIC_CHUNK, CalibrationStore, calibration_inputs, fill_calibration,
    float_batches, frames_per_call, predict_float, representative_dataset, synthetic_chunks
)
from .int8_alignment import Int8Reference
from .keras_model import load_plan_model, reestimate_batchnorm
from .keras_submodels import KerasCutter
from .manifest import (
    DEPLOYMENT_FIELDS, FRAME_HEADER_SLACK, MANIFEST_FILE, Manifest, Part, Quantization, ReferenceModel,
    build_manifest, delegate_for, manifest_part, plan_sha256
)
from .manual_plan import plan_for_boundaries
from .part_load import checked_part
from .parts import PartRange, kernel_aware_parts, kernel_splits, op_boundaries, part_io, plan_parts
from .schema import Plan, plan_input_shapes
from .tflite_convert import ConversionMemo, convert_part, part_tensor_specs

__all__ = [
    "DEFAULT_CALIB_SAMPLES", "DEPLOYMENT_FIELDS", "EXPORT_CALL_SHARE", "FRAME_HEADER_SLACK", "REFERENCE_FILE",
    "SYNTHETIC_CHUNK", "CalibrationStore", "KerasCutter", "PartRange", "build_manifest", "calibration_inputs",
    "checked_part", "convert_part", "delegate_for", "export_plan", "float_batches", "frames_per_call",
    "kernel_splits", "load_plan_model", "manifest_part", "op_boundaries", "part_io", "part_tensor_specs",
    "plan_for_boundaries", "plan_parts", "plan_sha256", "predict_float", "reestimate_batchnorm",
    "representative_dataset", "synthetic_chunks",
]

REFERENCE_FILE = "reference.int8.tflite"



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
                note: Callable[[str], None] | None = None, memo: ConversionMemo | None = None) -> Manifest:
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
        (:func:`kernel_splits`, parts :func:`checked_part` could not run here).
    memo : ConversionMemo, optional
        Keras part conversions to reuse (a sweep's many exports); files as without it.
    """
    import tempfile

    from .. import __version__
    from ..quantize.api import parse_memory_budget

    budget = parse_memory_budget(memory_budget)
    out = Path(out_dir)
    _prepare_out_dir(out)
    if (file_model := _model_file(plan, model)) is not None:
        return _export_file(plan, out, file_model, progress, note)
    keras_model, op_graph, weight_seed = load_plan_model(plan, model, seed=seed, memory_budget=budget)
    cutter = KerasCutter(keras_model)
    plan_graph = op_graph.with_granularity(plan.model.granularity)
    parts = kernel_aware_parts(op_graph, plan_graph, plan_parts(plan, plan_graph), note)
    needs_int8 = any(p.dtype == "int8" for p in parts)
    with staged_folder(out, "export folder") as tmp, tempfile.TemporaryDirectory(prefix="dnnplan-export-") as spill:
        store = CalibrationStore(Path(spill))
        calib_info = fill_calibration(store, op_graph, calib, samples, seed) if needs_int8 else None
        reference, reference_info = (_int8_reference(cutter, op_graph, tmp, store, keep_reference, progress, budget,
                                                     memo) if needs_int8 and len(parts) > 1 else (None, None))
        known: dict[str, Quantization] = {}
        manifest_parts: list[Part] = []
        for part in parts:
            ins, outs = part_io(op_graph, part.first_op, part.end_op)
            submodel = cutter.submodel(op_graph, part.first_op, part.end_op, ins, outs, part.name)
            representative = store.representative(ins) if part.dtype == "int8" else None
            if progress:
                progress(f"converting {part.name} (layers {part.first_layer}-{part.last_layer}, {part.dtype})")
            path = tmp / f"{part.name}.tflite"
            convert_part(submodel, path, part.dtype, representative, budget, memo)
            if reference is not None and part.dtype == "int8":
                reference.align(path, ins, outs, known)
            if needs_int8 and part is not parts[-1]:
                store.predict(submodel, ins, outs, frames_per_call(op_graph, part.first_op, part.end_op, budget))
            manifest_parts.append(checked_part(part, path, part_tensor_specs(path, ins, "inputs"),
                                               part_tensor_specs(path, outs, "outputs"), note))
            known.update({t.name: t.quantization for t in manifest_parts[-1].outputs if t.quantization})
        if keep_reference and reference_info is None:
            reference_info = _kept_reference(plan, cutter, op_graph, tmp, store, needs_int8, progress, budget, memo)
        if calib_info is not None:
            calib_info.aligned_to_single_file = reference is not None
        manifest = build_manifest(plan, op_graph, manifest_parts, weight_seed, calib_info, __version__)
        manifest.reference = reference_info
        manifest = Manifest.model_validate(manifest.model_dump())
        atomic_write_json(tmp / MANIFEST_FILE, manifest.model_dump(mode="json"))
    return manifest


def _kept_reference(plan: Plan, cutter: KerasCutter, op_graph: LayerGraph, tmp: Path, store: CalibrationStore,
                    needs_int8: bool, progress: Callable[[str], None] | None, budget: float | None = None,
                    memo: ConversionMemo | None = None) -> Any:
    """The single-file reference ``--keep-reference`` ships when no INT8 alignment made one."""
    reference_dtype = "int8" if needs_int8 else ("fp16" if plan.model.dtype == "fp16" else "fp32")
    if progress:
        progress(f"converting the single-file {reference_dtype} reference (--keep-reference)")
    return _single_file_reference(cutter, op_graph, tmp, reference_dtype, store, budget, memo)


def _int8_reference(cutter: KerasCutter, op_graph: LayerGraph, tmp: Path, store: CalibrationStore,
                    keep: bool, progress: Callable[[str], None] | None, budget: float | None = None,
                    memo: ConversionMemo | None = None) -> tuple[Int8Reference, ReferenceModel | None]:
    """The single-file INT8 model whose quantization parameters the INT8 parts are aligned to
    (kept in the artifacts with ``keep``)."""
    if progress:
        progress("converting the single-file INT8 reference (quantization parameters)")
    reference_path = tmp / REFERENCE_FILE
    full = cutter.submodel(op_graph, 0, len(op_graph), list(op_graph.inputs), list(op_graph.outputs), "full")
    convert_part(full, reference_path, "int8", store.representative(list(op_graph.inputs)), budget, memo)
    reference = Int8Reference(reference_path, list(op_graph.inputs), list(op_graph.outputs))
    if not keep:
        reference_path.unlink()
        return reference, None
    return reference, ReferenceModel(file=REFERENCE_FILE, sha256=sha256_file(reference_path),
                                     bytes=reference_path.stat().st_size)


def _single_file_reference(cutter: KerasCutter, op_graph: LayerGraph, tmp: Path, dtype: str,
                           store: CalibrationStore, budget: float | None = None,
                           memo: ConversionMemo | None = None) -> ReferenceModel:
    """The whole network converted once at ``dtype`` into ``tmp`` (``--keep-reference`` of an
    export that is not aligned to a single-file INT8 model), for ``dnnplan run --check``."""
    path = tmp / f"reference.{dtype}.tflite"
    full = cutter.submodel(op_graph, 0, len(op_graph), list(op_graph.inputs), list(op_graph.outputs), "full")
    representative = store.representative(list(op_graph.inputs)) if dtype == "int8" else None
    convert_part(full, path, dtype, representative, budget, memo)
    return ReferenceModel(file=path.name, sha256=sha256_file(path), bytes=path.stat().st_size)


def _model_file(plan: Plan, model: Any) -> Path | None:
    """The ``.tflite``/``.onnx`` file a plan is exported from (``model`` or the plan's source),
    or None for zoo networks and Keras models."""
    from .export_files import FILE_FORMATS

    source = model if isinstance(model, (str, os.PathLike)) else (plan.model.source if model is None else None)
    if source is None or Path(str(source)).suffix.lower() not in FILE_FORMATS:
        return None
    path = Path(str(source))
    if not path.is_file():
        raise InputFileError(f"{path}: model file of the plan is missing; pass --model FILE")
    return path


def _export_file(plan: Plan, out: Path, path: Path, progress: Callable[[str], None] | None,
                 note: Callable[[str], None] | None = None) -> Manifest:
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
        for part in parts:
            ins, outs = part_io(op_graph, part.first_op, part.end_op)
            custom = sorted({layer.op_type for layer in op_graph.layers[part.first_op:part.end_op]
                             if layer.op == "custom"})
            if progress:
                keeps = f"; keeps custom operators {', '.join(custom)} (CPU kernels)" if custom else ""
                progress(f"cutting {part.name} (layers {part.first_layer}-{part.last_layer}) from {path.name}{keeps}")
            part_path = tmp / f"{part.name}{cutter.suffix}"
            in_specs, out_specs = cutter.write(part.first_op, part.end_op, ins, outs, part_path, part.name, len(parts))
            manifest_parts.append(checked_part(replace(part, dtype=file_dtype), part_path, in_specs, out_specs, note))
        manifest = build_manifest(plan, op_graph, manifest_parts, None, None, __version__)
        manifest = Manifest.model_validate(manifest.model_dump())
        atomic_write_json(tmp / MANIFEST_FILE, manifest.model_dump(mode="json"))
    return manifest
