"""Fit one processor of a device to per-operator profiles (``dnnplan calibrate --from-profile``)
or to this host's per-layer measurements (``dnnplan measure --calibrate-host``, through
:func:`optimizer.measure.profile_match.table_match`): the project's one fit of a processor.

The analytic roofline of :mod:`optimizer.cost.analytic` gives each layer
``o * dispatched + max(MACs / (peak * eff[family] * f / f_max), bytes / bandwidth)``. Given
profiles matched to layers (:mod:`optimizer.measure.profile_match`), the processor's
op-family efficiencies and per-layer overhead ``o`` are fitted by least squares on the log of
modeled / profiled time of every (profile, op family), of every profile's whole network (all the
layers it covers, weighted :data:`WHOLE_WEIGHT` x sqrt(families)), plus, weighted 0.3, of every
layer that one profile row timed on its own (:func:`scipy.optimize.least_squares`, trust-region
reflective, efficiencies bounded to the schema's (0, 4]). The per-invoke overhead is the least
over the profiles (and, for onnxruntime, over the runs) of (measured whole run - sum of the
operator times), where a profile gives the whole run: contention on a shared machine only adds to it. Modeled times come from :func:`optimizer.cost.analytic.analytic_costs`
itself, on a copy of the device with the candidate values, so the fit and the planner use
one model.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..hardware.schema import Device
from .profile_import import modeled_layers
from .profile_match import ProfileMatch, layer_family

EFF_BOUNDS = (1e-3, 4.0)  # Processor.efficiency: gt 0, le 4
OVERHEAD_BOUNDS = (1e-8, 1e-2)  # seconds per dispatched layer
BANDWIDTH_BOUNDS = (1e8, 1e13)  # bytes/s
LAYER_WEIGHT = 0.3  # weight of the per-layer residuals against the per-family ones
#: weight of a profile's whole-network residual, times sqrt(its families): the whole network
#: counts as much as its families together (larger weights trade the per-family error for the
#: in-sample whole-network one: BENCHMARKS.md, "one fit of a processor")
WHOLE_WEIGHT = 1.0
#: weight of the log-distance of layer_overhead and memory_bandwidth from the device's values
PRIOR_WEIGHT = 0.05
#: an efficiency whose posterior log standard deviation exceeds this is not pinned down by the data
SPREAD_MAX = 1.0


@dataclass(frozen=True)
class FamilyRow:
    """Profiled and modeled seconds of one op family in one profile."""

    profile: str
    model: str
    family: str
    profile_s: float
    before_s: float
    after_s: float

    @property
    def ratio_before(self) -> float:
        return self.before_s / self.profile_s

    @property
    def ratio_after(self) -> float:
        return self.after_s / self.profile_s


@dataclass
class ProfileFit:
    """Result of :func:`fit_processor_to_profiles`."""

    device: Device  # the device with the fitted processor
    processor: str
    efficiency: dict[str, float]
    layer_overhead_s: float
    invoke_overhead_s: float | None
    memory_bandwidth_bytes_per_s: float
    rows: list[FamilyRow] = field(default_factory=list)
    cost: float = math.nan
    #: per network, modeled / profiled seconds of all its covered layers after the fit
    model_over_measured: dict[str, float] = field(default_factory=dict)
    #: parameters the profiles do not constrain (kept near the device's value) or that end on a bound
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"processor": self.processor, "efficiency": self.efficiency,
                "layer_overhead_s": self.layer_overhead_s, "invoke_overhead_s": self.invoke_overhead_s,
                "memory_bandwidth_bytes_per_s": self.memory_bandwidth_bytes_per_s,
                "model_over_measured": self.model_over_measured, "notes": self.notes,
                "families": [{"profile": r.profile, "model": r.model, "family": r.family,
                              "profile_ms": r.profile_s * 1e3, "before_ms": r.before_s * 1e3,
                              "after_ms": r.after_s * 1e3, "after_over_profile": r.ratio_after}
                             for r in self.rows]}


def with_processor(device: Device, processor: str, efficiency: dict[str, float] | None = None,
                   layer_overhead_s: float | None = None, invoke_overhead_s: float | None = None,
                   bandwidth: float | None = None) -> Device:
    """A copy of ``device`` whose ``processor`` has the given values (None keeps a value)."""
    update: dict[str, Any] = {}
    if bandwidth is not None:
        update["memory_bandwidth_bytes_per_s"] = bandwidth
    if efficiency is not None:
        update["efficiency"] = efficiency
    if layer_overhead_s is not None:
        update["layer_overhead_s"] = layer_overhead_s
    if invoke_overhead_s is not None:
        update["invoke_overhead_s"] = invoke_overhead_s
    procs = [p.model_copy(update=update) if p.name == processor else p for p in device.processors]
    return device.model_copy(update={"processors": procs})


def kernel_families(match: ProfileMatch, dtype: str = "fp32") -> list[str]:
    """Family of the kernel each layer runs in: its own, or for a layer fused into the kernel
    before it (batch-norm, activation, padding: not dispatched, modeled at no cost of its own)
    that kernel's, so a runtime's time for a fused op is charged where the model puts it."""
    from ..cost.features import layer_arrays

    dispatched = np.asarray(layer_arrays(match.graph, dtype).dispatched, dtype=bool)
    fams = [layer_family(match.graph, i) for i in range(len(match.graph.layers))]
    kernels = np.flatnonzero(dispatched)
    out = []
    for i, fam in enumerate(fams):
        if dispatched[i] or kernels.size == 0:
            out.append(fam)
            continue
        before = kernels[kernels < i]
        out.append(fams[int(before[-1] if before.size else kernels[0])])
    return out


def family_sums(match: ProfileMatch, values: np.ndarray, fams: list[str] | None = None) -> dict[str, float]:
    """Sum of ``values`` over the covered layers of each kernel family (:func:`kernel_families`)
    the profile timed."""
    fams = fams if fams is not None else kernel_families(match)
    out: dict[str, float] = {}
    for i in np.flatnonzero(match.covered & (fit_times(match) > 0)):
        out[fams[i]] = out.get(fams[i], 0.0) + float(values[i])
    return out


def fit_times(match: ProfileMatch) -> np.ndarray:
    """[L] profiled seconds the model is fitted to: the layer times less the data-movement ops
    the model does not cost (a converter's layout transposes; reported apart)."""
    unmodeled = match.unmodeled_s if match.unmodeled_s is not None else 0.0
    return np.maximum(np.nan_to_num(match.latency_s) - unmodeled, 0.0)


def family_rows(before: Device, after: Device, processor: str, match: ProfileMatch, dtype: str) -> list[FamilyRow]:
    """Per op family of one profile: profiled, modeled before and after seconds."""
    fams = kernel_families(match, dtype)
    prof = family_sums(match, fit_times(match), fams)
    b = family_sums(match, modeled_layers(before, processor, match.graph, dtype), fams)
    a = family_sums(match, modeled_layers(after, processor, match.graph, dtype), fams)
    return [FamilyRow(match.profile.path, match.graph.name, f, prof[f], b[f], a[f]) for f in sorted(prof, key=lambda k: -prof[k])]


def fit_processor_to_profiles(device: Device, processor: str, matches: list[ProfileMatch],
                              dtype: str = "fp32") -> ProfileFit:
    """Fit ``processor``'s op-family efficiencies, overheads and memory bandwidth to ``matches``
    (module doc).

    Raises
    ------
    ConfigError
        No profile times any layer with MACs (nothing to fit).
    """
    from scipy.optimize import least_squares

    if not matches:
        raise ConfigError("calibrate --from-profile needs at least one profile")
    _warn_whole_delegate_rows(matches)
    proc = device.processor(processor)
    data = []
    families: list[str] = []
    for m in matches:
        fams = kernel_families(m, dtype)
        meas = fit_times(m)
        single = (m.single if m.single is not None else np.zeros(len(meas), dtype=bool)) & (meas > 1e-6)
        data.append((m, fams, family_sums(m, meas, fams), single))
        for i in np.flatnonzero(m.covered & (meas > 0)):
            if m.graph.layers[i].macs > 0 and fams[i] not in families:
                families.append(fams[i])
    if not families:
        raise ConfigError("the profiles time no layer with multiply-accumulates: no efficiency to fit")
    # start compute-bound: each family's efficiency explains its profiled time by MACs alone (a
    # memory-bound start has no gradient in the efficiency); bandwidth from the device and x4
    ideal = with_processor(device, processor, {**proc.efficiency, **{f: 1.0 for f in families}},
                           OVERHEAD_BOUNDS[0], bandwidth=BANDWIDTH_BOUNDS[1])
    at_one: dict[str, float] = {}
    for m, fams, _, _ in data:
        for f, v in family_sums(m, modeled_layers(ideal, processor, m.graph, dtype), fams).items():
            at_one[f] = at_one.get(f, 0.0) + v
    measured = {f: sum(prof.get(f, 0.0) for _, _, prof, _ in data) for f in families}
    eff0 = [float(np.clip(at_one[f] / measured[f], *EFF_BOUNDS)) for f in families]
    overhead0 = float(np.clip(proc.layer_overhead_s, *OVERHEAD_BOUNDS))
    starts = [np.log(eff0 + [overhead0, float(np.clip(b, *BANDWIDTH_BOUNDS))])
              for b in (proc.memory_bandwidth_bytes_per_s, 4 * proc.memory_bandwidth_bytes_per_s)]
    lo = np.log([EFF_BOUNDS[0]] * len(families) + [OVERHEAD_BOUNDS[0], BANDWIDTH_BOUNDS[0]])
    hi = np.log([EFF_BOUNDS[1]] * len(families) + [OVERHEAD_BOUNDS[1], BANDWIDTH_BOUNDS[1]])
    # a weak prior at the device's own overhead and bandwidth: a parameter the profiles do not
    # constrain stays there instead of drifting to a bound (and is reported, _unconstrained)
    prior = np.log([overhead0, float(np.clip(proc.memory_bandwidth_bytes_per_s, *BANDWIDTH_BOUNDS))])

    def candidate(x: np.ndarray) -> Device:
        eff = dict(proc.efficiency)
        eff.update({f: float(math.exp(v)) for f, v in zip(families, x[:-2], strict=True)})
        return with_processor(device, processor, eff, float(math.exp(x[-2])), bandwidth=float(math.exp(x[-1])))

    def residuals(x: np.ndarray) -> np.ndarray:
        dev = candidate(x)
        res: list[float] = []
        for m, fams, prof, single in data:
            pred = modeled_layers(dev, processor, m.graph, dtype)
            mod = family_sums(m, pred, fams)
            res += [math.log(max(mod[f], 1e-12) / prof[f]) for f in prof]
            res.append(WHOLE_WEIGHT * math.sqrt(len(prof)) * math.log(_whole(pred, m)))
            if single.any():
                meas = fit_times(m)[single]
                res += list(LAYER_WEIGHT * np.log(np.maximum(pred[single], 1e-12) / meas) / math.sqrt(single.sum()))
        return np.concatenate([res, PRIOR_WEIGHT * (x[-2:] - prior)])

    fit = min((least_squares(residuals, np.clip(x0, lo, hi), bounds=(lo, hi), method="trf") for x0 in starts),
              key=lambda r: float(r.cost))
    invoke = _invoke_overhead(matches)
    fitted = candidate(fit.x)
    if invoke is not None:
        fitted = with_processor(fitted, processor, invoke_overhead_s=invoke)
    rows = [r for m in matches for r in family_rows(device, fitted, processor, m, dtype)]
    eff = {f: float(math.exp(v)) for f, v in zip(families, fit.x[:-2], strict=True)}
    whole = {m.graph.name: _whole(modeled_layers(fitted, processor, m.graph, dtype), m) for m in matches}
    notes = _unconstrained(fit, families + ["layer_overhead", "memory_bandwidth"], lo, hi)
    return ProfileFit(fitted, processor, eff, float(math.exp(fit.x[-2])), invoke, float(math.exp(fit.x[-1])),
                      rows, float(fit.cost), whole, notes)


def _warn_whole_delegate_rows(matches: list[ProfileMatch]) -> None:
    for m in matches:
        if m.mode == "delegate":
            warnings.warn(f"{m.profile.path}: one delegate row times the whole of {m.graph.name!r}: its per-family "
                          "times are the model's own split, so the fit only scales them (profile with the "
                          "delegate's per-op profiling, or on the CPU, to fit the families)", stacklevel=3)


def _unconstrained(fit: Any, names: list[str], lo: np.ndarray, hi: np.ndarray) -> list[str]:
    """One line per fitted parameter the profiles do not pin down: its posterior variance (the
    diagonal of ``(J^T J)^+`` at the optimum, log scale) is more than half the prior's for
    ``layer_overhead``/``memory_bandwidth`` (it stayed near the device's value) or above
    :data:`SPREAD_MAX` for an efficiency (collinear with others), or it ended on a bound."""
    jac = np.asarray(fit.jac, dtype=np.float64)
    var = np.diag(np.linalg.pinv(jac.T @ jac))
    notes = []
    for j, name in enumerate(names):
        value = math.exp(fit.x[j])
        shown = (f"{value * 1e6:.3g} us" if name == "layer_overhead" else f"{value / 1e9:.4g} GB/s"
                 if name == "memory_bandwidth" else f"{value:.4g}")
        has_prior = j >= len(names) - 2
        if has_prior and var[j] > 0.5 / PRIOR_WEIGHT**2:
            notes.append(f"{name}: the profile(s) hardly constrain it (log sd {math.sqrt(var[j]):.2g}, its prior "
                         f"{1 / PRIOR_WEIGHT:.2g}); it rests on the device's value as a prior, now {shown}")
        elif not has_prior and var[j] > SPREAD_MAX**2:
            notes.append(f"{name}: the profile(s) do not separate it from other parameters (log sd "
                         f"{math.sqrt(var[j]):.2g}); fitted {shown}")
        elif fit.x[j] <= lo[j] + 1e-6 or fit.x[j] >= hi[j] - 1e-6:
            notes.append(f"{name}: on the bound of its range at {shown}; the profile(s) cannot place it inside")
    return notes


def _whole(modeled: np.ndarray, match: ProfileMatch) -> float:
    """Modeled / profiled seconds of all the layers a profile covers (those the runtime fused
    away, timed at 0, included: the planner costs them)."""
    covered = match.covered
    return max(float(modeled[covered].sum()), 1e-12) / max(float(fit_times(match)[covered].sum()), 1e-12)


def _invoke_overhead(matches: list[ProfileMatch]) -> float | None:
    gaps = [m.profile.invoke_overhead_s for m in matches if m.profile.invoke_overhead_s is not None]
    return float(max(0.0, min(gaps))) if gaps else None  # contention only adds: the least


def _set_fitted(mapping: Any, key: str, value: Any) -> None:
    """Set ``mapping[key]`` (a ruamel.yaml round-trip mapping) to a fitted ``value``. A comment at
    the end of the key's line described the old value: it is kept, prefixed ``was OLD:``, so it
    no longer reads as the new value's justification; comment lines after it stay as they are."""
    old = mapping.get(key)
    mapping[key] = value
    slots = getattr(mapping, "ca", None) and mapping.ca.items.get(key)
    token = slots[2] if slots and len(slots) > 2 else None
    if token is None or old is None or old == value:
        return
    first, sep, rest = token.value.partition("\n")
    text = first.lstrip("#").strip()
    if text and not text.startswith("was "):
        token.value = f"# was {old}: {text}{sep}{rest}"


def device_yaml(device_path: str, processor: str, fit: ProfileFit, files: list[str], date: str,
                out: str | None = None) -> str:
    """The device file at ``device_path`` (one the device loader accepted) with ``processor``'s efficiency, layer_overhead,
    memory_bandwidth and (when fitted) invoke_overhead replaced and a ``source`` naming the fit
    (:func:`edit_processor_yaml`; a header comment names the fit)."""
    note = (f"efficiency ({', '.join(fit.efficiency)}), layer_overhead, memory_bandwidth"
            + (", invoke_overhead" if fit.invoke_overhead_s is not None else "")
            + f" fitted to profile {', '.join(files)} by dnnplan calibrate --from-profile on {date}")

    def edit(entry: Any) -> None:
        if entry.get("efficiency") is None:
            entry["efficiency"] = {}
        for f, v in fit.efficiency.items():  # in place: a flow-style table stays one
            _set_fitted(entry["efficiency"], f, float(f"{v:.4g}"))
        _set_fitted(entry, "layer_overhead", f"{fit.layer_overhead_s * 1e6:.4g} us")
        _set_fitted(entry, "memory_bandwidth", f"{fit.memory_bandwidth_bytes_per_s / 1e9:.4g} GB/s")
        if fit.invoke_overhead_s is not None:
            _set_fitted(entry, "invoke_overhead", f"{fit.invoke_overhead_s * 1e6:.4g} us")
        entry["source"] = f"{entry.get('source', '')}; {note}".lstrip("; ")

    return edit_processor_yaml(device_path, processor, edit, note, out)


def edit_processor_yaml(device_path: str, processor: str, edit: Any, note: str, out: str | None = None) -> str:
    """The device file at ``device_path`` (one the device loader accepted) with ``edit(entry)``
    applied to ``processor``'s mapping, and ``note`` as a header comment; for a file to be
    written at ``out``, predictors' relative ``table`` paths are rebased onto its folder.

    The file is edited as a ruamel.yaml round-trip document, so its comments, key order, flow
    styles and every other processor stay as the user wrote them.
    """
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.util import load_yaml_guess_indent

    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 1 << 16  # no folding of long sources and tables
    with open(device_path, encoding="utf-8") as fh:  # a file the device loader has accepted
        data, seq, dash = load_yaml_guess_indent(fh.read(), yaml=rt)  # "  - name:": items at 4, dash at 2
    dash, seq = dash or 0, seq or 2
    rt.indent(mapping=max(seq - dash, 2), sequence=seq, offset=dash)
    entry = next((p for p in data.get("processors", []) if isinstance(p, dict) and p.get("name") == processor), None)
    if entry is None:  # the loader accepted the file, so this cannot happen for a valid device
        raise ConfigError(f"{device_path}: no processor {processor!r}")
    if out is not None:
        _rebase_tables(data, Path(device_path).resolve().parent, Path(out).resolve().parent)
    edit(entry)
    text = io.StringIO()
    rt.dump(data, text)
    return f"# {note}\n" + text.getvalue()


def _rebase_tables(data: Any, src: Path, dst: Path) -> None:
    """Point every predictor's relative ``table`` of a device document read from folder ``src``
    at the same file from folder ``dst``."""
    import os

    if src == dst:
        return
    for proc in data.get("processors", []) or []:
        for q in (proc.get("predictors") or []) if isinstance(proc, dict) else []:
            if isinstance(q, dict) and q.get("table") and not Path(str(q["table"])).is_absolute():
                q["table"] = os.path.relpath(src / str(q["table"]), dst)


def write_device_yaml(out: str, text: str) -> None:
    """Write ``text`` to ``out`` atomically after the device loader accepted it: inside a command's
    output transaction the staged file is validated before the command commits; otherwise a
    sibling check file is."""
    from pathlib import Path

    from ..fileio import active_transaction, atomic_write_text
    from ..hardware.schema import Device
    from ..yamlio import load_model_yaml

    tx = active_transaction()
    if tx is not None and tx.owns(out):
        atomic_write_text(out, text)
        load_model_yaml(tx.staged(out), Device)  # an invalid file is discarded with the transaction
        return
    check = Path(out).with_suffix(".check.yaml")
    atomic_write_text(check, text)
    try:
        load_model_yaml(check, Device)
    finally:
        check.unlink(missing_ok=True)
    atomic_write_text(out, text)
