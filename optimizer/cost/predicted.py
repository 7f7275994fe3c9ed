"""The ``predicted`` cost backend: every layer priced by per-device kernel predictors.

For each processor whose device file names a predictor for the runtime and dtype at its thread
count (:class:`optimizer.hardware.schema.Predictor`), the probe table is read and one regressor
per kernel family fitted from it (:mod:`optimizer.cost.predictor`, cached by the table's hash);
every op-view layer then costs the predicted time of the kernels the runtime runs for it after
its fusion rules (:mod:`optimizer.cost.fusion`: folded layers cost nothing), times the
predictor's per-family ``corrections`` (from the user's profiles), plus what the runtime spends
per node beyond a kernel's work (the table's ``node_overhead_s``, per kernel), and the runtime's
per-invocation overhead is charged once per call into the processor (``invoke_overhead_s``), as
nn-Meter sums kernel predictions into a model's latency (Zhang et al., MobiSys 2021).

A kind the probes do not sample is priced as the probed kind of its family that does the same
work per element (:data:`STAND_IN_KINDS`: a division as a product, a square root as a negation;
in an onnxruntime INT8 table, :data:`QDQ_STAND_IN_KINDS`, as float passes between conversions).
A depthwise 1 x 1 convolution (a batch norm a converter left unfolded: the mediapipe models'), which
the probes do not sample, is priced under TFLite as the per-channel product of its tensor
(:func:`depthwise_1x1_stand_in`; XNNPACK times the two within 0.82-1.27x at FP32 and INT8, where
the depthwise forest, fitted on 3 x 3 to 7 x 7 windows, priced it at half); onnxruntime runs it as a
grouped convolution 2.5-7x slower than that product, and prices it analytically, said per layer.
A layer whose kernel family or kind has no probes in the table is priced by the analytic
roofline (:mod:`optimizer.cost.analytic`), and the cost table's metadata says so per layer
(``meta["predicted"][processor]["analytic_layers"]``); so is every processor without a
predictor. CPU fallback, energy (active power x time) and the block and kernel views are as in
the analytic backend. The device's default backend is this one when any processor names a
predictor (:func:`optimizer.cost.build_cost_table`).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputFileError
from ..graph.kernel_config import BCAST_CHANNEL, KernelConfig
from ..graph.layergraph import LayerGraph
from ..hardware.schema import Predictor
from .analytic import analytic_costs, block_sums, with_fallback
from .backends import BackendCosts, BackendInputs
from .fusion import runtime_family, runtime_kernels, runtime_nodes
from .predictor import KernelPredictors, predictors_for
from .probe_table import ProbeTable, check_table_for, read_probe_table


@lru_cache(maxsize=32)
def _read_cached(path: str, mtime_ns: int, size: int) -> ProbeTable:
    return read_probe_table(path)


def load_predictor_table(entry: Predictor, where: str = "") -> ProbeTable:
    """The probe table a device file's predictor entry names, checked against the entry's
    runtime, dtype and threads (cached while the file is unchanged).

    Raises
    ------
    InputFileError
        The table is missing (naming the device file's entry).
    ConfigError
        The table was measured under another runtime, dtype or thread count.
    """
    path = entry.table_path
    if not path.is_file():
        raise InputFileError(f"{path}: no such probe table (predictor {entry.runtime}/{entry.dtype}/{entry.threads} "
                             f"threads{' of ' + where if where else ''}); measure it with `dnnplan calibrate "
                             "--probes N` or fix `table:`")
    st = os.stat(path)
    table = _read_cached(str(Path(path).resolve()), st.st_mtime_ns, st.st_size)
    check_table_for(table, runtime=entry.runtime, dtype=entry.dtype, threads=entry.threads, where=where)
    return table


#: kinds probes do not sample, priced as the probed kind of their family that does the same work
#: per element (a division as a product, a square root as a one-operand pass)
STAND_IN_KINDS: dict[str, str] = {
    "sqrt": "unary", "rsqrt": "unary", "div": "mul", "minimum": "maximum",
    "squared_difference": "sub", "exp": "sigmoid", "elu": "sigmoid", "gelu": "tanh", "hard_sigmoid": "hard_swish",
    # a fused activation's pass, where the table did not time the activation-pass pair: a ReLU6 kernel
    "activation_pass": "relu6",
    # a copy into a larger output (no probe times one): the concatenation writing that output
    "tile": "concat",
    # an NCHWc reorder (no probe times one alone): a transpose of its tensor
    "reorder": "transpose",
}
#: onnxruntime INT8 (QDQ) stand-ins: an operator without a quantized kernel runs in float between a
#: ``DequantizeLinear`` and a ``QuantizeLinear``, so it is priced as a probed kind that does so too
#: (a division as a subtraction, an exponential as a tanh), not as one onnxruntime runs quantized
#: (a product: ``QLinearMul``; a sigmoid: ``QLinearSigmoid``'s table)
QDQ_STAND_IN_KINDS: dict[str, str] = {**STAND_IN_KINDS, "div": "sub", "exp": "tanh", "elu": "tanh",
                                       "quantize": "dequantize"}  # a network's input conversion, the inverse pass
#: a probed kind's stand-in in tables measured before it was probed (a negation as a ReLU)
OLDER_TABLE_STAND_INS: dict[str, str] = {"unary": "relu"}


def stand_in_kinds(table: ProbeTable) -> dict[str, str]:
    """The stand-in kinds of ``table``'s runtime and dtype (:data:`QDQ_STAND_IN_KINDS` for
    onnxruntime INT8, else :data:`STAND_IN_KINDS`)."""
    qdq = table.dtype == "int8" and runtime_family(table.runtime) == "onnxruntime"
    return {**OLDER_TABLE_STAND_INS, **(QDQ_STAND_IN_KINDS if qdq else STAND_IN_KINDS)}


def family_layer_seconds(graph: LayerGraph, kernels: list[list[KernelConfig]], predictors: KernelPredictors
                         ) -> tuple[dict[str, np.ndarray], dict[int, str]]:
    """Predicted seconds [L] of every op-view layer's kernels of each kernel family, and the
    reason of every layer with a kernel the table cannot predict (no probes of its family or
    kind, nor of its :data:`STAND_IN_KINDS` kind), whose predictions are left out."""
    by_family: dict[str, list[tuple[int, KernelConfig]]] = defaultdict(list)
    analytic: dict[int, str] = {}
    probed_1x1 = probes_depthwise_1x1(predictors.table)
    for i, ks in enumerate(kernels):
        for k in ks:
            priced = depthwise_1x1_stand_in(k, predictors.table.runtime, probed_1x1)
            if isinstance(priced, str):
                analytic.setdefault(i, priced)
            else:
                by_family[priced.family].append((i, priced))
    out: dict[str, np.ndarray] = {}
    stand_in = stand_in_kinds(predictors.table)
    points = predictors.table.activation_pass_points
    for family, items in by_family.items():
        if points is not None:  # a fused activation's pass: the table's time per element at its size
            passes = [(i, k) for i, k in items if k.kind == "activation_pass"]
            items = [(i, k) for i, k in items if k.kind != "activation_pass"]
            if passes:
                out[family] = np.zeros(len(graph.layers))
                np.add.at(out[family], np.array([i for i, _ in passes]),
                          [activation_pass_seconds(points, k.out_elems) for _, k in passes])
        pred = predictors.predictor(family)
        if pred is not None:
            items = [(i, replace(k, kind=stand_in[k.kind]))
                     if k.kind not in pred.kinds and stand_in.get(k.kind) in pred.kinds else (i, k)
                     for i, k in items]
        for i, k in items:
            if pred is None:
                analytic.setdefault(i, f"no {family} probes")
            elif k.kind not in pred.kinds:
                analytic.setdefault(i, f"no {k.kind} probes")
        ok = [(i, k) for i, k in items if pred is not None and k.kind in pred.kinds]
        if ok:
            seconds = out.setdefault(family, np.zeros(len(graph.layers)))
            np.add.at(seconds, np.array([i for i, _ in ok]), pred.predict([k for _, k in ok]))  # type: ignore[union-attr]
    for seconds in out.values():
        seconds[list(analytic)] = 0.0
    return out, analytic


def depthwise_1x1_stand_in(kernel: KernelConfig, runtime: str | None, probed: bool) -> KernelConfig | str:
    """``kernel``, or for a stride-1 depthwise 1 x 1 convolution where the table has no such probes
    (``probed``, :func:`probes_depthwise_1x1`) its TFLite stand-in, the per-channel product of its
    tensor, or under onnxruntime the reason it is priced analytically (module doc)."""
    if kernel.kind != "dwconv" or kernel.k != 1 or kernel.stride != 1 or probed:
        return kernel
    if runtime_family(runtime) == "onnxruntime":
        return "no 1x1 depthwise probes (onnxruntime runs a grouped convolution)"
    return replace(kernel, kind="mul", n_in=2, bcast=BCAST_CHANNEL)


def probes_depthwise_1x1(table: ProbeTable) -> bool:
    """Whether ``table`` times depthwise 1 x 1 convolutions."""
    rows = table.rows
    return bool(((rows["kind"] == "dwconv") & (rows["k"] == 1)).any())


def activation_pass_seconds(points: list[tuple[int, float]], elements: int) -> float:
    """Seconds of a fused activation's pass over ``elements`` outputs: the per-element time the
    table measured, interpolated in the logarithm of the size between its points (held beyond)."""
    sizes, rates = zip(*points, strict=True)
    return elements * float(np.interp(np.log(elements), np.log(sizes), rates))


def correction_of(corrections: dict[str, float], family: str) -> float:
    """A family's profile correction: its own, else the ``default`` (global) one, else 1."""
    return float(corrections.get(family, corrections.get("default", 1.0)))


