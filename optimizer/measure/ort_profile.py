"""Per-layer host measurement with onnxruntime's node profiler.

The model runs ``warmup + repeats`` times in one profiled session
(``SessionOptions.enable_profiling``); each ``Node`` kernel event is assigned to its run (the
enclosing ``model_run`` event) and to a LayerGraph layer by name: tf2onnx keeps the Keras layer
name as a path component of every node (``model/<layer>_1/...``), and onnxruntime names a fused
node after the *last* layer of the fused chain (e.g. ``Conv1_relu`` for Conv+BN+ReLU6), so a
fused compute node is attributed back to the heaviest layer (conv/dwconv/dense) just before it.
Per-layer times are medians over the repeats (robust to the preemption spikes of a shared
host, which hit a few random layers of a run); their sum is the whole-network estimate. With
one thread they are rescaled so they sum to the median CPU time of a run
(:func:`time.thread_time` around ``session.run``: onnxruntime then runs every kernel on the
calling thread), which other processes competing for the cores cannot inflate. The
median ``model_run`` time, the executor's own overhead (run time minus node time) and the share
of node time that could not be attributed to any layer are recorded in the table's metadata.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, MeasurementError
from ..graph.layergraph import LayerGraph

_COMPUTE_OPS = {"Conv", "FusedConv", "NchwcConv", "ConvInteger", "QLinearConv", "MatMul", "Gemm",
                "FusedGemm", "FusedMatMul", "MatMulInteger", "QLinearMatMul", "ConvTranspose"}
_HEAVY_FAMILIES = ("conv", "dwconv", "dense")
_SUFFIX = re.compile(r"_\d+$")
_LAYOUT_SUFFIX = re.compile(r"_nchwc$")  # onnxruntime's NCHWc layout transformer
_TOKEN_SUFFIX = re.compile(r"_token_\d+$")  # onnxruntime's QDQ and layout rewrites (``<node>_token_13``)
#: onnxruntime's graph fusions name their node after the node they replace plus ``/<Name>Fusion/``
#: (``.../mul_1/QuickGeluFusion/`` for a swish, ``.../MatMul_1/MatmulTransposeFusion/``)
_FUSION_SUFFIX = re.compile(r"/\w*Fusion/?$")
_LOOKBACK = 4  # layers a fused node may reach back over (conv -> bn -> act -> pad)


@dataclass(frozen=True)
class OrtMeasurement:
    """Result of :func:`measure_ort`."""

    table: Any  # optimizer.cost.MeasuredTable
    whole_median_s: float
    whole_std_s: float
    unattributed_share: float
    layer_sum_s: float  # sum of the per-layer medians (the robust whole-network figure)
    executor_overhead_s: float  # median of (model_run - node time) per run


def _layer_matcher(graph: LayerGraph) -> dict[str, int]:
    return {la.name: la.index for la in graph.layers}


def attribute_node(node_name: str, op_type: str, graph: LayerGraph, by_name: dict[str, int]) -> int | None:
    """Layer index a profiled ONNX node belongs to, or None if no layer name matches.

    The node's name, or a ``/``-separated part of it, names a layer; otherwise it names the
    tensor the node writes: onnxruntime names the nodes its layout optimizer rewrites after
    their output tensor (``r_nchwc`` for a Conv fused with the Relu writing ``r``), the nodes its
    QDQ fusion and transpose optimizer rewrite after the node they replace plus ``_token_<n>``, and
    those of its graph fusions after the node they replace plus ``/<Name>Fusion/``."""
    node_name = _FUSION_SUFFIX.sub("", _TOKEN_SUFFIX.sub("", node_name))
    if node_name in by_name:
        return _heaviest(by_name[node_name], op_type, graph)
    hit = None
    for part in reversed(node_name.split("/")):
        part = part.split(":")[0]
        once = _SUFFIX.sub("", part)
        for cand in (part, once, _SUFFIX.sub("", once)):  # Keras 3 scopes: normalization_1_1 of layer normalization
            if cand in by_name:
                hit = by_name[cand]
                break
        if hit is not None:
            break
    if hit is None:
        tensor = graph.tensors.get(_LAYOUT_SUFFIX.sub("", node_name))
        if tensor is None or tensor.producer < 0:
            return None
        hit = tensor.producer
    return _heaviest(hit, op_type, graph)


def unnamed_fused_owners(graph: LayerGraph) -> dict[str, list[int]]:
    """op type -> the layers, in execution order, that carry the kernel of an onnxruntime fusion
    whose node name keeps no layer's (``FastGeluFusion`` names its nodes ``GPT2Gelu``,
    ``GPT2Gelu_token_1``, ...: the product writing each tanh GELU, :func:`~optimizer.cost.fusion.tanh_gelus`).
    The profile's first node of that type not matched by name is the first of them, and so on."""
    from ..cost.fusion import tanh_gelus
    from ..graph.kernel_config import canonical_kind

    kinds = [canonical_kind(la.op_type) for la in graph.layers]
    return {"FastGelu": sorted(g for g, _ in tanh_gelus(graph, kinds))}


