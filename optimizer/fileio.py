"""Atomic file output, the output transaction of a command, and content hashing.

Every writer goes through :func:`atomic_write_bytes`: the bytes go to a temporary file in the
destination folder, which is renamed over the destination, so a crash never leaves a
half-written plan, table or model. A command's outputs form one :class:`OutputTransaction`:
while it is active, a write to one of its registered outputs lands in a temporary sibling
instead, and the siblings are renamed over their destinations only when the whole command
succeeded; on any error or interrupt they are removed, with the folders the transaction made.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import InputFileError, SchemaError

OutputKind = Literal["file", "folder", "files"]

#: fixes of the write errors a user can act on, by errno
_WRITE_FIXES = {
    errno.ENOSPC: "free disk space or choose another folder",
    errno.EDQUOT: "free disk space (quota exceeded) or choose another folder",
    errno.EFBIG: "the file is larger than this system allows (ulimit -f); choose another folder",
    errno.EROFS: "the file system is read-only; choose another folder",
    errno.EACCES: "choose a writable folder or fix its permissions",
    errno.EPERM: "choose a writable folder or fix its permissions",
}


#: write errors that are the machine's state (a full, size-limited or read-only disk), not a bug:
#: the CLI reports them as one line wherever a working file met them
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS})


def write_error(target: str | os.PathLike[str], what: str, exc: OSError, folder: Path | None = None) -> InputFileError:
    """The one-line error of an :class:`OSError` met writing ``target``: path, reason, fix."""
    reason = exc.strerror or type(exc).__name__
    where = f": folder {folder} does not accept new files ({reason})" if folder is not None else f": {reason}"
    fix = _WRITE_FIXES.get(exc.errno or 0, "choose another path")
    return InputFileError(f"{target}: cannot write the {what}{where}; {fix}")


def check_output_path(path: str | os.PathLike[str], what: str = "output", *, folder: bool = False) -> Path:
    """Check before any work that ``path`` can be written; missing parent folders are fine.

    Raises :class:`InputFileError` naming the path and the fix when a component of the path is a
    file, the path is a folder where a file is expected (or the reverse, ``folder=True``), it is
    a device or pipe, or a file cannot be created in the nearest existing folder. Writability is
    checked by trying (a file is created there and removed), not with :func:`os.access`, which
    approves ``/proc`` for root and knows nothing of read-only or full file systems.
    Folders are created when the output is written.
    """
    target = Path(path)
    if target.exists() and target.is_dir() != folder:
        kind = "a file" if folder else "a folder"
        raise InputFileError(f"{target}: cannot write the {what} there: it is {kind}; choose another path")
    if target.exists() and not folder and not stat.S_ISREG(target.stat().st_mode):
        raise InputFileError(f"{target}: cannot write the {what} there: it is a device or pipe, not a "
                             "regular file; choose a file path")
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputFileError(f"{target}: cannot write the {what}: {ancestor} is a file, not a folder; "
                             "choose another path")
    try:
        fd, probe = tempfile.mkstemp(prefix=".dnnplan-write-check.", dir=ancestor)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise write_error(target, what, exc, folder=ancestor) from None
    return target


@dataclass
class _Output:
    target: Path
    what: str
    kind: OutputKind
    staged: Path | None = None  # the temporary sibling written instead of ``target``
    backup: Path | None = None  # the earlier ``target`` while the transaction commits
    created: Path | None = None  # the top folder made for it (removed on failure)


_ACTIVE: ContextVar[OutputTransaction | None] = ContextVar("dnnplan_output_transaction", default=None)


class OutputTransaction:
    """All outputs of one command, renamed into place together or not at all.

    Register each output before the work starts (:meth:`add` checks it can be written, by
    trying). Inside ``with OutputTransaction():`` every :func:`atomic_write_bytes` (and
    :func:`staged_folder`) aimed at a registered output writes a temporary sibling instead;
    leaving the block without an exception renames the siblings over their destinations (an
    earlier file is moved aside first and put back if a later rename fails); leaving it by an
    exception, ``KeyboardInterrupt`` included, removes the siblings and the folders made for
    them, and turns an :class:`OSError` of an output into a one-line :class:`InputFileError`.

    Kinds: ``"file"``; ``"folder"`` (a folder replaced as a whole, e.g. export artifacts;
    ``folder/name`` is written inside the staged folder); ``"files"`` (a folder whose files
    written by this command are each a ``"file"`` output; other files stay).
    """

    def __init__(self) -> None:
        self._outputs: dict[Path, _Output] = {}
        self._token: Token[OutputTransaction | None] | None = None

    def __enter__(self) -> OutputTransaction:
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        if exc is None:
            self.commit()
            return
        error = None
        if isinstance(exc, OSError):
            hit = self._output_of(exc)
            if hit is not None:
                error = write_error(self.public(os.fsdecode(exc.filename)) if exc.filename else hit.target,
                                    hit.what, exc)
        self.discard()
        if error is not None:
            raise error from None

    def add(self, path: str | os.PathLike[str], what: str = "output file", kind: OutputKind = "file") -> Path:
        """Register an output after checking that it can be written; returns its path."""
        target = check_output_path(path, what, folder=kind != "file")
        self._outputs.setdefault(_key(target), _Output(target, what, kind))
        return target

    def owns(self, path: str | os.PathLike[str]) -> bool:
        """Whether a write to ``path`` is staged by this transaction."""
        key = _key(path)
        parent = self._outputs.get(key.parent)
        return (key in self._outputs and self._outputs[key].kind != "files") or (
            parent is not None and parent.kind in ("folder", "files"))

    def staged(self, path: str | os.PathLike[str]) -> Path:
        """Where a writer of ``path`` writes instead: its temporary sibling, made on first use
        (with the missing parent folders), or a path inside a staged folder."""
        key = _key(path)
        parent = self._outputs.get(key.parent)
        if parent is not None and parent.kind == "folder":
            return self.staged(parent.target) / key.name
        if key not in self._outputs and parent is not None and parent.kind == "files":
            self._outputs[key] = _Output(Path(path), parent.what, "file")
        out = self._outputs.get(key)
        if out is None or out.kind == "files":
            raise ValueError(f"{path}: not a staged output of this transaction")
        if out.staged is None:
            try:
                out.created = _make_parents(out.target)
                if out.kind == "folder":
                    out.staged = Path(tempfile.mkdtemp(prefix=f".{out.target.name}.tmp-", dir=out.target.parent))
                    out.staged.chmod(0o777 & ~_umask())  # as mkdir would make it, not mkdtemp's 0700
                else:
                    fd, tmp = tempfile.mkstemp(prefix=f".{out.target.name}.", suffix=".tmp", dir=out.target.parent)
                    os.close(fd)
                    out.staged = Path(tmp)
            except OSError as exc:
                raise write_error(out.target, out.what, exc) from None
        return out.staged

    def public(self, path: str | os.PathLike[str]) -> Path:
        """The path the user named for ``path``: inside a staged folder, the same file in its
        destination (for messages); any other path unchanged."""
        p = _key(path)
        for out in self._outputs.values():
            if out.staged is not None and out.kind == "folder" and _key(out.staged) in p.parents:
                return out.target / p.relative_to(_key(out.staged))
        return Path(path)

    def commit(self) -> None:
        """Rename every staged output over its destination (all or, on an error, none)."""
        done: list[_Output] = []
        current: _Output | None = None
        try:
            for out in self._outputs.values():
                if out.staged is None:
                    continue
                current = out
                if out.kind == "file" and out.target.is_dir():  # a folder took the name meanwhile: keep it
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(out.target))
                if out.target.exists() or out.target.is_symlink():
                    out.backup = _aside(out.target)
                os.replace(out.staged, out.target)
                out.staged = None
                done.append(out)
        except OSError as exc:
            for out in reversed(done):
                _remove(out.target)
                if out.backup is not None:
                    os.replace(out.backup, out.target)
                    out.backup = None
            if current is not None and current.backup is not None and not current.target.exists():
                os.replace(current.backup, current.target)
                current.backup = None
            self.discard()
            raise write_error(current.target if current else "output", current.what if current else "output",
                              exc) from None
        for out in done:
            if out.backup is not None:
                _remove(out.backup)
                out.backup = None

    def discard(self) -> None:
        """Remove every staged output and the folders made for them."""
        for out in self._outputs.values():
            if out.staged is not None:
                _remove(out.staged)
                out.staged = None
        for out in self._outputs.values():
            if out.created is not None:
                shutil.rmtree(out.created, ignore_errors=True)
                out.created = None

    def _output_of(self, exc: OSError) -> _Output | None:
        """The output an :class:`OSError` was met writing (by the paths it names)."""
        for name in (exc.filename, exc.filename2):
            if name is None:
                continue
            p = _key(os.fsdecode(name))
            for out in self._outputs.values():
                for base in (out.target, out.staged):
                    if base is not None and (p == _key(base) or _key(base) in p.parents):
                        return out
        return None


def active_transaction() -> OutputTransaction | None:
    """The output transaction of the running command, if any."""
    return _ACTIVE.get()


def register_output(path: str | os.PathLike[str], what: str = "output file", kind: OutputKind = "file") -> Path:
    """Register ``path`` with the running command's transaction (just check it without one)."""
    tx = _ACTIVE.get()
    return tx.add(path, what, kind) if tx is not None else check_output_path(path, what, folder=kind != "file")


