"""Model artifacts for measurement (ONNX, float TFLite), exported once and cached by content.

Artifacts go to ``$DNNPLAN_CACHE/artifacts`` (default ``results/cache/artifacts`` in a checkout,
the user cache folder ``$XDG_CACHE_HOME/dnnplan`` or ``~/.cache/dnnplan`` for an installed wheel),
named by the model's identity hash, so re-measuring never re-exports.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..confine import inside
from ..errors import ConfigError
from ..graph.layergraph import LayerGraph


def cache_dir() -> Path:
    """``$DNNPLAN_CACHE``, else the checkout's ``results/cache``, else (an installed wheel, whose
    site-packages holds no ``results/``) the user cache folder (XDG base directory spec)."""
    env = os.environ.get("DNNPLAN_CACHE")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2] / "results"
    if checkout.is_dir():
        return checkout / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dnnplan"


def _keras_model(model_ref: str, variant: dict[str, Any]) -> Any:
    p = Path(model_ref)
    if p.suffix == ".keras":
        from ..graph.keras_import import load_keras_model

        return load_keras_model(p)
    from ..graph.zoo import build_keras

    return build_keras(model_ref, **variant)


def export_artifact(model_ref: str, graph: LayerGraph, fmt: str, **variant: Any) -> Path:
    """Path of ``model_ref`` as an ``onnx`` or float ``tflite`` file (exported if not cached).

    ``model_ref`` is a zoo name, a ``.keras`` file, or already a file of the wanted format.
    """
    p = Path(model_ref)
    if p.suffix.lower() == f".{fmt}":
        return p
    if p.suffix.lower() in (".onnx", ".tflite") or p.is_dir():
        raise ConfigError(f"{model_ref}: cannot turn a {p.suffix or 'SavedModel'} model into .{fmt} for "
                          f"measurement; give a zoo name, a .keras file or a .{fmt} file")
    ident = (graph.source_sha256 or graph.name)[:16]
    out = inside(cache_dir() / "artifacts", f"{graph.name}-{ident}.{fmt}", "artifact cache key", single=True)
    if out.is_file():
        return out
    model = _keras_model(model_ref, variant)
    from ..graph.convert import keras_to_onnx, keras_to_tflite

    return keras_to_onnx(model, out) if fmt == "onnx" else keras_to_tflite(model, out)
