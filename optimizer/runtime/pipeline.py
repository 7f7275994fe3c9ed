"""Reference executor of plans on this host: one worker thread per part, bounded queues.

A pipeline plan runs one worker per stage connected by ``queue.Queue(maxsize=2)``, so a slow
stage back-pressures the earlier ones as on a phone (Park & Ha's pipelined inference); each
worker owns a LiteRT interpreter with the stage's thread count, created after the worker pinned
itself to its core group, so LiteRT's own threads inherit the pinning. A split plan runs the
head locally and the tail through :class:`~optimizer.runtime.client.SplitClient` on a real TCP
socket (an in-process :class:`~optimizer.runtime.server.TailServer` on loopback when no server
is given); a joint plan does both.

Core groups: when the plan's device file describes CPUs this process has (``host``, or a
device whose CPU processors have no more cores in all than the CPUs this process may use, such
as ``host_cores``), its CPU processors take consecutive slices of those CPUs, in file order,
each as many CPUs as its ``cores`` (``host`` wraps around when it lists more): a stage on
``cpu1`` of ``host_cores`` runs on the second CPU whatever its position in the pipeline.
Otherwise (a phone's processors, or a processor not in the file), local stage ``k`` of
``n > 1`` is pinned to CPU ``k mod ncpu``; a single local stage is not pinned. Pinning uses
``os.sched_setaffinity(0, ...)``, which on Linux applies to the calling thread.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, DnnplanError, MeasurementError
from ..graph.input_shapes import check_frames_fit
from ..plan.manifest import plan_sha256
from ..plan.manifest import Manifest, Part, check_manifest_matches, read_manifest
from ..plan.schema import Plan
from .check import CheckReport, check_outputs, reference_file
from .client import SplitClient, TracePacer
from .server import TailServer
from .tensors import PartRunner, Value, as_frames, convert_tensor, load_input

QUEUE_SIZE = 2
_STOP = object()


def core_groups(plan: Plan, parts: list[Part]) -> dict[str, list[int] | None]:
    """CPU set per local part (None = not pinned); see the module docstring for the rule."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    local = [p for p in parts if p.location == "device"]
    groups: dict[str, list[int] | None] = {p.name: None for p in parts}
    if not cpus or len(local) < 2:
        return groups
    slices: dict[str, list[int]] = {}
    try:
        from ..hardware import load_device

        cpu_procs = [proc for proc in load_device(plan.device).processors if proc.kind == "cpu"]
    except DnnplanError:
        cpu_procs = []
    widths = [max(1, int(getattr(proc, "cores", 1))) for proc in cpu_procs]
    if plan.device == "host" or sum(widths) <= len(cpus):
        off = 0
        for proc, n in zip(cpu_procs, widths):
            slices[proc.name] = sorted({cpus[(off + i) % len(cpus)] for i in range(n)})
            off += n
    for k, p in enumerate(local):
        groups[p.name] = slices.get(p.processor, [cpus[k % len(cpus)]])
    return groups


@dataclass
class StageReport:
    name: str
    processor: str
    location: str
    cores: list[int] | None
    threads: int
    busy_s: float
    utilization: float
    mean_s: float
    predicted_s: float | None


@dataclass
class RunReport:
    """What :func:`run_plan` measured, next to the plan's prediction."""

    kind: str
    model: str
    frames: int
    wall_s: float
    throughput_fps: float
    latency_s: dict[str, float]
    stages: list[StageReport]
    predicted_fps: float | None
    predicted_latency_s: float | None
    wire: dict[str, float] | None = None
    outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    check: CheckReport | None = None

    @property
    def fps_ratio(self) -> float | None:
        """Measured / predicted throughput."""
        return self.throughput_fps / self.predicted_fps if self.predicted_fps else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("outputs")
        d["fps_ratio"] = self.fps_ratio
        return d


