"""``dnnplan export | run | serve``: deployable artifacts, the reference runtime, the split server."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..errors import ConfigError, InputFileError
from . import app
from .bounds import bounded
from .common import STATE, check_between, console, console_err, input_shape_option, output_folder, parse_input_shape_option, print_json

if TYPE_CHECKING:
    from ..runtime.check import CheckReport
    from ..runtime.pipeline import RunReport


@app.command()
def export(
    plan_file: str = typer.Argument(..., metavar="PLAN.json", help="Plan to export."),
    out: str = typer.Option(..., "--out", "-o", callback=output_folder, help="Artifacts directory (replaced atomically)."),
    calib: str = typer.Option("synthetic", "--calib", help="INT8 calibration: 'synthetic' or FILE.npz."),
    samples: int = typer.Option(64, "--samples", callback=bounded("export", "--samples"), help="Calibration samples."),
    seed: int = typer.Option(0, "--seed", help="Weight seed of zoo networks and of synthetic calibration."),
    model: Optional[str] = typer.Option(None, "--model",
                                        help="A .keras, .tflite or .onnx file instead of the plan's model."),
    keep_reference: bool = typer.Option(True, "--keep-reference/--no-reference",
                                        help="Also ship the single-file model for 'run --check' (INT8: the one the "
                                        "parts are aligned to; float: the whole network converted once); "
                                        "--no-reference skips it."),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
    input_shape: Optional[list[str]] = input_shape_option(),
    memory_budget: str = typer.Option("4GB", "--memory-budget", help="Peak memory to plan the Keras calls for "
                                      "(batch-norm passes, calibration activations), e.g. 4GB, 512MB; "
                                      "calibration tensors are kept on disk."),
) -> None:
    """Cut the network at the plan's boundaries and write one .tflite per part plus manifest.json."""
    from ..plan import read_plan
    from ..plan.device_check import check_plan_device
    from ..plan.export import export_plan
    from ..quantize.api import parse_memory_budget

    budget = parse_memory_budget(memory_budget)  # a bad size: one line before the plan is read
    if calib != "synthetic" and not Path(calib).is_file():  # named inputs exist, also where unused
        raise InputFileError(f"--calib {calib}: no such file; give an .npz of calibration inputs or 'synthetic'")
    plan = read_plan(plan_file)
    check_plan_device(plan, plan_file)
    shapes = parse_input_shape_option(input_shape)
    if shapes:  # default: the shapes the plan was made at (model.input_shapes)
        plan = plan.model_copy(update={"model": plan.model.model_copy(
            update={"input_shapes": {k: list(v) for k, v in shapes.items()}})})
    if plan.model.input_shapes:
        from ..graph.input_shapes import check_frames_fit

        check_frames_fit(plan.model.input_shapes, 1, "export", "give a smaller --input-shape")
    progress = None if (STATE.quiet or as_json) else (lambda msg: console_err.print(f"[dim]{msg}[/]"))
    manifest = export_plan(plan, out, model=model, calib=calib, samples=samples, seed=seed,
                           keep_reference=keep_reference, memory_budget=budget, progress=progress,
                           note=lambda msg: console_err.print(f"note: {msg}", highlight=False))
    if as_json:
        print_json(manifest.model_dump(mode="json"))
        return
    for p in manifest.parts:
        ins = ", ".join(t.name for t in p.inputs)
        console.print(f"{p.file}: layers {p.first_layer}-{p.last_layer} ({p.dtype}, {p.location}, "
                      f"{p.bytes / 1e6:.2f} MB) reads {ins}", highlight=False)
    console.print(f"[green]exported[/] {len(manifest.parts)} parts of {manifest.model.name} to {out}",
                  highlight=False)


