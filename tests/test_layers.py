"""The layering of docs/ARCHITECTURE.md, checked: no module imports a higher layer, not even inside a function.

graph/hardware -> cost -> thermal -> search -> plan -> workflow -> simulate/runtime/report -> batch -> cli
. Shared leaf modules (errors, fileio, yamlio, lazy, shipped) sit below everything. ``quantize``
reads and writes model files (TFLite flatbuffers, INT8 conversion) beside ``graph``; ``measure``
produces measured cost tables, so it sits with ``cost``."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "optimizer"
LAYER = {
    "errors": 0, "fileio": 0, "yamlio": 0, "lazy": 0, "shipped": 0,
    "workers": 0, "confine": 0, "folderlock": 0, "memory": 0, "npyfile": 0, "bounds": 0,
    "graph": 1, "hardware": 1, "quantize": 1,
    "measure": 2, "cost": 2,
    "thermal": 3,
    "search": 4,
    "plan": 5,
    "workflow": 6,
    "simulate": 7, "runtime": 7, "report": 7,
    "batch": 8,
    "cli": 9,
}


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "optimizer" or len(parts) < 2:
        return None
    return parts[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every optimizer module a file imports, at any depth (functions included), with its line."""
    rel = path.relative_to(ROOT.parent).with_suffix("")
    pkg_parts = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            if mod == "optimizer":  # from optimizer import cost (not: from optimizer import __version__)
                out += [(node.lineno, f"optimizer.{a.name}") for a in node.names if a.name in LAYER]
    return out


def _violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        own = _package("optimizer." + ".".join(path.relative_to(ROOT).with_suffix("").parts))
        if own is None or own not in LAYER:  # optimizer/__init__.py, __main__
            continue
        for line, mod in _imports(path):
            other = _package(mod)
            if other is None or other == own or other.startswith("__"):
                continue
            if other not in LAYER:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line} imports unknown layer {mod}")
            elif LAYER[other] > LAYER[own]:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {own} (layer {LAYER[own]}) imports "
                           f"{mod} (layer {LAYER[other]})")
    return bad


def test_every_package_has_a_layer():
    pkgs = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    mods = {p.stem for p in ROOT.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert (pkgs | mods) <= set(LAYER), sorted((pkgs | mods) - set(LAYER))


def test_no_import_goes_up_a_layer():
    bad = _violations()
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("src, expect", [
    ("def f():\n    from optimizer.cli import app\n", 1),
    ("from ..search import pipeline\n", 1),
    ("from . import rc\n", 0),
])
def test_the_walker_sees_function_level_and_relative_imports(tmp_path, monkeypatch, src, expect):
    pkg = tmp_path / "optimizer" / "thermal"
    pkg.mkdir(parents=True)
    (tmp_path / "optimizer" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "x.py").write_text(src)
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path / "optimizer")
    assert len(_violations()) == expect


def test_no_function_over_80_lines():
    """Functions in optimizer/ stay short enough to read (signature and docstring included)."""
    long = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name} "
                            f"({node.end_lineno - node.lineno + 1} lines)")
    assert not long, "\n".join(long)


#: modules that still hold several jobs, with the jobs to split them along; remove an entry once split
SPLIT_PENDING: dict[str, str] = {}
MAX_MODULE_LINES = 600
#: a docstring that says why a module must stay whole starts a sentence with this
WHOLE_BECAUSE = "one module because"


def test_no_module_over_600_lines_unless_its_docstring_says_why():
    """A module does one job; past about 600 lines it usually holds several."""
    long = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).as_posix()
        text = path.read_text()
        n_lines = text.count("\n")
        doc = ast.get_docstring(ast.parse(text)) or ""
        if n_lines > MAX_MODULE_LINES and rel not in SPLIT_PENDING and WHOLE_BECAUSE not in doc:
            long.append(f"{rel}: {n_lines} lines")
    assert not long, "\n".join(long)
    still_long = {rel for rel in SPLIT_PENDING if (ROOT.parent / rel).read_text().count("\n") > MAX_MODULE_LINES}
    assert still_long == set(SPLIT_PENDING), f"split now, drop from SPLIT_PENDING: {set(SPLIT_PENDING) - still_long}"


#: imports of another module's private names still to be made public (module: the names it imports)
PRIVATE_IMPORTS_PENDING: dict[str, set[str]] = {}


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore is its module's own; what others use is public."""
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                private = {a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")}
                if private:
                    found.setdefault(path.relative_to(ROOT.parent).as_posix(), set()).update(private)
    assert found == PRIVATE_IMPORTS_PENDING
