"""Profiles adjust predictors, not replace them (``dnnplan calibrate --from-profile`` on a device
whose processor has a probe predictor).

A user's per-operator profile (``benchmark_model --enable_op_profiling``, an onnxruntime
profile; :mod:`optimizer.measure.profile_import`) of one or a few networks constrains some kernel
families well and others not at all. Fitting a free model to it reproduces that network exactly
and transfers poorly; here the probe predictor is the prior and the profile corrects it by one
multiplicative factor per kernel family, shrunk towards a common factor: a hierarchical,
penalised least squares in logs (ridge regression towards a group mean, Gelman et al., *Bayesian
Data Analysis*, ch. 5),

    minimise  sum_{p,f} (log(s_f Q_pf / P_pf) / sigma_f)^2 + sum_p (log(sum_f s_f Q_pf / P_p) / sigma_w)^2
              + sum_f rho(log(s_f / g) / tau),   rho(z) = log(1 + z^2)

over ``s_f`` and the common factor ``g``, with Cauchy's robust loss ``rho`` on the prior so that a
family profiled far from its prediction (a different kernel than the one priced) keeps its own
factor without moving ``g`` (Huber & Ronchetti, *Robust Statistics*, 2009, ch. 4), where ``Q_pf`` is the predicted and ``P_pf`` the
profiled time of family ``f`` in profile ``p`` and ``P_p`` the profile's total. A family no profile
times keeps ``g`` (the ``default`` correction) and is reported, never set from nothing; ``g``
itself is fitted to everything the profiles time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cost.fusion import runtime_kernels
from ..cost.predicted import correction_of, family_layer_seconds, load_predictor_table
from ..cost.predictor import predictors_for
from ..errors import ConfigError
from ..hardware.schema import Device, Predictor
from .profile_fit import FamilyRow
from .profile_match import ProfileMatch

FAMILY_SD = 0.1  # relative noise of a family's profiled time (matching, run-to-run)
WHOLE_SD = 0.05  # of a profile's total
PRIOR_SD = 0.5  # spread of the family factors around their common factor (log scale)


@dataclass
class CorrectionFit:
    """Result of :func:`fit_corrections`: the factors, per-family rows, totals and notes."""

    processor: str
    entry: Predictor  # the predictor with its new corrections
    corrections: dict[str, float]  # kernel family -> factor; "default": the common factor
    rows: list[FamilyRow] = field(default_factory=list)
    #: per profile: (profiled, predicted before, predicted after) seconds of the layers it times
    totals: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"processor": self.processor, "runtime": self.entry.runtime, "dtype": self.entry.dtype,
                "threads": self.entry.threads, "corrections": self.corrections, "notes": self.notes,
                "totals": {k: {"profile_s": a, "before_s": b, "after_s": c} for k, (a, b, c) in self.totals.items()},
                "families": [{"profile": r.profile, "model": r.model, "family": r.family, "profile_s": r.profile_s,
                              "before_s": r.before_s, "after_s": r.after_s} for r in self.rows]}


def _family_times(match: ProfileMatch, predictors: Any, device: Device, runtime: str, dtype: str
                  ) -> tuple[dict[str, float], dict[str, float], float, float, set[str]]:
    """(profiled, predicted) seconds per kernel family of the layers ``match`` times, the
    profile's total, the analytic time of the timed layers no probe predicts (kept as is), and
    every family the graph runs; ``device`` holds only the corrected processor."""
    from ..cost.analytic import analytic_costs

    graph = match.graph.op_view if match.graph.op_view is not None else match.graph
    by_family, analytic = family_layer_seconds(graph, runtime_kernels(graph, runtime, dtype), predictors)
    covered = np.asarray(match.covered, dtype=bool)
    measured = np.nan_to_num(np.asarray(match.latency_s, dtype=np.float64))
    total_pred = sum(by_family.values()) if by_family else np.zeros(len(graph.layers))
    prof: dict[str, float] = {}
    pred: dict[str, float] = {}
    for fam, sec in by_family.items():
        share = np.divide(sec, total_pred, out=np.zeros_like(sec), where=total_pred > 0)  # a layer's time by family
        pred[fam] = float(sec[covered].sum())
        prof[fam] = float((measured * share)[covered].sum())
    fallback = 0.0
    if analytic:
        native = analytic_costs(graph, device, dtype)["native_s"][:, 0]
        fallback = float(sum(native[i] for i in analytic if covered[i]))
    return prof, pred, float(measured[covered].sum()), fallback, {f for f, v in by_family.items() if v.sum() > 0}


def fit_corrections(device: Device, processor: str, matches: list[ProfileMatch], dtype: str,
                    runtime: str | None = None) -> CorrectionFit:
    """Per-family corrections of ``processor``'s predictor fitted to ``matches`` (module doc).

    Raises
    ------
    ConfigError
        The processor has no predictor for the runtime, dtype and its threads, or no profile
        times a layer the predictor prices.
    """
    from scipy.optimize import least_squares

    runtime = runtime or device.runtime
    proc = device.processor(processor)
    entry = proc.predictor(runtime, dtype)
    if entry is None:
        raise ConfigError(f"device {device.name!r} processor {processor!r} has no {runtime}/{dtype}/{proc.cores}-thread "
                          "predictor to correct; measure one with `dnnplan calibrate --probes N`")
    one = device.model_copy(update={"processors": [proc]})
    preds = predictors_for(load_predictor_table(entry), entry.seed)
    timed = [_family_times(m, preds, one, entry.runtime, dtype) for m in matches]
    data = [(m, prof, pred, total, fallback) for m, (prof, pred, total, fallback, _) in zip(matches, timed, strict=True)]
    families = sorted({f for _, _, pred, _, _ in data for f, v in pred.items() if v > 0})
    if not families:
        raise ConfigError("the profiles time no layer the predictor prices: nothing to correct")
    observed = sorted({f for _, prof, pred, _, _ in data for f in families if prof.get(f, 0) > 0 and pred.get(f, 0) > 0})
    run = sorted(set().union(*(t[4] for t in timed)))
    index = {f: i + 1 for i, f in enumerate(families)}

    def residuals(x: np.ndarray) -> np.ndarray:
        res: list[float] = []
        for _, prof, pred, total, fallback in data:
            for f in families:
                if prof.get(f, 0) > 0 and pred.get(f, 0) > 0:
                    res.append((x[index[f]] + math.log(pred[f] / prof[f])) / FAMILY_SD)
            after = sum(math.exp(x[index[f]]) * pred[f] for f in families if f in pred) + fallback
            if total > 0 and after > 0:
                res.append(math.log(after / total) / WHOLE_SD)
        # Cauchy's robust loss on the prior (log(1 + z^2) in place of z^2): a family whose profiled
        # kernel is not the one priced (a MEAN priced, an AVERAGE_POOL_2D profiled: x0.011) takes its
        # own factor without dragging the common one the unprofiled families get
        z = np.array([(x[index[f]] - x[0]) / PRIOR_SD for f in families])
        res += list(np.sign(z) * np.sqrt(np.log1p(z * z)))
        return np.asarray(res)

    fit = least_squares(residuals, np.zeros(len(families) + 1), method="lm")
    g = float(math.exp(fit.x[0]))
    corrections = {"default": round(g, 4), **{f: round(float(math.exp(fit.x[index[f]])), 4) for f in observed}}
    notes = [f"{f}: no profile row times it; it takes the common factor x{g:.3g}" for f in run if f not in observed]
    new = entry.model_copy(update={"corrections": corrections})
    rows, totals = [], {}
    for m, prof, pred, total, fallback in data:
        name = m.profile.path
        for f in families:
            if f in pred:
                rows.append(FamilyRow(name, m.graph.name, f, prof.get(f, 0.0), pred[f],
                                          pred[f] * correction_of(corrections, f)))
        after = sum(pred[f] * correction_of(corrections, f) for f in pred) + fallback
        totals[name] = (total, sum(pred.values()) + fallback, after)
    return CorrectionFit(processor, new, corrections, rows, totals, notes)
