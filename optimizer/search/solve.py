"""One entry point for every search: ``solve(problem, solver, seed=..., **settings)``.

Solvers live in a small registry keyed by ``(problem.kind, solver name)``. A solver is a
callable ``fn(problem, *, seed=None, **settings) -> SearchResult``; it may be registered as the
callable itself or as a lazy ``"package.module:function"`` string, so that registering a DEAP-
or pymoo-backed solver does not import DEAP or pymoo until that solver actually runs.

Settings are checked against the solver's signature before it runs: an unknown or misspelt
setting is a :class:`~optimizer.errors.ConfigError`, never silently ignored.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, UnknownNameError
from .result import SearchResult

SolverFn = Callable[..., SearchResult]

_REGISTRY: dict[tuple[str, str], SolverFn | str] = {}


def register_solver(problem_kind: str, name: str, fn: SolverFn | str) -> None:
    """Register solver ``name`` for problems whose ``kind`` is ``problem_kind``.

    Parameters
    ----------
    problem_kind
        The ``kind`` attribute of the problems it solves (``"pipeline"``, ``"split"``, ...).
    name
        Solver name used by ``solve`` and the CLI (``"ga"``, ``"exact"``, ``"nsga2"``...).
    fn
        ``fn(problem, *, seed=None, **settings) -> SearchResult``, or a lazy reference
        ``"package.module:function"`` resolved on first use. Re-registering a name replaces it.
    """
    if not isinstance(fn, str) and not callable(fn):
        raise TypeError(f"solver {name!r}: expected a callable or 'module:function', got {fn!r}")
    if isinstance(fn, str) and ":" not in fn:
        raise ValueError(f"solver {name!r}: lazy reference {fn!r} must look like 'package.module:function'")
    _REGISTRY[(problem_kind, name)] = fn


def solver_names(problem_kind: str) -> list[str]:
    """Names of the solvers registered for ``problem_kind``, sorted."""
    return sorted(name for kind, name in _REGISTRY if kind == problem_kind)


def get_solver(problem_kind: str, name: str) -> SolverFn:
    """The solver callable (lazy references are imported here)."""
    try:
        fn = _REGISTRY[(problem_kind, name)]
    except KeyError:
        raise UnknownNameError(f"solver for {problem_kind} problems", name, solver_names(problem_kind)) from None
    if isinstance(fn, str):
        module, _, attr = fn.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        _REGISTRY[(problem_kind, name)] = fn
    return fn


def solve(problem: Any, solver: str, *, seed: int | None = None, **settings: Any) -> SearchResult:
    """Run ``solver`` on ``problem`` and return its :class:`SearchResult`.

    Parameters
    ----------
    problem
        Any object with a ``kind`` attribute matching a registered solver
        (e.g. :class:`optimizer.search.pipeline.PipelineProblem`, ``kind == "pipeline"``).
    solver
        Registered solver name; :func:`solver_names` lists them.
    seed
        Seed of every random choice the solver makes (same seed -> same result).
    **settings
        Solver-specific settings (e.g. ``population=32`` for ``ga``); unknown names raise
        :class:`ConfigError` listing the accepted ones.
    """
    kind = getattr(problem, "kind", None)
    if not isinstance(kind, str):
        raise TypeError(f"solve(): {type(problem).__name__} has no 'kind' attribute naming its problem type")
    fn = get_solver(kind, solver)
    sig = inspect.signature(fn)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    if not accepts_any:
        valid = [n for n, p in list(sig.parameters.items())[1:]
                 if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                 and n != "seed"]
        unknown = sorted(set(settings) - set(valid))
        if unknown:
            raise ConfigError(f"solver {solver!r}: unknown setting {unknown[0]!r}; valid: "
                              f"{', '.join(sorted(valid)) or '(none)'}")
    return fn(problem, seed=seed, **settings)


# Built-in solvers, registered lazily so that `import optimizer.search` stays light.
register_solver("pipeline", "ga", "optimizer.search.ga:solve_pipeline_ga")
register_solver("pipeline", "exact", "optimizer.search.pipeline_exact:solve_pipeline_exact")
register_solver("pipeline", "single", "optimizer.search.pipeline_baselines:solve_pipeline_single")
register_solver("pipeline", "flops", "optimizer.search.pipeline_baselines:solve_pipeline_flops")
register_solver("split", "nsga2", "optimizer.search.nsga2:solve_split_nsga2")
register_solver("split", "exact", "optimizer.search.split_baselines:solve_split_exact")
register_solver("split", "lbo", "optimizer.search.split_baselines:solve_split_lbo")
register_solver("split", "ebo", "optimizer.search.split_baselines:solve_split_ebo")
register_solver("split", "cos", "optimizer.search.split_baselines:solve_split_cos")
register_solver("split", "coc", "optimizer.search.split_baselines:solve_split_coc")
register_solver("split", "rs", "optimizer.search.split_baselines:solve_split_rs")
