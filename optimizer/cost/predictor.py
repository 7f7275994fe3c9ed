"""Per-kernel-family latency predictors fitted on a probe table (nn-Meter, Zhang et al., MobiSys 2021).

nn-Meter trains one random forest per kernel type on the configurations of measured probes
(height/width, input and output channels, kernel size, stride, plus FLOPs and parameters). The
predictors here do the same, with two changes measured on this project's probe tables
(BENCHMARKS.md, "Kernel predictors"):

* the forest predicts ``log(t / t_ref)``, the log of the time over a reference that grows with the
  work, ``t_ref = MACs / 10 GMAC/s + bytes moved / 20 GB/s + 1 us``, not the time itself: a tree
  cannot extrapolate, and a kernel larger than every probe (a 640x640 detector's first layers)
  then keeps the time per unit of work of the largest probes instead of their time;
* features are on log scales (:data:`FEATURES`), so relative differences count alike for small
  and large kernels, and ``kind`` (which operator of the family) is a feature; so is the channel
  counts' alignment (:func:`channel_alignment`), which decides a vectorised kernel's path; in the
  families of unlike kernels (element-wise, layout) a well-probed kind has a forest of its own
  per broadcast mode (:data:`PER_KIND_FAMILIES`);
* where a runtime lays out a per-channel operand innermost (onnxruntime's INT8 kernels, NHWC),
  it reads the operand in ``h x w`` runs of ``c`` values, each a loop of its own: ``t_ref`` then
  counts :data:`RUN_S` per run (:func:`broadcast_runs`), so that the forest does not have to learn
  a time per element that grows 30-fold as the channels shrink from 1,000 to 3.

Forests are fitted when a device is loaded, from the table alone, deterministically from
``seed`` (no pickled models), and cached in memory by the table's hash; only families a graph
uses are fitted (:meth:`KernelPredictors.predictor`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph.kernel_config import BCAST_CHANNEL, OP_KINDS, KernelConfig
from ..graph.layergraph import dtype_bytes
from .fusion import runtime_family
from .probe_table import ProbeTable

#: features of a kernel (log2 of counts, raw small integers)
FEATURES: tuple[str, ...] = ("px_in", "px_out", "c_in", "c_out", "k", "stride", "rows", "batch", "n_in", "bcast",
                             "macs", "in_bytes", "out_bytes", "w_bytes", "kind", "c_align", "row_align")
#: channel alignment: the largest power of two up to this dividing both channel counts
MAX_ALIGN = 32
#: a cache line: the input-pixel alignment (:func:`row_alignment`) counts up to this many bytes
LINE_BYTES = 64
REF_MACS_PER_S = 1e10
REF_BYTES_PER_S = 2e10
REF_FLOOR_S = 1e-6
#: reference seconds per run of a per-channel operand broadcast innermost (onnxruntime INT8, one
#: thread: 80 x 80 x 8 times a per-channel scale 0.30 ms, 5.9 ns per element; x 77, 1.0 ns)
RUN_S = 30e-9
#: forest settings: enough trees for stable predictions on a few hundred probes, fitted in ~50 ms
FOREST: dict[str, Any] = {"n_estimators": 60, "max_features": 0.6, "min_samples_leaf": 1}
MIN_PROBES = 4  # fewer probes than this and a family is not fitted (priced analytically)
#: families that gather unlike kernels (a softmax's exponentials and row sums beside a ReLU's clamp;
#: a gather beside a transpose): in them a kind with at least :data:`MIN_KIND_PROBES` probes in one
#: broadcast mode (``bcast``) gets a forest of its own for that mode. The family's forest split on
#: the channel alignment before the kind and priced onnxruntime's INT8 softmax over 1024 rows of 128
#: at 130 us, where probes of that size take 430 us (held-out median error of the element-wise probes
#: 13.7 -> 11.1 %, layout 24.9 -> 17.2 %, onnxruntime INT8, one thread; LiteRT INT8 element-wise
#: 14.8 -> 8.3 %; pooling and matrix products, whose kinds share their kernels, got no better). A mode with fewer probes stays with the family: a forest of
#: 13 per-channel subtractions, nine of them image normalisations, priced ppocr_v4_det's per-channel
#: divisions x4 their time.
PER_KIND_FAMILIES = frozenset({"eltwise", "layout"})
MIN_KIND_PROBES = 24

_KIND_CODE = {k: i for i, k in enumerate(OP_KINDS)}
#: kinds whose window a graph does not record (pools): their ``k`` is not a feature
_WINDOWLESS = frozenset({"max_pool", "avg_pool"})


def features(configs: Sequence[KernelConfig], dtype: str) -> np.ndarray:
    """[N, len(FEATURES)] feature matrix of ``configs`` at ``dtype``."""
    nb = dtype_bytes(dtype)
    rows = []
    for c in configs:
        rows.append((
            math.log2(c.h_in * c.w_in), math.log2(c.h_out * c.w_out), math.log2(c.c_in), math.log2(c.c_out),
            0 if c.kind in _WINDOWLESS else c.k, c.stride, math.log2(c.rows), math.log2(c.h_in) if c.kind == "bmm" else 0.0, c.n_in, c.bcast,
            math.log2(c.macs + 1), math.log2(c.in_elems * nb + 1), math.log2(c.out_elems * nb + 1),
            math.log2(c.weight_elems * nb + 1), _KIND_CODE[c.kind], channel_alignment(c), row_alignment(c, nb),
        ))
    return np.asarray(rows, dtype=np.float64).reshape(len(configs), len(FEATURES))


def channel_alignment(c: KernelConfig) -> int:
    """log2 of the largest power of two, up to :data:`MAX_ALIGN`, dividing both channel counts.

    Kernels vectorised over channels take another path for a count that does not fill their
    vector lanes: onnxruntime's INT8 depthwise convolution runs 56 x 56 x 144 in 0.42 ms and
    56 x 56 x 136 in 1.10 ms (0.9 against 2.6 ns per output, any count not a multiple of 16)."""
    return _power_of_two_exponent(math.gcd(c.c_in, c.c_out), MAX_ALIGN)


def row_alignment(c: KernelConfig, nb: int) -> int:
    """log2 of the largest power of two, up to :data:`LINE_BYTES`, dividing an input pixel's bytes
    (``c_in x nb``).

    XNNPACK's INT8 convolutions read each input pixel's channels as one run: a run of whole cache
    lines is their fast path. On this project's host (LiteRT, one thread) a 56 x 56 x C -> 256 3 x 3
    convolution runs at 500 GMAC/s for C = 192, 256, 320 and at 260-330 GMAC/s for C = 224, 240,
    248, 264, 272, 288; a 1 x 1 at 410-440 against 290-310; at two threads 1,410-1,450 against
    1,080-1,120. The output channels, FP32 and onnxruntime's INT8 kernels showed no such step."""
    return _power_of_two_exponent(c.c_in * nb, LINE_BYTES)


