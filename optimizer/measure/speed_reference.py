"""A speed reference: fixed kernels timed beside every probe group and every network run, so that
times taken while the host's speed drifts are put on one level.

A shared or throttling machine changes speed while a campaign runs: on a cloud host a
MobileNetV2 run moves between 6.4 and 9.2 ms within seconds, on a phone the clocks drop as it
heats. Interleaving (:func:`~.probe_runner.time_interleaved`) makes the models of one group share
a slow spell, but a campaign's groups, and the networks timed an hour later, do not. The remedy
of benchmarking practice is a control measured alongside: three fixed kernels of the probe
families (a 3x3 convolution, a depthwise convolution and an addition, compute- and memory-bound)
are timed in every round. A round's *level* is the geometric mean of their samples; every other
sample of that round is divided by it, and the ratios' median is put back into seconds at the
run's median level (:func:`level_timings`). On this host the ratio of a network to the level
moves by about 5 % where the network's own time moves by 40 %.

A probe table keeps each group's level per row (``reference_s``); the predictor fits the probes
at the table's median level (:attr:`optimizer.cost.probe_table.ProbeTable.latency_s`), and
whole networks timed later are put on that level before they are compared with predictions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..graph.kernel_config import KernelConfig
from .probe_runner import Timing

#: the reference kernels (the same in every runtime and dtype): compute-bound, strided memory,
#: streaming memory
REFERENCE_KERNELS: dict[str, KernelConfig] = {
    "conv": KernelConfig("conv", h_in=28, w_in=28, c_in=64, h_out=28, w_out=28, c_out=64, k=3, stride=1),
    "dwconv": KernelConfig("dwconv", h_in=56, w_in=56, c_in=128, h_out=56, w_out=56, c_out=128, k=3, stride=1),
    "add": KernelConfig("add", h_in=56, w_in=56, c_in=128, h_out=56, w_out=56, c_out=128, n_in=2),
}
#: a reference model's name in a group: this prefix and the kernel's key
PREFIX = "reference-"
#: the reference kernels' version, recorded in a probe table (a change of kernels is a new level)
REFERENCE_VERSION = 1


def reference_models(fmt: str, dtype: str, seed: int = 0) -> list[tuple[str, bytes]]:
    """(name, serialized model) of every reference kernel in ``fmt`` at ``dtype``."""
    from .probe_models import probe_model

    return [(PREFIX + name, probe_model(cfg, fmt, dtype, seed)) for name, cfg in REFERENCE_KERNELS.items()]


def is_reference(name: str) -> bool:
    """Whether ``name`` is a reference model's (:func:`reference_models`)."""
    return name.startswith(PREFIX)


@dataclass(frozen=True)
class Levelled:
    """Timings of one interleaved run put on its median reference level."""

    #: the models that are not references, in order: samples divided by their round's level, times
    #: ``level_s``
    timings: list[Timing]
    #: median over rounds of the reference level (seconds: geometric mean of the reference kernels)
    level_s: float
    #: inter-quartile range over the median of the rounds' levels (how much the host moved)
    level_spread: float

    def on_level(self, level_s: float) -> list[Timing]:
        """The timings put on another level (a probe table's)."""
        f = level_s / self.level_s
        return [replace(t, median_s=t.median_s * f, p25_s=t.p25_s * f, p75_s=t.p75_s * f,
                        values_s=tuple(v * f for v in t.values_s)) for t in self.timings]


def level_timings(timings: Sequence[Timing | None], references: Sequence[int]) -> Levelled:
    """``timings`` of one interleaved run with the reference models at ``references`` put on the
    run's median level (module doc).

    Rounds are matched by position: the references are timed in every round the others are
    (``keep`` of :func:`~.probe_runner.time_interleaved`), so a model's k-th sample is round k's.
    Where per-round samples are missing (a phone's runner reports medians), the medians are
    divided by the references' median level instead. A missing timing stays missing (NaN).
    """
    refs = [timings[i] for i in references]
    if not refs or any(t is None for t in refs):
        raise ValueError("every reference kernel needs a timing")
    ref_t = [t for t in refs if t is not None]
    rounds = min(len(t.values_s) for t in ref_t)
    per_round = (np.exp(np.mean(np.log([np.asarray(t.values_s[:rounds]) for t in ref_t]), axis=0))
                 if rounds else np.exp(np.mean(np.log([t.median_s for t in ref_t])))[None])
    level = float(np.median(per_round))
    q25, q75 = np.percentile(per_round, [25, 75])
    out = []
    for i, t in enumerate(timings):
        if i in references:
            continue
        if t is None:
            out.append(Timing(float("nan"), float("nan"), float("nan"), 0, 0))
            continue
        n = min(len(t.values_s), rounds)
        ratios = (np.asarray(t.values_s[:n]) / per_round[:n] if n and rounds
                  else np.array([t.median_s, t.p25_s, t.p75_s]) / per_round[0])
        scaled = ratios * level
        median = float(np.median(scaled)) if n else float(scaled[0])
        p25, p75 = (np.percentile(scaled, [25, 75]) if n else scaled[1:])
        out.append(Timing(median, float(p25), float(p75), t.samples, t.rounds, t.layout_share,
                          tuple(float(v) for v in scaled) if n else ()))
    return Levelled(out, level, float((q75 - q25) / level) if level > 0 else 0.0)
