"""Per-operator profiles that engineers already produce, read and matched to LayerGraph layers.

Formats, detected from the content (not the file name):

``tflite_text``
    the standard output of TFLite's ``benchmark_model --enable_op_profiling=true``: the "Run
    Order" table of "Operator-wise Profiling Info for Regular Benchmark Runs" (one row per
    executed node: node type, [start], first, avg ms, %, cdf%, mem KB, times called, name),
    or, when a log has no per-node table, its "Summary by node type" table (one row per op
    type: count, avg ms, ...). Delegate kernels appear as one row per partition
    (``TfLiteGpuDelegateV2``, ``TfLiteXNNPackDelegate``, ``TfLiteNnapiDelegate``,
    ``TfLiteHexagonDelegate``) named after the partition's output tensors,
    ``[tensor;tensor, tensor]:node_index`` (TFLite ``profile_summarizer.cc``).
``tflite_csv``
    the file of ``--profiling_output_csv_file``: the same tables, comma separated
    (``node type, start, first, avg_ms, %, cdf%, mem KB, times called, name``).
``ort_json``
    onnxruntime's profiler JSON (``SessionOptions.enable_profiling``), read with
    :mod:`optimizer.measure.ort_profile`: per node, the median kernel time over the runs.

Matching (:func:`match_profile`): a row's tensor/node names are looked up among the layer
names (:func:`optimizer.measure.ort_profile.attribute_node`); when fewer than half of the
per-node rows match by name, rows are matched by op type in execution order instead. A row
anchored on a fused activation reaches back to the kernel it was fused into; layers that are
not kernels of their own (batch-norm, activation, padding: ``dispatched`` False) join the
kernel before them, as TFLite and onnxruntime fuse them; a delegate row whose names match
nothing covers the layers between its neighbours; a "Summary by node type" row covers every
layer of its op family. A time that covers several layers is split by the modeled share
(the analytic latency of the layers on the target processor, else their MACs, else bytes).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError, SchemaError
from ..graph.layergraph import LayerGraph
from ..graph.tflite_import import OP_FAMILY as TFLITE_OP_FAMILY

FORMATS = ("tflite_text", "tflite_csv", "ort_json")
ACCEPTED = ("TFLite benchmark_model --enable_op_profiling output (text), its --profiling_output_csv_file CSV, "
            "or an onnxruntime profiling JSON")

#: delegate kernel node types -> processor kind that runs them
DELEGATES: dict[str, str] = {
    "TfLiteGpuDelegate": "gpu", "TfLiteGpuDelegateV2": "gpu", "TfLiteMetalDelegate": "gpu",
    "TfLiteXNNPackDelegate": "cpu", "TfLiteNnapiDelegate": "npu", "TfLiteHexagonDelegate": "dsp",
    "TfLiteCoreMlDelegate": "npu", "EdgeTpuDelegateForCustomOp": "tpu", "edgetpu-custom-op": "tpu",
    "DELEGATE": "npu",
}

#: data-movement operators: on a layer the model costs at zero (a fused reshape, a batch-norm a
#: converter's layout transpose is named after) their time is kept apart, not put on a kernel
LAYOUT_OPS: frozenset[str] = frozenset({
    "Transpose", "ReorderInput", "ReorderOutput", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Cast",
    "Identity", "TRANSPOSE", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "CAST",
})

#: onnxruntime execution providers -> processor kind (a node of a non-CPU provider is a fused
#: partition, like a TFLite delegate row)
ORT_PROVIDERS: dict[str, str] = {
    "CPUExecutionProvider": "cpu", "XnnpackExecutionProvider": "cpu", "NnapiExecutionProvider": "npu",
    "CoreMLExecutionProvider": "npu", "QNNExecutionProvider": "dsp", "CUDAExecutionProvider": "gpu",
    "TensorrtExecutionProvider": "gpu", "ROCMExecutionProvider": "gpu", "DmlExecutionProvider": "gpu",
    "OpenVINOExecutionProvider": "cpu", "WebGpuExecutionProvider": "gpu",
}

#: TFLite operator -> LayerGraph op family: the TFLite importer's own table
#: (:data:`optimizer.graph.tflite_import.OP_FAMILY`, so a profile row and the imported layer of
#: one operator agree), plus the operators a profile shows that the importer files under
#: ``other`` or as custom ops
TFLITE_FAMILIES: dict[str, str] = {
    **TFLITE_OP_FAMILY, "GATHER": "reshape", "QUANTIZE": "other", "DEQUANTIZE": "other",
    "TFLite_Detection_PostProcess": "custom",
}


@dataclass(frozen=True)
class ProfileRecord:
    """One profiled operator (or, ``summary`` True, all operators of one type).

    ``time_s`` is the average seconds per run (benchmark_model's ``avg ms``; onnxruntime: the
    median kernel time over the runs); ``count`` the times it was called per run (summary: the
    number of nodes); ``processor`` the kind running it where the row says (a delegate)."""

    name: str
    op_type: str
    time_s: float
    count: int = 1
    processor: str | None = None
    node_index: int | None = None
    summary: bool = False

    @property
    def delegate(self) -> bool:
        """A delegate partition (TFLite delegate node, or a node of a non-CPU onnxruntime provider)."""
        return self.op_type in DELEGATES or (not self.summary and self.processor not in (None, "cpu"))

    @property
    def tensor_names(self) -> list[str]:
        """Names the row lists: TFLite ``[a;b, c]:7`` -> ``a, b, c``; ORT: the node name."""
        inner = self.name
        m = re.fullmatch(r"\[(.*)\](?::\d+)?", inner.strip(), flags=re.S)
        if m:
            inner = m.group(1)
        return [n.strip() for part in inner.split(", ") for n in part.split(";") if n.strip()]


@dataclass(frozen=True)
class Profile:
    """The records of one profile file, in execution order."""

    path: str
    format: str
    records: tuple[ProfileRecord, ...]
    whole_s: float | None = None  # measured time of a whole run, where the file gives it
    runs: int | None = None
    #: time of a run outside the operators (executor, delegate invoke), where the file gives it
    invoke_overhead_s: float | None = None

    @property
    def total_s(self) -> float:
        return float(sum(r.time_s for r in self.records))

    @property
    def processor(self) -> str:
        """The processor kind that ran most of the profiled time (delegates say which; other
        rows run on the CPU)."""
        by_kind: dict[str, float] = {}
        for r in self.records:
            kind = r.processor or "cpu"
            by_kind[kind] = by_kind.get(kind, 0.0) + r.time_s
        return max(by_kind, key=lambda k: by_kind[k]) if by_kind else "cpu"


# ---------------------------------------------------------------- parsing

def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read ``path`` in whichever of :data:`FORMATS` its content is.

    Raises
    ------
    InputFileError
        The file is missing or unreadable.
    SchemaError
        The content is none of the accepted formats, or holds no operator rows.
    """
    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such profile file")
    try:
        text = p.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputFileError(f"{p}: cannot read ({exc.strerror})") from None
    head = text.lstrip()[:1]
    if head in ("[", "{"):
        return _ort_json(text, str(p))
    text = "\n".join(_strip_logcat(line) for line in text.splitlines())
    if re.search(r"^\s*node type\s*,", text, flags=re.M):
        return _tflite_tables(text, str(p), csv_format=True)
    if (re.search(r"^\s*\[node type\]", text, flags=re.M | re.I) or _TEXT_ROW.search(text)
            or re.search(r"Operator-wise Profiling Info|=+ (Run Order|Summary by node type) =+", text)):
        return _tflite_tables(text, str(p), csv_format=False)
    what = "empty" if not text.strip() else "not a profile"
    raise SchemaError(f"{p}: {what}; expected {ACCEPTED}")