def trace_wire_stats(trace: Any, upload_s: list[float], plan: Plan, frame_bytes: float, wall_s: float) -> dict[str, Any]:
    """Wire statistics of a trace replay: the trace; measured upload p50/p95 next to the trace's
    own prediction for frames of ``frame_bytes`` sent evenly over the replayed ``wall_s`` seconds
    (:meth:`BandwidthTrace.transfer_s`); and the plan's end-to-end trace predictions over the
    whole trace (``predicted.extra`` of a plan searched with it, when present)."""
    extra = plan.predicted.extra
    starts = np.linspace(0.0, wall_s, max(len(upload_s), 1), endpoint=False)
    model = trace.transfer_s(np.array([frame_bytes]), starts)[0]
    return {"bandwidth_trace": trace.name, "trace_mean_bps": float(trace.mean_bps),
            "upload_s_p95": float(np.percentile(upload_s, 95)),
            "trace_upload_s_p50": float(np.percentile(model, 50)), "trace_upload_s_p95": float(np.percentile(model, 95)),
            "predicted_p50_s": extra.get("trace_latency_p50_s"), "predicted_p95_s": extra.get("trace_latency_p95_s")}


def _percentiles(x: list[float]) -> dict[str, float]:
    a = np.asarray(x, dtype=np.float64)
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p95": float(np.percentile(a, 95)),
            "p99": float(np.percentile(a, 99)), "mean": float(a.mean()), "max": float(a.max())}


#: synthetic integer inputs (byte or token ids of a model file) are drawn from [0, SYNTHETIC_IDS)
SYNTHETIC_IDS = 256


