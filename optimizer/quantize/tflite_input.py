"""Post-training quantization of an already-converted float ``.tflite`` (FP32 or FP16 weights).

Engineers often hold a float ``.tflite`` and not the network it came from. Such a file cannot go
back through the TFLite converter, so it is quantized in the flatbuffer itself by Google's
AI Edge Quantizer (``ai-edge-quantizer``), with recipes matching the converter's schemes
(Park & Ha, IEEE Access 2024; docs/METHODS.md section 1):

* ``per-channel``: ``static_wi8_ai8`` — INT8 weights symmetric per output channel (fully
  connected: per tensor, as the converter path), INT8 activations asymmetric per tensor,
  calibrated min/max;
* ``per-tensor``: the same with per-tensor weights;
* ``dynamic``: ``dynamic_wi8_afp32`` — INT8 weights, float activations.

``fp16`` is not offered (the quantizer has no FP16 recipe). Inputs and outputs stay float
(QUANTIZE/DEQUANTIZE at the model's edges). PReLU, which the quantizer leaves in float, is made
INT8 afterwards (:mod:`.prelu`). Files without a signature get ``serving_default``
(``in0..``/``output_0..``) first, which calibration needs.
"""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, ModelFormatError, UnsupportedOperatorError
from .calibration import CalibrationSet, InputSpec
from ..graph.tflite_flatbuffer import drop_unused_tensors, read_model, tflite_schema, with_signature, write_model

#: schemes a float ``.tflite`` can be quantized with, and the quantizer recipe of each
TFLITE_SCHEMES = ("per-channel", "per-tensor", "dynamic")
SIGNATURE = "serving_default"


