"""Keras 3 -> TFLite: ``from_keras_model`` (SavedModel round trip) vs a frozen concrete function.

Run: .venv/bin/python benchmarks/bench_tflite_convert_route.py [--models mobilenet_v2 ...]
     [--dtypes fp32 int8] [--repeats 3] [--routes keras frozen]
For each zoo network (``weights=None``, default input size) and a small two-input two-output
model, converts with each route (FP32, and full-integer INT8 PTQ on 4 seeded random samples)
and prints median wall and CPU seconds per route, the frozen/keras ratio, and how the frozen
model compares with the Keras route's: operator list, outputs on one seeded input (max |diff|,
in model output order), multiset of quantization parameters, and whether it keeps the
``serving_default`` signature and the I/O tensor names. With one route (``--routes keras``) it
only converts, for ``/usr/bin/time -v`` peak-RSS measurements.

The Keras route is ``tf.lite.TFLiteConverter.from_keras_model`` (TensorFlow's Keras 3 branch
writes the model with ``keras.export.ExportArchive``, reads it back and lets the MLIR converter
import the SavedModel). The frozen route is dnnplan's ``keras_tflite_converter``: the TFLite
converter on the concrete function of ``model(x, training=False)`` without a trackable object
(TensorFlow freezes the variables into constants and converts the GraphDef), with the
``serving_default`` signature and I/O names of the Keras route added to the float flatbuffer.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _two_in_two_out() -> Any:
    import keras

    a, b = keras.Input((32, 32, 3), name="img"), keras.Input((8,), name="aux")
    x = keras.layers.BatchNormalization()(keras.layers.Conv2D(8, 3, activation="relu")(a))
    y = keras.layers.Concatenate()([keras.layers.GlobalAveragePooling2D()(x), keras.layers.Dense(8)(b)])
    return keras.Model([a, b], [keras.layers.Dense(4, name="cls")(y), keras.layers.Dense(2, name="reg")(y)],
                       name="two_in_two_out")


def build(name: str) -> Any:
    """A zoo network (``models/<name>.py``, weights=None) or ``two_in_two_out``."""
    return _two_in_two_out() if name == "two_in_two_out" else importlib.import_module(f"models.{name}").build()


def keras_route(model: Any) -> Any:
    import tensorflow as tf

    return tf.lite.TFLiteConverter.from_keras_model(model)


def frozen_route(model: Any) -> Any:
    from optimizer.graph.convert import keras_tflite_converter

    return keras_tflite_converter(model)


ROUTES: dict[str, Callable[[Any], Any]] = {"keras": keras_route, "frozen": frozen_route}


def _representative(model: Any, n: int = 4, seed: int = 0) -> Callable[[], Iterator[list[Any]]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    data = [[rng.random((1, *t.shape[1:]), dtype=np.float32) for t in model.inputs] for _ in range(n)]
    return lambda: iter(data)


def convert(route: str, model: Any, dtype: str) -> tuple[bytes, float, float]:
    """Flatbuffer, wall seconds and process CPU seconds of one conversion (converter built inside)."""
    import tensorflow as tf

    from optimizer.graph.convert import quiet_conversion

    with quiet_conversion():
        t0, c0 = time.perf_counter(), time.process_time()
        c = ROUTES[route](model)
        if dtype == "int8":
            c.optimizations = [tf.lite.Optimize.DEFAULT]
            c.representative_dataset = _representative(model)
            c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            c.inference_input_type = tf.int8
            c.inference_output_type = tf.int8
        flat = c.convert()
        return flat, time.perf_counter() - t0, time.process_time() - c0


def _outputs(flat: bytes, model: Any) -> list[Any]:
    """Outputs in the model's output order for one seeded input per model input."""
    import numpy as np

    from optimizer.lazy import litert_interpreter

    it = litert_interpreter()(model_content=flat)
    it.allocate_tensors()
    rng = np.random.default_rng(1)
    names = [t.name for t in model.inputs]
    signed = bool(it.get_signature_list())
    details = (it.get_signature_runner("serving_default").get_input_details() if signed
               else {str(d["name"]): d for d in it.get_input_details()})
    feeds = {}
    for k in names:
        d = details[k]
        x = rng.random(d["shape"], dtype=np.float32)
        if d["dtype"] != np.float32:
            s, z = d["quantization"]
            x = np.clip(np.round(x / s + z), -128, 127).astype(d["dtype"])
        feeds[k] = x
    if signed:
        out = it.get_signature_runner("serving_default")(**feeds)
        return [out[f"output_{i}"] for i in range(len(out))]
    for k in names:
        it.set_tensor(details[k]["index"], feeds[k])
    it.invoke()
    by_name = {str(d["name"]): d for d in it.get_output_details()}
    keys = ["Identity"] + [f"Identity_{i}" for i in range(1, len(by_name))]
    return [it.get_tensor(by_name[k]["index"]) for k in keys]


def _facts(flat: bytes) -> tuple[list[str], list[str], bool, list[str]]:
    from optimizer.lazy import litert_interpreter

    it = litert_interpreter()(model_content=flat)
    ops = [str(d["op_name"]) for d in it._get_ops_details()]
    quant = sorted(str(d["quantization"]) for d in it.get_tensor_details())
    io = [str(d["name"]) for d in it.get_input_details() + it.get_output_details()]
    return ops, quant, bool(it.get_signature_list()), io


def compare(keras_flat: bytes, frozen_flat: bytes, model: Any) -> str:
    import numpy as np

    (ko, kq, ks, kio), (fo, fq, fs, fio) = _facts(keras_flat), _facts(frozen_flat)
    if ko == fo:
        ops = "same"
    elif collections.Counter(ko) == collections.Counter(fo):
        ops = "same multiset, other order"
    else:
        ops = f"differ (keras-only {collections.Counter(ko) - collections.Counter(fo)}, frozen-only " \
              f"{collections.Counter(fo) - collections.Counter(ko)})"
    diffs = [float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
             for a, b in zip(_outputs(keras_flat, model), _outputs(frozen_flat, model), strict=True)]
    return (f"ops {ops} ({len(ko)}); outputs max|diff| {max(diffs):g}; quant params "
            f"{'same' if kq == fq else 'differ'}; signature keras={ks} frozen={fs}; "
            f"I/O names keras={kio} frozen={fio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+",
                    default=["mobilenet_v2", "efficientnet_b0", "ssd_mobilenet_v2_fpnlite", "two_in_two_out"])
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "int8"], choices=["fp32", "int8"])
    ap.add_argument("--routes", nargs="+", default=["keras", "frozen"], choices=list(ROUTES))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    for name in args.models:
        model = build(name)
        for dtype in args.dtypes:
            flats, cells = {}, []
            times: dict[str, tuple[float, float]] = {}
            for route in args.routes:
                runs = [convert(route, model, dtype) for _ in range(args.repeats)]
                flats[route] = runs[0][0]
                times[route] = (statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs))
                cells.append(f"{route} wall {times[route][0]:.2f} s cpu {times[route][1]:.2f} s")
            if {"keras", "frozen"} <= set(times):
                cells.append(f"frozen/keras wall {times['frozen'][0] / times['keras'][0]:.2f}")
            print(f"{name} {dtype}: " + ", ".join(cells), flush=True)
            if {"keras", "frozen"} <= set(flats):
                print(f"  {compare(flats['keras'], flats['frozen'], model)}", flush=True)


if __name__ == "__main__":
    main()
