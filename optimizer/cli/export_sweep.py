"""``dnnplan export-sweep``: export and check a model at many boundaries before planning."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from . import app
from .bounds import bounded
from .common import (
    STATE,
    check_between,
    console,
    console_err,
    print_wide,
    input_shape_option,
    parse_input_shape_option,
    parse_variant,
    print_json,
    state_file,
)

if TYPE_CHECKING:
    from ..runtime.cut_sweep import CaseResult


@app.command("export-sweep")
def export_sweep(
    model: str = typer.Argument(..., help="Zoo network or .onnx/.tflite/.keras file."),
    boundaries: str = typer.Option("auto", "--boundaries", help="Op-view boundaries to cut at, e.g. 0,17,L "
                                   "(L = the layer count), or 'auto': 0, L and a spread between them (inside "
                                   "blocks, after reshapes, around custom and shape-computing operators)."),
    between: int = typer.Option(8, "--between", callback=bounded("export-sweep", "--between"),
                                help="Interior boundaries 'auto' chooses at least."),
    kinds: str = typer.Option("split,pipeline2,pipeline3", "--kinds", help="Plans to make: splits at every "
                              "boundary, 2-stage pipelines at every interior one, 3-stage pipelines over pairs."),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32, fp16 or int8 parts of a zoo/.keras network (a model "
                              "file is cut in its own dtype: quantize it first for INT8)."),
    variant: Optional[list[str]] = typer.Option(None, "--variant", help="Zoo builder argument KEY=VALUE."),
    input_shape: Optional[list[str]] = input_shape_option(),
    frames: int = typer.Option(3, "--frames", callback=bounded("export-sweep", "--frames"),
                               help="Frames each plan runs with --check."),
    samples: int = typer.Option(16, "--samples", callback=bounded("export-sweep", "--samples"),
                                help="INT8 calibration samples per export."),
    seed: int = typer.Option(0, "--seed", help="Weight seed of zoo networks, calibration and input frames."),
    min_agreement: float = typer.Option(0.99, "--min-agreement", help="Top-1 agreement a plan must reach."),
    journal: Optional[str] = typer.Option(None, "--journal", callback=state_file, help="JSON-lines file of "
                                          "finished cases: written after each, read back to resume."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    """Export the model at many boundaries and run each plan with --check: which cuts load and agree
    with the single file (exit 1 when any fails or disagrees; refused cuts say why)."""
    from ..errors import ConfigError
    from ..graph import load_graph
    from ..runtime.cut_sweep import export_sweep as sweep
    from ..runtime.cut_sweep import parse_boundaries, sweep_boundaries, sweep_cases

    check_between("--min-agreement", min_agreement, 0.0, 1.0, "a top-1 agreement")
    if dtype not in ("fp32", "fp16", "int8"):
        raise ConfigError(f"--dtype {dtype}: expected fp32, fp16 or int8")
    shapes = parse_input_shape_option(input_shape)
    args = parse_variant(variant)
    if dtype != "fp32" and Path(model).suffix.lower() in (".onnx", ".tflite"):
        raise ConfigError(f"--dtype {dtype}: {model} is cut in its own format and dtype; quantize it first "
                          f"(dnnplan quantize {model} --out M.int8.tflite) and sweep that file")
    graph = load_graph(model, "op", input_shapes=shapes, **args)
    n = len(graph)
    why: dict[int, str] = {}
    if boundaries.strip().lower() == "auto":
        chosen = sweep_boundaries(graph, between)
        why = {b.index: b.why for b in chosen}
        bounds = [b.index for b in chosen]
    else:
        bounds = parse_boundaries(boundaries, n)
    cases = sweep_cases(bounds, n, [k.strip() for k in kinds.split(",") if k.strip()])
    with _progress(len(cases)) as step:
        results = sweep(model, graph, cases, dtype=dtype, input_shapes=shapes, variant=args, frames=frames,
                        min_agreement=min_agreement, seed=seed, samples=samples,
                        journal=Path(journal) if journal else None, progress=step)
    if as_json:
        print_json({"model": graph.name, "layers": n, "dtype": dtype, "boundaries": [
            {"index": b, "why": why.get(b, "given")} for b in bounds], "results": [r.to_dict() for r in results]})
    else:
        _print_results(graph.name, n, dtype, results, why)
    if any(r.status in ("failed", "disagrees") for r in results):
        raise typer.Exit(1)


class _progress:
    """A Rich progress bar over the cases (nothing with --quiet)."""

    def __init__(self, total: int) -> None:
        self.total, self.bar, self.task = total, None, None

    def __enter__(self) -> Any:
        if STATE.quiet:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=console_err, transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task("export-sweep", total=self.total)
        return self.step

    def step(self, case: Any, result: Any) -> None:
        assert self.bar is not None and self.task is not None
        if result is None:
            self.bar.update(self.task, description=f"{case.kind} at {','.join(map(str, case.cuts))}")
        else:
            self.bar.advance(self.task)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


def _print_results(name: str, n: int, dtype: str, results: list[CaseResult], why: dict[int, str]) -> None:
    """One row per plan; a summary line."""
    from rich.table import Table

    t = Table(title=f"export-sweep of {name} ({n} op layers, {dtype})")
    for col in ("plan", "cuts", "parts", "crossing", "status", "top-1", "SQNR dB", "s"):
        t.add_column(col, no_wrap=True)
    t.add_column("boundary / reason")
    for r in results:
        dtypes = sorted({c["dtype"] for c in r.crossing})
        note = r.reason or "; ".join(why[c] for c in r.cuts if c in why)
        t.add_row(r.kind, ",".join(map(str, r.cuts)), str(r.parts or "-"),
                  f"{len(r.crossing)} {'/'.join(dtypes)}" if r.crossing else "-", r.status,
                  "-" if r.agreement is None else f"{r.agreement:.0%}",
                  "exact" if r.max_abs_diff == 0 else ("-" if r.sqnr_db is None else f"{r.sqnr_db:.1f}"),
                  f"{r.seconds:.1f}", note)
    print_wide(t)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    console.print(", ".join(f"{v} {k}" for k, v in sorted(counts.items())), highlight=False)
