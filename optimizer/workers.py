"""Worker processes and interrupts: Ctrl-C reaches a terminal's whole process group, so the
parent alone handles it (stops its workers, prints one line) and workers ignore it.

Used by the batch runner's process pool and Dask LocalCluster and the parallel calibration of
``quantize``. The batch runner's pool workers also end when the process they serve ends
(:func:`worker_init`). :func:`proc_kb_bytes` reads the kernel's memory figures of a process or
the machine; :func:`release_free_memory` and :func:`collect_and_release` hand memory a process
no longer uses back to the system.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager


def ignore_sigint() -> None:
    """Initializer of worker processes: no KeyboardInterrupt tracebacks from workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: ``prctl`` option of Linux: the signal a process receives when its parent (thread) ends
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """End this process (SIGKILL) when the process that started it ends, however it ends.

    Linux's ``prctl(PR_SET_PDEATHSIG)`` (prctl(2)); elsewhere nothing is done. A worker whose
    parent was killed (``kill -9``, the OOM killer) would otherwise run its task to the end,
    unseen, holding memory and cores. A parent already gone when this runs ends the process too.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent or parent == 1:  # the parent ended before the signal was armed
        os._exit(1)


def watch_parent(pid: int, period_s: float = 0.5) -> threading.Thread:
    """A daemon thread that ends this process (exit status 1) once process ``pid`` has ended.

    For workers whose parent is not the process they serve: a ``forkserver`` pool's workers are
    children of the fork server, which outlives a killed main process."""
    def watch() -> None:
        while process_alive(pid):
            time.sleep(period_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="dnnplan-parent-watch", daemon=True)
    thread.start()
    return thread


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux: its ``/proc`` state)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_init(main_pid: int) -> None:
    """Initializer of the batch runner's pool workers: :func:`ignore_sigint`, :func:`die_with_parent`
    and :func:`watch_parent` of ``main_pid``, the process that submits the tasks."""
    ignore_sigint()
    die_with_parent()
    watch_parent(main_pid)


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while starting processes that run their own startup code (Dask's nannies
    and workers): a spawned process inherits the ignored signal, and Python and asyncio then
    install no KeyboardInterrupt handler in it. A Ctrl-C while they start is ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def stop_pool(pool: ProcessPoolExecutor | None) -> None:
    """Cancel the queued tasks and end the running ones now, without waiting for them (the
    parent records results, so nothing is half-written)."""
    if pool is None:
        return
    pool.shutdown(wait=False, cancel_futures=True)
    terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()


def proc_kb_bytes(path: str, field: str) -> int | None:
    """A ``kB`` field of a ``/proc`` file (``/proc/self/status``'s ``VmRSS``, ``/proc/meminfo``'s
    ``MemAvailable``) in bytes; None where the file or the field cannot be read."""
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def release_free_memory() -> None:
    """Hand memory this process has freed back to the system (glibc's ``malloc_trim(0)``):
    TensorFlow's CPU tensors come from ``malloc``, and after a large Keras call the freed
    blocks otherwise stay resident in the allocator's arenas, so the process's resident bytes
    would count them as held. No-op where glibc is not the C library."""
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)
    except OSError:
        pass


def collect_and_release() -> None:
    """Free what only reference cycles still hold (``gc.collect``), then :func:`release_free_memory`.

    A TensorFlow conversion leaves its frozen graphs and converter state in cycles: after
    converting VGG-16 (553 MB of float weights) the process holds 5.3 GB, 1.9 GB once collected
    and trimmed, and the next stage would otherwise start, and peak, that much higher."""
    gc.collect()
    release_free_memory()
