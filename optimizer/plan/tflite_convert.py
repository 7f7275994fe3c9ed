"""TFLite conversion of one part: a Keras sub-model to fp32, fp16-weight or full-integer INT8 TFLite.

INT8 parts use full-integer post-training quantization (Jacob et al., "Quantization and Training
of Neural Networks for Efficient Integer-Arithmetic-Only Inference", CVPR 2018, as implemented by
the TFLite converter) on a representative dataset of the part's inputs
(:mod:`optimizer.plan.calibration_data`). The converted part's inputs and outputs are read back from
its ``serving_default`` signature (:func:`part_tensor_specs`) for the manifest.
:class:`ConversionMemo` keeps converted parts by content, so that exporting the same part again
(the same layers, weights, calibration data and settings: a sweep over many plans of one network)
copies the earlier conversion instead of running the converter again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from .manifest import Quantization, TensorSpec


class ConversionMemo:
    """Converted parts in ``folder``, named by the SHA-256 of everything that makes their bytes.

    The key covers the converter versions (TensorFlow, Keras), the sub-model's architecture as
    Keras serializes it (layers, their settings and names, the model's name, which TFLite keeps),
    every weight's values (trainable or not), the dtype, the memory budget and, for INT8, every
    sample of the representative dataset. A sub-model Keras cannot serialize is converted
    without the memo. Meant for one process's run (a sweep): the folder is not versioned with
    this package's code.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.hits = 0
        self.misses = 0

    def key(self, submodel: Any, dtype: str, representative: Callable[[], Iterator[dict[str, np.ndarray]]] | None,
            memory_budget: float | None) -> str | None:
        """The part's content key, or None when its architecture cannot be serialized."""
        from ..lazy import keras, tensorflow

        try:
            architecture = submodel.to_json(sort_keys=True)
        except Exception:  # noqa: BLE001 - a layer Keras cannot serialize: convert without the memo
            return None
        h = hashlib.sha256(json.dumps([tensorflow().__version__, keras().__version__, dtype, memory_budget]).encode())
        h.update(architecture.encode())
        for w in submodel.weights:
            value = np.ascontiguousarray(w.numpy())
            h.update(f"{w.path}|{value.dtype}|{value.shape}".encode())
            h.update(value.tobytes())
        for sample in (representative() if representative is not None and dtype == "int8" else ()):
            for name in sorted(sample):
                value = np.ascontiguousarray(sample[name])
                h.update(f"{name}|{value.dtype}|{value.shape}".encode())
                h.update(value.tobytes())
        return h.hexdigest()

    def convert(self, submodel: Any, path: Path, dtype: str,
                representative: Callable[[], Iterator[dict[str, np.ndarray]]] | None,
                memory_budget: float | None = None) -> Path:
        """:func:`convert_part`, or a copy of the same conversion made earlier."""
        from ..fileio import atomic_write_bytes

        key = self.key(submodel, dtype, representative, memory_budget)
        kept = self.folder / f"{key}.tflite"
        if key is not None and kept.is_file():
            self.hits += 1
            return atomic_write_bytes(path, kept.read_bytes())
        convert_part(submodel, path, dtype, representative, memory_budget)
        if key is not None:
            self.misses += 1
            atomic_write_bytes(kept, Path(path).read_bytes())
        return Path(path)


def convert_part(submodel: Any, path: Path, dtype: str,
                 representative: Callable[[], Iterator[dict[str, np.ndarray]]] | None,
                 memory_budget: float | None = None, memo: ConversionMemo | None = None) -> Path:
    """Convert one sub-model to TFLite (fp32, fp16 weights, or full-integer int8).

    Uses :mod:`optimizer.graph.convert` (quiet, atomic); int8 adds the PTQ settings, with the
    calibration ranges recorded by :mod:`optimizer.quantize.ranges` (in several passes where one
    would not fit ``memory_budget`` bytes). With ``memo``, a part converted before with the same
    content is copied (:class:`ConversionMemo`).
    """
    if memo is not None:
        return memo.convert(submodel, path, dtype, representative, memory_budget)
    from ..graph.convert import keras_to_tflite, run_converter
    from ..quantize.parallel_calibration import parallel_calibration

    if dtype != "int8":
        return keras_to_tflite(submodel, path, fp16=dtype == "fp16")
    converter = int8_converter(submodel, representative)
    with parallel_calibration(1, memory_budget=memory_budget):  # LiteRT ranges, in this process
        return run_converter(converter, path, submodel.name)


def int8_converter(submodel: Any, representative: Callable[[], Iterator[Any]] | None) -> Any:
    """A TFLite converter of ``submodel`` set for full-integer PTQ (Jacob et al., CVPR 2018): INT8
    kernels only, INT8 inputs and outputs, ranges calibrated on ``representative``."""
    from ..graph.convert import keras_tflite_converter
    from ..lazy import tensorflow

    tf = tensorflow()
    converter = keras_tflite_converter(submodel)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return converter


def part_tensor_specs(path: Path, names: list[str], kind: str) -> list[TensorSpec]:
    """I/O specs of a converted part, read back from its ``serving_default`` signature."""
    from ..lazy import litert_interpreter

    interpreter = litert_interpreter()(model_path=str(path))
    runner = interpreter.get_signature_runner("serving_default")
    details = runner.get_input_details() if kind == "inputs" else runner.get_output_details()
    prefix = "in" if kind == "inputs" else "output_"
    specs = []
    for k, name in enumerate(names):
        signature_name = f"{prefix}{k}"
        if signature_name not in details:
            raise ModelFormatError(f"{path.name}: converted part has no {kind[:-1]} {signature_name!r} "
                                   f"(signature has {sorted(details)})")
        detail = details[signature_name]
        scale, zero_point = detail["quantization"]
        quantization = Quantization(scale=float(scale), zero_point=int(zero_point)) if scale else None
        specs.append(TensorSpec(name=name, signature_name=signature_name, index=int(detail["index"]),
                                shape=[int(s) for s in detail["shape"]], dtype=np.dtype(detail["dtype"]).name,
                                quantization=quantization))
    return specs
