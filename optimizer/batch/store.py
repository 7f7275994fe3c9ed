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
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputFileError
from ..fileio import atomic_write_json, atomic_write_text, write_error
from ..report.runs import INDEX_COLUMNS, RunFolder, task_row
from .jobspec import JobSpec, TaskSpec


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


class ResultStore(RunFolder):
    """Folder-per-task store with an SQLite index (see module docstring); the read side
    (rows, table, counts, info) is :class:`optimizer.report.runs.RunFolder`."""

    @property
    def index_path(self) -> Path:
        return self.root / "index.sqlite"

    def initialise(self, job: JobSpec, tasks: list[TaskSpec]) -> None:
        """Create the run folder (or reopen it) and write every task's spec."""
        try:
            self.tasks_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_error(self.root, "run folder", exc) from None
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
                       task_row(task.task_id, task.canonical(), json.loads((d / 'result.json').read_text())))

    # ------------------------------------------------------------------ index
    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection that commits on success and is always closed; a write failure (full
        disk, read-only folder) is a one-line :class:`InputFileError` naming the index."""
        try:
            db = sqlite3.connect(self.index_path, timeout=30)
            try:
                db.execute(f"CREATE TABLE IF NOT EXISTS tasks ({', '.join(INDEX_COLUMNS)}, "
                           "PRIMARY KEY (task_id))")
                yield db
                db.commit()
            finally:
                db.close()
        except sqlite3.OperationalError as exc:
            raise InputFileError(f"{self.index_path}: cannot write the run index: {exc}; free disk space or "
                                 "choose another run folder") from None

    def records(self) -> list[tuple[TaskSpec, dict[str, Any] | None]]:
        """Every task with its ``result.json`` (None while pending), from the folders, by task id."""
        return [(TaskSpec.model_validate(task), result) for _, task, result in self.task_docs()]

    def reindex(self) -> None:
        """Rebuild the SQLite index from the task folders."""
        rows = self.rows()
        with self._db() as db:
            db.execute("DELETE FROM tasks")
            db.executemany(f"INSERT INTO tasks VALUES ({','.join('?' * len(INDEX_COLUMNS))})", rows)
