"""Objective and weight resolution shared by every caller of the searches.

The pipeline search takes ``throughput`` (alias ``fps``), ``latency``, ``energy``, ``memory``
(checked by :class:`optimizer.search.pipeline.PipelineProblem`) and the thermal objectives of
:mod:`optimizer.search.thermal_objectives`. The split search always minimises latency, energy and
memory (SmartSplit, Ahn et al.); thermal objectives are appended after them, and TOPSIS takes
one weight per objective in that order (Hwang & Yoon's TOPSIS, as SmartSplit applies it).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError, UnknownNameError

#: the split search's fixed objectives, in TOPSIS weight order
SPLIT_BASE = ("latency", "energy", "memory")
_SPLIT_SPELLINGS = {"latency": "latency", "energy": "energy", "memory": "memory",
                    "latency_s": "latency", "energy_j": "energy", "memory_bytes": "memory"}


def pipeline_objective_names(names: Sequence[str]) -> tuple[str, ...]:
    """Pipeline objectives with thermal aliases made canonical (``peak-temp`` -> ``peak_temp_c``).

    Raises
    ------
    UnknownNameError
        A name that is neither a pipeline objective (:data:`optimizer.search.pipeline.OBJECTIVES`
        and aliases) nor a thermal one; the valid list names both kinds.
    """
    from ..search.pipeline import ALIASES, OBJECTIVES
    from ..search.thermal_objectives import THERMAL_ALIASES, THERMAL_OBJECTIVES, thermal_name

    out = tuple(thermal_name(n) or n for n in (s.strip() for s in names) if n)
    for raw, name in zip((s.strip() for s in names if s.strip()), out):
        if name not in OBJECTIVES and name not in ALIASES and name not in THERMAL_OBJECTIVES:
            raise UnknownNameError("objective", raw, [*OBJECTIVES, *ALIASES, *THERMAL_OBJECTIVES, *THERMAL_ALIASES])
    return out


def split_objective_names(names: Sequence[str]) -> tuple[str, ...]:
    """``latency, energy, memory`` followed by the distinct thermal objectives among ``names``.

    Raises
    ------
    UnknownNameError
        A name that is neither a split objective nor a thermal one.
    """
    from ..search.thermal_objectives import THERMAL_ALIASES, THERMAL_OBJECTIVES, thermal_name

    thermal: list[str] = []
    for raw in (s.strip() for s in names):
        if not raw or raw in _SPLIT_SPELLINGS:
            continue
        name = thermal_name(raw)
        if name is None:
            raise UnknownNameError("split objective", raw, [*SPLIT_BASE, *THERMAL_OBJECTIVES, *THERMAL_ALIASES])
        if name not in thermal:
            thermal.append(name)
    return (*SPLIT_BASE, *thermal)


def split_weights(weights: Sequence[float], objectives: Sequence[str], label: str = "weights") -> tuple[float, ...]:
    """Check TOPSIS ``weights`` against the split ``objectives`` (one each, >= 0, not all zero).

    Raises
    ------
    ConfigError
        Prefixed with ``label`` and listing the objectives the weights apply to.
    """
    from ..search.decision import check_weights

    try:
        return check_weights(list(weights), len(objectives))
    except ConfigError as exc:
        raise ConfigError(f"{label}: {exc} ({', '.join(objectives)})") from None
