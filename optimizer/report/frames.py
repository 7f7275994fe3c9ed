"""Results → pandas DataFrames: plans, Pareto-front CSVs, search results and batch runs.

One *candidate frame* format is shared by plans, front CSVs and in-memory search results, so
every figure reads the same columns:

* objective columns with units in their names (``latency_s``, ``energy_j``, ``memory_bytes``,
  ``throughput_fps`` ...), in their natural sense (throughput is not negated);
* decision columns (``split``, ``processor``, ``clock_hz``, ``wire_dtype`` for splits;
  ``stages`` as text for pipelines);
* ``on_front`` (bool), ``chosen`` (bool: the decision rule's pick) and ``baseline`` (the
  baseline's name, or ``""`` for front points).

A batch run gives the result store's table instead: one row per task (see
:meth:`optimizer.report.runs.RunFolder.table`).
"""

from __future__ import annotations

import re

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputFileError, SchemaError
from ..fileio import read_json

#: objective key -> (axis name, display unit, factor from SI to the display unit, sense)
OBJECTIVE_UNITS: dict[str, tuple[str, str, float, str]] = {
    "latency_s": ("latency", "ms", 1e3, "min"),
    "energy_j": ("energy per frame", "mJ", 1e3, "min"),
    "memory_bytes": ("memory", "MB", 1e-6, "min"),
    "throughput_fps": ("throughput", "FPS", 1.0, "max"),
    "sustained_fps": ("sustained throughput", "FPS", 1.0, "max"),
    "peak_temp_c": ("peak temperature", "°C", 1.0, "min"),
    "time_to_throttle_s": ("time to throttle", "s", 1.0, "max"),
    "crossing_bytes": ("bytes uploaded", "kB", 1e-3, "min"),
}

#: the objectives of a split search (SmartSplit), required in a split front CSV
SPLIT_OBJECTIVES: tuple[str, ...] = ("latency_s", "energy_j", "memory_bytes")


def objective_columns(df: Any) -> list[str]:
    """Known objective columns of ``df`` in :data:`OBJECTIVE_UNITS` order (batch ``metric_``
    prefixes included)."""
    cols = set(df.columns)
    out = [k for k in OBJECTIVE_UNITS if k in cols]
    out += [f"metric_{k}" for k in OBJECTIVE_UNITS if f"metric_{k}" in cols]
    return out


_RISK = re.compile(r"^latency_(mean|regret|p\d{1,2}|cvar\d{1,2})_s$")


def objective_unit(column: str) -> tuple[str, str, float, str] | None:
    """``(name, unit, factor, sense)`` of a known objective column (batch ``metric_`` prefix
    allowed): one of :data:`OBJECTIVE_UNITS`, or a split's risk objective over a bandwidth trace
    (``latency_cvar95_s`` -> ``("cvar95 latency over the trace", "ms", 1e3, "min")``); else None."""
    key = column.removeprefix("metric_")
    if key in OBJECTIVE_UNITS:
        return OBJECTIVE_UNITS[key]
    m = _RISK.match(key)
    return (f"{m.group(1)} latency over the trace", "ms", 1e3, "min") if m else None


#: short column headers (terminal tables) of the objectives beyond latency, energy and memory
_SHORT = {"sustained_fps": "sust", "peak_temp_c": "peak", "time_to_throttle_s": "throttle"}


def short_label(column: str) -> str:
    """A narrow table header with its unit: ``cvar95 ms`` for ``latency_cvar95_s``, ``sust FPS``
    for ``sustained_fps``; the column itself when unknown."""
    unit = objective_unit(column)
    if unit is None:
        return column
    key = column.removeprefix("metric_")
    m = _RISK.match(key)
    return f"{m.group(1) if m else _SHORT.get(key, unit[0])} {unit[1]}"


def axis_label(column: str) -> str:
    """Axis label with its unit, e.g. ``"latency (ms)"`` for ``latency_s``."""
    unit = objective_unit(column)
    return column if unit is None else f"{unit[0]} ({unit[1]})"


def display_factor(column: str) -> float:
    """Factor from the column's SI value to its display unit (1 for unknown columns)."""
    return (objective_unit(column) or ("", "", 1.0, "min"))[2]


def sense(column: str) -> str:
    """``"min"`` or ``"max"``: which way the objective improves."""
    return (objective_unit(column) or ("", "", 1.0, "min"))[3]


@dataclass
class ReportInput:
    """One loaded input of a report: what it is, its DataFrame and the typed object behind it.

    ``kind`` is ``"plan"``, ``"front"``, ``"batch"`` or ``"thermal"``. ``plan`` is the validated
    :class:`~optimizer.plan.schema.Plan` (plans only); ``data`` holds the decoded thermal
    simulation (thermal only) or the run's ``run.json`` (batch only).
    """

    path: Path
    kind: str
    frame: Any
    plan: Any = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        if self.plan is not None:
            p = self.plan
            where = f"{p.device}" + (f" over {p.network}" if p.network else "")
            return f"{p.kind} plan: {p.model.name} on {where} ({p.search.solver})"
        if self.kind == "batch":
            return f"batch run {self.data.get('job', self.path.name)}"
        if self.kind == "thermal":
            return f"thermal simulation on {self.data.get('device', '?')}"
        return f"Pareto front {self.path.name}"


