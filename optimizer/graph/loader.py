"""Dispatch a model reference (zoo name or file path) to the right importer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import InputFileError, ModelFormatError
from .input_shapes import InputShapes
from .layergraph import LayerGraph
from .zoo import builder_names, dropped_model_files, zoo_names


def resolve_model(model: str | os.PathLike[str]) -> Path | str:
    """The file (or SavedModel folder) of a model reference, or its zoo builder name, without
    importing anything; a missing file or an unknown name raises the one-line error."""
    ref = str(model)
    path = Path(ref)
    if not path.exists() and ref in dropped_model_files():
        path = dropped_model_files()[ref]
    if path.exists():
        return path
    if ref in builder_names():
        return ref
    if path.suffix or os.sep in ref:
        raise InputFileError(f"{ref}: no such file; give a .keras/.onnx/.tflite file, a SavedModel "
                             "directory, or a zoo name")
    from ..errors import UnknownNameError

    raise UnknownNameError("zoo network", ref, zoo_names())


def load_graph(model: str | os.PathLike[str], granularity: str = "op", *,
               input_shapes: InputShapes | None = None, **variant: Any) -> LayerGraph:
    """Import ``model`` (zoo name, ``.keras``, SavedModel dir, ``.onnx`` or ``.tflite``).

    ``variant`` is passed to zoo builders (e.g. ``input_size=160``, ``alpha=0.5``);
    ``input_shapes`` (input name → full shape, :mod:`optimizer.graph.input_shapes`) to the
    importers of model files, which need it for dynamic non-batch input dims.
    """
    found = resolve_model(model)
    if isinstance(found, Path):
        if variant:
            from ..errors import ConfigError

            raise ConfigError(f"{model}: builder arguments {sorted(variant)} apply to zoo networks only, "
                              "not to model files")
        return load_graph_file(found, granularity, input_shapes)
    if input_shapes:
        from ..errors import ConfigError

        raise ConfigError(f"{model}: --input-shape applies to model files; a zoo network takes --input-size "
                          "(or --variant input_size=N)")
    from .zoo_import import graph_from_zoo

    return graph_from_zoo(found, **variant).with_granularity(granularity)


def load_graph_file(path: Path, granularity: str = "op", input_shapes: InputShapes | None = None) -> LayerGraph:
    """Import a model file by its suffix (directories are SavedModels) at ``input_shapes``."""
    suffix = path.suffix.lower()
    if path.is_dir():
        from .savedmodel_import import graph_from_savedmodel

        return graph_from_savedmodel(path, input_shapes).with_granularity(granularity)
    if suffix == ".keras":
        from .keras_import import graph_from_keras_file

        return graph_from_keras_file(path, granularity, input_shapes)
    if suffix == ".onnx":
        from .onnx_import import graph_from_onnx_file

        return graph_from_onnx_file(path, input_shapes).with_granularity(granularity)
    if suffix == ".tflite":
        from .tflite_import import graph_from_tflite_file

        return graph_from_tflite_file(path, input_shapes).with_granularity(granularity)
    raise ModelFormatError(f"{path}: unknown model format {suffix or '(no suffix)'!r}; expected "
                           ".keras, .onnx, .tflite or a SavedModel directory")
