"""Will it fit? Sizes of what a command is about to allocate, checked against the host's memory.

An input can ask for more memory than the host has (an ``--input-shape`` of 100000x100000, many
frames of a large input): numpy then fails deep inside with a traceback, or the kernel's OOM
killer ends the command, and others with it. :func:`check_fits` refuses it first, in one line
naming what asked, its size and the memory available (``MemAvailable`` of ``/proc/meminfo``).
"""

from __future__ import annotations

from .errors import ConfigError
from .workers import proc_kb_bytes


def available_bytes() -> int | None:
    """Memory the kernel can give without swapping (``MemAvailable``); None where unknown."""
    return proc_kb_bytes("/proc/meminfo", "MemAvailable")


def gigabytes(n: float) -> str:
    """``123456789`` -> ``"0.12 GB"``."""
    return f"{n / 1e9:,.2f} GB"


def check_fits(nbytes: float, what: str, fix: str) -> None:
    """Raise :class:`~optimizer.errors.ConfigError` when ``nbytes`` exceed the available memory.

    Parameters
    ----------
    nbytes
        What the command is about to hold.
    what
        What asks for it, e.g. ``"--frames 50 of input x [1, 3, 640, 640] float32"``.
    fix
        What the user can do, e.g. ``"give fewer --frames"``.
    """
    available = available_bytes()
    if available is not None and nbytes > available:
        raise ConfigError(f"{what} needs {gigabytes(nbytes)}, more than the {gigabytes(available)} of memory "
                          f"available on this host; {fix}")
