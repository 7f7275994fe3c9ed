"""Run a job's tasks on a local process pool (default) or on Dask ``distributed``.

Shared inputs (graph and cost tables) are built once per input key in this process and
handed to the workers — scattered once per key on Dask — never rebuilt per task. Results are
written by this process only, each task's ``result.json`` last, so an interrupted run
(Ctrl-C or SIGKILL) resumes with no finished task lost or repeated. Workers ignore SIGINT (a
terminal's Ctrl-C reaches the whole process group): this process stops them and raises
:class:`~optimizer.errors.Interrupted` with the finished and remaining counts. Pool workers die
with this process when it is killed (:func:`optimizer.workers.worker_init`; a LocalCluster's
nannies already watch their parent). The run holds the run folder's lock throughout.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, Interrupted
from ..workers import sigint_ignored, stop_pool, worker_init
from .jobspec import JobSpec, TaskSpec
from .store import ResultStore, TaskOutcome
from .tasks import SharedInputs, build_inputs, check_tasks, execute_task

ProgressFn = Callable[[int, int, int, int], None]  # done, failed, remaining, total


@dataclass(frozen=True)
class RunSummary:
    """Counts after a run: tasks finished now, skipped as already finished, failures."""

    total: int
    ran: int
    skipped: int
    done: int
    failed: int
    wall_time_s: float
    backend: str


def pending_tasks(store: ResultStore, tasks: list[TaskSpec], retry_failed: bool) -> tuple[list[TaskSpec], int]:
    """Tasks still to run, and how many were skipped as finished."""
    todo = []
    for t in tasks:
        status = store.status_of(t.task_id)
        if status is None or (status == "failed" and retry_failed):
            todo.append(t)
    return todo, len(tasks) - len(todo)


def connect_dask(scheduler: str | None, local_cluster: int | None, timeout_s: float = 5.0) -> tuple[Any, Any]:
    """A ``distributed.Client`` for ``scheduler`` or a new LocalCluster (clear error if unreachable)."""
    import distributed

    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout=f"{timeout_s}s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ConfigError(f"--scheduler {scheduler}: cannot reach a Dask scheduler within "
                              f"{timeout_s:.0f} s ({type(exc).__name__}); start one with "
                              "'dask scheduler' or use --local-cluster N") from None
        return client, None
    with sigint_ignored():  # the spawned workers inherit it: Ctrl-C is this process's to handle
        cluster = distributed.LocalCluster(n_workers=local_cluster, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=50)
    return distributed.Client(cluster, set_as_default=False), cluster


def run_job(
    job: JobSpec,
    store: ResultStore,
    *,
    workers: int = 2,
    scheduler: str | None = None,
    local_cluster: int | None = None,
    retry_failed: bool = False,
    progress: ProgressFn | None = None,
    allow_commands: bool = False,
) -> RunSummary:
    """Run every unfinished task of ``job`` into ``store``; tasks that run a command
    (``measure_cmd``) only with ``allow_commands``."""
    if workers < 1:
        raise ConfigError(f"--workers {workers}: expected at least 1")
    t0 = time.perf_counter()
    tasks = job.expand()
    check_tasks(job.name, tasks, allow_commands=allow_commands)  # every name resolves before the run folder is created
    client = cluster = None
    if scheduler or local_cluster:
        client, cluster = connect_dask(scheduler, local_cluster)  # fail before writing anything
    try:
        store.initialise(job, tasks)
        todo, skipped = pending_tasks(store, tasks, retry_failed)
        counts = {"done": 0, "failed": 0}

        def on_result(task: TaskSpec, outcome: TaskOutcome) -> None:
            store.record(task, outcome)
            counts[outcome.status] += 1
            if progress:
                progress(counts["done"], counts["failed"], len(todo) - counts["done"] - counts["failed"], len(todo))

        if progress:
            progress(0, 0, len(todo), len(todo))
        graphs: dict[tuple[str, str, tuple[str, ...]], Any] = {}
        inputs = {key: build_inputs(key, [t for t in todo if t.input_key == key], graphs)
                  for key in dict.fromkeys(t.input_key for t in todo)}
        try:
            if client is not None:
                _run_dask(client, todo, inputs, on_result)
                backend = f"dask ({scheduler or f'LocalCluster x{local_cluster}'})"
            else:
                _run_pool(workers, todo, inputs, on_result)
                backend = f"process pool x{workers}"
        except KeyboardInterrupt:
            finished = sum(store.counts().get(k, 0) for k in ("done", "failed"))
            raise Interrupted(f"{finished} done, {len(tasks) - finished} remaining; re-run to resume") from None
    finally:
        store.close()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    final = store.counts()
    return RunSummary(total=len(tasks), ran=len(todo), skipped=skipped, done=final["done"],
                      failed=final["failed"], wall_time_s=time.perf_counter() - t0, backend=backend)


def _run_pool(workers: int, todo: list[TaskSpec], inputs: dict[Any, SharedInputs],
              on_result: Callable[[TaskSpec, TaskOutcome], None]) -> None:
    if not todo:
        return
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=worker_init,
                             initargs=(os.getpid(),)) as pool:
        futures: dict[Future[TaskOutcome], TaskSpec] = {}
        try:
            for t in todo:
                futures[pool.submit(execute_task, t, inputs[t.input_key])] = t
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    on_result(futures[f], f.result())
        except BaseException:
            stop_pool(pool)
            raise


def _run_dask(client: Any, todo: list[TaskSpec], inputs: dict[Any, SharedInputs],
              on_result: Callable[[TaskSpec, TaskOutcome], None]) -> None:
    import distributed

    if not todo:
        return
    with client.as_current():
        scattered = {key: client.scatter(value, broadcast=True, hash=False) for key, value in inputs.items()}
        futures = {client.submit(execute_task, t, scattered[t.input_key], key=f"task-{t.task_id}",
                                 pure=False): t for t in todo}
        try:
            for fut in distributed.as_completed(list(futures)):
                on_result(futures[fut], fut.result())
        except BaseException:
            client.cancel(list(futures))
            raise
