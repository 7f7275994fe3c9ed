"""The pipeline GA's selection: which mappings survive a generation (niching) and which mate.

Park & Ha (IEEE Access 2024) keep the best chromosomes; ours (documented, not from the paper):

* one objective: niches are processor orders (the processor genes). Survivors are the best
  distinct mappings of parents + offspring (DEAP's ``selBest``) such that the best mapping of
  each of up to population/2 orders survives and no order holds more than population/4 places;
  parents are paired as (best of an order, tournament-chosen mate of the same order) for up to
  population/4 orders and by tournament (size 3) over the population for the rest. Without this
  the population collapses onto one processor order, and orders whose optima lie within 1-3 % of
  each other (common on real networks) are never refined enough to be compared;
* two objectives: NSGA-II survivors (DEAP's ``selNSGA2``; Deb, Pratap, Agarwal & Meyarivan, "A
  fast and elitist multiobjective genetic algorithm: NSGA-II", IEEE Trans. Evol. Comput. 2002)
  and ``selTournamentDCD`` parents.

Random choices come from the module-level :mod:`random` functions, which the GA binds to a
generator private to its run (:func:`optimizer.search.ga.private_random`).
"""

from __future__ import annotations

import random
from typing import Any

from deap import tools


class NicheSelection:
    """Survivors and parents for a population of ``population`` mappings with ``K`` stages
    (``K`` processor genes after the ``K`` layer counts) and ``n_objectives`` (1 or 2)."""

    def __init__(self, population: int, K: int, tournament: int, n_objectives: int) -> None:
        self.population, self.K, self.tournament, self.n_objectives = population, K, tournament, n_objectives
        #: processor orders whose best mapping always survives
        self.niches = population // 2
        #: most mappings one processor order may hold
        self.niche_cap = max(2, population // 4)

    def survivors(self, pool: list[Any]) -> list[Any]:
        """NSGA-II survivors (2 objectives), else the best of each processor order (niche) first,
        then by rank with at most :attr:`niche_cap` mappings per order; ranked best first."""
        population, K = self.population, self.K
        if self.n_objectives == 2:
            return tools.selNSGA2(pool, population)
        ranked = tools.selBest(pool, len(pool))
        leaders: dict[tuple[int, ...], Any] = {}
        for individual in ranked:  # best mapping of each processor order (niche), best niches first
            leaders.setdefault(tuple(individual[K:]), individual)
        kept = list(leaders.values())[:self.niches]
        chosen = {id(i) for i in kept}
        per_niche = {k: 1 for k in leaders}
        rest = []
        for individual in ranked:  # fill by rank, at most `niche_cap` mappings per processor order
            order = tuple(individual[K:])
            if id(individual) not in chosen and per_niche[order] < self.niche_cap:
                per_niche[order] += 1
                rest.append(individual)
        kept += rest[:population - len(kept)]
        if len(kept) < population:  # too few niches to fill the population under the cap
            chosen = {id(i) for i in kept}
            kept += [i for i in ranked if id(i) not in chosen][:population - len(kept)]
        return tools.selBest(kept, len(kept))

    def mating_pairs(self, pop: list[Any]) -> list[Any]:
        """Pairs of parents: each niche leader with a tournament-chosen member of its own
        processor order (refines every order), the rest by tournament over the population."""
        niche_members: dict[tuple[int, ...], list[Any]] = {}
        for individual in pop:  # pop is ranked best first
            niche_members.setdefault(tuple(individual[self.K:]), []).append(individual)
        pairs = []
        for members in list(niche_members.values())[:len(pop) // 4]:
            mates = members[1:] or members
            pairs.append([members[0], tools.selTournament(mates, 1, self.tournament)[0]])
        rest = tools.selTournament(pop, len(pop) - 2 * len(pairs), self.tournament)
        pairs += [rest[i:i + 2] for i in range(0, len(rest), 2)]
        random.shuffle(pairs)
        return [individual for pair in pairs for individual in pair]

    def parents(self, pop: list[Any]) -> list[Any]:
        """Parents in mating order: ``selTournamentDCD`` (2 objectives, population a multiple of 4,
        else tournaments), :meth:`mating_pairs` for 1 objective."""
        if self.n_objectives == 2:
            return tools.selTournamentDCD(pop, len(pop) - len(pop) % 4) if len(pop) % 4 == 0 \
                else tools.selTournament(pop, len(pop), self.tournament)
        return self.mating_pairs(pop)
