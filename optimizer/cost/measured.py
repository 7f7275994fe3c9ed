"""Measured per-layer tables: the file format written by ``dnnplan measure`` (or by a phone).

One row per (processor, layer), CSV or JSON:

=================  ===============================================================
column             meaning
=================  ===============================================================
``processor``      processor name of the device file (``cpu``, ``gpu``, ...)
``index``          layer index in the LayerGraph's execution order (0..L-1)
``layer``          layer name (must equal the graph's name at that index)
``op``             op family (informative)
``latency_s``      median measured time of the layer (fallback effects included)
``latency_std_s``  spread (standard deviation over repeats), optional
``energy_j``       measured energy, optional (else power model x latency)
=================  ===============================================================

CSV files may start with ``# key: value`` comment lines (model, device, dtype, backend,
threads, repeats, whole-network median, unattributed share); JSON files are
``{"meta": {...}, "rows": [...]}``.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError, SchemaError, UnknownNameError
from ..fileio import atomic_write_json, atomic_write_text
from ..graph.layergraph import LayerGraph
from .backends import BackendCosts, BackendInputs


def pd_unique(values: Any) -> list[Any]:
    """Unique values in order of appearance."""
    import pandas as pd

    return list(pd.unique(values.to_numpy(dtype=object)))


REQUIRED_COLUMNS = ("processor", "index", "layer", "latency_s")
COLUMNS = ("processor", "index", "layer", "op", "latency_s", "latency_std_s", "energy_j")


@dataclass(frozen=True)
class MeasuredTable:
    """Rows of a measured table (a pandas DataFrame) plus its header metadata."""

    rows: Any  # pandas.DataFrame with COLUMNS
    meta: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    @cached_property
    def _groups(self) -> dict[str, Any]:
        rows = self.rows.sort_values(["processor", "index"], kind="stable")
        return {str(k): g for k, g in rows.groupby(rows["processor"].astype(str), sort=False)}

    @cached_property
    def processors(self) -> list[str]:
        return [str(p) for p in pd_unique(self.rows["processor"])]

    def for_processor(self, name: str) -> Any:
        """This processor's rows sorted by layer index."""
        g = self._groups.get(name)
        return g if g is not None else self.rows.iloc[0:0]

    def whole_network_s(self, processor: str) -> float:
        """Sum of the per-layer medians on ``processor``."""
        return float(self.for_processor(processor)["latency_s"].sum())


def measured_frame(records: list[dict[str, Any]] | Any, where: str) -> Any:
    """Check ``records`` (row dicts or a DataFrame) against the measured-table columns and return
    them as a DataFrame in column order; ``where`` names the source in error messages."""
    import pandas as pd

    df = records if isinstance(records, pd.DataFrame) else pd.DataFrame.from_records(records)
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(f"{where}: measured table lacks column {missing[0]!r}; required: "
                          f"{', '.join(REQUIRED_COLUMNS)}")
    unknown = [c for c in df.columns if c not in COLUMNS]
    if unknown:
        raise SchemaError(f"{where}: unknown column {unknown[0]!r}; expected {', '.join(COLUMNS)}")
    for col in ("latency_s", "latency_std_s", "energy_j"):
        if col in df.columns:
            vals = pd.to_numeric(df[col], errors="coerce")
            bad = vals.isna() & df[col].notna() if col != "latency_s" else vals.isna()
            if bad.any() or (vals.dropna() < 0).any():
                i = int(np.flatnonzero(bad.to_numpy() | (vals.fillna(0) < 0).to_numpy())[0])
                raise SchemaError(f"{where}: row {i + 1}: {col} = {df[col].iloc[i]} is not a "
                                  "non-negative number (seconds or joules)")
            df[col] = vals
    idx = pd.to_numeric(df["index"], errors="coerce")
    if idx.isna().any():
        i = int(np.flatnonzero(idx.isna().to_numpy())[0])
        raise SchemaError(f"{where}: row {i + 1}: index = {df['index'].iloc[i]!r} is not an integer")
    df["index"] = idx.astype(int)
    df["processor"] = df["processor"].astype(str)
    df["layer"] = df["layer"].astype(str)
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = np.nan if col != "op" else ""
    return df[list(COLUMNS)].reset_index(drop=True)


