"""ONNX importer: an ``.onnx`` file or ``ModelProto`` → LayerGraph.

The model is checked with ``onnx.checker`` and local functions are inlined (``onnx.inliner``).
Every node is one op-level layer, in graph order (ONNX requires a topological order; an unsorted
graph is reordered stably). Initializers and ``Constant`` outputs are weights, not graph
tensors: their element counts are the params of the first node that reads them.

Shapes: the graph inputs are fixed first (:mod:`optimizer.graph.input_shapes`: the user's
``--input-shape``, else the declared dims; a dynamic batch alone becomes 1, other dynamic dims
are refused with the flag to give). Then, until every tensor a layer produces has a static
shape: ``onnx.shape_inference.infer_shapes`` with data propagation; onnxruntime's symbolic shape
inference (``onnxruntime.tools.symbolic_shape_infer``, which evaluates Shape→Gather→Concat→Reshape
chains); onnx-simplifier's constant folding (``onnxsim.simplify`` without graph rewrites) whose
folded tensors and inferred shapes are read back by name, so the file's own nodes are imported.
A tensor still without a static shape (a data-dependent size, an ``If``/``Loop``/``Scan`` that
folding does not make static) is refused naming its node: no layer leaves the importer with an
unknown or placeholder shape. Shapes then drop the leading batch dimension (size 1).

MACs (per sample, the convention of :mod:`optimizer.graph.layergraph`):

* Conv / ConvInteger / QLinearConv / DeformConv: output elements × (Cin/group) × kh × kw;
* ConvTranspose: input elements × (Cout/group) × kh × kw;
* Gemm / MatMul (batched too) / MatMulInteger / QLinearMatMul: output elements × K;
* Einsum: product of every index size (two or more operands; a symbolic batch counts 1);
* LSTM / GRU / RNN: sequence length × directions × gates·H × (input size + H).
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import (
    ConfigError,
    CustomOperatorWarning,
    InputFileError,
    InputShapeNote,
    ModelFormatError,
    UnsupportedOperatorError,
)
from ..fileio import sha256_file
from .input_shapes import InputShapes, resolve_input_shapes, shape_refused, shapes_flag
from .layergraph import LayerGraph, LayerSpec, build_graph
from .onnx_macs import node_attr, node_macs

# Domains whose operators dnnplan knows: the ONNX default operator set and the ONNX-ML set.
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training")

_FAMILIES: dict[str, tuple[str, ...]] = {
    "conv": ("Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv"),
    "dense": ("Gemm", "MatMul", "MatMulInteger", "QLinearMatMul", "Einsum", "LSTM", "GRU", "RNN"),
    "pool": ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool",
             "GlobalLpPool", "MaxRoiPool", "RoiAlign", "MaxUnpool", "ReduceMean"),
    "add": ("Add", "Sub", "Mul", "Div", "Sum", "Mean", "Max", "Min", "Pow", "Mod"),
    "concat": ("Concat", "ConcatFromSequence"),
    "act": ("Relu", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Clip",
            "Elu", "Selu", "Celu", "Gelu", "Softmax", "LogSoftmax", "Softplus", "Softsign",
            "ThresholdedRelu", "Mish", "Hardmax", "Swish"),
    "norm": ("BatchNormalization", "LayerNormalization", "InstanceNormalization",
             "GroupNormalization", "LpNormalization", "MeanVarianceNormalization",
             "RMSNormalization", "LRN"),
    "reshape": ("Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Pad", "Slice",
                "Split", "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "Identity",
                "CenterCropPad"),
    "resize": ("Resize", "Upsample"),
}
OP_FAMILY: dict[str, str] = {op: fam for fam, ops in _FAMILIES.items() for op in ops}


def graph_from_onnx_file(path: str | os.PathLike[str], input_shapes: InputShapes | None = None) -> LayerGraph:
    """Import an ``.onnx`` file (named by its stem, identified by its SHA-256) at ``input_shapes``."""
    import onnx
    from google.protobuf.message import DecodeError

    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such file; give an existing .onnx model file")
    try:
        model = onnx.load(str(p))
    except (DecodeError, ValueError, RuntimeError, OSError) as exc:
        raise ModelFormatError(f"{p}: not a readable ONNX model ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:160] if str(exc) else 'parse error'}); "
                               "expected an ONNX ModelProto such as torch.onnx or tf2onnx write") from exc
    return graph_from_onnx(model, p.stem, source=str(p), source_sha256=sha256_file(p), input_shapes=input_shapes)


def graph_from_onnx(
    model: Any,
    name: str,
    *,
    source: str = "",
    source_sha256: str = "",
    block_of: Callable[[str], str] | None = None,
    input_shapes: InputShapes | None = None,
) -> LayerGraph:
    """Import an in-memory ``onnx.ModelProto``.

    Parameters
    ----------
    model : onnx.ModelProto
        The model; it is not modified.
    name : str
        Graph name.
    source, source_sha256 : str
        Where it came from, for provenance and error messages (default: ``name``).
    block_of : callable, optional
        Maps a node name to its block label; default: the node name.
    input_shapes : dict, optional
        Input name → full shape (:func:`~optimizer.graph.input_shapes.parse_input_shapes`);
        required for inputs with dynamic non-batch dims.

    Raises
    ------
    ConfigError
        Input shapes that name no input, have the wrong rank or contradict the model, or
        dynamic non-batch input dims without a shape.
    UnsupportedOperatorError
        A node has an op type outside the ONNX operator set (custom-domain operators import
        as CPU-only ``custom`` layers with a :class:`CustomOperatorWarning`).
    ModelFormatError
        The model fails ``onnx.checker`` or has tensors without an inferable shape.
    """
    where = source or name
    pinned, custom = _prepared(model, input_shapes, where)
    dims = _static_shapes(pinned, where, input_shapes)
    graph = _assemble(pinned, dims, name, where, source, source_sha256, block_of)
    if input_shapes:
        served = {n: tuple(int(x or 0) for x in d or ()) for n, d in declared_input_dims(pinned).items()}
        graph = dataclasses.replace(graph, served_input_shapes=served)
    _warn_custom(custom, where)  # after the import succeeded: a failed import prints one line
    return graph


def _prepared(model: Any, input_shapes: InputShapes | None, where: str) -> tuple[Any, dict[str, int]]:
    """The model the importer reads (local functions inlined, nodes in topological order, checked,
    input shapes fixed) and its custom-domain operator counts."""
    import onnx
    import onnx.inliner

    if not isinstance(model, onnx.ModelProto) or not model.graph.node:
        raise ModelFormatError(f"{where}: the ONNX model has no graph nodes; expected an ONNX "
                               "ModelProto with at least one operator")
    if model.functions:
        model = onnx.inliner.inline_local_functions(model)
    custom = _check_operators(model, where)
    model = _sorted(model, where)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise ModelFormatError(f"{where}: invalid ONNX model ({str(exc).strip().splitlines()[0][:200]}); "
                               "re-export it with a current exporter") from exc
    return pin_input_shapes(model, input_shapes, where), custom


def prepared_model(model: Any, input_shapes: InputShapes | None, where: str) -> tuple[Any, dict[str, list[int | None] | None]]:
    """The model :func:`graph_from_onnx` builds its layers from (local functions inlined, nodes in
    topological order, input shapes fixed; a dynamic batch alone becomes 1 silently) and the full
    dims of its tensors (:func:`static_dims`): what an exporter cutting the file needs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputShapeNote)
        pinned, _ = _prepared(model, input_shapes, where)
    return pinned, _static_shapes(pinned, where, input_shapes)


