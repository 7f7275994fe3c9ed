"""Per-operator profile files read into rows: the one job of this module.

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

The rows are matched to a graph's layers by :mod:`optimizer.measure.profile_match`; the
measured table is built by :mod:`optimizer.measure.profile_import`.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputFileError, SchemaError

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

#: onnxruntime execution providers -> processor kind (a node of a non-CPU provider is a fused
#: partition, like a TFLite delegate row)
ORT_PROVIDERS: dict[str, str] = {
    "CPUExecutionProvider": "cpu", "XnnpackExecutionProvider": "cpu", "NnapiExecutionProvider": "npu",
    "CoreMLExecutionProvider": "npu", "QNNExecutionProvider": "dsp", "CUDAExecutionProvider": "gpu",
    "TensorrtExecutionProvider": "gpu", "ROCMExecutionProvider": "gpu", "DmlExecutionProvider": "gpu",
    "OpenVINOExecutionProvider": "cpu", "WebGpuExecutionProvider": "gpu",
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
        bracketed = re.fullmatch(r"\[(.*)\](?::\d+)?", inner.strip(), flags=re.S)
        if bracketed:
            inner = bracketed.group(1)
        return [name.strip() for part in inner.split(", ") for name in part.split(";") if name.strip()]


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
        """Seconds of all the records."""
        return float(sum(record.time_s for record in self.records))

    @property
    def processor(self) -> str:
        """The processor kind that ran most of the profiled time (delegates say which; other
        rows run on the CPU)."""
        by_kind: dict[str, float] = {}
        for record in self.records:
            kind = record.processor or "cpu"
            by_kind[kind] = by_kind.get(kind, 0.0) + record.time_s
        return max(by_kind, key=lambda kind: by_kind[kind]) if by_kind else "cpu"


def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read ``path`` in whichever of :data:`FORMATS` its content is.

    Raises
    ------
    InputFileError
        The file is missing or unreadable.
    SchemaError
        The content is none of the accepted formats, or holds no operator rows.
    """
    file = Path(path)
    if not file.is_file():
        raise InputFileError(f"{file}: no such profile file")
    try:
        text = file.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputFileError(f"{file}: cannot read ({exc.strerror})") from None
    head = text.lstrip()[:1]
    if head in ("[", "{"):
        return _read_ort_json(text, str(file))
    text = "\n".join(_strip_logcat(line) for line in text.splitlines())
    if re.search(r"^\s*node type\s*,", text, flags=re.M):
        return _read_tflite_tables(text, str(file), csv_format=True)
    if (re.search(r"^\s*\[node type\]", text, flags=re.M | re.I) or _TEXT_ROW.search(text)
            or re.search(r"Operator-wise Profiling Info|=+ (Run Order|Summary by node type) =+", text)):
        return _read_tflite_tables(text, str(file), csv_format=False)
    what = "empty" if not text.strip() else "not a profile"
    raise SchemaError(f"{file}: {what}; expected {ACCEPTED}")


def _read_ort_json(text: str, where: str) -> Profile:
    """An onnxruntime profiler trace: one record per node, its median kernel time over the runs."""
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
    for run, name, op, duration, node_index, provider in kernel_events(events, runs):
        key = (name, op)
        per_node.setdefault(key, {})
        per_node[key][run] = per_node[key].get(run, 0.0) + duration
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
        for run, duration in times_by_run.items():
            node_sum[run] += duration
    records = []
    for key in sorted(per_node, key=lambda key: order[key]):
        times = np.zeros(n_runs)
        for run, duration in per_node[key].items():
            times[run] = duration
        records.append(ProfileRecord(key[0], key[1], float(np.median(times)), 1, kind[key], index[key]))
    run_s = np.array([run["dur"] for run in runs], dtype=np.float64) * 1e-6
    whole = float(np.median(run_s)) if runs else None
    # the least contended run: on a shared machine preemption between kernels only adds to a gap
    gap = float(max(0.0, np.min(run_s - node_sum))) if runs else None
    return Profile(where, "ort_json", tuple(records), whole, len(runs) or None, gap)


_TABLE_TITLE = re.compile(r"^=+\s*(.+?)\s*=+\s*$")
_TEXT_SEPARATOR = re.compile(r"\t|\s{2,}")  # benchmark_model pads with tabs; pasted logs often with spaces
_TEXT_ROW = re.compile(r"^\s*[A-Za-z_][\w]*(?:\t\s*|\s{2,})[\d.]+%?(?:(?:\t\s*|\s{2,})[\d.]+%?){3,}", re.M)


def _read_tflite_tables(text: str, where: str, *, csv_format: bool) -> Profile:
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
        title_match = _TABLE_TITLE.match(line.strip())
        if title_match:
            title, header = title_match.group(1), None
            continue
        cells = _split_cells(line, csv_format)
        if not cells:
            continue
        lowered = [cell.strip("[] ").lower() for cell in cells]
        if lowered and lowered[0] == "node type":
            header = lowered
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
        parsed = [_node_row(row, where) for row in tables["Run Order"]]
    elif tables.get("Summary by node type"):
        parsed = [_summary_row(row, where) for row in tables["Summary by node type"]]
    else:
        raise SchemaError(f"{where}: a TFLite benchmark log without an operator table (run benchmark_model "
                          "with --enable_op_profiling=true); expected " + ACCEPTED)
    records = [record for record in parsed if record is not None]
    if not records:
        raise SchemaError(f"{where}: the operator table has no rows with times; expected {ACCEPTED}")
    whole = _inference_average_s(text)
    gap = max(0.0, whole - sum(record.time_s for record in records)) if whole is not None else None
    return Profile(where, "tflite_csv" if csv_format else "tflite_text", tuple(records), whole, None, gap)


