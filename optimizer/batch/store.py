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
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InputFileError
from ..fileio import atomic_write_json, atomic_write_text, make_folder, write_error
from ..folderlock import LOCK_FILE, FolderLock
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
    (rows, table, counts, info) is :class:`optimizer.report.runs.RunFolder`.

    A run holds the folder's :class:`~optimizer.folderlock.FolderLock` from :meth:`initialise`
    to :meth:`close`, so two runs never compute into one folder. :attr:`created` is the top
    folder :meth:`initialise` made (None when the run folder existed): the only thing a failed
    first run may remove.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__(os.path.normpath(root))  # 'missing/..' is the folder it names, not a new one
        self.created: Path | None = None
        self._lock: FolderLock | None = None

    @property
    def index_path(self) -> Path:
        return self.root / "index.sqlite"

    def initialise(self, job: JobSpec, tasks: list[TaskSpec]) -> None:
        """Create the run folder (or reopen it), lock it, and write every task's spec; a task
        whose ``result.json`` is damaged (a truncated write) is set to run again, with a warning."""
        try:
            self.created = make_folder(self.root)
        except OSError as exc:
            raise write_error(self.root, "run folder", exc) from None
        self._check_is_a_run_folder()
        self._lock = FolderLock(self.root, "run folder", "another 'dnnplan batch run'").acquire()
        if self._lock.took_over is not None:
            warnings.warn(f"{self.root}: taking over the run folder from PID {self._lock.took_over}, which "
                          "ended without releasing it", stacklevel=2)
        try:
            self.tasks_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise write_error(self.root, "run folder", exc) from None
        atomic_write_json(self.root / "job.json", job.model_dump(mode="json"))
        atomic_write_json(self.root / "run.json", {"job": job.name, "tool_version": __version__,
                                                    "tasks": len(tasks)})
        for t in tasks:
            path = self.task_dir(t.task_id) / "task.json"
            if not path.exists() or _damaged(path):
                atomic_write_json(path, t.canonical())
            self._set_aside_if_damaged(path.with_name("result.json"))
        self.reindex()

    def _check_is_a_run_folder(self) -> None:
        """Refuse an existing folder holding files of its own (not an earlier run's): the run
        would write among them."""
        if self.created is not None or (self.root / "run.json").is_file():
            return
        try:
            other = sorted(p.name for p in self.root.iterdir() if p.name != LOCK_FILE)
        except OSError as exc:
            raise write_error(self.root, "run folder", exc) from None
        if other:
            raise InputFileError(f"{self.root}: not a batch run folder (it holds {other[0]!r} and no run.json); "
                                 "give a new or empty folder, or the folder of an earlier run, as --out")

    def close(self) -> None:
        """Release the run folder's lock."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _set_aside_if_damaged(self, result: Path) -> None:
        """Rename a damaged ``result.json`` to ``result.json.damaged`` (kept for inspection), so
        its task runs again."""
        if not result.exists() or not _damaged(result, "status"):
            return
        aside = result.with_name("result.json.damaged")
        os.replace(result, aside)
        warnings.warn(f"{result}: damaged (not a complete result; kept as {aside.name}); the task runs "
                      "again", stacklevel=3)

    def status_of(self, task_id: str) -> str | None:
        """``done``, ``failed`` or None (not finished, or a damaged result)."""
        path = self.task_dir(task_id) / "result.json"
        if not path.is_file() or _damaged(path, "status"):
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


def _damaged(path: Path, key: str | None = None) -> bool:
    """Whether ``path`` is not a JSON object (with ``key``, when given): a truncated or garbled write."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return not isinstance(doc, dict) or (key is not None and key not in doc)
