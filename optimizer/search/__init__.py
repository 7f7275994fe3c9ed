"""Design-space searches (docs/ARCHITECTURE.md, ``search/``): problems, solvers, decision rules.

The search core imports neither DEAP nor pymoo at module level; adapters import them when a
solver runs. Problems evaluate whole populations at once from a CostTable's prefix sums.
"""

from .result import Candidate, SearchResult
from .solve import register_solver, solve, solver_names

__all__ = ["Candidate", "SearchResult", "register_solver", "solve", "solver_names"]
