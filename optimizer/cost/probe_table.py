"""Probe tables: single-kernel latencies measured on one device, the data a predictor is fitted on.

A probe table is a data file (CSV, optionally gzip-compressed, or JSON) kept beside the device
file that names it (``predictors:`` of a processor, :mod:`optimizer.hardware.schema`). CSV files
start with ``# key: value`` lines (values JSON) holding the provenance; JSON files are
``{"meta": {...}, "rows": [...]}``. One row per probe:

==================  ===========================================================================
column              meaning
==================  ===========================================================================
``id``              stable identifier of the probe (kind, configuration, dtype)
``kind`` ...        the kernel configuration (:data:`optimizer.graph.kernel_config.CONFIG_COLUMNS`)
``latency_s``       median seconds per run, less the runner's per-invocation overhead
``raw_s``           the median as timed (overhead included)
``spread``          inter-quartile range over the median of the timed samples
``samples``         timed samples behind the median
``source``          why it was measured: ``prior`` (the default sample), ``near`` (near a given
                    network's layers), ``adaptive`` (near a probe the predictor got wrong)
``reference_s``     optional: the speed reference's level while the probe's group was timed
                    (:mod:`optimizer.measure.speed_reference`); empty for probes timed without
==================  ===========================================================================

A table with ``reference_s`` is fitted at its median level (:attr:`ProbeTable.latency_s`): each
probe's time is scaled by the table's level over its group's, which takes out the host's drift
between groups.

Required metadata (:data:`REQUIRED_META`): ``format`` (``dnnplan-probes``), ``runner``,
``runtime`` (``tflite_xnnpack``, ``onnxruntime``, ``tflite_gpu``, ...), ``runtime_version``,
``dtype``, ``threads``, ``cpu``, ``measured_at_utc``, ``invoke_overhead_s`` (the runner's
per-invocation overhead, added once per network run by the predictor) and ``seed``. Optional:
``probe_version`` (the probe models' version, :data:`optimizer.measure.probe_models.PROBE_VERSION`;
1 when absent: a campaign refuses to resume a table whose probes have changed since) and
``node_overhead_s`` (what the runtime spends per node of a network beyond the kernel's work, which
a probe's time less the invocation overhead leaves out; added per kernel by the predictor; 0 when
absent) and, for onnxruntime FP32, ``activation_pass_points`` (a convolution's fused activation
other than a ReLU: seconds per output element at two output sizes; the ``relu6`` predictor stands
in when absent).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError, SchemaError
from ..fileio import atomic_write_bytes
from ..graph.kernel_config import CONFIG_COLUMNS, OP_KINDS, KernelConfig

FORMAT = "dnnplan-probes"
MEASURE_COLUMNS: tuple[str, ...] = ("latency_s", "raw_s", "spread", "samples", "source")
COLUMNS: tuple[str, ...] = ("id", *CONFIG_COLUMNS, "dtype", *MEASURE_COLUMNS)
#: columns a table may have (written where any row has a value)
OPTIONAL_COLUMNS: tuple[str, ...] = ("reference_s",)
REQUIRED_META: tuple[str, ...] = ("format", "runner", "runtime", "runtime_version", "dtype", "threads", "cpu",
                                  "measured_at_utc", "invoke_overhead_s", "seed")
SOURCES = ("prior", "near", "adaptive")
SUFFIXES = (".csv", ".csv.gz", ".json")


def probe_id(config: KernelConfig, dtype: str) -> str:
    """Stable identifier of a probe: its kind and a hash of configuration and dtype."""
    text = json.dumps([config.as_row(), dtype], sort_keys=True)
    return f"{config.kind}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class ProbeTable:
    """Rows of a probe table (a pandas DataFrame with :data:`COLUMNS`) and its metadata."""

    rows: Any
    meta: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    @property
    def runtime(self) -> str:
        return str(self.meta.get("runtime", ""))

    @property
    def dtype(self) -> str:
        return str(self.meta.get("dtype", ""))

    @property
    def threads(self) -> int:
        return int(self.meta.get("threads", 0))

    @property
    def invoke_overhead_s(self) -> float:
        return float(self.meta.get("invoke_overhead_s", 0.0))

    @property
    def node_overhead_s(self) -> float:
        return float(self.meta.get("node_overhead_s", 0.0))

    @property
    def activation_pass_points(self) -> list[tuple[int, float]] | None:
        """(output elements, seconds per element) of a convolution's fused non-ReLU activation at the
        sizes onnxruntime FP32's activation-pass pairs timed (:mod:`optimizer.measure.probe_campaign`),
        smallest first; None where not measured."""
        points = self.meta.get("activation_pass_points")
        return sorted((int(n), float(v)) for n, v in points) if points else None

    @property
    def columns(self) -> list[str]:
        """The columns a file of this table holds: :data:`COLUMNS` and the optional ones with values."""
        return [*COLUMNS, *(c for c in OPTIONAL_COLUMNS if c in self.rows and self.rows[c].notna().any())]

    @property
    def reference_s(self) -> float | None:
        """The table's speed-reference level: the median of its rows' (None: timed without one)."""
        if "reference_s" not in self.rows or not self.rows["reference_s"].notna().any():
            return None
        return float(self.rows["reference_s"].median())

    @property
    def latency_s(self) -> np.ndarray:
        """[rows] kernel seconds at the table's reference level (module doc); as measured for a
        table, or rows, timed without a reference."""
        lat = self.rows["latency_s"].to_numpy(dtype=np.float64)
        level = self.reference_s
        if level is None:
            return lat
        own = self.rows["reference_s"].to_numpy(dtype=np.float64)
        return np.where(np.isfinite(own) & (own > 0), lat * level / np.where(own > 0, own, 1.0), lat)

    @cached_property
    def sha256(self) -> str:
        """Hash of the rows and metadata (the key fitted predictors are cached under)."""
        body = self.rows[self.columns].to_csv(index=False, float_format="%.9g")
        return hashlib.sha256((json.dumps(self.meta, sort_keys=True, default=str) + body).encode()).hexdigest()

    @property
    def ids(self) -> set[str]:
        return set(self.rows["id"].astype(str))

    def configs(self) -> list[KernelConfig]:
        """The kernel configuration of every row."""
        return [KernelConfig.from_row(r) for r in self.rows[list(CONFIG_COLUMNS)].to_dict("records")]

    def families(self) -> dict[str, int]:
        """Probes per kernel family."""
        out: dict[str, int] = {}
        for c in self.configs():
            out[c.family] = out.get(c.family, 0) + 1
        return out

    def with_rows(self, records: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> ProbeTable:
        """A copy with ``records`` appended (a probe measured again replaces its old row)."""
        import pandas as pd

        new = _frame(records, self.path or "probe table") if records else self.rows.iloc[0:0]
        keep = self.rows[~self.rows["id"].isin(set(new["id"]))]
        rows = pd.concat([keep, new], ignore_index=True) if len(keep) else new.reset_index(drop=True)
        return ProbeTable(rows, {**self.meta, **(meta or {})}, self.path)


def empty_table(meta: dict[str, Any]) -> ProbeTable:
    """A table with no rows and ``meta``."""
    import pandas as pd

    return ProbeTable(pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS}), {"format": FORMAT, **meta})


def _frame(records: list[dict[str, Any]] | Any, where: str) -> Any:
    import pandas as pd

    df = records if isinstance(records, pd.DataFrame) else pd.DataFrame.from_records(records)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(f"{where}: probe table lacks column {missing[0]!r}; expected {', '.join(COLUMNS)}")
    unknown = [c for c in df.columns if c not in COLUMNS + OPTIONAL_COLUMNS]
    if unknown:
        raise SchemaError(f"{where}: unknown column {unknown[0]!r} in a probe table; expected {', '.join(COLUMNS)} "
                          f"and optionally {', '.join(OPTIONAL_COLUMNS)}")
    df = df[[*COLUMNS, *(c for c in OPTIONAL_COLUMNS if c in df.columns)]].copy()
    bad_kind = ~df["kind"].astype(str).isin(OP_KINDS)
    if bad_kind.any():
        i = int(np.flatnonzero(bad_kind.to_numpy())[0])
        raise SchemaError(f"{where}: row {i + 1}: kind {df['kind'].iloc[i]!r} is not a kernel kind; expected one "
                          f"of {', '.join(OP_KINDS)}")
    for col in (*CONFIG_COLUMNS[1:], "samples"):
        vals = pd.to_numeric(df[col], errors="coerce")
        bad = vals.isna() | (vals < 0) | (vals != np.floor(vals))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise SchemaError(f"{where}: row {i + 1}: {col} = {df[col].iloc[i]!r} is not a non-negative integer")
        df[col] = vals.astype(np.int64)
    for col in ("latency_s", "raw_s", "spread"):
        vals = pd.to_numeric(df[col], errors="coerce")
        bad = vals.isna() | (vals < 0) | ~np.isfinite(vals.fillna(0))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise SchemaError(f"{where}: row {i + 1}: {col} = {df[col].iloc[i]!r} is not a non-negative number")
        df[col] = vals.astype(np.float64)
    if "reference_s" in df:
        vals = pd.to_numeric(df["reference_s"], errors="coerce")
        bad = (vals.notna() & ((vals <= 0) | ~np.isfinite(vals.fillna(1)))) | (df["reference_s"].notna() & vals.isna())
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise SchemaError(f"{where}: row {i + 1}: reference_s = {df['reference_s'].iloc[i]!r} is not a positive "
                              "number of seconds (or empty)")
        df["reference_s"] = vals.astype(np.float64)
    bad_src = ~df["source"].astype(str).isin(SOURCES)
    if bad_src.any():
        i = int(np.flatnonzero(bad_src.to_numpy())[0])
        raise SchemaError(f"{where}: row {i + 1}: source {df['source'].iloc[i]!r}; expected one of {', '.join(SOURCES)}")
    for col in ("id", "kind", "dtype", "source"):
        df[col] = df[col].astype(str)
    if df["id"].duplicated().any():
        dup = df["id"][df["id"].duplicated()].iloc[0]
        raise SchemaError(f"{where}: probe {dup!r} appears twice")
    return df.reset_index(drop=True)


def _check_meta(meta: dict[str, Any], where: str) -> None:
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise SchemaError(f"{where}: probe table lacks header field {missing[0]!r} "
                          f"(`# {missing[0]}: ...`); expected {', '.join(REQUIRED_META)}")
    if meta["format"] != FORMAT:
        raise SchemaError(f"{where}: format is {meta['format']!r}, not a probe table ({FORMAT!r})")
    if meta["dtype"] not in ("fp32", "fp16", "int8"):
        raise SchemaError(f"{where}: dtype {meta['dtype']!r}; expected fp32, fp16 or int8")
    threads = meta["threads"]
    if not isinstance(threads, int) or threads < 1:
        raise SchemaError(f"{where}: threads {threads!r}; expected a positive integer")
    for key in ("invoke_overhead_s", "node_overhead_s"):
        over = meta.get(key, 0.0)
        if not isinstance(over, (int, float)) or isinstance(over, bool) or not math.isfinite(over) or over < 0:
            raise SchemaError(f"{where}: {key} {over!r}; expected non-negative seconds")
    points = meta.get("activation_pass_points")
    if points is not None and not (isinstance(points, list) and all(
            isinstance(pt, list) and len(pt) == 2 and isinstance(pt[0], int) and not isinstance(pt[0], bool)
            and pt[0] > 0 and isinstance(pt[1], (int, float)) and not isinstance(pt[1], bool)
            and math.isfinite(pt[1]) and pt[1] >= 0 for pt in points)):
        raise SchemaError(f"{where}: activation_pass_points {points!r}; expected [[output elements, "
                          "seconds per element], ...] with positive counts and non-negative seconds")


def read_probe_table(path: str | os.PathLike[str]) -> ProbeTable:
    """Read and validate a probe table (``.csv``, ``.csv.gz`` or ``.json``).

    Raises
    ------
    InputFileError
        The file is missing, unreadable or not one of those suffixes.
    SchemaError
        A corrupt file, a missing header field or column, or a value out of range (one line
        naming file, row and field).
    """
    import pandas as pd

    p = Path(path)
    where = str(p)
    if not p.is_file():
        raise InputFileError(f"{p}: no such probe table; measure one with `dnnplan calibrate --probes N`")
    if not str(p).endswith(SUFFIXES):
        raise InputFileError(f"{p}: probe tables are {', '.join(SUFFIXES)} files")
    try:
        raw = p.read_bytes()
        text = gzip.decompress(raw).decode("utf-8") if str(p).endswith(".gz") else raw.decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise SchemaError(f"{where}: not a readable probe table ({type(exc).__name__}); measure it again") from None
    if str(p).endswith(".json"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or not isinstance(doc.get("meta"), dict):
            raise SchemaError(f"{where}: expected {{\"meta\": {{...}}, \"rows\": [...]}}")
        meta, rows = dict(doc["meta"]), _frame(doc["rows"], where)
    else:
        meta = {}
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            key, sep, value = line[1:].partition(":")
            if not sep:
                raise SchemaError(f"{where}: header line {line[:60]!r} is not '# key: value'")
            try:
                meta[key.strip()] = json.loads(value.strip())
            except json.JSONDecodeError:
                raise SchemaError(f"{where}: header {key.strip()!r} holds {value.strip()[:40]!r}, not a JSON "
                                  "value") from None
        try:
            df = pd.read_csv(io.StringIO(text), comment="#")
        except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
            raise SchemaError(f"{where}: not a readable CSV probe table ({str(exc).splitlines()[0][:120]})") from None
        rows = _frame(df, where)
    _check_meta(meta, where)
    if len(rows) and (rows["dtype"] != meta["dtype"]).any():
        i = int(np.flatnonzero((rows["dtype"] != meta["dtype"]).to_numpy())[0])
        raise SchemaError(f"{where}: row {i + 1} is a {rows['dtype'].iloc[i]} probe in a {meta['dtype']} table")
    return ProbeTable(rows, meta, where)


def write_probe_table(table: ProbeTable, path: str | os.PathLike[str]) -> Path:
    """Write ``table`` atomically as CSV (gzip-compressed for ``.csv.gz``) or JSON, by suffix."""
    p = Path(path)
    if str(p).endswith(".json"):
        rows = json.loads(table.rows[table.columns].to_json(orient="records"))
        data = (json.dumps({"meta": table.meta, "rows": rows}, indent=1) + "\n").encode()
        return atomic_write_bytes(p, data)
    if not str(p).endswith((".csv", ".csv.gz")):
        raise ConfigError(f"{p}: a probe table ends in {', '.join(SUFFIXES)}")
    head = "".join(f"# {k}: {json.dumps(v)}\n" for k, v in table.meta.items())
    body = table.rows[table.columns].to_csv(index=False, float_format="%.6g")
    data = (head + body).encode()
    if str(p).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    return atomic_write_bytes(p, data)


def check_table_for(table: ProbeTable, *, runtime: str | None = None, dtype: str | None = None,
                    threads: int | None = None, where: str = "") -> None:
    """Refuse a table measured under another runtime, dtype or thread count than the device file
    says (one line naming the table, the field and both values)."""
    loc = f" (named by {where})" if where else ""
    for name, want, have in (("runtime", runtime, table.runtime), ("dtype", dtype, table.dtype),
                             ("threads", threads, table.threads)):
        if want is not None and want != have:
            raise ConfigError(f"{table.path}{loc}: probe table measured with {name} {have!r}, but the device file "
                              f"names it for {name} {want!r}; measure it with `dnnplan calibrate --probes` under "
                              f"{name} {want!r} or fix the entry")
