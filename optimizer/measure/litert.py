"""Whole-model host timing with the LiteRT interpreter (``ai_edge_litert``)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError, MeasurementError
from ..quantize.delegation import invoke_times, random_feed


@dataclass(frozen=True)
class TimingResult:
    """Wall-clock statistics of ``repeats`` invocations after ``warmup`` discarded ones."""

    median_s: float
    mean_s: float
    std_s: float
    p10_s: float
    p90_s: float
    repeats: int
    warmup: int
    threads: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def time_litert(tflite_path: str | os.PathLike[str], *, threads: int = 1, repeats: int = 20,
                warmup: int = 3, seed: int = 0) -> TimingResult:
    """Median, spread and percentiles of ``invoke()`` on this host's CPU (XNNPACK)."""
    from ..lazy import litert_interpreter

    if repeats < 1 or warmup < 0 or threads < 1:
        raise ConfigError(f"repeats={repeats}, warmup={warmup}, threads={threads}: need repeats >= 1, "
                          "warmup >= 0, threads >= 1")
    p = Path(tflite_path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such .tflite file")
    Interpreter = litert_interpreter()
    try:
        interp = Interpreter(model_path=str(p), num_threads=threads)
        interp.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        raise MeasurementError(f"{p}: LiteRT cannot load the model ({str(exc).splitlines()[0][:160]})") from exc
    random_feed(interp, seed)
    times = invoke_times(interp, repeats, warmup)
    return TimingResult(
        median_s=float(np.median(times)), mean_s=float(times.mean()), std_s=float(times.std()),
        p10_s=float(np.percentile(times, 10)), p90_s=float(np.percentile(times, 90)),
        repeats=repeats, warmup=warmup, threads=threads,
    )