def _ort_json(text: str, where: str) -> Profile:
    from .ort_profile import kernel_events, model_runs

    try:
        events = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}); expected {ACCEPTED}") from None
    if isinstance(events, dict):  # chrome trace form {"traceEvents": [...]}
        events = events.get("traceEvents")
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise SchemaError(f"{where}: JSON but not an onnxruntime profile (a list of trace events); "
                          f"expected {ACCEPTED}")
    runs = model_runs(events)
    per_node: dict[tuple[str, str], dict[int, float]] = {}
    order: dict[tuple[str, str], int] = {}
    index: dict[tuple[str, str], int | None] = {}
    kind: dict[tuple[str, str], str] = {}
    for run, name, op, dur, node_index, provider in kernel_events(events, runs):
        key = (name, op)
        per_node.setdefault(key, {})
        per_node[key][run] = per_node[key].get(run, 0.0) + dur
        if key not in order:
            order[key] = len(order)  # first appearance: execution order
            index[key] = node_index
            kind[key] = ORT_PROVIDERS.get(provider, "cpu")
    if not per_node:
        raise SchemaError(f"{where}: an onnxruntime profile without node kernel events (was it taken "
                          "with SessionOptions.enable_profiling while running the model?)")
    n_runs = max(len(runs), 1)
    node_sum = np.zeros(n_runs)
    for times_by_run in per_node.values():
        for run, dur in times_by_run.items():
            node_sum[run] += dur
    records = []
    for key in sorted(per_node, key=lambda k: order[k]):
        times = np.zeros(n_runs)
        for run, dur in per_node[key].items():
            times[run] = dur
        records.append(ProfileRecord(key[0], key[1], float(np.median(times)), 1, kind[key], index[key]))
    dur = np.array([r["dur"] for r in runs], dtype=np.float64) * 1e-6
    whole = float(np.median(dur)) if runs else None
    # the least contended run: on a shared machine preemption between kernels only adds to a gap
    gap = float(max(0.0, np.min(dur - node_sum))) if runs else None
    return Profile(where, "ort_json", tuple(records), whole, len(runs) or None, gap)


