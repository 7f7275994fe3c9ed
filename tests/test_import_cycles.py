"""Import structure inside the lowest layers, read from the source with ``ast``.

* ``graph/`` never imports ``quantize/``: the TFLite flatbuffer reader both use lives in
  :mod:`optimizer.graph.tflite_flatbuffer`, below the quantizer.
* The modules of ``hardware/`` and of ``quantize/`` import each other without a cycle (imports
  inside functions count: a lazy import still ties the modules together).
"""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "optimizer"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(path: Path, root: Path, modules: set[str]) -> set[str]:
    """Modules of ``modules`` that ``path`` imports, at any depth; ``from pkg import mod`` names
    the submodule ``pkg.mod`` when it is one."""
    rel = list(path.relative_to(root.parent).with_suffix("").parts)
    package = rel[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out & modules


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the project modules it imports (``__init__`` files are their package)."""
    files = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(files)
    return {m: _targets(p, root, modules) - {m} for m, p in files.items()}


def cycle_in(package: str, graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the modules of ``package`` (its ``__init__`` excluded), or None."""
    inside = {m for m in graph if m.startswith(package + ".")}
    try:
        tuple(graphlib.TopologicalSorter({m: graph[m] & inside for m in inside}).static_order())
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_graph_does_not_import_the_quantizer():
    graph = import_graph()
    bad = sorted(f"{m} imports {t}" for m in graph if m.startswith("optimizer.graph")
                 for t in graph[m] if t.startswith("optimizer.quantize"))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["optimizer.hardware", "optimizer.quantize"])
def test_no_import_cycle_inside(package):
    cycle = cycle_in(package, import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_checks_see_a_lazy_cycle_and_a_lazy_quantize_import(tmp_path):
    root = tmp_path / "optimizer"
    for pkg in ("hardware", "graph", "quantize"):
        (root / pkg).mkdir(parents=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "hardware" / "a.py").write_text("from .b import x\n")
    (root / "hardware" / "b.py").write_text("def x():\n    from . import a\n")
    (root / "hardware" / "c.py").write_text("from .a import x\n")
    (root / "graph" / "g.py").write_text("def f():\n    from ..quantize import q\n")
    (root / "quantize" / "q.py").write_text("")
    graph = import_graph(root)
    cycle = cycle_in("optimizer.hardware", graph) or []
    # the walk may enter the cycle at either module (set order): a -> b -> a or b -> a -> b
    assert len(cycle) == 3 and cycle[0] == cycle[-1]
    assert set(cycle) == {"optimizer.hardware.a", "optimizer.hardware.b"}
    assert cycle_in("optimizer.quantize", graph) is None
    assert graph["optimizer.graph.g"] == {"optimizer.quantize", "optimizer.quantize.q"}
