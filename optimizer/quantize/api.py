"""``quantize``: model → quantized ``.tflite`` + :class:`QuantizeReport` (docs/METHODS.md section 1)."""

from __future__ import annotations

import functools
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, UnsupportedOperatorError
from ..fileio import atomic_write_bytes, sha256_bytes
from ..graph.layergraph import LayerGraph
from ..graph.zoo import BN_FRAMES
from .calibration import CalibrationSet, check_calibration, load_calibration
from .convert import (INTEGER_SCHEMES, SCHEMES, ModelSource, convert_float, convert_quantized,
                      estimate_batchnorm_statistics, model_from_keras, open_model, temp_workdir)
from .flatbuffer import compact as compact_model
from .flatbuffer import reciprocal_sqrt_as_rsqrt
from .delegation import FEW_PARTITIONS, host_delegation, time_segments
from .evaluate import FidelityStats, TfliteRunner, measure_latency_pair
from .mixed import MIXED_MODES, choose_float_ops, int8_mac_share
from .rewrites import rewrite_for_xnnpack
from .parallel_calibration import MAIN_PROCESS_BYTES, frame_bytes_of, plan_calibration
from .peak_memory import PeakStages
from .inspect import OpsAnalysis, analyse_tflite
from .report import (CalibrationInfo, DelegateInfo, DelegationReport, FidelityInfo, LatencyInfo, LatencyReport,
                     MixedInfo, MixedTrialInfo, OpEntry, OpsInfo, OutputFidelity, QuantizeReport, SegmentTime,
                     SizeInfo, TransposeInfo)

IO_TYPES = ("int8", "float")
ONNX_GAP_WARN = 1e-3  # relative ONNX vs converted-FP32 gap above which quantize warns
DEFAULT_MEMORY_BUDGET = "4GB"
#: Resident bytes of a training-mode frame over the sum of its layer outputs (TensorFlow's
#: allocator; measured at 640x640: 1.04 for ssd_mobilenet_v2_fpnlite, 1.08 for ssd_mobilenet_v1_fpn)
BN_PASS_MARGIN = 1.25


def quantize(model: Any, out: str | os.PathLike[str], *, calib: str | os.PathLike[str] = "synthetic",
             samples: int = 1000, scheme: str = "per-channel", io: str | None = None, seed: int = 0,
             heldout: int = 100, threads: int = 2, runs: int = 30, warmup: int = 5,
             allow_float_ops: bool = False, measure_latency_: bool = True, compact: bool = True,
             calib_workers: int | None = None, memory_budget: float | str = DEFAULT_MEMORY_BUDGET,
             input_shapes: dict[str, tuple[int, ...]] | None = None,
             rewrite: bool = True, mixed: str = "off",
             progress: Callable[[str], None] | None = None) -> QuantizeReport:
    """Quantize ``model`` with TFLite post-training quantization and report on the result.

    Parameters
    ----------
    model
        Zoo name, ``.keras`` file, float ``.tflite`` (FP32/FP16, quantized by ai-edge-quantizer:
        :mod:`.tflite_input`), ``.onnx`` file (converted by onnx2tf: :mod:`.onnx_input`),
        SavedModel directory, or an in-memory Keras model.
    out
        Where the quantized ``.tflite`` is written (atomically, only on success).
    calib
        ``"synthetic"``, an image directory or an ``.npz`` (see :mod:`.calibration`).
    samples
        Calibration samples (Park & Ha use 1000).
    scheme
        ``per-channel`` (default), ``per-tensor``, ``fp16`` or ``dynamic``.
    io
        ``int8`` or ``float`` model interface; default ``int8`` for the integer schemes and
        ``float`` otherwise.
    seed
        Seeds the sample draw and zoo weight initialisation: same seed, same bytes.
    heldout
        Held-out samples (never used for calibration) for the fidelity figures.
    threads, runs, warmup
        LiteRT interpreter threads, timed runs and untimed warm-up runs for latency.
    allow_float_ops
        Accept integer-scheme models where the converter left operators in float (otherwise
        :class:`UnsupportedOperatorError` naming them).
    measure_latency_
        Time FP32 vs quantized inference on this host.
    compact
        Store identical vectors of the flatbuffer once (:func:`.flatbuffer.compact`; the same
        model, ~7 % smaller per-channel files). The FP32 reference is written the same way.
    calib_workers
        Processes that calibrate in parallel (default: one per 256 samples, at most one per
        CPU, as many as ``memory_budget`` holds); the output does not depend on it.
    memory_budget
        Peak resident memory to plan for, bytes or a size such as ``"4GB"``, ``"512MB"``:
        it sets the calibration batch and processes (:func:`.parallel_calibration.plan_calibration`)
        and the frames per batch-norm pass of zoo networks. Samples are streamed, so memory
        does not grow with ``samples``.
    input_shapes
        ``.onnx`` models: input name -> full shape in the file's own layout (e.g.
        ``{"x": (1, 3, 640, 640)}``), fixing dynamic dimensions before conversion.
    rewrite
        Integer schemes: rewrite the operators XNNPACK has no INT8 kernel for into ones it runs
        (:mod:`.rewrites`), so the model stays in few delegate partitions.
    mixed
        ``off`` (full-integer, what integer-only accelerators need) or ``auto``: keep in float the
        operators outside the host delegate whose float version makes the model faster, measured
        (:mod:`.mixed`).
    progress
        Called with a short stage description as work proceeds.

    Returns
    -------
    QuantizeReport
    """
    asked_io = io
    io = check_options(scheme, io, threads, runs, warmup, calib_workers, mixed)
    check_calibration(calib, samples, heldout)  # before seconds of model loading
    budget = parse_memory_budget(memory_budget)
    with temp_workdir() as tmp:
        prep = prepare(model, Path(tmp), calib=calib, samples=samples, heldout=heldout, seed=seed,
                       memory_budget=budget, input_shapes=input_shapes, progress=progress)
        if prep.src.tflite is not None:
            io = _tflite_io(asked_io, prep.src.name)
        return quantize_prepared(prep, out, scheme=scheme, io=io, threads=threads, runs=runs,
                                 warmup=warmup, allow_float_ops=allow_float_ops,
                                 measure_latency_=measure_latency_, compact=compact,
                                 calib_workers=calib_workers, rewrite=rewrite, mixed=mixed, progress=progress)


