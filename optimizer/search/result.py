"""Typed results shared by every solver.

Every run records what a user needs to trust and re-run it: evaluations made, the size of the
space (and how it was counted), fraction explored, wall time, seed and settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """One evaluated design point: its decoded decision and its objective values.

    ``decision`` is problem-specific and JSON-serialisable (e.g. ``{"counts": [25, 50, 0],
    "processors": ["cpu", "gpu", "npu"]}`` for a pipeline, ``{"split": 7, "processor": "cpu",
    "clock_hz": 2.0e9, "wire_dtype": "int8"}`` for a split). ``objectives`` uses named, unit-
    carrying keys (``throughput_fps``, ``latency_s``, ``energy_j``, ``memory_bytes`` ...), in
    their natural sense (throughput is not negated). ``feasible`` is False when a constraint
    is violated; ``violation`` says by how much (0 when feasible).
    """

    decision: dict[str, Any]
    objectives: dict[str, float]
    feasible: bool = True
    violation: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchResult:
    """Outcome of ``solve(problem, solver)``.

    ``best`` is the chosen candidate (the optimum for one objective; the decision-rule choice
    on the front for several). ``front`` holds the non-dominated candidates for multi-objective
    runs (empty otherwise). ``history`` is the convergence record: one
    ``{"evaluations": n, "best": value, ...}`` entry per generation or step.
    """

    problem: str  # pipeline | split
    solver: str
    best: Candidate
    front: tuple[Candidate, ...] = ()
    evaluations: int = 0
    space_size: float = 0.0
    space_counting: str = ""  # how space_size was counted
    explored_fraction: float = 0.0
    wall_time_s: float = 0.0
    seed: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    objectives: tuple[str, ...] = ()
    history: tuple[dict[str, float], ...] = ()
    baselines: dict[str, Candidate] = field(default_factory=dict)
    decision_rule: dict[str, Any] | None = None