def declared_input_dims(model: Any) -> dict[str, list[int | None] | None]:
    """The graph inputs (initializers excluded) → declared dims, None for a symbolic, unknown
    or non-positive dim (paddle2onnx writes -1); None for an input without a shape."""
    weights = {t.name for t in model.graph.initializer}
    out: dict[str, list[int | None] | None] = {}
    for t in model.graph.input:
        if t.name not in weights:
            d = _dims(t.type)
            out[t.name] = None if d is None else [x if x is not None and x > 0 else None for x in d]
    return out


def pin_input_shapes(model: Any, input_shapes: InputShapes | None, where: str) -> Any:
    """A copy of ``model`` whose graph inputs have the static shapes of
    :func:`~optimizer.graph.input_shapes.resolve_input_shapes` (``model`` itself when they are
    static already), with stale ``value_info`` and non-static output dims cleared for inference.

    Fixing the batch too (not only the other dims) lets shape inference carry concrete sizes
    through reshapes that fold the batch into another axis (a transformer's ``[batch, tokens,
    hidden] -> [-1, hidden]``); left symbolic, that merged axis would be taken for the batch and
    dropped (bert_small: 37 % of its MACs).
    """
    declared = declared_input_dims(model)
    given = dict(input_shapes or {})
    if "" in given and len(declared) == 1:
        given = {next(iter(declared)): given.pop("")}
    known: dict[str, list[int | None]] = {}
    for n, d in declared.items():
        if d is None:
            if n not in given:
                raise ConfigError(f"{where}: input {n!r} has no shape in the file; give its full shape, e.g. "
                                  f"--input-shape {n}:1,3,640,640")
            d = [None] * len(given[n])
        known[n] = d
    shapes = resolve_input_shapes(given, known, where)
    if all(known[n] == list(shapes[n]) for n in shapes):
        return model
    pinned = type(model)()
    pinned.CopyFrom(model)
    for t in pinned.graph.input:
        if t.name in shapes:
            shape = t.type.tensor_type.shape
            del shape.dim[:]
            for v in shapes[t.name]:
                shape.dim.add().dim_value = int(v)
    del pinned.graph.value_info[:]  # inferred again from the pinned inputs
    for t in pinned.graph.output:
        if t.type.HasField("tensor_type"):
            for d in t.type.tensor_type.shape.dim:
                if not (d.HasField("dim_value") and d.dim_value > 0):
                    d.Clear()
    return pinned


