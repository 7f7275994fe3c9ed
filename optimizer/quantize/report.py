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


class SegmentTime(_Strict):
    """One delegate partition, or one operator LiteRT's builtin kernels run, timed on its own."""

    segment: str
    ops: int
    op_counts: dict[str, int]
    delegated: bool
    median_ms: float


class DelegateInfo(_Strict):
    """Where LiteRT runs a model's operators on this host (:mod:`optimizer.quantize.delegation`)."""

    delegate: str
    partitions: int
    ops_total: int
    ops_outside: dict[str, int]
    outside: list[OpEntry]
    #: median of the whole model and of every segment (None: not timed)
    whole_ms: float | None = None
    segments: list[SegmentTime] | None = None


class DelegationReport(_Strict):
    """The FP32 reference, the quantized model as the quantizer wrote it, and the final model after
    the XNNPACK rewrites (and mixed precision), on the host delegate."""

    threads: int
    fp32: DelegateInfo
    converted: DelegateInfo
    quantized: DelegateInfo
    rewrites: dict[str, int]


class MixedTrialInfo(_Strict):
    op: str
    ops: int
    current_ms: float | None
    candidate_ms: float | None
    sqnr_db: float | None
    kept: bool
    note: str = ""
    #: CPU time of the timing thread over wall time during the trial (about 1 on an idle host)
    cpu_share: float | None = None


class MixedInfo(_Strict):
    """Latency-aware mixed precision (:mod:`optimizer.quantize.mixed`)."""

    mode: str
    float_op_counts: dict[str, int]
    #: fraction of the model's MACs computed by INT8 operators
    int8_mac_share: float
    trials: list[MixedTrialInfo]


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
    #: the stage during which ``peak_rss_bytes`` was reached (e.g. "the per-channel TFLite
    #: conversion (calibration, quantization)"); None when reached before quantizing began
    peak_stage: str | None = None
    transposes: TransposeInfo | None = None
    delegation: DelegationReport | None = None
    mixed: MixedInfo | None = None
    #: one line on the host speed and delegate partitions, the operators that cause them and what
    #: was done (None when not analysed)
    summary: str | None = None
    #: the summary reports a model slower than FP32 or split into more than a few partitions
    summary_warns: bool = False

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the report atomically as indented JSON."""
        return atomic_write_text(path, self.model_dump_json(indent=2) + "\n")