_TABLE = re.compile(r"^=+\s*(.+?)\s*=+\s*$")
_TEXT_SEP = re.compile(r"\t|\s{2,}")  # benchmark_model pads with tabs; pasted logs often with spaces
_TEXT_ROW = re.compile(r"^\s*[A-Za-z_][\w]*(?:\t\s*|\s{2,})[\d.]+%?(?:(?:\t\s*|\s{2,})[\d.]+%?){3,}", re.M)


def _tflite_tables(text: str, where: str, *, csv_format: bool) -> Profile:
    """Rows of the per-node "Run Order" table of the regular runs, else of "Summary by node type"."""
    lines = text.splitlines()
    marker = next((i for i, line in enumerate(lines)
                   if "Operator-wise Profiling Info for Regular Benchmark Runs" in line), None)
    if marker is not None:
        lines = lines[marker + 1:]
    tables: dict[str, list[list[str]]] = {}
    title = "Run Order"  # a fragment without its title line is a run-order table
    header: list[str] | None = None
    for line in lines:
        if "Profiling Info for Benchmark Initialization" in line:
            title, header = "init", None
            continue
        m = _TABLE.match(line.strip())
        if m:
            title, header = m.group(1), None
            continue
        cells = _cells(line, csv_format)
        if not cells:
            continue
        low = [c.strip("[] ").lower() for c in cells]
        if low and low[0] == "node type":
            header = low
            continue
        if header is None:
            header = _implied_header(cells)
            if header is None:
                continue
        if len(cells) < len(header) and "name" in header:
            continue
        tables.setdefault(title, [])
        if title == "init":
            continue
        tables[title].append(cells + ["|".join(header)])
    if tables.get("Run Order"):
        records = [_node_row(r, where) for r in tables["Run Order"]]
    elif tables.get("Summary by node type"):
        records = [_summary_row(r, where) for r in tables["Summary by node type"]]
    else:
        raise SchemaError(f"{where}: a TFLite benchmark log without an operator table (run benchmark_model "
                          "with --enable_op_profiling=true); expected " + ACCEPTED)
    records = [r for r in records if r is not None]
    if not records:
        raise SchemaError(f"{where}: the operator table has no rows with times; expected {ACCEPTED}")
    whole = _inference_avg(text)
    gap = max(0.0, whole - sum(r.time_s for r in records)) if whole is not None else None
    return Profile(where, "tflite_csv" if csv_format else "tflite_text", tuple(records), whole, None, gap)


