"""Worker processes and interrupts: Ctrl-C reaches a terminal's whole process group, so the
parent alone handles it (stops its workers, prints one line) and workers ignore it.

Used by the batch runner's process pool and Dask LocalCluster and the parallel calibration of
``quantize``. :func:`proc_kb_bytes` reads the kernel's memory figures of a process or the machine.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager


def ignore_sigint() -> None:
    """Initializer of worker processes: no KeyboardInterrupt tracebacks from workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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
