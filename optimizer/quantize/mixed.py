"""Latency-aware mixed precision: keep in float the operators whose INT8 kernel, with the
quantize/dequantize at its boundaries, is slower than float on this host.

An operator XNNPACK has no INT8 kernel for runs on LiteRT's builtin kernel and splits the
delegated graph (:mod:`.delegation`); where XNNPACK has a float kernel for it, the same operator
kept in float between ``DEQUANTIZE`` and ``QUANTIZE`` stays inside the partition (XNNPACK converts
in the partition). Whether that pays is measured, not assumed (HAQ, Wang et al., CVPR 2019: choose
precision per layer from hardware feedback, not from proxies such as MACs): operators outside the
delegate are grouped by type, most numerous first, and each group is tried in turn; the quantizer
re-quantizes from the same calibration with the group denylisted (:func:`.convert.convert_quantized`
``float_nodes``) and the candidate is kept only if its median latency, timed interleaved with the
current model on the same threads, is lower by at least :data:`MIN_GAIN`. Every trial is reported with its speed and fidelity.
Operators that an INT8 rewrite brought into the delegate by adding operators
(:data:`.rewrites.TRIED_IN_FLOAT`, read from the model before the rewrites) are tried the same
way: the float operator with its conversions against the rewritten INT8 form.

``off`` (the default of :func:`optimizer.quantize.quantize`) keeps full-integer models, which
integer-only accelerators (Edge TPU, Hexagon) need.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import MeasurementError, UnsupportedOperatorError
from .delegation import host_delegation
from .evaluate import TfliteRunner, measure_latency_pair

MIXED_MODES = ("off", "auto")
#: least relative latency gain for which a group is kept in float (below it: timing noise)
MIN_GAIN = 0.02
CONVERSIONS = ("QUANTIZE", "DEQUANTIZE")


@dataclass(frozen=True)
class MixedTrial:
    """One group of operators tried in float."""

    op: str
    ops: int
    current_ms: float
    candidate_ms: float
    sqnr_db: float | None
    kept: bool
    note: str = ""
    #: :attr:`.evaluate.LatencyStats.cpu_share` of the trial's timing
    cpu_share: float | None = None


@dataclass
class MixedResult:
    model: bytes
    float_nodes: list[str]
    trials: list[MixedTrial] = field(default_factory=list)


def float_candidates(quantized: bytes, fp32: bytes, threads: int, before: bytes | None = None) -> dict[str, list[str]]:
    """Output tensor names of the operators outside the host delegate in ``quantized`` (and those of
    :data:`.rewrites.TRIED_IN_FLOAT` outside it in ``before``, the model before the XNNPACK
    rewrites) that XNNPACK runs in ``fp32`` (same output name, else same operator type), by
    operator type, most first."""
    from .rewrites import TRIED_IN_FLOAT

    outside = [o for o in host_delegation(quantized, threads).outside if o.op not in CONVERSIONS]
    if before is not None:
        seen = {o.output for o in outside}
        outside += [o for o in host_delegation(before, threads).outside if o.op in TRIED_IN_FLOAT and o.output not in seen]
    ref = host_delegation(fp32, threads)
    names = {o.output for o in ref.ops if o.partition is not None}
    types = {o.op for o in ref.ops if o.partition is not None}
    float_name = _float_names(quantized)
    groups: dict[str, list[str]] = {}
    for o in outside:
        name = float_name.get(o.output, o.output)
        if name and (name in names or o.op in types):
            groups.setdefault(o.op, []).append(name)
    return dict(sorted(groups.items(), key=lambda kv: -len(kv[1])))


def _float_names(quantized: bytes) -> dict[str, str]:
    """INT8 output name -> the float model's name, for operators whose output the converter renamed
    because a float-interface ``DEQUANTIZE`` took the graph output's name (``StatefulPartitionedCall:01``
    -> ``StatefulPartitionedCall:0``); the quantizers' denylists take the float model's names."""
    from ..graph.tflite_flatbuffer import read_model
    from .rewrites import Graph

    g = Graph(read_model(quantized, "quantized model"))
    out = {}
    for op in g.sg.operators:
        if g.op_name(op) == "DEQUANTIZE" and int(op.outputs[0]) in {int(t) for t in g.sg.outputs}:
            src, dst = g.tensor(int(op.inputs[0])).name, g.tensor(int(op.outputs[0])).name
            out[src.decode(errors="replace")] = dst.decode(errors="replace")
    return out


def choose_float_ops(full: bytes, fp32: bytes, requantize: Callable[[list[str]], bytes],
                     sample: dict[str, np.ndarray], fidelity: Callable[[bytes], float | None],
                     threads: int = 2, runs: int = 30, warmup: int = 5, before: bytes | None = None) -> MixedResult:
    """Keep in float the groups of :func:`float_candidates` that make ``full`` faster (module doc).

    ``before``: ``full`` before the XNNPACK rewrites (its rewritten operators are tried too);
    ``requantize(names)`` returns the model quantized with operators ``names`` in float;
    ``fidelity(model)`` its SQNR against FP32 (dB); ``sample`` feeds the timing.
    """
    result = MixedResult(full, [])
    for op, names in float_candidates(full, fp32, threads, before).items():
        trial_names = result.float_nodes + names
        try:
            candidate = requantize(trial_names)
            current_lat, candidate_lat = measure_latency_pair(TfliteRunner(result.model, threads),
                                                              TfliteRunner(candidate, threads), sample, runs, warmup)
        except (UnsupportedOperatorError, MeasurementError) as exc:  # the quantizer or LiteRT refused it
            result.trials.append(MixedTrial(op, len(names), float("nan"), float("nan"), None, False,
                                            str(exc)[:200]))
            continue
        if _float_count(candidate) <= _float_count(result.model):
            result.trials.append(MixedTrial(op, len(names), float("nan"), float("nan"), None, False,
                                            "the quantizer kept these operators in INT8 (names not matched)"))
            continue
        kept = candidate_lat.median_s < (1.0 - MIN_GAIN) * current_lat.median_s
        result.trials.append(MixedTrial(op, len(names), current_lat.median_s * 1e3, candidate_lat.median_s * 1e3,
                                        fidelity(candidate), kept, cpu_share=current_lat.cpu_share))
        if kept:
            result.model, result.float_nodes = candidate, trial_names
    return result


def _float_count(data: bytes) -> int:
    from .inspect import analyse_tflite

    return len(analyse_tflite(data).float_ops)


def int8_mac_share(data: bytes, name: str = "model") -> float:
    """Fraction of the model's MACs computed by INT8 operators (1.0 without weighted operators)."""
    from ..graph.tflite_import import operator_macs
    from .inspect import analyse_tflite

    macs = operator_macs(data)
    ops = analyse_tflite(data, name).ops
    total = sum(macs)
    if not total:
        return 1.0
    return 1.0 - sum(m for m, o in zip(macs, ops, strict=True) if o.is_float) / total
