"""Keras 3 importer: a functional/sequential model (in memory, ``.keras`` or SavedModel) → LayerGraph.

Every Keras layer except ``InputLayer`` becomes one op-level layer, in ``model.layers`` order
(a topological order for functional models). Nested models are flattened. MACs are counted
for Conv*/DepthwiseConv*/SeparableConv*/Dense/EinsumDense/MultiHeadAttention; other layers
count 0 (see :mod:`optimizer.graph.layergraph`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputFileError, ModelFormatError, UnsupportedOperatorError
from ..fileio import sha256_file
from .input_shapes import InputShapes, resolve_input_shapes, shape_refused
from .layergraph import LayerGraph, LayerSpec, build_graph

# Keras class name -> op family
_FAMILY: dict[str, str] = {
    "Conv1D": "conv", "Conv2D": "conv", "Conv3D": "conv", "Conv2DTranspose": "conv",
    "Conv1DTranspose": "conv", "SeparableConv2D": "conv", "SeparableConv1D": "conv",
    "DepthwiseConv2D": "dwconv", "DepthwiseConv1D": "dwconv",
    "Dense": "dense", "EinsumDense": "dense", "MultiHeadAttention": "dense",
    "MaxPooling2D": "pool", "AveragePooling2D": "pool", "GlobalAveragePooling2D": "pool",
    "GlobalMaxPooling2D": "pool", "MaxPooling1D": "pool", "AveragePooling1D": "pool",
    "GlobalAveragePooling1D": "pool", "GlobalMaxPooling1D": "pool",
    "AdaptiveAveragePooling2D": "pool", "AdaptiveMaxPooling2D": "pool",
    "Add": "add", "Subtract": "add", "Multiply": "add", "Average": "add", "Maximum": "add",
    "Minimum": "add",
    "Concatenate": "concat",
    "ReLU": "act", "Activation": "act", "LeakyReLU": "act", "PReLU": "act", "ELU": "act",
    "Softmax": "act",
    "BatchNormalization": "norm", "LayerNormalization": "norm", "GroupNormalization": "norm",
    "UnitNormalization": "norm",
    "Flatten": "reshape", "Reshape": "reshape", "Permute": "reshape", "ZeroPadding2D": "reshape",
    "Cropping2D": "reshape", "RepeatVector": "reshape", "Identity": "reshape",
    "Cropping1D": "reshape",
    "UpSampling2D": "resize", "Resizing": "resize",
    "Dropout": "other", "SpatialDropout2D": "other", "Rescaling": "other", "Normalization": "other",
    "Embedding": "other", "Lambda": "other", "TokenAndPositionEmbedding": "other",
    "PositionEmbedding": "other",
}


def _op_type(layer: Any, cls: str) -> str:
    """The layer's class name; ``Activation:<function>`` for an ``Activation`` layer, whose
    function decides what a runtime runs (``swish`` is two kernels, ``relu`` fuses)."""
    if cls != "Activation":
        return cls
    fn = getattr(layer, "activation", None)
    return f"Activation:{getattr(fn, '__name__', 'unknown')}"


def _shape(s: Any) -> tuple[int, ...]:
    """Drop the batch dimension; unknown dims become 1."""
    dims = tuple(s)[1:]
    return tuple(int(d) if d is not None else 1 for d in dims)


def _macs(layer: Any, in_shapes: list[tuple[int, ...]], out_shapes: list[tuple[int, ...]]) -> int:
    cls = type(layer).__name__
    out = out_shapes[0] if out_shapes else ()
    n_out = math.prod(out) if out else 0
    if cls in ("Conv1D", "Conv2D", "Conv3D"):
        k = math.prod(layer.kernel_size)
        cin = in_shapes[0][-1]
        return int(n_out * k * cin // max(int(layer.groups), 1))
    if cls in ("Conv2DTranspose", "Conv1DTranspose"):
        k = math.prod(layer.kernel_size)
        return int(math.prod(in_shapes[0]) * k * layer.filters)
    if cls in ("DepthwiseConv2D", "DepthwiseConv1D"):
        return int(n_out * math.prod(layer.kernel_size))
    if cls in ("SeparableConv2D", "SeparableConv1D"):
        cin = in_shapes[0][-1]
        k = math.prod(layer.kernel_size)
        spatial = n_out // out[-1]
        return int(spatial * cin * layer.depth_multiplier * (k + out[-1]))
    if cls == "Dense":
        return int(math.prod(in_shapes[0]) * int(layer.units))
    if cls == "EinsumDense":
        return int(layer.count_params() and math.prod(in_shapes[0][:-1]) * _kernel_size(layer))
    if cls == "MultiHeadAttention":
        return _mha_macs(layer, in_shapes)
    return 0


def _kernel_size(layer: Any) -> int:
    return int(math.prod(layer.kernel.shape))


def _mha_macs(layer: Any, in_shapes: list[tuple[int, ...]]) -> int:
    q = in_shapes[0]
    v = in_shapes[1] if len(in_shapes) > 1 else q
    seq_q, seq_v = math.prod(q[:-1]), math.prod(v[:-1])
    heads, key_dim = int(layer.num_heads), int(layer.key_dim)
    value_dim = int(layer.value_dim or key_dim)
    proj = seq_q * q[-1] * heads * key_dim + 2 * seq_v * v[-1] * heads * key_dim  # Q, K, V
    attn = heads * seq_q * seq_v * (key_dim + value_dim)  # QK^T and attention x V
    out = seq_q * heads * value_dim * q[-1]
    return int(proj + attn + out)


def flatten_layers(model: Any) -> list[Any]:
    """Layers of ``model`` with nested models expanded in place (InputLayers dropped)."""
    out: list[Any] = []
    for layer in model.layers:
        if type(layer).__name__ == "InputLayer":
            continue
        if hasattr(layer, "layers") and type(layer).__name__ in ("Functional", "Sequential", "Model"):
            out.extend(flatten_layers(layer))
        else:
            out.append(layer)
    return out


def tensor_id(t: Any) -> str:
    """The LayerGraph id of a Keras tensor: ``layer:index``, or ``layer:node:index`` for a shared
    layer's later call (its ``_keras_history``); a tensor without history is named by itself."""
    hist = getattr(t, "_keras_history", None)
    if hist is not None:
        op, node_index, tensor_index = hist
        return f"{op.name}:{node_index}:{tensor_index}" if node_index else f"{op.name}:{tensor_index}"
    return getattr(t, "name", str(id(t)))


