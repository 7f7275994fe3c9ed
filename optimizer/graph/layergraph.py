"""The immutable LayerGraph: a network's layers in execution order with their DAG edges.

Every importer (Keras, ONNX, TFLite, zoo) produces one through :func:`build_graph`; every later
stage (cost, search, plan export) reads it. Quantities:

* ``macs``: multiply-accumulates of conv, depthwise conv, dense and matmul operators (the
  convention of the published per-network figures, e.g. torchvision's "GFLOPS" column);
  elementwise operators count 0.
* ``params``: trainable and non-trainable weights (batch-norm statistics included).
* bytes per dtype: ``elements * itemsize`` with int8 = 1, fp16 = 2, fp32 = 4 bytes.

Cuts and memory follow the DAG, not the layer list: :meth:`LayerGraph.cut_bytes` counts every
tensor produced before a boundary and consumed at or after it (skip connections included).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from ..errors import ConfigError

DType = Literal["fp32", "fp16", "int8"]
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "fp16": 2, "int8": 1}
OP_FAMILIES: tuple[str, ...] = (
    "conv", "dwconv", "dense", "pool", "add", "concat", "act", "norm", "reshape", "resize", "other",
    "custom",  # custom/unknown operators (TFLite custom ops, non-standard ONNX ops): CPU only
)
Granularity = Literal["op", "kernel", "block"]
GRANULARITIES: tuple[str, ...] = ("op", "kernel", "block")
#: op families a runtime folds into the kernel that produces their input: TFLite folds batch-norms
#: into the convolution and fuses activations into conv/add kernels, reshapes and dropout move no
#: data (docs/METHODS.md section 8); the cost models charge them nothing of their own
FUSED_FAMILIES: tuple[str, ...] = ("act", "norm", "reshape", "other")
INPUT_PRODUCER = -1  # producer index of graph inputs: they exist before boundary 0


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``fp32``, ``fp16`` or ``int8``)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ConfigError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class Tensor:
    """An activation tensor: its shape excludes the batch dimension."""

    name: str
    shape: tuple[int, ...]
    producer: int  # layer index, or INPUT_PRODUCER for a graph input
    consumers: tuple[int, ...] = ()  # layer indices; the graph's output sink is len(layers)

    @property
    def elements(self) -> int:
        return int(math.prod(self.shape)) if self.shape else 1

    def nbytes(self, dtype: str) -> int:
        return self.elements * dtype_bytes(dtype)


@dataclass(frozen=True)
class Layer:
    """One unit of execution (an operator in ``op`` view, a merged block in ``block`` view)."""

    index: int
    name: str
    op: str  # one of OP_FAMILIES
    op_type: str  # the source framework's operator type, e.g. "Conv2D", "DEPTHWISE_CONV_2D"
    block: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    macs: int
    params: int
    members: tuple[str, ...] = ()  # op names merged into this unit (kernel and block views)
    heads: int = 0  # attention heads of a multi-head attention layer (its softmax rows), else 0
    axis: int = -1  # the per-sample axis a softmax normalises when not the last (ONNX ``axis``), else -1
    interpolation: str = ""  # a resize's ``mode/coordinate_transformation_mode/nearest_mode`` (ONNX), else ""

    @property
    def output_elements(self) -> int:
        return sum(int(math.prod(s)) if s else 1 for s in self.output_shapes)

    def output_bytes(self, dtype: str) -> int:
        return self.output_elements * dtype_bytes(dtype)

    def weight_bytes(self, dtype: str) -> int:
        return self.params * dtype_bytes(dtype)

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index, "name": self.name, "op": self.op, "op_type": self.op_type,
            "block": self.block, "inputs": list(self.inputs), "outputs": list(self.outputs),
            "input_shapes": [list(s) for s in self.input_shapes],
            "output_shapes": [list(s) for s in self.output_shapes],
            "macs": self.macs, "params": self.params,
        }


@dataclass(frozen=True)
class LayerSpec:
    """What an importer knows about one operator, before graph assembly."""

    name: str
    op: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    macs: int = 0
    params: int = 0
    block: str = ""
    heads: int = 0
    axis: int = -1
    interpolation: str = ""


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class LayerGraph:
    """Immutable layers in execution order plus the tensors that connect them.

    Build one with :func:`build_graph`; do not construct directly.
    """

    name: str
    layers: tuple[Layer, ...]
    tensors: dict[str, Tensor] = field(repr=False)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    granularity: str = "op"
    source: str = ""  # the file or zoo name it was imported from
    source_sha256: str = ""
    fmt: str = ""  # keras | onnx | tflite | zoo
    weight_dtype: str | None = None  # dtype of stored weights when known (e.g. int8 TFLite)
    #: full input shapes (batch included, the file's names) given at import (``--input-shape``);
    #: None when the file's own shapes were used. Plans and manifests record them.
    served_input_shapes: dict[str, tuple[int, ...]] | None = field(default=None, compare=False)
    #: kernel and block views: the op-view graph they were merged from (cost models sum members' costs)
    op_view: LayerGraph | None = field(default=None, repr=False, compare=False)

    # ----------------------------------------------------------------- totals
    def __len__(self) -> int:
        return len(self.layers)

    @property
    def total_macs(self) -> int:
        return int(sum(layer.macs for layer in self.layers))

    @property
    def total_params(self) -> int:
        return int(sum(layer.params for layer in self.layers))

    def count(self, *ops: str) -> int:
        """Number of layers whose op family is one of ``ops``."""
        return sum(1 for layer in self.layers if layer.op in ops)

    @property
    def input_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self.tensors[t].shape for t in self.inputs)

    @property
    def output_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self.tensors[t].shape for t in self.outputs)

    # ----------------------------------------------------------------- arrays
    @cached_property
    def macs_array(self) -> np.ndarray:
        """MACs per layer, shape [L] (read-only: graphs are shared)."""
        return _read_only(np.array([layer.macs for layer in self.layers], dtype=np.float64))

    @cached_property
    def params_array(self) -> np.ndarray:
        """Parameters per layer, shape [L] (read-only: graphs are shared)."""
        return _read_only(np.array([layer.params for layer in self.layers], dtype=np.float64))

    @cached_property
    def _tensor_spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(producer, last consumer, elements) of every tensor that is consumed at all."""
        prod, last, elems = [], [], []
        for t in self.tensors.values():
            if not t.consumers:
                continue
            prod.append(t.producer)
            last.append(max(t.consumers))
            elems.append(t.elements)
        return (np.array(prod, dtype=np.int64), np.array(last, dtype=np.int64),
                np.array(elems, dtype=np.float64))

    @cached_property
    def _cut_elements(self) -> np.ndarray:
        n = len(self.layers)
        prod, last, elems = self._tensor_spans
        diff = np.zeros(n + 2, dtype=np.float64)
        # a tensor crosses boundary i (between layer i-1 and layer i) when producer < i <= last
        np.add.at(diff, prod + 1, elems)
        np.add.at(diff, last + 1, -elems)
        return np.cumsum(diff)[: n + 1]

    def cut_bytes_array(self, dtype: str = "fp32") -> np.ndarray:
        """Bytes crossing every boundary 0..L, shape [L+1] (0: the inputs; L: the outputs)."""
        return self._cut_elements * dtype_bytes(dtype)

    def cut_bytes(self, i: int, dtype: str = "fp32") -> int:
        """Bytes of every tensor produced before boundary ``i`` and consumed at or after it."""
        self._check_boundary(i)
        return int(self._cut_elements[i]) * dtype_bytes(dtype)

    def cut_tensors(self, i: int) -> list[Tensor]:
        """The tensors crossing boundary ``i`` (graph inputs at 0, graph outputs at L)."""
        self._check_boundary(i)
        return [t for t in self.tensors.values()
                if t.consumers and t.producer < i <= max(t.consumers)]

    @cached_property
    def _live_elements(self) -> np.ndarray:
        """Elements alive while each layer runs: its inputs, its outputs, and every tensor
        produced earlier that is still needed later (skip connections)."""
        n = len(self.layers)
        diff = np.zeros(n + 1, dtype=np.float64)
        for t in self.tensors.values():
            start = max(t.producer, 0)
            end = min(max(t.consumers), n - 1) if t.consumers else start
            end = max(end, start)
            diff[start] += t.elements
            diff[end + 1] -= t.elements
        return np.cumsum(diff)[:n]

    def live_bytes_array(self, dtype: str = "fp32") -> np.ndarray:
        """Activation bytes alive while each layer runs, shape [L]."""
        return self._live_elements * dtype_bytes(dtype)

    def memory(self, a: int, b: int, dtype: str = "fp32") -> int:
        """Weights of layers a..b-1 plus their peak live activation bytes."""
        if not 0 <= a < b <= len(self.layers):
            raise ConfigError(f"layer range [{a}, {b}) is outside 0..{len(self.layers)} or empty")
        weights = float(self.params_array[a:b].sum()) * dtype_bytes(dtype)
        peak = float(self._live_elements[a:b].max()) * dtype_bytes(dtype)
        return int(weights + peak)

    def _check_boundary(self, i: int) -> None:
        if not 0 <= i <= len(self.layers):
            raise ConfigError(f"boundary {i} is outside 0..{len(self.layers)} for {self.name!r}")

    # ----------------------------------------------------------------- views
    def with_granularity(self, granularity: str) -> LayerGraph:
        """This graph in ``op`` view (unchanged), ``kernel`` view (each operator with the ops
        fused into it) or ``block`` view (consecutive ops sharing a block label merged)."""
        if granularity == self.granularity:
            return self
        if granularity == "kernel" and self.granularity == "op":
            return coarsen_to_kernels(self)
        if granularity == "block" and self.granularity == "op":
            return coarsen_to_blocks(self)
        raise ConfigError(
            f"cannot turn a {self.granularity!r} graph into {granularity!r}; expected op, kernel or block")

    @cached_property
    def kernel_anchors(self) -> np.ndarray:
        """[L] index of the layer whose kernel each layer runs in (:func:`fused_anchors`); in op
        view the members of one kernel are consecutive (:func:`build_graph` orders them so)."""
        return np.array(fused_anchors(self.layers, self.outputs), dtype=np.int64)

    def to_dict(self, dtype: str = "fp32") -> dict[str, object]:
        cut = self.cut_bytes_array(dtype)
        rows = []
        for layer in self.layers:
            row = layer.to_dict()
            row["output_bytes"] = layer.output_bytes(dtype)
            row["weight_bytes"] = layer.weight_bytes(dtype)
            row["cut_bytes_after"] = int(cut[layer.index + 1])
            rows.append(row)
        return {
            "model": self.name, "granularity": self.granularity, "dtype": dtype,
            "source_sha256": self.source_sha256,
            "inputs": [{"name": t, "shape": list(self.tensors[t].shape)} for t in self.inputs],
            "outputs": [{"name": t, "shape": list(self.tensors[t].shape)} for t in self.outputs],
            "layers": rows, "total_macs": self.total_macs, "total_params": self.total_params,
        }


