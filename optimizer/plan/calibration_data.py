"""INT8 calibration data of an export: network inputs, and the float activations at every boundary.

Part ``k`` is calibrated with the float activations that parts ``0..k-1`` produce on the calibration
inputs, i.e. with the statistics the single-file model sees at that point of the network
(full-integer post-training quantization, Jacob et al., "Quantization and Training of Neural
Networks for Efficient Integer-Arithmetic-Only Inference", CVPR 2018). The inputs are synthetic
(seeded, uniform in [-1, 1]), an ``.npz`` file or arrays; the activations are kept on disk
(:class:`CalibrationStore`) and computed by Keras calls sized within the memory budget
(:func:`frames_per_call`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError, ModelFormatError
from ..fileio import read_npz, sha256_file
from ..graph.layergraph import LayerGraph
from .manifest import Calibration

DEFAULT_CALIB_SAMPLES = 64

#: share of the memory budget (``--memory-budget``, default 4 GB as in quantize) export's Keras
#: calls may fill: the rest is headroom for the converter and the allocator (with the whole
#: budget for calls, a 640x640 detector's export peaked above the budget; see BENCHMARKS.md)
EXPORT_CALL_SHARE = 0.75


def frames_per_call(graph: LayerGraph, first: int = 0, end: int | None = None,
                    budget: float | None = None) -> int:
    """Frames one Keras call over op layers ``first..end-1`` of ``graph`` may take, since a call
    holds every layer output of its frames (:func:`optimizer.quantize.api.frames_within`).

    The call gets :data:`EXPORT_CALL_SHARE` of ``budget`` bytes (default: quantize's 4 GB) less
    what this process already holds beyond the TensorFlow runtime (its resident bytes after
    freed memory is handed back, :func:`~optimizer.workers.release_free_memory`):
    the Keras model, the converter's state and the blocks earlier calls left, which at 640x640
    reach 1-1.5 GB."""
    from ..quantize.api import DEFAULT_MEMORY_BUDGET, frames_within, parse_memory_budget
    from ..quantize.parallel_calibration import MAIN_PROCESS_BYTES, rss_bytes
    from ..workers import release_free_memory

    total = parse_memory_budget(DEFAULT_MEMORY_BUDGET) if budget is None else budget
    release_free_memory()
    held = max(0.0, rss_bytes() - MAIN_PROCESS_BYTES)
    return frames_within(sum(la.output_bytes("fp32") for la in graph.layers[first:end]),
                         EXPORT_CALL_SHARE * total - held)


def calibration_inputs(graph: LayerGraph, calib: Any, samples: int,
                       seed: int) -> tuple[dict[str, np.ndarray], Calibration]:
    """Calibration batches for the graph inputs: ``synthetic`` (uniform in [-1, 1], i.e. the
    normalised range of the zoo preprocessing), an ``.npz`` file, or a dict of arrays."""
    if calib is None or calib == "synthetic":
        chunks = list(synthetic_chunks(graph, samples, seed))
        data = {t: np.concatenate([c for name, c in chunks if name == t]) for t in graph.inputs}
        return data, Calibration(source="synthetic", samples=samples, seed=seed)
    _check_samples(samples)
    if isinstance(calib, dict):
        arrays, info = calib, Calibration(source="arrays", samples=samples, seed=seed)
    else:
        path = Path(calib)
        arrays = read_npz(path, "no such calibration file; give an .npz file or 'synthetic'", max_rows=samples)
        info = Calibration(source=path.name, samples=samples, seed=seed, file_sha256=sha256_file(path))
    data = {}
    keys = list(arrays)
    for k, t in enumerate(graph.inputs):
        key = t if t in arrays else (t.split(":")[0] if t.split(":")[0] in arrays else
                                     (keys[k] if k < len(keys) else None))
        if key is None:
            raise InputFileError(f"{calib}: no array for network input {t!r}; arrays: {keys}")
        a = np.asarray(arrays[key], dtype=np.float32)
        want = graph.tensors[t].shape
        if a.ndim == len(want):
            a = a[None]
        if tuple(a.shape[1:]) != tuple(want):
            raise InputFileError(f"{calib}: array {key!r} has shape {list(a.shape)}; expected "
                                 f"[N, {', '.join(map(str, want))}] for input {t!r}")
        data[t] = a[:samples]
    info.samples = min(len(v) for v in data.values())
    return data, info


#: synthetic calibration samples drawn at a time (float64 draws: 8 bytes per element)
SYNTHETIC_CHUNK = 16


def _check_samples(samples: int) -> None:
    if samples < 1:
        raise ConfigError(f"--samples {samples}: expected at least 1 calibration sample")


def synthetic_chunks(graph: LayerGraph, samples: int, seed: int) -> Iterator[tuple[str, np.ndarray]]:
    """Seeded synthetic calibration inputs (uniform in [-1, 1], the normalised range of the zoo
    preprocessing) as ``(input, float32 rows)`` chunks of :data:`SYNTHETIC_CHUNK` samples, input
    after input: the same values as one draw of all samples, without its float64 copy."""
    _check_samples(samples)
    rng = np.random.default_rng(seed)
    for t in graph.inputs:
        for start in range(0, samples, SYNTHETIC_CHUNK):
            n = min(SYNTHETIC_CHUNK, samples - start)
            yield t, rng.uniform(-1.0, 1.0, (n, *graph.tensors[t].shape)).astype(np.float32)


def representative_dataset(arrays: list[np.ndarray]) -> Callable[[], Iterator[dict[str, np.ndarray]]]:
    """A TFLite representative dataset yielding one sample per step, keyed ``in0, in1, ...``."""
    def gen() -> Iterator[dict[str, np.ndarray]]:
        for i in range(len(arrays[0])):
            yield {f"in{k}": a[i:i + 1] for k, a in enumerate(arrays)}

    return gen


def predict_float(submodel: Any, arrays: list[np.ndarray], batch: int = 16) -> list[np.ndarray]:
    """Float outputs of a Keras sub-model (the calibration data of the next parts)."""
    outs = list(float_batches(submodel, (lambda a, b: [x[a:b] for x in arrays]), len(arrays[0]), batch))
    return [np.concatenate([o[j] for o in outs]) for j in range(len(outs[0]))]


def float_batches(submodel: Any, rows: Callable[[int, int], list[np.ndarray]], n: int,
                  batch: int) -> Iterator[list[np.ndarray]]:
    """Float outputs of a Keras sub-model on samples ``0..n-1``, ``batch`` at a time
    (``rows(start, stop)``: its inputs for those samples). The calls run as one ``tf.function``:
    an eager functional call holds every layer output of its frames until it returns (1 GB per
    640x640 frame of ssd_resnet50_fpn's backbone), the graph executor frees each once consumed."""
    from ..lazy import tensorflow

    call = tensorflow().function(lambda xs: submodel(xs, training=False))
    for i in range(0, n, batch):
        res = call(rows(i, min(i + batch, n)))
        res = res if isinstance(res, (list, tuple)) else [res]
        yield [np.asarray(r) for r in res]


class CalibrationStore:
    """The float calibration tensors of an export (network inputs and the activations at every
    boundary), spilled to one file per tensor in ``folder`` and read back a few samples at a time.

    Part ``k`` is calibrated on the activations parts ``0..k-1`` produce for every calibration
    sample; held in memory, these reach ``samples`` x the bytes crossing the boundaries (gigabytes
    for a 640x640 detector), so an export holds one Keras call's frames instead. Files are
    read with plain reads, not memory maps, so what was read is not left resident.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, tuple[Path, np.dtype[Any], tuple[int, ...]]] = {}
        self.counts: dict[str, int] = {}

    def put(self, name: str, rows: np.ndarray) -> None:
        """Append ``rows`` (samples along axis 0) to tensor ``name``."""
        if name not in self.files:
            self.files[name] = (self.folder / f"t{len(self.files)}.bin", rows.dtype, tuple(rows.shape[1:]))
            self.counts[name] = 0
        path, dtype, shape = self.files[name]
        if rows.dtype != dtype or tuple(rows.shape[1:]) != shape:
            raise ModelFormatError(f"tensor {name!r}: calibration rows of shape {list(rows.shape)} {rows.dtype} "
                                   f"after rows of [N, {', '.join(map(str, shape))}] {dtype}")
        with open(path, "ab") as fh:
            fh.write(np.ascontiguousarray(rows).tobytes())
        self.counts[name] += len(rows)

    def rows(self, name: str, start: int, stop: int) -> np.ndarray:
        """Samples ``start..stop-1`` of tensor ``name``."""
        path, dtype, shape = self.files[name]
        per = int(np.prod(shape, dtype=np.int64)) if shape else 1
        stop = min(stop, self.counts[name])
        data = np.fromfile(path, dtype=dtype, count=per * (stop - start), offset=start * per * dtype.itemsize)
        return data.reshape((stop - start, *shape))

    def count(self, name: str) -> int:
        """Samples stored for tensor ``name``."""
        return self.counts[name]

    def representative(self, names: list[str]) -> Callable[[], Iterator[dict[str, np.ndarray]]]:
        """A TFLite representative dataset over tensors ``names`` (one sample per step, keyed
        ``in0, in1, ...`` like :func:`representative_dataset`)."""
        def gen() -> Iterator[dict[str, np.ndarray]]:
            for i in range(self.count(names[0])):
                yield {f"in{k}": self.rows(t, i, i + 1) for k, t in enumerate(names)}

        return gen

    def predict(self, submodel: Any, ins: list[str], outs: list[str], batch: int) -> None:
        """Store the float outputs ``outs`` of a Keras sub-model reading stored tensors ``ins``."""
        n = self.count(ins[0])
        for res in float_batches(submodel, lambda a, b: [self.rows(t, a, b) for t in ins], n, batch):
            for name, r in zip(outs, res, strict=True):
                self.put(name, r)



def fill_calibration(store: CalibrationStore, op_graph: LayerGraph, calib: Any, samples: int,
                     seed: int) -> Calibration:
    """Put the network inputs' INT8 calibration samples into ``store`` (synthetic ones drawn chunk
    by chunk, so they are never all held) and return their description for the manifest."""
    if calib is None or calib == "synthetic":
        for t, rows in synthetic_chunks(op_graph, samples, seed):
            store.put(t, rows)
        return Calibration(source="synthetic", samples=samples, seed=seed)
    calib_data, calib_info = calibration_inputs(op_graph, calib, samples, seed)
    for t in op_graph.inputs:
        store.put(t, calib_data[t])
    return calib_info
