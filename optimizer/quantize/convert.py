"""TFLite conversion: model reference → TFLite converter → FP32 / INT8 / FP16 / dynamic-range ``.tflite``.

Schemes (TFLite post-training quantization; Park & Ha, IEEE Access 2024, docs/METHODS.md section 1):

``per-channel`` (default)
    Full-integer PTQ: activations asymmetric per tensor, conv/depthwise weights symmetric per
    output channel, fully-connected weights symmetric per tensor (the paper's scheme).
``per-tensor``
    Full-integer PTQ with every weight quantized per tensor (the paper's comparison point;
    the converter's ``_experimental_disable_per_channel`` switch).
``fp16``
    Weights stored as float16, compute in float.
``dynamic``
    Dynamic-range quantization: int8 weights, activations quantized on the fly (hybrid ops).

Converters come from :mod:`optimizer.graph.convert` (shared with the importers): a Keras model's
from its batch-1 inference function, a SavedModel's (an ``.onnx`` file's, through onnx2tf) from
its directory; every call runs with TensorFlow's log output silenced, and a failure becomes one
project exception carrying the converter's own error text.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError, ModelFormatError, UnsupportedOperatorError
from ..graph.convert import quiet_conversion
from ..graph.convert import keras_tflite_converter, savedmodel_tflite_converter
from ..workers import collect_and_release
from .calibration import CalibrationSet, InputSpec
from .parallel_calibration import CalibrationPlan, RepresentativeData, parallel_calibration

SCHEMES = ("per-channel", "per-tensor", "fp16", "dynamic")
INTEGER_SCHEMES = ("per-channel", "per-tensor")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Converter calls: TensorFlow's logs silenced and its Python warnings (deprecation notices) dropped."""
    with quiet_conversion(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@dataclass
class ModelSource:
    """A model ready for conversion and what is known about it.

    Keras models (``keras_model`` set) are converted from their batch-1 inference function
    (:meth:`converter`); SavedModel inputs are used as they are.
    """

    name: str
    inputs: list[InputSpec]
    preprocess: dict[str, Any] | None
    task: str | None
    source_path: Path | None
    keras_model: Any = None
    random_weights: bool = False
    saved_model_dir: Path | None = None
    tflite: bytes | None = None  # a float .tflite given as the model (quantized in the flatbuffer)
    tflite_weights: str | None = None  # its float weight type: "fp32" or "fp16"

    def converter(self) -> Any:
        """A float TFLite converter of the model: a Keras model's from its batch-1 inference
        function (:func:`~optimizer.graph.convert.keras_tflite_converter`: the operators and
        ``serving_default`` signature of a SavedModel export, without writing one and reading it
        back), a SavedModel's from its directory."""
        if self.keras_model is None:
            assert self.saved_model_dir is not None, "a ModelSource holds a Keras model or a SavedModel"
            return savedmodel_tflite_converter(self.saved_model_dir)
        try:
            return keras_tflite_converter(self.keras_model, _input_signature(self.keras_model, self.inputs))
        except Exception as exc:  # tf.function tracing errors surface as many types
            raise ModelFormatError(f"{self.name}: cannot trace the Keras model for conversion "
                                   f"({_first_line(exc)})") from None


def open_model(model_ref: str | os.PathLike[str], workdir: Path, seed: int = 0,
               input_shapes: dict[str, tuple[int, ...]] | None = None) -> ModelSource:
    """Resolve a zoo name, ``.keras``, ``.tflite`` or ``.onnx`` file or SavedModel directory into
    a :class:`ModelSource`.

    Zoo networks are built with random weights after ``keras.utils.set_random_seed(seed)``, so
    the same seed gives the same weights. ``input_shapes`` (input name -> full shape in the
    file's own layout) fixes an ``.onnx`` model's dynamic dimensions; other models refuse it.
    """
    from ..graph.zoo import builder, builder_names, dropped_model_files, zoo_names

    ref = str(model_ref)
    path = Path(ref)
    if not path.exists() and ref in dropped_model_files():
        path = dropped_model_files()[ref]
    if input_shapes and not (path.exists() and path.suffix.lower() == ".onnx"):
        raise ConfigError(f"{ref}: input shapes apply to .onnx models only; this model's input shapes are fixed")
    if path.is_dir():
        if not (path / "saved_model.pb").is_file():
            raise ModelFormatError(f"{path}: directory has no saved_model.pb; give a SavedModel "
                                   "directory, a .keras file or a zoo name")
        return ModelSource(path.name, _savedmodel_inputs(path), None, None, path, saved_model_dir=path)
    if path.exists() and path.suffix.lower() == ".tflite":
        from .tflite_input import read_float_tflite

        data, specs, weights = read_float_tflite(path)
        return ModelSource(path.stem, specs, None, None, path, tflite=data, tflite_weights=weights)
    if path.exists() and path.suffix.lower() == ".onnx":
        from .onnx_input import onnx_to_savedmodel

        saved = onnx_to_savedmodel(path, workdir, input_shapes=input_shapes)
        return ModelSource(path.stem, _savedmodel_inputs(saved), None, None, path, saved_model_dir=saved)
    if path.exists():
        if path.suffix.lower() != ".keras":
            raise ModelFormatError(f"{path}: cannot quantize a {path.suffix or 'suffix-less'} file; give a "
                                   ".keras, .onnx or float .tflite file, a SavedModel directory or a zoo name")
        from .. import lazy

        keras = lazy.keras()
        try:
            with quiet():
                model = keras.models.load_model(path, compile=False)
        except Exception as exc:  # Keras raises bare ValueError/TypeError/OSError on bad files
            raise ModelFormatError(f"{path}: not a loadable .keras model ({_first_line(exc)})") from None
        return model_from_keras(model, path.stem, source_path=path)
    if ref in builder_names():
        from .. import lazy
        from ..graph.zoo import build_keras

        keras = lazy.keras()
        mod = builder(ref)
        keras.utils.set_random_seed(seed)
        with quiet():
            model = build_keras(ref)
        src = model_from_keras(model, ref, getattr(mod, "PREPROCESS", None), getattr(mod, "TASK", None))
        src.random_weights = True
        return src
    if path.suffix or os.sep in ref:
        raise InputFileError(f"{ref}: no such file; give a .keras file, a SavedModel directory "
                             "or a zoo name")
    from ..errors import UnknownNameError

    raise UnknownNameError("zoo network", ref, zoo_names())


def model_from_keras(model: Any, name: str, preprocess: dict[str, Any] | None = None,
                     task: str | None = None, source_path: Path | None = None) -> ModelSource:
    """Wrap an in-memory Keras model as a :class:`ModelSource` (converted from its inference
    function, :meth:`ModelSource.converter`)."""
    specs = [InputSpec(_sig_name(t.name), tuple(int(d) if d is not None else 1 for d in t.shape[1:]),
                       np.dtype(_np_dtype(t.dtype)).name) for t in model.inputs]
    return ModelSource(name, sorted(specs, key=lambda s: s.name), preprocess, task, source_path, keras_model=model)


def _np_dtype(dtype: Any) -> Any:
    return getattr(dtype, "as_numpy_dtype", dtype)


def _input_signature(model: Any, inputs: list[InputSpec]) -> list[Any]:
    """One batch-1 ``tf.TensorSpec`` per input of the Keras ``model``, in its order, named and
    shaped as ``inputs`` (:func:`model_from_keras`) say."""
    from .. import lazy

    tf = lazy.tensorflow()
    by_name = {s.name: s for s in inputs}
    specs = [by_name[_sig_name(t.name)] for t in model.inputs]
    return [tf.TensorSpec((1, *s.shape), s.dtype, name=s.name) for s in specs]


def estimate_batchnorm_statistics(model: Any, batch: dict[str, np.ndarray],
                                  frames_per_pass: int | None = None) -> int:
    """Re-estimate BN statistics of a random-weight zoo model on a calibration ``batch`` (by
    input name), ``frames_per_pass`` frames at a time; see
    :func:`optimizer.graph.zoo.reestimate_batchnorm`. Returns the layer count."""
    from ..graph.zoo import reestimate_batchnorm

    return reestimate_batchnorm(model, [batch[_sig_name(t.name)] for t in model.inputs], frames_per_pass)


def _sig_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name.split(":")[0])


