"""Where a search's numbers come from: modeled (CostTable) or measured, cached and persisted.

An evaluator turns a population ``X`` [N, 2K] into an :class:`~optimizer.search.problem.Evaluation`
(objectives ``F`` [N, M] in minimisation form, constraints ``G`` [N, k], metrics) for a problem. The modeled evaluator is the problem's
own vectorised :meth:`~optimizer.search.pipeline.PipelineProblem.evaluate`. The measured one
follows Park & Ha's device-in-the-loop fitness (docs/METHODS.md section 2): each distinct mapping is sent to
a ``measure(decision) -> fps`` callable (a host runner, or the external ``--measure-cmd``
protocol), the reply replaces the modeled throughput, and every reply is appended to a JSON-lines
file at once, so an interrupted search resumes without measuring anything twice.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputFileError, MeasurementError
from ..fileio import write_error
from .problem import Evaluation


class ModeledEvaluator:
    """Objectives from the problem's cost model (vectorised over the population)."""

    name = "modeled"

    def evaluate(self, problem: Any, X: np.ndarray) -> Evaluation:
        """Evaluate a population ``X`` [N, 2K] (:class:`~optimizer.search.problem.Evaluation`)."""
        return problem.evaluate(X)


class MeasuredEvaluator:
    """Throughput measured by a callable, other objectives and constraints modeled.

    Parameters
    ----------
    measure
        ``measure(decision) -> fps`` for one mapping; ``decision`` is
        :meth:`PipelineProblem.decode`'s dict (``counts``, ``processors``, ``stages``).
    cache_path
        JSON-lines file of past measurements (one ``{"key": [...], "decision": {...},
        "fps": x}`` per line). Existing lines are reused; each new measurement is appended
        (one ``write`` of one line, flushed and fsynced) before the search goes on. A torn last
        line from a crash is ignored.

    Attributes
    ----------
    calls : int
        Measurements actually made by this evaluator (cache hits excluded).
    """

    name = "measured"

    def __init__(self, measure: Callable[[dict[str, Any]], float], cache_path: str | os.PathLike[str] | None = None) -> None:
        self.measure = measure
        self.cache_path = cache_path
        self.calls = 0
        self._cache: dict[tuple[int, ...], float] | None = None

    def _load(self) -> dict[tuple[int, ...], float]:
        if self._cache is not None:
            return self._cache
        cache: dict[tuple[int, ...], float] = {}
        if self.cache_path is not None and Path(self.cache_path).exists():
            path = Path(self.cache_path)
            lines = path.read_text(encoding="utf-8").split("\n")
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    cache[tuple(int(v) for v in rec["key"])] = float(rec["fps"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                    if n == len(lines):  # torn final line (no newline yet) of an interrupted write
                        continue
                    raise InputFileError(f"{path}: line {n} is not a measurement record "
                                         '{"key": [...], "fps": number}') from None
        self._cache = cache
        return cache

    def measured(self) -> dict[tuple[int, ...], float]:
        """Every cached measurement, canonical key -> fps."""
        return dict(self._load())

    def _append(self, key: tuple[int, ...], decision: dict[str, Any], fps: float) -> None:
        if self.cache_path is None:
            return
        line = json.dumps({"key": list(key), "decision": decision, "fps": fps}) + "\n"
        path = Path(self.cache_path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise write_error(path, "measurement cache", exc) from None

    def evaluate(self, problem: Any, X: np.ndarray) -> Evaluation:
        """Evaluate a population ``X`` [N, 2K]: measured throughput, modeled rest."""
        cache = self._load()
        out = problem.evaluate(X)
        fps = np.empty(len(X))
        for i, x in enumerate(np.asarray(X)):
            key = problem.key(x)
            if key not in cache:
                decision = problem.decode(x)
                value = self.measure(decision)
                try:
                    value = float(value)
                except (TypeError, ValueError):
                    raise MeasurementError(f"measurement of {decision['stages']} returned {value!r}, "
                                           "expected frames per second (a number)") from None
                if not math.isfinite(value) or value < 0:
                    raise MeasurementError(f"measurement of {decision['stages']} returned {value} fps; "
                                           "expected a finite number >= 0")
                self.calls += 1
                cache[key] = value
                self._append(key, decision, value)
            fps[i] = cache[key]
        metrics = {**out.metrics, "modeled_throughput_fps": out["throughput_fps"], "throughput_fps": fps}
        F = out.F.copy()
        for m, key in enumerate(problem.objective_keys):
            if key == "throughput_fps":
                F[:, m] = -fps
        return Evaluation(F, out.G, metrics)


def external_measure(measurer: Any, artifact: str | os.PathLike[str], *, dtype: str = "int8",
                     cpu_processor: str = "cpu", cpu_threads: int = 4, repeats: int = 10,
                     warmup: int = 2) -> Callable[[dict[str, Any]], float]:
    """``measure(decision) -> fps`` through the external protocol (``optimizer/measure/PROTOCOL.md``).

    Each mapping becomes a request with ``assignment = {"kind": "pipeline", "stages": [{"processor",
    "layers": [first, last_exclusive], "threads"}]}`` for ``artifact`` sent by ``measurer`` (an
    :class:`optimizer.measure.ExternalMeasurer`); the reply's ``fps`` (or ``1 / latency_s``) is
    the fitness.
    """

    def measure(decision: dict[str, Any]) -> float:
        stages = [{"processor": st["processor"], "layers": [st["first_layer"], st["last_layer"] + 1],
                   "threads": cpu_threads if st["processor"] == cpu_processor else 1}
                  for st in decision["stages"]]
        metrics = measurer.measure(artifact, {"kind": "pipeline", "stages": stages}, dtype=dtype,
                                   repeats=repeats, warmup=warmup)
        fps = metrics.get("fps")
        return float(fps) if isinstance(fps, (int, float)) and fps > 0 else 1.0 / float(metrics["latency_s"])

    return measure