def _power_of_two_exponent(v: int, cap: int) -> int:
    """log2 of the largest power of two, up to ``cap`` (a power of two), dividing ``v`` (0 for 0)."""
    return min((v & -v).bit_length() - 1, cap.bit_length() - 1) if v > 0 else 0


def reference_s(configs: Sequence[KernelConfig], dtype: str, runs: bool = False) -> np.ndarray:
    """[N] the work-proportional reference time ``t_ref`` of each configuration (module doc); with
    ``runs``, a per-channel operand's runs count too (:func:`broadcast_runs`)."""
    nb = dtype_bytes(dtype)
    return np.array([c.macs / REF_MACS_PER_S + (c.in_elems + c.out_elems + c.weight_elems) * nb / REF_BYTES_PER_S
                     + REF_FLOOR_S + (c.h_in * c.w_in * RUN_S if runs and c.bcast == BCAST_CHANNEL else 0.0)
                     for c in configs])


def broadcast_runs(runtime: str, dtype: str) -> bool:
    """Whether a table's runtime broadcasts a per-channel operand innermost, in runs (module doc):
    onnxruntime's INT8 kernels (NHWC). Its FP32 kernels broadcast along ``h x w`` (NCHW), where the
    term made held-out errors worse (17.7 -> 22 %); LiteRT's were not measured with it."""
    return runtime_family(runtime) == "onnxruntime" and dtype == "int8"


