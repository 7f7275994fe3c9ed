"""Temperature/power traces from CSV: column selection with globs, validation, gap segmentation.

A trace has a time column (s), temperature columns (°C, the sensors to model) and input
columns (power W, frequencies, utilisations). The time step is the median sample interval;
the trace is split into segments wherever the interval exceeds ``gap_factor`` × that step, so
no model ever predicts across a gap. A segment sampled irregularly (intervals deviating by
more than 1 % from the step) is resampled onto a uniform grid by linear interpolation.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputFileError

#: relative jitter of the sample interval above which a segment is resampled
JITTER_TOLERANCE = 0.01


@dataclass(frozen=True)
class Segment:
    """A gap-free, uniformly sampled stretch: times [K], temps [K, S], inputs [K, M]."""

    times_s: np.ndarray
    temps_c: np.ndarray
    inputs: np.ndarray

    def __len__(self) -> int:
        return len(self.times_s)


@dataclass(frozen=True)
class Trace:
    """A validated trace cut into gap-free segments at a common step ``dt_s``."""

    path: str
    time_name: str
    temp_names: tuple[str, ...]
    input_names: tuple[str, ...]
    dt_s: float
    segments: tuple[Segment, ...]
    resampled: bool

    @property
    def n_rows(self) -> int:
        return sum(len(s) for s in self.segments)

    def window(self, t_from: float | None = None, t_to: float | None = None) -> Trace:
        """The part with ``t_from <= t < t_to`` (segments cut, empty ones dropped)."""
        segs = []
        for s in self.segments:
            keep = np.ones(len(s), dtype=bool)
            if t_from is not None:
                keep &= s.times_s >= t_from
            if t_to is not None:
                keep &= s.times_s < t_to
            if keep.sum() >= 2:
                segs.append(Segment(s.times_s[keep], s.temps_c[keep], s.inputs[keep]))
        if not segs:
            raise ConfigError(f"{self.path}: no data between {t_from} s and {t_to} s "
                              f"(trace spans {self.segments[0].times_s[0]:g}-{self.segments[-1].times_s[-1]:g} s)")
        return Trace(self.path, self.time_name, self.temp_names, self.input_names, self.dt_s,
                     tuple(segs), self.resampled)


def expand_columns(patterns: str | list[str], columns: list[str], path: str, what: str) -> list[str]:
    """Expand comma-separated names/globs against the CSV header, keeping header order per pattern.

    Raises
    ------
    InputFileError
        A pattern that matches nothing (the message lists the columns found).
    """
    items = [p.strip() for p in (patterns.split(",") if isinstance(patterns, str) else patterns)]
    items = [p for p in items if p]
    if not items:
        raise ConfigError(f"no {what} columns given")
    out: list[str] = []
    for pat in items:
        hits = [c for c in columns if fnmatch.fnmatchcase(c, pat)]
        if not hits:
            raise InputFileError(f"{path}: {what} column {pat!r} not found; columns found: {', '.join(columns)}")
        out += [h for h in hits if h not in out]
    return out


def read_trace(path: str | Path, time: str, temps: str | list[str], inputs: str | list[str],
               gap_factor: float = 5.0) -> Trace:
    """Read and validate a CSV trace.

    Parameters
    ----------
    path
        CSV file with a header row.
    time, temps, inputs
        Column names or globs (comma-separated or lists), e.g. ``t_a15_core*_c,t_gpu_c``.
    gap_factor
        An interval longer than this many median steps starts a new segment.

    Raises
    ------
    InputFileError
        Missing file or column (lists the columns found), a non-numeric or NaN value (names the
        row and column), a time column that is not strictly increasing (names the row).
    """
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: trace file not found")
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{p}: not a readable CSV file ({str(exc).splitlines()[0]})") from exc
    columns = [str(c) for c in df.columns]
    tcol = expand_columns(time, columns, str(p), "time")
    if len(tcol) != 1:
        raise ConfigError(f"--time must name one column, {time!r} matches {', '.join(tcol)}")
    temp_cols = expand_columns(temps, columns, str(p), "temperature")
    input_cols = expand_columns(inputs, columns, str(p), "input")
    overlap = sorted(set(temp_cols) & set(input_cols) | set(tcol) & set(temp_cols + input_cols))
    if overlap:
        raise ConfigError(f"column {overlap[0]!r} is selected twice (time/temperature/input lists overlap)")
    data = {}
    for c in tcol + temp_cols + input_cols:
        vals = pd.to_numeric(df[c].str.strip(), errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(vals))
        if len(bad):
            r = int(bad[0])
            raise InputFileError(f"{p}: row {r + 1} (line {r + 2}), column {c!r}: value {df[c].iloc[r]!r} "
                                 f"is not a finite number")
        data[c] = vals
    t = data[tcol[0]]
    if len(t) < 2:
        raise InputFileError(f"{p}: needs at least 2 data rows, found {len(t)}")
    d = np.diff(t)
    bad = np.flatnonzero(d <= 0)
    if len(bad):
        r = int(bad[0]) + 1
        raise InputFileError(f"{p}: time column {tcol[0]!r} is not strictly increasing at row {r + 1} "
                             f"(line {r + 2}): {t[r - 1]:g} then {t[r]:g}")
    dt = float(np.median(d))
    T = np.column_stack([data[c] for c in temp_cols])
    U = np.column_stack([data[c] for c in input_cols])
    cuts = np.flatnonzero(d > gap_factor * dt) + 1
    bounds = np.concatenate([[0], cuts, [len(t)]])
    segments, resampled = [], False
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if b - a < 2:
            continue
        ts, Ts, Us = t[a:b], T[a:b], U[a:b]
        if np.max(np.abs(np.diff(ts) - dt)) > JITTER_TOLERANCE * dt:
            grid = ts[0] + dt * np.arange(int(np.floor((ts[-1] - ts[0]) / dt + 1e-9)) + 1)
            Ts = np.column_stack([np.interp(grid, ts, Ts[:, j]) for j in range(Ts.shape[1])])
            Us = np.column_stack([np.interp(grid, ts, Us[:, j]) for j in range(Us.shape[1])])
            ts, resampled = grid, True
        segments.append(Segment(ts, Ts, Us))
    if not segments:
        raise InputFileError(f"{p}: no stretch of 2 or more samples without a gap")
    return Trace(str(p), tcol[0], tuple(temp_cols), tuple(input_cols), dt, tuple(segments), resampled)
