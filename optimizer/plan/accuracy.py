"""Accuracy of a deployed split configuration on a labelled set: head dtype, wire dtype, tail dtype.

A split at boundary ``l`` runs the head (layers ``0..l-1``) on the phone and the tail on the
server; the tensors crossing the boundary (:func:`optimizer.plan.parts.part_io`) travel in the
wire dtype. For each configuration the network is divided with the exporter's own machinery
(:class:`~optimizer.plan.keras_submodels.KerasCutter`, :func:`~optimizer.plan.tflite_convert.convert_part`) and run:

* head ``int8``: the head part converted with full-integer post-training quantization (Jacob et
  al., CVPR 2018; TFLite converter), calibrated on ``calib`` inputs, run with the LiteRT
  interpreter; its int8 outputs are exactly what an ``int8`` wire carries. A ``fp16``/``fp32``
  wire carries them dequantized (``x = S (q - Z)``), fp16 rounded to half precision;
* head ``fp32``: the Keras head; an ``int8`` wire quantizes each crossing tensor per tensor with
  the affine parameters of its calibration range (TFLite's asymmetric int8 scheme), ``fp16``
  rounds to half precision;
* tail ``fp32``: the Keras tail on the received tensors; ``int8``: the tail converted
  full-integer, calibrated on the float head outputs of ``calib``.

Top-1 accuracy is against the labels; the FP32 reference is the whole Keras model. Wire bytes
are :meth:`LayerGraph.cut_bytes` in the wire dtype (plus 8 bytes of scale and zero point per
tensor for ``int8``).
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError

HEAD_DTYPES = ("int8", "fp32")
WIRE_DTYPES = ("int8", "fp16", "fp32")
TAIL_DTYPES = ("fp32", "int8")
QPARAM_BYTES = 8  # float32 scale + int32 zero point per int8 tensor


@dataclass(frozen=True)
class PartitionAccuracy:
    """Accuracy of one (split, head, wire, tail) configuration."""

    split: int
    head_dtype: str
    wire_dtype: str
    tail_dtype: str
    accuracy: float
    reference_accuracy: float
    wire_bytes: float
    wire_bytes_fp32: float
    samples: int

    @property
    def loss_points(self) -> float:
        """Accuracy lost against the FP32 model, in percentage points."""
        return 100.0 * (self.reference_accuracy - self.accuracy)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "loss_points": self.loss_points,
                "wire_ratio": self.wire_bytes / self.wire_bytes_fp32 if self.wire_bytes_fp32 else 0.0}


def _affine(calib: np.ndarray) -> tuple[float, int]:
    """TFLite's asymmetric int8 parameters of a range that includes 0."""
    lo, hi = min(float(calib.min()), 0.0), max(float(calib.max()), 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    return scale, int(np.clip(np.round(-128 - lo / scale), -128, 127))


def _wire(arrays: list[np.ndarray], wire: str, calib: list[np.ndarray] | None) -> list[np.ndarray]:
    """What arrives at the tail: float arrays sent in ``wire`` (``calib`` sets int8 ranges)."""
    if wire == "fp32":
        return arrays
    if wire == "fp16":
        return [a.astype(np.float16).astype(np.float32) for a in arrays]
    out = []
    for a, c in zip(arrays, calib or arrays, strict=True):
        scale, zero = _affine(c)
        q = np.clip(np.round(a / scale) + zero, -128, 127)
        out.append(((q - zero) * scale).astype(np.float32))
    return out


def predict_classes(model: Any, x: np.ndarray, batch: int = 64) -> np.ndarray:
    """Top-1 classes of a single-input Keras model on ``x`` (batched, inference mode)."""
    return np.concatenate([np.asarray(model(x[i:i + batch], training=False)).argmax(axis=1)
                           for i in range(0, len(x), batch)])


def _fresh(model: Any) -> Any:
    """A copy of ``model`` with the same weights: cutting re-applies layers (adding nodes), and the
    caller's model must stay importable."""
    from ..lazy import keras as _keras

    clone = _keras().models.clone_model(model)
    clone.set_weights(model.get_weights())
    return clone


def _tflite_outputs(path: Path, arrays: list[np.ndarray]) -> list[np.ndarray]:
    from ..quantize.evaluate import TfliteRunner

    res = TfliteRunner(path.read_bytes()).predict({f"in{k}": a for k, a in enumerate(arrays)})
    return [res[k] for k in sorted(res, key=lambda s: int(s.rsplit("_", 1)[-1]))]


class _Split:
    """One boundary of a Keras model: head/tail sub-models and their converted INT8 parts."""

    def __init__(self, cutter: Any, op_graph: Any, op_split: int, calib: np.ndarray, workdir: Path) -> None:
        from .calibration_data import predict_float, representative_dataset
        from .parts import part_io

        n = len(op_graph)
        ins, crossing = part_io(op_graph, 0, op_split)
        _, outs = part_io(op_graph, op_split, n)
        self.head = cutter.submodel(op_graph, 0, op_split, ins, crossing, "head")
        self.tail = cutter.submodel(op_graph, op_split, n, crossing, outs, "tail")
        self.calib_in = [calib]
        self.calib_crossing = predict_float(self.head, self.calib_in)
        self.rep = representative_dataset
        self.dir = workdir
        self.cache: dict[str, Path] = {}

    def int8(self, which: str) -> Path:
        from .tflite_convert import convert_part

        if which not in self.cache:
            model, data = (self.head, self.calib_in) if which == "head" else (self.tail, self.calib_crossing)
            self.cache[which] = Path(convert_part(model, self.dir / f"{which}.int8.tflite", "int8", self.rep(data)))
        return self.cache[which]

    def received(self, x: np.ndarray, head: str, wire: str) -> list[np.ndarray]:
        from .calibration_data import predict_float

        if head == "int8":  # int8 on the wire is the head's own output; other wires carry it dequantized
            sent = _tflite_outputs(self.int8("head"), [x])
            return _wire(sent, wire, None) if wire == "fp16" else sent
        return _wire(predict_float(self.head, [x]), wire, self.calib_crossing)

    def logits(self, received: list[np.ndarray], tail: str) -> np.ndarray:
        from .calibration_data import predict_float

        out = _tflite_outputs(self.int8("tail"), received) if tail == "int8" else predict_float(self.tail, received)
        return np.asarray(out[0])


def partition_accuracy(model: Any, x: np.ndarray, y: np.ndarray, splits: list[int], *, calib: np.ndarray,
                       configs: list[tuple[str, str, str]] | None = None,
                       granularity: str = "op") -> list[PartitionAccuracy]:
    """Accuracy of every (split, head, wire, tail) configuration of a Keras classifier.

    Parameters
    ----------
    model
        A single-input, single-output Keras classifier (logits or probabilities).
    x, y
        Labelled inputs [N, ...] and integer labels [N].
    splits
        Boundaries in the ``granularity`` view, each inside ``1..L-1``.
    calib
        Calibration inputs for the INT8 parts and int8 wire ranges (keep them apart from ``x``).
    configs
        ``(head, wire, tail)`` dtypes; default every combination of HEAD/WIRE/TAIL_DTYPES.
    """
    from ..graph.keras_import import graph_from_keras
    from .keras_submodels import KerasCutter
    from .parts import op_boundaries

    model = _fresh(model)
    op_graph = graph_from_keras(model, getattr(model, "name", "model"))
    view = op_graph if granularity == "op" else op_graph.with_granularity(granularity)
    configs = configs or [(h, w, t) for h in HEAD_DTYPES for w in WIRE_DTYPES for t in TAIL_DTYPES]
    bad = [c for c in configs if c[0] not in HEAD_DTYPES or c[1] not in WIRE_DTYPES or c[2] not in TAIL_DTYPES]
    if bad or len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ConfigError(f"accuracy per partition: configuration {bad[0] if bad else ''} is not valid or the "
                          f"model is not single-input/single-output; expected (head in {HEAD_DTYPES}, wire in "
                          f"{WIRE_DTYPES}, tail in {TAIL_DTYPES})")
    ref = float(np.mean(predict_classes(model, x) == y))
    cutter, op_boundary = KerasCutter(model), op_boundaries(view)
    out = []
    with tempfile.TemporaryDirectory(prefix="dnnplan-acc-") as tmp:
        for s in splits:
            if not 0 < s < len(view):
                raise ConfigError(f"split {s}: expected a boundary in 1..{len(view) - 1}")
            split = _Split(cutter, op_graph, op_boundary[s], calib, Path(tmp) / f"s{s}")
            split.dir.mkdir()
            fp32_bytes = float(view.cut_bytes(s, "fp32"))
            for head, wire, tail in configs:
                pred = split.logits(split.received(x, head, wire), tail).argmax(axis=1)
                nbytes = float(view.cut_bytes(s, wire)) + (QPARAM_BYTES * len(split.calib_crossing) if wire == "int8" else 0)
                out.append(PartitionAccuracy(s, head, wire, tail, float(np.mean(pred == y)), ref, nbytes,
                                             fp32_bytes, len(y)))
    return out


def _whole(model: Any, x: np.ndarray, calib: np.ndarray, dtype: str, workdir: Path) -> np.ndarray:
    """Predicted classes of the whole model at ``dtype`` (int8: full-integer PTQ on ``calib``)."""
    from .calibration_data import representative_dataset
    from .tflite_convert import convert_part

    if dtype != "int8":
        return predict_classes(model, x)
    from ..graph.keras_import import graph_from_keras
    from .keras_submodels import KerasCutter
    from .parts import part_io

    model = _fresh(model)
    g = graph_from_keras(model, getattr(model, "name", "model"))
    ins, outs = part_io(g, 0, len(g))
    sub = KerasCutter(model).submodel(g, 0, len(g), ins, outs, "whole")
    path = convert_part(sub, workdir / "whole.int8.tflite", "int8", representative_dataset([calib]))
    return np.asarray(_tflite_outputs(path, [x])[0].argmax(axis=1))


def accuracy_table(model: Any, x: np.ndarray, y: np.ndarray, *, calib: np.ndarray, n_layers: int,
                   head_dtype: str, wire_dtypes: tuple[str, ...], granularity: str = "op") -> np.ndarray:
    """Top-1 accuracy of every (wire dtype, boundary ``0..L``) with the given head dtype and an FP32
    tail, shape [W, L+1] (the split problem's layout). Boundary 0 sends the input in the wire
    dtype to the FP32 model; boundary L runs the whole model at the head dtype on the phone.

    Raises
    ------
    ConfigError
        The model's ``granularity`` view does not have ``n_layers`` layers (another model).
    """
    from ..graph.keras_import import graph_from_keras

    head = "int8" if head_dtype == "int8" else "fp32"
    view = graph_from_keras(model, getattr(model, "name", "model")).with_granularity(granularity)
    if len(view) != n_layers:
        raise ConfigError(f"accuracy data: the model has {len(view)} {granularity} layers here and {n_layers} "
                          "in the split search; expected the same model")
    table = np.zeros((len(wire_dtypes), n_layers + 1))
    inner = list(range(1, n_layers))
    res = partition_accuracy(model, x, y, inner, calib=calib, granularity=granularity,
                             configs=[(head, w, "fp32") for w in wire_dtypes]) if inner else []
    for r in res:
        table[wire_dtypes.index(r.wire_dtype), r.split] = r.accuracy
    with tempfile.TemporaryDirectory(prefix="dnnplan-acc-") as tmp:
        table[:, n_layers] = float(np.mean(_whole(model, x, calib, head, Path(tmp)) == y))
    for j, w in enumerate(wire_dtypes):
        sent = _wire([x], w, [calib])
        table[j, 0] = float(np.mean(predict_classes(model, sent[0]) == y))
    return table


def labelled_members(path: str | Path) -> dict[str, Any]:
    """The arrays of a labelled ``.npz`` (:class:`optimizer.npyfile.NpyMember`, from the headers
    only), checked: ``x`` [N, ...] and ``y`` [N] present.

    Raises
    ------
    InputFileError
        Missing or unreadable file, missing arrays, or mismatched lengths.
    """
    from ..errors import InputFileError
    from ..npyfile import npz_members

    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such labelled data file; expected an .npz with arrays x and y")
    members = npz_members(p)
    x, y = members.get("x"), members.get("y")
    if x is None or y is None or not x.shape or not y.shape or x.shape[0] != y.shape[0]:
        raise InputFileError(f"{p}: arrays {sorted(members)}; expected x [N, ...] and y [N] of the same length")
    return members


def load_labelled(path: str | Path, *, calib_samples: int = 128) -> dict[str, np.ndarray]:
    """A labelled set from an ``.npz`` with ``x`` [N, ...] and integer ``y`` [N] (optional ``calib``;
    else the first ``calib_samples`` rows calibrate and the rest are evaluated).

    Raises
    ------
    InputFileError
        Missing or unreadable file, missing arrays, or mismatched lengths.
    """
    from ..errors import InputFileError
    from ..fileio import read_npz

    p = Path(path)
    labelled_members(p)
    arrays = read_npz(p, "no such labelled data file; expected an .npz with arrays x and y")
    x, y = arrays["x"].astype(np.float32), arrays["y"].astype(np.int64).reshape(-1)
    if "calib" in arrays:
        return {"x": x, "y": y, "calib": arrays["calib"].astype(np.float32)}
    k = min(calib_samples, len(x) // 4)
    if k < 1:
        raise InputFileError(f"{p}: {len(x)} rows are too few to split off calibration data; add a calib array")
    return {"x": x[k:], "y": y[k:], "calib": x[:k]}
