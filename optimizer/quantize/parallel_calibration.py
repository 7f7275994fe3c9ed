"""TFLite post-training calibration on several processes, in bounded memory, exact and deterministic.

TFLite's calibrator (``tensorflow.lite.python.optimize.calibrator.Calibrator``) runs one float
inference per representative sample on one thread, holding the GIL, and records the absolute
min/max of every tensor (``calibration_logger.h``); with Park & Ha's 1000 samples calibration
is most of the conversion time (docs/METHODS.md section 1). Inside :func:`parallel_calibration` the converter
gets a calibrator that

* streams the :class:`.calibration.CalibrationSet`: consecutive samples are produced and fed
  in batches of ``batch`` (the calibrator resizes the model's inputs to the first batch's
  shape; a short last batch is padded with copies of its first sample, which leaves every
  min/max unchanged), so no more than one batch per process is held;
* calibrates contiguous runs of batches (:func:`calibrate_run`: ranges recorded with LiteRT's
  XNNPACK kernels by :mod:`.ranges`, which also avoids the wrapper's in-place ``ADD`` misreading;
  TensorFlow's own calibration wrapper where those do not cover the model): the first run in
  this process, the others in ``workers - 1`` spawned helper processes that start on
  entry (importing TensorFlow takes them ~7 s, overlapping the graph conversion) and produce
  their own batches from the set's recipe (seeds or file names); and
* merges the calibrated models (:func:`.flatbuffer.merge_calibration`: min of mins, max of
  maxes — the statistics one process would record).

The batch and the number of processes follow a memory budget (:func:`plan_calibration`): a
process costs its TensorFlow runtime and model copies, and each frame of a batch the input
plus every float activation (:func:`frame_bytes_of`: the LiteRT recorder keeps them all as
outputs; under TensorFlow's wrapper, the arena the
:class:`~optimizer.graph.layergraph.LayerGraph` bounds by its peak live activation bytes). The batch does
not depend on the number of workers, and every batch is calibrated by the same code whatever
that number, so one worker and four give byte-identical models. A model that cannot run batched (a batch-1 graph)
is calibrated sample by sample instead. Everything after calibration (the MLIR quantizer) is
the converter's own code.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..workers import collect_and_release, proc_kb_bytes, release_free_memory, stop_pool
from .calibration import CalibrationSet
from .flatbuffer import merge_calibration

CALIB_BATCH = 32  # most samples per calibrator invocation (mobilenet_v2: 78 ms/sample at 1, 59 at 32)
MIN_SAMPLES_PER_WORKER = 256  # fewer per helper: its start-up (TensorFlow import) outweighs the gain
#: Resident memory of the converting process before calibration: TensorFlow, Keras and the
#: converter (measured: 1.2-1.3 GB converting mobilenet_v2 or ssd_mobilenet_v2_fpnlite to FP32).
MAIN_PROCESS_BYTES = 1.4e9
#: Resident memory of a calibrating helper: TensorFlow imported, no Keras (measured ~0.6 GB).
HELPER_PROCESS_BYTES = 0.7e9
#: Copies of the float model a process holds while calibrating (the flatbuffer, the
#: calibrator's copy with logging tensors, the merged result).
MODEL_COPIES = 3
#: Arena bytes per frame relative to the peak live activation bytes (fragmentation margin).
ARENA_MARGIN = 2.0


@dataclass(frozen=True)
class CalibrationPlan:
    """Batch and processes for calibrating one model within a memory budget."""

    batch: int
    workers: int
    frame_bytes: int  # per frame of a batch: input bytes + ARENA_MARGIN x peak live activations
    process_bytes: int  # per helper process before its batch: runtime + model copies
    main_bytes: int  # the converting process before its batch
    budget_bytes: int

    def estimate(self, workers: int | None = None, batch: int | None = None) -> int:
        """Estimated peak resident bytes of all processes together with ``workers`` processes
        calibrating batches of ``batch`` (default: the plan's)."""
        w = self.workers if workers is None else workers
        b = self.batch if batch is None else batch
        return int(self.main_bytes + (w - 1) * self.process_bytes + w * b * self.frame_bytes)


def plan_calibration(samples: int, budget_bytes: float, frame_bytes: int, model_bytes: int,
                     workers: int | None = None) -> CalibrationPlan:
    """Batch and process count for ``samples`` calibration samples within ``budget_bytes``.

    Processes: as many as :func:`default_workers` allows and the budget holds with batches of
    one (``workers`` overrides). Batch: the most frames, at most :data:`CALIB_BATCH` and at
    most one batch per process, that the budget holds with that automatic process count, so
    the batch (and the model bytes) do not depend on ``workers``.
    """
    main = int(MAIN_PROCESS_BYTES + MODEL_COPIES * model_bytes)
    helper = int(HELPER_PROCESS_BYTES + MODEL_COPIES * model_bytes)
    frame = max(int(frame_bytes), 1)
    auto = 1
    for w in range(default_workers(samples), 0, -1):
        if main + (w - 1) * helper + w * frame <= budget_bytes:
            auto = w
            break
    free = budget_bytes - main - (auto - 1) * helper
    batch = int(max(1, min(CALIB_BATCH, samples, free // (auto * frame))))
    return CalibrationPlan(batch, workers or auto, frame, helper, main, int(budget_bytes))


def frame_bytes_of(fp32: bytes, input_bytes: int) -> int:
    """Calibration bytes per frame of a batch: ``input_bytes`` plus every float activation of the
    model (:func:`.ranges.activation_tensors`: calibration keeps them all as outputs), or, where
    TensorFlow's wrapper calibrates, :data:`ARENA_MARGIN` times the peak live activation bytes of
    the float model's :class:`~optimizer.graph.layergraph.LayerGraph`."""
    import tempfile

    from ..graph.tflite_flatbuffer import read_model
    from ..graph.tflite_import import graph_from_tflite_file
    from .ranges import activation_tensors, frame_bytes

    model = read_model(fp32, "float model")
    tensors = activation_tensors(model)
    if tensors is not None:
        return int(input_bytes + sum(frame_bytes(model, tensors)))

    with tempfile.TemporaryDirectory(prefix="dnnplan-graph-") as tmp:
        path = Path(tmp) / "model.tflite"
        path.write_bytes(fp32)
        graph = graph_from_tflite_file(path)
    live = float(graph.live_bytes_array("fp32").max()) if len(graph) else 0.0
    return int(input_bytes + ARENA_MARGIN * live)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_workers(samples: int) -> int:
    """Calibrating processes worth using for ``samples`` calibration samples on this host."""
    return max(1, min(_cpus(), samples // MIN_SAMPLES_PER_WORKER))


def padded(batch: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
    """``batch`` filled up to ``size`` samples with copies of its first sample (min/max unchanged)."""
    n = len(next(iter(batch.values())))
    if n >= size:
        return batch
    return {k: np.concatenate([v, np.repeat(v[:1], size - n, axis=0)]) for k, v in batch.items()}


def stream_batches(cal: CalibrationSet, size: int, first: int, last: int) -> Iterator[dict[str, np.ndarray]]:
    """Calibration batches ``first``..``last`` of ``size`` samples each, produced one at a time."""
    for i in range(first, last):
        yield padded(cal.batch("calib", i * size, (i + 1) * size), size)


def _helper_init() -> None:
    """A helper process's initializer: it ends with its parent however the parent ends; Ctrl-C
    is the parent's to handle; TensorFlow loaded once."""
    from ..workers import die_with_parent, ignore_sigint

    die_with_parent()
    ignore_sigint()
    _tf_calibrator_class()


def _tf_calibrator_class() -> Any:
    from .. import lazy

    lazy.tensorflow()
    from tensorflow.lite.python.optimize import calibrator

    # the original class, also while parallel_calibration has patched in its own
    return getattr(calibrator.Calibrator, "tflite_calibrator", calibrator.Calibrator)


def calibrated(model_content: bytes, batches: Callable[[], Iterable[Any]], threads: int = 1,
               memory_budget: float | None = None, fallback: Callable[[Any], Any] | None = None) -> bytes:
    """The float model calibrated on the samples ``batches()`` gives: ranges recorded with LiteRT
    on ``threads`` threads (:func:`.ranges.calibrate`; within ``memory_budget`` bytes when given,
    :func:`recorder_group_bytes`), or, where those do not cover the model, by ``fallback(batches)``
    (default: a new TensorFlow wrapper of ``model_content``)."""
    from .ranges import calibrate

    release_free_memory()  # e.g. a zoo network's batch-norm passes: freed, but held by the allocator
    group = None if memory_budget is None else recorder_group_bytes(memory_budget, len(model_content))
    out = calibrate(model_content, batches, threads, group)
    if out is None:
        out = bytes(fallback(batches) if fallback else _tf_calibrator_class()(model_content).calibrate(batches))
    return out


def calibrate_run(model_content: bytes, cal: CalibrationSet, batch: int, first: int, last: int,
                  threads: int = 1) -> bytes:
    """The float model calibrated on batches ``first``..``last`` of ``cal`` (:func:`calibrated`)."""
    return calibrated(model_content, lambda: stream_batches(cal, batch, first, last), threads)


def calibrate_batches(model_content: bytes, cal: CalibrationSet, batch: int, first: int,
                      last: int, threads: int = 1) -> tuple[bytes, int]:
    """Calibrate on batches ``first``..``last`` of ``cal`` (helper-process entry); returns the
    calibrated model and this process's peak resident bytes (:func:`peak_rss_bytes`)."""
    return calibrate_run(model_content, cal, batch, first, last, threads), peak_rss_bytes()


def rss_bytes() -> int:
    """Resident bytes of this process now (``VmRSS`` of ``/proc/self/status``; 0 where unreadable)."""
    return proc_kb_bytes("/proc/self/status", "VmRSS") or 0


def peak_rss_bytes() -> int:
    """Peak resident bytes of this process: ``VmHWM`` of ``/proc/self/status`` (the high-water
    mark of its own address space), else ``getrusage`` max RSS. (``ru_maxrss`` of a spawned child
    counts its parent's resident memory at the fork, and ``RUSAGE_CHILDREN`` inherits that.)"""
    peak = proc_kb_bytes("/proc/self/status", "VmHWM")
    if peak is not None:
        return peak
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


#: model-sized copies the LiteRT recorder adds (its probe model and XNNPACK's packed weights)
RECORDER_MODEL_COPIES = 2
#: activation bytes per frame a recording pass may always keep, whatever the budget
MIN_GROUP_BYTES = 64e6


def recorder_group_bytes(budget_bytes: float, model_bytes: int) -> float:
    """Activation bytes per frame one recording pass may keep: ``budget_bytes`` less what this
    process holds now (:func:`rss_bytes`, after :func:`release_free_memory`) and the recorder's
    model copies, at least :data:`MIN_GROUP_BYTES`."""
    return max(budget_bytes - rss_bytes() - RECORDER_MODEL_COPIES * model_bytes, MIN_GROUP_BYTES)


@contextlib.contextmanager
def parallel_calibration(workers: int, batch: int = CALIB_BATCH,
                         memory_budget: float | None = None) -> Iterator[dict[str, Any]]:
    """Make TFLite conversions inside the block calibrate on ``workers`` helper processes.

    The converter's representative dataset must be a :class:`RepresentativeData` (other
    datasets are calibrated by TensorFlow's own calibrator). The helpers start on entry, so
    that their start-up overlaps the converter's graph conversion, and end once their ranges
    are in, so that their memory is not held beside the quantizer's. Yields a dict that records,
    once calibration ran, ``samples``, ``batch`` (1 if batching failed), ``workers`` used and
    ``helper_peak_rss`` (the largest helper's peak resident bytes; ``None`` without helpers).
    Any other representative dataset is calibrated in this process by the LiteRT recorder,
    within ``memory_budget`` bytes when given (:func:`recorder_group_bytes`).
    """
    from .. import lazy

    lazy.tensorflow()
    from tensorflow.lite.python.optimize import calibrator as module

    original = module.Calibrator
    info: dict[str, Any] = {}

    def start_helpers() -> ProcessPoolExecutor | None:
        if workers <= 1:
            return None
        started = ProcessPoolExecutor(workers - 1, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_helper_init)
        for _ in range(workers - 1):  # start the helpers now
            started.submit(_noop)
        return started

    pool = start_helpers()

    def run(model: bytes, cal: CalibrationSet, size: int) -> bytes:
        nonlocal pool
        n_batches = -(-cal.size("calib") // size)
        parts = min(workers, n_batches)
        threads = max(1, _cpus() // parts)  # the memory budget may allow fewer processes than CPUs
        bounds = np.linspace(0, n_batches, parts + 1).round().astype(int).tolist()
        if parts > 1 and pool is None:  # a second conversion in the block: helpers again
            pool = start_helpers()
        helpers = [pool.submit(calibrate_batches, model, cal, size, a, b, threads)  # type: ignore[union-attr]
                   for a, b in zip(bounds[1:-1], bounds[2:], strict=True)]
        results = [calibrate_run(model, cal, size, 0, bounds[1], threads)]
        done = [job.result() for job in helpers]
        if pool is not None:  # their memory is not held beside the converter's quantizer
            pool.shutdown(wait=True)
            pool = None
        results += [r for r, _ in done]
        info.update(samples=cal.size("calib"), batch=size, workers=parts, threads=threads,
                    helper_peak_rss=max((rss for _, rss in done), default=None))
        return merge_calibration(results)

    class ParallelCalibrator(original):  # type: ignore[misc, valid-type]
        tflite_calibrator = original

        def calibrate(self, dataset_gen: Any) -> bytes:
            cal = getattr(dataset_gen, "calibration_set", None)
            if cal is None or not cal.size("calib"):  # another dataset: its samples as they come
                return calibrated(self._model_content, dataset_gen, memory_budget=memory_budget,
                                  fallback=lambda batches: original.calibrate(self, batches))
            try:
                return run(self._model_content, cal, batch)
            except Exception:  # noqa: BLE001 — e.g. a batch-1 graph: calibrate sample by sample
                if batch == 1:
                    raise
            # outside the handler: the failed attempt's frames (its recorder, its batch) go with
            # the exception instead of staying alive through the second attempt
            collect_and_release()
            return run(self._model_content, cal, 1)

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


class RepresentativeData:
    """A converter's ``representative_dataset``: per-sample dicts of a :class:`.calibration.CalibrationSet`,
    produced one at a time; :func:`parallel_calibration` reads the set itself in batches."""

    def __init__(self, cal: CalibrationSet) -> None:
        self.calibration_set = cal

    def __call__(self) -> Iterator[dict[str, np.ndarray]]:
        return self.calibration_set.samples("calib")


def _noop() -> None:
    return None
