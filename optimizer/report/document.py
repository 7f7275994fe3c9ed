"""The shareable report: ``report.html`` (self-contained) and ``report.md`` (PNGs beside it).

Every input is loaded and every figure rendered in memory before anything is written, so a bad
input leaves the output folder untouched; files are then written atomically, PNGs first,
``report.md`` next and ``report.html`` last.

The HTML embeds its figures as base64 PNG ``data:`` URIs and its style inline: no scripts, no
external links, readable offline and attachable to a mail.
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputFileError
from ..fileio import atomic_write_bytes, atomic_write_text
from .figure_style import baseline_label, figure_png
from .figures import plot_batch, plot_convergence, plot_front
from .timelines import plot_pipeline, plot_thermal
from .frames import SPLIT_OBJECTIVES, ReportInput, axis_label, display_factor, load_input, objective_columns

MAX_TABLE_ROWS = 60
_FIGURE_NAME = re.compile(r"fig\d{2}_[a-z0-9-]+\.png")


@dataclass
class RenderedFigure:
    """A rendered figure of the report."""

    caption: str
    png: bytes
    filename: str = ""


@dataclass
class Section:
    """One titled part of the report: paragraphs, tables (DataFrames of strings) and figures."""

    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def text(self, s: str) -> None:
        self.blocks.append(("text", s))

    def table(self, caption: str, df: Any) -> None:
        self.blocks.append(("table", (caption, df)))

    def figure(self, caption: str, fig: Any) -> None:
        self.blocks.append(("figure", RenderedFigure(caption, figure_png(fig))))


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: Path
    markdown: Path
    figures: tuple[Path, ...]


# ------------------------------------------------------------------------------- building
def build_sections(inputs: Sequence[ReportInput]) -> list[Section]:
    """Sections of a report over loaded inputs (fronts are paired with their split plans)."""
    fronts = [i for i in inputs if i.kind == "front"]
    paired: dict[int, ReportInput] = {}
    for k, inp in enumerate(inputs):
        if inp.kind == "plan" and inp.plan.kind == "split":
            for fr in fronts:
                if _front_matches_plan(fr, inp.plan) and all(fr is not v for v in paired.values()):
                    paired[k] = fr
                    break
    sections = []
    for k, inp in enumerate(inputs):
        if inp.kind == "front" and any(inp is v for v in paired.values()):
            continue
        if inp.kind == "plan":
            sections.append(_plan_section(inp, paired.get(k)))
        elif inp.kind == "front":
            sections.append(_front_section(inp))
        elif inp.kind == "batch":
            sections.append(_batch_section(inp))
        else:
            sections.append(_thermal_section(inp))
    return sections


def _front_matches_plan(front: ReportInput, plan: Any) -> bool:
    df = front.frame
    if "split" not in df.columns or not df["chosen"].any():
        return False
    row = df[df["chosen"]].iloc[0]
    p = plan.predicted
    if int(row["split"]) != plan.split.layer or p.latency_s is None or p.energy_j is None:
        return False
    return (abs(row["latency_s"] - p.latency_s) <= 1e-6 * abs(p.latency_s)
            and abs(row["energy_j"] - p.energy_j) <= 1e-6 * abs(p.energy_j))


def _fmt(v: Any, factor: float = 1.0, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    if isinstance(v, (int, float)):
        return f"{v * factor:.{digits}g}"
    return str(v)


def _table(rows: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame(rows).astype(str)


def _search_table(plan: Any) -> Any:
    s = plan.search
    rows = [("solver", s.solver), ("seed", _fmt(s.seed)), ("objectives", ", ".join(s.objectives) or "–"),
            ("evaluations", _fmt(s.evaluations)),
            ("design space", f"{s.space_size:,.0f} candidates" if s.space_size else "–"),
            ("explored", f"{s.explored_fraction:.2%}" if s.explored_fraction is not None else "–"),
            ("wall time", f"{s.wall_time_s:.3g} s" if s.wall_time_s is not None else "–")]
    if s.decision and "method" in s.decision:
        d = s.decision
        rows.append(("decision rule", f"{d.get('method', '')} {d.get('variant', '')}, weights "
                                      f"{d.get('weights')} ({d.get('score_meaning', '')})".strip()))
    elif s.decision and "rule" in s.decision:
        rows.append(("decision rule", str(s.decision["rule"])))
    rows.append(("created", f"{plan.provenance.created_at} by dnnplan {plan.provenance.tool_version}"))
    return _table([{"": k, "value": v} for k, v in rows])


def _split_rows(plan: Any) -> Any:
    """The choice and the baselines, with a column per objective searched beyond latency, energy
    and memory (risk over a trace, thermal; the choice's values from ``chosen_objectives``)."""
    L = plan.model.layers
    rows = []
    s = plan.split
    extra = [n for n in plan.search.objectives if n not in SPLIT_OBJECTIVES]
    mine = (plan.search.decision or {}).get("chosen_objectives") or {}

    def extras(o: Any) -> dict[str, str]:
        return {axis_label(n): _fmt(o.get(n), display_factor(n)) if n in o else "–" for n in extra}

    chosen = {"candidate": f"chosen ({plan.search.solver})", "split": f"{s.layer}/{L}",
              "head": f"{s.head_processor} {(s.head_clock_hz or 0) / 1e9:.2f} GHz" if s.layer else "–",
              "wire": s.wire_dtype if s.layer < L else "–", "up kB": _fmt(s.bytes, 1e-3),
              "latency ms": _fmt(plan.predicted.latency_s, 1e3), "energy mJ": _fmt(plan.predicted.energy_j, 1e3),
              "memory MB": _fmt(plan.predicted.memory_bytes, 1e-6), **extras(mine), "feasible": "yes"}
    rows.append(chosen)
    for name, b in plan.search.baselines.items():
        d, o = b.get("decision") or {}, b.get("objectives") or {}
        k = int(d.get("split", 0))
        rows.append({"candidate": baseline_label(name), "split": f"{k}/{L}",
                     "head": f"{d.get('processor')} {(d.get('clock_hz') or 0) / 1e9:.2f} GHz" if k else "–",
                     "wire": d.get("wire_dtype", "–") if k < L else "–", "up kB": "",
                     "latency ms": _fmt(o.get("latency_s"), 1e3), "energy mJ": _fmt(o.get("energy_j"), 1e3),
                     "memory MB": _fmt(o.get("memory_bytes"), 1e-6), **extras(o),
                     "feasible": "yes" if b.get("feasible", True) else "no"})
    return _table(rows)


def _plan_section(inp: ReportInput, front: ReportInput | None) -> Section:
    plan = inp.plan
    sec = Section(f"{inp.title} — {inp.path.name}")
    p = plan.predicted
    if plan.kind == "split":
        s = plan.split
        L = plan.model.layers
        where = ("everything runs on the server" if s.layer == 0 else
                 f"everything runs on the phone ({s.head_processor})" if s.layer >= L else
                 f"the phone runs layers 0–{s.layer - 1} on {s.head_processor} and uploads {s.bytes / 1e3:.1f} kB "
                 f"({s.wire_dtype}) to {s.server or 'the server'}")
        sec.text(f"{plan.model.name} ({L} {plan.model.granularity} layers, {plan.model.dtype}) split at boundary "
                 f"{s.layer}: {where}; predicted latency {_fmt(p.latency_s, 1e3)} ms, phone energy "
                 f"{_fmt(p.energy_j, 1e3)} mJ, memory {_fmt(p.memory_bytes, 1e-6)} MB.")
        from ..workflow.advice import plan_warnings
        from ..workflow.robust import trace_summary

        for line in plan_warnings(plan):
            sec.text(line[0].upper() + line[1:])
        if (line := trace_summary(plan)) is not None:
            sec.text(line[0].upper() + line[1:] + ".")
        sec.table("Chosen split against the baselines", _split_rows(plan))
        sec.figure("Where the time of one inference goes (largest part hatched)", plot_pipeline(plan))
        if front is not None:
            import pandas as pd

            base = inp.frame[inp.frame["baseline"] != ""]
            merged = pd.concat([front.frame, base], ignore_index=True)
            merged.attrs.update(front.frame.attrs)
            sec.text(f"Pareto front from {front.path.name}: {len(front.frame)} solutions.")
            sec.figure("Pareto front: latency against phone energy, TOPSIS choice and baselines",
                       plot_front(merged, "latency_s", "energy_j"))
            sec.figure("Pareto front in all three objectives (scatter matrix)",
                       plot_front(merged, *SPLIT_OBJECTIVES[:2], z=SPLIT_OBJECTIVES[2]))
            sec.table("Pareto front", _front_table(front.frame))
        else:
            sec.figure("Chosen split against the baselines (no front given: pass the --front CSV too)",
                       plot_front(inp.frame, "latency_s", "energy_j",
                                  title=f"{plan.model.name}: chosen split and baselines"))
    else:
        stages = []
        times = [st.predicted_time_s or 0.0 for st in plan.stages or []]
        bott = max(range(len(times)), key=times.__getitem__) if times else -1
        for k, st in enumerate(plan.stages or []):
            stages.append({"stage": str(k + 1), "processor": st.processor,
                           "layers": f"{st.first_layer}–{st.last_layer} ({st.last_layer - st.first_layer + 1})",
                           "threads": _fmt(st.threads), "time ms": _fmt(st.predicted_time_s, 1e3),
                           "": "bottleneck" if k == bott else ""})
        sec.text(f"{plan.model.name} ({plan.model.layers} {plan.model.granularity} layers, {plan.model.dtype}) on "
                 f"{plan.device} as a pipeline of {len(stages)} stages: predicted "
                 f"{_fmt(p.throughput_fps, 1, 4)} FPS, latency {_fmt(p.latency_s, 1e3)} ms, energy "
                 f"{_fmt(p.energy_j, 1e3)} mJ per frame.")
        sec.table("Stages", _table(stages))
        sec.figure("Pipeline schedule of consecutive frames (bottleneck stage hatched)", plot_pipeline(plan))
        if plan.search.baselines:
            rows = [{"mapping": f"chosen ({plan.search.solver})", "throughput FPS": _fmt(p.throughput_fps),
                     "latency ms": _fmt(p.latency_s, 1e3), "energy mJ": _fmt(p.energy_j, 1e3), "chosen / this": "1"}]
            for name, b in plan.search.baselines.items():
                fps = (b.get("objectives") or {}).get("throughput_fps")
                rows.append({"mapping": baseline_label(name), "throughput FPS": _fmt(fps),
                             "latency ms": _fmt((b.get("objectives") or {}).get("latency_s"), 1e3),
                             "energy mJ": _fmt((b.get("objectives") or {}).get("energy_j"), 1e3),
                             "chosen / this": f"×{p.throughput_fps / fps:.2f}" if fps and p.throughput_fps else "–"})
            sec.table("Throughput against the baselines", _table(rows))
        front_rows = inp.frame[inp.frame["on_front"] & (inp.frame["baseline"] == "")]
        if len(front_rows) > 1:
            keys = {"throughput": "throughput_fps", "fps": "throughput_fps", "latency": "latency_s",
                    "energy": "energy_j", "memory": "memory_bytes"}
            searched = [keys.get(o, o) for o in plan.search.objectives]
            objs = [c for c in dict.fromkeys([*searched, *objective_columns(front_rows)])
                    if c in front_rows.columns and front_rows[c].notna().all()]
            if len(objs) >= 2:
                sec.figure("Pareto front of the mapping search", plot_front(inp.frame, objs[0], objs[1],
                                                                          chosen_label="chosen mapping"))
        history = plan.search.settings.get("history")
        if isinstance(history, list) and history:
            sec.figure("Search convergence", plot_convergence(history, objective="throughput_fps"))
    sec.table("How the plan was found", _search_table(plan))
    return sec


def _front_table(df: Any) -> Any:
    cols = [c for c in dict.fromkeys(("split", "boundary_after_layer", "processor", "clock_hz", "wire_dtype",
                                      "crossing_bytes", *objective_columns(df), "chosen")) if c in df.columns]
    out = df[cols].sort_values(objective_columns(df)[0]).head(MAX_TABLE_ROWS).copy()
    scale = {"boundary_after_layer": ("after layer", 1.0), "wire_dtype": ("wire", 1.0), "clock_hz": ("clock GHz", 1e-9), "crossing_bytes": ("up kB", 1e-3), "latency_s": ("latency ms", 1e3),
             "energy_j": ("energy mJ", 1e3), "memory_bytes": ("memory MB", 1e-6),
             "throughput_fps": ("throughput FPS", 1.0)}
    rows = []
    for _, r in out.iterrows():
        row = {}
        for c in cols:
            name, f = scale.get(c, (c, 1.0))
            v = r[c]
            if c == "chosen":
                row[name] = "◀ chosen" if bool(v) else ""
            else:
                row[name] = _fmt(v, f) if isinstance(v, (int, float)) and not isinstance(v, bool) else _fmt(v)
        rows.append(row)
    return _table(rows)


def _front_section(inp: ReportInput) -> Section:
    df = inp.frame
    sec = Section(f"Pareto front — {inp.path.name}")
    objs = objective_columns(df)
    x, y = ("latency_s", "energy_j") if {"latency_s", "energy_j"} <= set(objs) else (objs[0], objs[1])
    n_chosen = int(df["chosen"].sum())
    sec.text(f"{len(df)} solutions; objectives {', '.join(objs)}"
             + ("; the chosen solution is marked." if n_chosen else "; no solution is marked as chosen."))
    sec.figure(f"Pareto front: {x} against {y}", plot_front(df, x, y))
    if len(objs) >= 3:
        sec.figure("Pareto front in three objectives (scatter matrix)", plot_front(df, objs[0], objs[1], z=objs[2]))
    sec.table("Pareto front" + (f" (first {MAX_TABLE_ROWS} rows)" if len(df) > MAX_TABLE_ROWS else ""),
              _front_table(df))
    return sec


def _batch_section(inp: ReportInput) -> Section:
    df = inp.frame
    sec = Section(f"{inp.title} — {inp.path}")
    counts = df["status"].value_counts().to_dict() if "status" in df.columns else {}
    sec.text(f"{len(df)} tasks: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("done", "failed", "pending"))
             + (f"; total search wall time {df['wall_time_s'].fillna(0).sum():.1f} s." if "wall_time_s" in df else "."))
    keys = [k for k in ("kind", "model", "device", "network", "solver") if k in df.columns]
    if keys and len(df):
        g = df.assign(network=df["network"].fillna("–") if "network" in df else "–").groupby(keys, sort=True,
                                                                                              dropna=False)
        rows = []
        for key, sub in g:
            done = sub[sub["status"] == "done"]
            row = dict(zip(keys, map(str, key if isinstance(key, tuple) else (key,))))
            row.update({"tasks": str(len(sub)), "done": str(len(done)), "failed": str(int((sub["status"] == "failed").sum()))})
            for col, name, f in (("metric_throughput_fps", "FPS", 1.0), ("metric_latency_s", "latency ms", 1e3),
                                 ("metric_energy_j", "energy mJ", 1e3)):
                row[name] = _fmt(done[col].mean(), f) if col in done and done[col].notna().any() else "–"
            row["evaluations"] = _fmt(done["evaluations"].mean()) if "evaluations" in done and len(done) else "–"
            row["explored"] = (f"{done['explored_fraction'].mean():.2%}"
                               if "explored_fraction" in done and done["explored_fraction"].notna().any() else "–")
            row["wall s"] = _fmt(done["wall_time_s"].mean(), 1, 3) if "wall_time_s" in done and len(done) else "–"
            rows.append(row)
        sec.table("Tasks by search (means over seeds of the done tasks)", _table(rows))
    for caption, fig in plot_batch(df):
        sec.figure(caption, fig)
    failed = df[df["status"] == "failed"] if "status" in df.columns else df.iloc[0:0]
    if len(failed):
        cols = [c for c in ("task_id", "kind", "model", "device", "solver", "seed", "error") if c in failed.columns]
        sec.table(f"Failed tasks ({len(failed)}" + (f", first {MAX_TABLE_ROWS}" if len(failed) > MAX_TABLE_ROWS else "")
                  + ")", failed[cols].head(MAX_TABLE_ROWS).astype(str))
    return sec


def _thermal_section(inp: ReportInput) -> Section:
    d = inp.data
    sec = Section(f"{inp.title} — {inp.path.name}")
    keys = ("duration_s", "time_to_first_throttle_s", "time_to_severe_s", "initial_fps", "sustained_fps",
            "peak_skin_c", "peak_die_c", "events")
    sec.table("Summary", _table([{"": k, "value": _fmt(d.get(k))} for k in keys if k in d]))
    sec.figure("Temperatures, clock caps and throughput over the run (throttled time shaded)", plot_thermal(d))
    events = d.get("event_log") or []
    if events:
        sec.table("Governor events", _table([{k: _fmt(e.get(k)) for k in ("time_s", "kind", "detail", "temperature_c")}
                                             for e in events[:MAX_TABLE_ROWS]]))
    return sec


# ------------------------------------------------------------------------------- rendering
_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #4C72B0;padding-bottom:.2em}
h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.85em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}
th{background:#f3f5f9}
td:first-child,th:first-child{text-align:left}
figure{margin:1em 0}
figure img{max-width:100%;border:1px solid #eee}
figcaption,.caption{font-size:.85em;color:#555}
.meta{color:#666;font-size:.85em}
"""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "figure"


def render_html(title: str, sections: Sequence[Section], meta: Sequence[str]) -> str:
    """Self-contained HTML: inline CSS, figures as base64 PNG data URIs, no scripts or links."""
    esc = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>", f"<h1>{esc(title)}</h1>"]
    parts += [f'<p class="meta">{esc(m)}</p>' for m in meta]
    parts.append("<ol>" + "".join(f'<li><a href="#s{i}">{esc(s.title)}</a></li>'
                                  for i, s in enumerate(sections, 1)) + "</ol>")
    for i, sec in enumerate(sections, 1):
        parts.append(f'<h2 id="s{i}">{i}. {esc(sec.title)}</h2>')
        for kind, block in sec.blocks:
            if kind == "text":
                parts.append(f"<p>{esc(block)}</p>")
            elif kind == "table":
                caption, df = block
                parts.append(f'<p class="caption"><b>{esc(caption)}</b></p>')
                parts.append(df.to_html(index=False, escape=True, border=0, na_rep="–"))
            else:
                b64 = base64.b64encode(block.png).decode("ascii")
                parts.append(f'<figure><img alt="{esc(block.caption)}" src="data:image/png;base64,{b64}">'
                             f"<figcaption>{esc(block.caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _md_cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _md_table(df: Any) -> str:
    head = "| " + " | ".join(_md_cell(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def render_markdown(title: str, sections: Sequence[Section], meta: Sequence[str]) -> str:
    """Markdown with tables and ``![caption](figNN.png)`` images (file names set beforehand)."""
    parts = [f"# {title}", "", *[f"*{m}*  " for m in meta], ""]
    for i, sec in enumerate(sections, 1):
        parts += [f"## {i}. {sec.title}", ""]
        for kind, block in sec.blocks:
            if kind == "text":
                parts += [block, ""]
            elif kind == "table":
                caption, df = block
                parts += [f"**{caption}**", "", _md_table(df), ""]
            else:
                parts += [f"![{block.caption}]({block.filename})", "", f"*{block.caption}*", ""]
    return "\n".join(parts).rstrip() + "\n"


def write_report(paths: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str],
                 title: str | None = None) -> ReportFiles:
    """Write ``report.html`` and ``report.md`` (with its PNG figures) for plans, fronts and runs.

    Parameters
    ----------
    paths
        Plan JSON files, Pareto-front CSVs, batch run folders or thermal simulation JSONs; a front
        whose chosen row matches a split plan given alongside is shown with that plan's baselines.
    out_dir
        Output folder (created). Figures of an earlier report there (``figNN_*.png``) that this
        report does not have are removed, so ``report.md`` and its folder stay consistent.
    title
        Report title (default: "dnnplan report").

    Returns
    -------
    ReportFiles

    Raises
    ------
    InputFileError, SchemaError
        A bad input; nothing is written.
    """
    from .. import __version__

    if not paths:
        raise ConfigError("report: give at least one plan, front CSV or batch run folder")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputFileError(f"{out}: exists and is not a folder; --out must be a folder")
    inputs = [load_input(p) for p in paths]
    sections = build_sections(inputs)
    n = 0
    for sec in sections:
        for kind, block in sec.blocks:
            if kind == "figure":
                n += 1
                block.filename = f"fig{n:02d}_{_slug(block.caption)}.png"
    title = title or "dnnplan report"
    meta = [f"generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} by dnnplan {__version__}",
            "inputs: " + ", ".join(str(i.path) for i in inputs)]
    md = render_markdown(title, sections, meta)
    page = render_html(title, sections, meta)
    written = []
    for sec in sections:
        for kind, block in sec.blocks:
            if kind == "figure":
                written.append(atomic_write_bytes(out / block.filename, block.png))
    md_path = atomic_write_text(out / "report.md", md)
    html_path = atomic_write_text(out / "report.html", page)
    # figures of an earlier report in the same folder that this one no longer has
    keep = {p.name for p in written}
    for stale in out.glob("fig[0-9][0-9]_*.png"):
        if stale.name not in keep and _FIGURE_NAME.fullmatch(stale.name):
            stale.unlink()
    return ReportFiles(html=html_path, markdown=md_path, figures=tuple(written))
