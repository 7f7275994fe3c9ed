"""SPLASH's dispatch rules: which worker takes a request (Jeong, SNU 2023; docs/METHODS.md section 5).

Each rule is a :class:`Policy` (strategy) that sees, per available worker, the estimated
completion time ``wait + exec`` and the predicted rise ``ΔT_w`` of the worker's own temperature
over the next period, floored at :data:`MIN_HEAT_RISE_C`:

* ``minheat``: among workers with ``wait + exec <= SLO`` (the frame period) the least ``ΔT_w``;
  if none meets it, the penalty form ``ΔT_w + η·max(0, SLO_fps - 1/(wait + exec))``;
* ``ppt``: Max-Weighted-PPT, minimise ``η·lat_w/max(lat) + (1-η)·ΔT_w/max|ΔT|`` (both terms
  normalised over the candidate workers so that η weighs commensurable quantities);
* ``heft``: latency-greedy earliest finish time over the processors; ``heft-cloud``: also the cloud.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

#: Floor of a predicted temperature rise ΔT_w (°C). SPLASH's implementation sets a predicted
#: change <= 0 to an epsilon of one sensor unit, 1 m°C (mrsnu/band,
#: ``tensorflow/lite/planner/thermal_aware_slo_scheduler.cc``): a worker predicted to cool is not
#: preferred for it, so noise in the fitted trend cannot outweigh latency.
MIN_HEAT_RISE_C = 1e-3


class Policy(ABC):
    """A SPLASH dispatch rule (strategy): picks one worker for a request from the candidates.

    ``choose(workers, total_s, heat_c)`` gets the available workers (in worker order), each one's
    estimated completion time ``wait + exec`` and its predicted temperature rise ``ΔT_w``; ties go
    to the first worker. ``cloud`` says whether the cloud worker may be used, ``requires_cloud``
    whether the rule means nothing without it.
    """

    name = ""
    cloud = True
    requires_cloud = False

    def __init__(self, eta: float, fps: float) -> None:
        self.eta, self.fps, self.slo = eta, fps, 1.0 / fps

    @abstractmethod
    def choose(self, workers: list[int], total_s: list[float], heat_c: list[float]) -> int:
        """The chosen worker."""


class MinHeat(Policy):
    """Least ``ΔT_w`` among workers meeting the SLO; else the penalty ``ΔT_w + η·max(0, fps - 1/total)``."""

    name = "minheat"

    def choose(self, workers: list[int], total_s: list[float], heat_c: list[float]) -> int:
        slo, eta, fps = self.slo, self.eta, self.fps
        coolest_in_slo, coolest_rise, best_worker, best_score = -1, math.inf, -1, math.inf
        for w, total, rise in zip(workers, total_s, heat_c):
            if total <= slo and rise < coolest_rise:
                coolest_rise, coolest_in_slo = rise, w
            short = fps - 1.0 / total                   # FPS short of the camera rate, if any
            score = rise + eta * (short if short > 0.0 else 0.0)
            if score < best_score:
                best_score, best_worker = score, w
        return coolest_in_slo if coolest_in_slo >= 0 else best_worker


class MaxWeightedPPT(Policy):
    """Least ``η·total/max(total) + (1-η)·ΔT_w/max|ΔT|`` (both terms normalised over the candidates)."""

    name = "ppt"

    def choose(self, workers: list[int], total_s: list[float], heat_c: list[float]) -> int:
        longest = max(total_s) or 1.0
        largest_rise = max(abs(d) for d in heat_c) or 1.0
        eta = self.eta
        return first_min(workers, [eta * total / longest + (1 - eta) * rise / largest_rise
                                   for total, rise in zip(total_s, heat_c)])


class Heft(Policy):
    """Earliest finish time over the phone's processors (latency-greedy, no heat)."""

    name = "heft"
    cloud = False

    def choose(self, workers: list[int], total_s: list[float], heat_c: list[float]) -> int:
        return first_min(workers, total_s)


class HeftCloud(Heft):
    """Earliest finish time over the processors and the cloud."""

    name = "heft-cloud"
    cloud = True
    requires_cloud = True


def first_min(workers: list[int], scores: list[float]) -> int:
    """The worker with the least score; the first one on ties."""
    best_worker, best = -1, math.inf
    for w, score in zip(workers, scores):
        if score < best:
            best, best_worker = score, w
    return best_worker


POLICY_CLASSES: dict[str, type[Policy]] = {p.name: p for p in (MinHeat, MaxWeightedPPT, Heft, HeftCloud)}
POLICIES: tuple[str, ...] = tuple(POLICY_CLASSES)
