"""The repository stands alone: every file a docstring or comment names is in it, and every section of
docs/METHODS.md that code cites exists; no work-log numbers in code, docstrings or tests."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("optimizer", "tests", "benchmarks", "models")
#: folders whose files a mention may name (results/, caches and virtual environments are not the repo's)
REPO_FOLDERS = ("optimizer", "tests", "benchmarks", "models", "docs", "search_spaces", "notebooks")
#: files the code writes, named in docstrings as outputs, not as files of the repository
OUTPUT_NAMES = {"report.md"}
#: files of other projects a docstring cites for what the code follows, with their project
EXTERNAL = {"hparams_config.py": "google/automl (efficientdet)", "s_resnet.py": "JiahuiYu/slimmable_networks",
            "ops.py": "tensorflow/tensorflow (python/framework)"}
#: a file named in prose: ``docs/METHODS.md``, ``optimizer/thermal/fit/steps.py``, ``PROTOCOL.md``
MENTION = re.compile(r"(?<![\w./:-])((?:[\w.-]+/)*[\w-]+\.(?:md|py))(?![\w/-])")
SECTION_CITE = re.compile(r"docs/METHODS\.md,? sections? ((?:\d+[a-z]?(?:\s*(?:,|and|-|–)\s*)?)+)")
#: work-log references: issue or session numbers (history lives in git and BENCHMARKS.md)
WORK_LOG = re.compile(r"\b(?:issues?|sessions?)\s+#?\d", re.IGNORECASE)


def _python_files() -> list[Path]:
    """The scanned Python files, this one left out (its patterns and examples are data)."""
    return sorted(p for folder in SCANNED for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts and p != Path(__file__).resolve())


@cache
def _repo_files() -> frozenset[str]:
    """Every file of the repository's own folders and its root, as a POSIX path from the root."""
    files = {p.name for p in ROOT.iterdir() if p.is_file()}
    for folder in REPO_FOLDERS:
        files |= {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts}
    return frozenset(files)


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text(encoding="utf-8")
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                first = node.body[0].lineno
                out += [(first + i, line) for i, line in enumerate(doc.splitlines())]
    return out


def _exists(mention: str) -> bool:
    """A path relative to the root or to a folder of the repository (``thermal/plant.py`` under
    ``optimizer/``), or a bare file name found anywhere in it."""
    files = _repo_files()
    if mention in files or mention in OUTPUT_NAMES or mention in EXTERNAL:
        return True
    if "NAME" in mention:  # a template: bench_NAME.py
        pattern = re.compile(r"(?:^|.*/)" + re.escape(mention).replace("NAME", r"[\w-]+") + "$")
        return any(pattern.match(f) for f in files)
    return any(f.endswith("/" + mention) for f in files)


def _methods_sections() -> set[str]:
    """Section labels of docs/METHODS.md (``1`` .. ``13``, ``8b``, ``8c``)."""
    text = (ROOT / "docs" / "METHODS.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,3} (\d+[a-z]?)\.", text, re.MULTILINE))


def test_every_file_named_in_a_docstring_or_comment_exists():
    missing = [f"{path.relative_to(ROOT)}:{line}: {m}" for path in _python_files() for line, text in _prose(path)
               for m in MENTION.findall(text) if not _exists(m)]
    assert not missing, "files named but not in the repository:\n" + "\n".join(missing)


def test_every_cited_methods_section_exists():
    sections = _methods_sections()
    assert {"1", "2", "3", "4", "5", "6", "7", "8", "8b", "8c", "9", "10", "11", "12", "13"} <= sections
    bad = []
    for path in [*_python_files(), *(ROOT / "search_spaces").rglob("*.yaml")]:
        text = path.read_text(encoding="utf-8")
        for cited in SECTION_CITE.findall(text):
            labels = re.findall(r"\d+[a-z]?", cited)
            bad += [f"{path.relative_to(ROOT)}: section {label}" for label in labels if label not in sections]
    assert not bad, "docs/METHODS.md has no such section:\n" + "\n".join(bad)


def test_no_reference_to_documents_outside_the_repository():
    """METHODS.md and DESIGN.md are cited by their place in the repository (docs/...)."""
    bare = re.compile(r"(?<![\w/])(?:METHODS|DESIGN)\.md|shared/")
    hits = [f"{path.relative_to(ROOT)}:{n}" for path in _python_files()
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if bare.search(line)]
    assert not hits, "\n".join(hits)


def test_no_work_log_numbers_in_code_docstrings_or_tests():
    """Code says what it does, not which issue or session changed it."""
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in _python_files()
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if WORK_LOG.search(line)]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("text,expect", [
    ("# see docs/METHODS.md section 2 and optimizer/thermal/fit/steps.py", ["docs/METHODS.md",
                                                                            "optimizer/thermal/fit/steps.py"]),
    ("# (optimizer/measure/PROTOCOL.md); https://example.org/a/README.md", ["optimizer/measure/PROTOCOL.md"]),
    ("# the module optimizer.thermal.fit, a .md file", []),
])
def test_mentions_are_found_in_prose(text, expect):
    assert MENTION.findall(text) == expect


def test_work_log_pattern():
    number = "31"  # kept apart so that a plain grep for work-log numbers finds nothing in this file either
    assert WORK_LOG.search(f"fixed in issue {number}") and WORK_LOG.search(f"Session {number}: ...")
    assert not WORK_LOG.search("an issue with the trace") and not WORK_LOG.search("each session's")
