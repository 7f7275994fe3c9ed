"""Sub-models of a Keras model: the operators between two boundaries as a Keras functional model.

A sub-model is built by re-applying the original layer objects, in execution order, to new
``Input`` tensors, so its weights are the full model's weights. Its inputs and outputs are the
tensors crossing its boundaries (:func:`optimizer.plan.parts.part_io`).
"""

from __future__ import annotations

from typing import Any

from ..errors import ModelFormatError
from ..graph.keras_import import flat_tensors, flatten_layers, inbound_nodes, tensor_id
from ..graph.layergraph import LayerGraph


def _node_index(model: Any) -> dict[str, tuple[Any, Any]]:
    """Op name -> (layer, its call), named as the importer names them: a shared layer's k-th
    call (k > 0) is ``name@k`` (:func:`optimizer.graph.keras_import.graph_from_keras`)."""
    out: dict[str, tuple[Any, Any]] = {}
    for layer in flatten_layers(model):
        for k, node in enumerate(inbound_nodes(layer, model)):
            out[layer.name if k == 0 else f"{layer.name}@{k}"] = (layer, node)
    return out


def _keras_tensors(model: Any, nodes: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """Tensor id -> original KerasTensor (model inputs and every layer output)."""
    out = {tensor_id(t): t for t in model.inputs}
    for _, node in nodes.values():
        for t in flat_tensors(node.output_tensors):
            out[tensor_id(t)] = t
    return out


class KerasCutter:
    """Builds sub-models of one Keras model.

    The layer nodes and tensors of the original graph are indexed once, at construction:
    re-applying a layer adds a node to it, so indexing later would see the sub-models' nodes.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.nodes = _node_index(model)
        self.originals = _keras_tensors(model, self.nodes)

    def submodel(self, graph: LayerGraph, first_op: int, end_op: int, inputs: list[str],
                 outputs: list[str], name: str) -> Any:
        """A Keras functional model computing ops ``[first_op, end_op)`` of ``graph``.

        ``inputs``/``outputs`` are tensor ids; the sub-model's inputs are named ``in0, in1, ...``
        and its outputs are in the order given. The original layer objects are re-applied, so
        weights are shared with the full model.
        """
        from ..lazy import keras as _keras

        keras = _keras()
        env: dict[str, Any] = {}
        new_inputs = []
        for k, tid in enumerate(inputs):
            orig = self.originals[tid]
            t = keras.Input(shape=tuple(orig.shape[1:]), dtype=orig.dtype, name=f"in{k}")
            env[tid] = t
            new_inputs.append(t)

        def swap(x: Any) -> Any:
            if isinstance(x, keras.KerasTensor):
                tid = tensor_id(x)
                if tid not in env:
                    raise ModelFormatError(f"{self.model.name}: part {name} reads tensor {tid!r} that "
                                           "is neither its input nor computed inside it")
                return env[tid]
            return x

        for layer_spec in graph.layers[first_op:end_op]:
            layer, node = self.nodes[layer_spec.name]
            args = keras.tree.map_structure(swap, node.arguments.args)
            kwargs = keras.tree.map_structure(swap, node.arguments.kwargs)
            result = layer(*args, **kwargs)
            for orig, new in zip(flat_tensors(node.output_tensors), flat_tensors(result), strict=True):
                env[tensor_id(orig)] = new
        return keras.Model(new_inputs, [env[t] for t in outputs], name=name)
