"""Read-only view of a batch run folder: one row per task, as a pandas DataFrame.

The folder layout (written by :class:`optimizer.batch.ResultStore`, which extends this class
with the write side)::

    RUN/run.json                    job name, tool version, task count
    RUN/tasks/<task_id>/task.json   the task spec (canonical JSON)
    RUN/tasks/<task_id>/plan.json   the plan (done tasks)
    RUN/tasks/<task_id>/result.json status, metrics, error, wall time — written last, atomically

The task folders are the source of truth: a row is built from ``task.json`` and
``result.json`` only, so reading needs neither the batch package nor a writable folder.
``report/`` sits below ``batch/`` (docs/ARCHITECTURE.md, "Layers"): batch imports this module, never the reverse.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InputFileError, SchemaError

INDEX_COLUMNS = (
    "task_id", "kind", "model", "device", "network", "solver", "objectives", "seed", "dtype",
    "granularity", "status", "error", "evaluations", "space_size", "explored_fraction",
    "wall_time_s", "plan_path", "metrics",
)
#: fields of ``task.json`` a row needs (every canonical task spec has them)
TASK_FIELDS = ("kind", "model", "device", "network", "solver", "objectives", "seed", "dtype", "granularity")


def task_row(task_id: str, task: Mapping[str, Any], result: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """The index row (:data:`INDEX_COLUMNS`) of one task: its spec and its ``result.json`` (None
    while pending)."""
    r = result or {}
    search = r.get("search") or {}
    return (task_id, task["kind"], task["model"], task["device"], task.get("network"), task.get("solver"),
            ",".join(task.get("objectives") or []), task["seed"], task["dtype"], task.get("granularity"),
            r.get("status", "pending"), r.get("error"), search.get("evaluations"),
            search.get("space_size"), search.get("explored_fraction"), r.get("wall_time_s"),
            r.get("plan_path"), json.dumps(r.get("metrics") or {}, sort_keys=True))


class RunFolder:
    """A batch run folder, read-only (see module docstring)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    @property
    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    def task_dir(self, task_id: str) -> Path:
        return self.tasks_dir / task_id

    @classmethod
    def open_existing(cls, root: str | os.PathLike[str]) -> Any:
        """Open a run folder made by ``batch run`` (clear error if it is not one)."""
        store = cls(root)
        if not (store.root / "run.json").is_file():
            raise InputFileError(f"{store.root}: not a batch run folder (no run.json); "
                                 "give the --out folder of 'dnnplan batch run'")
        return store

    def info(self) -> dict[str, Any]:
        """``run.json``: job name, tool version, task count (one-line error if it is damaged)."""
        path = self.root / "run.json"
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise SchemaError(f"{path}: not valid JSON; the run folder is damaged") from None
        return info if isinstance(info, dict) else {}

    def task_docs(self) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
        """``(task_id, task.json, result.json or None)`` of every task, by task id.

        Raises
        ------
        SchemaError
            A task file that is not JSON or lacks a field of :data:`TASK_FIELDS`.
        """
        out = []
        for path in sorted(self.tasks_dir.glob("*/task.json")):
            task = _read_json(path)
            missing = [f for f in TASK_FIELDS if not isinstance(task, dict) or f not in task]
            if missing:
                raise SchemaError(f"{path}: a task file of the run is not valid (no {missing[0]!r}); "
                                  "the run folder is damaged")
            out.append((path.parent.name, task, _read_result(path.parent / "result.json")))
        return out

    def rows(self) -> list[tuple[Any, ...]]:
        """Index rows read from the task folders (the source of truth), sorted by task id."""
        return [task_row(task_id, task, result) for task_id, task, result in self.task_docs()]

    def table(self) -> Any:
        """All tasks as a pandas DataFrame (one row per task), sorted by task id; read-only."""
        import pandas as pd

        df = pd.DataFrame(self.rows(), columns=list(INDEX_COLUMNS))
        metrics = df.pop("metrics").map(json.loads)
        flat = pd.DataFrame(list(metrics), index=df.index)
        return pd.concat([df, flat.add_prefix("metric_")], axis=1)

    def counts(self) -> dict[str, int]:
        """Tasks by status (done / failed / pending); read-only."""
        out = {"done": 0, "failed": 0, "pending": 0}
        status_col = INDEX_COLUMNS.index("status")
        for row in self.rows():
            out[row[status_col]] = out.get(row[status_col], 0) + 1
        return out


def _read_result(path: Path) -> dict[str, Any] | None:
    """A task's ``result.json``; None while the task is pending, and (with a warning) when the
    file is damaged: ``batch run`` runs such a task again."""
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = None
    if not isinstance(doc, dict) or "status" not in doc:
        warnings.warn(f"{path}: damaged (not a complete result); the task counts as pending and "
                      "'dnnplan batch run' runs it again", stacklevel=3)
        return None
    return doc


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{path}: a task file of the run is not valid ({str(exc).splitlines()[0]}); "
                          "the run folder is damaged") from None