@app.command()
def run(
    plan_file: str = typer.Argument(..., metavar="PLAN.json", help="The exported plan."),
    artifacts: str = typer.Option(..., "--artifacts", help="Directory written by 'dnnplan export'."),
    frames: int = typer.Option(50, "--frames", callback=bounded("run", "--frames"), help="Frames to run."),
    input_file: Optional[str] = typer.Option(None, "--input", help="Input frames (.npy) [N, ...]."),
    server: Optional[str] = typer.Option(None, "--server", help="Tail server HOST:PORT (loopback); "
                                         "default: an in-process server for split plans."),
    bandwidth: Optional[str] = typer.Option(None, "--bandwidth", help="Emulated uplink, e.g. 10Mbps."),
    bandwidth_trace: Optional[str] = typer.Option(
        None, "--bandwidth-trace", help="Replay an uplink trace on the split socket (Mahimahi file, t_s,mbps "
                                        "CSV or a name in search_spaces/bandwidth); reports p50/p95."),
    fps: Optional[float] = typer.Option(None, "--fps", callback=bounded("run", "--fps"), help="Pace the input at this frame rate "
                                        "(default: saturated, as fast as the slowest part accepts)."),
    no_pin: bool = typer.Option(False, "--no-pin", help="Do not pin stages to core groups."),
    check: bool = typer.Option(False, "--check", help="Also run the single-file model on the same frames "
                               "and compare outputs (top-1 agreement, max |diff|, SQNR); exit 1 below "
                               "--min-agreement."),
    min_agreement: float = typer.Option(0.99, "--min-agreement", help="Top-1 agreement --check requires."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    token_file: Optional[str] = typer.Option(None, "--token-file", help="Shared token of the tail server "
                                             "(serve --token-file): each connection opens with a nonce exchange and "
                                             "requests are signed with its session key (HMAC-SHA256); "
                                             "needed for a --server beyond loopback."),
) -> None:
    """Execute a plan on this host and report measured FPS and latency next to the prediction."""
    from ..plan import read_plan
    from ..plan.device_check import check_plan_device
    from ..runtime import parse_bandwidth, parse_server, run_plan
    from ..runtime.wire import read_token

    check_between("--min-agreement", min_agreement, 0.0, 1.0, "a top-1 agreement")
    token = read_token(token_file) if token_file is not None else None
    plan = read_plan(plan_file)
    check_plan_device(plan, plan_file)
    addr = parse_server(server, token) if server else None
    rate = parse_bandwidth(bandwidth)
    trace = None
    if bandwidth_trace is not None:
        from ..hardware.bandwidth import load_trace

        if rate is not None:
            raise ConfigError("--bandwidth and --bandwidth-trace both given; choose one uplink")
        trace = load_trace(bandwidth_trace)
    report = run_plan(plan, artifacts, frames=frames, input=input_file, server=addr,
                      bandwidth_bps=rate, pin=not no_pin, input_fps=fps,
                      check_min_agreement=min_agreement if check else None, bandwidth_trace=trace, token=token)
    if as_json:
        print_json(report.to_dict())
    else:
        _print_run(report)
    if report.check is not None and not report.check.passed:
        raise typer.Exit(1)


def _print_run(report: RunReport) -> None:
    """The table and summary lines of ``dnnplan run``."""
    from rich.table import Table

    def fmt(v: float | None, scale: float = 1.0, unit: str = "") -> str:
        return "-" if v is None else f"{v * scale:.2f}{unit}"

    t = Table(title=f"{report.kind} plan of {report.model}: {report.frames} frames")
    for col in ("part", "processor", "cores", "threads", "busy s", "util", "mean ms", "predicted ms"):
        t.add_column(col)
    for s in report.stages:
        t.add_row(s.name, s.processor, "-" if s.cores is None else ",".join(map(str, s.cores)),
                  str(s.threads), f"{s.busy_s:.3f}", f"{s.utilization:.0%}", fmt(s.mean_s, 1e3),
                  fmt(s.predicted_s, 1e3))
    console.print(t)
    lat = report.latency_s
    console.print(f"throughput {report.throughput_fps:.1f} FPS (predicted {fmt(report.predicted_fps)}"
                  f"{'' if report.fps_ratio is None else f', ratio {report.fps_ratio:.2f}'}); latency "
                  f"p50 {lat['p50'] * 1e3:.1f} ms, p90 {lat['p90'] * 1e3:.1f} ms, p99 {lat['p99'] * 1e3:.1f} ms "
                  f"(predicted {fmt(report.predicted_latency_s, 1e3, ' ms')})", highlight=False)
    if report.wire:
        w = report.wire
        console.print(f"wire: {w['bytes_per_frame']:.0f} B/frame up, {w['response_bytes_per_frame']:.0f} B/frame "
                      f"down, upload p50 {w['upload_s_p50'] * 1e3:.2f} ms, "
                      f"round trip p50 {w['round_trip_s_p50'] * 1e3:.2f} ms"
                      + (f" at {w['bandwidth_bps'] / 1e6:g} Mbps" if w["bandwidth_bps"] else ""),
                      highlight=False)
        if w.get("bandwidth_trace"):
            _print_trace(report)
    if report.check is not None:
        _print_check(report.check)


def _print_trace(report: RunReport) -> None:
    """Measured p50/p95 under a replayed trace next to the plan's trace predictions."""
    from rich.table import Table

    w, lat = report.wire or {}, report.latency_s
    t = Table(title=f"trace {w['bandwidth_trace']} replayed (mean {w['trace_mean_bps'] / 1e6:.2f} Mbps)")
    for col in ("end-to-end latency", "measured ms", "predicted ms"):
        t.add_column(col)
    for key in ("p50", "p95"):
        pred = w.get(f"predicted_{key}_s")
        t.add_row(key, f"{lat[key] * 1e3:.1f}", "-" if pred is None else f"{pred * 1e3:.1f}")
    console.print(t)
    console.print(f"upload p50/p95 {w['upload_s_p50'] * 1e3:.1f}/{w['upload_s_p95'] * 1e3:.1f} ms measured, "
                  f"{w['trace_upload_s_p50'] * 1e3:.1f}/{w['trace_upload_s_p95'] * 1e3:.1f} ms from the trace over "
                  f"the replayed {report.wall_s:.1f} s; predictions are the plan's modeled end-to-end times "
                  "over the whole trace", highlight=False)


def _print_check(check: CheckReport) -> None:
    """The ``--check`` table: one row per network output."""
    from rich.table import Table

    t = Table(title=f"check against {check.reference} ({check.frames} frames)")
    for col in ("output", "top-1 agreement", "max |diff|", "SQNR dB"):
        t.add_column(col)
    for o in check.outputs:
        t.add_row(o.name, f"{o.top1_agreement:.1%}", f"{o.max_abs_diff:.3g}",
                  "exact" if o.sqnr_db is None else f"{o.sqnr_db:.1f}")
    console.print(t)
    verdict = "[green]passed[/]" if check.passed else "[red]FAILED[/]"
    console.print(f"check {verdict}: top-1 agreement {check.agreement:.1%} (required {check.min_agreement:.1%})",
                  highlight=False)


@app.command()
def serve(
    artifacts: str = typer.Option(..., "--artifacts", help="Directory written by 'dnnplan export' (split plan)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on: loopback, or any with --token-file."),
    port: int = typer.Option(5599, "--port", help="TCP port (0 = any free port)."),
    workers: int = typer.Option(2, "--workers", help="Interpreters serving requests concurrently."),
    max_clients: int = typer.Option(256, "--max-clients", help="Connections at once; more are answered 'busy'. "
                                    "Slow or idle ones are closed by --frame-deadline and --idle-timeout."),
    frame_deadline: float = typer.Option(60.0, "--frame-deadline", help="Seconds a request frame may take from "
                                         "its first byte to its last; a slower sender is cut off."),
    idle_timeout: float = typer.Option(30.0, "--idle-timeout", help="Seconds a connection may wait between "
                                       "frames."),
    token_file: Optional[str] = typer.Option(None, "--token-file", help="Shared token (a file of at least 16 "
                                             "random bytes): each connection opens with a nonce exchange, then every "
                                             "request must carry the HMAC-SHA256 of its session key and an "
                                             "increasing id (replays refused); "
                                             "required to listen beyond loopback."),
) -> None:
    """Serve the tail of a split plan over TCP until interrupted (Ctrl-C or SIGTERM: exit 130)."""
    from ..plan.device_check import check_manifest_device
    from ..plan.manifest import read_manifest
    from ..runtime import TailServer, check_loopback
    from ..runtime.wire import read_token

    token = read_token(token_file) if token_file is not None else None
    check_loopback(host, "--host", token)  # before any work: no unauthenticated listener beyond loopback
    check_manifest_device(read_manifest(artifacts), artifacts)
    server = TailServer(artifacts, host, port, workers=workers, max_clients=max_clients,
                        frame_deadline_s=frame_deadline, idle_timeout_s=idle_timeout, token=token).start()
    try:
        console_err.print(f"serving the tail of {server.manifest.model.name} on {server.host}:{server.port} "
                          "(Ctrl-C stops)", highlight=False)
        server.serve_forever()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the only way it ends; one line, exit 130
        from ..errors import Interrupted

        s = server.stats
        raise Interrupted(f"served {s.requests} requests, {s.errors} error replies, "
                          f"{s.connections} connections") from None