def build_graph(
    name: str,
    specs: Sequence[LayerSpec],
    inputs: Iterable[tuple[str, tuple[int, ...]]],
    outputs: Iterable[str],
    *,
    source: str = "",
    source_sha256: str = "",
    fmt: str = "",
    weight_dtype: str | None = None,
    kernel_order: bool = True,
) -> LayerGraph:
    """Assemble a LayerGraph from operator specs listed in a valid execution order.

    Tensors consumed but never produced must be graph inputs; an output that no layer
    produces is an error. Consumers of the graph outputs include the sink index ``L``.
    With ``kernel_order`` (operator specs), every op that fuses into another's kernel
    (:func:`fused_anchors`) is moved up to follow it, so a kernel's members are consecutive:
    parallel towers that a framework lists interleaved (SSD box and class heads) would otherwise
    let a stage or split boundary fall between a convolution and its batch-norm.
    """
    from ..errors import ModelFormatError

    inputs = list(inputs)
    outputs = list(outputs)
    n = len(specs)
    if n == 0:
        raise ModelFormatError(f"{name}: the model has no operators to import")
    if kernel_order:
        specs = _kernel_contiguous(specs, outputs)
    producer: dict[str, int] = {t: INPUT_PRODUCER for t, _ in inputs}
    shapes: dict[str, tuple[int, ...]] = {t: tuple(int(d) for d in s) for t, s in inputs}
    consumers: dict[str, list[int]] = {t: [] for t in producer}
    layers: list[Layer] = []
    for i, spec in enumerate(specs):
        if spec.op not in OP_FAMILIES:
            raise ModelFormatError(f"{name}: layer {spec.name!r} has unknown op family {spec.op!r}")
        in_shapes = []
        for t in spec.inputs:
            if t not in producer:
                raise ModelFormatError(
                    f"{name}: layer {spec.name!r} reads tensor {t!r} before any layer produces it")
            consumers[t].append(i)
            in_shapes.append(shapes[t])
        for t, s in zip(spec.outputs, spec.output_shapes, strict=True):
            producer[t] = i
            shapes[t] = tuple(int(d) for d in s)
            consumers.setdefault(t, [])
        layers.append(Layer(
            index=i, name=spec.name, op=spec.op, op_type=spec.op_type,
            block=spec.block or spec.name, inputs=tuple(spec.inputs), outputs=tuple(spec.outputs),
            input_shapes=tuple(in_shapes), output_shapes=tuple(tuple(int(d) for d in s) for s in spec.output_shapes),
            macs=int(spec.macs), params=int(spec.params), members=(spec.name,), heads=spec.heads, axis=spec.axis,
            interpolation=spec.interpolation,
        ))
    for t in outputs:
        if t not in producer:
            raise ModelFormatError(f"{name}: graph output {t!r} is not produced by any layer")
        consumers[t].append(n)
    tensors = {t: Tensor(t, shapes[t], producer[t], tuple(sorted(set(consumers[t]))))
               for t in producer}
    return LayerGraph(
        name=name, layers=tuple(layers), tensors=tensors,
        inputs=tuple(t for t, _ in inputs), outputs=tuple(outputs), granularity="op",
        source=source, source_sha256=source_sha256, fmt=fmt, weight_dtype=weight_dtype,
    )


