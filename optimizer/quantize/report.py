"""The quantization report: typed result objects (pydantic v2), written as JSON by the CLI."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..fileio import atomic_write_text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CalibrationInfo(_Strict):
    source: str
    samples_requested: int
    samples_used: int
    heldout: int
    seed: int
    #: samples per calibrator invocation, processes that calibrated and threads of each (integer schemes)
    batch: int | None = None
    workers: int | None = None
    threads: int | None = None
    #: the --memory-budget the batch and processes were planned for, the planned bytes per frame
    #: of a batch (input + activation arena) and the planned peak of all processes
    memory_budget_bytes: int | None = None
    frame_bytes: int | None = None
    estimated_peak_bytes: int | None = None


class SizeInfo(_Strict):
    fp32_bytes: int
    quantized_bytes: int
    ratio: float
    #: the quantized file as the TFLite converter wrote it, before identical vectors were
    #: shared (equal to ``quantized_bytes`` with ``--no-compact``)
    converter_bytes: int | None = None
    compacted: bool = False
    weight_bytes_by_type: dict[str, int]
    per_channel_tensors: int


class OpEntry(_Strict):
    index: int
    op: str
    tensor: str


class OpsInfo(_Strict):
    total: int
    counts: dict[str, int]
    float_ops: list[OpEntry]
    conversion_ops: list[OpEntry]
    io_conversion_ops: list[OpEntry]
    cpu_fallback_counts: dict[str, int]
    cpu_segments: int


class TransposeInfo(_Strict):
    """TRANSPOSE operators of the FP32 reference and the quantized model (layout changes that a
    clean NHWC conversion does not need)."""

    fp32: int
    quantized: int


class OutputFidelity(_Strict):
    output: str
    sqnr_db: float | None  # None: undefined (identical outputs, or an all-zero reference)
    max_abs_error: float
    top1_agreement: float | None  # classifiers only


class FidelityInfo(_Strict):
    samples: int
    outputs: list[OutputFidelity]


class LatencyInfo(_Strict):
    median_ms: float
    p90_ms: float
    runs: int
    warmup: int


class LatencyReport(_Strict):
    threads: int
    fp32: LatencyInfo
    quantized: LatencyInfo
    speedup: float


class QuantizeReport(_Strict):
    """Everything ``dnnplan quantize`` measured (Park & Ha, IEEE Access 2024, docs/METHODS.md section 1)."""

    model: str
    weights: str
    scheme: str
    io: str
    output: str
    output_sha256: str
    conversion_s: float
    calibration: CalibrationInfo
    sizes: SizeInfo
    ops: OpsInfo
    fidelity: FidelityInfo | None
    latency: LatencyReport | None
    warnings: list[str]
    #: peak resident memory of the quantizing process (VmHWM; in a long-lived process, the peak
    #: since it started) and of its largest calibrating helper process (None without helpers)
    peak_rss_bytes: int | None = None
    helper_peak_rss_bytes: int | None = None
    transposes: TransposeInfo | None = None

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the report atomically as indented JSON."""
        return atomic_write_text(path, self.model_dump_json(indent=2) + "\n")
