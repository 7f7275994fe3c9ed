"""Figures of search results: Pareto fronts, GA convergence and batch overviews, each returned
as a matplotlib :class:`~matplotlib.figure.Figure` (timelines of a plan are in :mod:`.timelines`).

In a notebook with ``%matplotlib inline`` a returned figure displays itself. Axes carry units
(ms, mJ, MB, FPS, °C, s); values are stored in SI units and scaled for display only
(:data:`~optimizer.report.frames.OBJECTIVE_UNITS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .figure_style import BASELINE_STYLES, CHOSEN_COLOR, FRONT_COLOR, auto_log, baseline_label, log_axis, new_figure
from .frames import axis_label, display_factor, objective_columns, sense


# -------------------------------------------------------------------------------- fronts
def _objectives_of(item: Any) -> dict[str, float]:
    """Objective values of a Candidate, a pandas Series/row or a plain mapping."""
    if hasattr(item, "objectives") and isinstance(item.objectives, Mapping):
        return {k: float(v) for k, v in item.objectives.items() if v is not None}
    if hasattr(item, "to_dict"):
        item = item.to_dict()
    if isinstance(item, Mapping):
        out = {}
        for k, v in item.items():
            try:
                out[str(k)] = float(v)
            except (TypeError, ValueError):
                continue
        return out
    raise ConfigError(f"cannot read objective values from {type(item).__name__}; give a Candidate, "
                      "a DataFrame row or a mapping of objective name to value")


def _resolve_marks(df: Any, chosen: Any, baselines: Any) -> tuple[Any, dict[str, float] | None, dict[str, dict]]:
    """(front rows, chosen objectives or None, baseline name -> objectives)."""
    if "on_front" in df.columns:
        front = df[df["on_front"].astype(bool)]
    elif "baseline" in df.columns:
        front = df[df["baseline"].fillna("") == ""]
    else:
        front = df
    if chosen is None and "chosen" in df.columns and df["chosen"].astype(bool).any():
        chosen = df[df["chosen"].astype(bool)].iloc[0]
    elif isinstance(chosen, (int, np.integer)) and not isinstance(chosen, bool):
        if chosen not in df.index:
            raise ConfigError(f"plot_front: chosen={chosen} is not a row label of the frame")
        chosen = df.loc[chosen]
    chosen_obj = None if chosen is None else _objectives_of(chosen)
    marks: dict[str, dict] = {}
    if baselines is None and "baseline" in df.columns:
        for _, row in df[df["baseline"].fillna("") != ""].iterrows():
            marks[str(row["baseline"])] = _objectives_of(row)
    elif baselines is not None:
        marks = {str(k): _objectives_of(v) for k, v in dict(baselines).items()}
    return front, chosen_obj, marks


def _nondominated_2d(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats in both (minimisation), sorted by x; one per
    distinct point (:func:`optimizer.search.problem.nondominated`)."""
    from ..search.problem import nondominated

    F = np.column_stack([xs, ys])
    idx = nondominated(F)
    _, first = np.unique(F[idx], axis=0, return_index=True)  # unique rows come sorted by x, then y
    return idx[first]