def check_options(scheme: str, io: str | None, threads: int = 2, runs: int = 30, warmup: int = 5,
                  calib_workers: int | None = None, mixed: str = "off") -> str:
    """Validate scheme/interface/timing/mixed-precision options; returns the effective ``io``."""
    if mixed not in MIXED_MODES:
        raise ConfigError(f"--mixed {mixed!r} unknown; expected one of {', '.join(MIXED_MODES)}")
    if scheme not in SCHEMES:
        raise ConfigError(f"--scheme {scheme!r} unknown; expected one of {', '.join(SCHEMES)}")
    if io is None:
        io = "int8" if scheme in INTEGER_SCHEMES else "float"
    if io not in IO_TYPES:
        raise ConfigError(f"--io {io!r} unknown; expected one of {', '.join(IO_TYPES)}")
    if io == "int8" and scheme not in INTEGER_SCHEMES:
        raise ConfigError(f"--io int8 needs an integer scheme (per-channel, per-tensor); "
                          f"scheme {scheme} keeps float inputs/outputs")
    if threads < 1 or runs < 1 or warmup < 0:
        raise ConfigError(f"threads/runs must be >= 1 and warmup >= 0 (got {threads}/{runs}/{warmup})")
    if calib_workers is not None and calib_workers < 1:
        raise ConfigError(f"--calib-workers must be >= 1 (got {calib_workers})")
    return io


def parse_memory_budget(value: float | str) -> int:
    """``--memory-budget`` in bytes: a number of bytes or a size such as ``"4GB"``, ``"512 MiB"``."""
    from ..hardware.units import parse_quantity

    try:
        budget = float(value) if isinstance(value, (int, float)) else parse_quantity(str(value), "bytes")
    except ValueError as exc:
        raise ConfigError(f"--memory-budget {value!r}: {exc}; give a size such as 4GB or 512MB") from None
    if not budget > 0:
        raise ConfigError(f"--memory-budget {value!r} must be positive; give a size such as 4GB or 512MB")
    return int(budget)


