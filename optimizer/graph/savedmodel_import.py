"""SavedModel importer: a TensorFlow SavedModel directory → LayerGraph.

A SavedModel (e.g. written by ``keras_model.export(dir)``) holds a TensorFlow graph, not Keras
layers, so it is converted with the TFLite converter to a float32 flatbuffer in a temporary
directory and that is imported (:mod:`optimizer.graph.tflite_import`): the layers are the
operators a TFLite runtime would execute. The graph keeps the directory's name and its
SHA-256 (over every file in it).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path

from ..errors import InputFileError
from ..fileio import sha256_file
from .convert import savedmodel_to_tflite
from .input_shapes import InputShapes
from .layergraph import LayerGraph
from .tflite_import import graph_from_tflite_file


def graph_from_savedmodel(path: str | os.PathLike[str], input_shapes: InputShapes | None = None) -> LayerGraph:
    """Import a SavedModel directory through a float32 TFLite conversion (at ``input_shapes``,
    names as in the converted model's signature).

    Raises
    ------
    InputFileError
        ``path`` is missing or is not a directory holding ``saved_model.pb``.
    UnsupportedOperatorError
        The SavedModel uses an operator the TFLite converter cannot express.
    """
    d = Path(path)
    if not d.is_dir():
        raise InputFileError(f"{d}: no such SavedModel directory; give a directory written by "
                             "keras_model.export() or tf.saved_model.save()")
    if not (d / "saved_model.pb").is_file():
        raise InputFileError(f"{d}: not a SavedModel directory (no saved_model.pb); give a "
                             "directory written by keras_model.export() or tf.saved_model.save()")
    name = d.resolve().name
    with tempfile.TemporaryDirectory(prefix="dnnplan-savedmodel-") as tmp:
        tflite = savedmodel_to_tflite(d, Path(tmp) / f"{name}.tflite")
        graph = graph_from_tflite_file(tflite, input_shapes)
    return replace(graph, name=name, source=str(d), source_sha256=sha256_file(d), fmt="savedmodel")
