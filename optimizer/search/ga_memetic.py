"""The pipeline GA's memetic step: local search on the stage boundaries of niche leaders.

On modeled fitness with one objective (``local_search``, default 3, 0 = off), generation 0 holds
the FLOPs-balanced split of up to population-2 processor orders, and each order's best mapping
gets a compass search on its stage boundaries (:meth:`BoundarySearch.refine`); after every
generation the leaders of the best ``local_search`` orders not refined yet also get a line search
over every move of up to ±:data:`WINDOW` layers of one boundary or one whole stage, and what they
reach replaces them (Lamarckian; Moscato, "On evolution, search, optimization, genetic algorithms
and martial arts: towards memetic algorithms", Caltech C3P 826, 1989). The compass search follows
Kolda, Lewis & Torczon, "Optimization by direct search", SIAM Review 2003.

Every move is an evaluation through the GA's fitness cache, so ``evaluations`` still counts each
distinct mapping once. The step is there because the plain GA misses in two ways: a stage
boundary stuck next to a better one that only a joint move reaches, and processor orders within a
few per cent of each other never refined enough to compare (``benchmarks/bench_map_optimality.py``
measures both against the exact optimum; figures in BENCHMARKS.md). Measured fitness (a phone or
host in the loop) keeps the plain GA: there every move would be a measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deap import tools

from .ga_cache import FitnessCache
from .ga_operators import GeneOperators

#: layers either side of a boundary that a polishing line search tries (:meth:`BoundarySearch.refine`)
WINDOW = 8


class BoundarySearch:
    """Local search on the stage boundaries of mappings (processors fixed), evaluated through
    ``cache`` on the objectives ``columns``; :attr:`refined` records how far each mapping was
    refined (1: compass search, 2: polished too), so none is refined twice."""

    def __init__(self, operators: GeneOperators, cache: FitnessCache, individual_class: type,
                 columns: Sequence[int], leaders: int) -> None:
        self.operators, self.cache, self.Individual, self.columns = operators, cache, individual_class, columns
        #: processor orders whose leaders are refined after each generation
        self.leaders = leaders
        self.refined: dict[tuple[int, ...], int] = {}

    def moves(self, individual: Any, offsets: Sequence[int]) -> list[Any]:
        """``individual`` with one boundary, or two neighbouring ones together (a whole stage),
        moved by each of ``offsets`` layers (moves leaving ``0..L`` or crossing a boundary are left
        out)."""
        operators, L = self.operators, self.operators.L
        n = operators.K - 1
        directions = [tuple(int(j == i) for j in range(n)) for i in range(n)]
        directions += [tuple(int(j in (i, i + 1)) for j in range(n)) for i in range(n - 1)]
        boundaries, moves = operators.boundaries(individual), []
        for direction in directions:
            for offset in offsets:
                moved = [boundary + offset * weight for boundary, weight in zip(boundaries, direction)]
                if 0 <= moved[0] and moved[-1] <= L and all(x <= y for x, y in zip(moved, moved[1:])):
                    child = self.Individual(list(individual))
                    operators.set_boundaries(child, moved)
                    moves.append(child)
        return moves

    def best_move(self, individual: Any, offsets: Sequence[int]) -> Any | None:
        """The best of :meth:`moves` if it beats ``individual``, else None (all evaluated as one batch)."""
        moves = self.moves(individual, offsets)
        self.cache.evaluate(moves, self.columns)
        top = min(moves, key=lambda m: m.fitness.values[0], default=None)
        return top if top is not None and top.fitness.values[0] < individual.fitness.values[0] else None

    def refine(self, individual: Any, polish: bool) -> Any:
        """Local search on the stage boundaries of ``individual`` (processors fixed), moving one
        boundary or a whole stage (:meth:`moves`): a compass search (steps ``±s`` from about L/4
        down to 1, halved when no move improves), then with ``polish`` a line search over every
        offset up to ``±WINDOW`` layers, repeated while it improves. Returns the best mapping
        reached (``individual`` itself if none is better)."""
        best, step = individual, 1 << max(0, (self.operators.L // 8).bit_length() - 1)
        while step >= 1:
            top = self.best_move(best, (step, -step))
            if top is None:
                step //= 2
            else:
                best = top
        window = (*range(-WINDOW, 0), *range(1, WINDOW + 1))
        while polish and (top := self.best_move(best, window)) is not None:
            best = top
        return best

    def refine_leaders(self, pop: list[Any], first: bool = False) -> list[Any]:
        """What refining the niche leaders of ``pop`` not refined yet reaches (:meth:`refine`; the
        GA puts them back into the population): in generation 0 (``first``) every processor
        order's leader (compass search), afterwards the leaders of the best :attr:`leaders`
        orders (compass search and line-search polish). Empty when there is none to refine."""
        key, K = self.cache.problem.key, self.operators.K
        leaders: dict[tuple[int, ...], Any] = {}
        for individual in tools.selBest(pop, len(pop)):
            leaders.setdefault(tuple(individual[K:]), individual)
        ranked = list(leaders.values())
        chosen = ranked if first else ranked[:self.leaders]
        level = 1 if first else 2  # 1: compass search done, 2: polished too
        todo = [individual for individual in chosen if self.refined.get(key(individual), 0) < level]
        better = []
        for individual in todo:
            out = self.refine(individual, polish=not first)
            for refined_key in (key(individual), key(out)):
                self.refined[refined_key] = max(level, self.refined.get(refined_key, 0))
            better.append(out)
        return better
