"""Batch search jobs (docs/ARCHITECTURE.md, ``batch/``): job files → tasks → local pool or Dask → store."""

from .jobspec import JobSpec, TaskSpec, load_job
from .runner import RunSummary, run_job
from .store import ResultStore, TaskOutcome
from .table import write_table

__all__ = ["JobSpec", "ResultStore", "RunSummary", "TaskOutcome", "TaskSpec", "load_job", "run_job",
           "write_table"]
