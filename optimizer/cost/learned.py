"""Learned cost backend: a physically shaped scikit-learn Pipeline fitted on measured tables.

Each layer is first mapped to the kernel a runtime would run for it (nn-Meter's idea: predict
per *kernel*, after the runtime's fusion rules; Zhang et al., MobiSys'21): batch-norms fold into
the preceding convolution at export, and ReLU/ReLU6/LeakyReLU/sigmoid/tanh/hard-sigmoid fuse into
it (onnxruntime's and TFLite's conv-activation fusion), while PReLU, swish (``Activation``),
layer-norm and the like run as memory-bound kernels of their own. :class:`KernelTerms` then
describes each layer by non-negative cost terms, in seconds at nominal rates:

* ``roof_<conv|dwconv|dense>``: the roofline time ``max(MACs / 39 GMAC/s, bytes / B)``
  (Williams et al., CACM 2009) of a compute layer, bytes = input + output + weights, B the
  single-thread copy bandwidth (15 GB/s on this host);
* ``mem_<kind>``: the same roofline time of an element-wise, pooling, concat, resize, norm or
  data-movement kernel (an activation never seen in training is priced by its bytes, like
  every other unfused activation, not by a tree leaf);
* ``disp_<kind>``: 1 us per dispatched kernel (launch and framework overhead),

interacted with the processor (one coefficient set per processor). The regressor is
non-negative least squares (``LinearRegression(positive=True)``), so its coefficients read as
"measured over nominal" time per term, and whole-network latency (the sum over layers)
extrapolates linearly to networks larger or smaller than the training ones, which tree models
cannot. Rows are weighted by ``1 / T_net**2`` so every training network counts the same. The
ridge point is set by the processor's nominal peak and copy bandwidth, measured on the hardware,
not fitted to networks.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from ..errors import ConfigError, InputFileError
from ..graph.layergraph import LayerGraph, dtype_bytes
from .backends import BackendCosts, BackendInputs
from .measured import MeasuredTable, check_matches

#: default nominal rates: one AVX2+FMA core at 2.445 GHz (16 MAC/cycle) and its single-thread
#: copy bandwidth (14.7 GB/s measured with numpy on this host, 2026-11-23); only the ratio matters
NOMINAL_MACS_PER_S = 39e9
NOMINAL_BYTES_PER_S = 15e9
DISPATCH_S = 1e-6
#: activations runtimes fuse into the producing conv/dense kernel (lower-case, any framework's spelling)
FUSABLE_ACTIVATIONS = frozenset({"relu", "relu6", "leakyrelu", "leaky_relu", "sigmoid", "logistic", "tanh",
                                 "hardsigmoid", "hard_sigmoid", "clip"})
#: norms folded into the preceding convolution at export
FOLDED_NORMS = frozenset({"batchnormalization", "batch_norm", "fusedbatchnorm", "fusedbatchnormv3"})
COMPUTE = ("conv", "dwconv", "dense")
MEMORY = ("act_fused", "act", "add", "concat", "pool", "resize", "norm_folded", "norm", "move")
DISPATCH = ("conv", "dwconv", "dense", "act_fused", "act", "add", "concat", "pool", "resize", "norm")
TERMS: tuple[str, ...] = (tuple(f"roof_{k}" for k in COMPUTE) + tuple(f"mem_{k}" for k in MEMORY)
                          + tuple(f"disp_{k}" for k in DISPATCH))


def _kernel_kind(op: str, op_type: str) -> str:
    t = op_type.lower()
    if op in COMPUTE or op in ("add", "concat", "pool", "resize"):
        return op
    if op == "act":
        return "act_fused" if t in FUSABLE_ACTIVATIONS else "act"
    if op == "norm":
        return "norm_folded" if t in FOLDED_NORMS else "norm"
    return "move"  # reshape / other: copies at most


def layer_features(graph: LayerGraph, dtype: str, processor: str) -> Any:
    """DataFrame of the per-layer inputs of the model: kernel ``kind``, ``macs``, ``moved_bytes``, ``processor``.

    ``moved_bytes`` = input + output activations + weights at ``dtype``.
    """
    import pandas as pd

    nb = dtype_bytes(dtype)
    return pd.DataFrame({
        "kind": [_kernel_kind(la.op, la.op_type) for la in graph.layers],
        "macs": graph.macs_array.astype(np.float64),
        "moved_bytes": np.array([(sum(math.prod(s) if s else 1 for s in la.input_shapes) + la.output_elements
                                  + la.params) * nb for la in graph.layers], dtype=np.float64),
        "processor": processor,
    })


class KernelTerms(TransformerMixin, BaseEstimator):
    """Cost terms (:data:`TERMS`, seconds at nominal rates) interacted with the processor.

    One block of terms per processor seen in fit; rows of an unseen processor raise
    :class:`ConfigError`. ``bytes_per_s`` (with ``macs_per_s``) sets the roofline ridge point,
    ``macs_per_s / bytes_per_s`` MACs per byte; the regression absorbs the overall scale.
    """

    def __init__(self, macs_per_s: float = NOMINAL_MACS_PER_S, bytes_per_s: float = NOMINAL_BYTES_PER_S):
        self.macs_per_s = macs_per_s
        self.bytes_per_s = bytes_per_s

    def fit(self, X: Any, y: Any = None) -> KernelTerms:
        self.processors_ = sorted({str(p) for p in X["processor"]})
        return self

    def terms(self, X: Any) -> np.ndarray:
        """[rows, len(TERMS)] cost terms of feature rows ``X``."""
        kind = X["kind"].astype(str).to_numpy()
        compute_s = X["macs"].to_numpy(dtype=np.float64) / self.macs_per_s
        memory_s = X["moved_bytes"].to_numpy(dtype=np.float64) / self.bytes_per_s
        roof = np.maximum(compute_s, memory_s)
        out = np.zeros((len(kind), len(TERMS)))
        for j, term in enumerate(TERMS):
            group, _, k = term.partition("_")
            hit = kind == k
            out[hit, j] = DISPATCH_S if group == "disp" else roof[hit]
        return out

    def transform(self, X: Any) -> np.ndarray:
        procs = X["processor"].astype(str).to_numpy()
        unknown = sorted(set(procs) - set(self.processors_))
        if unknown:
            raise ConfigError(f"the learned cost model was trained on processors {', '.join(self.processors_)}, "
                              f"not {unknown[0]!r}; train it on measured tables of that processor")
        base = self.terms(X)
        return np.hstack([base * (procs == p)[:, None] for p in self.processors_])

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        return np.array([f"{p}:{t}" for p in self.processors_ for t in TERMS], dtype=object)


def make_learned_pipeline(macs_per_s: float = NOMINAL_MACS_PER_S, bytes_per_s: float = NOMINAL_BYTES_PER_S) -> Any:
    """An unfitted Pipeline: :class:`KernelTerms` -> non-negative linear regression (no intercept)."""
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import Pipeline

    return Pipeline([("terms", KernelTerms(macs_per_s, bytes_per_s)),
                     ("regressor", LinearRegression(positive=True, fit_intercept=False))])


def training_frame(pairs: Iterable[tuple[LayerGraph, MeasuredTable]],
                   dtype: str) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, sample_weight, groups) from measured tables, each checked against its graph.

    The weight of a layer is ``1 / T**2`` with ``T`` its network's measured total on that
    processor; ``groups`` numbers the tables (one group per network).
    """
    import pandas as pd

    xs, ys, ws, gs = [], [], [], []
    for k, (graph, table) in enumerate(pairs):
        for proc in table.processors:
            y = check_matches(table, graph, proc)
            total = float(y.sum())
            if not total > 0:
                raise ConfigError(f"{table.path or graph.name}: processor {proc!r} measures 0 s in total; "
                                  "cannot train on it")
            xs.append(layer_features(graph, dtype, proc))
            ys.append(np.maximum(y, 0.0))  # fused layers measure 0
            ws.append(np.full(len(y), 1.0 / total ** 2))
            gs.append(np.full(len(y), k))
    if not xs:
        raise ConfigError("the learned cost model needs at least one measured table to train on")
    return pd.concat(xs, ignore_index=True), np.concatenate(ys), np.concatenate(ws), np.concatenate(gs)


