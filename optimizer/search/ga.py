"""DEAP adapter: the genetic algorithm of Park & Ha (IEEE Access 2024) for pipeline mapping.

Published settings (docs/METHODS.md section 2): chromosome ``[n_1..n_K, p_1..p_K]`` (K = 3 gives 6 genes),
crossover of the layer-count genes and/or the processor genes with p = 0.9, mutation of layer
counts or processors with p = 0.8, population 32, stop when the best 20 chromosomes are unchanged
for 10 consecutive generations or at a generation cap (200-300 by network size; default 300).
Already-evaluated chromosomes are never evaluated again (fitness cache keyed by the canonical
mapping), so ``evaluations`` counts distinct mappings (with 2 objectives, the single-objective
seeding runs below share that cache).

This module holds the generation loop and the public API (:func:`solve_pipeline_ga`,
:class:`PipelineGA`, :class:`Termination`); each of the GA's other jobs has its module:

* :mod:`optimizer.search.ga_operators`: the chromosome, crossover, mutation and repair;
* :mod:`optimizer.search.ga_cache`: the fitness cache (and the penalty of infeasible mappings);
* :mod:`optimizer.search.ga_selection`: survivors and parents (niches per processor order for
  one objective, NSGA-II for two);
* :mod:`optimizer.search.ga_memetic`: the memetic step, local search on stage boundaries;
* :mod:`optimizer.search.ga_checkpoint`: the checkpoint written after every generation.

Implementation choices of the loop (documented, not from the paper):

* the initial population holds the FLOPs-balanced split (the paper's profiling-based baseline,
  :func:`~optimizer.search.pipeline_baselines.flops_split`) of up to half of the processor
  orders (up to population-2 with the memetic step), the rest random mappings;
* two objectives: the initial population is seeded with the ends of the front: the best mapping
  of a single-objective run (the niche GA, same seed and settings) for each objective (seeding
  with single-objective optima: Friedrich & Wagner, "Seeding the initial population of
  multi-objective evolutionary algorithms: a computational study", Applied Soft Computing 2015).
  NSGA-II's crowding distance is infinite at the ends of a front, so they stay until something
  dominates them. Without it NSGA-II's tournaments can lose the max-throughput end onto another
  processor order on fallback-heavy tables (``benchmarks/bench_ga_front.py`` measures how often).

DEAP's operators draw from the module-level :mod:`random` functions: during a run they (and the
GA's own modules that draw, :data:`DRAWING_MODULES`) are pointed at a private generator seeded
with ``seed`` (see :func:`private_random`), whose state is stored in the checkpoint so a resumed
run continues the exact same random sequence (same final plan as an uninterrupted run), whatever
other threads do meanwhile.
"""

from __future__ import annotations

import itertools
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Iterator

import numpy as np
from deap import tools

from ..errors import ConfigError
from .evaluators import ModeledEvaluator
from .ga_cache import FitnessCache
from .ga_checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, load_checkpoint, run_fingerprint, save_checkpoint
from .ga_memetic import BoundarySearch
from .ga_operators import GeneOperators, individual_class
from .ga_selection import NicheSelection
from .pipeline import PipelineProblem
from .pipeline_baselines import flops_split
from .problem import build_result
from .result import Candidate, SearchResult

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "DRAWING_MODULES", "PipelineGA", "Termination", "private_random",
           "solve_pipeline_ga"]

#: the GA's modules that draw from :mod:`random` (each rebound by :func:`private_random`)
DRAWING_MODULES = ("optimizer.search.ga", "optimizer.search.ga_operators", "optimizer.search.ga_selection")

_RANDOM_LOCK = threading.Lock()


@contextmanager
def private_random(seed: int | None) -> Iterator[None]:
    """Give the GA's modules and DEAP's operator modules a private ``random.Random(seed)`` for a run.

    DEAP's operators call the module-level :mod:`random` functions, and so does our code; other
    threads of the same process (a Dask worker's event loop, for one) draw from that shared
    generator too, so a run drawing from it would not be reproducible. During a run the name ``random`` in these
    modules is bound to a private generator instead (``getstate``/``setstate`` included, so the
    checkpoint stores its state); the lock keeps two runs in one process from interleaving.
    """
    from deap.tools import crossover, emo, mutation, selection

    modules = [sys.modules[name] for name in DRAWING_MODULES] + [crossover, emo, mutation, selection]
    with _RANDOM_LOCK:
        saved = [module.random for module in modules]
        generator = random.Random(seed)
        for module in modules:
            module.random = generator
        try:
            yield
        finally:
            for module, previous in zip(modules, saved):
                module.random = previous


