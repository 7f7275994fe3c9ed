"""Load Device and Link files from ``search_spaces/`` by name or path, with one-line errors.

Names resolve to ``search_spaces/devices/<name>.yaml``, ``networks/<name>.yaml`` and
``servers/<name>.yaml`` (override the root with ``$DNNPLAN_SEARCH_SPACES``). A schema violation
becomes a :class:`~optimizer.errors.SchemaError` naming the file, the field and the problem.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel

from ..errors import InputFileError, SchemaError, UnknownNameError
from ..yamlio import load_model_yaml
from .schema import Device, Link

M = TypeVar("M", bound=BaseModel)


def search_spaces_dir() -> Path:
    """``$DNNPLAN_SEARCH_SPACES`` or the repository's ``search_spaces/``."""
    env = os.environ.get("DNNPLAN_SEARCH_SPACES")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "search_spaces"


def shipped_names(folder: str) -> list[str]:
    """Names (file stems) of the YAML files in ``search_spaces/<folder>/``."""
    d = search_spaces_dir() / folder
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def resolve_shipped(ref: str | os.PathLike[str], folder: str, kind: str) -> Path:
    """A YAML file by path (``.yaml``/``.yml`` or containing a separator) or by name in
    ``search_spaces/<folder>/``; an unknown name lists the valid ones."""
    s = str(ref)
    p = Path(s)
    if p.suffix in (".yaml", ".yml") or os.sep in s:
        if not p.is_file():
            raise InputFileError(f"{p}: no such {kind} file")
        return p
    cand = search_spaces_dir() / folder / f"{s}.yaml"
    if not cand.is_file():
        raise UnknownNameError(kind, s, shipped_names(folder))
    return cand


@lru_cache(maxsize=64)
def _load_cached(path: str, mtime: float, model: type[M]) -> M:
    return load_model_yaml(Path(path), model)


def _load_file(path: Path, model: type[M]) -> M:
    return _load_cached(str(path.resolve()), path.stat().st_mtime, model)


@dataclass(frozen=True)
class ShippedYaml(Generic[M]):
    """One kind of YAML file shipped in ``search_spaces/<folder>/``: its names, and a validated
    model read by name or by path.

    :meth:`load` raises :class:`~optimizer.errors.UnknownNameError` for a name that is not
    shipped (listing the valid ones), :class:`~optimizer.errors.InputFileError` for a missing
    path or invalid YAML and :class:`~optimizer.errors.SchemaError` naming file, field, value and
    expectation. ``cached`` models are shared between loads of an unchanged file (read-only use).
    """

    folder: str
    kind: str
    model: type[M]
    cached: bool = False

    def names(self) -> list[str]:
        """Names (file stems) of the shipped files."""
        return shipped_names(self.folder)

    def load(self, name_or_path: str | os.PathLike[str]) -> M:
        """The model of a shipped file by name, or of any file by path."""
        path = resolve_shipped(name_or_path, self.folder, self.kind)
        return _load_file(path, self.model) if self.cached else load_model_yaml(path, self.model)


#: device files (``pixel6``), network links (``wifi_10``, ``lte``) and servers (``smartsplit_i5``)
DEVICES = ShippedYaml("devices", "device", Device, cached=True)
LINKS = ShippedYaml("networks", "network", Link, cached=True)
SERVERS = ShippedYaml("servers", "server", Device, cached=True)
device_names, load_device = DEVICES.names, DEVICES.load
link_names, load_link = LINKS.names, LINKS.load
server_names = SERVERS.names


def load_server(name_or_path: str | os.PathLike[str]) -> Device:
    """A server (a Device with a ``cloud`` processor) by name (``smartsplit_i5``) or path."""
    dev = SERVERS.load(name_or_path)
    if not any(p.kind == "cloud" for p in dev.processors):
        raise SchemaError(f"{name_or_path}: a server needs a processor of kind 'cloud'")
    return dev
