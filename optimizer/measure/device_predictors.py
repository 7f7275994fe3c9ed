"""A device's predictors from end to end (``dnnplan calibrate --probes/--validate``): pick the
runner, run the probe campaign, validate on whole networks and write the probe table and the
device file that names it.

The probe table of a campaign in progress lives in the cache (``results/cache/probes/``, or
``--table``), rewritten after every group, so an interrupted campaign resumes; the finished table
is copied beside the output device file (``<out stem>.probes/<runtime>-<dtype>-t<threads>.csv.gz``)
and named, relative to it, in the processor's ``predictors`` list
(:class:`optimizer.hardware.schema.Predictor`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..cost.predicted import family_seconds, load_predictor_table
from ..cost.predictor import broadcast_runs, held_out_errors
from ..cost.probe_table import ProbeTable, write_probe_table
from ..errors import ConfigError
from ..graph.layergraph import LayerGraph
from ..hardware.schema import Device, Predictor, ValidatedBand
from .artifacts import cache_dir
from .probe_campaign import InProcess, ProbeRunner
from .probe_runner import IN_PROCESS, in_process_runner
from .profile_fit import edit_processor_yaml
from .validate import NetworkResult, isolated_layer_times, runtime_artifact, time_networks

RUNNERS = ("litert", "ort", "adb", "cmd")


@dataclass(frozen=True)
class RunnerSettings:
    """How probes and networks are timed: the runner and its options."""

    runner: str = "litert"
    threads: int = 1
    measure_cmd: str | None = None
    runtime: str | None = None  # cmd: the runtime the command runs
    fmt: str = "tflite"  # cmd: probe model format
    delegate: str = "xnnpack"  # litert: xnnpack or cpu (built-in kernels); adb: benchmark_model delegate
    serial: str | None = None  # adb: device serial


def make_runner(settings: RunnerSettings, device: Device, processor: str, folder: Path) -> ProbeRunner:
    """The campaign runner of ``settings`` (:data:`RUNNERS`)."""
    if settings.threads < 1:
        raise ConfigError(f"--threads {settings.threads}: need at least 1")
    if settings.runner in IN_PROCESS:
        return InProcess(in_process_runner(settings.runner, settings.threads, settings.delegate))
    from .probe_remote import AdbProbeRunner, CmdProbeRunner

    if settings.runner == "adb":
        return AdbProbeRunner(folder, settings.threads, settings.delegate, settings.serial)
    if settings.runner == "cmd":
        if not settings.measure_cmd:
            raise ConfigError("--runner cmd needs --measure-cmd COMMAND (the JSON-lines protocol of PROTOCOL.md)")
        return CmdProbeRunner(settings.measure_cmd, settings.runtime or device.runtime, settings.fmt,
                              settings.threads, processor, folder)
    raise ConfigError(f"--runner {settings.runner!r}; expected one of {', '.join(RUNNERS)}")


def runner_runtime(settings: RunnerSettings, device: Device) -> str:
    """The runtime name a runner's tables and device entries carry."""
    if settings.runner in IN_PROCESS:
        return in_process_runner(settings.runner, settings.threads, settings.delegate).runtime
    if settings.runner == "adb":
        from .probe_remote import DELEGATES

        if settings.delegate not in DELEGATES:
            raise ConfigError(f"--delegate {settings.delegate!r}; expected one of {', '.join(DELEGATES)}")
        return DELEGATES[settings.delegate][0]
    if settings.runner == "cmd":
        return settings.runtime or device.runtime
    raise ConfigError(f"--runner {settings.runner!r}; expected one of {', '.join(RUNNERS)}")


def work_table(device: Device, processor: str, settings: RunnerSettings, dtype: str, seed: int) -> Path:
    """Where a campaign keeps its probe table while it runs (resumable)."""
    runtime = runner_runtime(settings, device)
    name = f"{device.name}-{processor}-{settings.runner}-{runtime}-{dtype}-t{settings.threads}-s{seed}.csv.gz"
    return cache_dir() / "probes" / name