# --------------------------------------------------------------------------- validation
def _walk_nodes(graph: Any) -> Iterator[Any]:
    """Nodes of ``graph`` and of every subgraph (If/Loop/Scan bodies), depth first."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _walk_nodes(attr.g)
            for sub in attr.graphs:
                yield from _walk_nodes(sub)


def _check_operators(model: Any, where: str) -> dict[str, int]:
    import onnx.defs

    custom: dict[str, int] = {}
    for i, node in enumerate(_walk_nodes(model.graph)):
        label = node.name or f"#{i} ({node.op_type})"
        if node.domain not in STANDARD_DOMAINS:
            key = f"{node.domain}.{node.op_type}"
            custom[key] = custom.get(key, 0) + 1
            continue
        domain = "" if node.domain == "ai.onnx" else node.domain
        if not onnx.defs.has(node.op_type, domain):
            raise UnsupportedOperatorError(
                f"{where}: node {label!r} has operator {node.op_type!r}, which is not in the ONNX "
                f"operator set (domain {domain or 'ai.onnx'!r}); re-export the model with standard operators")
    return custom


def _warn_custom(custom: dict[str, int], where: str) -> None:
    """One warning naming every custom-domain operator type of an imported model."""
    if custom:
        listed = ", ".join(f"{k} x{v}" for k, v in sorted(custom.items()))
        warnings.warn(f"{where}: custom-domain operators {listed} imported as CPU-only layers (cost from "
                      "bytes moved); export keeps each inside one part", CustomOperatorWarning, stacklevel=4)


# --------------------------------------------------------------------------- shapes
def _dims(value_type: Any) -> list[int | None] | None:
    """Dims of a tensor type (None for symbolic/unknown dims), or None if the rank is unknown."""
    tt = value_type.tensor_type
    if not value_type.HasField("tensor_type") or not tt.HasField("shape"):
        return None
    return [int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim]


def _per_sample(dims: list[int | None]) -> tuple[int, ...]:
    """Drop a leading batch dim (size 1, or unknown in a full shape read for MACs)."""
    if dims and (dims[0] is None or dims[0] == 1):
        dims = dims[1:]
    return tuple(1 if d is None else d for d in dims)


def _full(dims: list[int | None] | None) -> tuple[int, ...]:
    return tuple(1 if d is None else d for d in dims or ())


def _value_dims(model: Any) -> dict[str, list[int | None] | None]:
    """Tensor name → dims (None where unknown) from the inputs, value_info and outputs of
    ``model``, plus the dims of its initializers and ``Constant`` outputs."""
    dims: dict[str, list[int | None] | None] = {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        d = _dims(vi.type)
        if d is not None or vi.name not in dims:
            dims[vi.name] = [x if x is not None and x >= 0 else None for x in d] if d is not None else None
    for t in g.initializer:
        dims[t.name] = [int(x) for x in t.dims]
    for node in g.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            dims[node.output[0]] = list(_constant_shape(node))
    return dims


def _static(d: list[int | None] | None) -> bool:
    return d is not None and all(x is not None for x in d)


def _needed(model: Any) -> list[tuple[Any, str]]:
    """(node, tensor) of every non-Constant node output a layer of the import carries (read by
    a node or a graph output; the first output of a node none of whose outputs is read)."""
    g = model.graph
    nodes = [n for n in g.node if not (n.op_type == "Constant" and n.domain in ("", "ai.onnx"))]
    consumed = {t for n in nodes for t in _node_reads(n)} | {vi.name for vi in g.output}
    out: list[tuple[Any, str]] = []
    for node in nodes:
        outs = [t for t in node.output if t and t in consumed] or [t for t in node.output if t][:1]
        out.extend((node, t) for t in outs)
    return out


def _unknown(needed: list[tuple[Any, str]], dims: dict[str, list[int | None] | None]) -> list[tuple[Any, str]]:
    return [(n, t) for n, t in needed if not _static(dims.get(t))]


def _symbolic_dims(model: Any) -> dict[str, list[int | None] | None]:
    """Dims from onnxruntime's symbolic shape inference ({} when it cannot run on ``model``).

    The steps of ``SymbolicShapeInference.infer_shapes``, keeping what an incomplete pass found
    (the public call raises then, after saving ``sym_shape_infer_temp.onnx`` in the working
    directory)."""
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        from ..lazy import silenced_stderr

        with silenced_stderr(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sym = SymbolicShapeInference(2**31 - 1, False, False, 0)  # int_max, auto_merge, guess rank, verbose
            sym._preprocess(model)
            while sym.run_:
                sym._infer_impl()
            sym._update_output_from_vi()
            out = sym.out_mp_
    except Exception:  # noqa: BLE001 - the tool asserts/raises on operators it does not know
        return {}
    return _value_dims(out)


def constant_folded(model: Any) -> Any | None:
    """``model`` after onnx-simplifier's constant folding without graph rewrites (Zhang et al.,
    https://github.com/daquexian/onnx-simplifier): every tensor computable from constants and the
    (static) input shapes, such as ``Shape``/``Gather``/``Concat`` chains, becomes an initializer
    under its own name; other nodes and names are kept. None when onnxsim cannot run the model
    (custom operators onnxruntime does not know)."""
    import contextlib
    import io

    try:
        import onnxsim

        from ..lazy import silenced_stderr

        with silenced_stderr(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            folded, _ = onnxsim.simplify(model, perform_optimization=False, check_n=0)
    except Exception:  # noqa: BLE001 - onnxsim fails on custom operators onnxruntime cannot run
        return None
    return folded


def _folded_dims(model: Any) -> dict[str, list[int | None] | None]:
    """Dims after onnx-simplifier's constant folding (:func:`constant_folded`): folded tensors
    become initializers under their own names; the rest from onnxruntime's symbolic inference of
    the folded model, else from onnxsim's own inference ({} when onnxsim cannot run)."""
    folded = constant_folded(model)
    if folded is None:
        return {}
    dims = _value_dims(folded)
    dims.update({k: v for k, v in _symbolic_dims(folded).items() if _static(v)})
    return dims


