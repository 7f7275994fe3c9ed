"""Lazy, quiet imports of heavy libraries (TensorFlow, Keras, LiteRT).

TensorFlow prints C++ log lines (CUDA probing, oneDNN notices) to file descriptor 2 before its
own log level applies; these helpers import it with fd 2 pointed at /dev/null so none of that
reaches the user's terminal. Import TensorFlow only through these functions.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "3")


@contextlib.contextmanager
def silenced_stderr() -> Iterator[None]:
    """Point fd 2 at /dev/null for the duration (C++ logging included)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (e.g. some notebook kernels)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _quiet_import(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    with silenced_stderr():
        module = importlib.import_module(name)
    if name == "tensorflow":
        module.get_logger().setLevel("ERROR")
        with contextlib.suppress(Exception):
            import absl.logging

            absl.logging.set_verbosity(absl.logging.ERROR)
    return module


def tensorflow() -> ModuleType:
    """``import tensorflow`` without log noise."""
    return _quiet_import("tensorflow")


def keras() -> ModuleType:
    """``import keras`` (Keras 3 on the TensorFlow backend) without log noise."""
    tensorflow()
    return _quiet_import("keras")


def litert_interpreter() -> type:
    """The LiteRT interpreter class (``ai_edge_litert.interpreter.Interpreter``)."""
    return _quiet_import("ai_edge_litert.interpreter").Interpreter


def litert_builtin_resolver() -> object:
    """The LiteRT op resolver of TFLite's built-in kernels without the default (XNNPACK) delegate."""
    return _quiet_import("ai_edge_litert.interpreter").OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