def work_folder(table: Path) -> Path:
    """The folder beside a campaign's table for a phone's probe models and logs."""
    name = table.name
    for suffix in (".csv.gz", ".csv", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return table.parent / name


def family_report(table: ProbeTable, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per kernel family: probes and the held-out error of its predictor (median and 90th
    percentile of ``|predicted / measured - 1|`` over a 4-fold split of the probes)."""
    configs = table.configs()
    err = np.abs(held_out_errors(configs, table.latency_s, table.dtype, seed=seed,
                                 runs=broadcast_runs(table.runtime, table.dtype)))
    fams = np.array([c.family for c in configs])
    return {f: {"probes": int((fams == f).sum()), "median_abs_error": float(np.median(err[fams == f])),
                "p90_abs_error": float(np.percentile(err[fams == f], 90))} for f in sorted(set(fams))}


def with_predictor(device: Device, processor: str, entry: Predictor) -> Device:
    """A copy of ``device`` whose ``processor`` has ``entry`` in place of any predictor of the same
    runtime, dtype and threads."""
    procs = []
    for p in device.processors:
        if p.name == processor:
            keep = [q for q in p.predictors if (q.runtime, q.dtype, q.threads) != (entry.runtime, entry.dtype, entry.threads)]
            p = p.model_copy(update={"predictors": [*keep, entry]})
        procs.append(p)
    return device.model_copy(update={"processors": procs})


def entry_for(device: Device, processor: str, runtime: str, dtype: str, threads: int) -> Predictor:
    """The device's predictor of ``processor`` for runtime, dtype and threads, or a one-line error."""
    proc = device.processor(processor)
    entry = proc.predictor(runtime, dtype, threads)
    if entry is None:
        listed = ", ".join(f"{q.runtime}/{q.dtype}/{q.threads}" for q in proc.predictors) or "none"
        raise ConfigError(f"device {device.name!r} processor {processor!r} has no {runtime}/{dtype}/{threads}-thread "
                          f"predictor (it lists {listed}); measure one with --probes N")
    return entry


def prepare_validation(models: Sequence[str], fmt: str, dtype: str, load: Callable[[str], LayerGraph],
                       runner: Any) -> list[tuple[str, LayerGraph, Path]]:
    """(model, graph, runtime file) of every validation model, each loaded once in ``runner``
    so a model the runner cannot run is refused before any probe is timed."""
    out = []
    for m in models:
        graph = load(m)
        path = runtime_artifact(m, graph, fmt, dtype)
        if runner is not None:
            runner.load(path)
        out.append((m, graph, path))
    return out


def validate_networks(device: Device, processor: str, runner: Any, dtype: str,
                      prepared: Sequence[tuple[str, LayerGraph, Path]], *, per_family: bool = True,
                      seed: int = 0) -> list[NetworkResult]:
    """Measure every prepared network on ``runner`` (interleaved) and predict it with the
    device's predictor; per kernel family where ``per_family`` (:func:`measured_layer_times`).
    What is priced is the runtime file, the operators that run (an exporter's decompositions, the
    float operators a quantized file keeps), not the model's own graph."""
    from ..cost import build_cost_table
    from ..graph.loader import load_graph

    j = device.processor_index(processor)
    raw, levelled = time_networks(runner, [p for _, _, p in prepared], dtype, seed=seed,
                                  shapes=[dict(g.served_input_shapes) if g.served_input_shapes else None
                                          for _, g, _ in prepared])
    entry = device.processors[j].predictor(runner.runtime, dtype, runner.threads)
    table = load_predictor_table(entry) if entry is not None else None
    overhead = table.invoke_overhead_s if table is not None else 0.0
    level = table.reference_s if table is not None else None
    # networks put on the table's level: the host's drift since the campaign left out
    timings = levelled.on_level(level) if level else raw
    ratio = levelled.level_s / level if level else float("nan")
    out = []
    for (m, graph, path), t, r in zip(prepared, timings, raw, strict=True):
        file_graph = load_graph(str(path), input_shapes=dict(graph.served_input_shapes)
                                if graph.served_input_shapes else None)
        ct = build_cost_table(file_graph, device, dtype, "predicted", runtime=runner.runtime)
        predicted = float(ct.whole_network_latency()[j])
        meas_f: dict[str, float] = {}
        pred_f: dict[str, float] = {}
        if per_family:
            pred_f = family_seconds(file_graph, device, dtype, processor, runner.runtime)
            times = measured_layer_times(runner, path, file_graph, overhead, dtype, level, ratio, seed)
            meas_f = measured_families(file_graph, times, runner.runtime, dtype)
        out.append(NetworkResult(m, t, predicted, meas_f, pred_f, r.median_s, ratio))
    return out


def measured_layer_times(runner: Any, path: Path, graph: LayerGraph, overhead_s: float, dtype: str,
                         level: float | None, ratio: float, seed: int = 0) -> np.ndarray:
    """[L] measured seconds of every layer of ``graph`` (imported from ``path``) on the table's
    ``level``: onnxruntime's node profiler on the whole network, its kernels attributed to layers
    and put on the level by the networks' level ``ratio`` (:func:`optimizer.measure.ort_profile.measure_ort`;
    a QDQ file's operator cut out of its network would run as a float operator, not as its
    ``QLinear*`` kernel); LiteRT's operators each timed alone
    (:func:`optimizer.measure.validate.isolated_layer_times`)."""
    if runner.fmt == "onnx":
        from .ort_profile import measure_ort

        times = measure_ort(graph, path, threads=runner.threads, seed=seed).table.rows["latency_s"].to_numpy()
        return times / ratio if np.isfinite(ratio) and ratio > 0 else times
    return isolated_layer_times(runner, path, graph, overhead_s, seed=seed, level=(dtype, level) if level else None)


def conversions_charged(graph: LayerGraph, seconds: np.ndarray, kernels: Sequence[Sequence[Any]]) -> np.ndarray:
    """``seconds`` [L] with the measured time of a QDQ file's conversions that run as kernels of
    their own (a ``DequantizeLinear`` into a float operator, the ``QuantizeLinear`` out of it)
    charged to that operator, as its probe and its price include them
    (:mod:`optimizer.cost.fusion`); a conversion next to no priced operator keeps its time."""
    from ..cost.fusion import QDQ_KINDS
    from ..graph.kernel_config import canonical_kind

    out = np.array(seconds, dtype=np.float64)
    n = len(graph.layers)
    for i, la in enumerate(graph.layers):
        kind = canonical_kind(la.op_type)
        if (kernels[i] or kind not in QDQ_KINDS or not np.isfinite(out[i]) or out[i] <= 0
                or not la.inputs or la.inputs[0] not in graph.tensors):  # a weight's conversion: folded away
            continue
        if kind == "dequantize":
            near = [c for t in la.outputs if t in graph.tensors for c in graph.tensors[t].consumers if c < n]
        else:
            near = [graph.tensors[t].producer for t in la.inputs[:1] if t in graph.tensors]
        target = next((j for j in near if j >= 0 and kernels[j]), None)
        if target is not None and np.isfinite(out[target]):
            out[target] += out[i]
            out[i] = 0.0
    return out


def measured_families(graph: LayerGraph, seconds: np.ndarray, runtime: str, dtype: str) -> dict[str, float]:
    """Seconds per kernel family of the layers a runtime runs as kernels at ``dtype`` (folded ones
    left out; conversions charged to their operator, :func:`conversions_charged`), the kernels
    :func:`optimizer.cost.predicted.family_seconds` prices."""
    from ..cost.fusion import runtime_kernels

    out: dict[str, float] = {}
    kernels = runtime_kernels(graph, runtime, dtype)
    for kernels_i, s in zip(kernels, conversions_charged(graph, seconds, kernels), strict=True):
        if kernels_i and np.isfinite(s):
            out[kernels_i[0].family] = out.get(kernels_i[0].family, 0.0) + float(s)
    return out


def final_table_path(out_yaml: str, runtime: str, dtype: str, threads: int) -> Path:
    """Where the finished table goes beside the output device file."""
    out = Path(out_yaml)
    stem = out.name.rsplit(".", 1)[0]
    return out.parent / f"{stem}.probes" / f"{runtime}-{dtype}-t{threads}.csv.gz"


def write_predictor(device_path: str, out_yaml: str, processor: str, table: ProbeTable, entry: Predictor,
                    note: str) -> Path:
    """Copy ``table`` beside ``out_yaml`` and write the device file with ``entry`` (its ``table``
    relative to the output) in ``processor``'s predictors; returns the table's path."""
    from .profile_fit import write_device_yaml

    dest = final_table_path(out_yaml, entry.runtime, entry.dtype, entry.threads)
    from ..fileio import active_transaction

    tx = active_transaction()
    if tx is not None and not tx.owns(dest):
        tx.add(dest, "probe table")
    write_probe_table(table, dest)
    rel = os.path.relpath(dest, Path(out_yaml).parent)
    values = entry.model_dump(exclude_none=True, exclude_defaults=True)
    values.update({"runtime": entry.runtime, "dtype": entry.dtype, "threads": entry.threads, "table": rel})

    def edit(proc: Any) -> None:
        items = [q for q in (proc.get("predictors") or []) if (q.get("runtime"), q.get("dtype"), q.get("threads"))
                 != (entry.runtime, entry.dtype, entry.threads)]
        proc["predictors"] = [*items, values]

    write_device_yaml(out_yaml, edit_processor_yaml(device_path, processor, edit, note, out_yaml))
    return dest


def band_of(results: Sequence[NetworkResult], runner: str) -> ValidatedBand:
    """The validated band of ``results``."""
    from .validate import validation_band

    return ValidatedBand.model_validate(validation_band(results, runner))
