"""Activation ranges of a float TFLite model, recorded with LiteRT's XNNPACK kernels.

Post-training quantization needs the min/max of every float activation over the calibration
samples (Jacob et al. 2018; TFLite's calibrator: ``calibration_logger.h``). TensorFlow's
calibration wrapper (``tensorflow.lite.python.optimize.calibrator``) records them by running the
model on TFLite's builtin kernels on one thread and reading each operator's inputs *after* the
operator ran. Two consequences, measured on mobilenet_v2 (224x224, one sample):

* an operator that computes in place corrupts what is read as its input: TFLite's ``ADD`` may
  write its sum into an input's buffer when that input dies there, so the projection of every
  inverted residual block is recorded with the range of the block's sum (block_9: [-7.44, 8.55]
  instead of the [-4.22, 4.08] the tensor holds), costing those tensors about one bit of INT8
  resolution;
* the builtin kernels are slow: 88.7 ms per sample against 13.9 ms for XNNPACK, one thread each.

:func:`record_ranges` instead marks every float activation of the main subgraph as a model
output, so no buffer is shared or reused, runs the model with LiteRT's default XNNPACK delegate,
and takes each tensor's min/max after each batch. :func:`with_ranges` writes them
into the float model as the calibration statistics the converter's quantizer reads
(``QuantizationParameters.min/max``), the form TensorFlow's wrapper produces. Models this does
not cover (several subgraphs, operators with intermediate tensors such as LSTMs) return None, and
the caller uses TensorFlow's wrapper.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..graph.tflite_flatbuffer import read_model, tflite_schema, write_model

FLOAT32 = 0  # TensorType.FLOAT32 in the TFLite schema

Ranges = dict[int, tuple[float, float]]
#: one calibration batch: arrays by input name (signature or tensor name) or in input order
Batch = dict[Any, np.ndarray] | list[np.ndarray] | tuple[np.ndarray, ...]


def activation_tensors(model: Any) -> list[int] | None:
    """Indices of the main subgraph's float activations (inputs and operator inputs/outputs
    without constant data), or None when :func:`record_ranges` does not cover the model."""
    if len(model.subgraphs) != 1:
        return None
    sg = model.subgraphs[0]
    if any(op.intermediates is not None and len(op.intermediates) for op in sg.operators):
        return None
    used = set(int(i) for i in sg.inputs)
    for op in sg.operators:
        used.update(int(i) for i in op.inputs if i >= 0)
        used.update(int(i) for i in op.outputs if i >= 0)
    out = []
    for i in sorted(used):
        t = sg.tensors[i]
        data = model.buffers[t.buffer].data if t.buffer < len(model.buffers) else None
        if t.type == FLOAT32 and (data is None or len(data) == 0):
            out.append(i)
    return out


def record_ranges(model_content: bytes, batches: Iterable[Batch] | Callable[[], Iterable[Batch]],
                  threads: int = 1, group_bytes: float | None = None) -> Ranges | None:
    """Min/max of every float activation (:func:`activation_tensors`) over ``batches`` (per input
    name, or in the model's input order, a ``[batch, ...]`` array, as a converter's representative
    dataset gives them; the inputs are resized to the first batch's shape), or None when the
    model is not covered.

    ``threads``: XNNPACK threads (its float kernels split output tiles, not sums, so the ranges do
    not depend on them). ``group_bytes``: most activation bytes per frame kept in one pass; more
    activations are recorded in several passes over the batches, one group of tensors each
    (``batches`` must then be a callable giving a fresh iterable).
    """
    model = read_model(model_content, "float model")
    tensors = activation_tensors(model)
    if tensors is None:
        return None
    groups = tensor_groups(model, tensors, group_bytes)
    if len(groups) > 1 and not callable(batches):
        raise TypeError("recording in several passes needs a callable that gives the batches again")
    sg = model.subgraphs[0]
    outputs = [int(o) for o in sg.outputs]
    ranges: Ranges = {}
    for group in groups:
        sg.outputs = outputs + [i for i in group if i not in outputs]
        ranges.update(_record(write_model(model), batches() if callable(batches) else batches, group, threads))
    return ranges


def frame_bytes(model: Any, tensors: list[int]) -> list[int]:
    """Bytes per frame (batch axis left out) of each float tensor of the main subgraph."""
    sg = model.subgraphs[0]
    shapes = [sg.tensors[i].shape for i in tensors]
    return [4 * int(np.prod(s[1:])) if s is not None and len(s) else 4 for s in shapes]


def tensor_groups(model: Any, tensors: list[int], group_bytes: float | None) -> list[list[int]]:
    """``tensors`` in consecutive groups of at most ``group_bytes`` float activation bytes per
    frame (:func:`frame_bytes`; one group when None; a tensor larger than the cap is a group of
    its own)."""
    if group_bytes is None:
        return [tensors]
    groups: list[list[int]] = [[]]
    held = 0.0
    for i, size in zip(tensors, frame_bytes(model, tensors), strict=True):
        if groups[-1] and held + size > group_bytes:
            groups.append([])
            held = 0.0
        groups[-1].append(i)
        held += size
    return groups


def _record(probe: bytes, batches: Iterable[Batch], tensors: list[int], threads: int) -> Ranges:
    """Min/max of ``tensors`` (outputs of the ``probe`` model) over ``batches``."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=probe, num_threads=threads)
    inputs = _input_indices(interp)
    ranges: Ranges = {}
    shaped = False
    order = [int(d["index"]) for d in interp.get_input_details()]
    for sample in batches:
        batch = sample if isinstance(sample, dict) else dict(zip(order, sample, strict=True))
        if not shaped:
            for name, value in batch.items():
                interp.resize_tensor_input(inputs.get(name, name), list(np.shape(value)), strict=False)
            interp.allocate_tensors()
            shaped = True
        for name, value in batch.items():
            interp.set_tensor(inputs.get(name, name), np.asarray(value))
        interp.invoke()
        for i in tensors:
            view = interp.tensor(i)()
            if view.size:
                lo, hi = float(view.min()), float(view.max())
                old = ranges.get(i)
                ranges[i] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
            del view
    return ranges


def _input_indices(interp: Any) -> dict[Any, int]:
    """Tensor index of each model input by its signature name (the names calibration samples
    carry, as for TensorFlow's wrapper) and by its tensor name."""
    out: dict[Any, int] = {d["name"]: int(d["index"]) for d in interp.get_input_details()}
    if interp.get_signature_list():
        details = interp.get_signature_runner().get_input_details()
        out.update({name: int(d["index"]) for name, d in details.items()})
    return out


def with_ranges(model_content: bytes, ranges: Ranges) -> bytes:
    """The float model with ``ranges`` as each tensor's calibration min/max."""
    schema = tflite_schema()
    model = read_model(model_content, "float model")
    tensors = model.subgraphs[0].tensors
    for i, (lo, hi) in ranges.items():
        q = tensors[i].quantization or schema.QuantizationParametersT()
        q.min, q.max = [lo], [hi]
        tensors[i].quantization = q
    return write_model(model)


def calibrate(model_content: bytes, batches: Iterable[Batch] | Callable[[], Iterable[Batch]],
              threads: int = 1, group_bytes: float | None = None) -> bytes | None:
    """The calibrated float model (:func:`record_ranges` then :func:`with_ranges`), or None."""
    ranges = record_ranges(model_content, batches, threads, group_bytes)
    return None if ranges is None else with_ranges(model_content, ranges)