_OP_PRIORITY = ("conv", "dwconv", "dense", "pool", "resize", "concat", "add", "norm", "act",
                "reshape", "other", "custom")


def fused_anchors(ops: Sequence[LayerSpec | Layer], graph_outputs: Iterable[str]) -> list[int]:
    """Index of the operator whose kernel each operator runs in (its own index when it is a
    kernel of its own).

    An op of a :data:`FUSED_FAMILIES` family with a single input runs in the kernel of the op
    that produces that input when that op has one output which nothing else reads and which is
    no graph output: the runtime then never materialises the tensor between them (TFLite's
    batch-norm folding and activation fusion, docs/METHODS.md section 8). Chains follow
    (conv -> batch-norm -> ReLU6 is one kernel).
    """
    uses = Counter(t for op in ops for t in op.inputs)
    uses.update(graph_outputs)
    producer: dict[str, int] = {}
    anchor: list[int] = []
    for i, op in enumerate(ops):
        a = i
        if op.op in FUSED_FAMILIES and len(op.inputs) == 1:
            p = producer.get(op.inputs[0])
            if p is not None and uses[op.inputs[0]] == 1 and len(ops[p].outputs) == 1:
                a = anchor[p]
        anchor.append(a)
        producer.update((t, i) for t in op.outputs)
    return anchor


