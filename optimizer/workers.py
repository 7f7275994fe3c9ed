"""Worker processes and interrupts: Ctrl-C reaches a terminal's whole process group, so the
parent alone handles it (stops its workers, prints one line) and workers ignore it.

Used by the batch runner's process pool and the parallel calibration of ``quantize``.
"""

from __future__ import annotations

import signal
from concurrent.futures import ProcessPoolExecutor


def ignore_sigint() -> None:
    """Initializer of worker processes: no KeyboardInterrupt tracebacks from workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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
