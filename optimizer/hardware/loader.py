"""Load Device and Link files from ``search_spaces/`` by name or path, with one-line errors.

Names resolve to ``devices/<name>.yaml``, ``networks/<name>.yaml`` and ``servers/<name>.yaml`` of
the user's folders (``$DNNPLAN_SEARCH_SPACES``, ``--search-spaces``) and then the shipped
``search_spaces/`` (one resolver: :mod:`optimizer.shipped`). A schema violation
becomes a :class:`~optimizer.errors.SchemaError` naming the file, the field and the problem.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel

from .. import shipped
from ..errors import SchemaError
from ..shipped import shipped_root as search_spaces_dir  # noqa: F401  (re-exported)
from ..yamlio import load_model_yaml
from .schema import Device, Link

M = TypeVar("M", bound=BaseModel)


def shipped_names(folder: str) -> list[str]:
    """Names (file stems) of the YAML files in ``<folder>/`` of the user's and the shipped search
    spaces (:mod:`optimizer.shipped`)."""
    return shipped.names(folder)


def resolve_shipped(ref: str | os.PathLike[str], folder: str, kind: str) -> Path:
    """A YAML file by path (``.yaml``/``.yml`` or containing a separator) or by name in
    ``<folder>/`` of the user's and the shipped search spaces; an unknown name lists the valid ones."""
    return shipped.resolve(ref, folder, kind)


@lru_cache(maxsize=64)
def _load_cached(path: str, mtime: float, model: type[M]) -> M:
    return load_model_yaml(Path(path), model, context={"file": path})


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
        return (_load_file(path, self.model) if self.cached
                else load_model_yaml(path, self.model, context={"file": str(path.resolve())}))


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