def _strip_logcat(line: str) -> str:
    """Drop an Android logcat prefix (``05-31 10:38:42.569 22206 22206 I tflite  : ``)."""
    prefix = re.match(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+[VDIWEF]\s+\S+\s*:\s?", line)
    return line[prefix.end():] if prefix else line


def _split_cells(line: str, csv_format: bool) -> list[str]:
    """The cells of one table line (none for a blank line or a line that is not a table row)."""
    if not line.strip():
        return []
    if csv_format:
        if "," not in line:
            return []
        return [cell.strip() for cell in line.split(",")]
    cells = [cell.strip() for cell in _TEXT_SEPARATOR.split(line.strip()) if cell.strip()]
    return cells if len(cells) > 1 else []


def _implied_header(cells: list[str]) -> list[str] | None:
    """Header of a row seen without its header line (a quoted fragment of a run-order table)."""
    if len(cells) >= 9 and cells[-1].startswith("["):
        return ["node type", "start", "first", "avg ms", "%", "cdf%", "mem kb", "times called", "name"]
    if len(cells) == 8 and cells[-1].startswith("["):
        return ["node type", "first", "avg ms", "%", "cdf%", "mem kb", "times called", "name"]
    return None


def _column_index(header: list[str], *names: str) -> int | None:
    """Position of the first of ``names`` the header has (None: none of them)."""
    for name in names:
        if name in header:
            return header.index(name)
    return None


def _number(text: str, where: str, what: str) -> float:
    """A table cell as a finite number >= 0 (a trailing % dropped)."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise SchemaError(f"{where}: {what} {text!r} is not a number; is the table cut or edited?") from None
    if not math.isfinite(value) or value < 0:
        raise SchemaError(f"{where}: {what} {text!r} must be a finite number >= 0")
    return value


def _node_row(cells: list[str], where: str) -> ProfileRecord | None:
    """A "Run Order" row (its cells, then its header joined by ``|``) as a record (None: no time)."""
    header = cells[-1].split("|")
    cells = cells[:-1]
    if "name" in header and len(cells) > len(header):  # CSV: the name itself had commas
        name_start = header.index("name")
        cells = cells[:name_start] + [", ".join(cells[name_start:])]
    avg_at = _column_index(header, "avg ms", "avg_ms")
    calls_at = _column_index(header, "times called")
    name_at = _column_index(header, "name")
    if avg_at is None or name_at is None or len(cells) <= max(avg_at, name_at):
        return None
    op = cells[0]
    name = cells[name_at]
    node_index = re.search(r"\]:(\d+)\s*$", name)
    return ProfileRecord(name=name, op_type=op, time_s=_number(cells[avg_at], where, f"avg ms of {op}") * 1e-3,
                         count=int(_number(cells[calls_at], where, "times called")) if calls_at is not None else 1,
                         processor=DELEGATES.get(op, "cpu"),
                         node_index=int(node_index.group(1)) if node_index else None)


def _summary_row(cells: list[str], where: str) -> ProfileRecord | None:
    """A "Summary by node type" row (cells, then header) as a record of all nodes of one type."""
    header = cells[-1].split("|")
    cells = cells[:-1]
    avg_at = _column_index(header, "avg ms", "avg_ms")
    count_at = _column_index(header, "count")
    if avg_at is None or len(cells) <= avg_at:
        return None
    op = cells[0]
    if op in ("AllocateTensors", "ModifyGraphWithDelegate"):
        return None
    return ProfileRecord(name=op, op_type=op, time_s=_number(cells[avg_at], where, f"avg ms of {op}") * 1e-3,
                         count=int(_number(cells[count_at], where, "count")) if count_at is not None else 1,
                         processor=DELEGATES.get(op, "cpu"), summary=True)


def _inference_average_s(text: str) -> float | None:
    """``Inference (avg): 12167.6`` (microseconds) of the benchmark summary line, if present."""
    summary = re.search(r"Inference \(avg\):\s*([\d.]+)", text)
    return float(summary.group(1)) * 1e-6 if summary else None


_RUN_STATS = re.compile(r"count=(\d+)\b.*?\bavg=([\d.eE+-]+)(?:.*?\bstd=([\d.eE+-]+))?")


def benchmark_summary(text: str) -> tuple[float, float, int] | None:
    """(average s, standard deviation s, runs) of a ``benchmark_model`` output: its timed runs'
    ``count=N ... avg=X std=Y`` line (microseconds; the line with most runs, i.e. not the
    warm-up's), else the ``Inference (avg)`` summary with no spread; None when neither is there."""
    best: tuple[float, float, int] | None = None
    for line in text.splitlines():
        stats = _RUN_STATS.search(_strip_logcat(line))
        if stats:
            count = int(stats.group(1))
            if best is None or count >= best[2]:
                best = (float(stats.group(2)) * 1e-6, float(stats.group(3) or 0.0) * 1e-6, count)
    if best is not None:
        return best
    average_s = _inference_average_s(text)
    return (average_s, 0.0, 1) if average_s is not None else None

