"""Measured pipeline search on this host: candidate mappings run for real, one core per stage.

Park & Ha's device-in-the-loop fitness (docs/METHODS.md section 2), with this workstation as the device:
the processors of ``search_spaces/devices/host_cores.yaml`` are its cores (``cpu0``, ``cpu1``),
and a candidate mapping (consecutive layer ranges on distinct cores) is measured by executing
it with the reference runtime (:func:`optimizer.runtime.run_plan`: one thread per stage,
bounded queues, each stage a one-thread LiteRT interpreter pinned to its own CPU). The runtime
pins processor ``cpuK`` to the ``K``-th CPU this process may use (:func:`optimizer.runtime.core_groups`);
the cores are alike, so a mapping and its core-swapped twin measure the same thing.

Affordability: every distinct stage (model, op range, dtype) is extracted as a part with
:class:`~optimizer.plan.keras_submodels.KerasCutter` and converted once; the ``.tflite`` and its I/O
specs are stored content-addressed (SHA-256 of the stage's identity) under ``cache_dir`` and
reused across candidates and across runs; each stage's ``.json`` records its ``.tflite``'s SHA-256,
checked on every use (a damaged or altered entry is converted again, with a warning). A candidate's artifacts directory only links the
cached stage files and writes a manifest. The cache is bounded (``cache_limit_mb``, 2 GiB by
default): entries not used by the running search are evicted least recently used first. INT8 stages are calibrated with the float
activations of the preceding layers on synthetic inputs (enough for timing; unlike
``dnnplan export`` they are not aligned to the single-file INT8 model).

Measured throughput = median (or best) of ``repeats`` runs of ``frames`` frames (interpreters
warmed up before each timed run), which damps the noise of other processes sharing the cores.
Plug it into the GA with :class:`optimizer.search.evaluators.MeasuredEvaluator`, whose
JSON-lines cache makes an interrupted search resume without measuring anything twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, MeasurementError
from ..confine import inside
from ..fileio import atomic_write_json, sha256_bytes, sha256_file
from ..graph.layergraph import LayerGraph
from ..plan.manifest import MANIFEST_FILE

DEFAULT_CACHE_DIR = Path("results/cache/host_stages")
DEFAULT_CACHE_LIMIT_MB = 2048
CACHE_VERSION = 2  # 2: a stage's .json records its .tflite's SHA-256
HOST_DEVICE = "host_cores"


def cache_bytes(cache_dir: str | os.PathLike[str]) -> int:
    """Disk bytes under ``cache_dir``, each file counted once however many hard links it has."""
    seen: dict[tuple[int, int], int] = {}
    for root, _dirs, files in os.walk(cache_dir):
        for f in files:
            try:
                st = os.stat(os.path.join(root, f))
            except FileNotFoundError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def _cache_entries(cache: Path) -> list[tuple[float, list[Path]]]:
    """``(last use, paths)`` of every stage (``.tflite`` + ``.json``) and candidate directory."""
    entries = []
    for meta in cache.glob("*.json"):
        with contextlib.suppress(FileNotFoundError):
            entries.append((meta.stat().st_mtime, [meta.with_suffix(".tflite"), meta]))
    for run in (cache / "runs").glob("*"):
        manifest = run / MANIFEST_FILE
        if run.is_dir() and manifest.is_file():
            with contextlib.suppress(FileNotFoundError):
                entries.append((manifest.stat().st_mtime, [run]))
    return sorted(entries, key=lambda e: e[0])


def prune_stage_cache(cache_dir: str | os.PathLike[str], max_bytes: int, *,
                      keep_since: float | None = None) -> list[Path]:
    """Evict least recently used stages and candidate directories until ``cache_dir`` holds at
    most ``max_bytes`` (hard links counted once); entries used at or after ``keep_since`` (a
    ``time.time()``) stay, so a running search never loses what it is measuring.

    Last use is the modification time of a stage's ``.json`` / a candidate's ``manifest.json``
    (touched on every cache hit). Returns the removed paths, oldest first.
    """
    cache = Path(cache_dir)
    if not cache.is_dir() or cache_bytes(cache) <= max_bytes:
        return []
    removed: list[Path] = []
    for used, paths in _cache_entries(cache):
        if keep_since is not None and used >= keep_since:
            break
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        removed.extend(paths)
        if cache_bytes(cache) <= max_bytes:
            break
    return removed


def check_host_device(device: Any) -> None:
    """Refuse devices whose processors are not single cores of this host.

    ``device`` is a :class:`optimizer.hardware.Device`; every processor must be a one-core CPU
    and there must be no more of them than CPUs this process may use.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    bad = [p.name for p in device.processors if p.kind != "cpu" or int(getattr(p, "cores", 1)) != 1]
    if bad:
        raise ConfigError(f"--measure host: device {device.name!r} has processors {bad} that are not "
                          f"one-core CPUs of this host; use --device {HOST_DEVICE}")
    if len(device.processors) > cpus:
        raise ConfigError(f"--measure host: device {device.name!r} has {len(device.processors)} "
                          f"processors but this process may use {cpus} CPU(s); use --device {HOST_DEVICE} "
                          "or a device listing at most that many cores")