@dataclass(frozen=True)
class Termination:
    """When the GA stops (Park & Ha: the best ``elite`` mappings unchanged for ``patience``
    generations, or a generation cap of 200-300 by network size), optionally also after a
    wall-clock budget. :meth:`reason` names the first rule that holds, in that order."""

    max_generations: int = 300
    patience: int = 10
    time_budget_s: float | None = None

    def reason(self, generation: int, stall: int, elapsed_s: float) -> str | None:
        """``"patience"``, ``"max_generations"``, ``"time_budget"`` or ``None`` (go on)."""
        if stall >= self.patience:
            return "patience"
        if generation >= self.max_generations:
            return "max_generations"
        if self.time_budget_s is not None and elapsed_s >= self.time_budget_s:
            return "time_budget"
        return None


def _check_settings(population: Any, elite: Any, termination: Termination, tournament: Any,
                    cx_prob: Any, mut_prob: Any) -> None:
    """One-line :class:`ConfigError` for the first GA setting out of range."""
    for name, val, lo in (("population", population, 4), ("max_generations", termination.max_generations, 1),
                          ("elite", elite, 1), ("patience", termination.patience, 1),
                          ("tournament", tournament, 1)):
        if not isinstance(val, int) or isinstance(val, bool) or val < lo:
            raise ConfigError(f"ga setting {name}: expected an integer >= {lo}, got {val!r}")
    for name, val in (("cx_prob", cx_prob), ("mut_prob", mut_prob)):
        if not isinstance(val, (int, float)) or not 0.0 <= val <= 1.0:
            raise ConfigError(f"ga setting {name}: expected a probability in [0, 1], got {val!r}")
    budget = termination.time_budget_s
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0):
        raise ConfigError(f"ga setting time_budget_s: expected a number of seconds > 0, got {budget!r}")
    if elite > population:
        raise ConfigError(f"ga setting elite: {elite} exceeds the population {population}")



