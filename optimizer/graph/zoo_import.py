"""Zoo importer: build a zoo network with Keras and import it with its block labels."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..errors import ModelFormatError
from .keras_import import graph_from_keras
from .layergraph import LayerGraph
from .zoo import build_keras, builder


def graph_from_zoo(name: str, **variant: Any) -> LayerGraph:
    """LayerGraph of zoo network ``name``; its identity hash covers the builder source and the
    variant arguments (weights are random, so the architecture is what is identified)."""
    mod = builder(name)
    model = build_keras(name, **variant)
    if mod.__file__ is None:
        raise ModelFormatError(f"zoo network {name!r}: its builder module has no source file")
    with open(mod.__file__, "rb") as fh:
        ident = hashlib.sha256(fh.read() + json.dumps(variant, sort_keys=True).encode()).hexdigest()
    return graph_from_keras(model, name, block_of=mod.block_of, source=f"zoo:{name}",
                            source_sha256=ident, fmt="zoo")