def _savedmodel_inputs(path: Path) -> list[InputSpec]:
    from .. import lazy

    tf = lazy.tensorflow()
    try:
        with quiet():
            loaded = tf.saved_model.load(str(path))
    except Exception as exc:  # TF raises OSError/ValueError/NotFoundError on bad SavedModels
        raise ModelFormatError(f"{path}: not a loadable SavedModel ({_first_line(exc)})") from None
    sig = loaded.signatures.get("serving_default")
    if sig is None:
        raise ModelFormatError(f"{path}: SavedModel has no 'serving_default' signature "
                               f"(has {', '.join(loaded.signatures) or 'none'})")
    _, kwargs = sig.structured_input_signature
    specs = []
    for key, spec in sorted(kwargs.items()):
        shape = tuple(int(d) if d is not None else 1 for d in spec.shape[1:])
        specs.append(InputSpec(key, shape, np.dtype(spec.dtype.as_numpy_dtype).name))
    return specs


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _converter_error(exc: BaseException) -> str:
    """The informative lines of a converter error (``error:`` lines of the MLIR diagnostics)."""
    text = str(exc)
    errors = [ln.split("error:", 1)[1].strip() for ln in text.splitlines() if "error:" in ln]
    return "; ".join(dict.fromkeys(errors))[:500] if errors else _first_line(exc)