def fit_learned_model(pairs: Sequence[tuple[LayerGraph, MeasuredTable]], dtype: str = "fp32", *,
                      macs_per_s: float = NOMINAL_MACS_PER_S, bytes_per_s: float = NOMINAL_BYTES_PER_S) -> Any:
    """Fit :func:`make_learned_pipeline` on ``(graph, measured table)`` pairs.

    ``macs_per_s`` and ``bytes_per_s`` are the nominal rates of the terms (the processor's peak
    and its measured copy bandwidth, e.g. :func:`optimizer.measure.host.host_peak_macs` and
    :func:`optimizer.measure.host.host_copy_bandwidth`); only their ratio, the roofline ridge
    point, changes predictions. The fitted Pipeline carries ``processors_`` (processor names seen
    in training), ``dtype_`` (the dtype its features were computed at) and ``trained_on_``
    (network names); :func:`coefficients` lists its measured-over-nominal factors.
    """
    if not (macs_per_s > 0 and bytes_per_s > 0):
        raise ConfigError(f"macs_per_s={macs_per_s}, bytes_per_s={bytes_per_s}: nominal rates must be > 0")
    X, y, w, _ = training_frame(pairs, dtype)
    pipe = make_learned_pipeline(macs_per_s, bytes_per_s).fit(X, y, regressor__sample_weight=w)
    pipe.processors_ = list(pipe.named_steps["terms"].processors_)
    pipe.dtype_ = dtype
    pipe.trained_on_ = [g.name for g, _ in pairs]
    return pipe


def coefficients(model: Any) -> dict[str, float]:
    """``{"processor:term": coefficient}`` of a fitted model (time = sum of coefficient x term)."""
    names = model.named_steps["terms"].get_feature_names_out()
    return {str(n): float(c) for n, c in zip(names, model.named_steps["regressor"].coef_, strict=True)}