def _static_shapes(model: Any, where: str, given: InputShapes | None) -> dict[str, list[int | None] | None]:
    """Static dims of every tensor a layer carries (module docstring: onnx → onnxruntime
    symbolic → onnxsim folding); refuses what none of them resolves, naming its node."""
    import onnx

    shown = shapes_flag(given or {})
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=bool(given), data_prop=True)
    except Exception as exc:  # onnx raises InferenceError or RuntimeError from C++
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if given:
            raise shape_refused(where, given, first) from None
        raise ModelFormatError(f"{where}: ONNX shape inference failed ({type(exc).__name__}: {first})") from exc
    dims = _value_dims(inferred)
    needed = _needed(model)
    for donor in (_symbolic_dims, _folded_dims):
        if not _unknown(needed, dims):
            break
        extra = donor(model)
        dims.update({t: d for t, d in extra.items() if _static(d) and not _static(dims.get(t))})
    _check_reshapes(model, dims, where, given)
    missing = _unknown(needed, dims)
    if missing:
        node, t = missing[0]
        label = node.name or node.op_type
        if node.op_type in ("If", "Loop", "Scan"):
            raise UnsupportedOperatorError(
                f"{where}: control-flow node {label!r} ({node.op_type}) has an output {t!r} whose shape is not "
                f"static{' at ' + shown if shown else ''} even after constant folding; export the model "
                "without data-dependent control flow")
        raise ModelFormatError(
            f"{where}: the shape of tensor {t!r} (output of node {label!r}, {node.op_type}) cannot be inferred"
            f"{' at ' + shown if shown else ''} by onnx, onnxruntime's symbolic inference or onnxsim folding "
            f"({len(missing)} tensors); export the model with static shapes")
    return dims


