"""Uplink bandwidth as a distribution: trace files, a seeded synthetic generator, transfer times.

A trace is held the way Mahimahi's link emulator holds it (Netravali et al., "Mahimahi: Accurate
Record-and-Replay for HTTP", USENIX ATC 2015; traces recorded with Saturator, Winstein et al.,
NSDI 2013): a sorted list of *delivery opportunities*, each the moment one 1500-byte packet may
leave the bottleneck queue, over a period after which the trace repeats.

Two file formats are read:

* Mahimahi packet-delivery (``.up``/``.down``/``.trace``/anything not ``.csv``): one integer
  millisecond timestamp per line, non-decreasing; the same timestamp repeated = several packets
  in that millisecond. The period is the last timestamp (Mahimahi's ``mm-link`` rule).
* CSV ``t_s,mbps`` (header optional): the rate ``mbps`` holds from ``t_s`` to the next row's
  ``t_s``; the last row holds for the median step. Opportunities are placed where the
  cumulative delivered bits cross each multiple of 12000 bits (one packet).

:meth:`BandwidthTrace.transfer_s` gives the exact time to push ``B`` bytes through the trace
starting at each of a grid of start times (Mahimahi's drain rule: packet ``n`` of a frame queued
at ``t`` leaves at the ``n``-th opportunity at or after ``t``); the split risk objectives
(:mod:`optimizer.search.split_risk`) and the replay benchmark read it.
:meth:`BandwidthTrace.window_rates_bps` gives windowed uplink rates (for tables and pacing).
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import shipped
from ..errors import ConfigError, InputFileError, SchemaError
from ..fileio import sha256_file

PACKET_BYTES = 1500
PACKET_BITS = PACKET_BYTES * 8
TRACE_SUFFIXES = (".csv", ".up", ".down", ".trace", ".txt")


@dataclass(frozen=True, eq=False)
class BandwidthTrace:
    """Delivery opportunities ``opportunities_s`` (sorted, in ``[0, period_s]``) repeating every
    ``period_s`` seconds. ``source`` names the file or generator and ``sha256`` its content."""

    name: str
    opportunities_s: np.ndarray
    period_s: float
    source: str = ""
    sha256: str = ""

    def __post_init__(self) -> None:
        if len(self.opportunities_s) == 0 or not self.period_s > 0:
            raise ConfigError(f"bandwidth trace {self.name!r} delivers nothing (no opportunity or zero "
                              "duration); expected at least one packet")

    @property
    def mean_bps(self) -> float:
        """Long-run uplink rate: bits deliverable per period / period."""
        return len(self.opportunities_s) * PACKET_BITS / self.period_s

    def window_rates_bps(self, window_s: float = 1.0) -> np.ndarray:
        """Uplink rate in each consecutive ``window_s`` window of one period, bit/s [n_windows]."""
        if not window_s > 0:
            raise ConfigError(f"trace window {window_s:g} s: expected a value > 0")
        n = max(1, int(np.ceil(self.period_s / window_s - 1e-9)))
        idx = np.minimum((self.opportunities_s // window_s).astype(np.int64), n - 1)
        return np.bincount(idx, minlength=n) * PACKET_BITS / window_s

    def start_times(self, step_s: float = 0.1) -> np.ndarray:
        """A grid of upload start times over one period (the samples of the distribution): every
        ``step_s``, or :data:`MAX_START_SAMPLES` evenly spaced ones over a longer period."""
        if not step_s > 0:
            raise ConfigError(f"trace sample step {step_s:g} s: expected a value > 0")
        return np.arange(0.0, self.period_s, max(step_s, self.period_s / MAX_START_SAMPLES))

    def transfer_s(self, nbytes: np.ndarray, starts_s: np.ndarray) -> np.ndarray:
        """Seconds to deliver ``nbytes`` [N] queued at each start time [S], shape [N, S].

        Packet ``n`` (1-based) of a frame queued at ``t`` leaves at the ``n``-th opportunity at
        or after ``t``, the trace repeating every period; 0 bytes take 0 s. Vectorised over the
        distinct sizes.
        """
        nbytes = np.asarray(nbytes, dtype=np.float64)
        starts = np.asarray(starts_s, dtype=np.float64)
        sizes, inverse = np.unique(nbytes, return_inverse=True)
        packets = np.ceil(sizes / PACKET_BYTES).astype(np.int64)
        g = self.first_opportunity(starts)[None, :] + np.maximum(packets, 1)[:, None] - 1  # the last packet's
        out = np.where(packets[:, None] > 0, self.opportunity_s(g) - starts[None, :], 0.0)
        return out[inverse.reshape(-1)]

    def first_opportunity(self, t_s: np.ndarray | float) -> np.ndarray:
        """Global index (counting over repeated periods) of the first opportunity at or after ``t_s``."""
        t = np.asarray(t_s, dtype=np.float64)
        cycles = np.floor_divide(t, self.period_s).astype(np.int64)
        local = np.searchsorted(self.opportunities_s, t - cycles * self.period_s, side="left")
        return cycles * len(self.opportunities_s) + local

    def opportunity_s(self, g: np.ndarray | int) -> np.ndarray:
        """Time of global opportunity ``g`` (the trace repeating every ``period_s``)."""
        g = np.asarray(g, dtype=np.int64)
        m = len(self.opportunities_s)
        return self.opportunities_s[g % m] + (g // m) * self.period_s

    def halves(self) -> tuple[BandwidthTrace, BandwidthTrace]:
        """The first and second half of one period, each a trace of its own (held-out evaluation)."""
        mid = self.period_s / 2
        opp = self.opportunities_s
        a, b = opp[opp < mid], opp[opp >= mid] - mid
        return (BandwidthTrace(f"{self.name}[1/2]", a, mid, self.source, self.sha256),
                BandwidthTrace(f"{self.name}[2/2]", b, self.period_s - mid, self.source, self.sha256))

    def describe(self) -> dict[str, object]:
        """JSON-serialisable provenance and summary (recorded in plans)."""
        rates = self.window_rates_bps(1.0)
        return {"name": self.name, "source": self.source, "sha256": self.sha256,
                "duration_s": round(self.period_s, 6), "mean_mbps": round(self.mean_bps / 1e6, 6),
                "p5_mbps_1s": round(float(np.percentile(rates, 5)) / 1e6, 6),
                "p95_mbps_1s": round(float(np.percentile(rates, 95)) / 1e6, 6),
                "half_mean_mbps": [round(h.mean_bps / 1e6, 6) for h in self.halves()]}


# ---------------------------------------------------------------------------- readers
#: rows of a ``t_s,mbps`` CSV (a day at 0.1 s steps is 864,000)
MAX_CSV_ROWS = 1_000_000
#: delivery opportunities (1500-byte packets) of one trace period: 100 Mbps for 33 minutes,
#: 128 MiB as float64; a Mahimahi file has one line per opportunity
MAX_TRACE_PACKETS = 1 << 24
#: the fastest rate a CSV row may give (100 Gbps)
MAX_RATE_MBPS = 100_000.0
#: the longest trace period (7 days, as ``simulate --duration``): per-second windows are kept
MAX_TRACE_S = 7 * 86_400.0
#: upload start times sampled over one period; a longer trace is sampled more coarsely
MAX_START_SAMPLES = 20_000


def _too_many(where: str, what: str, limit: int) -> SchemaError:
    return SchemaError(f"{where}: more than {limit:,} {what}; a trace may have at most that many "
                       "(bandwidth.py limits): shorten it, or resample it to a coarser step")


def parse_mahimahi(lines: Iterable[str], where: str) -> tuple[np.ndarray, float]:
    """Opportunity times (s) and period (s) of Mahimahi packet-delivery lines (streamed; at most
    :data:`MAX_TRACE_PACKETS` of them, lasting at most :data:`MAX_TRACE_S`)."""
    stamps = array("q")
    last = -1
    for no, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text:
            continue
        if not text.isdigit():
            raise SchemaError(f"{where}:{no}: {text[:40]!r} is not a millisecond timestamp; expected one "
                              "non-negative integer per line (Mahimahi packet-delivery format)")
        ms = int(text)
        if ms < last:
            raise SchemaError(f"{where}:{no}: timestamp {ms} ms is before the previous {last} ms; "
                              "expected non-decreasing timestamps")
        if ms > MAX_TRACE_S * 1e3:
            raise SchemaError(f"{where}:{no}: timestamp {ms} ms is past {MAX_TRACE_S:g} s, the longest trace "
                              "period modelled; shorten the trace")
        if len(stamps) >= MAX_TRACE_PACKETS:
            raise _too_many(where, "delivery opportunities (lines)", MAX_TRACE_PACKETS)
        stamps.append(ms)
        last = ms
    if not stamps or last == 0:
        raise SchemaError(f"{where}: no delivery opportunity after 0 ms; expected a trace lasting > 0 ms")
    return np.frombuffer(stamps, dtype=np.int64) / 1e3, last / 1e3


def _csv_rows(lines: Iterable[str], where: str) -> np.ndarray:
    """``[rows, 2]`` (t_s, mbps) of a CSV trace, streamed; at most :data:`MAX_CSV_ROWS` rows,
    rates at most :data:`MAX_RATE_MBPS`."""
    rows = array("d")
    for no, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        cells = [c.strip() for c in text.split(",")]
        if not rows and cells[:2] == ["t_s", "mbps"]:
            continue
        try:
            t, r = (float(c) for c in cells) if len(cells) == 2 else (math.nan, math.nan)
        except ValueError:
            t = r = math.nan
        if not (math.isfinite(t) and math.isfinite(r) and r >= 0 and t >= 0):
            raise SchemaError(f"{where}:{no}: {text[:40]!r}; expected 't_s,mbps' with t_s >= 0 and mbps >= 0")
        if r > MAX_RATE_MBPS or t > MAX_TRACE_S:
            raise SchemaError(f"{where}:{no}: {text[:40]!r}; expected mbps <= {MAX_RATE_MBPS:g} and t_s <= "
                              f"{MAX_TRACE_S:g} (7 days)")
        if rows and t <= rows[-2]:
            raise SchemaError(f"{where}:{no}: t_s {t:g} is not after the previous {rows[-2]:g}; "
                              "expected increasing times")
        if len(rows) >= 2 * MAX_CSV_ROWS:
            raise _too_many(where, "rows", MAX_CSV_ROWS)
        rows.extend((t, r))
    if not rows:
        raise SchemaError(f"{where}: no 't_s,mbps' rows")
    return np.frombuffer(rows, dtype=np.float64).reshape(-1, 2)


def rates_to_opportunities(t_s: np.ndarray, rate_bps: np.ndarray, end_s: float) -> tuple[np.ndarray, float]:
    """Opportunities of a piecewise-constant rate (``rate_bps[i]`` from ``t_s[i]`` to the next
    time, the last to ``end_s``): where cumulative bits cross each multiple of one packet.

    Raises :class:`~optimizer.errors.SchemaError` before allocating them when there would be
    more than :data:`MAX_TRACE_PACKETS`."""
    edges = np.append(np.asarray(t_s, dtype=np.float64), end_s) - float(t_s[0])
    bits = np.concatenate([[0.0], np.cumsum(np.asarray(rate_bps) * np.diff(edges))])
    if bits[-1] // PACKET_BITS > MAX_TRACE_PACKETS:
        raise SchemaError(f"the trace delivers {bits[-1] / PACKET_BITS:,.0f} packets of {PACKET_BYTES} bytes in "
                          f"{edges[-1]:g} s (mean {bits[-1] / edges[-1] / 1e6:,.1f} Mbps); at most "
                          f"{MAX_TRACE_PACKETS:,} are modelled: shorten the trace or lower its rates")
    n = int(bits[-1] // PACKET_BITS)
    if n == 0:
        return np.zeros(0), float(edges[-1])
    targets = np.arange(1, n + 1) * PACKET_BITS
    # segment j-1..j with bits[j-1] < target <= bits[j] has a positive rate (zero-rate segments skipped)
    j = np.searchsorted(bits, targets, side="left")
    frac = (targets - bits[j - 1]) / (bits[j] - bits[j - 1])
    return edges[j - 1] + frac * (edges[j] - edges[j - 1]), float(edges[-1])


def parse_csv(lines: Iterable[str], where: str) -> tuple[np.ndarray, float]:
    """Opportunity times (s) and period (s) of ``t_s,mbps`` CSV lines."""
    rows = _csv_rows(lines, where)
    step = float(np.median(np.diff(rows[:, 0]))) if len(rows) > 1 else 1.0
    try:
        return rates_to_opportunities(rows[:, 0], rows[:, 1] * 1e6, float(rows[-1, 0]) + step)
    except SchemaError as exc:
        raise SchemaError(f"{where}: {exc}") from None


def read_trace(path: str | os.PathLike[str]) -> BandwidthTrace:
    """Read a trace file (``.csv`` = ``t_s,mbps``; anything else = Mahimahi packet delivery)."""
    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such bandwidth trace file")
    parse = parse_csv if p.suffix.lower() == ".csv" else parse_mahimahi
    try:
        with open(p, encoding="utf-8") as lines:  # streamed, never held whole
            opp, period = parse(lines, str(p))
    except UnicodeDecodeError:
        raise SchemaError(f"{p}: not a text file; expected a Mahimahi trace or a t_s,mbps CSV") from None
    except OSError as exc:
        raise InputFileError(f"{p}: cannot read bandwidth trace ({exc.strerror or exc})") from None
    if len(opp) == 0:
        raise SchemaError(f"{p}: the trace delivers less than one 1500-byte packet; expected a positive rate")
    return BandwidthTrace(p.stem, opp, period, source=_shown(p), sha256=sha256_file(p))


def _shown(path: Path) -> str:
    """``search_spaces/bandwidth/...`` for a shipped (or user-folder) trace, else the path as given."""
    return shipped.shown(path)


def trace_names() -> list[str]:
    """Names of the traces under ``bandwidth/`` (any depth) of the user's and the shipped search spaces."""
    return shipped.names("bandwidth", TRACE_SUFFIXES, recursive=True)


