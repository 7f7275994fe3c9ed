"""README = tool: the README's command table names only commands and flags the
CLI has, every command is in the table, and each command's ``--help`` runs (in-process)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from optimizer.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"
ROOT = typer.main.get_command(app)
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def _opts(command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *getattr(p, "secondary_opts", ())) if o.startswith("-")}


GLOBAL = _opts(ROOT) | {"--help"}


def _leaves(group=ROOT, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    out: dict[tuple[str, ...], object] = {}
    for name, sub in group.commands.items():
        if hasattr(sub, "commands"):
            out.update(_leaves(sub, (*path, name)))
        else:
            out[(*path, name)] = sub
    return out


LEAVES = _leaves()


def _table_rows() -> list[tuple[str, str]]:
    """(command cell, description cell) of each row of the table under '## Commands'."""
    text = README.read_text().split("## Commands", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in text.splitlines():
        if line.startswith("| `dnnplan"):
            cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
            rows.append((cells[0].replace("\\|", "|"), "|".join(cells[1:]).replace("\\|", "|")))
    return rows


def _usages(cell: str) -> list[tuple[tuple[str, ...], str]]:
    """(command path, usage text) of every ```dnnplan ...``` span; ``a|b`` subcommands expand."""
    out = []
    for span in re.findall(r"`(dnnplan [^`]*)`", cell):
        words = span.split()[1:]
        while words and words[0].startswith("-"):  # global flags before the command
            words = words[1:]
        paths: list[tuple[str, ...]] = [()]
        group = ROOT
        while words and hasattr(group, "commands") and all(w in group.commands for w in words[0].split("|")):
            alts = words[0].split("|")
            paths = [(*p, a) for p in paths for a in alts]
            group = group.commands[alts[0]]
            words = words[1:]
        assert paths != [()], f"README usage {span!r} names no dnnplan command"
        out.extend((p, span) for p in paths)
    return out


ROWS = _table_rows()
USAGES = [u for cell, _ in ROWS for u in _usages(cell)]


def test_the_table_is_read():
    assert len(ROWS) >= 20 and len(USAGES) >= len(LEAVES)


def test_every_command_is_in_the_table():
    named = {path for path, _ in USAGES}
    missing = sorted(" ".join(p) for p in LEAVES if p not in named)
    assert not missing, f"commands missing from the README's table: {missing}"


@pytest.mark.parametrize("path, usage", USAGES, ids=[f"{' '.join(p)}: {u[:60]}" for p, u in USAGES])
def test_every_flag_of_a_usage_exists_and_help_runs(path, usage):
    assert path in LEAVES, f"README names 'dnnplan {' '.join(path)}', which is not a command"
    known = _opts(LEAVES[path]) | GLOBAL
    unknown = sorted(set(FLAG.findall(usage.split(" ", 1)[1])) - known)
    assert not unknown, f"README usage {usage!r}: flags {unknown} are not options of 'dnnplan {' '.join(path)}'"
    res = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert all(f in res.output for f in FLAG.findall(usage) if f in _opts(LEAVES[path]))


@pytest.mark.parametrize("cell, description", ROWS, ids=[c[:50] for c, _ in ROWS])
def test_flags_quoted_in_descriptions_belong_to_the_row(cell, description):
    """A flag in backticks in a row's description is an option of one of the row's commands."""
    known = set().union(*(_opts(LEAVES[p]) for p, _ in _usages(cell))) | GLOBAL
    quoted = {f for span in re.findall(r"`([^`]*)`", description) for f in FLAG.findall(span)
              if span.startswith("-")}
    assert not quoted - known, f"row {cell!r} describes flags {sorted(quoted - known)} its commands lack"


def test_global_flags_named_in_the_text_exist():
    text = README.read_text().split("## Commands", 1)[1].split("\n## ", 1)[0]
    para = text.split("global flags", 1)[1].split("go before the command", 1)[0]
    named = set(FLAG.findall(para))
    assert {"--quiet", "--debug", "--search-spaces"} <= named <= GLOBAL