class PipelineGA:
    """Park & Ha's GA on a :class:`PipelineProblem` (module docstring): DEAP operators
    (:class:`GeneOperators`), a fitness cache keyed by the canonical mapping (:class:`FitnessCache`),
    niche-preserving survivors (1 objective) or NSGA-II (2 objectives; :class:`NicheSelection`),
    the memetic step (:class:`BoundarySearch`), a :class:`Termination` rule and a resumable
    checkpoint per generation.

    Build it with the settings, then :meth:`run`. Random choices come from the module-level
    :mod:`random` functions, which :func:`private_random` binds to a generator seeded per run.
    ``cache`` shares another run's fitness cache (the single-objective seeding runs).
    """

    def __init__(self, problem: PipelineProblem, *, seed: int | None, population: int, cx_prob: float,
                 mut_prob: float, elite: int, tournament: int, termination: Termination,
                 evaluator: Any = None, anchors: bool = True, objective: int | None = None,
                 local_search: int = 3, cache: FitnessCache | None = None) -> None:
        self.problem, self.seed, self.population = problem, seed, population
        self.cx_prob, self.mut_prob, self.elite, self.tournament = cx_prob, mut_prob, elite, tournament
        self.termination = termination
        self.prepared = problem.prepare()
        #: the one objective (column of the problem's objectives) a seeding run optimises
        self.columns = tuple(range(len(self.prepared.objectives))) if objective is None else (objective,)
        self.n_objectives = len(self.columns)
        self.evaluator = evaluator if evaluator is not None else ModeledEvaluator()
        self.settings: dict[str, Any] = {
            "population": population, "max_generations": termination.max_generations, "cx_prob": cx_prob,
            "mut_prob": mut_prob, "elite": elite, "patience": termination.patience, "tournament": tournament,
            "evaluator": getattr(self.evaluator, "name", type(self.evaluator).__name__)}
        if termination.time_budget_s is not None:
            self.settings["time_budget_s"] = termination.time_budget_s
        self.anchors = anchors and self.n_objectives == 2
        self.local_search_setting = local_search
        #: niche leaders refined by the memetic step per generation (modeled, 1 objective)
        self.local_search = local_search if self.n_objectives == 1 \
            and isinstance(self.evaluator, ModeledEvaluator) and self.prepared.K > 1 else 0
        #: processor orders given a FLOPs-balanced mapping in generation 0 (all with local search)
        self.seeded_orders = population - 2 if self.local_search else population // 2
        if self.local_search:
            self.settings["local_search"] = local_search
        if self.anchors:
            self.settings["anchors"] = "single-objective GA best per objective"
        self.Individual = individual_class(self.n_objectives)
        self.operators = GeneOperators(self.prepared.L, self.prepared.K, self.prepared.allowed.tolist())
        self.selection = NicheSelection(population, self.prepared.K, tournament, self.n_objectives)
        self.cache = cache if cache is not None else FitnessCache(problem, self.evaluator)
        self.boundary_search = BoundarySearch(self.operators, self.cache, self.Individual, self.columns,
                                              self.local_search)
        self.pop: list[Any] = []
        self.gen = self.stall = 0
        self.top: list[tuple[int, ...]] = []
        self.history: list[dict[str, Any]] = []

    def evaluate(self, individuals: list[Any]) -> None:
        """Set the fitness of ``individuals`` through the cache (new mappings in one batch)."""
        self.cache.evaluate(individuals, self.columns)

    def top_keys(self, pop: list[Any]) -> list[tuple[int, ...]]:
        """The mappings the stall rule watches: the best ``elite`` (sorted keys for 2 objectives)."""
        ranked = pop[:self.elite] if self.n_objectives == 2 else tools.selBest(pop, self.elite)
        keys = [self.problem.key(i) for i in ranked]
        return sorted(keys) if self.n_objectives == 2 else keys

    def natural_best(self, pop: list[Any]) -> float:
        """Best value of the first objective in its natural sense (e.g. fps)."""
        f0 = min(individual.fitness.values[0] for individual in pop)
        return -f0 if self.problem.objective_senses[self.columns[0]] == "max" else f0

    def memetic(self, first: bool = False) -> None:
        """The memetic step (:meth:`BoundarySearch.refine_leaders`): what the niche leaders reach
        replaces them in the population (Lamarckian)."""
        if not self.local_search:
            return
        better = self.boundary_search.refine_leaders(self.pop, first)
        if better:
            self.pop = self.selection.survivors(self.cache.unique(better + self.pop))

    # -- generations -----------------------------------------------------------------------------
    def anchor_mappings(self) -> list[list[int]]:
        """The best mapping of a single-objective run per objective (same seed and settings, the
        time budget shared out). The runs share this run's fitness cache: a mapping is evaluated
        (or measured) once for the whole search."""
        budget = self.termination.time_budget_s
        termination = self.termination if budget is None else \
            replace(self.termination, time_budget_s=budget / (self.n_objectives + 1))
        best = []
        for m in range(self.n_objectives):
            single = PipelineGA(self.problem, seed=self.seed, population=self.population, cx_prob=self.cx_prob,
                                mut_prob=self.mut_prob, elite=self.elite, tournament=self.tournament,
                                termination=termination, evaluator=self.evaluator, objective=m,
                                local_search=self.local_search_setting, cache=self.cache)
            single.run()
            best.append(list(single.pop[0]))
        return best

    def initialise(self, anchors: Sequence[list[int]] = ()) -> None:
        """Generation 0: ``anchors`` (2 objectives: the ends of the front), FLOPs-balanced splits
        of :attr:`seeded_orders` processor orders, random fill; then the memetic step."""
        problem, operators, population, Individual = self.problem, self.operators, self.population, self.Individual
        orders = list(itertools.permutations(operators.allowed, self.prepared.K))
        random.shuffle(orders)
        candidates = [list(a) for a in anchors] + [list(flops_split(problem, o)) for o in orders[:self.seeded_orders]]
        space = problem.space_size()
        attempts = 0
        while len(self.cache.unique([Individual(c) for c in candidates])) < min(population, space) \
                and attempts < 100 * population:
            candidates.append(operators.random_individual())
            attempts += 1
        pop = self.cache.unique([Individual(c) for c in candidates])[:population]
        self.evaluate(pop)
        self.pop = self.selection.survivors(pop)
        self.memetic(first=True)
        self.gen, self.stall = 0, 0
        self.top = self.top_keys(self.pop)
        self.history = [{"generation": 0, "evaluations": len(self.cache), "best": self.natural_best(self.pop)}]

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's state (population, cache, random state, counters)."""
        self.cache.entries.update(state["cache"])
        random.setstate(state["random_state"])
        self.pop = [self.Individual(g) for g in state["population"]]
        self.evaluate(self.pop)
        for individual, distance in zip(self.pop, state["crowding"]):
            if distance is not None:
                individual.fitness.crowding_dist = distance
        self.gen, self.stall, self.top, self.history = (state["generation"], state["stall"], state["top"],
                                                        state["history"])
        self.boundary_search.refined = dict(state.get("refined", {}))

    def step(self) -> None:
        """One generation: parents, crossover, mutation, evaluation, survivors, stall count."""
        self.gen += 1
        offspring = [self.Individual(list(p)) for p in self.selection.parents(self.pop)]
        for a, b in zip(offspring[::2], offspring[1::2]):
            if random.random() < self.cx_prob:
                self.operators.crossover(a, b)
        for individual in offspring:
            if random.random() < self.mut_prob:
                self.operators.mutate(individual)
        self.evaluate(offspring)
        self.pop = self.selection.survivors(self.cache.unique(self.pop + offspring))
        self.memetic()
        new_top = self.top_keys(self.pop)
        self.stall = self.stall + 1 if new_top == self.top else 0
        self.top = new_top
        self.history.append({"generation": self.gen, "evaluations": len(self.cache),
                             "best": self.natural_best(self.pop)})

    def run(self, checkpoint: str | os.PathLike[str] | None = None, resume: bool = False,
            progress: Callable[[int, float, int], None] | None = None) -> SearchResult:
        """Initialise (or resume from ``checkpoint``), step until :attr:`termination` says stop,
        checkpoint after every generation; the result holds the best mapping (and the front)."""
        t0 = time.perf_counter()
        fingerprint = run_fingerprint(self.problem, self.settings, self.seed)
        state = load_checkpoint(checkpoint, fingerprint) if resume else None
        anchors = self.anchor_mappings() if self.anchors and state is None else []
        with private_random(self.seed):
            if state is not None:
                self.restore(state)
            else:
                self.initialise(anchors)
                self.save(checkpoint, fingerprint)
            if progress is not None:
                progress(self.gen, self.natural_best(self.pop), len(self.cache))
            while (stop := self.termination.reason(self.gen, self.stall, time.perf_counter() - t0)) is None:
                self.step()
                self.save(checkpoint, fingerprint)
                if progress is not None:
                    progress(self.gen, self.natural_best(self.pop), len(self.cache))
        return self.result(stop, time.perf_counter() - t0)

    def save(self, checkpoint: str | os.PathLike[str] | None, fingerprint: str) -> None:
        """Write this run's state to ``checkpoint`` (:func:`~optimizer.search.ga_checkpoint.save_checkpoint`)."""
        save_checkpoint(checkpoint, fingerprint, pop=self.pop, cache=self.cache.entries, generation=self.gen,
                        stall=self.stall, top=self.top, history=self.history,
                        refined=self.boundary_search.refined, random_state=random.getstate())

    def result(self, stopped_by: str, wall_s: float) -> SearchResult:
        """The :class:`SearchResult`: the best mapping (1 objective) or the feasible first front
        with its best-throughput member (2 objectives), objectives as the search saw them."""
        problem, cache, senses = self.problem, self.cache, self.problem.objective_senses
        X = np.asarray([list(individual) for individual in self.pop], dtype=np.int64)
        if self.n_objectives == 2:
            fronts = tools.sortNondominated(self.pop, len(self.pop), first_front_only=True)
            front_X = np.asarray([list(individual) for individual in fronts[0]], dtype=np.int64)
            evaluated = cache.candidates(front_X)
            feasible = [c for c in evaluated if c.feasible]
            front: tuple[Candidate, ...] = tuple(sorted(feasible or evaluated,
                                                        key=lambda c: -c.objectives["throughput_fps"]))
            names = problem.objective_names
            first = names.index("throughput") if "throughput" in names else 0
            key, sense = problem.objective_keys[first], senses[first]
            best = (max if sense == "max" else min)(front, key=lambda c: c.objectives[key])
            rule = {"rule": f"best {names[first]} on the front"}
        else:
            best = cache.candidates(X[:1])[0]
            front, rule = (), None
        settings = dict(self.settings, generations=self.gen, stopped_by=stopped_by)
        if hasattr(self.evaluator, "calls"):
            settings["measurements"] = self.evaluator.calls
        return build_result(problem, "ga", best, evaluations=len(cache), wall_time_s=wall_s, seed=self.seed,
                            settings=settings, front=front, history=self.history, decision_rule=rule)