def load_trace(name_or_path: str | os.PathLike[str]) -> BandwidthTrace:
    """A trace by path, or by name under ``bandwidth/`` of the user's and the shipped search spaces."""
    s = str(name_or_path)
    if Path(s).is_file():
        return read_trace(s)
    return read_trace(shipped.resolve(s, "bandwidth", "bandwidth trace", TRACE_SUFFIXES, recursive=True))


# ---------------------------------------------------------------------------- generators
def constant_trace(mbps: float, duration_s: float = 10.0) -> BandwidthTrace:
    """A fixed-rate link as a trace (every sample the same rate)."""
    if not mbps > 0:
        raise ConfigError(f"constant trace rate {mbps:g} Mbps: expected a value > 0")
    opp, period = rates_to_opportunities(np.array([0.0]), np.array([mbps * 1e6]), duration_s)
    return BandwidthTrace(f"constant_{mbps:g}mbps", opp, period, source="constant_trace")


def synthetic_trace(seed: int, *, mean_mbps: float = 8.0, duration_s: float = 60.0, step_s: float = 0.1,
                    sigma: float = 0.5, bad_ratio: float = 0.25, p_good_to_bad: float = 0.02,
                    p_bad_to_good: float = 0.1, fade_prob: float = 0.005, fade_steps: int = 10,
                    fade_depth: float = 0.05) -> BandwidthTrace:
    """A seeded Markov-modulated log-normal uplink with deep fades.

    A two-state (good/bad) Gilbert–Elliott chain (Gilbert 1960; Elliott 1963) sets the median
    rate per ``step_s`` (bad = ``bad_ratio`` × good); each step's rate is log-normal around it
    (shadowing, ``sigma`` in natural-log units); a fade starts with probability ``fade_prob`` per
    step and multiplies the rate by ``fade_depth`` for ``fade_steps`` steps. The result is scaled
    so the mean rate is ``mean_mbps``. Same seed, same trace.
    """
    rng = np.random.default_rng(seed)
    n = max(1, int(round(duration_s / step_s)))
    state = np.zeros(n, dtype=bool)  # True = bad
    u = rng.random(n)
    for i in range(1, n):
        state[i] = u[i] < p_good_to_bad if not state[i - 1] else u[i] >= p_bad_to_good
    rate = np.where(state, bad_ratio, 1.0) * np.exp(rng.normal(0.0, sigma, n))
    fade = np.zeros(n)
    for start in np.flatnonzero(rng.random(n) < fade_prob):
        fade[start:start + fade_steps] = 1.0
    rate = rate * np.where(fade > 0, fade_depth, 1.0)
    rate *= mean_mbps * 1e6 / rate.mean()
    opp, period = rates_to_opportunities(np.arange(n) * step_s, rate, n * step_s)
    return BandwidthTrace(f"synthetic_{seed}", opp, period, source=f"synthetic_trace(seed={seed})")