# ------------------------------------------------------------------------------------ loading
def load_run(path: str | os.PathLike[str]) -> Any:
    """Load a plan JSON, a Pareto-front CSV or a batch run folder as a pandas DataFrame.

    Parameters
    ----------
    path
        ``plan.json`` (schema v1; one row for the chosen candidate, one per baseline, plus the
        front a pipeline plan carries), ``front.csv`` (as written by ``dnnplan split --front``;
        one row per solution), a run folder of ``dnnplan batch run`` or the CSV table of
        ``dnnplan batch collect`` (one row per task), or a thermal simulation JSON
        (``SimulationResult.to_dict()``; one row per time step).

    Returns
    -------
    pandas.DataFrame
        ``df.attrs["kind"]`` says which it was (plan, front, batch, thermal) and
        ``df.attrs["source"]`` the path.

    Raises
    ------
    InputFileError
        The path does not exist, is none of the three, or the front is empty.
    SchemaError
        A plan that fails validation, or a front missing objective columns (named).
    """
    return load_input(path).frame


def load_input(path: str | os.PathLike[str]) -> ReportInput:
    """Load ``path`` as a :class:`ReportInput` (see :func:`load_run` for what is accepted)."""
    p = Path(path)
    if not p.exists():
        raise InputFileError(f"{p}: no such file or folder; expected a plan .json, a front .csv "
                             "or a batch run folder")
    if p.is_dir():
        return _load_batch(p)
    suffix = p.suffix.lower()
    if suffix == ".json":
        return _load_json(p)
    if suffix == ".csv":
        return _load_front_csv(p)
    raise InputFileError(f"{p}: not a run, plan or front (suffix {p.suffix or '(none)'!r}); expected a plan "
                         ".json, a front .csv or a batch run folder")


def _frame(rows: list[dict[str, Any]], kind: str, source: Path) -> Any:
    import pandas as pd

    df = pd.DataFrame(rows)
    for col, default in (("on_front", False), ("chosen", False), ("baseline", "")):
        if col not in df.columns:
            df[col] = default
    df.attrs.update(kind=kind, source=str(source))
    return df


def _load_json(p: Path) -> ReportInput:
    data = read_json(p, "plan JSON")
    if isinstance(data, dict) and "times_s" in data and "temps_c" in data:
        return _load_thermal(p, data)
    if not isinstance(data, dict) or "kind" not in data:
        raise InputFileError(f"{p}: not a plan (no 'kind' field) nor a thermal simulation (no 'times_s'); "
                             "expected a plan .json, a front .csv or a batch run folder")
    from ..plan.io import plan_from_dict

    plan = plan_from_dict(data, str(p))
    return ReportInput(p, "plan", plan_frame(plan, source=p), plan=plan)


def plan_frame(plan: Any, source: str | os.PathLike[str] = "") -> Any:
    """Candidate frame of a plan: the chosen candidate, each baseline, and a carried front.

    Parameters
    ----------
    plan
        A validated :class:`~optimizer.plan.schema.Plan`.
    source
        Recorded in ``df.attrs["source"]``.
    """
    pred = plan.predicted
    chosen: dict[str, Any] = {k: v for k, v in pred.model_dump(exclude={"extra"}).items() if v is not None}
    if plan.split is not None:
        s = plan.split
        chosen.update(split=s.layer, processor=s.head_processor or "", clock_hz=s.head_clock_hz,
                      wire_dtype=s.wire_dtype, crossing_bytes=s.bytes)
    if plan.stages:
        chosen["stages"] = _stages_text([st.model_dump() for st in plan.stages])
    rows = [{**chosen, "on_front": True, "chosen": True, "baseline": ""}]
    front = (plan.search.decision or {}).get("front") or []
    for item in front:
        obj = {k: v for k, v in (item.get("objectives") or {}).items() if v is not None}
        if obj == {k: chosen.get(k) for k in obj}:
            continue
        rows.append({**obj, "stages": _stages_text(item.get("stages") or []), "on_front": True,
                     "chosen": False, "baseline": ""})
    for name, base in plan.search.baselines.items():
        rows.append({**_decision_columns(base.get("decision") or {}),
                     **{k: v for k, v in (base.get("objectives") or {}).items() if v is not None},
                     "feasible": base.get("feasible", True), "on_front": False, "chosen": False,
                     "baseline": name})
    return _frame(rows, "plan", Path(source))


def _stages_text(stages: Sequence[Mapping[str, Any]]) -> str:
    return " | ".join(f"{st['processor']} {st['first_layer']}-{st['last_layer']}" for st in stages)