def read_measured_table(path: str | os.PathLike[str]) -> MeasuredTable:
    """Read a measured table from ``.csv`` or ``.json``."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such measured table; produce one with `dnnplan measure`")
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            raise SchemaError(f"{p}: expected {{\"meta\": {{...}}, \"rows\": [...]}}")
        return MeasuredTable(measured_frame(doc["rows"], str(p)), dict(doc.get("meta") or {}), str(p))
    if p.suffix.lower() != ".csv":
        raise InputFileError(f"{p}: measured tables are .csv or .json files")
    meta: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        key, _, value = line[1:].partition(":")
        meta[key.strip()] = _scalar(value.strip())
    try:
        df = pd.read_csv(io.StringIO(text), comment="#")
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise SchemaError(f"{p}: not a readable CSV table ({str(exc).splitlines()[0]})") from None
    return MeasuredTable(measured_frame(df, str(p)), meta, str(p))


def _scalar(v: str) -> Any:
    try:
        return json.loads(v)
    except json.JSONDecodeError:
        return v


def write_measured_table(table: MeasuredTable, path: str | os.PathLike[str]) -> Path:
    """Write ``table`` atomically as CSV (with ``# key: value`` header) or JSON, by suffix."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        rows = json.loads(table.rows.to_json(orient="records"))
        return atomic_write_json(p, {"meta": table.meta, "rows": rows})
    if p.suffix.lower() != ".csv":
        raise ConfigError(f"{p}: output must end in .csv or .json")
    head = "".join(f"# {k}: {json.dumps(v)}\n" for k, v in table.meta.items())
    return atomic_write_text(p, head + table.rows.to_csv(index=False, float_format="%.9g"))


def check_matches(table: MeasuredTable, graph: LayerGraph, processor: str) -> np.ndarray:
    """Latencies [L] of ``processor`` after checking the rows name the graph's layers in order.

    Raises
    ------
    ConfigError
        Naming the first layer index whose name differs, or a count mismatch.
    """
    rows = table.for_processor(processor)
    names = rows["layer"].to_numpy(dtype=object)
    idx = rows["index"].to_numpy()
    where = table.path or "measured table"
    expected = np.array([la.name for la in graph.layers], dtype=object)
    n = min(len(names), len(expected))
    bad = np.flatnonzero((names[:n] != expected[:n]) | (idx[:n] != np.arange(n)))
    if bad.size:
        i = int(bad[0])
        raise ConfigError(f"{where}: layer {i} is {names[i]!r} (index {idx[i]}) but {graph.name!r} "
                          f"({graph.granularity} view) has {expected[i]!r} there; was the table "
                          "measured on this model and granularity?")
    if len(names) < len(expected):
        raise ConfigError(f"{where}: processor {processor!r} has {len(names)} layers but "
                          f"{graph.name!r} ({graph.granularity} view) has {len(expected)}; "
                          f"first missing layer {len(names)} {expected[len(names)]!r}")
    if len(names) > len(expected):
        raise ConfigError(f"{where}: processor {processor!r} has {len(names)} layers but "
                          f"{graph.name!r} has {len(expected)}; first extra layer {names[len(expected)]!r}")
    return rows["latency_s"].to_numpy(dtype=np.float64)


def measured_energy(table: MeasuredTable, processor: str) -> np.ndarray | None:
    """Measured energies [L] of ``processor``, or None if the table has none."""
    e = table.for_processor(processor)["energy_j"].to_numpy(dtype=np.float64)
    return None if np.isnan(e).all() else np.nan_to_num(e)


def measured_backend(inputs: BackendInputs, *,
                     table: MeasuredTable | str | os.PathLike[str] | None = None) -> BackendCosts:
    """The ``measured`` cost backend: per-layer latencies of ``table`` for every processor.

    Latencies were measured at each processor's maximum clock (fallback effects included) and
    are scaled by ``f_max / f`` at lower clocks (compute-bound DVFS scaling); energy is the
    table's where it has one, else active power x latency. Support comes from the device's op
    lists (:func:`optimizer.cost.analytic.layer_support`); no analytic latency is computed.
    """
    from .analytic import layer_support
    from .features import layer_arrays

    if table is None:
        raise ConfigError("the measured backend needs a table (--table FILE from `dnnplan measure`)")
    graph, device = inputs.graph, inputs.device
    mt = table if isinstance(table, MeasuredTable) else read_measured_table(table)
    for name in mt.processors:
        if name not in device.processor_names:
            raise UnknownNameError("processor", name, device.processor_names,
                                   where=f"{mt.path or 'measured table'} (device {device.name!r})")
    missing = [p for p in device.processor_names if p not in mt.processors]
    if missing:
        raise ConfigError(f"{mt.path or 'measured table'}: no rows for processor {missing[0]!r} of device "
                          f"{device.name!r} (table has {', '.join(mt.processors)}); measure every "
                          "processor or use a device file listing only the measured ones")
    lat = np.column_stack([check_matches(mt, graph, p) for p in device.processor_names]) / inputs.clock_ratio[None, :]
    energy = lat * inputs.power_w[None, :]
    for j, p in enumerate(device.processor_names):
        e = measured_energy(mt, p)
        if e is not None:
            energy[:, j] = e
    arrays = layer_arrays(graph, inputs.dtype)
    return BackendCosts(latency_s=lat, energy_j=energy, supported=layer_support(graph, device, inputs.dtype, arrays),
                        arrays=arrays, meta={"table": mt.path, "table_meta": dict(mt.meta)})