def _check_reshapes(model: Any, dims: dict[str, list[int | None] | None], where: str,
                    given: InputShapes | None) -> None:
    """Refuse a Reshape/Flatten whose inferred output does not hold its input's elements: the
    input shapes contradict a shape the model computes or stores."""
    for node in model.graph.node:
        if node.op_type in ("Reshape", "Flatten") and node.input and node.output:
            a, b = dims.get(node.input[0]), dims.get(node.output[0])
            if _static(a) and _static(b) and math.prod(x or 0 for x in a or []) != math.prod(x or 0 for x in b or []):
                what = f"node {node.name or node.op_type!r} ({node.op_type}) cannot turn {a} into {b}"
                if given:
                    raise shape_refused(where, given, what)
                raise ModelFormatError(f"{where}: {what}; re-export the model")


# --------------------------------------------------------------------------- assembly
def _sorted(model: Any, where: str) -> Any:
    """``model`` itself when its nodes are in topological order, else a copy with the nodes
    reordered stably (each node deferred until its inputs exist)."""
    g = model.graph
    available = {t.name for t in g.input} | {t.name for t in g.initializer} | {""}
    nodes = list(g.node)
    ordered = _topological(nodes, available, where)
    if all(a is b for a, b in zip(ordered, nodes, strict=True)):
        return model
    fixed = type(model)()
    fixed.CopyFrom(model)
    del fixed.graph.node[:]
    fixed.graph.node.extend(ordered)
    return fixed


def _topological(nodes: list[Any], available: set[str], where: str) -> list[Any]:
    """``nodes`` in a valid execution order (unchanged when already sorted, stable otherwise)."""
    done = set(available)
    pending = list(nodes)
    ordered: list[Any] = []
    while pending:
        rest = []
        for node in pending:
            if all(t in done for t in _node_reads(node) if t):
                ordered.append(node)
                done.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            missing = sorted({t for n in rest for t in _node_reads(n) if t and t not in done})[:3]
            raise ModelFormatError(f"{where}: the ONNX graph has a cycle or reads tensors {missing} "
                                   "that no node produces; expected a valid (acyclic) ONNX graph")
        pending = rest
    return ordered


def _node_reads(node: Any) -> list[str]:
    """Explicit inputs plus outer-scope tensors read inside subgraphs (If/Loop/Scan)."""
    reads = [t for t in node.input if t]
    for attr in node.attribute:
        subs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
        for sub in subs:
            local = {t.name for t in sub.input} | {t.name for t in sub.initializer}
            for inner in _walk_nodes(sub):
                local.update(inner.output)
            for inner in _walk_nodes(sub):
                reads.extend(t for t in inner.input if t and t not in local)
    return list(dict.fromkeys(reads))


def _assemble(model: Any, dims: dict[str, list[int | None] | None], name: str, where: str, source: str,
              sha: str, block_of: Callable[[str], str] | None) -> LayerGraph:
    g = model.graph
    opset = onnx_opset(model)
    const_shape: dict[str, tuple[int, ...]] = {t.name: tuple(t.dims) for t in g.initializer}
    for node in g.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            const_shape[node.output[0]] = _constant_shape(node)
    graph_inputs = [vi.name for vi in g.input if vi.name not in const_shape]
    graph_outputs = [vi.name for vi in g.output]
    nodes = [n for n in g.node if not (n.op_type == "Constant" and n.domain in ("", "ai.onnx"))]

    consumed = {t for n in nodes for t in _node_reads(n)} | set(graph_outputs)

    def full(t: str) -> tuple[int, ...]:
        if t in const_shape:
            return const_shape[t]
        return _full(dims.get(t))

    def shape_of(t: str, node_label: str) -> tuple[int, ...]:
        d = dims.get(t)
        if d is None or not all(x is not None for x in d):  # _static_shapes refused these already
            raise ModelFormatError(f"{where}: the shape of tensor {t!r} (output of node {node_label!r}) cannot "
                                   "be inferred; export the model with static shapes")
        return _per_sample(d)

    counted: set[str] = set()
    used_names: set[str] = set()
    specs: list[LayerSpec] = []
    for i, node in enumerate(nodes):
        label = node.name or f"{node.op_type}_{i}"
        if label in used_names:
            label = f"{label}_{i}"
        used_names.add(label)
        reads = _node_reads(node)
        params = 0
        for t in reads:
            if t in const_shape and t not in counted:
                counted.add(t)
                params += math.prod(const_shape[t])
        outs = [t for t in node.output if t and (t in consumed or dims.get(t) is not None)]
        if not outs:
            outs = [t for t in node.output if t][:1]
        out_shapes = tuple(shape_of(t, label) if t in consumed or dims.get(t) is not None else ()
                           for t in outs)
        out_elems = int(math.prod(out_shapes[0])) if out_shapes else 0
        specs.append(LayerSpec(
            name=label, op=_family(node, full), op_type=node.op_type,
            inputs=tuple(t for t in reads if t not in const_shape), outputs=tuple(outs),
            output_shapes=out_shapes, macs=int(node_macs(node, full, out_elems)), params=int(params),
            block=block_of(label) if block_of else label, axis=_softmax_axis(node, dims, opset),
            interpolation=_interpolation(node, opset),
        ))
    inputs = [(t, shape_of(t, "graph input")) for t in graph_inputs]
    return build_graph(name, specs, inputs, graph_outputs, source=source or name,
                       source_sha256=sha, fmt="onnx")


