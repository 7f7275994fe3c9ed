"""The one resolver of shipped data files (``search_spaces/``) and the user's folders over them.

The shipped search spaces are the package data of the top-level ``search_spaces`` package, found
with :func:`importlib.resources.files` (a checkout, an editable install and an installed wheel
alike; the wheel is unpacked, so the files are real paths). User folders overlay them: the
``os.pathsep``-separated folders of ``$DNNPLAN_SEARCH_SPACES`` (``dnnplan --search-spaces DIR``
prepends to it, so batch workers inherit it), each laid out like ``search_spaces/``
(``devices/``, ``networks/``, ``jobs/``, ...). A name resolves to the first folder holding it,
user folders first (a user's ``devices/pixel6.yaml`` wins over the shipped one); listings are the
union of all folders.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import ConfigError, InputFileError, UnknownNameError

ENV = "DNNPLAN_SEARCH_SPACES"
PACKAGE = "search_spaces"
YAML = (".yaml", ".yml")


def shipped_root() -> Path:
    """The shipped ``search_spaces/`` folder (package data of the ``search_spaces`` package).

    Next to ``optimizer/`` when the package cannot be imported as a regular package (an editable
    install made before it was one, or only a namespace portion such as a folder of that name in
    the working directory is found)."""
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError:
        root = None
    return root if isinstance(root, Path) else Path(__file__).resolve().parents[1] / PACKAGE


def user_roots() -> list[Path]:
    """The user's folders from ``$DNNPLAN_SEARCH_SPACES``, highest priority first."""
    return [Path(p).expanduser() for p in os.environ.get(ENV, "").split(os.pathsep) if p]


def roots() -> list[Path]:
    """Every folder searched for a name: user folders first, the shipped one last."""
    return [*user_roots(), shipped_root()]


def add_user_root(folder: str | os.PathLike[str]) -> Path:
    """Put ``folder`` in front of the user folders (``--search-spaces DIR``) for this process and
    its children; a folder that does not exist is a :class:`~optimizer.errors.ConfigError`."""
    p = Path(folder).expanduser()
    if not p.is_dir():
        raise ConfigError(f"--search-spaces {folder}: no such folder; give a folder laid out like search_spaces/ "
                          "(devices/, networks/, jobs/, ...)")
    os.environ[ENV] = os.pathsep.join([str(p.resolve()), *map(str, user_roots())])
    return p


@dataclass(frozen=True)
class Entry:
    """One named file: its name, path and whether it is shipped or from a user folder."""

    name: str
    path: Path
    shipped: bool


def _files(folder: Path, suffixes: tuple[str, ...], recursive: bool) -> list[Path]:
    if not folder.is_dir():
        return []
    found = folder.rglob("*") if recursive else folder.glob("*")
    return sorted(p for p in found if p.is_file() and p.name.lower().endswith(suffixes))


def stem(path: Path, suffixes: tuple[str, ...]) -> str:
    """The name of a data file: its file name without the matched suffix (``x.csv.gz`` -> ``x``)."""
    low = path.name.lower()
    for s in sorted(suffixes, key=len, reverse=True):
        if low.endswith(s):
            return path.name[: len(path.name) - len(s)]
    return path.stem


def entries(folder: str, suffixes: tuple[str, ...] = YAML, recursive: bool = False) -> list[Entry]:
    """Every file of ``<root>/<folder>/`` in every root, user folders first (a name may repeat:
    the first one wins in :func:`find`)."""
    shipped = shipped_root()
    return [Entry(stem(p, suffixes), p, root == shipped)
            for root in roots() for p in _files(root / folder, suffixes, recursive)]


def names(folder: str, suffixes: tuple[str, ...] = YAML, recursive: bool = False) -> list[str]:
    """Sorted names (file names without suffix) in ``folder`` over all roots."""
    return sorted({e.name for e in entries(folder, suffixes, recursive)})


def find(folder: str, name: str, suffixes: tuple[str, ...] = YAML, recursive: bool = False) -> Path | None:
    """The file called ``name`` in ``folder`` of the first root holding one, else None."""
    for e in entries(folder, suffixes, recursive):
        if e.name == name:
            return e.path
    return None


def looks_like_path(ref: str, suffixes: tuple[str, ...] = YAML) -> bool:
    """A reference is a path when it has a known suffix or a folder separator, else a name."""
    return ref.lower().endswith(suffixes) or os.sep in ref or (os.altsep is not None and os.altsep in ref)


def resolve(ref: str | os.PathLike[str], folder: str, kind: str, suffixes: tuple[str, ...] = YAML,
            recursive: bool = False) -> Path:
    """A data file by path, or by name in ``folder`` of the user folders and the shipped ones.

    A reference with a suffix or separator is a path and must exist
    (:class:`~optimizer.errors.InputFileError`); an unknown name lists the valid ones
    (:class:`~optimizer.errors.UnknownNameError`).
    """
    s = str(ref)
    p = Path(s).expanduser()
    if looks_like_path(s, suffixes):
        if not p.is_file():
            raise InputFileError(f"{p}: no such {kind} file")
        return p
    found = find(folder, s, suffixes, recursive)
    if found is None:
        raise UnknownNameError(kind, s, names(folder, suffixes, recursive))
    return found


def shown(path: Path) -> str:
    """``search_spaces/<...>`` for a file under a root (shipped or user), else the path as given:
    the portable form recorded in plans and reports."""
    for root in roots():
        try:
            return str(Path(PACKAGE) / path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)