def read_float_tflite(path: Path) -> tuple[bytes, list[InputSpec], str]:
    """The file's bytes (with a signature), its inputs and its float weight type ("fp32"/"fp16").

    Raises :class:`ModelFormatError` for a corrupt file or one that is already integer-quantized.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFormatError(f"{path}: cannot read ({exc.strerror})") from None
    model = read_model(data, str(path))
    types = tflite_schema().TensorType
    weights = {t.type for sg in model.subgraphs for t in sg.tensors
               if t.buffer and model.buffers[t.buffer].data is not None and len(model.buffers[t.buffer].data)}
    if weights & {types.INT8, types.UINT8} or any(
            t.quantization is not None and t.quantization.scale is not None and len(t.quantization.scale)
            for t in model.subgraphs[0].tensors):
        raise ModelFormatError(f"{path}: already an integer-quantized model; give the float (FP32 or FP16) "
                               ".tflite it came from")
    data = _normalised_float_model(model, fold_fp16=types.FLOAT16 in weights)
    data = with_signature(data, str(path))
    from .. import lazy

    interp = lazy.litert_interpreter()(model_content=data)
    runner = interp.get_signature_runner(_signature_key(interp))
    specs = [InputSpec(name, tuple(int(d) for d in det["shape"][1:]), np.dtype(det["dtype"]).name)
             for name, det in sorted(runner.get_input_details().items())]
    return data, specs, "fp16" if types.FLOAT16 in weights else "fp32"


def _normalised_float_model(model: Any, fold_fp16: bool) -> bytes:
    """The model as the quantizer expects it: operator codes in ``builtin_code`` and, for an FP16
    file, FP16 constants widened to FP32 with their ``DEQUANTIZE`` operators removed.

    Files written before schema 3a (many published models) keep operator codes only in
    ``deprecated_builtin_code``; the quantizer reads ``builtin_code`` and would take every
    convolution for an ADD. An FP16 ``.tflite`` dequantizes its weights at run time; the quantizer
    would take those ``DEQUANTIZE`` outputs for activations (zero points on weights), so the
    constants are folded (the values the FP16 model computes with, exactly).
    """
    schema = tflite_schema()
    for code in model.operatorCodes:
        code.builtinCode = max(code.builtinCode, code.deprecatedBuiltinCode)
    if fold_fp16:
        _fold_fp16_weights(model, schema)
    return write_model(model)


def _fold_fp16_weights(model: Any, schema: Any) -> None:
    """Replace ``DEQUANTIZE`` of FP16 constants by FP32 constants, in place."""
    types, ops = schema.TensorType, schema.BuiltinOperator
    dequantize = {i for i, c in enumerate(model.operatorCodes)
                  if max(c.builtinCode, c.deprecatedBuiltinCode) == ops.DEQUANTIZE}
    for sg in model.subgraphs:
        kept = []
        for op in sg.operators:
            src = sg.tensors[op.inputs[0]] if op.opcodeIndex in dequantize and len(op.inputs) == 1 else None
            data = model.buffers[src.buffer].data if src is not None and src.buffer else None
            if src is None or src.type != types.FLOAT16 or data is None or not len(data):
                kept.append(op)
                continue
            out = sg.tensors[op.outputs[0]]
            buf = schema.BufferT()
            buf.data = np.frombuffer(np.asarray(data, np.uint8).tobytes(), np.float16).astype(np.float32).view(np.uint8)
            out.buffer = len(model.buffers)
            model.buffers.append(buf)
        sg.operators = kept
        drop_unused_tensors(model, sg)


def _signature_key(interp: Any) -> str:
    keys = list(interp.get_signature_list())
    return SIGNATURE if SIGNATURE in keys else keys[0]


def quantize_float_tflite(data: bytes, scheme: str, calib: CalibrationSet | list[dict[str, np.ndarray]],
                          what: str, float_nodes: list[str] | None = None,
                          store: dict[str, Any] | None = None) -> bytes:
    """Quantize a float ``.tflite`` (bytes with a signature) with ``scheme``; see the module doc.

    ``calib``: a calibration set (streamed, but ai-edge-quantizer counts it with
    ``len(list(dataset))`` first, so its samples are all held once while it does) or per-sample dicts.
    ``float_nodes``: output tensor names of operators left in float (``no_quantize`` recipe rows);
    ``store``: keeps the calibration statistics between calls (see
    :func:`.convert.convert_quantized`).
    """
    if scheme not in TFLITE_SCHEMES:
        raise ConfigError(f"--scheme {scheme} is not available for a .tflite input ({what}); expected one of "
                          f"{', '.join(TFLITE_SCHEMES)} (a .tflite is quantized by ai-edge-quantizer, "
                          "which has no fp16 recipe)")
    from ..graph.convert import quiet_conversion

    # the quantizer draws tqdm bars on sys.stderr whatever it is told: dnnplan reports its own progress
    with quiet_conversion(), contextlib.redirect_stderr(io.StringIO()):
        from ai_edge_quantizer import quantizer, recipe

        qt = quantizer.Quantizer(data, _recipe(recipe, scheme, float_nodes))
        from .. import lazy

        key = _signature_key(lazy.litert_interpreter()(model_content=data))
        try:
            dataset = _Samples(calib) if isinstance(calib, CalibrationSet) else calib
            stats = (store or {}).get("stats")
            if stats is None and qt.need_calibration:
                stats = qt.calibrate({key: dataset}, num_threads=1)
                if store is not None:
                    store["stats"] = stats
            result = qt.quantize(stats, enable_progress_bar=False, enable_progress_report=False)
        except Exception as exc:  # the quantizer raises ValueError/RuntimeError on ops it cannot handle
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UnsupportedOperatorError(f"{what}: ai-edge-quantizer cannot quantize this model with "
                                           f"{scheme} ({msg}); try --scheme dynamic") from None
    if scheme == "dynamic":
        return bytes(result.quantized_model)
    from .prelu import integer_prelu

    return integer_prelu(bytes(result.quantized_model), what, frozenset(float_nodes or ()))[0]


def _recipe(recipe: Any, scheme: str, float_nodes: list[str] | None = None) -> list[dict[str, Any]]:
    if scheme == "dynamic":
        return recipe.dynamic_wi8_afp32()
    import re

    keep_float = [{"regex": f"^{re.escape(name)};", "operation": "*", "algorithm_key": "no_quantize",
                   "op_config": {}} for name in float_nodes or []]
    rows = copy.deepcopy(recipe.static_wi8_ai8())
    if scheme == "per-tensor":
        for row in rows:
            row["op_config"]["weight_tensor_config"]["granularity"] = recipe.QuantGranularity.TENSORWISE
    else:  # the paper's scheme: fully-connected weights per tensor (later recipe rows take precedence)
        dense = copy.deepcopy(rows[-1])
        dense["operation"] = recipe.TFLOperationName.FULLY_CONNECTED
        dense["op_config"]["weight_tensor_config"]["granularity"] = recipe.QuantGranularity.TENSORWISE
        rows.append(dense)
    return rows + keep_float


class _Samples:
    """The calibration samples of a set, re-iterable (the quantizer walks them twice)."""

    def __init__(self, cal: CalibrationSet) -> None:
        self.cal = cal

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        return self.cal.samples("calib")