def onnx_opset(model: Any) -> int:
    """The default-domain opset an ONNX ``model`` imports (0 when it imports none)."""
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def _interpolation(node: Any, opset: int) -> str:
    """A ``Resize``'s or ``Upsample``'s interpolation as ``mode/coordinate_transformation_mode/
    nearest_mode`` with ONNX's defaults (an ``Upsample``, or a ``Resize`` before opset 11, maps its
    output's pixels asymmetrically and rounds down), else "": onnxruntime runs some in its blocked
    NCHWc layout (:func:`optimizer.cost.fusion._reads_nchwc`)."""
    if node.op_type not in ("Resize", "Upsample"):
        return ""

    def text(key: str, default: str) -> str:
        value = node_attr(node, key, default)
        return value.decode() if isinstance(value, bytes) else str(value)

    mode = text("mode", "nearest")
    if node.op_type == "Upsample" or opset < 11:
        return f"{mode}/asymmetric/floor"
    return f"{mode}/{text('coordinate_transformation_mode', 'half_pixel')}/{text('nearest_mode', 'round_prefer_floor')}"


def _softmax_axis(node: Any, dims: dict[str, list[int | None] | None], opset: int) -> int:
    """The per-sample axis a ``Softmax`` (opset 13 on: one axis) normalises when it is not the last,
    else -1 (and for every other node). onnxruntime transposes such an axis to the last and back
    inside the node (bert_small's attention softmax over axis 2 of ``[1, 8, 128, 128]``: 275 us in
    the network, 62 us over the last axis)."""
    if node.op_type != "Softmax" or opset < 13 or not node.input or not dims.get(node.input[0]):
        return -1
    full = dims[node.input[0]] or []
    axis = int(node_attr(node, "axis", -1)) % max(len(full), 1)
    dropped = len(full) - len(_per_sample(full))
    return -1 if axis == len(full) - 1 or axis < dropped else axis - dropped


def _constant_shape(node: Any) -> tuple[int, ...]:
    """Shape of a ``Constant`` node's value (``value``, ``sparse_value`` or a ``value_*`` form)."""
    if not node.attribute:
        return ()
    attr = node.attribute[0]
    if attr.name == "value":
        return tuple(attr.t.dims)
    if attr.name == "sparse_value":
        return tuple(attr.sparse_tensor.dims)
    if attr.name in ("value_floats", "value_ints", "value_strings"):
        return (len(attr.floats) or len(attr.ints) or len(attr.strings),)
    return ()


def _family(node: Any, full: Callable[[str], tuple[int, ...]]) -> str:
    op = node.op_type
    if node.domain not in STANDARD_DOMAINS:
        return "custom"
    family = OP_FAMILY.get(op, "other")
    if op in ("Conv", "QLinearConv", "ConvInteger"):
        group = int(node_attr(node, "group", 1))
        w = full(node.input[3] if op == "QLinearConv" else node.input[1])
        cin_per_group = w[1] if len(w) > 1 else 0
        if group > 1 and cin_per_group == 1:
            return "dwconv"
    return family