@dataclass
class Prepared:
    """A model opened, its calibration/held-out sets drawn and its FP32 TFLite reference built.

    Valid while the ``workdir`` given to :func:`prepare` exists; quantize it with several
    schemes through :func:`quantize_prepared`.
    """

    src: ModelSource
    cal: CalibrationSet
    fp32: bytes
    weights: str
    samples_requested: int
    seed: int
    warnings: list[str] = field(default_factory=list)
    memory_budget: int = field(default_factory=lambda: parse_memory_budget(DEFAULT_MEMORY_BUDGET))
    peaks: PeakStages = field(default_factory=lambda: PeakStages())


def prepare(model: Any, workdir: Path, *, calib: str | os.PathLike[str] = "synthetic",
            samples: int = 1000, heldout: int = 100, seed: int = 0,
            memory_budget: float | str = DEFAULT_MEMORY_BUDGET,
            input_shapes: dict[str, tuple[int, ...]] | None = None,
            progress: Callable[[str], None] | None = None) -> Prepared:
    """Open ``model``, describe calibration/held-out samples and convert the FP32 reference.

    Zoo networks (random weights) get batch-norm statistics estimated on the first
    :data:`optimizer.graph.zoo.BN_FRAMES` calibration samples (see :func:`estimate_batchnorm_statistics`),
    in as many frames per pass as ``memory_budget`` holds. Parameters as in :func:`quantize`.
    """
    say = progress or (lambda _msg: None)
    warnings: list[str] = []
    budget = parse_memory_budget(memory_budget)
    peaks = PeakStages()
    say("loading model")
    if isinstance(model, (str, os.PathLike)):
        src = open_model(model, workdir, seed=seed, input_shapes=input_shapes)
    else:
        src = model_from_keras(model, getattr(model, "name", "model"))
    if str(calib) != "synthetic" and src.preprocess is None and not _is_npz(calib):
        warnings.append(f"{src.name} declares no preprocessing: calibration images scaled to [0, 1]")
    say("reading calibration data")
    cal = load_calibration(calib, src.inputs, src.preprocess, samples=samples, heldout=heldout,
                           seed=seed, workdir=workdir)
    warnings.extend(cal.notes)
    peaks.after("loading the model")
    weights = "from the model file"
    if src.tflite_weights == "fp16":
        weights = "from the model file (FP16 weights; the FP16 file is the float reference)"
    if src.random_weights and src.keras_model is not None:
        say("estimating batch-norm statistics of the random-weight network")
        n_bn_batch = min(BN_FRAMES, cal.size())
        per_pass = _bn_frames_per_pass(src, budget)
        n_bn = estimate_batchnorm_statistics(src.keras_model, cal.batch("calib", 0, n_bn_batch), per_pass)
        weights = (f"random (zoo builder, seed {seed}); {n_bn} batch-norm layers' statistics "
                   f"estimated on {n_bn_batch} calibration samples")
        warnings.append(f"{src.name} has random weights (no downloads): fidelity figures measure "
                        "quantization noise, not task accuracy")
        peaks.after("the batch-norm statistics passes")
    say("converting to FP32 TFLite")
    fp32 = convert_float(src)
    peaks.after("the FP32 TFLite conversion")
    if src.source_path is not None and src.source_path.suffix.lower() == ".onnx" and cal.size("heldout"):
        weights = _onnx_conversion_note(src.source_path, fp32, cal, warnings)
        peaks.after("the ONNX comparison")
    return Prepared(src, cal, fp32, weights, samples, seed, warnings, budget, peaks)


def _bn_frames_per_pass(src: ModelSource, budget: int) -> int:
    """Frames a training-mode pass of the zoo model may hold within ``budget`` (:func:`bn_frames_per_pass`)."""
    from ..graph.keras_import import graph_from_keras

    return bn_frames_per_pass(graph_from_keras(src.keras_model, src.name), budget)


def bn_frames_per_pass(graph: LayerGraph, budget: float | None = None) -> int:
    """Frames a training-mode batch-norm pass may hold within ``budget``: it keeps every layer
    output (the graph's output bytes per frame) on top of this process's runtime. A function of
    the graph and the budget only, never of the memory the process happens to hold: the pass size
    changes the estimated statistics, so the same seed must give the same passes (and weights).
    ``budget`` None: :data:`DEFAULT_MEMORY_BUDGET`."""
    total = parse_memory_budget(DEFAULT_MEMORY_BUDGET) if budget is None else budget
    return frames_within(sum(layer.output_bytes("fp32") for layer in graph.layers), total)