def plot_front(df: Any, x: str = "latency_s", y: str = "energy_j", *, z: str | None = None,
               chosen: Any = None, baselines: Mapping[str, Any] | None = None, title: str | None = None,
               chosen_label: str = "TOPSIS choice", log: bool | None = None) -> Any:
    """Pareto front in two objectives (or a scatter matrix of three), choice and baselines marked.

    Parameters
    ----------
    df
        Candidate frame (:func:`~optimizer.report.load_run` of a front CSV or a plan,
        :func:`~optimizer.report.result_frame`): front rows have ``on_front``; the chosen row
        ``chosen``; baseline rows a ``baseline`` name.
    x, y
        Objective columns on the axes (SI values; shown in ms, mJ, MB, FPS...).
    z
        A third objective: draws the scatter matrix of (x, y, z) instead (lower triangle).
    chosen
        Overrides the chosen point: a row label of ``df``, a ``Candidate``, a row or a mapping.
    baselines
        Overrides the baselines: name → ``Candidate``, row or mapping of objective values
        (e.g. ``result.baselines``).
    title
        Figure title (default: from ``df.attrs``).
    chosen_label
        Legend text of the chosen point.
    log
        Log-scale axes; ``None`` chooses per objective (positive values spanning more than 10×).

    Returns
    -------
    matplotlib.figure.Figure
    """
    cols = [c for c in (x, y, z) if c is not None]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ConfigError(f"plot_front: no column {missing[0]!r} in the frame; objective columns: "
                          f"{', '.join(objective_columns(df)) or 'none'}")
    front, chosen_obj, marks = _resolve_marks(df, chosen, baselines)
    if len(front) == 0 and chosen_obj is None:
        raise ConfigError("plot_front: the frame has no front points and no chosen point to plot")
    if title is None:
        src = df.attrs.get("source")
        title = f"Pareto front ({len(front)} solutions)" + (f" — {Path(src).name}" if src else "")
    logs = {}
    for c in cols:
        vals = np.concatenate([front[c].to_numpy(float),
                               [o[c] for o in [chosen_obj or {}, *marks.values()] if c in o]])
        logs[c] = auto_log(vals) if log is None else bool(log and len(vals) and np.nanmin(vals) > 0)
    if z is None:
        fig = new_figure(7.6, 5.2)
        ax = fig.add_subplot()
        _front_panel(ax, front, x, y, chosen_obj, marks, chosen_label, logs)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        fig.suptitle(title, fontsize=11)
        _place_labels(fig, [(ax, x, y)], chosen_obj, marks, chosen_label)
        return fig
    fig = new_figure(9.5, 8.5)
    axes = fig.subplots(3, 3)
    panels = []
    for i, row_col in enumerate(cols):
        for j, col_col in enumerate(cols):
            ax = axes[i, j]
            if j > i:
                ax.set_axis_off()
            elif i == j:
                _diagonal_text(ax, row_col, front, chosen_obj)
            else:
                _front_panel(ax, front, col_col, row_col, chosen_obj, marks, chosen_label, logs)
                panels.append((ax, col_col, row_col))
                if i != 2:
                    ax.set_xlabel("")
                if j != 0:
                    ax.set_ylabel("")
                ax.tick_params(labelsize=7)
    handles, labels = axes[1, 0].get_legend_handles_labels()
    axes[0, 2].legend(handles, labels, loc="upper right", fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    _place_labels(fig, panels, chosen_obj, marks, chosen_label, fontsize=7)
    return fig


def _diagonal_text(ax: Any, col: str, front: Any, chosen: dict[str, float] | None) -> None:
    f = display_factor(col)
    vals = front[col].to_numpy(float) * f
    unit = axis_label(col).rsplit("(", 1)[-1].rstrip(")")
    lines = [axis_label(col), ""]
    if len(vals):
        lines.append(f"front: {vals.min():.3g} – {vals.max():.3g} {unit}")
    if chosen is not None and col in chosen:
        lines.append(f"chosen: {chosen[col] * f:.3g} {unit}")
    lines.append("lower is better" if sense(col) == "min" else "higher is better")
    ax.text(0.5, 0.5, "\n".join(lines), ha="center", va="center", fontsize=9, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_color("#BBBBBB")


def _front_panel(ax: Any, front: Any, x: str, y: str, chosen: dict[str, float] | None,
                 marks: dict[str, dict], chosen_label: str, logs: dict[str, bool]) -> None:
    fx, fy = display_factor(x), display_factor(y)
    xs = front[x].to_numpy(float) * fx if len(front) else np.zeros(0)
    ys = front[y].to_numpy(float) * fy if len(front) else np.zeros(0)
    ax.scatter(xs, ys, s=26, color=FRONT_COLOR, alpha=0.75, edgecolors="white", linewidths=0.4,
               label=f"Pareto front ({len(xs)} solutions)", zorder=2)
    if len(xs) > 1:
        # the 2-D non-dominated subset in these two objectives, as a staircase
        sx = -xs if sense(x) == "max" else xs
        sy = -ys if sense(y) == "max" else ys
        nd = _nondominated_2d(sx, sy)
        if len(nd) > 1:
            ax.step(xs[nd], ys[nd], where="post", color=FRONT_COLOR, lw=1.2, alpha=0.7,
                    label="non-dominated in these two objectives", zorder=1)
    for k, (name, obj) in enumerate(marks.items()):
        if x not in obj or y not in obj:
            continue
        color, marker = BASELINE_STYLES[k % len(BASELINE_STYLES)]
        ax.scatter([obj[x] * fx], [obj[y] * fy], s=80, marker=marker, color=color, edgecolors="black",
                   linewidths=0.6, label=f"baseline {baseline_label(name)}", zorder=4)
    if chosen is not None and x in chosen and y in chosen:
        ax.scatter([chosen[x] * fx], [chosen[y] * fy], s=280, marker="*", color=CHOSEN_COLOR,
                   edgecolors="black", linewidths=0.8, label=chosen_label, zorder=5)
    for axis, col in ((ax.xaxis, x), (ax.yaxis, y)):
        if logs.get(col):
            log_axis(ax, axis)
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    ax.grid(True, which="major", alpha=0.3)


_CANDIDATE_OFFSETS = ((10, 8), (10, -8), (-10, 8), (-10, -8), (0, 14), (0, -14), (16, 0), (-16, 0),
                      (18, 18), (18, -18), (-18, 18), (-18, -18), (0, 26), (0, -26))


def _place_labels(fig: Any, panels: list[tuple[Any, str, str]], chosen: dict[str, float] | None,
                  marks: dict[str, dict], chosen_label: str, fontsize: int = 8) -> None:
    """Label the chosen point and each baseline next to its marker, avoiding other labels and
    markers (greedy search over a few offsets, in display coordinates after layout)."""
    fig.draw_without_rendering()
    items = []
    if chosen is not None:
        items.append((chosen_label, chosen, CHOSEN_COLOR))
    items += [(baseline_label(n), o, BASELINE_STYLES[k % len(BASELINE_STYLES)][0])
              for k, (n, o) in enumerate(marks.items())]
    renderer = fig.canvas.get_renderer()
    for ax, x, y in panels:
        fx, fy = display_factor(x), display_factor(y)
        pts = [(text, ax.transData.transform((o[x] * fx, o[y] * fy)), color)
               for text, o, color in items if x in o and y in o]
        coll = ax.collections[0].get_offsets() if ax.collections else np.zeros((0, 2))
        obstacles = [ax.transData.transform(p) for p in np.asarray(coll, float)] + [p for _, p, _ in pts]
        box = ax.get_window_extent(renderer)
        placed: list[tuple[float, float, float, float]] = []
        scale = fig.dpi / 72.0
        for text, (px, py), color in pts:
            w = 0.72 * fontsize * len(text) * scale  # bold sans-serif: ~0.7 em per character
            h = 1.3 * fontsize * scale
            best, best_cost = _CANDIDATE_OFFSETS[0], np.inf
            for dx, dy in _CANDIDATE_OFFSETS:
                ox, oy = px + dx * scale, py + dy * scale
                x0 = ox if dx >= 0 else ox - w
                x0 = x0 - w / 2 if dx == 0 else x0
                y0 = oy - h / 2
                rect = (x0, y0, x0 + w, y0 + h)
                cost = sum(_overlap(rect, r) for r in placed)
                cost += sum(60.0 for ob in obstacles if rect[0] - 4 < ob[0] < rect[2] + 4
                            and rect[1] - 4 < ob[1] < rect[3] + 4)
                outside = max(0, box.x0 - rect[0]) + max(0, rect[2] - box.x1) + max(0, box.y0 - rect[1]) \
                    + max(0, rect[3] - box.y1)
                cost += 50 * outside + 0.01 * (dx * dx + dy * dy)
                if cost < best_cost:
                    best, best_cost, best_rect = (dx, dy), cost, rect
            placed.append(best_rect)
            dx, dy = best
            ax.annotate(text, ax.transData.inverted().transform((px, py)), xytext=(dx, dy),
                        textcoords="offset points", fontsize=fontsize, color=color, fontweight="bold",
                        ha="left" if dx > 0 else ("right" if dx < 0 else "center"), va="center", zorder=3.5,
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.7})


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return float(max(0.0, w) * max(0.0, h))


# ---------------------------------------------------------------------------- convergence
def plot_convergence(history: Any, optimum: Any = None, *, objective: str = "throughput_fps",
                     label: str = "GA", title: str | None = None) -> Any:
    """Best objective value found against evaluations made, with the exact optimum as a line.

    Parameters
    ----------
    history
        ``SearchResult`` (its ``history``) or a sequence of ``{"evaluations": n, "best": v}``
        rows, one per generation (what the GA records).
    optimum
        The exact optimum: a number in SI units, or the exact solver's ``SearchResult``.
    objective
        The objective ``best`` holds (sets the axis label and unit).
    label
        Legend text of the search curve.
    title
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    space = getattr(history, "space_size", None)
    rows = list(getattr(history, "history", history) or [])
    if not rows or any(not isinstance(r, Mapping) or "evaluations" not in r or "best" not in r for r in rows):
        raise ConfigError("plot_convergence: history needs one {'evaluations', 'best'} row per generation "
                          f"(got {len(rows)} rows{'' if not rows else ', keys ' + ', '.join(map(str, rows[0]))})")
    if optimum is not None and hasattr(optimum, "best"):
        optimum = optimum.best.objectives[objective]
    f = display_factor(objective)
    ev = np.array([float(r["evaluations"]) for r in rows])
    best = np.array([float(r["best"]) for r in rows]) * f
    fig = new_figure(7.2, 4.4)
    ax = fig.add_subplot()
    ax.step(ev, best, where="post", color=FRONT_COLOR, lw=2, label=f"{label}: best so far")
    ax.plot(ev, best, "o", color=FRONT_COLOR, ms=3)
    unit = axis_label(objective).rsplit("(", 1)[-1].rstrip(")")
    if optimum is not None:
        opt = float(optimum) * f
        ax.axhline(opt, color=CHOSEN_COLOR, ls="--", lw=1.5, label=f"exact optimum ({opt:.4g} {unit})")
        lo, hi = (0.99 * opt, opt) if sense(objective) == "max" else (opt, 1.01 * opt)
        ax.axhspan(lo, hi, color=CHOSEN_COLOR, alpha=0.08, label="within 1 % of the optimum")
        ratio = best[-1] / opt if sense(objective) == "max" else opt / best[-1]
        ax.annotate(f"{ratio:.1%} of optimum\nafter {int(ev[-1])} evaluations", (ev[-1], best[-1]),
                    xytext=(-10, -28), textcoords="offset points", ha="right", fontsize=9)
    if space:
        ax.set_title(f"{int(ev[-1])} of {space:,.0f} candidates evaluated ({ev[-1] / space:.2%} of the space)",
                     fontsize=9)
    ax.set_xlabel("evaluations (distinct candidates)")
    ax.set_ylabel(f"best {axis_label(objective)}")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right" if sense(objective) == "max" else "upper right", fontsize=8)
    fig.suptitle(title or f"{label} convergence", fontsize=11)
    return fig


# ---------------------------------------------------------------------------------- batch
def plot_batch(df: Any) -> list[tuple[str, Any]]:
    """Overview figures of a batch run table (``RunFolder.table()``, also ``ResultStore.table()``): ``[(caption, figure)]``.

    Mapping tasks: throughput per model and device (one point per seed, bars at the mean).
    Split tasks: latency against energy of every chosen split, coloured by model.
    """
    out: list[tuple[str, Any]] = []
    done = df[df["status"] == "done"] if "status" in df.columns else df
    mp = done[done["kind"] == "map"] if "kind" in done.columns else done.iloc[0:0]
    if len(mp) and "metric_throughput_fps" in mp.columns:
        groups = mp.groupby(["model", "device"], sort=True)["metric_throughput_fps"]
        keys = list(groups.groups)
        fig = new_figure(max(6.0, 0.55 * len(keys) + 2), 4.6)
        ax = fig.add_subplot()
        means = groups.mean()
        ax.bar(range(len(keys)), [means[k] for k in keys], color=FRONT_COLOR, alpha=0.35,
               label="mean over seeds and solvers", zorder=2)
        solvers = sorted(mp["solver"].dropna().unique()) if "solver" in mp.columns else [None]
        for si, solver in enumerate(solvers):
            sub = mp if solver is None else mp[mp["solver"] == solver]
            pos = {k: i for i, k in enumerate(keys)}
            xs = [pos[(m, d)] + (si - (len(solvers) - 1) / 2) * 0.15 for m, d in zip(sub["model"], sub["device"])]
            color, marker = BASELINE_STYLES[si % len(BASELINE_STYLES)]
            ax.scatter(xs, sub["metric_throughput_fps"], s=18, color=color, marker=marker,
                       label=f"{solver} (one point per task)" if solver else "task", zorder=3)
        ax.set_xticks(range(len(keys)), [f"{m}\n{d}" for m, d in keys], fontsize=7, rotation=45, ha="right")
        ax.set_ylabel("throughput (FPS)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        fig.suptitle(f"Pipeline mappings: throughput per model and device ({len(mp)} tasks)", fontsize=11)
        out.append(("Pipeline mapping throughput per model and device", fig))
    sp = done[done["kind"] == "split"] if "kind" in done.columns else done.iloc[0:0]
    if len(sp) and {"metric_latency_s", "metric_energy_j"} <= set(sp.columns):
        fig = new_figure(9.0, 5.0)
        ax = fig.add_subplot()
        models = sorted(sp["model"].unique())
        devices = sorted(sp["device"].unique())
        for mi, model in enumerate(models):
            for di, device in enumerate(devices):
                sub = sp[(sp["model"] == model) & (sp["device"] == device)]
                if not len(sub):
                    continue
                color = BASELINE_STYLES[mi % len(BASELINE_STYLES)][0]
                marker = "osD^v"[di % 5]
                ax.scatter(sub["metric_latency_s"] * 1e3, sub["metric_energy_j"] * 1e3, s=30, color=color,
                           marker=marker, alpha=0.8, edgecolors="black", linewidths=0.4,
                           label=f"{model} · {device}")
        for axis, col in ((ax.xaxis, "metric_latency_s"), (ax.yaxis, "metric_energy_j")):
            if auto_log(sp[col].to_numpy(float)):
                log_axis(ax, axis)
        ax.set_xlabel(axis_label("latency_s"))
        ax.set_ylabel(axis_label("energy_j"))
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False,
                  ncol=2 if len(models) * len(devices) > 16 else 1)
        fig.suptitle(f"Splits chosen (TOPSIS): latency vs phone energy ({len(sp)} tasks)", fontsize=11)
        out.append(("Chosen splits: latency against phone energy", fig))
    return out
