"""The pipeline GA's fitness cache: every distinct mapping is evaluated once.

Park & Ha (IEEE Access 2024) never evaluate an already-evaluated chromosome again; here the cache
is keyed by the problem's canonical mapping (:meth:`PipelineProblem.key`), so ``evaluations``
counts distinct mappings, local-search moves included. The GA's single-objective seeding runs
(two objectives) share their parent run's cache, so a mapping is evaluated (or measured) once
for the whole search. Each generation's new mappings reach the evaluator as one population.
Infeasible mappings (memory) get the fitness ``PENALTY + violation in MB`` on every objective.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .pipeline import PipelineProblem
from .result import Candidate

#: fitness of an infeasible mapping, before its violation in MB is added
PENALTY = 1e9


class FitnessCache:
    """Objectives ``F`` (the problem's columns, minimised) and memory violation of every mapping
    evaluated so far, keyed by canonical mapping (:attr:`entries`); ``len()`` counts them."""

    def __init__(self, problem: PipelineProblem, evaluator: Any) -> None:
        self.problem, self.evaluator = problem, evaluator
        self.entries: dict[tuple[int, ...], tuple[tuple[float, ...], float]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def evaluate(self, individuals: list[Any], columns: Sequence[int]) -> None:
        """Set the fitness of ``individuals`` to their objectives ``columns``; only mappings not
        seen before reach the evaluator (one batch)."""
        problem, entries = self.problem, self.entries
        keys = [problem.key(individual) for individual in individuals]
        todo: dict[tuple[int, ...], list[int]] = {}
        for key, individual in zip(keys, individuals):
            if key not in entries and key not in todo:
                todo[key] = list(individual)
        if todo:
            out = self.evaluator.evaluate(problem, np.asarray(list(todo.values()), dtype=np.int64))
            for key, F, violation in zip(todo, out.F, out.violation, strict=True):
                entries[key] = (tuple(float(v) for v in F), float(violation))
        for key, individual in zip(keys, individuals):
            F, violation = entries[key]
            individual.fitness.values = tuple(F[m] for m in columns) if violation <= 0 else \
                tuple(PENALTY + violation / 1e6 for _ in columns)

    def unique(self, individuals: list[Any]) -> list[Any]:
        """``individuals`` without repeated mappings (first kept)."""
        seen: set[tuple[int, ...]] = set()
        out = []
        for individual in individuals:
            key = self.problem.key(individual)
            if key not in seen:
                seen.add(key)
                out.append(individual)
        return out

    def candidates(self, X: np.ndarray) -> list[Candidate]:
        """Candidates of the evaluated mappings ``X`` with modeled metrics, objectives overridden by
        the values the search used (a modeled value that differs is kept as ``modeled_<key>``)."""
        problem = self.problem
        out = []
        for x, candidate in zip(X, problem.candidates(X)):
            F, _ = self.entries[problem.key(x)]
            objectives = dict(candidate.objectives)
            metrics = dict(candidate.metrics)
            for f, key, sense in zip(F, problem.objective_keys, problem.objective_senses):
                value = -f if sense == "max" else f
                if key in objectives and not np.isclose(objectives[key], value, rtol=1e-12, atol=0):
                    metrics[f"modeled_{key}"] = objectives[key]
                objectives[key] = value
            out.append(type(candidate)(decision=candidate.decision, objectives=objectives,
                                       feasible=candidate.feasible, violation=candidate.violation,
                                       metrics=metrics))
        return out
