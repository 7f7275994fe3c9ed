"""Temperature/power traces from CSV: column selection with globs, validation, gap segmentation.

A trace has a time column (s), temperature columns (°C, the sensors to model) and input
columns (power W, frequencies, utilisations), as loggers write them: several recordings may be
concatenated and the sample interval jitters. The time step is the median of the positive
sample intervals; the trace is split into segments wherever the clock was reset (a new
recording) and wherever the interval exceeds ``gap_factor`` × the step (the logger paused), so
no model ever predicts across a break; both are counted in :attr:`Trace.breaks`.

**Reset or out of order.** A row whose time is not later than the previous row's is a *reset*
when its time is at most one step after the first time of the current recording (the clock
restarted where recordings start, e.g. at 0 s); the row opens a new recording.
Any other step back or standstill is out of order (shuffled, merged or duplicated rows) and
:func:`read_trace` refuses the file naming the row: a model fitted or scored on it would
predict across the jumps. A segment sampled irregularly (intervals deviating by more than 1 % from
the step) is resampled onto a uniform grid by linear interpolation. CSV files may be
gzip-compressed (``.csv.gz``).

Sign conventions: inputs are used as logged, with no sign flip. Android's battery current and
power are negative while discharging (``BatteryManager.BATTERY_PROPERTY_CURRENT_NOW``); a
linear model absorbs the sign in its gain, but the ``rc`` model's input gains are
non-negative (power heats), so give it a discharge power that is positive when it heats (e.g.
a column ``-p_batt_w`` computed by the logger, or ``p_batt_w`` from a logger that reports the
magnitude). Utilisations may be fractions or percent, clocks in any unit: the fits scale
regressors internally.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputFileError

#: suffixes of thermal trace files (pandas reads the gzip-compressed ones directly)
TRACE_SUFFIXES = (".csv", ".csv.gz")

#: relative jitter of the sample interval above which a segment is resampled
JITTER_TOLERANCE = 0.01
#: the most data rows and columns a trace may have (a day at 50 ms; far more sensors than a SoC
#: has): a larger or decompression-bomb file is refused before it is held in memory
MAX_TRACE_ROWS = 2_000_000
MAX_TRACE_COLUMNS = 1_000


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
    breaks: dict = field(default_factory=dict)

    def describe(self) -> str:
        """One line: rows, segments, and why the trace was cut or resampled."""
        b = self.breaks
        why = [f"{b[k]} {label}" for k, label in (("resets", "time reset(s) (new recordings)"),
                                                   ("gaps", "gap(s)"), ("dropped_rows", "row(s) in "
                                                   "segments shorter than 2 samples dropped")) if b.get(k)]
        text = (f"{self.n_rows} rows in {len(self.segments)} segment(s) at step {self.dt_s:g} s"
                + (f" ({', '.join(why)})" if why else ""))
        if self.resampled:
            text += f"; jittered segments resampled onto the {self.dt_s:g} s grid by linear interpolation"
        return text

    def resample(self, dt: float, hold_inputs: bool = False) -> Trace:
        """The trace on a uniform grid of step ``dt`` (linear interpolation of temperatures and
        inputs inside each segment; segments shorter than 2 new samples are dropped).

        With ``hold_inputs`` the input of each new step is instead the mean, over that step, of
        the inputs held constant over each logged step (zero-order hold), as the fits decimate."""
        if dt == self.dt_s and not self.resampled and not hold_inputs:
            return self
        segs = [s2 for s2 in (_resample_segment(s, dt, hold_inputs) for s in self.segments) if len(s2) >= 2]
        if not segs:
            raise ConfigError(f"{self.path}: no segment spans two steps of {dt:g} s")
        return replace(self, dt_s=float(dt), segments=tuple(segs), resampled=True)

    @property
    def n_rows(self) -> int:
        return sum(len(s) for s in self.segments)

    def window(self, t_from: float | None = None, t_to: float | None = None) -> Trace:
        """The portion with ``t_from <= t < t_to`` (segments cut, empty ones dropped)."""
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
        return replace(self, segments=tuple(segs))


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
        CSV file with a header row (``.csv`` or ``.csv.gz``), or the name of one in
        ``thermal/traces/`` of the search spaces (``odroid_xu3_rise``).
    time, temps, inputs
        Column names or globs (comma-separated or lists), e.g. ``t_a15_core*_c,t_gpu_c``.
    gap_factor
        An interval longer than this many median steps starts a new segment.

    Raises
    ------
    InputFileError
        Missing file or column (lists the columns found), a non-numeric or NaN value (names the
        row and column), a column with no numeric value at all, a time column that never
        increases or leaves no stretch of 2 samples, or one out of order (a step back that is not
        a clock reset; names the row).
    """
    import pandas as pd

    from ..shipped import resolve

    p = Path(path)
    if not p.is_file():  # a name: a trace shipped in (or overlaid on) search_spaces/thermal/traces
        p = resolve(path, "thermal/traces", "thermal trace", TRACE_SUFFIXES)
    try:
        header = pd.read_csv(p, dtype=str, keep_default_na=False, nrows=0)
        if len(header.columns) > MAX_TRACE_COLUMNS:
            raise InputFileError(f"{p}: {len(header.columns):,} columns, more than the {MAX_TRACE_COLUMNS:,} a "
                                 "thermal trace may have; keep the time, temperature and input columns")
        df = pd.read_csv(p, dtype=str, keep_default_na=False, nrows=MAX_TRACE_ROWS + 1)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, EOFError) as exc:
        raise InputFileError(f"{p}: not a readable CSV file ({str(exc).splitlines()[0]})") from exc
    if len(df) > MAX_TRACE_ROWS:
        raise InputFileError(f"{p}: more than {MAX_TRACE_ROWS:,} data rows, the most a thermal trace may have; "
                             "resample it (e.g. to 100 ms) or split it into files")
    columns = [str(c) for c in df.columns]
    tcol = expand_columns(time, columns, str(p), "time")
    if len(tcol) != 1:
        raise ConfigError(f"--time must name one column, {time!r} matches {', '.join(tcol)}")
    temp_cols = expand_columns(temps, columns, str(p), "temperature")
    input_cols = expand_columns(inputs, columns, str(p), "input")
    overlap = sorted(set(temp_cols) & set(input_cols) | set(tcol) & set(temp_cols + input_cols))
    if overlap:
        raise ConfigError(f"column {overlap[0]!r} is selected twice (time/temperature/input lists overlap)")
    data = {c: _numeric_column(df, c, p) for c in tcol + temp_cols + input_cols}
    t = data[tcol[0]]
    if len(t) < 2:
        raise InputFileError(f"{p}: needs at least 2 data rows, found {len(t)}")
    T = np.column_stack([data[c] for c in temp_cols])
    U = np.column_stack([data[c] for c in input_cols])
    dt, segments, breaks = _split_segments(t, T, U, gap_factor, p, tcol[0])
    resampled = False
    for i, sg in enumerate(segments):
        if np.max(np.abs(np.diff(sg.times_s) - dt)) > JITTER_TOLERANCE * dt:
            segments[i], resampled = _resample_segment(sg, dt), True
    return Trace(str(p), tcol[0], tuple(temp_cols), tuple(input_cols), dt, tuple(segments), resampled, breaks)