def predict_latency(model: Any, graph: LayerGraph, dtype: str, processor: str) -> np.ndarray:
    """Predicted per-layer latencies [L] of ``graph`` on ``processor``."""
    trained = list(getattr(model, "processors_", []))
    if trained and processor not in trained:
        raise ConfigError(f"the learned cost model was trained on processors {', '.join(trained)}, "
                          f"not {processor!r}; train it on measured tables of that processor")
    return np.maximum(np.asarray(model.predict(layer_features(graph, dtype, processor)), dtype=np.float64), 0.0)


def learned_backend(inputs: BackendInputs, *, model: Any = None) -> BackendCosts:
    """The ``learned`` cost backend: every processor's layer latencies predicted by a fitted
    Pipeline (:func:`fit_learned_model`, or a file of :func:`save_learned_model`), scaled by ``f_max / f``;
    energy is active power x latency. Support comes from the device's op lists
    (:func:`optimizer.cost.analytic.layer_support`); no analytic latency is computed."""
    from .analytic import layer_support
    from .features import layer_arrays

    if model is None:
        raise ConfigError("the learned backend needs a fitted model (fit_learned_model or --table "
                          "files to train on)")
    pipe = load_learned_model(model)
    latency = np.column_stack([predict_latency(pipe, inputs.graph, inputs.dtype, p.name)
                               for p in inputs.device.processors]) / inputs.clock_ratio[None, :]
    arrays = layer_arrays(inputs.graph, inputs.dtype)
    return BackendCosts(latency_s=latency, energy_j=latency * inputs.power_w[None, :],
                        supported=layer_support(inputs.graph, inputs.device, inputs.dtype, arrays), arrays=arrays,
                        meta={"trained_on": list(getattr(pipe, "processors_", []))})


#: the data format of a saved learned model (:func:`save_learned_model`)
LEARNED_FORMAT, LEARNED_VERSION = "dnnplan-learned-cost-model", 1


def save_learned_model(model: Any, path: str | os.PathLike[str]) -> Path:
    """Write a fitted model (:func:`fit_learned_model`) as JSON data: its nominal rates, dtype,
    training networks and every coefficient by ``processor:term``, with a content hash. Nothing
    in it is code; :func:`load_learned_model` rebuilds the Pipeline from the numbers."""
    from ..fileio import atomic_write_json, sha256_bytes

    terms = model.named_steps["terms"]
    body = {"macs_per_s": float(terms.macs_per_s), "bytes_per_s": float(terms.bytes_per_s),
            "dtype": getattr(model, "dtype_", "fp32"), "trained_on": list(getattr(model, "trained_on_", [])),
            "processors": list(terms.processors_), "terms": list(TERMS), "coefficients": coefficients(model)}
    digest = sha256_bytes(json.dumps(body, sort_keys=True).encode("utf-8"))
    return atomic_write_json(path, {"format": LEARNED_FORMAT, "version": LEARNED_VERSION, "sha256": digest, **body})


def load_learned_model(model: Any) -> Any:
    """A fitted model as given, or rebuilt from a JSON file of :func:`save_learned_model` (data
    only: a pickled or joblib file is refused, never loaded)."""
    if isinstance(model, (str, os.PathLike)):
        return _read_learned_model(Path(model))
    if not hasattr(model, "predict"):
        raise ConfigError(f"learned cost model must have predict(); got {type(model).__name__}")
    return model


def _read_learned_model(path: Path) -> Any:
    from ..errors import SchemaError
    from ..fileio import read_json, sha256_bytes

    if not path.is_file():
        raise InputFileError(f"{path}: no such learned cost model file")
    try:
        doc = read_json(path, "learned cost model")
    except SchemaError:
        doc = None
    if not isinstance(doc, dict) or doc.get("format") != LEARNED_FORMAT or doc.get("version") != LEARNED_VERSION:
        raise InputFileError(f"{path}: not a version-{LEARNED_VERSION} dnnplan learned cost model (JSON written by "
                             "save_learned_model); train it again from measured tables")
    body = {k: v for k, v in doc.items() if k not in ("format", "version", "sha256")}
    if doc.get("sha256") != sha256_bytes(json.dumps(body, sort_keys=True).encode("utf-8")):
        raise InputFileError(f"{path}: the learned cost model is damaged or was altered (its content hash "
                             "differs); train it again")
    try:
        pipe = make_learned_pipeline(float(body["macs_per_s"]), float(body["bytes_per_s"]))
        terms, regressor = pipe.named_steps["terms"], pipe.named_steps["regressor"]
        terms.processors_ = [str(p) for p in body["processors"]]
        names = terms.get_feature_names_out()
        regressor.coef_ = np.array([float(body["coefficients"][str(n)]) for n in names])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputFileError(f"{path}: the learned cost model lacks {exc} (its terms are not this "
                             "version's); train it again") from None
    regressor.intercept_, regressor.n_features_in_ = 0.0, len(names)
    pipe.processors_, pipe.dtype_, pipe.trained_on_ = list(terms.processors_), str(body["dtype"]), list(body["trained_on"])
    return pipe
