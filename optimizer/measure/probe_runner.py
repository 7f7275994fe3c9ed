"""Time models in process on this host: LiteRT (XNNPACK) or onnxruntime, interleaved.

:func:`time_interleaved` is the one timing loop of probes and of whole networks. It follows the
benchmark practice of nn-Meter's device profilers and TFLite's ``benchmark_model`` (warm-up, then
many timed runs, the median reported) and adds interleaving, because on a shared machine the load
changes while a campaign runs: every round times one sample of *each* model, in a seeded random
order, so a slow spell inflates all models alike instead of a few; each sample follows one untimed
run (the model timed before evicted this one's weights from the caches: a network run repeatedly,
frame after frame, finds them warm); a sample is a batch of
invocations lasting about ``sample_s`` (``time.perf_counter`` around the batch), so microsecond
kernels are not drowned by the timer; rounds continue until every model's median over all its
samples is within ``rel_tol`` of its median over the first half of them, or ``max_rounds``. The
inter-quartile range over the median is recorded as the spread. One-thread runs are timed in the
calling thread's CPU time (:func:`clock_for`), which preemption by other processes cannot inflate.

Runners hold the loaded models: :class:`LiteRTRunner` (``ai_edge_litert`` interpreter, whose
default delegate is XNNPACK, at ``threads``; ``delegate="cpu"`` runs TFLite's built-in kernels
instead, as ``benchmark_model --use_xnnpack=false`` does) and :class:`OrtRunner` (onnxruntime's CPU execution
provider at ``threads`` intra-op threads, sequential execution, inputs and outputs bound once
through ``IOBinding`` so no run allocates).
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, MeasurementError

Invoke = Callable[[], None]
#: in-process runners (:func:`in_process_runner`; each names its runtime and model format)
IN_PROCESS: tuple[str, ...] = ("litert", "ort")
#: the in-process LiteRT runner's delegates -> runtime name (the names ``benchmark_model``'s tables carry
#: too: :data:`optimizer.measure.probe_remote.DELEGATES` reads them from here)
LITERT_DELEGATES: dict[str, str] = {"xnnpack": "tflite_xnnpack", "cpu": "tflite_cpu"}


@dataclass(frozen=True)
class Timing:
    """Seconds per invocation of one model: median, quartiles, samples and rounds taken."""

    median_s: float
    p25_s: float
    p75_s: float
    samples: int
    rounds: int
    #: share of the time spent in layout conversions the runtime adds around a lone kernel (and
    #: not between the kernels of a network), left out of the kernel's time
    layout_share: float = 0.0
    #: the timed samples (seconds per invocation), round by round
    values_s: tuple[float, ...] = ()
    #: the speed reference's level around each sample (``time_interleaved(reference=...)``)
    levels_s: tuple[float, ...] = ()

    @property
    def spread(self) -> float:
        """Inter-quartile range over the median."""
        return (self.p75_s - self.p25_s) / self.median_s if self.median_s > 0 else 0.0


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def clock_for(threads: int) -> str:
    """The clock a run at ``threads`` threads is timed with: the calling thread's CPU time for one
    thread (the runtimes then compute on the calling thread, and time other processes take from
    the core does not count; as :mod:`optimizer.measure.ort_profile` does), wall time otherwise."""
    return "thread" if threads == 1 else "wall"


def time_interleaved(invokers: Sequence[Invoke], *, sample_s: float = 0.002, min_rounds: int = 5,
                     max_rounds: int = 25, rel_tol: float = 0.02, seed: int = 0,
                     warmup_s: float = 0.01, clock: str = "wall", reference: Sequence[Invoke] = (),
                     reference_gap_s: float = 0.02) -> list[Timing]:
    """Time every invoker (module doc) with ``clock`` (:data:`CLOCKS`): per round one sample of
    each, in a seeded random order, until each median is stable within ``rel_tol`` or ``max_rounds``.

    With ``reference`` (a speed reference's kernels, :mod:`~.speed_reference`), a *checkpoint*
    times one short sample of each reference kernel whenever ``reference_gap_s`` has passed since
    the last, and once at the start and the end; every sample's ``levels_s`` is the level (the
    reference kernels' geometric mean) of the checkpoints just before and after it. The
    reference kernels' timings follow the invokers' (one sample per checkpoint each).
    """
    if not invokers:
        return []
    if min_rounds < 2 or max_rounds < min_rounds or sample_s <= 0:
        raise ConfigError(f"min_rounds={min_rounds}, max_rounds={max_rounds}, sample_s={sample_s}: need "
                          "2 <= min_rounds <= max_rounds and sample_s > 0")
    if clock not in CLOCKS:
        raise ConfigError(f"clock {clock!r}; expected one of {', '.join(CLOCKS)}")
    pc = CLOCKS[clock]
    batch = [_batch_size(fn, pc, sample_s, warmup_s) for fn in invokers]
    ref_batch = [_batch_size(fn, pc, min(sample_s, 0.002), warmup_s) for fn in reference]
    ref_samples: list[list[float]] = [[] for _ in reference]

    def sample(fn: Invoke, n: int) -> float:
        fn()  # untimed: the model before this one evicted this one's weights from the caches
        t0 = pc()
        for _ in range(n):
            fn()
        return (pc() - t0) / n

    def checkpoint() -> None:
        for k, fn in enumerate(reference):
            ref_samples[k].append(sample(fn, ref_batch[k]))

    rng = np.random.default_rng(seed)
    samples: list[list[float]] = [[] for _ in invokers]
    after: list[list[int]] = [[] for _ in invokers]  # the checkpoint before each sample
    active = list(range(len(invokers)))
    rounds = 0
    last = time.perf_counter()
    if reference:
        checkpoint()
    while active and rounds < max_rounds:
        rounds += 1
        for i in rng.permutation(active):
            samples[i].append(sample(invokers[i], batch[i]))
            after[i].append(len(ref_samples[0]) - 1 if reference else 0)
            if reference and time.perf_counter() - last >= reference_gap_s:
                checkpoint()
                last = time.perf_counter()
        if rounds >= min_rounds:
            active = [i for i in active if not _stable(samples[i], rel_tol)]
    if reference:
        checkpoint()
    levels = reference_level(ref_samples) if reference else np.zeros(0)
    out = []
    for s, k in zip([*samples, *ref_samples], [*after, *([[]] * len(reference))], strict=True):
        a = np.asarray(s)
        around = (tuple(float(np.sqrt(levels[j] * levels[j + 1])) for j in k) if reference and k else ())
        out.append(Timing(float(np.median(a)), float(np.percentile(a, 25)), float(np.percentile(a, 75)),
                          len(a), len(a), values_s=tuple(float(v) for v in a), levels_s=around))
    return out


def reference_level(per_kernel: Sequence[Sequence[float]]) -> np.ndarray:
    """The speed reference's level at each checkpoint: the geometric mean over the reference
    kernels (rows) of their samples (columns, one per checkpoint)."""
    return np.exp(np.mean(np.log(np.asarray(per_kernel, dtype=np.float64)), axis=0))


def _batch_size(fn: Invoke, pc: Callable[[], float], sample_s: float, warmup_s: float) -> int:
    """Warm ``fn`` up for ``warmup_s`` and size a sample's batch to last about ``sample_s``."""
    fn()
    t0, n = pc(), 0
    while True:
        fn()
        n += 1
        if pc() - t0 >= warmup_s:
            break
    return max(1, int(sample_s / ((pc() - t0) / n)))


def _stable(samples: list[float], rel_tol: float) -> bool:
    full = float(np.median(samples))
    half = float(np.median(samples[: max(len(samples) // 2, 1)]))
    return abs(full - half) <= rel_tol * full


def cpu_name() -> str:
    """The CPU model of this host (``/proc/cpuinfo``), else ``platform.processor()``."""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


class _ThreadedRunner:
    """A runner at ``threads`` threads (at least one)."""

    def __init__(self, threads: int = 1) -> None:
        if threads < 1:
            raise ConfigError(f"threads={threads}: need at least 1")
        self.threads = threads


class LiteRTRunner(_ThreadedRunner):
    """Models run by the LiteRT interpreter at ``threads`` threads: with its default XNNPACK
    delegate, or (``delegate="cpu"``) with TFLite's built-in kernels only (the interpreter's
    ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` op resolver, ``benchmark_model --use_xnnpack=false``)."""

    name, fmt = "litert", "tflite"

    def __init__(self, threads: int = 1, delegate: str = "xnnpack") -> None:
        super().__init__(threads)
        if delegate not in LITERT_DELEGATES:
            raise ConfigError(f"--delegate {delegate!r} with --runner litert; expected one of "
                              f"{', '.join(LITERT_DELEGATES)} (gpu and nnapi run on a phone: --runner adb)")
        self.delegate = delegate
        self.runtime = LITERT_DELEGATES[delegate]

    @staticmethod
    def version() -> str:
        from importlib.metadata import version

        return f"ai-edge-litert {version('ai-edge-litert')}"

    def load(self, model: bytes | str | os.PathLike[str], seed: int = 0) -> Invoke:
        """An invoker of ``model`` (bytes or a path) with seeded inputs set once.

        Raises
        ------
        MeasurementError
            LiteRT cannot load or run the model (one line naming the cause).
        """
        from ..lazy import litert_builtin_resolver, litert_interpreter, silenced_stderr

        interp_cls = litert_interpreter()
        try:
            with silenced_stderr():
                kw: dict[str, Any] = ({"model_content": bytes(model)} if isinstance(model, (bytes, bytearray))
                                      else {"model_path": str(model)})
                if self.delegate == "cpu":
                    kw["experimental_op_resolver_type"] = litert_builtin_resolver()
                interp = interp_cls(num_threads=self.threads, **kw)
                interp.allocate_tensors()
            rng = np.random.default_rng(seed)
            for d in interp.get_input_details():
                interp.set_tensor(d["index"], random_input(rng, [int(s) if s > 0 else 1 for s in d["shape"]],
                                                            np.dtype(d["dtype"])))
            interp.invoke()
        except (ValueError, RuntimeError) as exc:
            raise MeasurementError(f"LiteRT cannot run {_what(model)}: {str(exc).splitlines()[0][:200]}") from None
        return interp.invoke


class OrtRunner(_ThreadedRunner):
    """Models run by onnxruntime's CPU execution provider at ``threads`` intra-op threads."""

    name, runtime, fmt = "ort", "onnxruntime", "onnx"

    @staticmethod
    def version() -> str:
        import onnxruntime

        return f"onnxruntime {onnxruntime.__version__}"

    def session(self, model: bytes | str | os.PathLike[str]) -> Any:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        if self.threads > 1:
            # every session has its own intra-op pool, whose workers spin after each run: with the
            # many sessions an interleaved timing keeps loaded, idle sessions' spinning workers took
            # the cores from the one being timed (2-thread runs slower than 1-thread ones)
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        src = bytes(model) if isinstance(model, (bytes, bytearray)) else str(model)
        return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])

    def layout_share(self, model: bytes, runs: int = 20, seed: int = 0) -> float:
        """Share of ``model``'s operator time in onnxruntime's layout conversions, from its node
        profiler: ``ReorderInput``/``ReorderOutput`` of its NCHWc transformer (FP32), and the
        ``Transpose`` nodes its NHWC transformer puts around INT8 ``QLinearConv`` (counted when
        ``model`` has no ``Transpose`` of its own). Around a lone convolution they convert the input
        and output; between the convolutions of a network they cancel out."""
        import json
        import tempfile

        import onnx
        import onnxruntime as ort

        own_transpose = any(n.op_type == "Transpose" for n in onnx.load_from_string(bytes(model)).graph.node)
        layout_ops = ("Reorder",) if own_transpose else ("Reorder", "Transpose")

        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        so.enable_profiling = True
        with tempfile.TemporaryDirectory(prefix="dnnplan-ortprof-") as tmp:
            so.profile_file_prefix = os.path.join(tmp, "p")
            sess = ort.InferenceSession(bytes(model), so, providers=["CPUExecutionProvider"])
            rng = np.random.default_rng(seed)
            feed = {i.name: random_input(rng, [d if isinstance(d, int) and d > 0 else 1 for d in i.shape],
                                          _ORT_TYPES.get(i.type, np.dtype(np.float32))) for i in sess.get_inputs()}
            for _ in range(runs):
                sess.run(None, feed)
            with open(sess.end_profiling(), encoding="utf-8") as fh:
                events = json.load(fh)
        total = layout = 0.0
        for e in events:
            if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
                total += float(e.get("dur", 0))
                if str(e.get("args", {}).get("op_name", "")).startswith(layout_ops):
                    layout += float(e.get("dur", 0))
        return layout / total if total > 0 else 0.0

    def load(self, model: bytes | str | os.PathLike[str], seed: int = 0,
             shapes: dict[str, tuple[int, ...]] | None = None) -> Invoke:
        """An invoker of ``model`` with seeded inputs and outputs bound once (``IOBinding``);
        ``shapes`` fixes dynamic input dimensions (others default to 1).

        Raises
        ------
        MeasurementError
            onnxruntime cannot load or run the model.
        """
        import onnxruntime as ort

        try:
            sess = self.session(model)
            rng = np.random.default_rng(seed)
            binding = sess.io_binding()
            for i in sess.get_inputs():
                shape = (shapes or {}).get(i.name) or tuple(d if isinstance(d, int) and d > 0 else 1 for d in i.shape)
                value = random_input(rng, list(shape), _ORT_TYPES.get(i.type, np.dtype(np.float32)))
                binding.bind_ortvalue_input(i.name, ort.OrtValue.ortvalue_from_numpy(value))
            for o in sess.get_outputs():
                binding.bind_output(o.name, "cpu")
            sess.run_with_iobinding(binding)
        except Exception as exc:  # onnxruntime raises its own exception classes
            raise MeasurementError(f"onnxruntime cannot run {_what(model)}: {str(exc).splitlines()[0][:200]}") from None

        def invoke() -> None:
            sess.run_with_iobinding(binding)

        return invoke


_ORT_TYPES = {"tensor(float)": np.dtype(np.float32), "tensor(uint8)": np.dtype(np.uint8),
              "tensor(int8)": np.dtype(np.int8), "tensor(int32)": np.dtype(np.int32),
              "tensor(int64)": np.dtype(np.int64), "tensor(float16)": np.dtype(np.float16)}


#: ids (int32/int64 inputs: an embedding's or a gather's lookup) are drawn from ``[0, ID_RANGE)``
ID_RANGE = 8


def random_input(rng: np.random.Generator, shape: list[int], dtype: np.dtype) -> np.ndarray:
    """A seeded input of ``shape`` and ``dtype``: standard-normal floats, small ids for int32/int64
    (an embedding's lookup), the int8 range for other integers."""
    if np.issubdtype(dtype, np.integer):
        if dtype in (np.dtype(np.int32), np.dtype(np.int64)):  # ids (an embedding's lookup)
            return rng.integers(0, ID_RANGE, size=shape).astype(dtype)
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -128), min(info.max, 127) + 1, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _what(model: bytes | str | os.PathLike[str]) -> str:
    return "the probe model" if isinstance(model, (bytes, bytearray)) else str(model)


def in_process_runner(name: str, threads: int, delegate: str = "xnnpack") -> LiteRTRunner | OrtRunner:
    """The in-process runner ``litert`` (with ``delegate``, :data:`LITERT_DELEGATES`) or ``ort`` at
    ``threads`` threads."""
    if name == "litert":
        return LiteRTRunner(threads, delegate)
    if name == "ort":
        if delegate != "xnnpack":
            raise ConfigError(f"--delegate {delegate!r} applies to --runner litert and adb, not ort "
                              "(onnxruntime runs its CPU execution provider)")
        return OrtRunner(threads)
    raise ConfigError(f"unknown in-process runner {name!r}; expected {' or '.join(IN_PROCESS)}")


@contextlib.contextmanager
def quiet_quantizer() -> Iterator[None]:
    """Silence onnxruntime's quantizer, which logs a pre-processing hint per model at WARNING, and
    its calibration sessions' warnings about initializers they drop (onnxruntime's own logger,
    back at its default level after)."""
    import logging

    import onnxruntime

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    onnxruntime.set_default_logger_severity(3)
    try:
        yield
    finally:
        root.setLevel(level)
        onnxruntime.set_default_logger_severity(2)
