"""Atomic file output and content hashing, shared by every writer.

Outputs are written to a temporary file in the destination directory and renamed, so a crash
never leaves a half-written plan, table or model.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import InputFileError, SchemaError


def check_output_path(path: str | os.PathLike[str], what: str = "output", *, folder: bool = False) -> Path:
    """Check before any work that ``path`` can be written; missing parent folders are fine.

    Raises :class:`InputFileError` naming the path and the fix when a component of the path is a
    file, the path is a folder where a file is expected (or the reverse, ``folder=True``), or the
    nearest existing folder is not writable. Folders are created when the output is written.
    """
    target = Path(path)
    if target.exists() and target.is_dir() != folder:
        kind = "a file" if folder else "a folder"
        raise InputFileError(f"{target}: cannot write the {what} there: it is {kind}; choose another path")
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputFileError(f"{target}: cannot write the {what}: {ancestor} is a file, not a folder; "
                             "choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputFileError(f"{target}: cannot write the {what}: folder {ancestor} is not writable; "
                             "choose another path or fix its permissions")
    return target


def make_parent(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Create the missing parent folders of ``path`` (one-line error when impossible)."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        check_output_path(target, what)
        raise
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``."""
    target = make_parent(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as indented JSON atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, or of every file under a directory (sorted relative paths)."""
    p = Path(path)
    h = hashlib.sha256()
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        if p.is_dir():
            h.update(str(f.relative_to(p)).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def read_json(path: str | os.PathLike[str], what: str = "JSON file") -> Any:
    """Parse a JSON document; a missing file, bad JSON or non-UTF-8 bytes raise one-line errors."""
    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such {what}")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{p}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError:
        raise SchemaError(f"{p}: not a UTF-8 text file; expected a {what}") from None


def read_npz(path: str | os.PathLike[str], missing: str) -> dict[str, Any]:
    """Every array of an ``.npz`` file (no pickles), as a dict; ``missing`` ends the message of
    the :class:`InputFileError` raised for a file that does not exist."""
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: {missing}")
    try:
        with np.load(p, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as exc:
        raise InputFileError(f"{p}: not a readable .npz file ({exc})") from None
