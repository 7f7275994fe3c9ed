"""Names that become paths stay inside the folder they belong to.

A job name becomes ``results/<name>``, a manifest's part ``file`` a file of its artifacts folder,
a cache key a file of the cache folder. Such a name is data, possibly from someone else's file, so
it must not reach outside its folder: :func:`inside` refuses an empty name, ``.`` and ``..``
components, an absolute path and a symbolic link (anywhere along the path) that resolves outside
the folder, naming the field the name came from. The check is the one of "path traversal"
advisories (CWE-22): resolve, then compare with the resolved folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath, PureWindowsPath

from .errors import ConfigError, DnnplanError

_SEPARATORS = re.compile(r"[\\/]")


def name_problem(name: object, *, single: bool = False) -> str | None:
    """Why ``name`` cannot be a relative path inside a folder (``single``: one path component),
    or None when it can. Only the text is judged; :func:`inside` also follows symbolic links."""
    if not isinstance(name, str) or not name.strip():
        return "is empty; expected a relative name"
    if "\x00" in name:
        return "holds a NUL character"
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).anchor:
        return "is an absolute path; expected a name relative to its folder"
    parts = _SEPARATORS.split(name)
    if single and len(parts) > 1:
        return "holds a folder separator; expected a plain name"
    if any(p in (".", "..") for p in parts):
        return "has a '.' or '..' component, which would leave its folder; expected a plain relative name"
    return None


def check_name(name: str, field: str, *, single: bool = True, error: type[DnnplanError] = ConfigError) -> str:
    """``name`` unchanged when it is a safe relative name (:func:`name_problem`), else ``error``
    naming ``field``."""
    problem = name_problem(name, single=single)
    if problem is not None:
        raise error(f"{field} {name!r} {problem}")
    return name


def inside(root: str | os.PathLike[str], name: str, field: str, *, single: bool = False,
           error: type[DnnplanError] = ConfigError) -> Path:
    """``root / name``, refused (``error`` naming ``field``) unless it stays inside ``root``.

    Parameters
    ----------
    root
        The folder the name belongs to (it need not exist yet).
    name
        A relative name given as data (a job name, a manifest's part file, a cache key).
    field
        How the message names where ``name`` came from, e.g. ``"manifest parts[1].file"``.
    single
        Require one path component (no folder separator).
    error
        The exception class raised (a :class:`~optimizer.errors.DnnplanError`).
    """
    check_name(name, field, single=single, error=error)
    target = Path(root) / name
    base = Path(root).resolve()
    real = target.resolve()
    if real != base and base not in real.parents:
        raise error(f"{field} {name!r} leads outside {root} (through a symbolic link to {real}); "
                    "expected a file inside that folder")
    return target