def convert_float(src: ModelSource) -> bytes:
    """Convert to an FP32 ``.tflite`` (the reference the quantized model is compared against);
    a float ``.tflite`` source is its own reference."""
    if src.tflite is not None:
        return src.tflite
    converter = src.converter()
    try:
        with quiet():
            result = bytes(converter.convert())
    except Exception as exc:  # converter raises ConverterError/RuntimeError/ValueError
        raise UnsupportedOperatorError(f"{src.name}: TFLite cannot convert the model "
                                       f"({_converter_error(exc)})") from None
    finally:  # the converter and what TensorFlow left in reference cycles, handed back
        del converter
        collect_and_release()
    return result


def convert_quantized(src: ModelSource, scheme: str, calib: CalibrationSet, io_type: str,
                      plan: CalibrationPlan | None = None,
                      calib_info: dict[str, Any] | None = None, float_nodes: list[str] | None = None,
                      calibrated: dict[str, Any] | None = None) -> bytes:
    """Convert with a post-training quantization ``scheme`` (see module docstring).

    Parameters
    ----------
    src
        The model.
    scheme
        One of :data:`SCHEMES`.
    calib
        Representative samples, streamed (used by the integer schemes only).
    io_type
        ``"int8"`` (integer model inputs/outputs) or ``"float"`` (QUANTIZE/DEQUANTIZE at I/O).
    plan
        Calibration batch and processes (:func:`.parallel_calibration.plan_calibration`);
        ``None``: batches of one on one process. The result does not depend on the processes.
    calib_info
        If given, updated with the calibration's ``samples``, ``batch`` and ``workers``.
    float_nodes
        Integer schemes: output tensor names of operators to keep in float (the MLIR quantizer's
        ``denylisted_nodes``; ai-edge-quantizer's ``no_quantize`` recipe rows for a ``.tflite``):
        they compute in float between ``DEQUANTIZE`` and ``QUANTIZE`` (mixed precision).
    calibrated
        A dict that keeps the calibration between calls: the first call stores the calibrated
        model (or statistics) in it, later calls with the same dict quantize from it without
        calibrating again.

    Returns the converter's flatbuffer as it wrote it (see :func:`.flatbuffer.compact`).
    """
    from .. import lazy

    if scheme not in SCHEMES:
        raise ConfigError(f"unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    if src.tflite is not None:
        from .tflite_input import quantize_float_tflite

        return quantize_float_tflite(src.tflite, scheme, calib, src.name, float_nodes, calibrated)
    tf = lazy.tensorflow()
    converter = src.converter()
    integer = scheme in INTEGER_SCHEMES
    try:
        calibrating = (parallel_calibration(plan.workers if plan else 1, plan.batch if plan else 1)
                       if integer else contextlib.nullcontext({}))
        with quiet(), calibrating as info, _denylisting(float_nodes, calibrated):
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            if scheme == "fp16":
                converter.target_spec.supported_types = [tf.float16]
            elif integer:
                converter.representative_dataset = RepresentativeData(calib)
                converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
                # the paper's scheme: fully-connected weights per tensor in both variants
                converter._experimental_disable_per_channel_quantization_for_dense_layers = True
                converter._experimental_disable_per_channel = scheme == "per-tensor"
                if io_type == "int8":
                    int_inputs = all(np.issubdtype(np.dtype(s.dtype), np.integer) for s in src.inputs)
                    if not int_inputs:
                        converter.inference_input_type = tf.int8
                    converter.inference_output_type = tf.int8
            result = bytes(converter.convert())
            if calib_info is not None:
                calib_info.update(info)
            return result
    except Exception as exc:  # converter raises ConverterError/RuntimeError/ValueError
        msg = _converter_error(exc)
        match = re.search(r"op[: ]+'?([A-Za-z_.0-9]+)'?", msg)
        what = f"operator {match.group(1)}" if match and "quantiz" in msg.lower() else "the model"
        raise UnsupportedOperatorError(f"{src.name}: TFLite cannot quantize {what} with scheme "
                                       f"{scheme} ({msg})") from None
    finally:  # the converter and its leftovers, handed back before the next stage (convert_float)
        del converter
        collect_and_release()


@contextlib.contextmanager
def _denylisting(float_nodes: list[str] | None, store: dict[str, Any] | None) -> Iterator[None]:
    """Inside the block, the converter's MLIR quantizer keeps ``float_nodes`` in float
    (``denylisted_nodes``, what ``tf.lite.experimental.QuantizationDebugger`` passes), records the
    calibrated model in ``store`` and, when ``store`` already holds one, takes it instead of
    calibrating again. Everything else is the converter's own flow."""
    if not float_nodes and store is None:
        yield
        return
    from tensorflow.lite.python import lite
    from tensorflow.lite.python.optimize import calibrator as module

    quantize, calibrator = lite._mlir_quantize, module.Calibrator
    saved = (store or {}).get("calibrated")

    def denylisted(data: bytes, *args: Any, **kwargs: Any) -> Any:
        if store is not None:
            store.setdefault("calibrated", bytes(data))
        kwargs["denylisted_nodes"] = list(float_nodes or []) or None
        return quantize(data, *args, **kwargs)

    class Stored(calibrator):  # type: ignore[misc, valid-type]
        def calibrate(self, dataset_gen: Any) -> bytes:
            return saved  # type: ignore[return-value]

    lite._mlir_quantize = denylisted
    if saved is not None:
        module.Calibrator = Stored
    try:
        yield
    finally:
        lite._mlir_quantize = quantize
        module.Calibrator = calibrator


def temp_workdir() -> tempfile.TemporaryDirectory[str]:
    """A temporary directory for intermediate files (an ONNX model's SavedModel, calibration data), removed on exit."""
    return tempfile.TemporaryDirectory(prefix="dnnplan-quantize-")
