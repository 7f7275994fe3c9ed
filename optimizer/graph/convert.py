"""Model conversions shared by the importers, the quantizer and the artifact exporters.

* Keras → ONNX with tf2onnx (``tf2onnx.convert.from_keras``, which accepts Keras 3 models on
  the TensorFlow backend).
* Keras / SavedModel → TFLite with the TensorFlow Lite converter (float32, or float16 weights).

Every conversion is quiet (TensorFlow's C++ log lines, tf2onnx's logger and the "Saved
artifact at ..." prints of the Keras export are swallowed) and atomic (the result is written
through :mod:`optimizer.fileio`, so a failed conversion leaves no file behind). Conversion
failures become :class:`~optimizer.errors.UnsupportedOperatorError` (the converter could not
express an operator) or :class:`~optimizer.errors.ModelFormatError`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputFileError, ModelFormatError, UnsupportedOperatorError
from ..fileio import atomic_write_bytes
from ..lazy import silenced_stderr
from ..workers import collect_and_release, proc_kb_bytes


@contextlib.contextmanager
def quiet_conversion() -> Iterator[None]:
    """Silence TensorFlow/tf2onnx output: fd 2, Python stdout, Python warnings raised inside
    the converters, and the converters' loggers."""
    loggers = [logging.getLogger(n) for n in ("tf2onnx", "tensorflow", "absl")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with silenced_stderr(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # the TFLite converter puts the useful line ("error: 'tf.Foo' op is neither ...") last
    useful = [ln for ln in lines if "error:" in ln] or lines or [type(exc).__name__]
    return useful[0][:limit]


#: tf2onnx's peak resident bytes: a base plus this many per byte of float weights (measured
#: with its optimizers working in place on fresh node protos: mobilenet_v2 14 MB -> 1.15 GB,
#: resnet50 102 MB -> 3.1 GB, alexnet 244 MB -> 5.8-6.5 GB, vgg16 553 MB -> 14.0 GB; the peak is
#: now TensorFlow's grappler pass; benchmarks/bench_tf2onnx_memory.py, figures in BENCHMARKS.md)
TF2ONNX_BASE_BYTES = 1.0e9
TF2ONNX_BYTES_PER_WEIGHT_BYTE = 24


def available_memory_bytes() -> float:
    """``MemAvailable`` of ``/proc/meminfo`` (infinite where it cannot be read)."""
    free = proc_kb_bytes("/proc/meminfo", "MemAvailable")
    return float("inf") if free is None else float(free)


def keras_to_onnx(model: Any, path: str | os.PathLike[str], opset: int | None = None) -> Path:
    """Export an in-memory Keras 3 model to ONNX with tf2onnx.

    Parameters
    ----------
    model : keras.Model
        Functional or sequential model with a known input shape (the batch dimension stays
        symbolic in the export).
    path : path-like
        Destination ``.onnx`` file, written atomically.
    opset : int, optional
        ONNX opset; default: tf2onnx's default for the installed version.

    Returns
    -------
    Path
        ``path``.
    """
    from ..lazy import tensorflow

    tensorflow()
    name = getattr(model, "name", "model")
    weights = 4.0 * float(model.count_params()) if hasattr(model, "count_params") else 0.0
    need, free = TF2ONNX_BASE_BYTES + TF2ONNX_BYTES_PER_WEIGHT_BYTE * weights, available_memory_bytes()
    if need > free:
        raise ConfigError(
            f"{name}: exporting it to ONNX with tf2onnx needs about {need / 1e9:.1f} GB ({weights / 1e6:.0f} MB "
            f"of float weights), more than the {free / 1e9:.1f} GB this machine has free; export it where more "
            "memory is free (python -m tf2onnx.convert) and give the .onnx file")
    with quiet_conversion():
        import tf2onnx

        try:
            proto = _tf2onnx_in_place(tf2onnx, model, opset)
        except Exception as exc:  # tf2onnx raises bare ValueError/RuntimeError/KeyError
            raise UnsupportedOperatorError(
                f"{name}: tf2onnx cannot export it to ONNX ({type(exc).__name__}: {_first_line(exc)})") from exc
    return atomic_write_bytes(path, proto.SerializeToString())


@contextlib.contextmanager
def _fresh_node_protos(tf2onnx: Any) -> Iterator[None]:
    """tf2onnx with each node's protobuf rebuilt, not cleared, when it is brought up to date.

    Every graph optimizer ends with ``Graph.update_proto``, which deletes each ``NodeProto``'s
    attributes and extends it with copies of the current ones, a constant's whole tensor
    included. The upb protobuf runtime frees a message's memory with its arena only, never when
    elements are deleted, so every pass added one more copy of the weights (2 passes x 12
    optimizers: alexnet 2.7 -> 8.4 GB). Here a node's proto is replaced by a fresh one that keeps
    its name, type, domain, inputs and outputs, so the old arena goes with the old message; the
    ONNX file written is byte-identical. Where tf2onnx's ``Node`` has no ``update_proto`` (another
    version), nothing changes."""
    node_cls = getattr(getattr(tf2onnx, "graph", None), "Node", None)
    original = getattr(node_cls, "update_proto", None)
    if node_cls is None or original is None:
        yield
        return

    def update_proto(self: Any, external_tensor_storage: Any = None) -> Any:
        old = getattr(self, "_op", None)
        if old is not None:
            old.ClearField("attribute")  # the rest of the old message is copied
            fresh = type(old)()
            fresh.CopyFrom(old)
            self._op = fresh
        return original(self, external_tensor_storage)

    node_cls.update_proto = update_proto
    try:
        yield
    finally:
        node_cls.update_proto = original


def _tf2onnx_in_place(tf2onnx: Any, model: Any, opset: int | None) -> Any:
    """``tf2onnx.convert.from_keras`` with its graph optimizers working in place.

    With ``catch_errors`` (its default) tf2onnx deep-copies the whole graph, weights included,
    before every optimizer of every pass so that a failing one can be skipped; the copies build
    up faster than they are collected (alexnet: 14.6 GB peak in place of 8.4). Any value of
    ``TF2ONNX_CATCH_ERRORS`` turns that off (tf2onnx 1.16 compares the variable's name, not its
    value, with ``TRUE``); a conversion whose optimizer fails is retried with the copies."""
    key = "TF2ONNX_CATCH_ERRORS"
    before = os.environ.get(key)
    os.environ[key] = "FALSE"
    try:
        with _fresh_node_protos(tf2onnx):
            try:
                proto, _ = tf2onnx.convert.from_keras(model, opset=opset)
            except Exception:  # noqa: BLE001 — an optimizer failed: tf2onnx's own skip-and-continue
                os.environ.pop(key)
                proto, _ = tf2onnx.convert.from_keras(model, opset=opset)
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before
    return proto


#: Signature key, and names of its input and output tensors, of a Keras model converted by
#: ``TFLiteConverter.from_keras_model`` (which exports a SavedModel with this one signature);
#: :func:`keras_tflite_converter` gives its flatbuffers the same.
SERVING_SIGNATURE = "serving_default"
SIGNATURE_INPUT_TENSOR = "serving_default_{name}:0"
SIGNATURE_OUTPUT_TENSOR = "StatefulPartitionedCall_1:{k}"


def with_serving_signature(flatbuffer: bytes, input_names: list[str]) -> bytes:
    """``flatbuffer`` (one subgraph, no signature) with the ``serving_default`` signature of a
    SavedModel-converted Keras model: inputs keyed by ``input_names`` (the subgraph's input order),
    outputs ``output_0`` .. in the subgraph's output order, and the I/O tensors renamed as that
    converter names them (``serving_default_<name>:0``, ``StatefulPartitionedCall_1:<k>``)."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(flatbuffer)
    graph = model.subgraphs[0]
    if len(graph.inputs) != len(input_names):
        raise ModelFormatError(f"the converted model has {len(graph.inputs)} inputs, the Keras model "
                               f"{len(input_names)} ({input_names})")

    def tensor_map(name: str, index: int) -> Any:
        entry = schema.TensorMapT()
        entry.name, entry.tensorIndex = name.encode(), int(index)
        return entry

    signature = schema.SignatureDefT()
    signature.signatureKey, signature.subgraphIndex = SERVING_SIGNATURE.encode(), 0
    signature.inputs = [tensor_map(n, i) for n, i in zip(input_names, graph.inputs, strict=True)]
    signature.outputs = [tensor_map(f"output_{k}", i) for k, i in enumerate(graph.outputs)]
    for n, i in zip(input_names, graph.inputs, strict=True):
        graph.tensors[i].name = SIGNATURE_INPUT_TENSOR.format(name=n).encode()
    for k, i in enumerate(graph.outputs):
        graph.tensors[i].name = SIGNATURE_OUTPUT_TENSOR.format(k=k).encode()
    model.signatureDefs = [signature]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def _inference_function(model: Any, signature: list[Any] | None = None) -> Any:
    """``model(x, training=False)`` as a ``tf.function`` over ``signature`` (default: the
    functional model's input specs; several inputs are passed as one list, as
    ``from_keras_model`` does); None for a model without symbolic inputs (a subclassed model)."""
    import keras

    from ..lazy import tensorflow

    tf = tensorflow()
    if not isinstance(model, keras.Model) or not isinstance(getattr(model, "inputs", None), list) \
            or not model.inputs:
        return None
    specs = signature or [tf.TensorSpec(t.shape, t.dtype, name=t.name) for t in model.inputs]
    if len(specs) == 1:
        return tf.function(lambda x: model(x, training=False), input_signature=specs)
    return tf.function(lambda *xs: model(list(xs), training=False), input_signature=specs)


#: :func:`keras_tflite_converter`'s converters let the frozen function go once its GraphDef is
#: made (:class:`TensorStandIn`); False keeps TensorFlow's own flow (tests compare the two)
DROP_FROZEN_GRAPH = True


class TensorStandIn:
    """A frozen function's input or output tensor as the TFLite converter reads it after freezing
    (name, dtype, shape; ``set_shape`` for an undefined batch), without the graph the tensor keeps
    alive.

    ``TFLiteConverterV2.convert`` holds the frozen function, whose graph stores every weight
    again, and its tensors until the conversion returns, through calibration and quantization:
    VGG-16's (553 MB of float weights) hold 1.6 GB, and with the garbage around them 4 GB, on
    top of the GraphDef the MLIR converter reads. Its own conversion reads only these three
    fields of the tensors, so the flatbuffers are byte-identical."""

    def __init__(self, tensor: Any) -> None:
        self.name: str = str(tensor.name)
        self.dtype: Any = tensor.dtype
        self.shape: Any = tensor.shape

    def set_shape(self, shape: Any) -> None:
        self.shape = type(self.shape)(shape)


def keras_tflite_converter(model: Any, signature: list[Any] | None = None) -> Any:
    """A ``tf.lite.TFLiteConverter`` for a Keras model, with default (float32) settings.

    ``signature`` (one ``tf.TensorSpec`` per model input, in order) fixes the input shapes and
    names the signature's inputs after the specs; default: the model's inputs as they are.

    Callers may set ``optimizations``, ``representative_dataset`` and ``target_spec`` before
    passing it to :func:`run_converter` (the quantizer does so for post-training quantization).

    A functional or sequential model is converted from its inference function with the
    variables frozen into constants (``from_concrete_functions``), not through
    ``from_keras_model``, whose Keras 3 branch writes the model to a SavedModel and reads it
    back (most of its conversion time). Both give the same operators, outputs and quantization
    parameters; the flatbuffer gets the SavedModel route's ``serving_default`` signature and I/O
    tensor names (:func:`with_serving_signature`) before any quantization, so representative
    samples keyed by input name and every reader of the signature see the same model
    (equivalence and times: benchmarks/bench_tflite_convert_route.py). Other models keep
    ``from_keras_model``.
    """
    from ..lazy import tensorflow

    tf = tensorflow()
    with quiet_conversion():
        function = _inference_function(model, signature)
        if function is None:
            return tf.lite.TFLiteConverter.from_keras_model(model)
        names = [str(t.name) for t in (signature or model.inputs)]

        class SignedFrozenConverter(tf.lite.TFLiteConverter):  # type: ignore[name-defined]
            def _freeze_concrete_function(self) -> Any:
                graph_def, inputs, outputs, frozen = super()._freeze_concrete_function()
                if not DROP_FROZEN_GRAPH or self._grappler_config().graph_options.rewrite_options.optimizers:
                    return graph_def, inputs, outputs, frozen  # a Grappler pass reads the frozen graph
                inputs, outputs = [TensorStandIn(t) for t in inputs], [TensorStandIn(t) for t in outputs]
                del frozen
                collect_and_release()
                return graph_def, inputs, outputs, None

            def _optimize_tflite_model(self, flat: bytes, *args: Any, **kwargs: Any) -> Any:
                collect_and_release()  # the MLIR conversion's leftovers, before calibration and quantization
                return super()._optimize_tflite_model(with_serving_signature(flat, names), *args, **kwargs)

        return SignedFrozenConverter([function.get_concrete_function()])


def savedmodel_tflite_converter(saved_model_dir: str | os.PathLike[str]) -> Any:
    """A ``tf.lite.TFLiteConverter`` for a SavedModel directory (default signature)."""
    from ..lazy import tensorflow

    d = Path(saved_model_dir)
    if not (d / "saved_model.pb").is_file():
        raise InputFileError(f"{d}: not a SavedModel directory (no saved_model.pb); "
                             "give a directory written by keras_model.export() or tf.saved_model.save()")
    tf = tensorflow()
    try:
        with quiet_conversion():
            return tf.lite.TFLiteConverter.from_saved_model(str(d))
    except Exception as exc:
        raise ModelFormatError(f"{d}: cannot load the SavedModel ({type(exc).__name__}: "
                               f"{_first_line(exc)})") from exc


def run_converter(converter: Any, path: str | os.PathLike[str], what: str = "model") -> Path:
    """Run ``converter.convert()`` quietly and write the flatbuffer atomically to ``path``.

    ``what`` names the model in error messages.
    """
    try:
        with quiet_conversion():
            flatbuffer = converter.convert()
    except Exception as exc:
        if type(exc).__name__ == "ConverterError":
            raise UnsupportedOperatorError(
                f"{what}: the TFLite converter cannot convert it ({_first_line(exc)}); replace the "
                "operator with TFLite builtins") from exc
        raise ModelFormatError(f"{what}: TFLite conversion failed ({type(exc).__name__}: "
                               f"{_first_line(exc)})") from exc
    return atomic_write_bytes(path, flatbuffer)


def _float16(converter: Any) -> None:
    from ..lazy import tensorflow

    tf = tensorflow()
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]


def keras_to_tflite(model: Any, path: str | os.PathLike[str], *, fp16: bool = False) -> Path:
    """Convert an in-memory Keras model to a float TFLite flatbuffer.

    Parameters
    ----------
    model : keras.Model
        The model to convert.
    path : path-like
        Destination ``.tflite`` file, written atomically.
    fp16 : bool
        Store weights as float16 (post-training float16 quantization); activations stay float32.
    """
    converter = keras_tflite_converter(model)
    if fp16:
        _float16(converter)
    return run_converter(converter, path, getattr(model, "name", "model"))


def savedmodel_to_tflite(saved_model_dir: str | os.PathLike[str], path: str | os.PathLike[str],
                         *, fp16: bool = False) -> Path:
    """Convert a SavedModel directory to a float TFLite flatbuffer (see :func:`keras_to_tflite`)."""
    converter = savedmodel_tflite_converter(saved_model_dir)
    if fp16:
        _float16(converter)
    return run_converter(converter, path, str(saved_model_dir))
