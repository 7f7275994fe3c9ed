"""Learned cost backend: a scikit-learn Pipeline predicting per-layer latency from layer features.

Features (one row per layer and processor): op family, source operator type (e.g. ``ReLU`` is
fused by runtimes, ``PReLU`` is not) and processor (one-hot); log MACs, log bytes read /
written / weights, output spatial size and channels, input channels, the arithmetic intensity
and a nominal roofline prior ``log(2 us * dispatched + max(MACs / 40 GMAC/s, bytes / 20 GB/s))``. The target is ``log(latency)`` (TransformedTargetRegressor), fitted by
gradient-boosted trees (Friedman 2001; as in nn-Meter's per-kernel predictors, Zhang et al.
MobiSys'21). Fit it on measured tables of some networks and predict networks never measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..graph.layergraph import LayerGraph
from .features import layer_arrays
from .measured import MeasuredTable, check_matches

NUMERIC = ("log_macs", "log_in_bytes", "log_out_bytes", "log_weight_bytes", "log_out_hw",
           "log_out_c", "log_in_c", "log_intensity", "dispatched", "log_roofline")
CATEGORICAL = ("op", "op_type", "processor")
MIN_LATENCY_S = 1e-7  # floor before the log (fused layers measure ~0)


def layer_features(graph: LayerGraph, dtype: str, processor: str) -> Any:
    """DataFrame of the learned model's features, one row per layer of ``graph``."""
    import pandas as pd

    a = layer_arrays(graph, dtype)
    out_hw = np.array([math.prod(la.output_shapes[0][:-1]) if la.output_shapes and len(la.output_shapes[0]) > 1
                       else 1 for la in graph.layers], dtype=np.float64)
    out_c = np.array([la.output_shapes[0][-1] if la.output_shapes and la.output_shapes[0] else 1
                      for la in graph.layers], dtype=np.float64)
    in_c = np.array([la.input_shapes[0][-1] if la.input_shapes and la.input_shapes[0] else 1
                     for la in graph.layers], dtype=np.float64)
    roofline = 2e-6 * a.dispatched + np.maximum(a.macs / 40e9, a.moved_bytes / 20e9)
    return pd.DataFrame({
        "op": [la.op for la in graph.layers],
        "op_type": [la.op_type for la in graph.layers],
        "processor": processor,
        "log_macs": np.log1p(a.macs),
        "log_in_bytes": np.log1p(a.in_bytes),
        "log_out_bytes": np.log1p(a.out_bytes),
        "log_weight_bytes": np.log1p(a.weight_bytes),
        "log_out_hw": np.log1p(out_hw),
        "log_out_c": np.log1p(out_c),
        "log_in_c": np.log1p(in_c),
        "log_intensity": np.log1p(a.macs / np.maximum(a.moved_bytes, 1.0)),
        "dispatched": a.dispatched.astype(np.float64),
        "log_roofline": np.log(np.maximum(roofline, 1e-9)),
    })


def make_learned_pipeline(random_state: int = 0) -> Any:
    """An unfitted Pipeline: one-hot(op, op_type, processor) + numeric features -> log-latency GBRT."""
    from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    features = ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), list(CATEGORICAL)),
        ("num", "passthrough", list(NUMERIC)),
    ])
    regressor = TransformedTargetRegressor(
        regressor=HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, max_leaf_nodes=15,
                                                min_samples_leaf=5, l2_regularization=1.0,
                                                random_state=random_state),
        func=np.log, inverse_func=np.exp)
    return Pipeline([("features", features), ("regressor", regressor)])


def training_frame(pairs: Iterable[tuple[LayerGraph, MeasuredTable]], dtype: str) -> tuple[Any, np.ndarray]:
    """(X, y) from measured tables, each checked against its graph."""
    import pandas as pd

    xs, ys = [], []
    for graph, table in pairs:
        for proc in table.processors:
            y = check_matches(table, graph, proc)
            xs.append(layer_features(graph, dtype, proc))
            ys.append(np.maximum(y, MIN_LATENCY_S))
    if not xs:
        raise ConfigError("the learned cost model needs at least one measured table to train on")
    return pd.concat(xs, ignore_index=True), np.concatenate(ys)


def fit_learned_model(pairs: Sequence[tuple[LayerGraph, MeasuredTable]], dtype: str = "fp32",
                      random_state: int = 0) -> Any:
    """Fit :func:`make_learned_pipeline` on ``(graph, measured table)`` pairs.

    The fitted Pipeline carries ``processors_`` (processor names seen in training) and
    ``dtype_`` (the dtype its features were computed at).
    """
    X, y = training_frame(pairs, dtype)
    pipe = make_learned_pipeline(random_state).fit(X, y)
    pipe.processors_ = sorted(set(X["processor"]))
    pipe.dtype_ = dtype
    return pipe


def predict_latency(model: Any, graph: LayerGraph, dtype: str, processor: str) -> np.ndarray:
    """Predicted per-layer latencies [L] of ``graph`` on ``processor``."""
    trained = list(getattr(model, "processors_", []))
    if trained and processor not in trained:
        raise ConfigError(f"the learned cost model was trained on processors {', '.join(trained)}, "
                          f"not {processor!r}; train it on measured tables of that processor")
    return np.asarray(model.predict(layer_features(graph, dtype, processor)), dtype=np.float64)
