"""Which operators of a ``.tflite`` model LiteRT's XNNPACK delegate runs on this host, in how many
partitions, and how long each partition and each operator left outside takes.

How it is read, not guessed: LiteRT applies its default delegate (XNNPACK) when an interpreter is
built with the ``AUTO`` op resolver and does not with ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``
(``ai_edge_litert.interpreter.OpResolverType``). Delegating appends one node per partition to the
subgraph's node list (``NodeName`` = ``DELEGATE``), after the model's own nodes, whose indices are
the flatbuffer's operator indices; a partition node's inputs and outputs are the tensors the
partition exchanges with the rest of the graph. The operators a partition replaced are found by
walking back from its outputs to its inputs through the producing operators (TFLite delegate
partitioning, ``tensorflow/lite/delegates/utils.cc``: a partition is a set of supported nodes
closed between its boundary tensors). Every other operator runs on LiteRT's builtin CPU kernels.

Times are measured, not modelled: each partition and each operator outside one is cut out of the
model as its own sub-model (:func:`optimizer.graph.tflite_flatbuffer.sub_model`, quantization
parameters unchanged, so XNNPACK makes the same decision on it) and timed with the same
interpreter settings on inputs drawn in each tensor's range. The sum of the segments therefore
includes one interpreter invoke per segment that the whole model does not pay.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph.tflite_flatbuffer import read_model, sub_model, write_model

DELEGATE_NODE = "DELEGATE"
HOST_DELEGATE = "XNNPACK"
#: partitions above which the report says the model is split (each boundary is a hand-off
#: between the delegate and LiteRT's CPU kernels)
FEW_PARTITIONS = 3


@dataclass(frozen=True)
class OpPlacement:
    """One operator (flatbuffer index of the main subgraph) and the delegate partition that runs
    it (numbered in execution order from 0), or ``None`` when LiteRT's builtin kernel runs it."""

    index: int
    op: str
    partition: int | None
    output: str = ""


@dataclass(frozen=True)
class Delegation:
    """Placement of every operator of a model's main subgraph under one delegate."""

    delegate: str
    ops: tuple[OpPlacement, ...]

    @property
    def partitions(self) -> int:
        return len({o.partition for o in self.ops if o.partition is not None})

    @property
    def outside(self) -> list[OpPlacement]:
        """Operators the delegate left to LiteRT's builtin kernels."""
        return [o for o in self.ops if o.partition is None]

    def outside_counts(self) -> dict[str, int]:
        return dict(Counter(o.op for o in self.outside))

    def partition_ops(self) -> dict[int, list[int]]:
        """Operator indices of each partition."""
        out: dict[int, list[int]] = {}
        for o in self.ops:
            if o.partition is not None:
                out.setdefault(o.partition, []).append(o.index)
        return out


def _interpreter(data: bytes, threads: int, delegates: bool, allocate: bool = True) -> Any:
    from .. import lazy

    cls = lazy.litert_interpreter()
    from ai_edge_litert.interpreter import OpResolverType

    resolver = OpResolverType.AUTO if delegates else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    with lazy.silenced_stderr():
        interp = cls(model_content=data, num_threads=threads, experimental_op_resolver_type=resolver)
        if allocate:
            interp.allocate_tensors()
    return interp


def host_delegation(data: bytes, threads: int = 1) -> Delegation:
    """Where LiteRT runs each operator of ``data`` on this host: XNNPACK partitions or builtin
    kernels (see the module docstring for how it is read)."""
    with_delegate = _interpreter(data, threads, True)
    # the model's own node count; not allocated: a custom operator only XNNPACK implements
    # (MediaPipe's Convolution2DTransposeBias) has no builtin kernel to prepare
    plain = _interpreter(data, threads, False, allocate=False)
    w = with_delegate._interpreter
    n_ops, n_all = plain._interpreter.NumNodes(), w.NumNodes()
    producer = {int(t): k for k in range(n_ops) for t in w.NodeOutputs(k) if t >= 0}
    owner: dict[int, int] = {}
    for node in range(n_ops, n_all):
        if w.NodeName(node) != DELEGATE_NODE:
            continue
        boundary = {int(t) for t in w.NodeInputs(node)}
        stack = [int(t) for t in w.NodeOutputs(node)]
        while stack:
            t = stack.pop()
            k = producer.get(t)
            if t in boundary or k is None or k in owner:
                continue
            owner[k] = node
            stack.extend(int(x) for x in w.NodeInputs(k) if x >= 0)
    first = sorted({n: min(k for k, m in owner.items() if m == n) for n in set(owner.values())}.items(),
                   key=lambda kv: kv[1])
    number = {node: i for i, (node, _) in enumerate(first)}
    names = [w.NodeName(k) for k in range(n_ops)]
    outputs = [with_delegate._get_tensor_details(int(w.NodeOutputs(k)[0]), 0)["name"]
               if len(w.NodeOutputs(k)) else "" for k in range(n_ops)]
    return Delegation(HOST_DELEGATE, tuple(OpPlacement(k, names[k], number.get(owner[k]) if k in owner else None,
                                                       outputs[k]) for k in range(n_ops)))


@dataclass(frozen=True)
class Segment:
    """A delegate partition or one operator outside any, and its measured median time."""

    label: str  # "XNNPACK partition 3" or the operator name
    ops: tuple[int, ...]
    op_counts: dict[str, int]
    delegated: bool
    median_ms: float


