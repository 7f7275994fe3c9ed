"""Which stage of ``quantize`` set the process's peak resident memory, and a one-line warning
when that peak exceeded ``--memory-budget`` (the budget plans calibration; TensorFlow's
conversions hold several copies of a model's float weights whatever it says: VGG-16 peaks near
8 GB, docs/DESIGN_NOTES.md)."""

from __future__ import annotations

import math

from .parallel_calibration import peak_rss_bytes


class PeakStages:
    """Which stage last raised this process's peak resident memory (``VmHWM``, read after each
    stage by :meth:`after`); ``stage`` stays None while the peak is one reached before the first."""

    def __init__(self) -> None:
        self.peak = peak_rss_bytes()
        self.stage: str | None = None

    def after(self, stage: str) -> int:
        """Record that ``stage`` just ended; returns the peak so far."""
        now = peak_rss_bytes()
        if now > self.peak:
            self.peak, self.stage = now, stage
        return self.peak

    def over_budget(self, budget_bytes: int) -> list[str]:
        """[the warning of :func:`memory_budget_warning`] when the peak so far exceeds the budget, else []."""
        line = memory_budget_warning(self.peak, budget_bytes, self.stage)
        return [line] if line else []


def memory_budget_warning(peak_bytes: int | None, budget_bytes: int, stage: str | None) -> str | None:
    """One line when the quantizing process's peak resident memory exceeded ``--memory-budget``
    (what peaked, how much, the budget, what to do), else None. The budget plans calibration;
    TensorFlow's conversions hold several copies of a model's float weights whatever it says."""
    if not peak_bytes or peak_bytes <= budget_bytes:
        return None
    where = f" during {stage}" if stage else " before quantizing began"
    return (f"peak memory {peak_bytes / 1e9:.2f} GB{where}, more than --memory-budget {budget_bytes / 1e9:.2f} GB "
            "(the budget sizes calibration; TensorFlow's conversions hold several copies of the model's float "
            f"weights): quantize where {math.ceil(peak_bytes / 1e8) / 10:.1f} GB is free (and give --memory-budget "
            f"{-(-peak_bytes // 10**9)}GB)")