def graph_from_keras(
    model: Any,
    name: str | None = None,
    *,
    block_of: Callable[[str], str] | None = None,
    source: str = "",
    source_sha256: str = "",
    fmt: str = "keras",
    input_shapes: InputShapes | None = None,
) -> LayerGraph:
    """Import an in-memory Keras 3 model.

    Parameters
    ----------
    model : keras.Model
        A functional or sequential model with known input shape.
    block_of : callable, optional
        Maps a layer name to its block label (zoo builders supply one); default: the name.
    input_shapes : dict, optional
        Input name → full shape (batch first); needed for dynamic (``None``) non-batch dims.
    """
    if getattr(model, "_is_graph_network", True) is False and not model.built:
        raise ModelFormatError(f"{name or model.name}: subclassed Keras models without a known "
                               "input shape cannot be imported; build it or export it to ONNX")
    if len(model.inputs) != len(getattr(model, "inputs", [])) or not model.inputs:
        raise ModelFormatError(f"{name or model.name}: the Keras model has no inputs; "
                               "use a functional or sequential model with an Input")
    model_name = name or model.name
    model, served = keras_at_input_shapes(model, input_shapes, source or model_name)
    ids: dict[int, str] = {}

    def tid(t: Any) -> str:
        key = id(t)
        if key not in ids:
            ids[key] = tensor_id(t)
        return ids[key]

    specs: list[LayerSpec] = []
    for layer in flatten_layers(model):
        cls = type(layer).__name__
        family = _FAMILY.get(cls)
        if family is None:
            raise UnsupportedOperatorError(
                f"{model_name}: layer {layer.name!r} has unsupported Keras type {cls}; "
                "replace it with built-in layers or import the model's ONNX/TFLite export")
        for k, node in enumerate(inbound_nodes(layer, model)):
            # a layer called k > 0 times more (shared weights) is one op per call, named
            # "name@k"; its weights are counted once, on the first call
            op_name = layer.name if k == 0 else f"{layer.name}@{k}"
            in_tensors = [t for t in flat_tensors(node.input_tensors)]
            out_tensors = [t for t in flat_tensors(node.output_tensors)]
            in_shapes = [_shape(t.shape) for t in in_tensors]
            out_shapes = [_shape(t.shape) for t in out_tensors]
            specs.append(LayerSpec(
                name=op_name, op=family, op_type=_op_type(layer, cls),
                inputs=tuple(dict.fromkeys(tid(t) for t in in_tensors)),
                outputs=tuple(tid(t) for t in out_tensors),
                output_shapes=tuple(out_shapes),
                macs=_macs(layer, in_shapes, out_shapes),
                params=int(layer.count_params()) if k == 0 else 0,
                block=block_of(op_name) if block_of else op_name,
                heads=int(getattr(layer, "num_heads", 0) or 0) if cls == "MultiHeadAttention" else 0,
            ))
    inputs = [(tid(t), _shape(t.shape)) for t in model.inputs]
    outputs = [tid(t) for t in flat_tensors(model.outputs)]
    graph = build_graph(model_name, _reorder(specs, {t for t, _ in inputs}), inputs, outputs,
                        source=source, source_sha256=source_sha256, fmt=fmt)
    return dataclasses.replace(graph, served_input_shapes=served) if served else graph


