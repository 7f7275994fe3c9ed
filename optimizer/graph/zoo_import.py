"""Zoo importer: build a zoo network with Keras and import it with its block labels."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from ..errors import ModelFormatError
from .keras_import import graph_from_keras
from .layergraph import LayerGraph
from .zoo import build_keras, builder


def graph_from_zoo(name: str, **variant: Any) -> LayerGraph:
    """LayerGraph of zoo network ``name``; its identity hash covers the builder source and the
    variant arguments (weights are random, so the architecture is what is identified).

    The graph of one builder source and variant is built once per process (a LayerGraph is
    immutable, and building the Keras model is the slow step), so commands run in one process,
    such as a notebook's or a batch worker's, share it; an edited builder file has another
    identity and is built anew.
    """
    mod = builder(name)
    if mod.__file__ is None:
        raise ModelFormatError(f"zoo network {name!r}: its builder module has no source file")
    with open(mod.__file__, "rb") as fh:
        ident = hashlib.sha256(fh.read() + json.dumps(variant, sort_keys=True).encode()).hexdigest()
    key = (name, ident)
    with _BUILT_LOCK:  # threads of one process (a Dask worker's) build each graph once
        if key not in _BUILT:
            if len(_BUILT) >= _BUILT_MAX:
                _BUILT.pop(next(iter(_BUILT)))  # the oldest
            model = build_keras(name, **variant)
            _BUILT[key] = graph_from_keras(model, name, block_of=mod.block_of, source=f"zoo:{name}",
                                           source_sha256=ident, fmt="zoo")
        return _BUILT[key]


#: Zoo graphs built in this process by (name, identity hash); at most ``_BUILT_MAX``, oldest dropped.
_BUILT: dict[tuple[str, str], LayerGraph] = {}
_BUILT_MAX = 64
_BUILT_LOCK = threading.Lock()