def _kernel_contiguous(specs: Sequence[LayerSpec], outputs: Iterable[str]) -> list[LayerSpec]:
    """``specs`` with every fused op moved up to follow the op whose kernel it runs in. Still a
    valid execution order: a fused op reads only the single-use output of the kernel's chain."""
    anchor = fused_anchors(specs, outputs)
    followers: dict[int, list[int]] = {}
    for i, a in enumerate(anchor):
        if a != i:
            followers.setdefault(a, []).append(i)
    order = [j for i, a in enumerate(anchor) if a == i for j in (i, *followers.get(i, ()))]
    return [specs[i] for i in order]


def coarsen_to_kernels(graph: LayerGraph) -> LayerGraph:
    """One unit per runtime kernel: each operator with the ops fused into it
    (:func:`fused_anchors`), so boundaries fall only where a runtime can end a partition."""
    anchors = graph.kernel_anchors
    return _coarsen(graph, [int(a) for a in anchors], [graph.layers[a].name for a in anchors], "kernel")


def coarsen_to_blocks(graph: LayerGraph) -> LayerGraph:
    """Merge runs of consecutive layers sharing a block label into one unit each (the source
    framework's modules, e.g. torchvision's ``features.N``: the granularity of published
    per-block figures, which may end a block between an operator and an op fused into it)."""
    labels = [layer.block for layer in graph.layers]
    return _coarsen(graph, labels, labels, "block")


