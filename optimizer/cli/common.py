"""State and helpers shared by the CLI command modules (consoles, options, JSON output)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from ..errors import check_between  # noqa: F401  (the commands check flag ranges with it)
from ..fileio import check_output_path, register_output

console = Console(soft_wrap=True)
console_err = Console(stderr=True, soft_wrap=True)


@dataclass
class CliState:
    debug: bool = False
    quiet: bool = False


STATE = CliState()


def print_wide(table: Any) -> None:
    """Print a table at full width: a pipe or file gets 120 columns instead of Rich's 80."""
    if console.is_terminal:
        console.print(table)
    else:
        Console(width=max(console.width, 120)).print(table)


def print_json(obj: Any) -> None:
    """Machine-readable output: JSON on stdout, nothing else."""
    sys.stdout.write(json.dumps(obj, indent=2, default=_json_default) + "\n")
    sys.stdout.flush()


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def human_count(n: float) -> str:
    """1234567 -> '1.23 M' (for MACs, params, bytes in tables)."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f}"


def parse_variant(items: list[str] | None) -> dict[str, Any]:
    """``["alpha=0.5", "input_size=160"]`` -> ``{"alpha": 0.5, "input_size": 160}`` (zoo builder arguments)."""
    from ..errors import ConfigError

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--variant {item!r}: expected KEY=VALUE, e.g. alpha=0.5 (mobilenet_v2's width multiplier)")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out[key.strip()] = value
    return out


INPUT_SHAPE_HELP = ("Full input shape [NAME:]D0,D1,... in the file's layout, batch included (repeatable, "
                    "onnxsim's form), e.g. x:1,3,640,640; needed for dynamic input dims.")


def input_shape_option() -> Any:
    """The ``--input-shape`` option of every command that reads a model file."""
    import typer

    return typer.Option(None, "--input-shape", help=INPUT_SHAPE_HELP)


def parse_input_shape_option(values: list[str] | None) -> dict[str, tuple[int, ...]] | None:
    """``--input-shape`` values → input name → shape (None when not given); see
    :func:`optimizer.graph.input_shapes.parse_input_shapes`."""
    from ..graph.input_shapes import parse_input_shapes

    return parse_input_shapes(values) or None


def output_file(value: Any) -> Any:
    """Typer callback of every file-output option: fail at parse time, before any work, when the
    path cannot be written (tried, not guessed), and make the file an output of the command's
    :class:`~optimizer.fileio.OutputTransaction` (written only when the whole command succeeds)."""
    if value is not None:
        register_output(value, "output file")
    return value


def output_folder(value: Any) -> Any:
    """Typer callback of a folder the command replaces as a whole (export artifacts)."""
    if value is not None:
        register_output(value, "output folder", "folder")
    return value


def output_files_folder(value: Any) -> Any:
    """Typer callback of a folder the command writes files into (report); other files stay."""
    if value is not None:
        register_output(value, "output folder", "files")
    return value


def state_file(value: Any) -> Any:
    """Typer callback of a file kept across runs (GA checkpoint, measurement cache): checked
    before any work, written as the work goes (not staged)."""
    if value is not None:
        check_output_path(value, "state file")
    return value


def store_folder(value: Any) -> Any:
    """Typer callback of a resumable store folder (batch run): checked, not staged, since each
    finished task is committed to it at once."""
    if value is not None:
        check_output_path(value, "run folder", folder=True)
    return value


@contextmanager
def stage_progress(first: str) -> Iterator[Callable[[str, int, int], None] | None]:
    """A Rich progress bar on stderr fed by ``update(stage, done, total)``; None with --quiet.
    ``first`` labels it until the first update."""
    if STATE.quiet:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console_err, transient=True) as bar:
        task = bar.add_task(first, total=None)

        def update(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)
        yield update