def _verified_stage(path: Path, meta_path: Path) -> dict[str, Any] | None:
    """A cached stage's I/O specs when its ``.tflite`` has the SHA-256 its ``.json`` records; a
    damaged or altered entry is removed with a warning (and converted again), None on a miss."""
    if not (path.is_file() and meta_path.is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if isinstance(meta, dict) and meta.get("sha256") == sha256_file(path):
            return meta
    except (OSError, ValueError):
        pass
    warnings.warn(f"{path}: stage cache entry damaged or altered (SHA-256 differs from its record); "
                  "converting it again", stacklevel=3)
    path.unlink(missing_ok=True)
    meta_path.unlink(missing_ok=True)
    return None


def _verified_run(run_dir: Path) -> bool:
    """Whether a cached candidate folder's manifest reads and every part file has its SHA-256
    (else the folder is rebuilt)."""
    from ..errors import DnnplanError
    from ..plan.manifest import read_manifest

    try:
        read_manifest(run_dir)
    except DnnplanError:
        return False
    return True


class HostPipelineMeasurer:
    """``measure(decision) -> fps`` by running the candidate pipeline on this host's cores.

    Parameters
    ----------
    model : str
        Zoo name (built with weights seeded by ``seed``) or ``.keras`` file.
    graph : LayerGraph
        The network at the search's granularity (what the mapping's layer indices refer to).
    dtype : {"fp32", "fp16", "int8"}
        Stage precision.
    variant : dict, optional
        Zoo builder arguments (e.g. ``{"input_size": 96}``); must match ``graph``.
    device : str
        Device name written into the candidate plans.
    cache_dir : path-like
        Content-addressed stage cache (``<sha256>.tflite`` + ``<sha256>.json``) and per-candidate
        artifact directories (``runs/``).
    frames, repeats : int
        Frames per timed run and timed runs per measurement (the median is returned).
    seed : int
        Weight seed of zoo networks, seed of synthetic inputs and INT8 calibration data.
    calib_samples : int
        Synthetic calibration samples for INT8 stages.
    cache_limit_mb : float
        Size limit of ``cache_dir``: after each new stage or candidate the least recently used
        entries of earlier runs are evicted (:func:`prune_stage_cache`).
    statistic : {"median", "best"}
        How the runs of one measurement are summarised: their median fps, or the fastest run
        (the one least disturbed by other processes; the usual microbenchmark choice).

    Attributes
    ----------
    conversions : int
        Stage sub-models converted by this object (cache misses).
    runs : list of dict
        Every measurement made: ``stages``, ``fps`` (median), ``fps_runs``, ``predicted_fps``.
    """

    #: the workflow's pre-flight check of the device (:func:`check_host_device`)
    check_device = staticmethod(check_host_device)

    def __init__(self, model: str | os.PathLike[str], graph: LayerGraph, *, dtype: str = "fp32",
                 variant: dict[str, Any] | None = None, device: str = HOST_DEVICE,
                 cache_dir: str | os.PathLike[str] = DEFAULT_CACHE_DIR, frames: int = 30, repeats: int = 3,
                 seed: int = 0, calib_samples: int = 16, statistic: str = "median",
                 cache_limit_mb: float = DEFAULT_CACHE_LIMIT_MB) -> None:
        if dtype not in ("fp32", "fp16", "int8"):
            raise ConfigError(f"--dtype {dtype!r}: expected fp32, fp16 or int8")
        if frames < 2:
            raise ConfigError(f"--measure-frames {frames}: expected at least 2 frames per timed run")
        if repeats < 1:
            raise ConfigError(f"--measure-repeats {repeats}: expected at least 1 timed run")
        if statistic not in ("median", "best"):
            raise ConfigError(f"statistic {statistic!r}: expected 'median' or 'best'")
        if not cache_limit_mb > 0:
            raise ConfigError(f"--measure-cache-mb {cache_limit_mb}: expected a positive size in MB")
        self.cache_limit_bytes = int(cache_limit_mb * 1024 * 1024)
        self._started = time.time()
        self.statistic = statistic
        self.model = model
        self.graph = graph
        self.dtype = dtype
        self.variant = dict(variant or {})
        self.device = device
        self.cache_dir = Path(cache_dir)
        self.frames = frames
        self.repeats = repeats
        self.seed = seed
        self.calib_samples = calib_samples
        self.conversions = 0
        self.runs: list[dict[str, Any]] = []
        self._keras: Any = None
        self._op_graph: LayerGraph | None = None
        self._weight_seed: int | None = None
        self._cutter: Any = None
        self._calib: dict[str, np.ndarray] | None = None

    # ------------------------------------------------------------ plans
    def plan(self, stages: list[dict[str, Any]], predicted_fps: float | None = None) -> Any:
        """The pipeline :class:`~optimizer.plan.schema.Plan` of one decision's ``stages``
        (``processor``, ``first_layer``, ``last_layer``), one thread per stage."""
        from ..plan.schema import ModelRef, Plan, Predicted, SearchInfo, Stage, model_input_shapes, new_provenance

        g = self.graph
        ref = ModelRef(name=g.name, sha256=g.source_sha256, layers=len(g), granularity=g.granularity,
                       dtype=self.dtype, source=g.source or None, variant=self.variant,
                       input_shapes=model_input_shapes(g))
        sts = [Stage(processor=s["processor"], first_layer=int(s["first_layer"]), last_layer=int(s["last_layer"]),
                     threads=1, dtype=self.dtype) for s in stages]
        return Plan(kind="pipeline", model=ref, device=self.device, stages=sts,
                    predicted=Predicted(throughput_fps=predicted_fps),
                    search=SearchInfo(solver="host-measure",
                                      settings={"frames": self.frames, "repeats": self.repeats}),
                    provenance=new_provenance())

    # ------------------------------------------------------------ stage cache
    def _load(self, plan: Any) -> None:
        if self._keras is not None:
            return
        from ..plan.keras_model import load_plan_model
        from ..plan.keras_submodels import KerasCutter

        model = None if (self.graph.source or "").startswith("zoo:") else self.model
        self._keras, self._op_graph, self._weight_seed = load_plan_model(plan, model, seed=self.seed)
        self._cutter = KerasCutter(self._keras)
        if len(self._op_graph.with_granularity(self.graph.granularity)) != len(self.graph):
            raise ConfigError(f"{self.model}: the Keras model has "
                              f"{len(self._op_graph.with_granularity(self.graph.granularity))} "
                              f"{self.graph.granularity} layers, the searched graph {len(self.graph)}; "
                              "build both with the same variant")

    def _stage_key(self, first_op: int, end_op: int) -> str:
        ident = {"v": CACHE_VERSION, "model": self.graph.source_sha256 or str(self.model), "variant": self.variant,
                 "weight_seed": self._weight_seed, "ops": [first_op, end_op], "dtype": self.dtype,
                 "calib": [self.calib_samples, self.seed] if self.dtype == "int8" else None}
        return sha256_bytes(json.dumps(ident, sort_keys=True).encode("utf-8"))

    def _calibration(self, ins: list[str], first_op: int) -> list[np.ndarray]:
        from ..plan.calibration_data import calibration_inputs, predict_float

        assert self._op_graph is not None
        if self._calib is None:
            self._calib, _ = calibration_inputs(self._op_graph, "synthetic", self.calib_samples, self.seed)
        g = self._op_graph
        if first_op == 0:
            return [self._calib[t] for t in ins]
        prefix = self._cutter.submodel(g, 0, first_op, list(g.inputs), ins, "calib_prefix")
        return predict_float(prefix, [self._calib[t] for t in g.inputs])

    def stage_file(self, first_op: int, end_op: int) -> tuple[Path, dict[str, Any]]:
        """The cached ``.tflite`` of ops ``[first_op, end_op)`` and its I/O specs (converted on a miss)."""
        from ..plan.calibration_data import representative_dataset
        from ..plan.parts import part_io
        from ..plan.tflite_convert import convert_part, part_tensor_specs

        assert self._op_graph is not None
        path = inside(self.cache_dir, f"{self._stage_key(first_op, end_op)}.tflite", "stage cache key", single=True)
        meta_path = path.with_suffix(".json")
        meta = _verified_stage(path, meta_path)
        if meta is not None:
            os.utime(meta_path)  # last use, for prune_stage_cache
            return path, meta
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        ins, outs = part_io(self._op_graph, first_op, end_op)
        sub = self._cutter.submodel(self._op_graph, first_op, end_op, ins, outs, f"ops_{first_op}_{end_op}")
        rep = representative_dataset(self._calibration(ins, first_op)) if self.dtype == "int8" else None
        convert_part(sub, path, self.dtype, rep)
        self.conversions += 1
        meta = {"sha256": sha256_file(path),
                "inputs": [s.model_dump(mode="json") for s in part_tensor_specs(path, ins, "inputs")],
                "outputs": [s.model_dump(mode="json") for s in part_tensor_specs(path, outs, "outputs")]}
        atomic_write_json(meta_path, meta)
        prune_stage_cache(self.cache_dir, self.cache_limit_bytes, keep_since=self._started)
        return path, meta

    def artifacts(self, plan: Any) -> Path:
        """An artifacts directory for ``plan`` (cached stage files linked, manifest written)."""
        from .. import __version__
        from ..plan.manifest import build_manifest, manifest_part, plan_sha256
        from ..plan.parts import plan_parts
        from ..plan.manifest import Manifest, TensorSpec

        self._load(plan)
        assert self._op_graph is not None
        parts = plan_parts(plan, self._op_graph.with_granularity(self.graph.granularity))
        run_dir = inside(self.cache_dir / "runs", plan_sha256(plan)[:24], "candidate cache key", single=True)
        if (run_dir / MANIFEST_FILE).is_file() and _verified_run(run_dir):
            os.utime(run_dir / MANIFEST_FILE)  # last use, for prune_stage_cache
            return run_dir
        tmp = run_dir.with_name(run_dir.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        manifest_parts = []
        for pr in parts:
            src, meta = self.stage_file(pr.first_op, pr.end_op)
            dst = tmp / f"{pr.name}.tflite"
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)
            manifest_parts.append(manifest_part(pr, dst, [TensorSpec.model_validate(s) for s in meta["inputs"]],
                                                [TensorSpec.model_validate(s) for s in meta["outputs"]]))
        manifest = build_manifest(plan, self._op_graph, manifest_parts, self._weight_seed, None, __version__)
        manifest = Manifest.model_validate(manifest.model_dump())
        atomic_write_json(tmp / MANIFEST_FILE, manifest.model_dump(mode="json"))
        shutil.rmtree(run_dir, ignore_errors=True)
        os.replace(tmp, run_dir)
        prune_stage_cache(self.cache_dir, self.cache_limit_bytes, keep_since=self._started)
        return run_dir

    # ------------------------------------------------------------ measuring
    def measure_plan(self, plan: Any) -> tuple[float, list[float]]:
        """Measured fps of ``plan`` (median or best of ``repeats`` runs), and every run's fps."""
        from .pipeline import run_plan

        d = self.artifacts(plan)
        fps = []
        for r in range(self.repeats):
            report = run_plan(plan, d, frames=self.frames, pin=True, seed=self.seed + r)
            fps.append(float(report.throughput_fps))
        med = float(statistics.median(fps) if self.statistic == "median" else max(fps))
        if not np.isfinite(med) or med <= 0:
            raise MeasurementError(f"measured {med} fps for stages {[s.model_dump() for s in plan.stages]}")
        return med, fps

    def __call__(self, decision: dict[str, Any]) -> float:
        """Measured fps of one decision (``PipelineProblem.decode``'s dict)."""
        plan = self.plan(decision["stages"])
        med, fps = self.measure_plan(plan)
        self.runs.append({"stages": decision["stages"], "fps": med, "fps_runs": fps})
        return med


def host_measure(model: str | os.PathLike[str], graph: LayerGraph, **kwargs: Any) -> Callable[[dict[str, Any]], float]:
    """``measure(decision) -> fps`` for :class:`~optimizer.search.evaluators.MeasuredEvaluator`
    (a :class:`HostPipelineMeasurer`; keyword arguments as there)."""
    return HostPipelineMeasurer(model, graph, **kwargs)