def solve_pipeline_ga(problem: PipelineProblem, *, seed: int | None = None, population: int = 32,
                      max_generations: int = 300, cx_prob: float = 0.9, mut_prob: float = 0.8,
                      elite: int | None = None, patience: int = 10, tournament: int = 3,
                      evaluator: Any = None, checkpoint: str | os.PathLike[str] | None = None,
                      resume: bool = False, progress: Callable[[int, float, int], None] | None = None,
                      time_budget_s: float | None = None, anchors: bool = True,
                      local_search: int = 3) -> SearchResult:
    """Park & Ha's GA (DEAP) on a :class:`PipelineProblem`; NSGA-II selection for 2 objectives.

    Parameters
    ----------
    problem
        The pipeline problem (1 or 2 objectives).
    seed
        Seed of every random choice (same seed -> same result, unless a time budget cuts the run).
    population, max_generations, cx_prob, mut_prob, elite, patience, tournament
        Population size (32), generation cap (300; the paper used 200-300 by network size),
        crossover (0.9) and mutation (0.8) probabilities, stop when the best ``elite``
        (default min(20, population)) mappings are unchanged for ``patience`` (10) generations, parent tournament size (3).
    evaluator
        :class:`~optimizer.search.evaluators.ModeledEvaluator` (default) or a measured one;
        it gets each generation's not-yet-evaluated mappings as one population [n, 2K].
    checkpoint
        File rewritten atomically after every generation (population, fitness cache, random
        state, generation); with ``resume=True`` the run continues from it.
    progress
        ``progress(generation, best, evaluations)`` after every generation; ``best`` is the
        best value of the first objective in its natural sense (e.g. fps).
    time_budget_s
        Also stop after the generation during which this much wall-clock time has passed (off by default).
    anchors
        2 objectives: seed the initial population with a single-objective run's best mapping per
        objective (default on; module docstring). Off gives plain NSGA-II, for comparison.
    local_search
        Memetic step on modeled objectives (module docstring): the niche leaders of the best
        ``local_search`` processor orders are refined each generation (default 3; 0 = the plain
        GA). Ignored with a measured evaluator or two objectives (their single-objective anchor
        runs use it).
    """
    t0 = time.perf_counter()
    problem.prepare()
    if elite is None:
        elite = min(20, population) if isinstance(population, int) else 20
    termination = Termination(max_generations, patience, time_budget_s)
    _check_settings(population, elite, termination, tournament, cx_prob, mut_prob)
    if not isinstance(local_search, int) or isinstance(local_search, bool) or local_search < 0:
        raise ConfigError(f"ga setting local_search: expected an integer >= 0, got {local_search!r}")
    ga = PipelineGA(problem, seed=seed, population=population, cx_prob=cx_prob, mut_prob=mut_prob, elite=elite,
                    tournament=tournament, termination=termination, evaluator=evaluator, anchors=anchors,
                    local_search=local_search)
    if ga.n_objectives > 2:
        raise ConfigError(f"solver 'ga': supports 1 or 2 objectives, got {list(problem.objective_names)}")
    if resume and checkpoint is None:
        raise ConfigError("ga: resume=True needs a checkpoint file")
    problem.check_memory_feasible()
    result = ga.run(checkpoint, resume, progress)
    return replace(result, wall_time_s=time.perf_counter() - t0)