def _strip_logcat(line: str) -> str:
    """Drop an Android logcat prefix (``05-31 10:38:42.569 22206 22206 I tflite  : ``)."""
    m = re.match(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+[VDIWEF]\s+\S+\s*:\s?", line)
    return line[m.end():] if m else line


def _cells(line: str, csv_format: bool) -> list[str]:
    if not line.strip():
        return []
    if csv_format:
        if "," not in line:
            return []
        return [p.strip() for p in line.split(",")]
    cells = [c.strip() for c in _TEXT_SEP.split(line.strip()) if c.strip()]
    return cells if len(cells) > 1 else []


def _implied_header(cells: list[str]) -> list[str] | None:
    """Header of a row seen without its header line (a quoted fragment of a run-order table)."""
    if len(cells) >= 9 and cells[-1].startswith("["):
        return ["node type", "start", "first", "avg ms", "%", "cdf%", "mem kb", "times called", "name"]
    if len(cells) == 8 and cells[-1].startswith("["):
        return ["node type", "first", "avg ms", "%", "cdf%", "mem kb", "times called", "name"]
    return None


def _col(header: list[str], *names: str) -> int | None:
    for n in names:
        if n in header:
            return header.index(n)
    return None


def _number(text: str, where: str, what: str) -> float:
    try:
        v = float(text.rstrip("%"))
    except ValueError:
        raise SchemaError(f"{where}: {what} {text!r} is not a number; is the table cut or edited?") from None
    if not math.isfinite(v) or v < 0:
        raise SchemaError(f"{where}: {what} {text!r} must be a finite number >= 0")
    return v


def _node_row(cells: list[str], where: str) -> ProfileRecord | None:
    header = cells[-1].split("|")
    cells = cells[:-1]
    if "name" in header and len(cells) > len(header):  # CSV: the name itself had commas
        k = header.index("name")
        cells = cells[:k] + [", ".join(cells[k:])]
    avg = _col(header, "avg ms", "avg_ms")
    calls = _col(header, "times called")
    name_at = _col(header, "name")
    if avg is None or name_at is None or len(cells) <= max(avg, name_at):
        return None
    op = cells[0]
    name = cells[name_at]
    m = re.search(r"\]:(\d+)\s*$", name)
    return ProfileRecord(name=name, op_type=op, time_s=_number(cells[avg], where, f"avg ms of {op}") * 1e-3,
                         count=int(_number(cells[calls], where, "times called")) if calls is not None else 1,
                         processor=DELEGATES.get(op, "cpu"), node_index=int(m.group(1)) if m else None)


def _summary_row(cells: list[str], where: str) -> ProfileRecord | None:
    header = cells[-1].split("|")
    cells = cells[:-1]
    avg = _col(header, "avg ms", "avg_ms")
    count = _col(header, "count")
    if avg is None or len(cells) <= avg:
        return None
    op = cells[0]
    if op in ("AllocateTensors", "ModifyGraphWithDelegate"):
        return None
    return ProfileRecord(name=op, op_type=op, time_s=_number(cells[avg], where, f"avg ms of {op}") * 1e-3,
                         count=int(_number(cells[count], where, "count")) if count is not None else 1,
                         processor=DELEGATES.get(op, "cpu"), summary=True)


def _inference_avg(text: str) -> float | None:
    """``Inference (avg): 12167.6`` (microseconds) of the benchmark summary line, if present."""
    m = re.search(r"Inference \(avg\):\s*([\d.]+)", text)
    return float(m.group(1)) * 1e-6 if m else None


_RUN_STATS = re.compile(r"count=(\d+)\b.*?\bavg=([\d.eE+-]+)(?:.*?\bstd=([\d.eE+-]+))?")


def benchmark_summary(text: str) -> tuple[float, float, int] | None:
    """(average s, standard deviation s, runs) of a ``benchmark_model`` output: its timed runs'
    ``count=N ... avg=X std=Y`` line (microseconds; the line with most runs, i.e. not the
    warm-up's), else the ``Inference (avg)`` summary with no spread; None when neither is there."""
    best: tuple[float, float, int] | None = None
    for line in text.splitlines():
        m = _RUN_STATS.search(_strip_logcat(line))
        if m:
            count = int(m.group(1))
            if best is None or count >= best[2]:
                best = (float(m.group(2)) * 1e-6, float(m.group(3) or 0.0) * 1e-6, count)
    if best is not None:
        return best
    avg = _inference_avg(text)
    return (avg, 0.0, 1) if avg is not None else None


# ---------------------------------------------------------------- matching

@dataclass
class ProfileMatch:
    """Per-layer times [L] of one profile matched to ``graph`` and how they were obtained."""

    profile: Profile
    graph: LayerGraph
    latency_s: np.ndarray  # [L], NaN where no row covers the layer
    mode: str  # "name", "order" or "summary"
    rows_matched: int
    unmatched_rows: list[ProfileRecord] = field(default_factory=list)
    unmatched_layers: list[int] = field(default_factory=list)
    single: np.ndarray | None = None  # [L] bool: the layer's time is one row's own (not a split)
    notes: list[str] = field(default_factory=list)

    owner: np.ndarray | None = None  # [L] index of the row covering each layer, -1 for none
    #: [L] seconds of data-movement rows on layers the model costs at zero (in ``latency_s`` too)
    unmodeled_s: np.ndarray | None = None

    @property
    def covered(self) -> np.ndarray:
        """[L] bool: a profile row covers the layer."""
        return self.owner >= 0 if self.owner is not None else self.latency_s > 0

    def warnings(self) -> list[str]:
        """One line per unmatched row and per unmatched layer, then the notes."""
        where = self.profile.path
        out = [f"{where}: row {r.op_type} {r.name[:80]!r} ({r.time_s * 1e3:.3f} ms) matches no layer of "
               f"{self.graph.name!r}; its time is left out" for r in self.unmatched_rows]
        out += [f"{where}: layer {i} {self.graph.layers[i].name!r} ({self.graph.layers[i].op}) has no profile row "
                "(fused by the runtime into a neighbour, or not profiled); counted as 0 ms"
                for i in self.unmatched_layers]
        return out + [f"{where}: {n}" for n in self.notes]


def table_match(table: Any, graph: LayerGraph, processor: str = "cpu", dtype: str = "fp32") -> ProfileMatch:
    """A per-layer measured table (``dnnplan measure``'s onnxruntime table,
    :func:`optimizer.measure.host.measure_model`) as the :class:`ProfileMatch` the profile fit
    takes: every layer covered by its own row (a layer the runtime fused away timed at 0), each
    kernel layer timed on its own (``single``).

    The table's layer times already hold the executor's own time (one thread: they sum to the
    run's CPU time, :mod:`optimizer.measure.ort_profile`), so no invoke overhead is set apart.

    Raises
    ------
    ConfigError
        The table's rows do not name ``graph``'s layers in order
        (:func:`optimizer.cost.measured.check_matches`).
    """
    from ..cost.features import layer_arrays
    from ..cost.measured import check_matches

    y = np.nan_to_num(check_matches(table, graph, processor), nan=0.0)
    where = table.path or f"{graph.name} measured table"
    meta = table.meta
    profile = Profile(where, str(meta.get("backend", "measured")), (), meta.get("whole_median_s"), meta.get("repeats"))
    single = _kernels(layer_arrays(graph, dtype)) & (y > 0)
    n = len(graph.layers)
    return ProfileMatch(profile, graph, y, "name", n, single=single, owner=np.arange(n))  # row i times layer i


def _kernels(arrays: Any) -> np.ndarray:
    """[L] bool: the layers a runtime runs as kernels of their own (dispatched, not an identity)."""
    out = np.asarray(arrays.dispatched, dtype=bool).copy()
    if arrays.identity is not None:
        out &= ~np.asarray(arrays.identity, dtype=bool)
    return out


def layer_family(graph: LayerGraph, index: int) -> str:
    """The kernel family (conv1x1, convkxk, dwconv_s1, ...: :mod:`optimizer.graph.kernel_families`)
    a layer's efficiency is keyed by."""
    from ..graph.kernel_families import kernel_family

    return kernel_family(graph.layers[index], graph.fmt)


def match_profile(profile: Profile, graph: LayerGraph, weights: np.ndarray | None = None,
                  dtype: str = "fp32") -> ProfileMatch:
    """Match ``profile``'s rows to ``graph``'s layers (module docstring).

    Parameters
    ----------
    weights : ndarray [L], optional
        Modeled time of every layer, used to split a time that covers several layers (None:
        MACs, else bytes moved).

    Raises
    ------
    ConfigError
        When more rows match no layer than match one (not a profile of this model).
    """
    from ..cost.features import layer_arrays

    arrays = layer_arrays(graph, dtype)
    n = len(graph.layers)
    dispatched = _kernels(arrays)
    w = np.asarray(weights, dtype=np.float64) if weights is not None else None
    owner = np.full(n, -1)  # first row covering each layer
    records = list(profile.records)
    spans: list[list[int]] = [[] for _ in records]  # layers each row covers
    unmatched: list[int] = []
    notes: list[str] = []
    if records and all(r.summary for r in records):
        mode = _summary_spans(records, graph, dispatched, owner, spans, unmatched, notes)
    else:
        mode = _anchored_spans(profile, records, graph, dispatched, owner, spans, unmatched)
    _fill_gaps(records, owner, spans, unmatched, dispatched)
    layout = {k for k, r in enumerate(records) if r.op_type in LAYOUT_OPS and spans[k]
              and not dispatched[spans[k]].any()}
    _attach_fused(owner, spans, layout, dispatched)
    latency, unmodeled, single = _distribute(records, spans, layout, dispatched, w, arrays)
    matched_rows = sum(1 for sp in spans if sp)
    bad_rows = [records[k] for k in sorted(set(unmatched))]
    if not matched_rows or len(bad_rows) > matched_rows:
        raise ConfigError(
            f"{profile.path}: {len(bad_rows)} of {len(records)} profile rows match no layer of {graph.name!r} "
            f"({n} layers; matched {matched_rows}); is this a profile of {graph.name!r}? Give the model it "
            "profiled (--model)")
    uncovered = [i for i in range(n) if owner[i] < 0 and dispatched[i]]
    latency[owner < 0] = 0.0
    m = ProfileMatch(profile, graph, latency, mode, matched_rows, bad_rows, uncovered, single, notes, owner, unmodeled)
    for r, sp in zip(records, spans, strict=True):
        cnt = len(set(sp))
        if cnt > 1 and (r.delegate or r.summary):
            m.notes.append(f"{r.op_type} row {r.name[:60]!r} covers {cnt} layers: its {r.time_s * 1e3:.3f} ms "
                           "are split by the modeled share")
    return m


def _summary_spans(records: list[ProfileRecord], graph: LayerGraph, dispatched: np.ndarray, owner: np.ndarray,
                   spans: list[list[int]], unmatched: list[int], notes: list[str]) -> str:
    """"Summary by node type" rows: each covers every kernel layer of its op family."""
    n = len(graph.layers)
    for k, r in enumerate(records):
        fam = TFLITE_FAMILIES.get(r.op_type)
        hits = [i for i in range(n) if graph.layers[i].op == fam and dispatched[i]] if fam else []
        if r.delegate:
            continue  # placed in the gaps later
        if not hits:
            unmatched.append(k)
            continue
        if r.count != len(hits):
            notes.append(f"{r.op_type}: the profile ran {r.count} such nodes, {graph.name!r} has {len(hits)} "
                         f"{fam} layers (a converter's rewrite, or another model?)")
        spans[k] = hits
        owner[hits] = k
    return "summary"


def _anchored_spans(profile: Profile, records: list[ProfileRecord], graph: LayerGraph, dispatched: np.ndarray,
                    owner: np.ndarray, spans: list[list[int]], unmatched: list[int]) -> str:
    """Per-node rows: anchored by name when most names match, else by op type in execution order;
    returns the mode used (name, order or delegate)."""
    by_name = {la.name: la.index for la in graph.layers}
    anchors = [_name_anchor(r, graph, by_name) for r in records]
    plain = [k for k, r in enumerate(records) if not r.delegate]
    named = sum(1 for k in plain if anchors[k] is not None)
    if not plain and not any(a is not None for a in anchors):
        mode = "delegate"
    elif profile.format == "ort_json" or (plain and named * 2 >= len(plain)) or not plain:
        mode = "name"
    else:
        mode = "order"
        anchors = _order_anchors(records, graph, dispatched)
    for k, a in enumerate(anchors):
        if a is None:
            if not records[k].delegate:
                unmatched.append(k)
            continue
        if records[k].op_type in LAYOUT_OPS and not dispatched[a]:
            spans[k] = [a]  # a layout op of its own, not part of the kernel before it
        else:
            spans[k] = _reach_back(a, owner, dispatched)  # several rows may share a layer: times add
        owner[[i for i in spans[k] if owner[i] < 0]] = k
    return mode


def _attach_fused(owner: np.ndarray, spans: list[list[int]], layout: set[int], dispatched: np.ndarray) -> None:
    """Fused layers (not kernels of their own) join the kernel before them (then leading ones the
    kernel after them); a layout row keeps to its own layer."""
    n = len(owner)
    for step, order in ((-1, range(1, n)), (1, range(n - 2, -1, -1))):
        for i in order:
            if owner[i] >= 0 or dispatched[i]:
                continue
            j = i + step
            while 0 <= j < n and owner[j] in layout:
                j += step
            if 0 <= j < n and owner[j] >= 0:
                owner[i] = owner[j]
                spans[int(owner[j])].append(i)


def _distribute(records: list[ProfileRecord], spans: list[list[int]], layout: set[int], dispatched: np.ndarray,
                w: np.ndarray | None, arrays: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latency, unmodeled layout time, single-row kernel) per layer: each row's time split over
    the layers it covers by the modeled share."""
    n = len(dispatched)
    latency = np.zeros(n)
    unmodeled = np.zeros(n)
    rows_on = np.zeros(n, dtype=int)
    for k, r in enumerate(records):
        members = np.array(sorted(set(spans[k])), dtype=int)
        if members.size == 0:
            continue
        part = r.time_s * _share(members, w, arrays)
        latency[members] += part
        if k in layout:
            unmodeled[members] += part
        rows_on[members] += 1
    single = np.zeros(n, dtype=bool)
    for k, r in enumerate(records):
        kernels = [i for i in set(spans[k]) if dispatched[i]]
        if len(kernels) == 1 and not r.summary and not r.delegate and rows_on[kernels[0]] == 1:
            single[kernels[0]] = True
    return latency, unmodeled, single


def _name_anchor(r: ProfileRecord, graph: LayerGraph, by_name: dict[str, int]) -> int | None:
    """Last layer the row's names point at (a fused node is named after its last op)."""
    from .ort_profile import attribute_node

    hits = [attribute_node(n, r.op_type, graph, by_name) for n in r.tensor_names]
    found = [h for h in hits if h is not None]
    return max(found) if found else None


def _order_anchors(records: list[ProfileRecord], graph: LayerGraph, dispatched: np.ndarray,
                   lookahead: int = 12) -> list[int | None]:
    """Anchor each non-delegate row on the next layer of its op family in execution order.

    A row whose family does not come up within ``lookahead`` layers matches nothing (and the
    cursor stays); delegate rows are left to :func:`_fill_gaps`."""
    out: list[int | None] = []
    cursor = 0
    n = len(graph.layers)
    for r in records:
        fam = TFLITE_FAMILIES.get(r.op_type)
        if r.delegate or fam is None:
            out.append(None)
            continue
        hit = next((i for i in range(cursor, min(n, cursor + lookahead)) if graph.layers[i].op == fam), None)
        out.append(hit)
        if hit is not None:
            cursor = hit + 1
    return out


def _reach_back(anchor: int, owner: np.ndarray, dispatched: np.ndarray) -> list[int]:
    """``anchor`` plus, when it is a fused op (activation after a conv), the unowned layers back
    to and including the kernel it was fused into."""
    span = [anchor]
    if dispatched[anchor]:
        return span
    i = anchor - 1
    while i >= 0 and owner[i] < 0:
        span.append(i)
        if dispatched[i]:
            break
        i -= 1
    else:
        return [anchor]
    return span if dispatched[span[-1]] else [anchor]


def _fill_gaps(records: list[ProfileRecord], owner: np.ndarray, spans: list[list[int]], unmatched: list[int],
               dispatched: np.ndarray) -> None:
    """Give each unplaced delegate row the unowned layers between its placed neighbours in row
    order (all layers when no row is placed and it is the only delegate row)."""
    gaps = [k for k, r in enumerate(records) if r.delegate and not spans[k]]
    if not gaps:
        return
    n = len(owner)
    if not any(spans):
        if len(gaps) == 1:
            spans[gaps[0]] = list(range(n))
            owner[:] = gaps[0]
        else:
            unmatched.extend(gaps)
        return
    for k in gaps:
        lo = max((max(spans[j]) for j in range(k) if spans[j]), default=-1) + 1
        hi = min((min(spans[j]) for j in range(k + 1, len(records)) if spans[j]), default=n)
        free = [i for i in range(lo, hi) if owner[i] < 0]
        if not any(dispatched[i] for i in free):
            unmatched.append(k)
            continue
        spans[k] = free
        owner[free] = k


def _share(members: np.ndarray, weights: np.ndarray | None, arrays: Any) -> np.ndarray:
    for w in (weights, arrays.macs, arrays.moved_bytes):
        if w is None:
            continue
        v = np.nan_to_num(np.asarray(w, dtype=np.float64)[members], nan=0.0, posinf=0.0)
        if v.sum() > 0:
            return v / v.sum()
    return np.full(members.size, 1.0 / members.size)


def family_totals(match: ProfileMatch) -> dict[str, float]:
    """Profiled seconds per kernel family of the covered layers."""
    out: dict[str, float] = {}
    for i in np.flatnonzero(match.covered):
        fam = layer_family(match.graph, int(i))
        out[fam] = out.get(fam, 0.0) + float(match.latency_s[i])
    return {k: v for k, v in out.items() if v > 0}


class ProfileMatchWarning(UserWarning):
    """A profile row that matches no layer, or a layer no row covers."""


def modeled_layers(device: Any, processor: str, graph: LayerGraph, dtype: str) -> np.ndarray:
    """Native analytic latency [L] of ``graph``'s layers on ``device``'s ``processor``."""
    from ..cost.analytic import analytic_costs

    j = device.processor_index(processor)
    return np.asarray(analytic_costs(graph, device, dtype)["native_s"][:, j], dtype=np.float64)


def pick_processor(device: Any, profile: Profile, processor: str | None) -> str:
    """``processor`` (checked), else the device's first processor of the profile's kind, else its CPU."""
    if processor is not None:
        return str(device.processor(processor).name)
    for p in device.processors:
        if p.kind == profile.processor:
            return str(p.name)
    return str(device.processors[device.fallback_index].name)


def import_profile(path: str | os.PathLike[str], graph: LayerGraph, device: Any = None,
                   processor: str | None = None, dtype: str = "fp32") -> tuple[Any, ProfileMatch]:
    """Read ``path``, match it to ``graph`` and build the measured table of one processor.

    With ``device``, times covering several layers are split by the analytic latency on
    ``processor`` (default: the device's processor of the profile's kind) and the table is
    named after that processor; without, by MACs (then bytes), named after the profile's
    processor kind. Unmatched rows and layers are reported as :class:`ProfileMatchWarning`.

    Returns
    -------
    (MeasuredTable, ProfileMatch)
        The table (one row per layer, readable by the ``measured`` cost backend; metadata
        with the profile, the matching and per-op-family totals) and the match.
    """
    import warnings

    import pandas as pd

    from ..cost.measured import MeasuredTable, _frame

    profile = read_profile(path)
    name = pick_processor(device, profile, processor) if device is not None else (processor or profile.processor)
    weights = modeled_layers(device, name, graph, dtype) if device is not None else None
    match = match_profile(profile, graph, weights, dtype)
    for line in match.warnings():
        warnings.warn(line, ProfileMatchWarning, stacklevel=2)
    rows = pd.DataFrame({
        "processor": name, "index": np.arange(len(graph.layers)), "layer": [la.name for la in graph.layers],
        "op": [la.op for la in graph.layers], "latency_s": match.latency_s, "latency_std_s": np.nan,
        "energy_j": np.nan,
    })
    meta = {
        "model": graph.name, "granularity": graph.granularity, "source_sha256": graph.source_sha256,
        "device": getattr(device, "name", None), "processor": name, "backend": "profile",
        "profile": str(path), "profile_format": profile.format, "profile_processor": profile.processor,
        "match_mode": match.mode, "rows": len(profile.records), "rows_matched": match.rows_matched,
        "unmatched_rows": len(match.unmatched_rows), "unmatched_layers": match.unmatched_layers,
        "profile_total_s": profile.total_s, "layer_sum_s": float(match.latency_s.sum()),
        "whole_median_s": profile.whole_s, "invoke_overhead_s": profile.invoke_overhead_s,
        "family_totals_s": family_totals(match),
    }
    return MeasuredTable(_frame(rows, f"{graph.name} profile"), meta, ""), match
