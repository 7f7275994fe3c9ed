"""The model zoo: one builder file per network in the top-level ``models/`` directory.

A builder module ``models/<name>.py`` defines::

    NAME: str                      # the zoo name (= file stem)
    TASK: str                      # classification | detection | face_detection | embedding | nlp
    INPUT_SIZE: int                # default spatial size (or sequence length for text)
    REFERENCE: dict                # {"macs": float, "params": float, "source": str}
    PREPROCESS: dict               # inference preprocessing (see optimizer.quantize)
    def build(input_size=INPUT_SIZE, **variant) -> keras.Model   # weights=None
    def block_of(layer_name: str) -> str                          # block label of a layer

``models/`` may also hold user-dropped ``.onnx``/``.tflite``/``.keras`` files, which are
addressable by their stem.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import InputFileError, UnknownNameError

MODEL_FILE_SUFFIXES = (".onnx", ".tflite", ".keras")


def models_dir() -> Path:
    """The zoo directory: ``$DNNPLAN_MODELS_DIR`` or the repository's ``models/``."""
    env = os.environ.get("DNNPLAN_MODELS_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "models"


def builder_names() -> list[str]:
    """Names of the zoo builders (``models/*.py`` without leading underscore)."""
    return sorted(p.stem for p in models_dir().glob("*.py") if not p.stem.startswith("_"))


def dropped_model_files() -> dict[str, Path]:
    """User-dropped model files in ``models/`` by stem."""
    return {p.stem: p for p in sorted(models_dir().iterdir())
            if p.suffix in MODEL_FILE_SUFFIXES} if models_dir().is_dir() else {}


def zoo_names() -> list[str]:
    """Every name ``load_graph`` accepts without a path."""
    return sorted(set(builder_names()) | set(dropped_model_files()))


@lru_cache(maxsize=None)
def builder(name: str) -> ModuleType:
    """The builder module of zoo network ``name``."""
    if name not in builder_names():
        raise UnknownNameError("zoo network", name, zoo_names())
    _ensure_models_package()
    return importlib.import_module(f"models.{name}")


def _ensure_models_package() -> None:
    """Make ``models`` (the zoo directory) importable from any working directory."""
    pkg = sys.modules.get("models")
    if pkg is not None and str(models_dir()) in list(getattr(pkg, "__path__", [])):
        return
    spec = importlib.util.spec_from_file_location(
        "models", models_dir() / "__init__.py", submodule_search_locations=[str(models_dir())])
    if spec is None or spec.loader is None:
        raise InputFileError(f"{models_dir()}: not an importable 'models' package (no __init__.py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules["models"] = module
    spec.loader.exec_module(module)


def build_keras(name: str, input_size: int | None = None, **variant: Any) -> Any:
    """Build zoo network ``name`` as a Keras model (random weights, ``weights=None``)."""
    mod = builder(name)
    size = input_size if input_size is not None else mod.INPUT_SIZE
    return mod.build(input_size=size, **variant)


#: Frames callers draw for the BN pass of a random-weight network (export and quantize).
BN_FRAMES = 32
#: Input elements of the BN pass at most (32 frames of 320 x 320 x 3). The pass is one
#: training-mode batch holding every activation: about 0.7 GB per 640 x 640 frame for SSD
#: FPNLite, so 32 such frames do not fit in 24 GB. Larger inputs get fewer frames (8 at 640 x 640).
BN_MAX_ELEMENTS = BN_FRAMES * 320 * 320 * 3


def reestimate_batchnorm(model: Any, inputs: list[Any], frames_per_pass: int | None = None) -> int:
    """Set every BatchNormalization's moving statistics to its batch statistics on ``inputs``.

    Zoo weights are random (``weights=None``) with identity BN statistics, under which the
    activations of deep networks shrink towards zero (MobileNetV2's logits come out ~1e-11),
    so float comparisons and INT8 calibration would be meaningless. This is the BN step of
    data-dependent initialisation (Krähenbühl et al., "Data-dependent Initializations of
    Convolutional Neural Networks", ICLR 2016): one forward pass in training mode with momentum
    0 makes each BN normalise its input to zero mean and unit variance, layer after layer.
    ``inputs`` holds one array per model input, in ``model.inputs`` order; only the first frames,
    at most :data:`BN_MAX_ELEMENTS` input elements, are used. A training-mode pass holds every
    activation of its frames when run eagerly (a 640x640 ssd_resnet50_fpn frame: +1.5 GB; each
    pass therefore runs as a ``tf.function``, whose executor frees a tensor once it is consumed:
    +0.25 GB), and ``frames_per_pass`` (default: all in one pass) bounds its
    memory: the frames then go through in passes of that many and each BN's moving statistics
    become the equal-weight mean of the passes' batch statistics (momentum k/(k+1) on pass k),
    the population estimate of "precise BN" (Wu & Johnson, "Rethinking 'Batch' in BatchNorm",
    arXiv:2105.07576, 2021). Returns the number of layers updated.
    """
    from ..lazy import keras as _keras
    from ..lazy import silenced_stderr, tensorflow
    from .keras_import import flatten_layers

    keras = _keras()
    bns = [la for la in flatten_layers(model) if isinstance(la, keras.layers.BatchNormalization)]
    if not bns:
        return 0
    per_frame = sum(int(np.prod(np.shape(a)[1:])) for a in inputs)
    n = min(max(2, BN_MAX_ELEMENTS // max(per_frame, 1)), int(np.shape(inputs[0])[0]))
    step = n if frames_per_pass is None else max(1, min(n, frames_per_pass))
    saved = [la.momentum for la in bns]
    try:
        for k, start in enumerate(range(0, n, step)):
            frames = [a[start:start + step] for a in inputs]
            if len(frames[0]) < step and k:  # equal weights: a short last pass is dropped
                break
            for la in bns:
                la.momentum = k / (k + 1)
            with silenced_stderr():  # traced per pass: the momentum is read when tracing
                tensorflow().function(lambda x: model(x, training=True))(list(frames) if len(frames) > 1 else frames[0])
    finally:
        for la, m in zip(bns, saved, strict=True):
            la.momentum = m
    return len(bns)
