"""``dnnplan simulate``: run a plan on its device over time (RC temperatures, governor, FPS)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from . import app
from .bounds import bounded
from .common import STATE, console, console_err, output_file, print_json


@app.command("simulate")
def simulate_cmd(
    plan: Path = typer.Argument(..., help="Plan JSON (pipeline or split, schema v1)."),
    duration: float = typer.Option(600.0, "--duration", callback=bounded("simulate", "--duration"), help="Simulated seconds (default: 10 minutes)."),
    ambient: Optional[float] = typer.Option(None, "--ambient", help="Ambient °C (default: the thermal spec's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    plot: Optional[Path] = typer.Option(None, "--plot", callback=output_file, help="Draw temperatures, caps and FPS over time (PNG)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", callback=output_file, help="Write the full time series as JSON."),
) -> None:
    """Simulate PLAN running continuously: time to throttle, sustained FPS, peak temperatures.

    A device without a thermal section is not an error: its plan runs at full clocks (FPS and
    power from the plan's workload) and a note says that temperatures and throttling are not
    modelled."""
    from ..errors import ConfigError
    from ..fileio import atomic_write_bytes, atomic_write_json
    from ..hardware import load_device
    from ..plan.io import read_plan
    from ..workflow.simulate import simulate_plan

    if ambient is not None and not -50 <= ambient <= 80:
        raise ConfigError(f"--ambient {ambient!r}: expected a temperature between -50 and 80 °C")
    if plot is not None and plot.suffix.lower() != ".png":
        raise ConfigError(f"--plot {plot}: expected a .png file name")
    p = read_plan(plan)
    dev = load_device(p.device)
    if dev.thermal is None:
        _without_thermal(plan, p, dev, out, plot, as_json)
        return
    res = simulate_plan(p, device=dev, duration_s=duration, ambient_c=ambient)
    summary = {"plan": str(plan), "kind": p.kind, "model": p.model.name, **res.summary(),
               **_fps_summary(res)}
    png = None
    if plot is not None:
        from ..report import figure_png, plot_thermal

        png = figure_png(plot_thermal(res, title=f"{p.model.name} ({p.kind}) on {p.device}, "
                                                 f"{res.ambient_c:g} °C ambient"))
    if out is not None:
        atomic_write_json(out, {"plan": str(plan), **res.to_dict()})
    if png is not None:
        atomic_write_bytes(plot, png)
    if as_json:
        print_json(summary)
        return
    for line in res.notes:
        console_err.print(f"note: {line}", highlight=False)
    if not STATE.quiet:
        _table(summary)
        written = [str(f) for f in (out, plot) if f is not None]
        if written:
            console.print(f"wrote {' and '.join(written)}", highlight=False)


def _without_thermal(path: Path, plan, device, out: Path | None, plot: Path | None, as_json: bool) -> None:
    """``simulate`` on a device without a thermal section: the plan at full clocks, and a note."""
    from ..errors import ConfigError
    from ..fileio import atomic_write_json
    from ..workflow.simulate import full_clock_point, no_thermal_note

    if plot is not None:
        raise ConfigError(f"--plot {plot}: device {device.name!r} has no thermal section, so there are no "
                          "temperatures to draw; leave out --plot")
    point = full_clock_point(plan, device=device)
    power = ", ".join(f"{k} {v:.2f} W" for k, v in point["power_w"].items())
    note = (f"{no_thermal_note(device.name)}; at full clocks the plan runs {point['fps']:.2f} FPS "
            f"({power or 'no power model'})")
    summary = {"plan": str(path), "kind": plan.kind, "model": plan.model.name, "device": device.name,
               "thermal_modelled": False, "initial_fps": point["fps"], "sustained_fps": point["fps"],
               "power_w": point["power_w"], "time_to_first_throttle_s": None, "peak_die_c": None,
               "notes": [note]}
    if out is not None:
        atomic_write_json(out, summary)
    if as_json:
        print_json(summary)
        return
    console_err.print(f"note: {note}", highlight=False)
    if out is not None and not STATE.quiet:
        console.print(f"wrote {out}", highlight=False)


def _fps_summary(res) -> dict:
    """Throughput over time: FPS at the start, at each whole minute, min and mean."""
    import numpy as np

    t, fps = res.times_s, res.fps
    marks = [m for m in range(60, int(t[-1]) + 1, 60)]
    at = {f"{m // 60} min": float(fps[int(np.searchsorted(t, m))]) for m in marks if np.searchsorted(t, m) < len(t)}
    return {"min_fps": float(fps.min()), "mean_fps": float(fps.mean()),
            "sustained_over_initial": float(res.sustained_fps / fps[0]) if fps[0] > 0 else None,
            "fps_over_time": at}


def _fmt_s(v: float | None) -> str:
    return "never" if v is None else f"{v:.0f} s"


def _table(s: dict) -> None:
    from rich.table import Table

    t = Table(title=f"{s['model']} ({s['kind']}) on {s['device']}: {s['duration_s']:.0f} s at "
                    f"{s['ambient_c']:g} °C ambient", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("time to first throttle", _fmt_s(s["time_to_first_throttle_s"]))
    t.add_row("time to severe", _fmt_s(s["time_to_severe_s"]))
    t.add_row("initial fps", f"{s['initial_fps']:.2f}")
    t.add_row("sustained fps (last minute)", f"{s['sustained_fps']:.2f}"
              + (f" ({s['sustained_over_initial']:.0%})" if s["sustained_over_initial"] is not None else ""))
    t.add_row("min / mean fps", f"{s['min_fps']:.2f} / {s['mean_fps']:.2f}")
    t.add_row("peak skin", f"{s['peak_skin_c']:.1f} °C")
    t.add_row("peak die", f"{s['peak_die_c']:.1f} °C")
    t.add_row("governor events", str(s["events"]))
    console.print(t)
    if s["fps_over_time"]:
        console.print("fps over time: " + ", ".join(f"{k} {v:.1f}" for k, v in s["fps_over_time"].items()),
                      highlight=False)
