"""``dnnplan report``: a self-contained HTML + Markdown report of plans, fronts and batch runs."""

from __future__ import annotations

from pathlib import Path

import typer

from . import app
from .common import STATE, console, console_err, output_files_folder


@app.command("report")
def report_cmd(
    inputs: list[Path] = typer.Argument(..., metavar="RUN_OR_PLAN...", help="Plan .json files, front .csv files (dnnplan split --front), "
                                                  "batch run folders or thermal simulation .json files."),
    out: Path = typer.Option(..., "--out", "-o", callback=output_files_folder, help="Folder for report.html, report.md and its PNG figures."),
    title: str | None = typer.Option(None, "--title", help="Report title."),
) -> None:
    """Write report.html (figures embedded, no external links) and report.md for RUN_OR_PLAN..."""
    from contextlib import nullcontext

    from ..report.document import write_report

    with console_err.status("rendering the report", spinner="dots") if not STATE.quiet else nullcontext():
        files = write_report(inputs, out, title=title)
    if not STATE.quiet:
        console_err.print(f"{len(files.figures)} figures; markdown: {files.markdown}", highlight=False)
    console.print(str(files.html), highlight=False, soft_wrap=True)
