"""Fidelity report: the cost model against published absolute latencies and qualitative facts.

Published points and their citations are data (``search_spaces/calibration/published.yaml``,
docs/METHODS.md sections 1-8). For every absolute point the report gives modeled / published in the
op view and in the block view of the network, and op / block; the qualitative facts of Park & Ha
(IEEE Access 2024) become pass/fail rows. Used by ``benchmarks/bench_fidelity.py`` and
``dnnplan calibrate --report``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import SchemaError
from ..hardware.units import parse_quantity



@dataclass(frozen=True)
class PointRow:
    """One published absolute latency against the model, in both granularities."""

    device: str
    processor: str
    model: str
    dtype: str
    published_ms: float
    op_ms: float
    block_ms: float
    band: tuple[float, float]
    source: str
    stand_in: str = ""

    @property
    def op_ratio(self) -> float:
        return self.op_ms / self.published_ms

    @property
    def block_ratio(self) -> float:
        return self.block_ms / self.published_ms

    @property
    def passed(self) -> bool:
        lo, hi = self.band
        views_ok = all(lo <= r <= hi for r in (self.op_ratio, self.block_ratio))
        return views_ok and 1 / 1.3 <= self.op_ms / self.block_ms <= 1.3


@dataclass(frozen=True)
class FactRow:
    """One qualitative fact: its statement, the model's figure and whether it holds."""

    fact: str
    detail: str
    passed: bool
    source: str


def row_label(row: PointRow | FactRow) -> str:
    """How ``known_failures`` in the published data names a row: a point's ``device processor
    model dtype``, a fact's statement."""
    return row.fact if isinstance(row, FactRow) else f"{row.device} {row.processor} {row.model} {row.dtype}"


