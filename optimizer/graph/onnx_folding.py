"""Shape arithmetic of an ONNX model folded at its fixed input shapes, evaluated by onnxruntime.

Exporters compute ``Reshape`` targets, slice bounds and broadcast shapes from ``Shape(x)``
(paddle2onnx's ``Shape -> Slice -> Cast -> Concat``, tf2onnx's ``Shape -> Gather -> Concat``).
Once the input shapes are fixed (``--input-shape``), every such tensor is a constant. This module
finds them and computes their values:

* a tensor is *foldable* when its node is deterministic, has no subgraph, is no quantize/dequantize
  or sequence operator (:data:`KEPT`), and either reads only
  constants (initializers, ``Constant`` outputs, foldable tensors) or is ``Shape``/``Size`` of a
  tensor whose shape is static at the fixed input shapes (the dims the importer inferred,
  :func:`optimizer.graph.onnx_import.static_dims`);
* every ``Shape``/``Size`` node of a static tensor becomes a ``Constant`` holding those dims, and
  onnxruntime evaluates the constant subgraph (no activation is computed, so a model whose other
  nodes onnxruntime cannot run, such as custom-domain operators, folds too);
* the folded model drops the foldable nodes and holds, as initializers under their own names, the
  foldable tensors that other nodes or the graph outputs read.

Constant folding is what onnx-simplifier does (Zhang et al., https://github.com/daquexian/onnx-simplifier);
its folding of paddle2onnx's recogniser (PP-OCRv4 rec at 48x320) put 78 instead of 40 into the
attention blocks' ``Reshape`` targets, so the parts cut from it did not load. Evaluating the
shape arithmetic with onnxruntime from the importer's own dims keeps the parts consistent with
the graph the plan was made on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

#: operators whose output is not a function of their inputs
NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                              "Multinomial", "Bernoulli", "Dropout"})
#: operators left as they are: runtimes fuse quantize/dequantize pairs into integer kernels (a
#: folded ``DequantizeLinear`` of weights would turn onnxruntime's QLinearConv into a float Conv),
#: and sequence/optional values are no tensors an initializer can hold
KEPT = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "SequenceConstruct",
                  "SequenceEmpty", "SequenceInsert", "SequenceAt", "SplitToSequence", "Optional",
                  "OptionalGetElement", "OptionalHasElement"})
SHAPE_READERS = frozenset({"Shape", "Size"})
_DEFAULT = ("", "ai.onnx")


def _has_subgraph(node: Any) -> bool:
    return any(a.HasField("g") or len(a.graphs) for a in node.attribute)


def _static(d: Sequence[int | None] | None) -> bool:
    return d is not None and all(x is not None and x >= 0 for x in d)


def foldable_nodes(model: Any, dims: Mapping[str, Sequence[int | None] | None]) -> list[int]:
    """Indices of the nodes of ``model`` whose outputs are constants at the static ``dims``
    (tensor → full dims, None where unknown); ``Constant`` nodes are left out (they are constants
    already)."""
    g = model.graph
    const = {t.name for t in g.initializer} | {""}
    out = []
    for k, node in enumerate(g.node):
        standard = node.domain in _DEFAULT
        if standard and node.op_type == "Constant":
            const.update(node.output)
            continue
        if (not standard or node.op_type in NONDETERMINISTIC or node.op_type in KEPT or _has_subgraph(node)
                or not node.input):
            continue
        if node.op_type in SHAPE_READERS:
            ok = _static(dims.get(node.input[0])) or node.input[0] in const
        else:
            ok = all(t in const for t in node.input)
        if ok:
            const.update(node.output)
            out.append(k)
    return out


def _shape_constant(node: Any, full: Sequence[int]) -> Any:
    """A ``Constant`` node with the value ``Shape``/``Size`` ``node`` computes from dims ``full``."""
    import numpy as np
    from onnx import helper, numpy_helper

    if node.op_type == "Size":
        value = np.array(math.prod(full), np.int64)
    else:
        rank = len(full)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        start, end = int(attrs.get("start", 0)), int(attrs.get("end", rank))
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = min(max(end + rank if end < 0 else end, 0), rank)
        value = np.array(list(full)[start:end], np.int64)
    return helper.make_node("Constant", [], [node.output[0]], name=node.name or node.output[0],
                            value=numpy_helper.from_array(value, node.output[0]))


def fold_shape_arithmetic(model: Any, dims: Mapping[str, Sequence[int | None] | None]) -> tuple[Any, set[str]] | None:
    """``(folded model, names of the folded tensors)``, or None when nothing folds or onnxruntime
    cannot evaluate the constant subgraph (see the module docstring).

    Parameters
    ----------
    model : onnx.ModelProto
        The model with its input shapes fixed (:func:`~optimizer.graph.onnx_import.pin_input_shapes`);
        it is not modified.
    dims : mapping
        Tensor name → full dims (batch included) at those shapes, None where not static.
    """
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    g = model.graph
    fold = foldable_nodes(model, dims)
    if not fold:
        return None
    folded_set = set(fold)
    names = {t for k in fold for t in g.node[k].output if t}
    kept = [n for k, n in enumerate(g.node) if k not in folded_set]
    read = {t for n in kept for t in n.input} | {t for n in kept for a in n.attribute for t in _outer_reads(a)}
    wanted = [t for t in dict.fromkeys(t for k in fold for t in g.node[k].output if t)
              if t in read or t in {o.name for o in g.output}]
    if not wanted:
        return None
    nodes = []
    for k in fold:
        node = g.node[k]
        src = dims.get(node.input[0]) if node.op_type in SHAPE_READERS else None
        nodes.append(_shape_constant(node, [int(x or 0) for x in src or ()]) if _static(src) else node)
    reads = {t for n in nodes for t in n.input}
    evaluator = helper.make_graph(
        [n for n in g.node if n.op_type == "Constant" and n.domain in _DEFAULT and n.output[0] in reads] + nodes,
        "shape_arithmetic", [], [helper.make_empty_tensor_value_info(t) for t in wanted],
        initializer=[t for t in g.initializer if t.name in reads])
    values = _evaluate(helper.make_model(evaluator, opset_imports=model.opset_import, ir_version=model.ir_version),
                       wanted)
    if values is None:
        return None
    out = type(model)()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(kept)
    out.graph.initializer.extend(numpy_helper.from_array(np.asarray(values[t]), t) for t in wanted)
    del out.graph.value_info[:]
    try:
        onnx.checker.check_model(out)
    except onnx.checker.ValidationError:
        return None
    return out, names


def _outer_reads(attr: Any) -> list[str]:
    """Tensors a subgraph attribute reads from the enclosing graph (any name its nodes read)."""
    subs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
    return [t for sub in subs for n in sub.node for t in n.input]


def _evaluate(model: Any, names: list[str]) -> dict[str, Any] | None:
    """Values of ``names`` computed by onnxruntime from a model without inputs; None when it
    cannot run the model (an operator or type it does not implement)."""
    try:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.intra_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return dict(zip(names, session.run(names, {}), strict=True))
    except Exception:  # noqa: BLE001 - onnxruntime raises Fail/InvalidGraph/NotImplemented of its own
        return None