def price_layers(graph: LayerGraph, kernels: list[list[KernelConfig]], predictors: KernelPredictors,
                 analytic_s: np.ndarray, corrections: dict[str, float] | None = None
                 ) -> tuple[np.ndarray, dict[int, str]]:
    """Seconds [L] of every op-view layer: the sum of its kernels' predictions (times the
    family's correction, :func:`correction_of`) plus the table's ``node_overhead_s`` per node the
    table's runtime runs for it (:func:`~optimizer.cost.fusion.runtime_nodes`), or ``analytic_s``
    where a kernel has no predictor; and the reason of every layer priced analytically."""
    by_family, analytic = family_layer_seconds(graph, kernels, predictors)
    nodes = runtime_nodes(graph, predictors.table.runtime, kernels)
    seconds = predictors.table.node_overhead_s * np.array(nodes, dtype=np.float64)
    for family, s in by_family.items():
        seconds += s * correction_of(corrections or {}, family)
    for i in analytic:
        seconds[i] = analytic_s[i]
    return seconds, analytic


def predicted_backend(inputs: BackendInputs) -> BackendCosts:
    """The ``predicted`` cost backend (module doc)."""
    graph, device, dtype = inputs.graph, inputs.device, inputs.dtype
    runtime = inputs.runtime or device.runtime
    op = graph.op_view if graph.op_view is not None else graph
    base = analytic_costs(op, device, dtype, inputs.clock_hz, inputs.runtime)
    native = np.array(base["native_s"], dtype=np.float64)
    kernels: list[list[KernelConfig]] | None = None
    invoke = np.full(len(device.processors), np.nan)
    meta: dict[str, Any] = {}
    for j, p in enumerate(device.processors):
        entry = p.predictor(runtime, dtype)
        if entry is None:
            meta[p.name] = {"predictor": None, "reason": f"no {runtime}/{dtype}/{p.cores}-thread predictor: analytic"}
            continue
        if kernels is None:
            kernels = runtime_kernels(op, runtime, dtype)
        table = load_predictor_table(entry, f"device {device.name!r} processor {p.name!r}")
        seconds, analytic = price_layers(op, kernels, predictors_for(table, entry.seed), native[:, j],
                                         entry.corrections)
        native[:, j] = seconds / inputs.clock_ratio[j]
        invoke[j] = table.invoke_overhead_s
        meta[p.name] = {
            "predictor": {"runtime": entry.runtime, "dtype": entry.dtype, "threads": entry.threads,
                          "table": str(entry.table_path), "probes": len(table.rows),
                          "runner": table.meta.get("runner"), "measured_at_utc": table.meta.get("measured_at_utc")},
            "validated": entry.validated.model_dump() if entry.validated is not None else None,
            "corrections": dict(entry.corrections),
            "analytic_layers": [{"layer": op.layers[i].name, "reason": r} for i, r in sorted(analytic.items())],
        }
    fb = device.fallback_index
    # the CPU's predicted time, plus what the analytic model adds where a delegate leaves an
    # operator type as a kernel of its own
    cpu_s = native[:, fb] + (base["fallback_cpu_s"] - base["native_s"][:, fb])
    latency, energy = with_fallback(device, base["arrays"], native, base["supported"], base["active_power_w"], cpu_s)
    fine = {**base, "latency_s": latency, "energy_j": energy, "native_s": native, "fallback_cpu_s": cpu_s}
    out = block_sums(graph, fine, dtype) if graph is not op else fine
    return BackendCosts(latency_s=out["latency_s"], energy_j=out["energy_j"], supported=out["supported"],
                        arrays=out["arrays"], meta={"predicted": meta}, invoke_overhead_s=invoke,
                        fallback_cpu_s=out["fallback_cpu_s"])


def family_seconds(graph: LayerGraph, device: Any, dtype: str, processor: str,
                   runtime: str | None = None) -> dict[str, float]:
    """Predicted seconds per kernel family of ``graph`` on ``processor`` (its predictor for
    ``runtime``, default the device's, and ``dtype``); layers priced analytically under
    ``"analytic"``."""
    runtime = runtime or device.runtime
    op = graph.op_view if graph.op_view is not None else graph
    proc = device.processor(processor)
    entry = proc.predictor(runtime, dtype)
    if entry is None:
        return {}
    kernels = runtime_kernels(op, runtime, dtype)
    preds = predictors_for(load_predictor_table(entry), entry.seed)
    analytic_s = analytic_costs(op, device, dtype, None, device.check_runtime(runtime))["native_s"][
        :, device.processor_index(processor)]
    seconds, analytic = price_layers(op, kernels, preds, analytic_s, entry.corrections)
    out: dict[str, float] = {}
    for i, ks in enumerate(kernels):
        if not ks:
            continue
        fam = "analytic" if i in analytic else ks[0].family
        out[fam] = out.get(fam, 0.0) + float(seconds[i])
    return out
