"""The GA's modules draw from one private generator per run, so a seed gives the same plan."""

from __future__ import annotations

import ast
import importlib
import random
from pathlib import Path

from optimizer.search import ga

SEARCH = Path(__file__).resolve().parents[1] / "optimizer" / "search"


def _imports_random(path: Path) -> bool:
    return any(isinstance(node, ast.Import) and any(a.name == "random" for a in node.names)
               for node in ast.walk(ast.parse(path.read_text(), str(path))))


def test_every_ga_module_that_draws_is_rebound_during_a_run():
    """A GA module drawing from the process-wide generator would make runs depend on other threads."""
    drawing = {f"optimizer.search.{p.stem}" for p in SEARCH.glob("ga*.py") if _imports_random(p)}
    assert drawing == set(ga.DRAWING_MODULES)
    modules = [importlib.import_module(name) for name in ga.DRAWING_MODULES]
    with ga.private_random(7):
        bound = {id(m.random) for m in modules}
        assert len(bound) == 1 and not any(m.random is random for m in modules)
        first = modules[1].random.random()
    assert all(m.random is random for m in modules)          # restored after the run
    assert first == random.Random(7).random()
