"""``dnnplan calibrate --report``: the cost model against published absolute figures."""

from __future__ import annotations

from typing import Optional

import typer

from . import app
from .common import console, print_json


@app.command("calibrate")
def calibrate(
    report: bool = typer.Option(False, "--report", help="Print modeled / published for every published point and fact."),
    published: Optional[str] = typer.Option(None, "--published", help="Published-points YAML (default: the shipped search_spaces/calibration/published.yaml)."),
    no_pipeline: bool = typer.Option(False, "--no-pipeline", help="Skip the exact pipeline rows (the slowest part)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any row fails, known failures included."),
) -> None:
    """Fidelity report of the device models (METHODS.md sections 1-8); exit 1 when a row fails that
    is not a known failure (``known_failures`` of the published data; all rows with --strict)."""
    from ..errors import ConfigError
    from ..report.fidelity import fidelity_report, format_report

    if not report:
        raise ConfigError("calibrate: give --report (the only mode so far)")
    rep = fidelity_report(published, pipeline=not no_pipeline)
    if as_json:
        print_json(rep.to_dict())
    else:
        console.print("\n".join(format_report(rep)), markup=False, highlight=False)
    raise typer.Exit(0 if (rep.passed if strict else not rep.unexpected_failures) else 1)
