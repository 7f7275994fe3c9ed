"""TFLite post-training calibration on several processes, exact and deterministic.

TFLite's calibrator (``tensorflow.lite.python.optimize.calibrator.Calibrator``) runs one float
inference per representative sample on one thread, holding the GIL, and records the absolute
min/max of every tensor (``calibration_logger.h``); with Park & Ha's 1000 samples it is most
of the conversion time (METHODS.md §1). Inside :func:`parallel_calibration` the converter
gets a calibrator that

* stacks consecutive samples into batches of :data:`CALIB_BATCH` (the calibrator resizes the
  model's inputs to the first batch's shape; a short last batch is padded with copies of one
  of its samples, which leaves every min/max unchanged),
* calibrates contiguous runs of batches with TensorFlow's own calibration wrapper: the first
  run in this process, the others in ``workers - 1`` spawned helper processes that start on
  entry (importing TensorFlow takes them ~7 s, overlapping the graph conversion) and
  memory-map the stacked samples from ``.npy`` files (unpickling ~300 MB of images delayed
  them by ~8 s), and
* merges the calibrated models (:func:`.flatbuffer.merge_calibration`: min of mins, max of
  maxes — the statistics one process would record).

Every batch is calibrated by the same code whatever the number of workers, so one worker and
four give byte-identical models. (LiteRT ships its own build of the wrapper, which loads
without TensorFlow but is ~20 % slower and differs from TensorFlow's in the last float bits,
so it is not used.) A model that cannot run batched (a batch-1 graph) is calibrated sample by
sample instead. Everything after calibration (the MLIR quantizer) is the converter's own code.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..workers import stop_pool
from .flatbuffer import merge_calibration

CALIB_BATCH = 32  # samples per calibrator invocation (mobilenet_v2: 78 ms/sample at 1, 59 at 32)
MIN_SAMPLES_PER_WORKER = 256  # fewer per helper: its start-up (TensorFlow import) outweighs the gain


def default_workers(samples: int) -> int:
    """Calibrating processes worth using for ``samples`` calibration samples on this host."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cpus, samples // MIN_SAMPLES_PER_WORKER))


def stack_samples(samples: list[dict[str, np.ndarray]], batch: int) -> dict[str, np.ndarray]:
    """Per-sample dicts (batch axis 1) → one array per input, padded to a multiple of ``batch``.

    Padding repeats the first sample of the last batch, which leaves every min/max unchanged.
    """
    short = len(samples) % batch
    padded = samples + [samples[len(samples) - short]] * (batch - short) if short else samples
    return {k: np.concatenate([s[k] for s in padded]) for k in samples[0]}


def batches(arrays: dict[str, Any], size: int, first: int, last: int) -> list[dict[str, np.ndarray]]:
    """Batches ``first``..``last`` (``size`` samples each) of stacked per-input ``arrays``, contiguous."""
    return [{n: np.ascontiguousarray(a[i * size:(i + 1) * size]) for n, a in arrays.items()}
            for i in range(first, last)]


def _tf_calibrator_class() -> Any:
    from .. import lazy
    from ..workers import ignore_sigint

    ignore_sigint()  # also the helper processes' initializer: Ctrl-C is the parent's to handle

    lazy.tensorflow()
    from tensorflow.lite.python.optimize import calibrator

    # the original class, also while parallel_calibration has patched in its own
    return getattr(calibrator.Calibrator, "tflite_calibrator", calibrator.Calibrator)


def calibrate_from_files(model_content: bytes, files: list[str], names: list[str], batch: int,
                         first: int, last: int) -> bytes:
    """Calibrate on batches ``first``..``last`` of the stacked samples (helper-process entry).

    ``files`` are ``.npy`` arrays holding the inputs ``names``, memory-mapped.
    """
    arrays = {n: np.load(f, mmap_mode="r") for n, f in zip(names, files, strict=True)}
    mine = batches(arrays, batch, first, last)
    return bytes(_tf_calibrator_class()(model_content).calibrate(lambda: iter(mine)))


@contextlib.contextmanager
def parallel_calibration(workers: int, batch: int = CALIB_BATCH) -> Iterator[dict[str, Any]]:
    """Make TFLite conversions inside the block calibrate on ``workers`` helper processes.

    The helpers start on entry, so that their start-up overlaps the converter's graph
    conversion. Yields a dict that records, once calibration ran, ``samples``, ``batch``
    (1 if batching failed) and ``workers`` used.
    """
    from .. import lazy

    lazy.tensorflow()
    from tensorflow.lite.python.optimize import calibrator as module

    original = module.Calibrator
    info: dict[str, Any] = {}
    pool = None
    if workers > 1:
        pool = ProcessPoolExecutor(workers - 1, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_tf_calibrator_class)
        for _ in range(workers - 1):  # start the helpers now
            pool.submit(_noop)

    def run(model: bytes, samples: list[dict[str, np.ndarray]], size: int) -> bytes:
        stacked = stack_samples(samples, size)
        names = list(stacked)
        n_batches = len(stacked[names[0]]) // size
        parts = min(workers, n_batches)
        bounds = np.linspace(0, n_batches, parts + 1).round().astype(int).tolist()
        with tempfile.TemporaryDirectory(prefix="dnnplan-calib-") as tmp:
            helpers = []
            if parts > 1:
                files = [str(Path(tmp) / f"input{i}.npy") for i in range(len(names))]
                for f, n in zip(files, names, strict=True):
                    np.save(f, stacked[n][bounds[1] * size:])
                helpers = [pool.submit(calibrate_from_files, model, files, names, size,  # type: ignore[union-attr]
                                       a - bounds[1], b - bounds[1])
                           for a, b in zip(bounds[1:-1], bounds[2:], strict=True)]
            own = batches(stacked, size, 0, bounds[1])
            results = [bytes(original(model).calibrate(lambda: iter(own)))]
            results += [job.result() for job in helpers]
        info.update(samples=len(samples), batch=size, workers=parts)
        return merge_calibration(results)

    class ParallelCalibrator(original):  # type: ignore[misc, valid-type]
        tflite_calibrator = original

        def calibrate(self, dataset_gen: Any) -> bytes:
            samples = list(dataset_gen())
            if not samples or not all(isinstance(s, dict) for s in samples):  # not our representative data
                return original.calibrate(self, lambda: iter(samples))
            try:
                return run(self._model_content, samples, batch)
            except Exception:  # noqa: BLE001 — e.g. a batch-1 graph: calibrate sample by sample
                if batch == 1:
                    raise
                return run(self._model_content, samples, 1)

    module.Calibrator = ParallelCalibrator
    try:
        yield info
    except BaseException:  # interrupted or failed: do not wait for the helpers' chunks
        stop_pool(pool)
        raise
    finally:
        module.Calibrator = original
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _noop() -> None:
    return None
