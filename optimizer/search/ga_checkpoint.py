"""The pipeline GA's checkpoint: a run's state as JSON data, written after every generation.

The state (population, fitness cache, crowding distances, random state, counters, refined
mappings) is written atomically as JSON with a SHA-256 of its content, and refused on reading
when its format, version, content hash or fingerprint (problem, settings and seed) differ. A
checkpoint is data, never code, so a crafted file cannot run anything; a resumed run continues
the exact same random sequence and reaches the same plan as an uninterrupted one. The GA loop is
DEAP's (Fortin et al., "DEAP: Evolutionary algorithms made easy", JMLR 2012), whose own
checkpoints are pickles; this format replaces them.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError
from ..fileio import atomic_write_bytes
from .pipeline import PipelineProblem

CHECKPOINT_VERSION = 2  # 2: JSON data with a content hash (1 was a pickle)
CHECKPOINT_FORMAT = "dnnplan-ga-checkpoint"


def run_fingerprint(problem: PipelineProblem, settings: dict[str, Any], seed: int | None) -> str:
    """SHA-256 of the problem's cost arrays and parameters, the GA ``settings`` and ``seed``: a
    checkpoint resumes only the run it was written for."""
    cost_table = problem.cost_table
    digest = hashlib.sha256()
    for array in (cost_table.latency_s, cost_table.energy_j, cost_table.cut_bytes, cost_table.weight_bytes,
                cost_table.live_bytes, cost_table.handoff_latency_s, cost_table.handoff_s_per_byte,
                cost_table.memory_capacity_bytes):
        digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    digest.update(json.dumps([cost_table.processors, problem.get_params(), settings, seed], sort_keys=True,
                             default=str).encode())
    return digest.hexdigest()


def save_checkpoint(path: str | os.PathLike[str] | None, fingerprint: str, *, pop: list[Any],
                    cache: dict[tuple[int, ...], Any], generation: int, stall: int, top: list[Any],
                    history: list[Any], refined: dict[tuple[int, ...], int] | None = None,
                    random_state: tuple[Any, ...]) -> None:
    """Write the run's state as JSON data (never code: see :func:`load_checkpoint`); nothing when
    ``path`` is None. ``fingerprint`` is :func:`run_fingerprint`'s, ``cache`` maps a mapping to its
    (objectives, violation), ``random_state`` is the run's ``random.getstate()``."""
    if path is None:
        return
    version, internal, gauss = random_state
    state = {"fingerprint": fingerprint, "generation": generation, "stall": stall, "top": [list(k) for k in top],
             "history": history, "population": [list(i) for i in pop],
             "cache": [[list(k), list(F), G] for k, (F, G) in cache.items()],
             "crowding": [getattr(i.fitness, "crowding_dist", None) for i in pop],
             "random_state": [version, list(internal), gauss],
             "refined": [[list(k), level] for k, level in (refined or {}).items()]}
    state = json.loads(json.dumps(state, default=_plain))  # numpy scalars as plain numbers, as read back
    doc = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "sha256": _state_digest(state),
           "state": state}
    atomic_write_bytes(path, json.dumps(doc, separators=(",", ":")).encode("utf-8"))


def _plain(value: Any) -> Any:
    """JSON form of a numpy scalar (mappings hold numpy ints and floats)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _state_digest(state: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(state, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def load_checkpoint(path: str | os.PathLike[str] | None, fingerprint: str) -> dict[str, Any]:
    """The state of a checkpoint written by :func:`save_checkpoint`, read as JSON: a checkpoint
    is data, so a crafted file cannot run code. Refused in one line: another format (an older,
    pickled checkpoint), a version or content hash that differs, another problem or seed."""
    p = Path(str(path))
    if not p.is_file():
        raise InputFileError(f"{p}: no such checkpoint file to resume from")
    try:
        doc = json.loads(p.read_bytes())
    except (ValueError, UnicodeDecodeError):
        doc = None
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT or doc.get("version") != CHECKPOINT_VERSION:
        raise InputFileError(f"{p}: not a version-{CHECKPOINT_VERSION} dnnplan GA checkpoint (an older "
                             "checkpoint or another file); re-run without --resume")
    state = doc.get("state")
    if not isinstance(state, dict) or doc.get("sha256") != _state_digest(state):
        raise InputFileError(f"{p}: the checkpoint is damaged or was altered (its content hash differs); "
                             "re-run without --resume")
    if state.get("fingerprint") != fingerprint:
        raise ConfigError(f"{p}: checkpoint was written for a different problem, settings or seed; "
                          "rerun with the same model, device, options and --seed, or drop --resume")
    try:
        version, internal, gauss = state["random_state"]
        return {**state, "random_state": (int(version), tuple(int(v) for v in internal), gauss),
                "top": [tuple(k) for k in state["top"]],
                "cache": {tuple(int(v) for v in k): (tuple(float(f) for f in F), float(G)) for k, F, G in state["cache"]},
                "refined": {tuple(int(v) for v in k): int(level) for k, level in state["refined"]}}
    except (KeyError, TypeError, ValueError):
        raise InputFileError(f"{p}: the checkpoint's state is incomplete; re-run without --resume") from None