def _coarsen(graph: LayerGraph, keys: Sequence[object], names: Sequence[str], granularity: str) -> LayerGraph:
    """Merge runs of consecutive op-view layers with equal ``keys`` into one unit each, named
    after the run's first ``names`` entry.

    A unit's MACs and params are the sums of its members; its op family is the heaviest
    member's (by MACs, then by a fixed priority); its inputs are the tensors it reads from
    outside, its outputs the tensors it produces that are read outside (or are graph outputs).
    Boundaries in this view therefore fall only between units.
    """
    runs: list[list[Layer]] = []
    run_names: list[str] = []
    for layer, key, name in zip(graph.layers, keys, names, strict=True):
        if runs and keys[runs[-1][-1].index] == key:
            runs[-1].append(layer)
        else:
            runs.append([layer])
            run_names.append(name)
    specs: list[LayerSpec] = []
    for run, name in zip(runs, run_names, strict=True):
        produced = {t for layer in run for t in layer.outputs}
        members = {layer.index for layer in run}
        reads: list[str] = []
        for layer in run:
            for t in layer.inputs:
                if t not in produced and t not in reads:
                    reads.append(t)
        writes = [t for layer in run for t in layer.outputs
                  if any(c not in members for c in graph.tensors[t].consumers)]
        if not writes:  # a dead-end unit still produces its last tensor
            writes = [run[-1].outputs[-1]]
        custom = [la for la in run if la.op == "custom"]  # a unit holding a custom op is CPU-only
        head = custom[0] if custom else max(run, key=lambda la: (la.macs, -_OP_PRIORITY.index(la.op)))
        specs.append(LayerSpec(
            name=name, op=head.op, op_type=head.op_type, inputs=tuple(reads),
            outputs=tuple(writes), output_shapes=tuple(graph.tensors[t].shape for t in writes),
            macs=sum(la.macs for la in run), params=sum(la.params for la in run), block=run[0].block,
        ))
    coarse = build_graph(
        graph.name, specs, [(t, graph.tensors[t].shape) for t in graph.inputs], graph.outputs,
        source=graph.source, source_sha256=graph.source_sha256, fmt=graph.fmt,
        weight_dtype=graph.weight_dtype, kernel_order=False,
    )
    layers = tuple(
        Layer(**{**la.__dict__, "members": tuple(m.name for m in run)})
        for la, run in zip(coarse.layers, runs, strict=True)
    )
    return LayerGraph(
        name=coarse.name, layers=layers, tensors=coarse.tensors, inputs=coarse.inputs,
        outputs=coarse.outputs, granularity=granularity, source=coarse.source,
        source_sha256=coarse.source_sha256, fmt=coarse.fmt, weight_dtype=coarse.weight_dtype,
        served_input_shapes=graph.served_input_shapes, op_view=graph,
    )