def _heaviest(hit: int, op_type: str, graph: LayerGraph) -> int:
    """A fused compute node named after a later layer of its chain belongs to the compute layer
    just before that layer (module doc)."""
    if op_type in _COMPUTE_OPS and graph.layers[hit].op not in _HEAVY_FAMILIES:
        for back in range(hit - 1, max(hit - 1 - _LOOKBACK, -1), -1):
            if graph.layers[back].op in _HEAVY_FAMILIES:
                return back
    return hit


def random_input_feed(session: Any, seed: int,
                      shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
    """Random inputs for every input of an onnxruntime ``session``: of the served ``shapes`` given
    (a graph's ``served_input_shapes``), else the file's (dynamic dimensions set to 1)."""
    rng = np.random.default_rng(seed)
    feed = {}
    for inp in session.get_inputs():
        shape = list((shapes or {}).get(inp.name) or [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape])
        if "int" in inp.type:
            feed[inp.name] = rng.integers(0, 10, size=shape).astype(np.int64 if "int64" in inp.type else np.int32)
        else:
            feed[inp.name] = rng.standard_normal(shape).astype(np.float16 if "float16" in inp.type else np.float32)
    return feed


def profile_events(onnx_path: str | os.PathLike[str], threads: int, runs: int, seed: int = 0,
                   shapes: dict[str, tuple[int, ...]] | None = None,
                   reorders: dict[str, tuple[str, str]] | None = None) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Run ``onnx_path`` ``runs`` times under the onnxruntime profiler (inputs of the served
    ``shapes`` where given, :func:`random_input_feed`).

    Returns the profiler's events and the calling thread's CPU time of every run (with one
    intra-op thread onnxruntime runs every kernel on the calling thread). ``reorders``, when
    given, is filled with the session's NCHWc reorder nodes (:func:`nchwc_reorder_tensors`; their
    names are the session's own, so they come from its optimized graph).
    """
    import onnxruntime as ort

    def options(prefix: Path, optimized: Path | None) -> Any:
        so = ort.SessionOptions()
        so.enable_profiling = True
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        so.profile_file_prefix = str(prefix)
        if optimized is not None:  # the graph only, its weights in a file beside it
            so.optimized_model_filepath = str(optimized)
            so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
            so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "64")
        return so

    with tempfile.TemporaryDirectory(prefix="dnnplan-ort-") as tmp:
        optimized = Path(tmp) / "optimized.onnx"
        # a graph onnxruntime cannot write back keeps its reorders unattributed, not its profile
        attempts = [optimized, None] if reorders is not None else [None]
        for k, written in enumerate(attempts):
            try:
                session = ort.InferenceSession(str(onnx_path), options(Path(tmp) / "profile", written),
                                               providers=["CPUExecutionProvider"])
                break
            except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
                if k + 1 < len(attempts):
                    continue
                raise MeasurementError(f"{onnx_path}: onnxruntime cannot load the model "
                                       f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]})") from exc
        if reorders is not None and written is not None and optimized.is_file():
            reorders.update(nchwc_reorder_tensors(optimized))
        feed = random_input_feed(session, seed, shapes)
        cpu = np.empty(runs)
        for i in range(runs):
            t0 = time.thread_time()
            session.run(None, feed)
            cpu[i] = time.thread_time() - t0
        prof = session.end_profiling()
        with open(prof, encoding="utf-8") as fh:
            return json.load(fh), cpu


def nchwc_reorder_tensors(optimized_path: str | os.PathLike[str]) -> dict[str, tuple[str, str]]:
    """``node name -> (op type, tensor)`` of every NCHWc reorder in an onnxruntime optimized graph:
    the tensor of the original graph it converts (a ``ReorderOutput``'s output, which a
    channels-last one writes in place of a ``Transpose``; a ``ReorderInput``'s input)."""
    import onnx

    graph = onnx.load(str(optimized_path), load_external_data=False).graph
    return {n.name: (n.op_type, n.output[0] if n.op_type == "ReorderOutput" else n.input[0])
            for n in graph.node if n.op_type in ("ReorderOutput", "ReorderInput") and n.input and n.output}


def _reorder_owner(graph: LayerGraph, op_type: str, tensor: str, by_name: dict[str, int]) -> int | None:
    """The layer the kernel view charges an NCHWc reorder of ``tensor`` to
    (:func:`optimizer.cost.fusion.nchwc_reorders`): a ``ReorderOutput`` to the layer writing the
    tensor, a ``ReorderInput`` to the first layer reading it; a graph of other tensor names (a
    Keras model measured through its ONNX form) by the layer the tensor's name names."""
    t = graph.tensors.get(tensor)
    if t is None:
        return attribute_node(tensor.rsplit(":", 1)[0], op_type, graph, by_name)
    if op_type == "ReorderOutput":
        return t.producer if t.producer >= 0 else None
    return next((c for c in t.consumers if c < len(graph.layers)), None)


def model_runs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The profile's ``model_run`` events (one per ``session.run``) in time order."""
    return sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e.get("ts", 0))


def kernel_events(events: list[dict[str, Any]],
                  runs: list[dict[str, Any]]) -> Iterator[tuple[int, str, str, float, int | None, str]]:
    """``(run, node name, op type, seconds, node index, execution provider)`` of every ``Node``
    kernel event inside a run (all in run 0 when the profile has no ``model_run`` events)."""
    starts = np.array([r["ts"] for r in runs], dtype=np.float64)
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time"):
            continue
        run = int(np.searchsorted(starts, e.get("ts", 0), side="right")) - 1 if runs else 0
        if run < 0:
            continue
        args = e.get("args") or {}
        idx = args.get("node_index")
        yield (run, e["name"].removesuffix("_kernel_time"), str(args.get("op_name", "")),
               float(e.get("dur", 0)) * 1e-6, int(idx) if str(idx).isdigit() else None,
               str(args.get("provider", "CPUExecutionProvider")))


def _node_times(events: list[dict[str, Any]], runs: list[dict[str, Any]], graph: LayerGraph,
                reorders: dict[str, tuple[str, str]] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kernel seconds per (run, layer), unattributed seconds per run and node seconds per run.

    onnxruntime's NCHWc layout conversions (``ReorderInput``/``ReorderOutput``) go to the layer
    the kernel view charges them to when ``reorders`` names their tensors (:func:`_reorder_owner`),
    else they stay unattributed (a profile read back from a file) and the one-thread rescale to
    the run's CPU time spreads them over the layers."""
    by_name = _layer_matcher(graph)
    unnamed = unnamed_fused_owners(graph)
    reorders = reorders or {}
    per_run = np.zeros((len(runs), len(graph.layers)))
    unattributed = np.zeros(len(runs))
    total = np.zeros(len(runs))
    cache: dict[tuple[str, str], int | None] = {}
    for run, name, op, dur, _, _ in kernel_events(events, runs):
        key = (name, op)
        if key not in cache and name in reorders:
            cache[key] = _reorder_owner(graph, *reorders[name], by_name)
        elif key not in cache:
            cache[key] = attribute_node(key[0], key[1], graph, by_name)
            if cache[key] is None and unnamed.get(op):
                cache[key] = unnamed[op].pop(0)
        total[run] += dur
        if cache[key] is None:
            unattributed[run] += dur
        else:
            per_run[run, cache[key]] += dur
    return per_run, unattributed, total


def measure_ort(graph: LayerGraph, onnx_path: str | os.PathLike[str], *, threads: int = 1,
                repeats: int = 20, warmup: int = 3, seed: int = 0, processor: str = "cpu") -> OrtMeasurement:
    """Per-layer latencies of ``graph`` (exported as ``onnx_path``) on this host's CPU.

    Parameters
    ----------
    threads : int
        onnxruntime intra-op threads.
    repeats, warmup : int
        Measured runs (medians over these) and discarded warm-up runs.

    Returns
    -------
    OrtMeasurement
        The measured table (one row per layer), whole-network median and spread, and the share
        of node time not attributable to any layer.
    """
    import pandas as pd

    from ..cost.measured import MeasuredTable, measured_frame

    if repeats < 1 or warmup < 0 or threads < 1:
        raise ConfigError(f"repeats={repeats}, warmup={warmup}, threads={threads}: need repeats >= 1, "
                          "warmup >= 0, threads >= 1")
    reorders: dict[str, tuple[str, str]] = {}
    events, cpu = profile_events(onnx_path, threads, warmup + repeats, seed, graph.served_input_shapes, reorders)
    runs = model_runs(events)
    if len(runs) != warmup + repeats:
        raise MeasurementError(f"{onnx_path}: the profile has {len(runs)} runs, expected {warmup + repeats}")
    per_run, unattributed, total = _node_times(events, runs, graph, reorders)
    kept = slice(warmup, None)
    layer_med = np.median(per_run[kept], axis=0)
    layer_std = np.std(per_run[kept], axis=0)
    whole = np.array([r["dur"] for r in runs[kept]], dtype=np.float64) * 1e-6
    whole_med = float(np.median(whole))
    overhead = float(np.median(whole - total[kept]))
    cpu_med = float(np.median(cpu[kept]))
    # one thread: rescale to the run's CPU time, immune to preemption by other processes
    scale = cpu_med / float(layer_med.sum()) if threads == 1 and layer_med.sum() > 0 else 1.0
    layer_med, layer_std = layer_med * scale, layer_std * scale
    share = float(np.median(unattributed[kept] / np.maximum(total[kept], 1e-12)))
    rows = pd.DataFrame({
        "processor": processor, "index": np.arange(len(graph.layers)), "layer": [la.name for la in graph.layers],
        "op": [la.op for la in graph.layers], "latency_s": layer_med,
        "latency_std_s": layer_std, "energy_j": np.nan,
    })
    meta = {
        "model": graph.name, "granularity": graph.granularity, "source_sha256": graph.source_sha256,
        "device": "host", "dtype": "fp32", "backend": "ort", "threads": threads, "repeats": repeats,
        "warmup": warmup, "whole_median_s": whole_med, "whole_std_s": float(np.std(whole)),
        "whole_p10_s": float(np.percentile(whole, 10)), "whole_p90_s": float(np.percentile(whole, 90)),
        "layer_sum_s": float(layer_med.sum()), "executor_overhead_s": overhead,
        "cpu_time_median_s": cpu_med, "time_basis": "thread_cpu" if threads == 1 else "wall",
        "wall_to_basis_scale": scale,
        "unattributed_share": share,
    }
    table = MeasuredTable(measured_frame(rows, f"{graph.name} measurement"), meta, "")
    return OrtMeasurement(table, whole_med, float(np.std(whole)), share, float(layer_med.sum()), overhead)


def write_profile(onnx_path: str | os.PathLike[str], out: str | os.PathLike[str], *, threads: int = 1,
                  runs: int = 4, seed: int = 0) -> Path:
    """Run ``onnx_path`` ``runs`` times under onnxruntime's profiler and write its JSON (the
    trace events onnxruntime wrote, unchanged) to ``out`` atomically: a profile for
    ``dnnplan measure --import`` / ``calibrate --from-profile``."""
    from ..fileio import atomic_write_text

    if runs < 1 or threads < 1:
        raise ConfigError(f"runs={runs}, threads={threads}: both must be >= 1")
    events, _ = profile_events(onnx_path, threads, runs, seed)
    return atomic_write_text(out, json.dumps(events, separators=(",", ":")) + "\n")
