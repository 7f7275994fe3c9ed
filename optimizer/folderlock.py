"""An exclusive lock on a folder that one command writes for a long time (a batch run folder).

The lock is ``flock(2)`` on a file in the folder, which the kernel releases when its holder
dies, however it dies; the file also holds the holder's PID, so a second command can name it.
A PID left in the file by a holder that died (SIGKILL, power loss) is not a lock: the next
command takes the folder over and says so.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import ConfigError, InputFileError

LOCK_FILE = "dnnplan.lock"  # no leading dot: dot files of a run folder are temporaries


class FolderLock:
    """``with FolderLock(folder, what):`` holds ``folder``'s lock for the block.

    Raises :class:`~optimizer.errors.ConfigError` naming the PID of the holder when another
    process holds it. :attr:`took_over` is the PID of a holder that died without releasing the
    folder (or None).
    """

    def __init__(self, folder: str | os.PathLike[str], what: str = "folder",
                 command: str = "another dnnplan command") -> None:
        self.folder = Path(folder)
        self.what, self.command = what, command
        self.took_over: int | None = None
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self.folder / LOCK_FILE

    def acquire(self) -> FolderLock:
        """Take the lock (without waiting) and write this PID into it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise InputFileError(f"{self.path}: cannot create the lock of the {self.what} "
                                 f"({exc.strerror or exc}); choose a writable folder") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _pid_in(fd)
            os.close(fd)
            who = f"PID {holder}" if holder else "another process"
            raise ConfigError(f"{self.folder}: {self.command} ({who}) is using this {self.what}; wait "
                              f"for it to finish, stop it, or choose another folder") from None
        previous = _pid_in(fd)
        if previous and previous != os.getpid():
            self.took_over = previous  # it held the lock file but not the lock: it is gone
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Clear the PID and release the lock (the lock file stays: removing it would race)."""
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _pid_in(fd: int) -> int | None:
    """The PID written in a lock file (None when empty or garbled)."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None
