"""A speed reference: fixed kernels timed beside every probe group and every network run, so that
times taken while the host's speed drifts are put on one level.

A shared or throttling machine changes speed while a campaign runs: on a cloud host a
MobileNetV2 run moves between 6.4 and 9.2 ms within seconds, on a phone the clocks drop as it
heats. Interleaving (:func:`~.probe_runner.time_interleaved`) makes the models of one group share
a slow spell, but a campaign's groups, and the networks timed an hour later, do not. The remedy
of benchmarking practice is a control measured alongside: three fixed kernels of the probe
families (a 3x3 convolution, a depthwise convolution and an addition, compute- and memory-bound)
are timed between the samples of the others, at least every 20 ms (a *checkpoint*,
``time_interleaved(reference=...)``). A checkpoint's *level* is the geometric mean of the three;
every sample is divided by the level of the checkpoints around it, and the ratios' median is put
back into seconds at the run's median level (:func:`level_timings`). On this host the ratio of a
network to the level moves by about 5 % where the network's own time moves by 40 %. The
checkpoints bracket each sample closely: a level per round of a network run (20 networks, up to
4 s) tracked the host's speed states, which last seconds, too loosely.

A probe table keeps each group's level per row (``reference_s``); the predictor fits the probes
at the table's median level (:attr:`optimizer.cost.probe_table.ProbeTable.latency_s`), and
whole networks timed later are put on that level before they are compared with predictions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..graph.kernel_config import KernelConfig
from .probe_runner import Timing, reference_level

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

    #: the models that are not references, in order: samples divided by the level of the
    #: checkpoints around them, times ``level_s``
    timings: list[Timing]
    #: median over checkpoints of the reference level (seconds: geometric mean of the reference kernels)
    level_s: float
    #: inter-quartile range over the median of the checkpoints' levels (how much the host moved)
    level_spread: float

    def on_level(self, level_s: float) -> list[Timing]:
        """The timings put on another level (a probe table's)."""
        f = level_s / self.level_s
        return [replace(t, median_s=t.median_s * f, p25_s=t.p25_s * f, p75_s=t.p75_s * f,
                        values_s=tuple(v * f for v in t.values_s)) for t in self.timings]


def level_timings(timings: Sequence[Timing | None], references: Sequence[int]) -> Levelled:
    """``timings`` of one interleaved run with the reference kernels' at ``references`` put on the
    run's median level (module doc).

    A sample timed with checkpoints around it (``levels_s``, ``time_interleaved(reference=...)``)
    is divided by their level; the references' samples, one per checkpoint each, give the levels
    whose median is the run's. Where samples are missing (a phone's runner reports medians), the
    medians are divided by the references' level instead. A missing timing stays missing (NaN).
    """
    refs = [timings[i] for i in references]
    if not refs or any(t is None for t in refs):
        raise ValueError("every reference kernel needs a timing")
    ref_t = [t for t in refs if t is not None]
    counts = {len(t.values_s) for t in ref_t}
    of_medians = float(reference_level([[t.median_s] for t in ref_t])[0])
    checkpoints = (reference_level([t.values_s for t in ref_t]) if len(counts) == 1 and 0 not in counts
                   else np.array([of_medians]))
    level = float(np.median(checkpoints))
    q25, q75 = np.percentile(checkpoints, [25, 75])
    out = []
    for i, t in enumerate(timings):
        if i in references:
            continue
        if t is None:
            out.append(Timing(float("nan"), float("nan"), float("nan"), 0, 0))
        elif t.levels_s and len(t.levels_s) == len(t.values_s):
            scaled = np.asarray(t.values_s) / np.asarray(t.levels_s) * level
            p25, p75 = np.percentile(scaled, [25, 75])
            out.append(Timing(float(np.median(scaled)), float(p25), float(p75), t.samples, t.rounds, t.layout_share,
                              tuple(float(v) for v in scaled)))
        else:
            f = level / of_medians
            out.append(Timing(t.median_s * f, t.p25_s * f, t.p75_s * f, t.samples, t.rounds, t.layout_share,
                              tuple(v * f for v in t.values_s)))
    return Levelled(out, level, float((q75 - q25) / level) if level > 0 else 0.0)