@dataclass
class FamilyPredictor:
    """A fitted forest of one kernel family: ``predict`` gives seconds."""

    family: str
    dtype: str
    model: Any
    n_probes: int
    kinds: frozenset[str]
    runs: bool = False  # :func:`broadcast_runs`
    #: (kind, bcast) -> its own forest (:data:`PER_KIND_FAMILIES`); the others use ``model``
    by_kind: dict[tuple[str, int], Any] = field(default_factory=dict)

    def predict(self, configs: Sequence[KernelConfig]) -> np.ndarray:
        if not configs:
            return np.zeros(0)
        x = features(configs, self.dtype)
        log_ratio = self.model.predict(x)
        groups = [(c.kind, c.bcast) for c in configs]
        for group, model in self.by_kind.items():
            own = np.array([g == group for g in groups])
            if own.any():
                log_ratio[own] = model.predict(x[own])
        return reference_s(configs, self.dtype, self.runs) * np.exp(log_ratio)


def fit_family(configs: Sequence[KernelConfig], latency_s: np.ndarray, dtype: str, family: str,
               seed: int = 0, trees: int | None = None, runs: bool = False) -> FamilyPredictor:
    """Fit one family's forest on probes ``configs`` with measured ``latency_s`` (``trees``
    overrides the forest's size, e.g. for quick held-out estimates; ``runs``: :func:`broadcast_runs`)."""
    from sklearn.ensemble import RandomForestRegressor

    y = np.log(np.maximum(latency_s, 1e-9) / reference_s(configs, dtype, runs))
    x = features(configs, dtype)
    settings = {**FOREST, **({"n_estimators": trees} if trees else {})}
    model = RandomForestRegressor(random_state=seed, n_jobs=1, **settings).fit(x, y)
    groups = [(c.kind, c.bcast) for c in configs]
    by_kind = {}
    if family in PER_KIND_FAMILIES:
        for group in sorted(set(groups)):
            own = np.array([g == group for g in groups])
            if MIN_KIND_PROBES <= own.sum() < len(configs):
                by_kind[group] = RandomForestRegressor(random_state=seed, n_jobs=1, **settings).fit(x[own], y[own])
    return FamilyPredictor(family, dtype, model, len(configs), frozenset(c.kind for c in configs), runs, by_kind)


def held_out_errors(configs: Sequence[KernelConfig], latency_s: np.ndarray, dtype: str, *, folds: int = 4,
                    seed: int = 0, trees: int = 24, runs: bool = False) -> np.ndarray:
    """[N] relative error ``predicted / measured - 1`` of every probe predicted by forests fitted
    on the other folds (per family; a family with too few probes gets 0)."""
    from sklearn.model_selection import KFold

    err = np.zeros(len(configs))
    fams = np.array([c.family for c in configs])
    y = np.asarray(latency_s, dtype=np.float64)
    for fam in np.unique(fams):
        idx = np.flatnonzero(fams == fam)
        if len(idx) < max(folds, MIN_PROBES):
            continue
        for train, test in KFold(folds, shuffle=True, random_state=seed).split(idx):
            tr, te = idx[train], idx[test]
            pred = fit_family([configs[i] for i in tr], y[tr], dtype, fam, seed, trees, runs).predict(
                [configs[i] for i in te])
            err[te] = pred / np.maximum(y[te], 1e-12) - 1.0
    return err


@dataclass
class KernelPredictors:
    """The predictors of one probe table: fitted per family on first use."""

    table: ProbeTable
    seed: int = 0
    _fitted: dict[str, FamilyPredictor | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def dtype(self) -> str:
        return self.table.dtype

    def families(self) -> dict[str, int]:
        return self.table.families()

    def predictor(self, family: str) -> FamilyPredictor | None:
        """The fitted forest of ``family``, None when the table has fewer than :data:`MIN_PROBES`."""
        with self._lock:
            if family not in self._fitted:
                configs = self.table.configs()
                idx = [i for i, c in enumerate(configs) if c.family == family]
                if len(idx) < MIN_PROBES:
                    self._fitted[family] = None
                else:
                    y = self.table.latency_s[idx]
                    self._fitted[family] = fit_family([configs[i] for i in idx], y, self.dtype, family, self.seed,
                                                      runs=broadcast_runs(self.table.runtime, self.dtype))
            return self._fitted[family]


_CACHE: dict[tuple[str, int], KernelPredictors] = {}
_CACHE_LOCK = threading.Lock()


def predictors_for(table: ProbeTable, seed: int = 0) -> KernelPredictors:
    """The (lazily fitted) predictors of ``table``, shared by every load of the same table."""
    key = (table.sha256, seed)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is None:
            hit = _CACHE[key] = KernelPredictors(table, seed)
        return hit
