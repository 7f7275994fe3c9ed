"""DEAP adapter: the genetic algorithm of Park & Ha (IEEE Access 2024) for pipeline mapping.

Published settings (docs/METHODS.md section 2): chromosome ``[n_1..n_K, p_1..p_K]`` (K = 3 gives 6 genes),
crossover of the layer-count genes and/or the processor genes with p = 0.9, mutation of layer
counts or processors with p = 0.8, population 32, stop when the best 20 chromosomes are unchanged
for 10 consecutive generations or at a generation cap (200-300 by network size; default 300).
Already-evaluated chromosomes are never evaluated again (fitness cache keyed by the canonical
mapping), so ``evaluations`` counts distinct mappings (with 2 objectives, the single-objective
seeding runs below share that cache).

Implementation choices (documented, not from the paper):

* the chromosome and its operators (layer counts crossed and mutated as stage boundaries,
  processor genes repaired to stay distinct) are in :mod:`optimizer.search.ga_operators`, the
  checkpoint in :mod:`optimizer.search.ga_checkpoint`;
* the initial population holds the FLOPs-balanced split (the paper's profiling-based baseline,
  :func:`~optimizer.search.pipeline_baselines.flops_split`) of up to half of the processor
  orders, the rest random mappings;
* niches = processor orders (the processor genes). Survivors are the best distinct mappings of
  parents + offspring (``selBest``) such that the best mapping of each of up to population/2
  orders survives and no order holds more than population/4 places; parents are paired as
  (best of an order, tournament-chosen mate of the same order) for up to population/4 orders and
  by tournament (size 3) over the population for the rest. Without this the population
  collapses onto one processor order, and orders whose optima lie within 1-3 % of each other
  (common on real networks) are never refined enough to be compared;
* two objectives: ``selNSGA2`` survivors, ``selTournamentDCD`` parents, and the initial
  population seeded with the ends of the front: the best mapping of a single-objective run
  (the niche GA above, same seed and settings) for each objective (seeding with single-objective
  optima: Friedrich & Wagner, "Seeding the initial population of multi-objective evolutionary
  algorithms: a computational study", Applied Soft Computing 2015). NSGA-II's crowding distance is
  infinite at the ends of a front, so they stay until something dominates them. Without it NSGA-II's
  tournaments can lose the max-throughput end onto another processor order on fallback-heavy
  tables (``benchmarks/bench_ga_front.py`` measures how often);
* infeasible mappings (memory) get the penalty ``1e9 + violation in MB`` on every objective;
* memetic step (modeled fitness, one objective; ``local_search``, default 3, 0 = off): generation
  0 holds the FLOPs-balanced split of up to population-2 processor orders, and each order's best
  mapping gets a compass search on its stage boundaries (:meth:`PipelineGA.refine`); after every
  generation the leaders of the best ``local_search`` orders not refined yet also get a line
  search over every move of up to ±8 layers of one boundary or one whole stage, and what they
  reach replaces them (Lamarckian; Moscato, "On evolution, search, optimization, genetic
  algorithms and martial arts: towards memetic algorithms", Caltech C3P 826, 1989). Every move is
  an evaluation through the same cache, so ``evaluations`` still counts each distinct mapping
  once. The step is there because the plain GA misses in two ways: a stage boundary stuck next to
  a better one that only a joint move reaches, and processor orders within a few per cent of each
  other never refined enough to compare (``benchmarks/bench_map_optimality.py`` measures both
  against the exact optimum; figures in BENCHMARKS.md). Measured fitness (a phone or host in the
  loop) keeps the plain GA: there every move would be a measurement.

DEAP's operators draw from the module-level :mod:`random` functions: during a run they (and this
module) are pointed at a private generator seeded with ``seed`` (see :func:`private_random`),
whose state is stored in the checkpoint so a resumed run continues the exact same random
sequence (same final plan as an uninterrupted run), whatever other threads do meanwhile.
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
from . import ga_operators
from .evaluators import ModeledEvaluator
from .ga_checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, load_checkpoint, run_fingerprint, save_checkpoint
from .ga_operators import GeneOperators, individual_class
from .pipeline import PipelineProblem
from .pipeline_baselines import flops_split
from .problem import build_result
from .result import Candidate, SearchResult

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "PipelineGA", "Termination", "solve_pipeline_ga"]
_PENALTY = 1e9
_WINDOW = 8  # layers either side a polishing line search tries (:meth:`PipelineGA.refine`)


_RANDOM_LOCK = threading.Lock()


@contextmanager
def private_random(seed: int | None) -> Iterator[None]:
    """Give this module and DEAP's operator modules a private ``random.Random(seed)`` for a run.

    DEAP's operators call the module-level :mod:`random` functions, and so does our code; other
    threads of the same process (a Dask worker's event loop, for one) draw from that shared
    generator too, so a run drawing from it would not be reproducible. During a run the name ``random`` in these
    modules is bound to a private generator instead (``getstate``/``setstate`` included, so the
    checkpoint stores its state); the lock keeps two runs in one process from interleaving.
    """
    from deap.tools import crossover, emo, mutation, selection

    modules = [sys.modules[__name__], ga_operators, crossover, emo, mutation, selection]
    with _RANDOM_LOCK:
        saved = [m.random for m in modules]
        rng = random.Random(seed)
        for m in modules:
            m.random = rng
        try:
            yield
        finally:
            for m, r in zip(modules, saved):
                m.random = r


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
    """Park & Ha's GA on a :class:`PipelineProblem` (module docstring): DEAP operators, a fitness
    cache keyed by the canonical mapping, niche-preserving survivors (1 objective) or NSGA-II
    (2 objectives), a :class:`Termination` rule and a resumable checkpoint per generation.

    Build it with the settings, then :meth:`run`. Random choices come from the module-level
    :mod:`random` functions, which :func:`private_random` binds to a generator seeded per run.
    """

    def __init__(self, problem: PipelineProblem, *, seed: int | None, population: int, cx_prob: float,
                 mut_prob: float, elite: int, tournament: int, termination: Termination,
                 evaluator: Any = None, anchors: bool = True, objective: int | None = None,
                 local_search: int = 3) -> None:
        self.problem, self.seed, self.population = problem, seed, population
        self.cx_prob, self.mut_prob, self.elite, self.tournament = cx_prob, mut_prob, elite, tournament
        self.termination = termination
        self.prep = problem.prepare()
        #: the one objective (column of the problem's objectives) a seeding run optimises
        self.columns = tuple(range(len(self.prep.objectives))) if objective is None else (objective,)
        self.n_obj = len(self.columns)
        self.evaluator = evaluator if evaluator is not None else ModeledEvaluator()
        self.settings: dict[str, Any] = {
            "population": population, "max_generations": termination.max_generations, "cx_prob": cx_prob,
            "mut_prob": mut_prob, "elite": elite, "patience": termination.patience, "tournament": tournament,
            "evaluator": getattr(self.evaluator, "name", type(self.evaluator).__name__)}
        if termination.time_budget_s is not None:
            self.settings["time_budget_s"] = termination.time_budget_s
        self.anchors = anchors and self.n_obj == 2
        self.local_search_setting = local_search
        #: niche leaders refined by :meth:`refine` per generation (memetic step; modeled, 1 objective)
        self.local_search = local_search if self.n_obj == 1 and isinstance(self.evaluator, ModeledEvaluator) \
            and self.prep.K > 1 else 0
        #: processor orders given a FLOPs-balanced mapping in generation 0 (all with local search)
        self.seeds = population - 2 if self.local_search else population // 2
        if self.local_search:
            self.settings["local_search"] = local_search
        if self.anchors:
            self.settings["anchors"] = "single-objective GA best per objective"
        self.Individual = individual_class(self.n_obj)
        self.ops = GeneOperators(self.prep.L, self.prep.K, self.prep.allowed.tolist())
        self.niches = population // 2
        self.niche_cap = max(2, population // 4)
        self.cache: dict[tuple[int, ...], tuple[tuple[float, ...], float]] = {}
        self.pop: list[Any] = []
        self.gen = self.stall = 0
        self.top: list[tuple[int, ...]] = []
        self.history: list[dict[str, Any]] = []
        self.refined: dict[tuple[int, ...], int] = {}

    # -- fitness ---------------------------------------------------------------------------------
    def evaluate(self, inds: list[Any]) -> None:
        """Set the fitness of ``inds``; only mappings not seen before reach the evaluator (one batch)."""
        problem, cache = self.problem, self.cache
        keys = [problem.key(ind) for ind in inds]
        todo: dict[tuple[int, ...], list[int]] = {}
        for key, ind in zip(keys, inds):
            if key not in cache and key not in todo:
                todo[key] = list(ind)
        if todo:
            out = self.evaluator.evaluate(problem, np.asarray(list(todo.values()), dtype=np.int64))
            for key, F, G in zip(todo, out.F, out.violation, strict=True):
                cache[key] = (tuple(float(v) for v in F), float(G))
        for key, ind in zip(keys, inds):
            F, G = cache[key]
            ind.fitness.values = tuple(F[m] for m in self.columns) if G <= 0 else \
                tuple(_PENALTY + G / 1e6 for _ in self.columns)

    def unique(self, inds: list[Any]) -> list[Any]:
        """``inds`` without repeated mappings (first kept)."""
        seen: set[tuple[int, ...]] = set()
        out = []
        for ind in inds:
            key = self.problem.key(ind)
            if key not in seen:
                seen.add(key)
                out.append(ind)
        return out

    # -- selection -------------------------------------------------------------------------------
    def survivors(self, pool: list[Any]) -> list[Any]:
        """NSGA-II survivors (2 objectives), else the best of each processor order (niche) first,
        then by rank with at most ``niche_cap`` mappings per order; ranked best first."""
        population, K = self.population, self.prep.K
        if self.n_obj == 2:
            return tools.selNSGA2(pool, population)
        ranked = tools.selBest(pool, len(pool))
        leaders: dict[tuple[int, ...], Any] = {}
        for ind in ranked:  # best mapping of each processor order (niche), best niches first
            leaders.setdefault(tuple(ind[K:]), ind)
        kept = list(leaders.values())[:self.niches]
        chosen = {id(i) for i in kept}
        per_niche = {k: 1 for k in leaders}
        rest = []
        for ind in ranked:  # fill by rank, at most `niche_cap` mappings per processor order
            k = tuple(ind[K:])
            if id(ind) not in chosen and per_niche[k] < self.niche_cap:
                per_niche[k] += 1
                rest.append(ind)
        kept += rest[:population - len(kept)]
        if len(kept) < population:  # too few niches to fill the population under the cap
            chosen = {id(i) for i in kept}
            kept += [i for i in ranked if id(i) not in chosen][:population - len(kept)]
        return tools.selBest(kept, len(kept))

    def mating_pairs(self, pop: list[Any]) -> list[Any]:
        """Pairs of parents: each niche leader with a tournament-chosen member of its own
        processor order (refines every order), the rest by tournament over the population."""
        niche_members: dict[tuple[int, ...], list[Any]] = {}
        for ind in pop:  # pop is ranked best first
            niche_members.setdefault(tuple(ind[self.prep.K:]), []).append(ind)
        pairs = []
        for members in list(niche_members.values())[:len(pop) // 4]:
            mates = members[1:] or members
            pairs.append([members[0], tools.selTournament(mates, 1, self.tournament)[0]])
        rest = tools.selTournament(pop, len(pop) - 2 * len(pairs), self.tournament)
        pairs += [rest[i:i + 2] for i in range(0, len(rest), 2)]
        random.shuffle(pairs)
        return [ind for pair in pairs for ind in pair]

    def parents(self, pop: list[Any]) -> list[Any]:
        """Parents in mating order: ``selTournamentDCD`` (2 objectives, population a multiple of 4,
        else tournaments), :meth:`mating_pairs` for 1 objective."""
        if self.n_obj == 2:
            return tools.selTournamentDCD(pop, len(pop) - len(pop) % 4) if len(pop) % 4 == 0 \
                else tools.selTournament(pop, len(pop), self.tournament)
        return self.mating_pairs(pop)

    def top_keys(self, pop: list[Any]) -> list[tuple[int, ...]]:
        """The mappings the stall rule watches: the best ``elite`` (sorted keys for 2 objectives)."""
        ranked = pop[:self.elite] if self.n_obj == 2 else tools.selBest(pop, self.elite)
        keys = [self.problem.key(i) for i in ranked]
        return sorted(keys) if self.n_obj == 2 else keys

    def natural_best(self, pop: list[Any]) -> float:
        """Best value of the first objective in its natural sense (e.g. fps)."""
        f0 = min(ind.fitness.values[0] for ind in pop)
        return -f0 if self.problem.objective_senses[self.columns[0]] == "max" else f0

    # -- memetic step ----------------------------------------------------------------------------
    def _moves(self, ind: Any, offsets: Sequence[int]) -> list[Any]:
        """``ind`` with one boundary, or two neighbouring ones together (a whole stage), moved by
        each of ``offsets`` layers (moves leaving ``0..L`` or crossing a boundary are left out)."""
        ops, L = self.ops, self.prep.L
        n = self.prep.K - 1
        dirs = [tuple(int(j == i) for j in range(n)) for i in range(n)]
        dirs += [tuple(int(j in (i, i + 1)) for j in range(n)) for i in range(n - 1)]
        boundaries, moves = ops.boundaries(ind), []
        for d in dirs:
            for off in offsets:
                c = [a + off * b for a, b in zip(boundaries, d)]
                if 0 <= c[0] and c[-1] <= L and all(x <= y for x, y in zip(c, c[1:])):
                    child = self.Individual(list(ind))
                    ops.set_boundaries(child, c)
                    moves.append(child)
        return moves

    def _best_move(self, ind: Any, offsets: Sequence[int]) -> Any | None:
        """The best of :meth:`_moves` if it beats ``ind``, else None (all evaluated as one batch)."""
        moves = self._moves(ind, offsets)
        self.evaluate(moves)
        top = min(moves, key=lambda m: m.fitness.values[0], default=None)
        return top if top is not None and top.fitness.values[0] < ind.fitness.values[0] else None

    def refine(self, ind: Any, polish: bool) -> Any:
        """Local search on the stage boundaries of ``ind`` (processors fixed), moving one boundary
        or a whole stage (:meth:`_moves`): a compass search (steps ``±s`` from about L/4 down to 1,
        halved when no move improves; Kolda, Lewis & Torczon, "Optimization by direct search",
        SIAM Review 2003), then with ``polish`` a line search over every offset up to
        ``±_WINDOW`` layers, repeated while it improves. Every move goes through :meth:`evaluate`
        (cached and counted). Returns the best mapping reached (``ind`` itself if none is better)."""
        best, step = ind, 1 << max(0, (self.prep.L // 8).bit_length() - 1)
        while step >= 1:
            top = self._best_move(best, (step, -step))
            if top is None:
                step //= 2
            else:
                best = top
        window = (*range(-_WINDOW, 0), *range(1, _WINDOW + 1))
        while polish and (top := self._best_move(best, window)) is not None:
            best = top
        return best

    def memetic(self, first: bool = False) -> None:
        """Refine niche leaders not refined yet (:meth:`refine`) and put what they reach back into
        the population (Lamarckian): in generation 0 every processor order's leader (compass
        search), afterwards the leaders of the best :attr:`local_search` orders (compass search
        and line-search polish)."""
        if not self.local_search:
            return
        leaders: dict[tuple[int, ...], Any] = {}
        for ind in tools.selBest(self.pop, len(self.pop)):
            leaders.setdefault(tuple(ind[self.prep.K:]), ind)
        ranked = list(leaders.values())
        chosen = ranked if first else ranked[:self.local_search]
        level = 1 if first else 2  # 1: compass search done, 2: polished too
        todo = [ind for ind in chosen if self.refined.get(self.problem.key(ind), 0) < level]
        if not todo:
            return
        better = []
        for ind in todo:
            out = self.refine(ind, polish=not first)
            for key in (self.problem.key(ind), self.problem.key(out)):
                self.refined[key] = max(level, self.refined.get(key, 0))
            better.append(out)
        self.pop = self.survivors(self.unique(better + self.pop))

    # -- generations -----------------------------------------------------------------------------
    def anchor_mappings(self) -> list[list[int]]:
        """The best mapping of a single-objective run per objective (same seed and settings, the
        time budget shared out). The runs share this run's fitness cache: a mapping is evaluated
        (or measured) once for the whole search."""
        budget = self.termination.time_budget_s
        termination = self.termination if budget is None else \
            replace(self.termination, time_budget_s=budget / (self.n_obj + 1))
        best = []
        for m in range(self.n_obj):
            single = PipelineGA(self.problem, seed=self.seed, population=self.population, cx_prob=self.cx_prob,
                                mut_prob=self.mut_prob, elite=self.elite, tournament=self.tournament,
                                termination=termination, evaluator=self.evaluator, objective=m,
                                local_search=self.local_search_setting)
            single.cache = self.cache
            single.run()
            best.append(list(single.pop[0]))
        return best

    def initialise(self, anchors: Sequence[list[int]] = ()) -> None:
        """Generation 0: ``anchors`` (2 objectives: the ends of the front), FLOPs-balanced splits
        of up to half of the processor orders, random fill."""
        problem, ops, population, Individual = self.problem, self.ops, self.population, self.Individual
        orders = list(itertools.permutations(ops.allowed, self.prep.K))
        random.shuffle(orders)
        candidates = [list(a) for a in anchors] + [list(flops_split(problem, o)) for o in orders[:self.seeds]]
        space = problem.space_size()
        attempts = 0
        while len(self.unique([Individual(c) for c in candidates])) < min(population, space) \
                and attempts < 100 * population:
            candidates.append(ops.random_individual())
            attempts += 1
        pop = self.unique([Individual(c) for c in candidates])[:population]
        self.evaluate(pop)
        self.pop = self.survivors(pop)
        self.memetic(first=True)
        self.gen, self.stall = 0, 0
        self.top = self.top_keys(self.pop)
        self.history = [{"generation": 0, "evaluations": len(self.cache), "best": self.natural_best(self.pop)}]

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's state (population, cache, random state, counters)."""
        self.cache.update(state["cache"])
        random.setstate(state["random_state"])
        self.pop = [self.Individual(g) for g in state["population"]]
        self.evaluate(self.pop)
        for ind, dist in zip(self.pop, state["crowding"]):
            if dist is not None:
                ind.fitness.crowding_dist = dist
        self.gen, self.stall, self.top, self.history = (state["generation"], state["stall"], state["top"],
                                                        state["history"])
        self.refined = dict(state.get("refined", {}))

    def step(self) -> None:
        """One generation: parents, crossover, mutation, evaluation, survivors, stall count."""
        self.gen += 1
        offspring = [self.Individual(list(p)) for p in self.parents(self.pop)]
        for a, b in zip(offspring[::2], offspring[1::2]):
            if random.random() < self.cx_prob:
                self.ops.crossover(a, b)
        for ind in offspring:
            if random.random() < self.mut_prob:
                self.ops.mutate(ind)
        self.evaluate(offspring)
        self.pop = self.survivors(self.unique(self.pop + offspring))
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
                self._save(checkpoint, fingerprint)
            if progress is not None:
                progress(self.gen, self.natural_best(self.pop), len(self.cache))
            while (stop := self.termination.reason(self.gen, self.stall, time.perf_counter() - t0)) is None:
                self.step()
                self._save(checkpoint, fingerprint)
                if progress is not None:
                    progress(self.gen, self.natural_best(self.pop), len(self.cache))
        return self.result(stop, time.perf_counter() - t0)

    def _save(self, checkpoint: str | os.PathLike[str] | None, fingerprint: str) -> None:
        save_checkpoint(checkpoint, fingerprint, pop=self.pop, cache=self.cache, generation=self.gen, stall=self.stall,
                        top=self.top, history=self.history, refined=self.refined, random_state=random.getstate())

    def result(self, stopped_by: str, wall_s: float) -> SearchResult:
        """The :class:`SearchResult`: the best mapping (1 objective) or the feasible first front
        with its best-throughput member (2 objectives), objectives as the search saw them."""
        problem, cache, senses = self.problem, self.cache, self.problem.objective_senses
        X = np.asarray([list(ind) for ind in self.pop], dtype=np.int64)
        if self.n_obj == 2:
            fronts = tools.sortNondominated(self.pop, len(self.pop), first_front_only=True)
            front_X = np.asarray([list(ind) for ind in fronts[0]], dtype=np.int64)
            evaluated = _with_cached(problem, front_X, cache)
            feasible = [c for c in evaluated if c.feasible]
            front: tuple[Candidate, ...] = tuple(sorted(feasible or evaluated,
                                                        key=lambda c: -c.objectives["throughput_fps"]))
            names = problem.objective_names
            first = names.index("throughput") if "throughput" in names else 0
            key, sense = problem.objective_keys[first], senses[first]
            best = (max if sense == "max" else min)(front, key=lambda c: c.objectives[key])
            rule = {"rule": f"best {names[first]} on the front"}
        else:
            best = _with_cached(problem, X[:1], cache)[0]
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
    if ga.n_obj > 2:
        raise ConfigError(f"solver 'ga': supports 1 or 2 objectives, got {list(problem.objective_names)}")
    if resume and checkpoint is None:
        raise ConfigError("ga: resume=True needs a checkpoint file")
    problem.check_memory_feasible()
    result = ga.run(checkpoint, resume, progress)
    return replace(result, wall_time_s=time.perf_counter() - t0)


def _with_cached(problem: PipelineProblem, X: np.ndarray, cache: dict[tuple[int, ...], Any]) -> list[Candidate]:
    """Candidates with modeled metrics, objectives overridden by the values the search used."""
    cands = problem.candidates(X)
    out = []
    for x, c in zip(X, cands):
        F, _ = cache[problem.key(x)]
        objectives = dict(c.objectives)
        metrics = dict(c.metrics)
        for f, key, sense in zip(F, problem.objective_keys, problem.objective_senses):
            value = -f if sense == "max" else f
            if key in objectives and not np.isclose(objectives[key], value, rtol=1e-12, atol=0):
                metrics[f"modeled_{key}"] = objectives[key]
            objectives[key] = value
        out.append(type(c)(decision=c.decision, objectives=objectives, feasible=c.feasible,
                           violation=c.violation, metrics=metrics))
    return out