def input_frames(manifest: Manifest, input: Any, frames: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Network inputs ``[frames, ...]``: from an array, an ``.npy`` path, or synthetic (seeded:
    uniform [-1, 1], or for an integer input uniform ids in [0, 256), the byte/token range).
    Shorter inputs are cycled."""
    if frames < 1:
        raise ConfigError(f"--frames {frames}: expected at least 1")
    check_frames_fit({s.name: s.shape for s in manifest.inputs}, frames, "--frames",
                     "give fewer --frames, or export the plan at a smaller --input-shape",
                     {s.name: s.dtype for s in manifest.inputs})
    out = {}
    rng = np.random.default_rng(seed)
    for spec in manifest.inputs:
        if input is None:
            if np.issubdtype(np.dtype(spec.dtype), np.integer):
                a = rng.integers(0, SYNTHETIC_IDS, (frames, *spec.shape[1:])).astype(spec.dtype)
            else:
                a = rng.uniform(-1, 1, (frames, *spec.shape[1:])).astype(np.float32)
        elif isinstance(input, (str, os.PathLike)):
            a = load_input(input, spec, frames)
        else:
            src = input[spec.name] if isinstance(input, dict) else input
            a = as_frames(src, spec, "input")
        out[spec.name] = a[np.arange(frames) % len(a)]
    return out


def run_parts(manifest: Manifest, artifacts_dir: str | Path, inputs: dict[str, np.ndarray],
              *, dequantize: bool = True) -> dict[str, np.ndarray]:
    """Run all local parts one after the other on ``inputs`` (``[N, ...]`` per network input).

    The reference for equivalence checks; server parts are not run here (use :func:`run_plan`).
    Returns the network outputs ``[N, ...]`` (dequantized to float32 unless ``dequantize`` is
    False).
    """
    if manifest.server_parts:
        raise ConfigError("run_parts runs device parts only; use run_plan for split plans")
    runners = [PartRunner(p, artifacts_dir) for p in manifest.parts]
    n = len(next(iter(inputs.values())))
    rows: list[dict[str, np.ndarray]] = []
    for i in range(n):
        env = {name: Value(a[i:i + 1]) for name, a in inputs.items()}
        for r in runners:
            env.update(r(env))
        rows.append({t.name: (env[t.name].real() if dequantize else env[t.name].array)
                     for t in manifest.outputs})
    return {t.name: np.concatenate([r[t.name] for r in rows]) for t in manifest.outputs}


class _Remote:
    """Worker body of the server part: send the request tensors, receive the outputs."""

    def __init__(self, manifest: Manifest, host: str, port: int, bandwidth_bps: float | None,
                 timeout_s: float, bandwidth_trace: Any = None, token: bytes | None = None) -> None:
        assert manifest.wire is not None
        self.wire = manifest.wire
        self.client = SplitClient(host, port, manifest.wire, bandwidth_bps=bandwidth_bps, timeout_s=timeout_s,
                                  bandwidth_trace=bandwidth_trace, token=token)
        self.bytes_sent: list[int] = []
        self.bytes_received: list[int] = []
        self.upload_s: list[float] = []
        self.rtt_s: list[float] = []

    def __call__(self, env: dict[str, Value]) -> dict[str, Value]:
        req = {t.name: convert_tensor(env[t.name], t) for t in self.wire.request}
        outs, st = self.client.request(req)
        self.bytes_sent.append(st.bytes_sent)
        self.bytes_received.append(st.bytes_received)
        self.upload_s.append(st.upload_s)
        self.rtt_s.append(st.round_trip_s)
        return {t.name: Value(np.array(outs[t.name]), t.quantization) for t in self.wire.response}

    def warm_up(self) -> None:
        self.client.request({t.name: np.zeros(t.shape, np.dtype(t.dtype)) for t in self.wire.request})
        self.bytes_sent.clear(), self.bytes_received.clear(), self.upload_s.clear(), self.rtt_s.clear()
        if isinstance(self.client.bucket, TracePacer):
            self.client.bucket.restart()  # the trace starts with the first real frame


def run_plan(plan: Plan, artifacts_dir: str | Path, *, frames: int = 50, input: Any = None,
             server: tuple[str, int] | None = None, bandwidth_bps: float | None = None,
             pin: bool = True, keep_outputs: bool = False, timeout_s: float = 30.0,
             input_fps: float | None = None, seed: int = 0,
             check_min_agreement: float | None = None, bandwidth_trace: Any = None,
             token: bytes | None = None) -> RunReport:
    """Execute ``plan`` from its exported artifacts and measure it.

    Parameters
    ----------
    plan : Plan
        The plan the artifacts were exported from (checked by SHA-256).
    artifacts_dir : path-like
        Directory written by :func:`optimizer.plan.export.export_plan` (every artifact's
        SHA-256 is verified first).
    frames : int
        Frames to push through.
    input : array, dict, path or None
        Network input frames (``.npy`` path, array ``[N, ...]`` or one frame); default synthetic.
    server : (host, port), optional
        A running tail server (split/joint plans); default: one started in-process on loopback.
    bandwidth_bps : float, optional
        Emulated uplink rate for the crossing tensors (token bucket on send).
    pin : bool
        Pin stage threads to core groups (:func:`core_groups`).
    keep_outputs : bool
        Keep every frame's network outputs (dequantized) in ``RunReport.outputs``.
    input_fps : float, optional
        Pace the input at this frame rate (a camera); default: as fast as the slowest part
        accepts frames (saturated: throughput is the bottleneck's, and latency includes
        waiting in the bounded queues).
    bandwidth_trace : BandwidthTrace, optional
        Replay this uplink trace on the crossing tensors instead of a fixed rate
        (:class:`~optimizer.runtime.client.TracePacer`; time 0 = the first frame).
    check_min_agreement : float, optional
        Also run the single-file reference on the same frames and compare every output
        (:mod:`optimizer.runtime.check`); the result is ``RunReport.check``.
    token : bytes, optional
        The tail server's shared token (``--token-file``): requests are signed with it.
    """
    if input_fps is not None and input_fps <= 0:
        raise ConfigError(f"--fps {input_fps}: expected a positive frame rate")
    d = Path(artifacts_dir)
    manifest = read_manifest(d)
    check_manifest_matches(manifest, plan_sha256(plan), str(d))
    inputs = input_frames(manifest, input, frames, seed)
    if check_min_agreement is not None:  # fail before running when no reference can be had
        if not 0.0 <= check_min_agreement <= 1.0:
            raise ConfigError(f"--min-agreement {check_min_agreement}: expected a fraction in 0..1")
        reference_file(manifest, d)
    own_server = None
    if manifest.server_parts and server is None:
        own_server = TailServer(d, "127.0.0.1", 0, token=token).start()
        server = ("127.0.0.1", own_server.port)
    try:
        report = _execute(plan, manifest, d, inputs, frames, server, bandwidth_bps, pin,
                          keep_outputs or check_min_agreement is not None, timeout_s, input_fps, bandwidth_trace,
                          token)
    finally:
        if own_server is not None:
            own_server.stop()
    if check_min_agreement is not None:
        report.check = check_outputs(manifest, d, inputs, report.outputs, check_min_agreement)
    return report


def _execute(plan: Plan, manifest: Manifest, d: Path, inputs: dict[str, np.ndarray], frames: int,
             server: tuple[str, int] | None, bandwidth_bps: float | None, pin: bool,
             keep_outputs: bool, timeout_s: float, input_fps: float | None,
             bandwidth_trace: Any = None, token: bytes | None = None) -> RunReport:
    run = _PipelineRun(plan, manifest, d, server, bandwidth_bps, pin, timeout_s, bandwidth_trace, token)
    run.start()
    lat, outputs, wall = run.stream(inputs, frames, input_fps, keep_outputs)
    return run.report(lat, outputs, wall, frames)


class _PipelineRun:
    """One run of the parts: a worker thread per part, bounded queues between them (module docstring)."""

    def __init__(self, plan: Plan, manifest: Manifest, d: Path, server: tuple[str, int] | None,
                 bandwidth_bps: float | None, pin: bool, timeout_s: float,
                 bandwidth_trace: Any = None, token: bytes | None = None) -> None:
        self.plan, self.manifest, self.d, self.server, self.token = plan, manifest, d, server, token
        self.bandwidth_bps, self.bandwidth_trace, self.timeout_s = bandwidth_bps, bandwidth_trace, timeout_s
        self.parts = manifest.device_parts + manifest.server_parts[:1]
        self.groups = core_groups(plan, self.parts) if pin else {p.name: None for p in self.parts}
        n = len(self.parts)
        self.qs: list[queue.Queue[Any]] = [queue.Queue(maxsize=QUEUE_SIZE) for _ in range(n + 1)]
        self.busy = [0.0] * n
        self.bodies: list[Any] = [None] * n
        self.errors: list[BaseException] = []
        self.ready = threading.Barrier(n + 1)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def put(self, q: queue.Queue[Any], item: Any) -> bool:
        """Put with back-pressure; False once the run is stopping."""
        while not self.stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _body(self, part: Part) -> Any:
        if part.location == "server":
            assert self.server is not None
            return _Remote(self.manifest, self.server[0], self.server[1], self.bandwidth_bps, self.timeout_s,
                           self.bandwidth_trace, self.token)
        return PartRunner(part, self.d)

    def _worker(self, k: int) -> None:
        part = self.parts[k]
        try:
            if self.groups.get(part.name) and hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, self.groups[part.name])
            body = self._body(part)
            body.warm_up()
            self.bodies[k] = body
            self.ready.wait()
        except threading.BrokenBarrierError:
            return
        except BaseException as exc:  # reported by the caller
            self.errors.append(exc)
            self.ready.abort()
            return
        try:
            self._serve(k, body)
        except BaseException as exc:
            self.errors.append(exc)
            self.stop.set()
            try:
                self.qs[-1].put_nowait(_STOP)
            except queue.Full:
                pass

    def _serve(self, k: int, body: Any) -> None:
        while True:
            item = self.qs[k].get()
            if item is _STOP:
                self.put(self.qs[k + 1], _STOP)
                return
            fid, env, t_start = item
            t0 = time.perf_counter()
            if k == 0:
                t_start = t0
            env.update(body(env))
            self.busy[k] += time.perf_counter() - t0
            if not self.put(self.qs[k + 1], (fid, env, t_start)):
                return

    def start(self) -> None:
        """Start the workers and wait until every part is loaded and warm."""
        self.threads = [threading.Thread(target=self._worker, args=(k,), name=f"dnnplan-{p.name}", daemon=True)
                        for k, p in enumerate(self.parts)]
        for t in self.threads:
            t.start()
        try:
            self.ready.wait()
        except threading.BrokenBarrierError:
            for t in self.threads:
                t.join(timeout=5)
            raise self.errors[0] if self.errors else MeasurementError("a pipeline worker failed to start") from None

    def _feed(self, inputs: dict[str, np.ndarray], frames: int, input_fps: float | None, t_first: float) -> None:
        for i in range(frames):
            if input_fps:
                wait = t_first + i / input_fps - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
            env = {name: Value(a[i:i + 1]) for name, a in inputs.items()}
            if not self.put(self.qs[0], (i, env, 0.0)):
                return
        self.put(self.qs[0], _STOP)

    def stream(self, inputs: dict[str, np.ndarray], frames: int, input_fps: float | None,
               keep_outputs: bool) -> tuple[list[float], dict[str, list[np.ndarray]], float]:
        """Push the frames through; per-frame latencies, kept outputs and the wall time."""
        t_first = time.perf_counter()
        feeder = threading.Thread(target=self._feed, args=(inputs, frames, input_fps, t_first),
                                  name="dnnplan-feeder", daemon=True)
        feeder.start()
        lat: list[float] = []
        outputs: dict[str, list[np.ndarray]] = {t.name: [] for t in self.manifest.result_outputs}
        t_last = t_first
        while True:
            try:
                item = self.qs[-1].get(timeout=self.timeout_s * 4)
            except queue.Empty:
                self.stop.set()
                raise MeasurementError(f"the pipeline produced no frame for {self.timeout_s * 4:.0f} s") from None
            if item is _STOP:
                break
            _, env, t_start = item
            t_last = time.perf_counter()
            lat.append(t_last - t_start)
            if keep_outputs:
                for t in self.manifest.result_outputs:
                    outputs[t.name].append(env[t.name].real())
        self._shut_down(feeder)
        if len(lat) != frames:
            raise MeasurementError(f"the pipeline finished {len(lat)} of {frames} frames")
        return lat, outputs, t_last - t_first

    def _shut_down(self, feeder: threading.Thread) -> None:
        self.stop.set()
        feeder.join(timeout=5)
        for t in self.threads:
            t.join(timeout=5)
        for b in self.bodies:
            if isinstance(b, _Remote):
                b.client.close()
        if self.errors:
            raise self.errors[0]

    def report(self, lat: list[float], outputs: dict[str, list[np.ndarray]], wall: float, frames: int) -> RunReport:
        """The run's :class:`RunReport` (stage busy times, wire statistics, latency percentiles)."""
        plan = self.plan
        pred_stage = {f"stage{k}": s.predicted_time_s for k, s in enumerate(plan.stages or [])}
        stages = [StageReport(p.name, p.processor, p.location, self.groups.get(p.name), p.threads, self.busy[k],
                              self.busy[k] / wall if wall > 0 else 0.0, self.busy[k] / frames, pred_stage.get(p.name))
                  for k, p in enumerate(self.parts)]
        wire_stats = None
        remote = next((b for b in self.bodies if isinstance(b, _Remote)), None)
        if remote is not None:
            wire_stats = {"bytes_per_frame": float(np.mean(remote.bytes_sent)),
                          "response_bytes_per_frame": float(np.mean(remote.bytes_received)),
                          "payload_bytes": float(self.manifest.wire.request_bytes if self.manifest.wire else 0),
                          "upload_s_p50": float(np.median(remote.upload_s)),
                          "round_trip_s_p50": float(np.median(remote.rtt_s)),
                          "bandwidth_bps": float(self.bandwidth_bps or 0.0),
                          "reconnects": float(remote.client.reconnects)}
            if self.bandwidth_trace is not None:
                wire_stats.update(trace_wire_stats(self.bandwidth_trace, remote.upload_s, plan,
                                                   wire_stats["bytes_per_frame"], wall))
        return RunReport(kind=plan.kind, model=plan.model.name, frames=frames, wall_s=wall,
                         throughput_fps=frames / wall if wall > 0 else float("inf"),
                         latency_s=_percentiles(lat), stages=stages,
                         predicted_fps=plan.predicted.throughput_fps, predicted_latency_s=plan.predicted.latency_s,
                         wire=wire_stats,
                         outputs={k: np.concatenate(v) for k, v in outputs.items() if v})
