"""The pipeline GA's chromosome and its variation operators: crossover, mutation and repair.

A chromosome is Park & Ha's (IEEE Access 2024) ``[n_1..n_K, p_1..p_K]``: the layer count of each
of the K stages, then the processor of each stage (K = 3 gives 6 genes), as a DEAP individual
(:func:`individual_class`). The paper crosses the layer-count genes and/or the processor genes
(p = 0.9) and mutates layer counts or processors (p = 0.8); how, is ours (documented, not from
the paper):

* layer counts are crossed and mutated as stage boundaries (the K-1 inner ones), which keeps
  ``sum n_k = L``: DEAP's ``cxUniform`` swaps boundaries between parents, and mutation (70 % of
  mutations) moves one boundary (3 in 4) or every boundary by a step of random scale (1 layer to
  L/4, or anywhere) before sorting;
* processors are crossed with DEAP's ``cxOnePoint`` and mutated by swapping two genes or
  switching to an unused processor; duplicates are repaired so the K processor genes stay
  distinct.

Random choices come from the module-level :mod:`random` functions, which the GA binds to a
generator private to its run (:func:`optimizer.search.ga.private_random`).
"""

from __future__ import annotations

import itertools
import random

from deap import base, creator, tools


def individual_class(n_objectives: int) -> type:
    """DEAP's individual type for ``n_objectives`` minimised objectives (created once per process)."""
    fitness_name, individual_name = f"DnnplanPipelineFitness{n_objectives}", f"DnnplanPipelineIndividual{n_objectives}"
    if not hasattr(creator, fitness_name):
        creator.create(fitness_name, base.Fitness, weights=(-1.0,) * n_objectives)
    if not hasattr(creator, individual_name):
        creator.create(individual_name, list, fitness=getattr(creator, fitness_name))
    return getattr(creator, individual_name)


class GeneOperators:
    """Crossover, mutation and repair on 2K-gene chromosomes (lists of ints) of ``L`` layers,
    ``K`` stages and the ``allowed`` processor indices."""

    def __init__(self, L: int, K: int, allowed: list[int]) -> None:
        self.L, self.K, self.allowed = L, K, allowed

    def boundaries(self, individual: list[int]) -> list[int]:
        """The K-1 inner stage boundaries of ``individual`` (from its layer counts)."""
        return list(itertools.accumulate(individual[:self.K - 1]))

    def set_boundaries(self, individual: list[int], boundaries: list[int]) -> None:
        """Set the layer counts of ``individual`` from inner ``boundaries`` (clipped to 0..L, sorted)."""
        bounds = [0, *sorted(min(self.L, max(0, b)) for b in boundaries), self.L]
        individual[:self.K] = [end - start for start, end in zip(bounds[:-1], bounds[1:])]

    def repair(self, individual: list[int]) -> None:
        """Replace repeated or disallowed processor genes by unused allowed processors."""
        processors = individual[self.K:]
        seen: set[int] = set()
        for k, p in enumerate(processors):
            if p in seen or p not in self.allowed:
                processors[k] = random.choice([q for q in self.allowed if q not in processors and q not in seen])
            seen.add(processors[k])
        individual[self.K:] = processors

    def crossover(self, a: list[int], b: list[int]) -> None:
        """Cross the boundaries (1 in 3), the processors (1 in 3) or both (1 in 3) of ``a`` and ``b``."""
        mode = random.random()
        if mode < 2 / 3 and self.K > 1:  # layer-count genes (as stage boundaries)
            boundaries_a, boundaries_b = self.boundaries(a), self.boundaries(b)
            tools.cxUniform(boundaries_a, boundaries_b, 0.5)
            self.set_boundaries(a, boundaries_a)
            self.set_boundaries(b, boundaries_b)
        if mode >= 1 / 3 and self.K > 1:  # processor genes
            processors_a, processors_b = a[self.K:], b[self.K:]
            tools.cxOnePoint(processors_a, processors_b)
            a[self.K:], b[self.K:] = processors_a, processors_b
            self.repair(a)
            self.repair(b)

    def mutate(self, individual: list[int]) -> None:
        """Move one or every stage boundary (70 %), else switch or swap processors."""
        if self.K > 1 and random.random() < 0.7:  # layer counts: move one or every boundary
            boundaries = self.boundaries(individual)
            moved = [random.randrange(len(boundaries))] if random.random() < 0.75 else range(len(boundaries))
            for i in moved:
                if random.random() < 0.1:
                    boundaries[i] = random.randint(0, self.L)
                else:
                    scale = self.L ** random.random() / 4 if self.L > 4 else 1.0
                    step = int(round(random.gauss(0.0, max(1.0, scale))))
                    boundaries[i] += step if step != 0 else random.choice((-1, 1))
            self.set_boundaries(individual, boundaries)
        else:  # processors
            processors = individual[self.K:]
            spare = [q for q in self.allowed if q not in processors]
            if spare and (self.K == 1 or random.random() < 0.5):
                processors[random.randrange(self.K)] = random.choice(spare)
            elif self.K > 1:
                i, j = random.sample(range(self.K), 2)
                processors[i], processors[j] = processors[j], processors[i]
            individual[self.K:] = processors

    def random_individual(self) -> list[int]:
        """A chromosome with random boundaries and K distinct random processors."""
        boundaries = [random.randint(0, self.L) for _ in range(self.K - 1)]
        individual = [0] * self.K + random.sample(self.allowed, self.K)
        self.set_boundaries(individual, boundaries)
        return individual