@dataclass
class FidelityReport:
    points: list[PointRow] = field(default_factory=list)
    facts: list[FactRow] = field(default_factory=list)
    #: ``known_failures`` of the published data: ``{"row": label prefix, "note": why}``
    known: list[dict[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(p.passed for p in self.points) and all(f.passed for f in self.facts)

    def known_note(self, row: PointRow | FactRow) -> str | None:
        """The note of a failing row listed in ``known_failures`` (None for any other row)."""
        if row.passed:
            return None
        label = row_label(row)
        return next((str(k["note"]) for k in self.known if label.startswith(str(k["row"]))), None)

    @property
    def unexpected_failures(self) -> list[str]:
        """Labels of the failing rows not listed in ``known_failures``."""
        return [row_label(r) for r in (*self.points, *self.facts) if not r.passed and self.known_note(r) is None]

    def to_dict(self) -> dict[str, Any]:
        pts = [{**asdict(p), "op_ratio": p.op_ratio, "block_ratio": p.block_ratio,
                "op_over_block": p.op_ms / p.block_ms, "passed": p.passed, "known": self.known_note(p)}
               for p in self.points]
        facts = [{**asdict(f), "known": self.known_note(f)} for f in self.facts]
        return {"passed": self.passed, "passed_except_known": not self.unexpected_failures,
                "points": pts, "facts": facts}


def read_published(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The published calibration data (``points``, ``speedups``, ``pipeline``, ``band``) of a file,
    or of a name in ``calibration/`` of the search spaces (default: the shipped ``published``)."""
    from ..shipped import resolve
    from ..yamlio import read_yaml

    src = resolve(path if path is not None else "published", "calibration", "published calibration points")
    data, _ = read_yaml(src)
    for key in ("points", "speedups", "pipeline", "band"):
        if not isinstance(data, dict) or key not in data:
            raise SchemaError(f"{src}: missing top-level field {key!r}; expected points, speedups, "
                              "pipeline and band (see search_spaces/calibration/published.yaml)")
    return data


@lru_cache(maxsize=None)
def _graph(model: str, granularity: str) -> Any:
    from ..graph import load_graph

    return load_graph(model, granularity)


@lru_cache(maxsize=None)
def _table(model: str, granularity: str, device: str, dtype: str, clocks: tuple = (),
           runtime: str | None = None) -> Any:
    from ..cost import build_cost_table
    from ..hardware import load_device

    return build_cost_table(_graph(model, granularity), load_device(device), dtype,
                            clock_hz=dict(clocks) or None, runtime=runtime)


def _whole_ms(model: str, granularity: str, device: str, dtype: str, proc: str, clocks: tuple = (),
              runtime: str | None = None) -> float:
    ct = _table(model, granularity, device, dtype, clocks, runtime)
    return float(ct.whole_network_latency()[ct.processor_index(proc)]) * 1e3


def point_rows(data: dict[str, Any]) -> list[PointRow]:
    """Modeled / published for every absolute point, op and block view."""
    band = tuple(float(b) for b in data["band"])
    rows = []
    for pt in data["points"]:
        clocks = tuple(sorted((k, parse_quantity(v, "frequency")) for k, v in (pt.get("clock") or {}).items()))
        key = (pt["model"], pt["device"], pt["dtype"], pt["processor"], clocks, pt.get("runtime"))
        op_ms = _whole_ms(key[0], "op", *key[1:])
        block_ms = _whole_ms(key[0], "block", *key[1:])
        # a point may carry its own band (an owner decision, e.g. a newer chip's figure as a
        # one-sided bound: the modeled device no faster and within x3, docs/METHODS.md section 8b)
        own = tuple(float(b) for b in pt["band"]) if "band" in pt else band
        rows.append(PointRow(pt["device"], pt["processor"], pt["model"], pt["dtype"], float(pt["ms"]),
                             op_ms, block_ms, own, pt["source"], pt.get("stand_in", "")))
    return rows


def _single_ms(models: list[str], device: str, dtype: str) -> dict[str, np.ndarray]:
    """Whole-network latency per processor (op view), per model."""
    return {m: _table(m, "op", device, dtype).whole_network_latency() * 1e3 for m in models}


def processor_facts(data: dict[str, Any]) -> list[FactRow]:
    """Park & Ha's single-processor facts on Pixel 6 and Galaxy S22 (docs/METHODS.md sections 1, 8)."""
    from ..hardware import load_device

    sp = data["speedups"]
    models, src = sp["models"], sp["source"]
    rows: list[FactRow] = []
    fastest_fp32 = {"pixel6": "tpu", "galaxy_s22": "gpu"}
    for dev_name, ranges in sp["ranges"].items():
        names = load_device(dev_name).processor_names
        fp32, fp16, int8 = (_single_ms(models, dev_name, d) for d in ("fp32", "fp16", "int8"))
        want = fastest_fp32.get(dev_name)
        if want:
            best = [names[int(np.argmin(fp32[m]))] for m in models]
            rows.append(FactRow(f"{dev_name}: {want} is the fastest FP32 single processor",
                                f"fastest: {', '.join(best)}", all(b == want for b in best),
                                "Park & Ha (docs/METHODS.md section 8)"))
        cpu = names.index("cpu")
        # "comparable to GPU or AI accelerator": within x2 of at least one of them
        ratio = [np.min(np.abs(np.log(int8[m][cpu] / np.delete(int8[m], cpu)))) for m in models]
        ratio = [float(np.exp(r)) for r in ratio]
        rows.append(FactRow(f"{dev_name}: INT8 CPU within x2 of the GPU or the accelerator",
                            "closest CPU / other (either way) " + ", ".join(f"{r:.2f}" for r in ratio),
                            all(r <= 2.0 for r in ratio), "Park & Ha (docs/METHODS.md section 8)"))
        for proc, (lo, hi) in ranges.items():
            j = names.index(proc)
            s = [fp32[m][j] / int8[m][j] for m in models]
            ok = all(lo * 0.95 <= x <= hi * 1.05 for x in s)
            rows.append(FactRow(f"{dev_name} {proc}: INT8/FP32 speed-up x{lo}-{hi} (+-5 %)",
                                ", ".join(f"x{x:.2f}" for x in s), ok, src))
        if "gpu" in names:
            g = names.index("gpu")
            r = [int8[m][g] / fp16[m][g] for m in models]
            rows.append(FactRow(f"{dev_name}: GPU INT8 not faster than FP16 (delegate runs INT8 in FP16)",
                                "INT8/FP16 time " + ", ".join(f"{x:.2f}" for x in r), all(x >= 0.999 for x in r),
                                "TFLite GPU delegate docs (docs/METHODS.md section 8)"))
    return rows


def pipeline_facts(data: dict[str, Any]) -> list[FactRow]:
    """Exact 3-stage pipeline / best INT8 single processor on the SSD detectors (Park & Ha).

    Each row also shows the *proportional reference*: the sum of the processors' whole-network
    rates over the best single processor's fps. A pipeline exceeds it only where some processor is
    faster on some layers than its whole-network rate suggests (per-layer heterogeneity); on a
    device whose costs are proportional across processors it is the most pipelining can give.
    """
    from ..search import solve
    from ..workflow import pipeline_problem

    cfg = data["pipeline"]
    rows = []
    for dev in cfg["devices"]:
        gains, refs = [], []
        for m in cfg["models"]:
            table = _table(m, "kernel", dev, "int8")  # what `dnnplan map` searches
            pb = pipeline_problem(_graph(m, "kernel"), dev, stages=3, table=table)
            best = solve(pb, "exact").best.objectives["throughput_fps"]
            single = solve(pb, "single").best.objectives["throughput_fps"]
            gains.append(best / single)
            refs.append(float(np.sum(1.0 / table.whole_network_latency())) / single)
        rows.append(FactRow(f"{dev}: pipeline / best INT8 single processor >= x{cfg['floor']}",
                            ", ".join(f"x{g:.2f}" for g in gains)
                            + " (proportional reference " + ", ".join(f"x{r:.2f}" for r in refs) + ")",
                            min(gains) >= float(cfg["floor"]), cfg["source"]))
    return rows


def spread_facts(data: dict[str, Any]) -> list[FactRow]:
    """Whole-network CPU / accelerator ratio spread across the zoo (docs/METHODS.md section 8b).

    A device model with one rate per processor gives every network about the same ratio; the
    published ratios of one device pair spread widely (nn-Meter's Pixel 4 CPU / Adreno 640 from
    x2.8 to x7.5). The row passes when the modeled spread (largest ratio / smallest) over the listed
    networks is at least the published one.
    """
    rows = []
    for sp in data.get("spreads") or []:
        num, den = sp["ratio"]
        ratios = []
        for m in sp["models"]:
            ct = _table(m, "op", sp["device"], sp["dtype"])
            whole = ct.whole_network_latency()
            ratios.append(float(whole[ct.processor_index(num)] / whole[ct.processor_index(den)]))
        lo, hi = (float(x) for x in sp["published"])
        spread = max(ratios) / min(ratios)
        rows.append(FactRow(
            f"{sp['device']}: {num} / {den} {sp['dtype'].upper()} spread across the zoo >= published x{hi / lo:.2f}",
            f"x{min(ratios):.2f} ({sp['models'][int(np.argmin(ratios))]}) to x{max(ratios):.2f} "
            f"({sp['models'][int(np.argmax(ratios))]}): spread x{spread:.2f}",
            spread >= hi / lo, sp["source"]))
    return rows


def _per_clock_weight(cfg: dict[str, Any], core: str) -> float:
    """Published per-clock throughput of ``core`` relative to the reference class: the geometric
    mean of its ``per_clock`` range (1 for the reference)."""
    if core == cfg["reference"]:
        return 1.0
    if core not in cfg["per_clock"]:
        raise SchemaError(f"published calibration points: core_classes.per_clock has no range for {core!r}; "
                          f"add one with its source, or list only {cfg['reference']} and "
                          f"{', '.join(cfg['per_clock'])} cores")
    lo, hi = (float(x) for x in cfg["per_clock"][core]["range"])
    return float(np.sqrt(lo * hi))


def core_class_rates(data: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Modeled MACs per cycle per core of every (device, core class) of ``core_classes``, per model:
    ``{device: {core: {model: rate}}}``.

    A device's modeled latency ``T`` of a network of ``M`` MACs under its runtime gives
    ``M / (T * sum(count * clock * w))`` per reference-equivalent core and cycle, where ``w`` is
    each cluster's published per-clock weight (:func:`_per_clock_weight`); a class's rate is that
    times its own ``w``. The cores come from the published data (spec sheets), not the device file.
    """
    cfg = data["core_classes"]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for entry in cfg["devices"]:
        dev, rt = entry["device"], entry.get("runtime")
        clocks = tuple(sorted((k, parse_quantity(v, "frequency")) for k, v in (entry.get("clock") or {}).items()))
        equiv = sum(int(c["count"]) * parse_quantity(c["clock"], "frequency") * _per_clock_weight(cfg, c["core"])
                    for c in entry["cores"])
        per_model = {}
        for m in cfg["models"]:
            macs = float(sum(la.macs for la in _graph(m, "op").layers))
            per_model[m] = macs / (_whole_ms(m, "op", dev, "fp32", "cpu", clocks, rt) * 1e-3 * equiv)
        out[dev] = {c["core"]: {m: r * _per_clock_weight(cfg, c["core"]) for m, r in per_model.items()}
                    for c in entry["cores"]}
    return out


def core_class_facts(data: dict[str, Any]) -> list[FactRow]:
    """Same core, same runtime, same efficiency (docs/METHODS.md section 8b): for every core class that
    two or more devices of ``core_classes`` run, the modeled per core*GHz rates agree within
    ``tolerance`` on every model; every class with a published per-clock range lies in it
    relative to the reference class (mean over the devices that run the reference)."""
    cfg = data.get("core_classes")
    if not cfg:
        return []
    rates = core_class_rates(data)
    src, kernels, ref, tol = cfg["source"], cfg["kernels"], cfg["reference"], float(cfg["tolerance"])
    classes = sorted({c for by_core in rates.values() for c in by_core})
    rows: list[FactRow] = []
    for core in classes:
        devs = [d for d in rates if core in rates[d]]
        if len(devs) < 2:
            continue
        spreads = {m: max(rates[d][core][m] for d in devs) / min(rates[d][core][m] for d in devs)
                   for m in cfg["models"]}
        detail = "; ".join(f"{m}: " + ", ".join(f"{d} {rates[d][core][m]:.3g}" for d in devs)
                           + f" (x{spreads[m]:.2f})" for m in cfg["models"])
        rows.append(FactRow(f"{core} under {kernels}: per core*GHz rate within x{tol} across {', '.join(devs)}",
                            detail + " MAC/cycle/core", all(s <= tol for s in spreads.values()), src))
    ref_devs = [d for d in rates if ref in rates[d]]
    for core, spec in cfg["per_clock"].items():
        devs = [d for d in rates if core in rates[d]]
        if not devs or not ref_devs:
            continue
        lo, hi = (float(x) for x in spec["range"])
        ratios = {(d, m): rates[d][core][m] / float(np.mean([rates[r][ref][m] for r in ref_devs]))
                  for d in devs for m in cfg["models"]}
        rows.append(FactRow(f"{core} / {ref} per clock under {kernels} within {lo}-{hi}",
                            ", ".join(f"{d} {m} {v:.2f}" for (d, m), v in ratios.items()),
                            all(lo <= v <= hi for v in ratios.values()), spec["source"]))
    return rows


def fidelity_report(path: str | os.PathLike[str] | None = None, *, pipeline: bool = True) -> FidelityReport:
    """Build the full report from the published data at ``path`` (default: the shipped file)."""
    data = read_published(path)
    known = data.get("known_failures") or []
    if not isinstance(known, list) or not all(isinstance(k, dict) and {"row", "note"} <= set(k) for k in known):
        raise SchemaError(f"{path or 'published calibration points'}: known_failures must be a list of "
                          "{row: <label prefix>, note: <why>} entries")
    facts = (processor_facts(data) + spread_facts(data) + core_class_facts(data)
             + (pipeline_facts(data) if pipeline else []))
    return FidelityReport(points=point_rows(data), facts=facts, known=known)


def format_report(report: FidelityReport) -> list[str]:
    """Plain-text lines of ``report`` (points table, then fact rows, then the verdict)."""
    lines = [f"{'device':13s} {'proc':4s} {'model':22s} {'dtype':5s} {'pub ms':>8s} {'op ms':>8s} "
             f"{'block ms':>8s} {'op/pub':>6s} {'blk/pub':>7s} {'op/blk':>6s} {'band':>9s}  ok"]
    for p in report.points:
        lines.append(f"{p.device:13s} {p.processor:4s} {p.model:22s} {p.dtype:5s} {p.published_ms:8.2f} "
                     f"{p.op_ms:8.2f} {p.block_ms:8.2f} {p.op_ratio:6.2f} {p.block_ratio:7.2f} "
                     f"{p.op_ms / p.block_ms:6.2f} {p.band[0]:4.2f}-{p.band[1]:<4.2f}  {_verdict(report, p)}")
    lines.append("")
    for f in report.facts:
        lines.append(f"{_verdict(report, f)}  {f.fact}: {f.detail}")
    rows = [*report.points, *report.facts]
    n_ok, n_known = sum(r.passed for r in rows), sum(report.known_note(r) is not None for r in rows)
    lines.append(f"\n{n_ok}/{len(rows)} rows pass" + (f"; {n_known} known failure(s) (KNOWN: not counted "
                                                      "unless --strict)" if n_known else ""))
    return lines


def _verdict(report: FidelityReport, row: PointRow | FactRow) -> str:
    note = report.known_note(row)
    return "PASS" if row.passed else (f"KNOWN ({note})" if note else "FAIL")
