"""The Keras network a plan is exported from: a zoo builder with seeded weights, or a ``.keras`` file.

Zoo networks are built with ``weights=None``, so their weights come from a fixed seed, and their
batch-norm statistics are re-estimated on seeded inputs (:func:`reestimate_batchnorm`): the same
seed and memory budget give the same weights, and so the same exported parts.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from ..fileio import sha256_bytes, sha256_file
from ..graph.layergraph import LayerGraph
from .schema import Plan, plan_input_shapes


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
            module = builder(name)
            keras.utils.set_random_seed(seed)
            keras_model = build_keras(name, **ref.variant)
            with open(module.__file__, "rb") as fh:
                import json

                ident = sha256_bytes(fh.read() + json.dumps(ref.variant, sort_keys=True).encode())
            graph = graph_from_keras(keras_model, name, block_of=module.block_of, source=f"zoo:{name}",
                                     source_sha256=ident, fmt="zoo")
            reestimate_batchnorm(keras_model, seed, frames_per_pass=bn_frames_per_pass(graph, memory_budget))
            return keras_model, graph, seed
        if src.endswith(".keras"):
            model = src
        else:
            raise ModelFormatError(f"plan: field model.source: {src!r} cannot be exported; export "
                                   "supports zoo networks and .keras/.tflite/.onnx files (pass --model FILE)")
    if isinstance(model, (str, os.PathLike)):
        from ..graph.keras_import import keras_at_input_shapes

        path = Path(model)
        shapes = plan_input_shapes(plan)
        keras_model, served = keras_at_input_shapes(load_keras_model(path), shapes, str(path))
        graph = graph_from_keras(keras_model, path.stem, source=str(path), source_sha256=sha256_file(path))
        return keras_model, replace(graph, served_input_shapes=served) if served else graph, None
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
