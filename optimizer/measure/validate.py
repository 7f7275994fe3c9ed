"""Accuracy of a device's predictors: whole networks measured on the probes' runner, next to what
the ``predicted`` backend says (``dnnplan calibrate --validate``).

* :func:`runtime_artifact` gives the file a runner executes for a network: the zoo network (or
  ``.keras`` file) exported to TFLite or ONNX (:func:`optimizer.measure.artifacts.export_artifact`),
  quantized to INT8 where asked (TFLite post-training quantization, :func:`optimizer.quantize.api.quantize`;
  onnxruntime's static QDQ quantizer for ONNX, on the file after onnxruntime's basic graph
  optimizations, as onnxruntime's quantization guide prepares a model: a batch norm an exporter
  left as ``Mul`` after a depthwise ``Conv`` and a ``Pad`` before one are folded into the
  convolution first, where quantized they would run as ``QLinearMul`` and a float ``Pad`` between
  conversions); a ``.tflite``/``.onnx`` file is used as it is.
  Files are cached by content under ``results/cache/artifacts``.
* :func:`time_networks` times them interleaved with :func:`~.probe_runner.time_interleaved`, beside
  the speed reference's kernels (:mod:`~.speed_reference`), so that they can be put on the level of
  the probe table they are compared with.
* :func:`isolated_layer_times` times every operator of a network file on its own (a one-operator
  model cut from the file, less the layout conversions a runtime adds around a lone kernel, as
  for probes), which gives measured per-layer and per-kernel-family times where the runtime has
  no per-operator profiler of its own (LiteRT's Python interpreter has none).
* :func:`validation_band` summarises relative errors ``predicted / measured - 1`` into the band a
  device file records (:class:`optimizer.hardware.schema.ValidatedBand`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, MeasurementError
from ..graph.layergraph import LayerGraph
from ..graph.onnx_import import onnx_opset
from .artifacts import cache_dir, export_artifact
from .probe_runner import Timing, clock_for, time_interleaved
from .speed_reference import Levelled, level_timings, reference_models


@dataclass(frozen=True)
class NetworkResult:
    """One validation network: measured and predicted whole-network seconds, per-family splits."""

    model: str
    #: on the probe table's speed-reference level where both have one, else as timed
    measured: Timing
    predicted_s: float
    measured_families: dict[str, float] = field(default_factory=dict)
    predicted_families: dict[str, float] = field(default_factory=dict)
    #: seconds as timed (before levelling)
    measured_raw_s: float = float("nan")
    #: the host's speed-reference level while the networks were timed over the probe table's
    #: (1.2: 20 % slower than during the campaign; NaN: no level to compare)
    level_ratio: float = float("nan")

    @property
    def error(self) -> float:
        """Relative error ``predicted / measured - 1``."""
        return self.predicted_s / self.measured.median_s - 1.0


def runtime_artifact(model_ref: str, graph: LayerGraph, fmt: str, dtype: str, *, samples: int = 32,
                     seed: int = 0) -> Path:
    """The ``fmt`` file (``tflite`` | ``onnx``) a runner executes for ``model_ref`` at ``dtype``
    (module doc).

    Raises
    ------
    ConfigError
        A model file of the other format (no runner converts between them here), or a dtype
        other than fp32/int8.
    """
    if dtype not in ("fp32", "int8"):
        raise ConfigError(f"--dtype {dtype!r}: networks are validated at fp32 or int8")
    p = Path(model_ref)
    suffix = p.suffix.lower()
    if suffix in (".tflite", ".onnx") and suffix != f".{fmt}":
        raise ConfigError(f"{model_ref}: the {fmt} runner cannot run a {suffix} file; validate it with the "
                          f"{'ort' if suffix == '.onnx' else 'litert'} runner, or give a zoo name")
    fp32 = p if suffix == f".{fmt}" else export_artifact(model_ref, graph, fmt)
    if dtype == "fp32":
        return fp32
    ident = (graph.source_sha256 or graph.name)[:16]
    # a file prepared before quantization (Constant weights, an older opset) is another file
    prepared = "-prepared" if fmt == "onnx" and _needs_preparing(fp32) else ""
    optimized = "-ortopt" if fmt == "onnx" else ""
    out = cache_dir() / "artifacts" / f"{graph.name}-{ident}-int8-s{samples}-{seed}{optimized}{prepared}.{fmt}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "tflite":
        from ..quantize.api import quantize

        quantize(model_ref if suffix != ".tflite" else str(p), out, samples=samples, heldout=1, seed=seed,
                 measure_latency_=False, allow_float_ops=True,
                 input_shapes=dict(graph.served_input_shapes) if graph.served_input_shapes else None)
    else:
        import tempfile

        from ..quantize.onnx_input import ort_basic_optimized

        with tempfile.TemporaryDirectory(dir=out.parent) as work:
            _quantize_onnx(ort_basic_optimized(fp32, Path(work) / "fp32-optimized.onnx"), out, graph, samples, seed)
    return out


#: the opset a QDQ file needs for per-channel weights (``DequantizeLinear``'s ``axis``): below it,
#: weights are quantized per tensor (to INT8 all the same: the ``QLinearConv`` path is the probes')
PER_CHANNEL_OPSET = 13


def _needs_preparing(path: Path) -> bool:
    """Whether the ONNX file at ``path`` has ``Constant`` nodes with a tensor
    (:func:`constants_as_initializers`) or an opset below :data:`PER_CHANNEL_OPSET` (read once
    while the file is unchanged: it is asked before every cache lookup)."""
    st = path.stat()
    return _file_needs_preparing(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=64)
def _file_needs_preparing(path: str, mtime_ns: int, size: int) -> bool:
    import onnx

    model = onnx.load(path, load_external_data=False)
    return onnx_opset(model) < PER_CHANNEL_OPSET or any(
        n.op_type == "Constant" and any(a.name == "value" for a in n.attribute) for n in model.graph.node)


def constants_as_initializers(model: Any) -> Any:
    """``model`` with every ``Constant`` node's tensor ``value`` moved into an initializer of the
    node's output name (lossless). onnxruntime's quantizer treats a weight given by a ``Constant``
    node as an activation: per-tensor UINT8 weights, and a ``QLinearConv`` 2-4x slower than with the
    per-channel INT8 weights of the probes and of a file prepared for quantization (paddle2onnx's
    PaddleOCR files give all 62 convolution weights of ppocr_v4_det so)."""
    import onnx

    keep = []
    for n in model.graph.node:
        value = next((a for a in n.attribute if a.name == "value"), None) if n.op_type == "Constant" else None
        if value is None:
            keep.append(n)
            continue
        tensor = onnx.helper.get_attribute_value(value)
        tensor.name = n.output[0]
        model.graph.initializer.append(tensor)
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model


def _quantize_onnx(src: Path, out: Path, graph: LayerGraph, samples: int, seed: int) -> None:
    """``src`` quantized to QDQ by onnxruntime with the probes' settings, calibrated on ``samples``
    seeded inputs at the graph's input shapes and the inputs' types (standard-normal floats, small
    integer ids for an embedding's integer inputs), with ``Constant``-node weights made initializers
    first (:func:`constants_as_initializers`) and per-tensor weights below :data:`PER_CHANNEL_OPSET`."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from ..fileio import atomic_write_bytes
    from .probe_onnx import quantize_model_static
    from .probe_runner import quiet_quantizer, random_input

    model = constants_as_initializers(onnx.load(str(src)))
    rng = np.random.default_rng(seed)
    shapes, dtypes = {}, {}
    for i in model.graph.input:
        dims = [d.dim_value if d.dim_value > 0 else None for d in i.type.tensor_type.shape.dim]
        served = (graph.served_input_shapes or {}).get(i.name)
        shapes[i.name] = tuple(served) if served else tuple(d or 1 for d in dims)
        dtypes[i.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = samples

        def get_next(self) -> dict[str, np.ndarray] | None:
            if self.left <= 0:
                return None
            self.left -= 1
            return {n: random_input(rng, list(s), dtypes[n]) for n, s in shapes.items()}

    with quiet_quantizer():
        q = quantize_model_static(model, Reader(), quantize_static, QuantFormat, QuantType,
                                  per_channel=onnx_opset(model) >= PER_CHANNEL_OPSET)
    atomic_write_bytes(out, q.SerializeToString())


def time_networks(runner: Any, paths: Sequence[Path], dtype: str, *, seed: int = 0,
                  shapes: Sequence[dict[str, Any] | None] = (), min_rounds: int = 5,
                  max_rounds: int = 15) -> tuple[list[Timing], Levelled]:
    """Seconds per run of every network file on ``runner``, interleaved (one sample of each per
    round; samples of at least 20 ms) beside the speed reference's kernels at ``dtype``: the
    timings as timed, and put on the run's median reference level."""
    reference = [runner.load(blob, seed) for _, blob in reference_models(runner.fmt, dtype, seed)]
    invokers = []
    for k, p in enumerate(paths):
        kw = {"shapes": shapes[k]} if shapes and shapes[k] and runner.fmt == "onnx" else {}
        invokers.append(runner.load(p, seed, **kw))
    timings = time_interleaved(invokers, sample_s=0.02, min_rounds=min_rounds, max_rounds=max_rounds, seed=seed,
                               warmup_s=0.05, clock=clock_for(runner.threads), reference=reference)
    return timings[:len(paths)], level_timings(timings, range(len(paths), len(timings)))


def single_op_models(path: Path, graph: LayerGraph) -> list[tuple[int, bytes]]:
    """(layer index, one-operator model) for every layer of ``graph`` (imported from ``path``)
    that computes something: its operator alone, reading its activation inputs."""
    if path.suffix.lower() == ".tflite":
        return _tflite_single_ops(path, graph)
    return _onnx_single_ops(path, graph)


def _tflite_single_ops(path: Path, graph: LayerGraph) -> list[tuple[int, bytes]]:
    from ..graph.tflite_flatbuffer import read_model, sub_model, write_model

    model = read_model(path.read_bytes(), str(path))
    sg = model.subgraphs[0]
    producer = {int(t): k for k, op in enumerate(sg.operators or []) for t in (op.outputs if op.outputs is not None else [])}

    def constant(t: int) -> bool:
        b = model.buffers[sg.tensors[t].buffer]
        return b.data is not None and len(b.data) > 0

    out = []
    for i, layer in enumerate(graph.layers):
        k = producer.get(int(layer.outputs[0])) if layer.outputs and layer.outputs[0].lstrip("-").isdigit() else None
        if k is None:
            continue
        op = sg.operators[k]
        ins = [int(t) for t in op.inputs if t >= 0 and not constant(int(t))]
        # only this operator's tensors and constants (a copy of the model had carried the whole
        # network's weights into every cut: bert_small FP32, 259 operators, about 24 GB)
        out.append((i, bytes(write_model(sub_model(model, [k], ins, [int(t) for t in op.outputs], layer.name)))))
    return out


def _onnx_single_ops(path: Path, graph: LayerGraph) -> list[tuple[int, bytes]]:
    import onnx
    import onnx.utils

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    extractor = onnx.utils.Extractor(model)
    inits = {i.name for i in model.graph.initializer}
    out = []
    for i, layer in enumerate(graph.layers):
        ins = [t for t in layer.inputs if t not in inits]
        if not ins:
            continue
        try:
            part = extractor.extract_model(ins, list(layer.outputs))
        except Exception:  # onnx raises KeyError/ValidationError for tensors it cannot cut at
            continue
        out.append((i, part.SerializeToString()))
    return out


def isolated_layer_times(runner: Any, path: Path, graph: LayerGraph, overhead_s: float, *,
                         seed: int = 0, level: tuple[str, float] | None = None) -> np.ndarray:
    """[L] seconds of every layer of ``graph`` (imported from ``path``) timed alone on
    ``runner``, less the per-invocation overhead; NaN where no operator could be cut out. With
    ``level`` = (dtype, seconds), the layers are timed beside the speed reference's kernels at that
    dtype and put on that level (a probe table's, :attr:`~optimizer.cost.probe_table.ProbeTable.reference_s`)."""
    out = np.full(len(graph.layers), np.nan)
    models = single_op_models(path, graph)
    reference = ([runner.load(blob, seed) for _, blob in reference_models(runner.fmt, level[0], seed)]
                 if level is not None else [])
    for start in range(0, len(models), 24):
        chunk = models[start:start + 24]
        invokers, index = [], []
        for i, blob in chunk:
            try:
                invoke = runner.load(blob, seed)
                invoke()  # a cut operator may fail only once its bound output is reused (a reshape by ids)
            except (MeasurementError, RuntimeError):
                continue
            invokers.append(invoke)
            index.append(i)
        share = getattr(runner, "layout_share", None)
        blobs = dict(chunk)
        timings = time_interleaved(invokers, seed=seed, clock=clock_for(runner.threads), reference=reference)
        if level is not None:
            timings = level_timings(timings, range(len(invokers), len(timings))).on_level(level[1])
        for i, t in zip(index, timings, strict=True):
            kept = 1.0 - (share(blobs[i], seed=seed) if share is not None else 0.0)
            out[i] = max(t.median_s - overhead_s, 0.02 * t.median_s) * kept
    return out


def validation_band(results: Sequence[NetworkResult], runner: str) -> dict[str, Any]:
    """The band a device file records (:class:`optimizer.hardware.schema.ValidatedBand`)."""
    if not results:
        raise ConfigError("no validation network was measured")
    err = np.array([r.error for r in results])
    return {"runner": runner, "models": [r.model for r in results], "error_min": round(float(err.min()), 4),
            "error_max": round(float(err.max()), 4), "median_abs_error": round(float(np.median(np.abs(err))), 4),
            "within_10pct": round(float(np.mean(np.abs(err) <= 0.10)), 3),
            "date": time.strftime("%Y-%m-%d", time.gmtime())}


def environment() -> dict[str, Any]:
    """Conditions of a measurement: 1-minute load average and UTC time."""
    return {"load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
            "measured_at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