def frames_within(layer_output_bytes: float, budget: float) -> int:
    """Frames one Keras call may take within ``budget`` bytes when it holds ``layer_output_bytes``
    per frame (every layer output of the call: a training-mode batch-norm pass, or an eager call of
    a functional model, keeps them until it returns), on top of the TensorFlow runtime; at least 1."""
    per_frame = BN_PASS_MARGIN * layer_output_bytes
    return max(1, int((budget - MAIN_PROCESS_BYTES) // max(per_frame, 1)))


def _onnx_conversion_note(path: Path, fp32: bytes, cal: CalibrationSet, warnings: list[str]) -> str:
    """How closely the FP32 TFLite made by onnx2tf computes the ONNX model (onnxruntime), on the
    held-out samples; a relative gap above :data:`ONNX_GAP_WARN` is also a warning."""
    from .onnx_input import conversion_gap

    gap, scale = conversion_gap(path, fp32, cal.samples("heldout"))
    n = cal.size("heldout")
    if gap > ONNX_GAP_WARN * max(scale, 1e-12):
        warnings.append(f"{path.name}: the converted FP32 model differs from onnxruntime by up to {gap:.3g} "
                        f"(outputs up to {scale:.3g}) on {n} held-out samples")
    return (f"from the model file (ONNX converted by onnx2tf; FP32 TFLite vs onnxruntime: max |diff| "
            f"{gap:.2g} on {n} held-out samples)")


def quantize_prepared(prep: Prepared, out: str | os.PathLike[str], *, scheme: str = "per-channel",
                      io: str | None = None, threads: int = 2, runs: int = 30, warmup: int = 5,
                      allow_float_ops: bool = False, measure_latency_: bool = True,
                      compact: bool = True, calib_workers: int | None = None,
                      rewrite: bool = True, mixed: str = "off",
                      progress: Callable[[str], None] | None = None) -> QuantizeReport:
    """Quantize a :class:`Prepared` model with one scheme, write ``out`` and report (see :func:`quantize`)."""
    io = check_options(scheme, io, threads, runs, warmup, calib_workers, mixed)
    say = progress or (lambda _msg: None)
    src, cal, peaks = prep.src, prep.cal, prep.peaks
    if scheme in INTEGER_SCHEMES:
        warnings = list(prep.warnings)
        say(f"quantizing ({scheme}, {cal.size()} calibration samples)")
    else:  # fp16 and dynamic read no calibration data: no warning about it
        warnings = [w for w in prep.warnings if w not in cal.notes]
        if cal.source == "synthetic":
            warnings.append(f"the {scheme} scheme uses no calibration data; its fidelity figures compare "
                            "outputs on synthetic held-out inputs")
        say(f"quantizing ({scheme}, no calibration data)")
    out_path = Path(out)
    plan = _calibration_plan(prep, scheme, calib_workers, warnings)
    say(f"quantizing ({scheme}, {cal.size()} calibration samples"
        + (f", batches of {plan.batch} on {plan.workers} process{'es' if plan.workers != 1 else ''})" if plan else ")"))
    t0 = time.perf_counter()
    calib_info: dict[str, Any] = {}
    integer = scheme in INTEGER_SCHEMES
    store: dict[str, Any] | None = {} if integer and mixed == "auto" else None

    quantized = functools.partial(_convert_int8, src, scheme, cal, io, plan, compact=compact, rewrite=rewrite,
                                  store=store)
    converted, as_converted, qbytes, rewrites, n_rsqrt = quantized(calib_info=calib_info)
    peaks.after(f"the {scheme} TFLite conversion" + (" (calibration, quantization)" if integer else ""))
    # compacted only now: a second copy of the FP32 reference is not held through the conversion
    fp32 = compact_model(prep.fp32, f"{src.name} (FP32)") if compact else prep.fp32
    if n_rsqrt:
        warnings.append(f"{n_rsqrt} integer DIV(1, SQRT(x)) rewritten as RSQRT(x) (LiteRT's integer DIV "
                        "refuses a zero divisor; RSQRT takes it)")
    conversion_s = time.perf_counter() - t0
    ops = analyse_tflite(qbytes, src.name)
    if scheme in INTEGER_SCHEMES and ops.float_ops and not allow_float_ops:
        _refuse_float_ops(ops, src.name)
    mixed_info = None
    if integer and mixed == "auto":
        say("choosing operators to keep in float (mixed precision)")
        qbytes, mixed_info = _mixed_precision(src, cal, fp32, qbytes, lambda names: quantized(float_nodes=names)[2],
                                              threads, runs, warmup, as_converted, warnings)
        ops = analyse_tflite(qbytes, src.name)
        peaks.after("the mixed-precision trials")
    say("comparing with FP32 on held-out inputs")
    fidelity = _fidelity(src, fp32, qbytes, cal, threads) if cal.size("heldout") else None
    peaks.after("the fidelity comparison")
    if fidelity is None:
        warnings.append("no held-out samples: fidelity not measured")
    if measure_latency_:
        say("timing FP32 vs quantized inference")
    latency = _latency_report(fp32, qbytes, cal, threads, runs, warmup) if measure_latency_ else None
    peaks.after("the latency measurement")
    delegation, summary, slow_or_split = None, None, False
    if integer:
        say("reading which operators XNNPACK runs")
        delegation = delegation_report(fp32, as_converted, qbytes, rewrites, threads,
                                       runs if measure_latency_ else 0, warmup)
        summary, slow_or_split = speed_summary(delegation, latency, mixed_info, mixed, rewrite)
    peak = peaks.after("the delegate analysis")
    warnings.extend(peaks.over_budget(prep.memory_budget))
    report = QuantizeReport(
        model=src.name, weights=prep.weights, scheme=scheme, io=io, output=str(out_path),
        output_sha256=sha256_bytes(qbytes), conversion_s=conversion_s,
        calibration=_calibration_info(prep, scheme, calib_info, plan),
        sizes=SizeInfo(fp32_bytes=len(fp32), quantized_bytes=len(qbytes), ratio=len(qbytes) / len(fp32),
                       converter_bytes=len(converted), compacted=compact,
                       weight_bytes_by_type=ops.weight_types, per_channel_tensors=ops.per_channel_tensors),
        ops=_ops_info(ops), fidelity=fidelity, latency=latency, warnings=warnings,
        peak_rss_bytes=peak, peak_stage=peaks.stage, helper_peak_rss_bytes=calib_info.get("helper_peak_rss"),
        transposes=TransposeInfo(fp32=analyse_tflite(fp32, f"{src.name} (FP32)").op_counts().get("TRANSPOSE", 0),
                                 quantized=ops.op_counts().get("TRANSPOSE", 0)),
        delegation=delegation, mixed=mixed_info, summary=summary, summary_warns=slow_or_split)
    atomic_write_bytes(out_path, qbytes)
    return report


def _calibration_info(prep: Prepared, scheme: str, calib_info: dict[str, Any], plan: Any) -> CalibrationInfo:
    """The report's calibration section: what was asked, used and planned within the budget."""
    cal = prep.cal
    return CalibrationInfo(source=cal.source, samples_requested=prep.samples_requested,
                           samples_used=cal.size() if scheme in INTEGER_SCHEMES else 0,
                           heldout=cal.size("heldout"), seed=prep.seed,
                           batch=calib_info.get("batch"), workers=calib_info.get("workers"),
                           threads=calib_info.get("threads"), memory_budget_bytes=prep.memory_budget,
                           frame_bytes=plan.frame_bytes if plan else None,
                           estimated_peak_bytes=(plan.estimate(calib_info.get("workers"), calib_info.get("batch"))
                                                 if plan else None))


def _calibration_plan(prep: Prepared, scheme: str, calib_workers: int | None, warnings: list[str]) -> Any:
    """Batch and processes of an integer scheme's calibration (None for a ``.tflite`` source or a
    scheme without calibration); a plan over ``--memory-budget`` adds a warning."""
    src, cal = prep.src, prep.cal
    if scheme not in INTEGER_SCHEMES or src.tflite is not None:
        return None
    plan = plan_calibration(cal.size(), prep.memory_budget, frame_bytes_of(prep.fp32, cal.frame_bytes()),
                            len(prep.fp32), calib_workers)
    if plan.estimate() > plan.budget_bytes:
        warnings.append(f"calibrating in batches of {plan.batch} on {plan.workers} process"
                        f"{'es' if plan.workers != 1 else ''} needs about {plan.estimate() / 1e9:.1f} GB, "
                        f"more than --memory-budget {plan.budget_bytes / 1e9:.1f} GB")
    return plan


def _refuse_float_ops(ops: OpsAnalysis, name: str) -> None:
    first = ops.float_ops[0]
    names = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in Counter(o.op for o in ops.float_ops).items())
    raise UnsupportedOperatorError(
        f"{name}: TFLite cannot quantize operator {first.op} (output {first.output!r}) to int8; "
        f"left in float: {names}. Use --allow-float-ops to keep them in float, or --scheme dynamic")


def _convert_int8(src: ModelSource, scheme: str, cal: CalibrationSet, io: str, plan: Any, *, compact: bool,
                  rewrite: bool, store: dict[str, Any] | None, float_nodes: list[str] | None = None,
                  calib_info: dict[str, Any] | None = None) -> tuple[bytes, bytes, bytes, dict[str, int], int]:
    """Quantize (operators ``float_nodes`` kept in float), then for integer schemes rewrite
    ``DIV(1, SQRT)`` as ``RSQRT``, compact, and apply the XNNPACK rewrites. Returns the converter's
    bytes, the compacted model before the XNNPACK rewrites, the final model, the rewrite counts
    and the number of ``RSQRT`` rewrites."""
    converted = convert_quantized(src, scheme, cal, io, plan, calib_info=calib_info, float_nodes=float_nodes,
                                  calibrated=store)
    integer, n_rsqrt = scheme in INTEGER_SCHEMES, 0
    if integer:
        converted, n_rsqrt = reciprocal_sqrt_as_rsqrt(converted, src.name)
    as_converted = compact_model(converted, src.name) if compact else converted
    final, rewrites = (rewrite_for_xnnpack(as_converted, src.name) if integer and rewrite else (as_converted, {}))
    return converted, as_converted, final, rewrites, n_rsqrt


def _mixed_precision(src: ModelSource, cal: CalibrationSet, fp32: bytes, full: bytes,
                     requantize: Callable[[list[str]], bytes], threads: int, runs: int,
                     warmup: int, before: bytes | None = None,
                     warnings: list[str] | None = None) -> tuple[bytes, MixedInfo]:
    """The model :func:`.mixed.choose_float_ops` keeps (``--mixed auto``) and its report; ``before``:
    ``full`` before the XNNPACK rewrites; a busy host during the trials is added to ``warnings``."""
    chosen = choose_float_ops(full, fp32, requantize, _timing_sample(cal),
                              lambda m: _trial_sqnr(src, fp32, m, cal, threads), threads, runs, warmup, before)
    info = MixedInfo(
        mode="auto", float_op_counts=dict(Counter(o.op for o in analyse_tflite(chosen.model, src.name).float_ops)),
        int8_mac_share=int8_mac_share(chosen.model, src.name),
        trials=[MixedTrialInfo(op=t.op, ops=t.ops, current_ms=_finite(t.current_ms), candidate_ms=_finite(t.candidate_ms),
                               sqnr_db=t.sqnr_db, kept=t.kept, note=t.note, cpu_share=t.cpu_share)
                for t in chosen.trials])
    busy = busy_host_warning(info, threads)
    if busy and warnings is not None:
        warnings.append(busy)
    return chosen.model, info


#: below this :attr:`.evaluate.LatencyStats.cpu_share`, other processes took enough of the cores
#: to change which of two models times faster (more operators lose more to preemption)
BUSY_CPU_SHARE = 0.8


def busy_host_warning(info: MixedInfo, threads: int) -> str | None:
    """One line when the host was busy during the ``--mixed auto`` trials, else None."""
    shares = [t.cpu_share for t in info.trials if t.cpu_share is not None]
    if not shares or min(shares) >= BUSY_CPU_SHARE:
        return None
    return (f"--mixed auto: the host was busy during the timing trials (the timing thread ran {100 * min(shares):.0f} % "
            f"of the time, {threads} threads): which operators stay in float may differ on an idle host; quantize "
            "again when the host is idle")


def _timing_sample(cal: Any) -> dict[str, np.ndarray]:
    """The first held-out (else calibration) sample: the input latency is timed on."""
    return cal.batch("heldout" if cal.size("heldout") else "calib", 0, 1)


def _latency_report(fp32: bytes, qbytes: bytes, cal: Any, threads: int, runs: int, warmup: int) -> LatencyReport:
    """Median and p90 latency of the FP32 and the quantized model on one held-out (else
    calibration) sample, on this host with LiteRT, timed interleaved."""
    lat_f, lat_q = measure_latency_pair(TfliteRunner(fp32, threads), TfliteRunner(qbytes, threads),
                                        _timing_sample(cal), runs, warmup)
    return LatencyReport(
        threads=threads,
        fp32=LatencyInfo(median_ms=lat_f.median_s * 1e3, p90_ms=lat_f.p90_s * 1e3, runs=runs, warmup=warmup),
        quantized=LatencyInfo(median_ms=lat_q.median_s * 1e3, p90_ms=lat_q.p90_s * 1e3, runs=runs, warmup=warmup),
        speedup=lat_f.median_s / lat_q.median_s)


def _tflite_io(asked: str | None, name: str) -> str:
    """A float ``.tflite`` input keeps float inputs/outputs (ai-edge-quantizer's static recipes)."""
    if asked == "int8":
        raise ConfigError(f"--io int8 is not available for a .tflite input ({name}): its quantized "
                          "model keeps float inputs and outputs; leave --io out or give --io float")
    return "float"


def _is_npz(calib: str | os.PathLike[str]) -> bool:
    return str(calib).lower().endswith(".npz")


def _ops_info(ops: OpsAnalysis) -> OpsInfo:
    def entries(items: list[Any]) -> list[OpEntry]:
        return [OpEntry(index=o.index, op=o.op, tensor=o.output) for o in items]

    return OpsInfo(total=len(ops.ops), counts=ops.op_counts(), float_ops=entries(ops.float_ops),
                   conversion_ops=entries(ops.conversion_ops), io_conversion_ops=entries(ops.io_ops),
                   cpu_fallback_counts=dict(Counter(o.op for o in ops.cpu_fallback)),
                   cpu_segments=ops.cpu_segments)


def _finite(x: float) -> float | None:
    return x if np.isfinite(x) else None


#: held-out samples a mixed-precision trial's SQNR is measured on
TRIAL_SAMPLES = 10


def _trial_sqnr(src: ModelSource, fp32: bytes, candidate: bytes, cal: CalibrationSet, threads: int) -> float | None:
    """Lowest SQNR over the outputs of ``candidate`` against FP32 on the first held-out samples."""
    if not cal.size("heldout"):
        return None
    info = _fidelity(src, fp32, candidate, cal, threads, TRIAL_SAMPLES)
    values = [o.sqnr_db for o in info.outputs if o.sqnr_db is not None]
    return min(values) if values else None


def _delegate_info(data: bytes, threads: int, runs: int, warmup: int) -> DelegateInfo:
    """:class:`DelegateInfo` of ``data``; segments timed when ``runs`` > 0."""
    d = host_delegation(data, threads)
    outside = [OpEntry(index=o.index, op=o.op, tensor=o.output) for o in d.outside]
    if runs <= 0:
        return DelegateInfo(delegate=d.delegate, partitions=d.partitions, ops_total=len(d.ops),
                            ops_outside=d.outside_counts(), outside=outside)
    t = time_segments(data, threads, runs, warmup, d)
    return DelegateInfo(delegate=d.delegate, partitions=d.partitions, ops_total=len(d.ops),
                        ops_outside=d.outside_counts(), outside=outside, whole_ms=t.whole_ms,
                        segments=[SegmentTime(segment=s.label, ops=len(s.ops), op_counts=s.op_counts,
                                              delegated=s.delegated, median_ms=s.median_ms) for s in t.segments])


def delegation_report(fp32: bytes, converted: bytes, quantized: bytes, rewrites: dict[str, int], threads: int,
                      runs: int, warmup: int = 3) -> DelegationReport:
    """Host-delegate placement (and, when ``runs`` > 0, segment times) of the FP32 reference, the
    quantizer's model and the final model."""
    return DelegationReport(threads=threads, fp32=_delegate_info(fp32, threads, runs, warmup),
                            converted=_delegate_info(converted, threads, runs, warmup),
                            quantized=_delegate_info(quantized, threads, runs, warmup), rewrites=rewrites)


def _outside_text(info: DelegateInfo) -> str:
    """``HARD_SWISH x24 (17.7 ms), ...``: operators outside the delegate, slowest first."""
    times: dict[str, float] = {}
    for seg in info.segments or []:
        if not seg.delegated:
            times[seg.segment] = times.get(seg.segment, 0.0) + seg.median_ms
    items = sorted(info.ops_outside.items(), key=lambda kv: (-times.get(kv[0], 0.0), -kv[1]))
    return ", ".join(f"{op} x{n}" + (f" ({times[op]:.2f} ms)" if op in times else "") for op, n in items)


def speed_summary(delegation: DelegationReport, latency: LatencyReport | None, mixed_info: MixedInfo | None,
                  mixed: str, rewrite: bool = True) -> tuple[str, bool]:
    """One line: host speed-up and partitions of the final model, the operators XNNPACK left out
    (those of the quantizer's model when the final one is clean) and what was done about them;
    and whether the final model is slower than FP32 or split into more than
    :data:`~.delegation.FEW_PARTITIONS` partitions."""
    final, before = delegation.quantized, delegation.converted
    slow = latency is not None and latency.speedup < 1.0
    split = final.partitions > FEW_PARTITIONS
    speed = f"x{latency.speedup:.2f} the FP32 speed" if latency is not None else "not timed"
    if slow or split:
        head = (f"INT8 is slower than FP32 on this host ({speed}, {final.partitions} {final.delegate} partitions)"
                if slow else f"INT8 splits into {final.partitions} {final.delegate} partitions ({speed})")
        cause = f"; outside {final.delegate}: {_outside_text(final) or 'none'}"
    else:
        where = f"in {final.partitions} {final.delegate} partition" + ("s" if final.partitions != 1 else "")
        head = (f"INT8 runs at {speed} on this host {where}" if latency is not None
                else f"INT8 runs {where} on this host (speed not timed)")
        cause = (f"; the quantizer's model had {before.partitions} partitions, outside {before.delegate}: "
                 f"{_outside_text(before)}" if before.ops_outside else "")
    done = [] if rewrite or not (slow or split) else ["XNNPACK rewrites are off (--no-rewrite)"]
    if delegation.rewrites:
        done.append("rewrote " + ", ".join(f"{k} x{v}" for k, v in delegation.rewrites.items()))
    if mixed_info is not None and mixed_info.float_op_counts:
        done.append("kept in float " + ", ".join(f"{k} x{v}" for k, v in mixed_info.float_op_counts.items())
                    + f" ({100 * mixed_info.int8_mac_share:.1f} % of MACs in INT8)")
    elif mixed == "off" and final.ops_outside and (slow or split):
        done.append("--mixed auto may keep them in float")
    return head + cause + ("; " + "; ".join(done) if done else ""), slow or split


def _fidelity(src: ModelSource, fp32: bytes, qbytes: bytes, cal: CalibrationSet, threads: int,
              limit: int | None = None) -> FidelityInfo:
    """SQNR, max |error| and top-1 agreement of ``qbytes`` against ``fp32``, accumulated sample by
    sample over the held-out set (its first ``limit`` samples when given; no outputs are kept)."""
    ref_runner, q_runner = TfliteRunner(fp32, threads), TfliteRunner(qbytes, threads)
    stats: dict[str, FidelityStats] = {}
    n = 0
    for sample in cal.samples("heldout"):
        if limit is not None and n >= limit:
            break
        n += 1
        ref, got = ref_runner.run(ref_runner.feed(sample)), q_runner.run(q_runner.feed(sample))
        for name, r in ref.items():
            is_classifier = (src.task == "classification" if src.task is not None
                             else r.ndim == 2 and r.shape[1] > 1)
            stats.setdefault(name, FidelityStats(is_classifier and r.ndim >= 2)).add(r, got[name])
    outputs = []
    for name in sorted(stats):
        st = stats[name]
        s = st.sqnr_db()
        outputs.append(OutputFidelity(output=name, sqnr_db=s if np.isfinite(s) else None,
                                      max_abs_error=st.max_abs_error, top1_agreement=st.top1_agreement()))
    return FidelityInfo(samples=n, outputs=outputs)