def _decision_columns(decision: Mapping[str, Any]) -> dict[str, Any]:
    if "split" in decision:
        return {k: decision.get(k) for k in ("split", "processor", "clock_hz", "wire_dtype")}
    if "stages" in decision:
        return {"stages": _stages_text(decision["stages"])}
    return {}


def result_frame(result: Any, layer_names: Sequence[str] | None = None) -> Any:
    """Candidate frame of an in-memory :class:`~optimizer.search.SearchResult`.

    Front candidates come first (``on_front``), the decision rule's choice marked ``chosen``
    (added as a row when the result has no front), then one row per baseline.

    Parameters
    ----------
    result
        A split or pipeline search result.
    layer_names
        Layer names of the searched graph; adds ``boundary_after_layer`` to split rows.
    """
    def row(c: Any) -> dict[str, Any]:
        r = {**_decision_columns(c.decision), **{k: float(v) for k, v in c.objectives.items()},
             "feasible": bool(c.feasible)}
        if "crossing_bytes" in c.metrics:
            r["crossing_bytes"] = float(c.metrics["crossing_bytes"])
        if layer_names is not None and "split" in c.decision:
            k = int(c.decision["split"])
            r["boundary_after_layer"] = layer_names[k - 1] if k > 0 else ""
        return r

    rows = [{**row(c), "on_front": True, "chosen": c.decision == result.best.decision, "baseline": ""}
            for c in result.front]
    if not any(r["chosen"] for r in rows):
        rows.append({**row(result.best), "on_front": bool(not result.front), "chosen": True, "baseline": ""})
    rows += [{**row(c), "on_front": False, "chosen": False, "baseline": name}
             for name, c in result.baselines.items()]
    return _frame(rows, "result", Path(""))


def _load_front_csv(p: Path) -> ReportInput:
    import numpy as np
    import pandas as pd

    try:
        df = pd.read_csv(p)
    except pd.errors.EmptyDataError:
        raise InputFileError(f"{p}: the front is empty (no header, no solutions); expected a Pareto front "
                             "CSV as written by 'dnnplan split --front'") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{p}: not a readable CSV: {str(exc).splitlines()[0]}") from None
    df.columns = [str(c).strip() for c in df.columns]
    if {"task_id", "status", "kind"} <= set(df.columns):
        # a table written by 'dnnplan batch collect --out table.csv': one row per task
        df.attrs.update(kind="batch", source=str(p))
        return ReportInput(p, "batch", df, data={"job": p.stem})
    found = objective_columns(df)
    if "split" in df.columns:
        missing = [c for c in SPLIT_OBJECTIVES if c not in df.columns]
        if missing:
            raise SchemaError(f"{p}: missing objective column(s) {', '.join(missing)}; a split front needs "
                              f"{', '.join(SPLIT_OBJECTIVES)} (found columns: {', '.join(df.columns)})")
    elif len(found) < 2:
        raise SchemaError(f"{p}: missing objective columns: a front needs at least two of "
                          f"{', '.join(OBJECTIVE_UNITS)} (found columns: {', '.join(df.columns) or 'none'})")
    if len(df) == 0:
        raise InputFileError(f"{p}: the front is empty (a header but no solutions)")
    for col in found:
        values = pd.to_numeric(df[col], errors="coerce").astype(float)
        bad = ~np.isfinite(values.to_numpy())
        if bad.any():
            i = int(bad.argmax())
            raise SchemaError(f"{p}: line {i + 2}, column {col}: {df[col].iloc[i]!r} is not a finite number")
        df[col] = values
    df["chosen"] = df["chosen"].astype(int).astype(bool) if "chosen" in df.columns else False
    df["on_front"] = True
    df["baseline"] = ""
    df.attrs.update(kind="front", source=str(p))
    return ReportInput(p, "front", df)


def _load_batch(p: Path) -> ReportInput:
    from .runs import RunFolder

    if not (p / "run.json").is_file():
        raise InputFileError(f"{p}: not a batch run folder (no run.json); expected a plan .json, a front .csv "
                             "or the --out folder of 'dnnplan batch run'")
    run = RunFolder(p)
    info = run.info()
    df = run.table()
    df.attrs.update(kind="batch", source=str(p))
    return ReportInput(p, "batch", df, data=info)


def _load_thermal(p: Path, data: dict[str, Any]) -> ReportInput:
    import pandas as pd

    try:
        df = pd.DataFrame({"time_s": data["times_s"], "fps": data["fps"],
                           **{f"temp_{n}_c": v for n, v in data["temps_c"].items()}})
    except (KeyError, ValueError, AttributeError, TypeError) as exc:
        raise SchemaError(f"{p}: not a thermal simulation (SimulationResult.to_dict()): {exc}") from None
    df.attrs.update(kind="thermal", source=str(p))
    return ReportInput(p, "thermal", df, data=data)