@contextlib.contextmanager
def staged_folder(path: str | os.PathLike[str], what: str = "output folder") -> Iterator[Path]:
    """A temporary folder next to ``path`` that replaces it when the outputs commit: at the end
    of the command's transaction if it registered ``path``, else at the end of the block. It
    is removed when the block or the command fails (nothing half-written)."""
    tx = _ACTIVE.get()
    if tx is not None and _key(path) in tx._outputs and tx._outputs[_key(path)].kind == "folder":
        yield tx.staged(path)
        return
    with OutputTransaction() as own:
        own.add(path, what, "folder")
        yield own.staged(path)


def _key(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.abspath(path))


def make_folder(path: str | os.PathLike[str]) -> Path | None:
    """Create the folder ``path`` and its missing parents; return the top folder made (None when
    ``path`` existed). That folder, and nothing above it, is what a failed command may remove."""
    target = Path(path)
    top = _make_parents(target)
    if not target.is_dir():
        target.mkdir()
        top = top or target
    return top


def _make_parents(target: Path) -> Path | None:
    """Create the missing parents of ``target``; the top one made, or None."""
    top = None
    for parent in reversed(target.parents):
        if not parent.exists():
            parent.mkdir()
            top = top or parent
    return top


def _aside(target: Path) -> Path:
    """Rename ``target`` to a free hidden sibling name and return it."""
    backup = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    backup.rmdir()
    os.replace(target, backup)
    return backup


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def make_parent(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Create the missing parent folders of ``path`` (one-line error when impossible)."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        check_output_path(target, what)
        raise write_error(target, what, exc) from None
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace`` (to its staged sibling
    when ``path`` is an output of the running :class:`OutputTransaction`); an :class:`OSError`
    becomes an :class:`InputFileError` naming ``path``."""
    target = Path(path)
    tx = _ACTIVE.get()
    dest = tx.staged(target) if tx is not None and tx.owns(target) else make_parent(target)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise write_error(tx.public(target) if tx is not None else target, "output", exc) from None
    except BaseException:
        if tmp is not None:
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


def read_npz(path: str | os.PathLike[str], missing: str, max_rows: int | None = None) -> dict[str, Any]:
    """Every array of an ``.npz`` file (no pickles), as a dict; ``missing`` ends the message of
    the :class:`InputFileError` raised for a file that does not exist. Sizes come from the
    member headers first (:mod:`optimizer.npyfile`): at most ``max_rows`` rows of each array are
    read, and what is read must fit in the available memory."""
    from .npyfile import npz_members, read_rows

    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: {missing}")
    out = {}
    for name, m in npz_members(p).items():
        rows = None if max_rows is None or not m.shape or m.shape[0] <= max_rows else range(max_rows)
        out[name] = read_rows(p, m, rows)
    return out