def _numeric_column(df, c: str, p: Path) -> np.ndarray:
    """Column ``c`` as floats; a blank/NaN/text cell raises naming row, line and column."""
    import pandas as pd

    vals = pd.to_numeric(df[c].str.strip(), errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(vals)
    if len(vals) and not ok.any():
        raise InputFileError(f"{p}: column {c!r} has no numeric value in {len(vals)} rows (e.g. "
                             f"{df[c].iloc[0]!r}); the sensor logged nothing: drop it from the column list")
    if not ok.all():
        r = int(np.flatnonzero(~ok)[0])
        raise InputFileError(f"{p}: row {r + 1} (line {r + 2}), column {c!r}: value {df[c].iloc[r]!r} "
                             f"is not a finite number; fix or delete that row")
    return vals


def _split_segments(t, T, U, gap_factor: float, p: Path, tname: str):
    """``(step, segments, breaks)``: cut at resets (see the module docstring: a step back to at
    most one step after the current recording's first time) and where time jumps ahead
    by more than ``gap_factor`` steps; drop pieces of fewer than 2 rows. Any other step back or
    standstill raises :class:`InputFileError` naming the row."""
    if not gap_factor > 1:
        raise ConfigError(f"--gap-factor must be > 1 (a multiple of the sample step), got {gap_factor:g}")
    d = np.diff(t)
    pos = d[d > 0]
    if not len(pos):
        raise InputFileError(f"{p}: time column {tname!r} never increases; is it the time (s)?")
    dt = float(np.median(pos))
    resets = _resets(t, np.flatnonzero(d <= 0) + 1, dt, p, tname)
    gaps = np.flatnonzero(d > gap_factor * dt) + 1
    bounds = np.concatenate([[0], np.union1d(resets, gaps), [len(t)]])
    segments, dropped = [], 0
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if b - a < 2:
            dropped += b - a
            continue
        segments.append(Segment(t[a:b], T[a:b], U[a:b]))
    if not segments:
        raise InputFileError(f"{p}: no stretch of 2 or more samples without a time reset or gap "
                             f"(> {gap_factor:g} x the {dt:g} s step); raise --gap-factor")
    return dt, segments, {"resets": int(len(resets)), "gaps": int(len(gaps)), "dropped_rows": int(dropped)}


def _resets(t: np.ndarray, back: np.ndarray, reach_s: float, p: Path, tname: str) -> np.ndarray:
    """The rows of ``back`` (time not later than the row before) that are clock resets: at most
    ``reach_s`` after the first time of the current recording. Raise on the first that is not."""
    start = t[0]
    for i in back:
        if t[i] > start + reach_s:
            how = f"stands still at {t[i]:g} s" if t[i] == t[i - 1] else f"goes back from {t[i - 1]:g} to {t[i]:g} s"
            raise InputFileError(
                f"{p}: row {i + 1} (line {i + 2}): time column {tname!r} {how}: not a clock reset (a new "
                f"recording restarts at or before {start + reach_s:g} s, one step after this recording's start); "
                f"rows out of order or duplicated: sort the file by time or remove the duplicate rows")
        start = t[i]
    return back


def _resample_segment(sg: Segment, dt: float, hold_inputs: bool = False) -> Segment:
    """``sg`` on the grid ``t0 + k dt`` inside its span, by linear interpolation of every column
    (inputs: the mean of their zero-order hold over each new step when ``hold_inputs``)."""
    grid = sg.times_s[0] + dt * np.arange(int(np.floor((sg.times_s[-1] - sg.times_s[0]) / dt + 1e-9)) + 1)

    def interp(X, at=grid):
        return np.column_stack([np.interp(at, sg.times_s, X[:, j]) for j in range(X.shape[1])])
    if not hold_inputs:
        return Segment(grid, interp(sg.temps_c), interp(sg.inputs))
    # the integral of the held inputs is piecewise linear in t: interpolating it is exact
    integral = np.vstack([np.zeros(sg.inputs.shape[1]), np.cumsum(sg.inputs[:-1] * np.diff(sg.times_s)[:, None], 0)])
    u = np.diff(interp(integral, np.append(grid, grid[-1] + dt)), axis=0) / dt
    u[-1] = sg.inputs[-1]          # the last sample's input acts beyond the segment: held
    return Segment(grid, interp(sg.temps_c), u)
