"""Run ``.tflite`` models with the LiteRT interpreter: outputs, fidelity and host latency.

Fidelity of a quantized model against its FP32 reference on held-out inputs (Park & Ha,
IEEE Access 2024, compare INT8 with FP32 accuracy): signal-to-quantization-noise ratio
``SQNR = 10 log10(sum(y_fp32^2) / sum((y_fp32 - y_q)^2))`` dB per output, max absolute error and,
for classifiers, top-1 agreement. Integer I/O is (de)quantized with the tensor's scale and
zero point ``x = S (q - Z)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MeasurementError


class TfliteRunner:
    """One LiteRT interpreter over a model's ``serving_default`` signature.

    Inputs and outputs are float (or the model's integer token dtype); integer-quantized
    tensors are quantized on the way in and dequantized on the way out.
    """

    def __init__(self, data: bytes, num_threads: int = 1) -> None:
        self.data = data
        self.num_threads = num_threads
        self._runner: Any = None
        self._invoked = False

    def _get(self) -> Any:
        if self._runner is None:
            from .. import lazy

            cls = lazy.litert_interpreter()
            with lazy.silenced_stderr():  # "Created TensorFlow Lite XNNPACK delegate" notice
                interp = cls(model_content=self.data, num_threads=self.num_threads)
                sigs = interp.get_signature_list()
                key = "serving_default" if "serving_default" in sigs else next(iter(sigs))
                self._runner = interp.get_signature_runner(key)
            self._in = self._runner.get_input_details()
            self._out = self._runner.get_output_details()
        return self._runner

    @property
    def output_names(self) -> list[str]:
        self._get()
        return sorted(self._out)

    def feed(self, sample: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Model-ready inputs for one sample (quantized where the model's input is int8/uint8)."""
        self._get()
        fed = {}
        for name, det in self._in.items():
            x = sample[name]
            scale, zero = det["quantization"]
            dtype = det["dtype"]
            if np.issubdtype(dtype, np.integer) and scale:
                info = np.iinfo(dtype)
                x = np.clip(np.round(x / scale + zero), info.min, info.max)
            fed[name] = x.astype(dtype, copy=False)
        return fed

    def run(self, fed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Invoke once on already-fed inputs; outputs dequantized to float64."""
        runner = self._get()
        try:
            if self._invoked:
                out = runner(**fed)
            else:  # the XNNPACK delegate announces itself on the first invoke
                from ..lazy import silenced_stderr

                with silenced_stderr():
                    out = runner(**fed)
                self._invoked = True
        except (RuntimeError, ValueError) as exc:
            raise MeasurementError(f"LiteRT interpreter failed: {str(exc).splitlines()[0]}") from None
        result = {}
        for name, y in out.items():
            scale, zero = self._out[name]["quantization"]
            y = y.astype(np.float64)
            result[name] = (y - zero) * scale if scale and np.issubdtype(self._out[name]["dtype"], np.integer) else y
        return result

    def predict(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs for every sample of ``arrays`` (first axis = samples), stacked."""
        n = int(next(iter(arrays.values())).shape[0])
        rows = [self.run(self.feed({k: v[i:i + 1] for k, v in arrays.items()})) for i in range(n)]
        return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]} if rows else {}


@dataclass(frozen=True)
class LatencyStats:
    median_s: float
    p90_s: float
    runs: int
    warmup: int
    threads: int
    #: CPU time of the timing thread over the wall time it timed (:func:`cpu_share`); None where
    #: not measured
    cpu_share: float | None = None


def measure_latency(runner: TfliteRunner, sample: dict[str, np.ndarray], runs: int = 30,
                    warmup: int = 5) -> LatencyStats:
    """Median and 90th percentile of ``runs`` timed invocations after ``warmup`` untimed ones."""
    fed = runner.feed(sample)
    for _ in range(warmup):
        runner.run(fed)
    times = np.empty(runs)
    for i in range(runs):
        t0 = time.perf_counter()
        runner.run(fed)
        times[i] = time.perf_counter() - t0
    return LatencyStats(float(np.median(times)), float(np.percentile(times, 90)), runs, warmup,
                        runner.num_threads)


def measure_latency_pair(first: TfliteRunner, second: TfliteRunner, sample: dict[str, np.ndarray],
                         runs: int = 30, warmup: int = 5) -> tuple[LatencyStats, LatencyStats]:
    """Latency of two models timed interleaved (one invocation of each in turn, ``runs`` times after
    ``warmup`` rounds), so that load changes on the host fall on both alike."""
    fed = [first.feed(sample), second.feed(sample)]
    runners = (first, second)
    for _ in range(warmup):
        for r, f in zip(runners, fed, strict=True):
            r.run(f)
    times = np.empty((2, runs))
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    for i in range(runs):
        for j, (r, f) in enumerate(zip(runners, fed, strict=True)):
            t0 = time.perf_counter()
            r.run(f)
            times[j, i] = time.perf_counter() - t0
    share = cpu_share(time.thread_time() - cpu0, time.perf_counter() - wall0)
    first_stats, second_stats = (LatencyStats(float(np.median(t)), float(np.percentile(t, 90)), runs, warmup,
                                              r.num_threads, share) for t, r in zip(times, runners, strict=True))
    return first_stats, second_stats


def cpu_share(cpu_s: float, wall_s: float) -> float | None:
    """CPU seconds the timing thread got over the wall seconds it timed: about 1 on an idle host
    (the invoking thread computes, or spins while the runtime's workers finish), lower when
    other processes preempted it. ``None`` for a zero interval."""
    return None if wall_s <= 0 else min(1.0, cpu_s / wall_s)


def sqnr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (``inf`` when identical)."""
    return sqnr_from_sums(float(np.sum(reference ** 2)), float(np.sum((reference - test) ** 2)))


def sqnr_from_sums(signal: float, noise: float) -> float:
    """``10 log10(signal / noise)`` from the sums of squares (``inf`` when ``noise`` is 0)."""
    if noise == 0.0:
        return float("inf")
    if signal == 0.0:
        return float("-inf")
    return 10.0 * float(np.log10(signal / noise))


def top1_agreement(reference: np.ndarray, test: np.ndarray) -> float:
    """Fraction of samples whose arg-max class agrees."""
    return float(np.mean(_top1_matches(reference, test)))


def _top1_matches(reference: np.ndarray, test: np.ndarray) -> np.ndarray:
    ref = reference.reshape(reference.shape[0], -1).argmax(axis=1)
    got = test.reshape(test.shape[0], -1).argmax(axis=1)
    return np.asarray(ref == got)


class FidelityStats:
    """SQNR, max |error| and top-1 agreement of one output, accumulated batch by batch (the
    figures :func:`sqnr_db` and :func:`top1_agreement` give on all batches stacked)."""

    def __init__(self, classifier: bool) -> None:
        self.classifier = classifier
        self.signal = self.noise = self.max_abs_error = 0.0
        self.agree = self.samples = 0

    def add(self, reference: np.ndarray, test: np.ndarray) -> None:
        """One batch of outputs (first axis = samples)."""
        diff = reference - test
        self.signal += float(np.sum(reference ** 2))
        self.noise += float(np.sum(diff ** 2))
        if diff.size:
            self.max_abs_error = max(self.max_abs_error, float(np.max(np.abs(diff))))
        if self.classifier:
            self.agree += int(np.sum(_top1_matches(reference, test)))
            self.samples += int(reference.shape[0])

    def sqnr_db(self) -> float:
        return sqnr_from_sums(self.signal, self.noise)

    def top1_agreement(self) -> float | None:
        return self.agree / self.samples if self.classifier and self.samples else None