def keras_at_input_shapes(model: Any, input_shapes: InputShapes | None, where: str) -> tuple[Any, InputShapes | None]:
    """(model, resolved shapes): ``model`` itself when its inputs are static but for the batch
    (and ``input_shapes`` agree), else a functional clone on inputs of the resolved shapes with
    the same weights (``keras.models.clone_model(..., input_tensors=...)``); shapes None when
    none were given."""
    declared = {str(t.name): [None if d is None else int(d) for d in t.shape] for t in model.inputs}
    if not input_shapes and not any(None in dims[1:] for dims in declared.values()):
        return model, None
    shapes = resolve_input_shapes(input_shapes, declared, where)
    served = shapes if input_shapes else None
    if all(dims[1:] == list(shapes[n][1:]) for n, dims in declared.items()):
        return model, served  # only the batch differs: shapes below drop it
    from ..lazy import keras as _keras

    keras = _keras()
    inputs = [keras.Input(batch_shape=shapes[str(t.name)], name=str(t.name), dtype=t.dtype) for t in model.inputs]
    try:
        clone = keras.models.clone_model(model, input_tensors=inputs if len(inputs) > 1 else inputs[0])
        clone.set_weights(model.get_weights())
    except Exception as exc:  # keras raises ValueError/TypeError when a layer cannot take the shape
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        raise shape_refused(where, shapes, f"{type(exc).__name__}: {first}") from None
    return clone, served


def inbound_nodes(layer: Any, model: Any = None) -> list[Any]:
    """The calls of ``layer`` that belong to ``model``'s graph (several for shared layers);
    for layers of nested models, the last call."""
    nodes = list(getattr(layer, "_inbound_nodes", []))
    own = getattr(model, "_nodes", None)
    if own:
        mine = [n for i, n in enumerate(nodes) if f"{id(layer)}_ib-{i}" in own]
        if mine:
            return mine
    return nodes[-1:] if len(nodes) > 1 and type(layer).__name__ != "Functional" else nodes


def flat_tensors(x: Any) -> list[Any]:
    """The tensors of a nested list, tuple or dict of them, in order (None left out)."""
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in flat_tensors(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in flat_tensors(item)]
    return [x] if x is not None else []


def _reorder(specs: list[LayerSpec], available: set[str]) -> list[LayerSpec]:
    """Topological order close to the given one that finishes a block before starting another.

    Keras lists layers by depth, which interleaves parallel branches (FPN levels, SSH
    modules); among the layers whose inputs exist, one of the last placed layer's block is
    taken first, else the earliest in the given order.
    """
    done = set(available)
    pending = list(specs)
    ordered: list[LayerSpec] = []
    while pending:
        last_block = ordered[-1].block if ordered else None
        pick = None
        for i, spec in enumerate(pending):
            if all(t in done for t in spec.inputs):
                if pick is None:
                    pick = i
                if spec.block == last_block:
                    pick = i
                    break
        if pick is None:
            missing = sorted({t for s in pending for t in s.inputs if t not in done})[:3]
            raise ModelFormatError(f"cannot order layers: tensors {missing} are never produced")
        spec = pending.pop(pick)
        ordered.append(spec)
        done.update(spec.outputs)
    return ordered


def load_keras_model(path: str | os.PathLike[str]) -> Any:
    """Load a ``.keras`` file (inference only, safe mode)."""
    from ..lazy import keras as _keras

    keras = _keras()

    p = Path(path)
    if not p.exists():
        raise InputFileError(f"{p}: no such file or directory; give a .keras file or SavedModel dir")
    try:
        return keras.saving.load_model(p, compile=False, safe_mode=True)
    except InputFileError:
        raise
    except Exception as exc:  # keras raises many types for corrupt archives
        raise ModelFormatError(f"{p}: cannot load Keras model ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:160]}); is it a valid .keras file?") from exc


def graph_from_keras_file(path: str | os.PathLike[str], granularity: str = "op",
                          input_shapes: InputShapes | None = None) -> LayerGraph:
    """Import a ``.keras`` file (at ``input_shapes``, see :func:`keras_at_input_shapes`)."""
    model = load_keras_model(path)
    p = Path(path)
    graph = graph_from_keras(model, p.stem, source=str(p), source_sha256=sha256_file(p), input_shapes=input_shapes)
    return graph.with_granularity(granularity)
