"""Figures of a plan over time: the pipeline's stages or a split's phases per frame (Gantt
charts), and a thermal simulation's temperatures, clock caps and throughput.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .figure_style import BOTTLENECK_COLOR, CHOSEN_COLOR, FRONT_COLOR, new_figure


def _as_plan(plan: Any) -> Any:
    from ..plan.io import plan_from_dict, read_plan

    if isinstance(plan, (str, os.PathLike)):
        return read_plan(plan)
    if isinstance(plan, Mapping):
        return plan_from_dict(dict(plan))
    return plan


def plot_pipeline(plan: Any, *, frames: int = 4, title: str | None = None) -> Any:
    """Gantt chart of a plan: pipeline stages per processor (bottleneck highlighted), or the
    phone / uplink / server / downlink timeline of a split.

    For a pipeline, ``frames`` consecutive frames are scheduled with the steady-state recurrence
    ``start(f, s) = max(end(f, s-1), end(f-1, s))`` (one frame per stage at a time, stages
    overlapping across frames, Park & Ha 2024), so the period settles on the slowest stage.

    Parameters
    ----------
    plan
        A :class:`~optimizer.plan.schema.Plan`, its dict, or a plan file path.
    frames
        Frames drawn through the pipeline.
    title
        Figure title (default: model, device, throughput).

    Returns
    -------
    matplotlib.figure.Figure
    """
    plan = _as_plan(plan)
    if plan.kind == "split":
        return _plot_split_timeline(plan, title)
    rows: list[tuple[str, float]] = []
    if plan.preprocess is not None and (plan.preprocess.predicted_time_s or 0) > 0:
        rows.append((f"pre · {plan.preprocess.processor}\n{plan.preprocess.predicted_time_s * 1e3:.3g} ms",
                     plan.preprocess.predicted_time_s))
    for k, st in enumerate(plan.stages or []):
        if st.predicted_time_s is None:
            raise ConfigError(f"plot_pipeline: stages[{k}] of the plan has no predicted_time_s")
        rows.append((f"stage {k + 1} · {st.processor} · {st.predicted_time_s * 1e3:.3g} ms\n"
                     f"layers {st.first_layer}–{st.last_layer}", st.predicted_time_s))
    if plan.postprocess is not None and (plan.postprocess.predicted_time_s or 0) > 0:
        rows.append((f"post · {plan.postprocess.processor}\n{plan.postprocess.predicted_time_s * 1e3:.3g} ms",
                     plan.postprocess.predicted_time_s))
    times = np.array([t for _, t in rows]) * 1e3
    n, bott = len(rows), int(np.argmax(times))
    start = np.zeros((frames, n))
    end = np.zeros((frames, n))
    for f in range(frames):
        for s in range(n):
            start[f, s] = max(end[f, s - 1] if s else 0.0, end[f - 1, s] if f else 0.0)
            end[f, s] = start[f, s] + times[s]
    fig = new_figure(8.0, 1.2 + 0.75 * n)
    ax = fig.add_subplot()
    frame_colors = ("#A6C8E8", "#B8E0B0", "#F5D7A0", "#D8C3E8", "#F3B7C6", "#C5E8E8")
    for f in range(frames):
        for s in range(n):
            is_b = s == bott
            ax.barh(n - 1 - s, times[s], left=start[f, s], height=0.6,
                    color=frame_colors[f % len(frame_colors)],
                    edgecolor=BOTTLENECK_COLOR if is_b else "#555555", linewidth=2.0 if is_b else 0.6,
                    hatch="//" if is_b else None, zorder=3)
            if times[s] > 0.06 * end[-1, -1]:
                ax.text(start[f, s] + times[s] / 2, n - 1 - s, f"frame {f + 1}", ha="center", va="center",
                        fontsize=7, zorder=4)
    labels = [r[0] + ("\nBOTTLENECK" if s == bott else "") for s, r in enumerate(rows)]
    ax.set_yticks(range(n), labels[::-1], fontsize=8)
    for tick, s in zip(ax.get_yticklabels(), range(n - 1, -1, -1)):
        if s == bott:
            tick.set_color(BOTTLENECK_COLOR)
            tick.set_fontweight("bold")
    period = times[bott]
    ax.set_xlabel("time (ms)")
    ax.set_xlim(0, end[-1, -1] * 1.02)
    ax.grid(True, axis="x", alpha=0.3, zorder=0)
    fps = plan.predicted.throughput_fps or (1e3 / period if period > 0 else float("nan"))
    default = (f"{plan.model.name} on {plan.device} ({plan.model.dtype}): {fps:.1f} FPS — one frame every "
               f"{period:.3g} ms, set by the bottleneck (hatched)")
    fig.suptitle(title or default, fontsize=11)
    return fig


_SPLIT_PARTS = (("client_s", "phone compute", "#4C72B0"), ("upload_s", "uplink", "#FF7F0E"),
                ("rtt_s", "network round trip", "#BCBD22"), ("server_s", "server compute", "#2CA02C"),
                ("download_s", "downlink", "#9467BD"))


def _plot_split_timeline(plan: Any, title: str | None) -> Any:
    extra = plan.predicted.extra
    parts = [(key, name, color, float(extra[key]) * 1e3) for key, name, color in _SPLIT_PARTS if key in extra]
    if not parts:
        raise ConfigError("plot_pipeline: the split plan has no per-component times in predicted.extra "
                          f"(expected {', '.join(k for k, _, _ in _SPLIT_PARTS)})")
    s = plan.split
    n, bott = len(parts), int(np.argmax([p[3] for p in parts]))
    fig = new_figure(8.0, 1.2 + 0.6 * n)
    ax = fig.add_subplot()
    t = 0.0
    labels = []
    for k, (key, name, color, ms) in enumerate(parts):
        is_b = k == bott
        ax.barh(n - 1 - k, ms, left=t, height=0.6, color=color, alpha=0.85, zorder=3,
                edgecolor=BOTTLENECK_COLOR if is_b else "#333333", linewidth=2.0 if is_b else 0.6,
                hatch="//" if is_b else None)
        ax.text(t + ms, n - 1 - k, f"  {ms:.3g} ms", va="center", fontsize=8, zorder=4,
                color=BOTTLENECK_COLOR if is_b else "black")
        detail = ""
        if key == "client_s" and s.head_processor:
            detail = f"\n{s.head_processor} @ {(s.head_clock_hz or 0) / 1e9:.2f} GHz, layers 0–{s.layer - 1}"
        elif key == "upload_s":
            detail = f"\n{s.bytes / 1e3:.1f} kB ({s.wire_dtype})"
        elif key == "server_s":
            detail = f"\n{s.server or 'server'}, layers {s.layer}–{plan.model.layers - 1}"
        labels.append(name + detail)
        t += ms
    ax.set_yticks(range(n), labels[::-1], fontsize=8)
    ax.set_xlabel("time within one inference (ms)")
    ax.set_xlim(0, t * 1.15)
    ax.grid(True, axis="x", alpha=0.3, zorder=0)
    default = (f"{plan.model.name}: split after layer {s.layer} of {plan.model.layers} on {plan.device}"
               f"{' over ' + plan.network if plan.network else ''} — {t:.3g} ms per inference")
    fig.suptitle(title or default, fontsize=11)
    return fig


# -------------------------------------------------------------------------------- thermal
def _thermal_arrays(sim: Any) -> dict[str, Any]:
    if isinstance(sim, (str, os.PathLike)):
        sim = json.loads(Path(sim).read_text(encoding="utf-8"))
    if isinstance(sim, Mapping):
        try:
            nodes = tuple(sim["temps_c"])
            procs = tuple(sim.get("caps", {}))
            return {
                "device": sim.get("device", ""), "times": np.asarray(sim["times_s"], float),
                "nodes": nodes, "temps": np.column_stack([sim["temps_c"][n] for n in nodes]),
                "procs": procs,
                "caps": np.column_stack([sim["caps"][p] for p in procs]) if procs else None,
                "fps": np.asarray(sim["fps"], float), "ambient": sim.get("ambient_c"),
                "skin": sim.get("skin_node", "skin" if "skin" in nodes else None),
                "events": [e for e in sim.get("event_log", [])],
                "first": sim.get("time_to_first_throttle_s"), "sustained": sim.get("sustained_fps"),
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"plot_thermal: not a simulation result dict (SimulationResult.to_dict()): "
                              f"missing or bad {exc}") from None
    return {"device": sim.device, "times": sim.times_s, "nodes": sim.node_names, "temps": sim.temps_c,
            "procs": sim.processor_names, "caps": sim.caps, "fps": sim.fps, "ambient": sim.ambient_c,
            "skin": sim.skin_node, "events": [e.to_dict() for e in sim.events],
            "first": sim.time_to_first_throttle_s, "sustained": sim.sustained_fps}


def plot_thermal(sim: Any, *, title: str | None = None) -> Any:
    """Temperatures, clock caps and FPS over a sustained run, throttling events marked.

    Parameters
    ----------
    sim
        A :class:`~optimizer.thermal.simulate.SimulationResult`, its ``to_dict()`` or a JSON
        file of it.
    title
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    d = _thermal_arrays(sim)
    t = d["times"]
    if len(t) == 0:
        raise ConfigError("plot_thermal: the simulation has no time steps")
    caps = d["caps"]
    fig = new_figure(8.5, 7.0)
    ax_t, ax_c, ax_f = fig.subplots(3, 1, sharex=True, height_ratios=(2.2, 1.2, 1.4))
    for i, node in enumerate(d["nodes"]):
        is_skin = node == d["skin"]
        name = f"{node} (skin)" if is_skin and node != "skin" else node
        ax_t.plot(t, d["temps"][:, i], lw=2.4 if is_skin else 1.2, label=name,
                  color="black" if is_skin else None, zorder=3 if is_skin else 2)
    if d["ambient"] is not None:
        ax_t.axhline(d["ambient"], color="grey", ls=":", lw=1, label=f"ambient {d['ambient']:.0f} °C")
    if caps is not None and caps.size:
        throttled = (caps < 1 - 1e-9).any(axis=1)
        for ax in (ax_t, ax_c, ax_f):
            ax.fill_between(t, 0, 1, where=throttled, step="pre", color=CHOSEN_COLOR, alpha=0.07,
                            transform=ax.get_xaxis_transform(), label="throttled" if ax is ax_t else None)
        for j, p in enumerate(d["procs"]):
            ax_c.step(t, caps[:, j] * 100, where="pre", lw=1.4, label=p)
    trips = [e for e in d["events"] if e.get("kind") in ("trip", "shutdown")]
    for e in trips:
        for ax in (ax_t, ax_c, ax_f):
            ax.axvline(e["time_s"], color=CHOSEN_COLOR, lw=0.7, ls="--", alpha=0.6)
    if d["first"] is not None:
        k = int(np.searchsorted(t, d["first"]))
        k = min(k, len(t) - 1)
        ax_t.annotate(f"first throttle at {d['first']:.0f} s", (d["first"], d["temps"][k].max()),
                      xytext=(25, -12), textcoords="offset points", va="top", fontsize=9, color=CHOSEN_COLOR,
                      fontweight="bold", arrowprops={"arrowstyle": "->", "color": CHOSEN_COLOR})
    ax_f.plot(t, d["fps"], color=FRONT_COLOR, lw=1.8, label="throughput")
    if d["sustained"] is not None:
        ax_f.axhline(d["sustained"], color=FRONT_COLOR, ls="--", lw=1,
                     label=f"sustained {d['sustained']:.3g} FPS (last minute)")
    ax_t.set_ylabel("temperature (°C)")
    ax_c.set_ylabel("clock cap (% of max)")
    ax_c.set_ylim(-5, 110)
    ax_f.set_ylabel("throughput (FPS)")
    ax_f.set_ylim(0, max(float(np.max(d["fps"])) * 1.15, 1e-9))
    ax_f.set_xlabel("time (s)")
    for ax in (ax_t, ax_c, ax_f):
        ax.grid(True, alpha=0.3)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    n_trips = len([e for e in trips if e.get("kind") == "trip"])
    fig.suptitle(title or f"Sustained run on {d['device']}: {n_trips} throttling trips (dashed lines)",
                 fontsize=11)
    return fig
