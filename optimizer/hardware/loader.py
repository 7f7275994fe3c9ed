"""Load Device and Link files from ``search_spaces/`` by name or path, with one-line errors.

Names resolve to ``search_spaces/devices/<name>.yaml``, ``networks/<name>.yaml`` and
``servers/<name>.yaml`` (override the root with ``$DNNPLAN_SEARCH_SPACES``). A schema violation
becomes a :class:`~optimizer.errors.SchemaError` naming the file, the field and the problem.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

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


def device_names() -> list[str]:
    """Names of the device files in ``search_spaces/devices/``."""
    return shipped_names("devices")


def link_names() -> list[str]:
    """Names of the network link files in ``search_spaces/networks/``."""
    return shipped_names("networks")


def server_names() -> list[str]:
    """Names of the server files in ``search_spaces/servers/``."""
    return shipped_names("servers")


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


def _load(path: Path, model: type[M]) -> M:
    return load_model_yaml(path, model)


@lru_cache(maxsize=64)
def _load_cached(path: str, mtime: float, model: type[M]) -> M:
    return _load(Path(path), model)


def _load_file(path: Path, model: type[M]) -> M:
    return _load_cached(str(path.resolve()), path.stat().st_mtime, model)


def load_device(name_or_path: str | os.PathLike[str]) -> Device:
    """A device by name (``pixel6``) or path to its YAML file."""
    return _load_file(resolve_shipped(name_or_path, "devices", "device"), Device)


def load_server(name_or_path: str | os.PathLike[str]) -> Device:
    """A server (a Device with a ``cloud`` processor) by name (``smartsplit_i5``) or path."""
    dev = _load_file(resolve_shipped(name_or_path, "servers", "server"), Device)
    if not any(p.kind == "cloud" for p in dev.processors):
        raise SchemaError(f"{name_or_path}: a server needs a processor of kind 'cloud'")
    return dev


def load_link(name_or_path: str | os.PathLike[str]) -> Link:
    """A network link by name (``wifi_10``, ``lte``) or path to its YAML file."""
    return _load_file(resolve_shipped(name_or_path, "networks", "network"), Link)