@dataclass(frozen=True)
class DelegationTiming:
    """Median time of every segment of a model (partitions and operators outside them) and of the
    whole model, with the same threads."""

    delegation: Delegation
    segments: tuple[Segment, ...]
    whole_ms: float
    threads: int
    runs: int
    notes: list[str] = field(default_factory=list)

    @property
    def outside_ms(self) -> float:
        return sum(s.median_ms for s in self.segments if not s.delegated)

    @property
    def delegated_ms(self) -> float:
        return sum(s.median_ms for s in self.segments if s.delegated)

    def outside_ms_by_op(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.segments:
            if not s.delegated:
                out[s.label] = out.get(s.label, 0.0) + s.median_ms
        return out


def _segment_io(model: Any, ops: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(operators with their constant-only feeders, input tensors, output tensors) of a segment."""
    sg = model.subgraphs[0]
    producer = {int(t): k for k, op in enumerate(sg.operators) for t in _seq(op.outputs)}

    def is_const(t: int) -> bool:
        buf = sg.tensors[t].buffer
        data = model.buffers[buf].data if buf < len(model.buffers) else None
        return data is not None and len(data) > 0

    def const_only(k: int) -> bool:
        op = sg.operators[k]
        return all(t < 0 or is_const(int(t)) for t in _seq(op.inputs))

    chosen = set(ops)
    stack = list(ops)
    while stack:
        for t in _seq(sg.operators[stack.pop()].inputs):
            k = producer.get(int(t))
            if k is not None and k not in chosen and const_only(k):
                chosen.add(k)
                stack.append(k)
    made = {int(t) for k in chosen for t in sg.operators[k].outputs}
    inputs = list(dict.fromkeys(int(t) for k in sorted(chosen) for t in sg.operators[k].inputs
                                if t >= 0 and int(t) not in made and not is_const(int(t))))
    read_outside = {int(t) for k, op in enumerate(sg.operators) if k not in chosen
                    for t in _seq(op.inputs)}
    graph_out = {int(t) for t in sg.outputs}
    outputs = [t for t in dict.fromkeys(int(t) for k in sorted(chosen) for t in sg.operators[k].outputs)
               if t in read_outside or t in graph_out]
    return sorted(chosen), inputs, outputs


def _seq(values: Any) -> list[int]:
    """A flatbuffer index vector (numpy array, list or None) as a list of ints."""
    return [] if values is None else [int(v) for v in values]


def random_feed(interp: Any, seed: int = 0) -> None:
    """Set every input of ``interp`` to values drawn in its type's range (timing only; a dynamic
    dimension is taken as 1)."""
    rng = np.random.default_rng(seed)
    for d in interp.get_input_details():
        dtype = np.dtype(d["dtype"])
        shape = [int(s) if s > 0 else 1 for s in d["shape"]]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            x = rng.integers(max(int(info.min), -128), min(int(info.max), 127) + 1, size=shape).astype(dtype)
        elif dtype == np.bool_:
            x = rng.random(shape) > 0.5
        else:
            x = rng.standard_normal(shape).astype(dtype)
        interp.set_tensor(d["index"], x)


def invoke_times(interp: Any, runs: int, warmup: int) -> np.ndarray:
    """Seconds of each of ``runs`` invokes after ``warmup`` untimed ones (inputs already set)."""
    for _ in range(warmup):
        interp.invoke()
    times = np.empty(runs)
    for i in range(runs):
        t0 = time.perf_counter()
        interp.invoke()
        times[i] = time.perf_counter() - t0
    return times


def time_invokes(interp: Any, runs: int, warmup: int) -> float:
    """Median seconds of ``runs`` invokes after ``warmup`` untimed ones (inputs already set)."""
    return float(np.median(invoke_times(interp, runs, warmup)))


def time_segments(data: bytes, threads: int = 2, runs: int = 20, warmup: int = 3,
                  delegation: Delegation | None = None) -> DelegationTiming:
    """Measure every partition and every operator outside one of ``data`` (module docstring)."""
    delegation = delegation or host_delegation(data, threads)
    whole = _interpreter(data, threads, True)
    random_feed(whole)
    whole_s = time_invokes(whole, runs, warmup)
    model = read_model(data, "model")
    notes: list[str] = []
    if len(model.subgraphs) > 1:
        notes.append("the model has control-flow subgraphs: segments not timed")
        return DelegationTiming(delegation, (), whole_s * 1e3, threads, runs, notes)
    groups: list[tuple[str, list[int], bool]] = []
    for part, ops in sorted(delegation.partition_ops().items(), key=lambda kv: min(kv[1])):
        groups.append((f"{delegation.delegate} partition {part}", ops, True))
    for o in delegation.outside:
        groups.append((o.op, [o.index], False))
    groups.sort(key=lambda g: min(g[1]))
    names = {o.index: o.op for o in delegation.ops}
    segments = []
    for label, ops, delegated in groups:
        chosen, ins, outs = _segment_io(model, ops)
        if not outs:
            continue
        part = write_model(sub_model(model, chosen, ins, outs, label))
        try:
            interp = _interpreter(part, threads, True)
            random_feed(interp)
            ms = time_invokes(interp, runs, warmup) * 1e3
        except (RuntimeError, ValueError) as exc:  # e.g. an operator refusing random inputs
            notes.append(f"{label} (ops {ops[0]}..{ops[-1]}) not timed: {str(exc).splitlines()[0][:120]}")
            continue
        segments.append(Segment(label, tuple(ops), dict(Counter(names[k] for k in ops)), delegated, ms))
    return DelegationTiming(delegation, tuple(segments), whole_s * 1e3, threads, runs, notes)
