"""Typer callbacks checking the size flags against their documented bounds (:mod:`optimizer.bounds`,
the one table, shared with the batch task fields)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..bounds import BOUNDS, Bound, check_bound

__all__ = ["BOUNDS", "Bound", "bounded", "check_bound"]


def bounded(command: str, flag: str) -> Callable[[Any], Any]:
    """Typer callback checking ``dnnplan COMMAND FLAG`` against :data:`BOUNDS` when parsed."""
    BOUNDS[command, flag]  # a missing entry fails at import, not at run time

    def callback(value: Any) -> Any:
        check_bound(command, flag, value)
        return value
    return callback
