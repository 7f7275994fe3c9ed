"""Result store of a batch run: one folder per run, one sub-folder per task, a SQLite index.

Layout::

    RUN/run.json                    job name, tool version, task count
    RUN/job.json                    the validated job
    RUN/tasks/<task_id>/task.json   the task spec
    RUN/tasks/<task_id>/plan.json   the plan (done tasks)
    RUN/tasks/<task_id>/result.json status, metrics, error, wall time — written last, atomically
    RUN/index.sqlite                one row per task, rebuilt from the folders on open

A task is finished when its ``result.json`` exists; the index is derived data, so a run killed
at any point (even SIGKILL) resumes from the folders without losing or repeating finished work.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputFileError, SchemaError
from ..fileio import atomic_write_json, atomic_write_text
from .jobspec import JobSpec, TaskSpec

INDEX_COLUMNS = (
    "task_id", "kind", "model", "device", "network", "solver", "objectives", "seed", "dtype",
    "granularity", "status", "error", "evaluations", "space_size", "explored_fraction",
    "wall_time_s", "plan_path", "metrics",
)


@dataclass
class TaskOutcome:
    """What a worker returns for one task (status ``done`` or ``failed``)."""

    task_id: str
    status: str
    wall_time_s: float
    metrics: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    error: str | None = None
    log: str = ""


class ResultStore:
    """Folder-per-task store with an SQLite index (see module docstring)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ paths
    @property
    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    @property
    def index_path(self) -> Path:
        return self.root / "index.sqlite"

    def task_dir(self, task_id: str) -> Path:
        return self.tasks_dir / task_id

    # ------------------------------------------------------------------ life cycle
    @classmethod
    def open_existing(cls, root: str | os.PathLike[str]) -> ResultStore:
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

    def initialise(self, job: JobSpec, tasks: list[TaskSpec]) -> None:
        """Create the run folder (or reopen it) and write every task's spec."""
        self.tasks_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.root / "job.json", job.model_dump(mode="json"))
        atomic_write_json(self.root / "run.json", {"job": job.name, "tool_version": __version__,
                                                    "tasks": len(tasks)})
        for t in tasks:
            path = self.task_dir(t.task_id) / "task.json"
            if not path.exists():
                atomic_write_json(path, t.canonical())
        self.reindex()

    def status_of(self, task_id: str) -> str | None:
        """``done``, ``failed`` or None (not finished)."""
        path = self.task_dir(task_id) / "result.json"
        if not path.is_file():
            return None
        return json.loads(path.read_text())["status"]

    def record(self, task: TaskSpec, outcome: TaskOutcome) -> None:
        """Persist one outcome: plan and log first, ``result.json`` last (the commit point)."""
        d = self.task_dir(task.task_id)
        plan_path = None
        if outcome.plan is not None:
            atomic_write_json(d / "plan.json", outcome.plan)
            plan_path = str((d / "plan.json").relative_to(self.root))
        if outcome.log:
            atomic_write_text(d / "log.txt", outcome.log)
        atomic_write_json(d / "result.json", {
            "task_id": task.task_id, "status": outcome.status, "error": outcome.error,
            "wall_time_s": outcome.wall_time_s, "metrics": outcome.metrics, "search": outcome.search,
            "plan_path": plan_path,
        })
        with self._db() as db:
            db.execute(f"INSERT OR REPLACE INTO tasks VALUES ({','.join('?' * len(INDEX_COLUMNS))})",
                       self._row(task, json.loads((d / 'result.json').read_text())))

    # ------------------------------------------------------------------ index
    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection that commits on success and is always closed."""
        db = sqlite3.connect(self.index_path, timeout=30)
        try:
            db.execute(f"CREATE TABLE IF NOT EXISTS tasks ({', '.join(INDEX_COLUMNS)}, "
                       "PRIMARY KEY (task_id))")
            yield db
            db.commit()
        finally:
            db.close()

    @staticmethod
    def _row(task: TaskSpec, result: dict[str, Any] | None) -> tuple[Any, ...]:
        r = result or {}
        search = r.get("search") or {}
        return (task.task_id, task.kind, task.model, task.device, task.network, task.solver,
                ",".join(task.objectives or []), task.seed, task.dtype, task.granularity,
                r.get("status", "pending"), r.get("error"), search.get("evaluations"),
                search.get("space_size"), search.get("explored_fraction"), r.get("wall_time_s"),
                r.get("plan_path"), json.dumps(r.get("metrics") or {}, sort_keys=True))

    def records(self) -> list[tuple[TaskSpec, dict[str, Any] | None]]:
        """Every task with its ``result.json`` (None while pending), from the folders, by task id."""
        out = []
        for d in sorted(self.tasks_dir.glob("*/task.json")):
            task = TaskSpec.model_validate(json.loads(d.read_text()))
            res = d.parent / "result.json"
            out.append((task, json.loads(res.read_text()) if res.is_file() else None))
        return out

    def rows(self) -> list[tuple[Any, ...]]:
        """Index rows read from the task folders (the source of truth), sorted by task id."""
        return [self._row(task, result) for task, result in self.records()]

    def reindex(self) -> None:
        """Rebuild the SQLite index from the task folders."""
        rows = self.rows()
        with self._db() as db:
            db.execute("DELETE FROM tasks")
            db.executemany(f"INSERT INTO tasks VALUES ({','.join('?' * len(INDEX_COLUMNS))})", rows)

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
