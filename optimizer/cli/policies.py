"""``dnnplan schedule``, ``dnnplan tadf``, ``dnnplan shift``: thermal-aware policies from the literature."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional

import typer

from . import app
from .bounds import bounded
from .common import STATE, console, console_err, output_file, print_json

#: how each command names its request's fields (errors speak of the options)
SCHEDULE_OPTIONS = {"device": "--device", "network": "--network", "policy": "--policy", "duration_s": "--duration",
                    "fps": "--fps", "max_fps": "--max-fps", "eta": "--eta", "ambient_c": "--ambient", "seed": "--seed"}
TADF_OPTIONS = {"device": "--device", "ambient_c": "--ambient", "tmax_c": "--tmax", "theta_c": "--theta",
                "dtype": "--dtype"}
SHIFT_OPTIONS = {"device": "--device", "duration_s": "--duration", "fps": "--fps", "reload_s": "--reload",
                 "ambient_c": "--ambient", "dtype": "--dtype"}


def _opt(v: float | None, fmt: str = "{:.0f} s") -> str:
    return "none" if v is None else fmt.format(v)


@app.command()
def schedule(
    workload: str = typer.Argument(..., help="Workload name (search_spaces/workloads) or YAML path."),
    device: str = typer.Option("pixel4", "--device", "-d", help="Phone whose processors are the workers."),
    network: str = typer.Option("wifi_249", "--network", "-n", help="Link to the cloud worker, or 'none'."),
    policy: str = typer.Option("minheat", "--policy", "-p", help="minheat, ppt, heft or heft-cloud."),
    duration: float = typer.Option(600.0, "--duration", callback=bounded("schedule", "--duration"), help="Simulated seconds."),
    fps: Optional[float] = typer.Option(None, "--fps", callback=bounded("schedule", "--fps"), help="Camera frame rate (default: the workload's)."),
    max_fps: bool = typer.Option(False, "--max-fps", help="Find the highest FPS (0.5 FPS steps, ascending) up to which the "
                                 "policy runs the whole duration without thermal status severe and with >= 90 % "
                                 "of frames within the SLO."),
    eta: float = typer.Option(0.1, "--eta", help="SPLASH's eta (minheat penalty / ppt latency weight)."),
    ambient: Optional[float] = typer.Option(None, "--ambient", help="Ambient °C (default: the device's)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the latency jitter and profiling run."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
    plot: Optional[str] = typer.Option(None, "--plot", callback=output_file, help="Write temperatures and status over time (PNG)."),
) -> None:
    """SPLASH scheduling of a multi-DNN workload over the phone's processors and the cloud."""
    from ..workflow.requests import parse_request
    from ..workflow.thermal import run_schedule_request
    from ..workflow.thermal_requests import ScheduleRequest

    request = parse_request(ScheduleRequest, {
        "workload": workload, "device": device, "network": network, "policy": policy, "duration_s": duration,
        "fps": fps, "max_fps": max_fps, "eta": eta, "ambient_c": ambient, "seed": seed}, labels=SCHEDULE_OPTIONS)
    with _rate_status(request) as on_rate:
        outcome = run_schedule_request(request, on_profiling=None if STATE.quiet else _dim, on_rate=on_rate)
    res, found, spec = outcome.result, outcome.max_fps, outcome.spec
    out = res.to_dict() if as_json else res.summary()
    if found is not None:
        out["max_fps_without_throttling"] = found
    if plot:
        _plot(res, plot)
    if as_json:
        print_json(out)
        return
    from rich.table import Table

    s = res.summary()
    head = (f"{outcome.workload.name} on {device} via {res.link or 'no cloud'} — {policy}, {res.fps:.2f} FPS, "
            f"{res.duration_s:.0f} s at {res.ambient_c:g} °C")
    console.print(f"[bold]{head}[/]")
    if found is not None:
        console.print(f"max FPS without throttling: [bold]{found:.2f}[/]")
    console.print(f"time to throttling (status severe): [bold]{_opt(res.time_to_severe_s)}[/]; "
                  f"first cap: {_opt(res.time_to_first_throttle_s)}; SLO met: {100 * res.slo_rate:.1f} % of "
                  f"frames; mean latency {s['mean_latency_ms']:.2f} ms (p95 {s['p95_latency_ms']:.2f})")
    t = Table(header_style="bold")
    for c in ("worker", "share %", "peak °C", "final °C", "model RMSE °C", "persistence RMSE °C"):
        t.add_column(c, justify="right")
    for w in res.workers:
        node = outcome.heated_node(w)
        rm = res.model_rmse_c[w]
        t.add_row(w, f"{100 * res.share[w]:.1f}", f"{res.peak_temp_c.get(node, float('nan')):.1f}",
                  f"{res.final_temp_c.get(node, float('nan')):.1f}", f"{rm['model']:.3f}", f"{rm['persistence']:.3f}")
    console.print(t)
    skin = spec.skin
    console.print(f"skin peak {res.peak_temp_c[skin]:.1f} °C; simulated in {res.wall_s:.2f} s")


def _dim(message: str) -> None:
    console_err.print(f"[dim]{message}[/]")


@contextmanager
def _rate_status(request: Any) -> Iterator[Callable[[float, float], None] | None]:
    """A status line naming the rate the FPS search is running (None without --max-fps or with --quiet)."""
    if not request.max_fps or STATE.quiet:
        yield None
        return
    with console_err.status("", spinner="dots") as status:
        def show(f: float, cap: float) -> None:
            status.update(f"{request.policy}: running {request.duration_s:g} s at {f:.1f} FPS (capacity {cap:.1f} FPS)")

        yield show


def _plot(res, path: str) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..fileio import atomic_write_bytes

    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, height_ratios=(3, 1))
    for i, n in enumerate(res.node_names):
        a.plot(res.times_s, res.temps_c[:, i], label=n)
    a.set_ylabel("°C")
    a.legend(ncol=4, fontsize=8)
    a.set_title(f"{res.workload} — {res.policy}, {res.fps:.2f} FPS")
    b.step(res.times_s, res.status, where="post")
    b.set_yticks(range(len(res.status_names)), res.status_names, fontsize=7)
    b.set_xlabel("s")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


@app.command()
def tadf(
    model: str = typer.Argument(..., help="Zoo name or model file (e.g. alexnet, vgg16)."),
    device: str = typer.Option("jetson_nano", "--device", "-d", help="Device with a CPU and a GPU."),
    ambient: float = typer.Option(40.0, "--ambient", help="Environment temperature (°C)."),
    tmax: float = typer.Option(85.0, "--tmax", help="Steady-state limit T_max (°C)."),
    theta: float = typer.Option(0.5, "--theta", callback=bounded("tadf", "--theta"), help="Bisection tolerance θ (°C)."),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32, fp16 or int8."),
    layers: bool = typer.Option(False, "--layers", help="Print every layer's decision."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """TADF clock choice under T_max and HSWD per-layer CPU/GPU split vs CPU, GPU and CGP."""
    from ..workflow.requests import parse_request
    from ..workflow.thermal import run_tadf_request
    from ..workflow.thermal_requests import TadfRequest

    request = parse_request(TadfRequest, {"model": model, "device": device, "ambient_c": ambient, "tmax_c": tmax,
                                          "theta_c": theta, "dtype": dtype}, labels=TADF_OPTIONS)
    clocks, splits = run_tadf_request(request)
    if as_json:
        print_json({"tadf": clocks.to_dict(), "hswd": splits.to_dict()})
        return
    from rich.table import Table

    clock_text = ", ".join(f"{p} {f / 1e6:.0f} MHz (max {clocks.max_clock_hz[p] / 1e6:.0f})"
                           for p, f in clocks.clock_hz.items())
    coefficients = clocks.coefficients
    console.print(f"[bold]TADF on {clocks.device} at {clocks.ambient_c:g} °C, T_max {clocks.tmax_c:g} °C:[/] {clock_text}"
                  f"{' (max clocks fit)' if clocks.at_max else ''}")
    console.print(f"T_inf = {coefficients['a1']:g}·T_env + {coefficients['a2_at_max_c']:.2f}·(fC/fCmax)³ + "
                  f"{coefficients['a3_at_max_c']:.2f}·(fG/fGmax)³ + {coefficients['a0']:.2f}  "
                  f"(node {coefficients['node']}, derived from the RC network and power model)")
    node, model_c = max(clocks.predicted_steady_c.items(), key=lambda kv: kv[1])
    throttled = (f"; THROTTLED at {clocks.time_to_throttle_s:.0f} s by the thermal spec's governor rule(s) "
                 f"{', '.join(clocks.throttle_rules) or '(status only)'}, whose caps hold the die below the unthrottled "
                 "steady state" if clocks.throttled else "; not throttled")
    console.print(f"steady temperature: TADF model {model_c:.1f} °C ({node}, no governor), simulator "
                  f"{clocks.simulated_peak_die_c:.1f} °C (hottest die, with the governor){throttled}", highlight=False)
    if layers and not STATE.quiet:
        t = Table(title=f"HSWD decisions: {splits.model}", header_style="bold")
        for c in ("layer", "op", "choice", "GPU share", "CPU ms", "GPU ms", "split ms"):
            t.add_column(c, justify="right")
        for layer in splits.layers:
            t.add_row(layer["name"], layer["op"], layer["choice"], f"{layer['gpu_share']:.2f}",
                      f"{layer['t_cpu_ms']:.2f}", f"{layer['t_gpu_ms']:.2f}",
                      "-" if layer["t_split_ms"] is None else f"{layer['t_split_ms']:.2f}")
        console.print(t)
    d = splits.to_dict()["decisions"]
    console.print(f"HSWD decisions: {d['split']} split, {d['cpu']} CPU, {d['gpu']} GPU")
    t = Table(title=f"{splits.model} whole-network latency", header_style="bold")
    for c in ("method", "ms", "HSWD speed-up"):
        t.add_column(c, justify="right")
    speedups = splits.speedups()
    for k, v in splits.latency_s.items():
        t.add_row(k, f"{1e3 * v:.1f}", "-" if k == "hswd" else f"×{speedups[k]:.2f}")
    console.print(t)


@app.command()
def shift(
    model: str = typer.Argument("slimmable_resnet50", help="slimmable_resnet50 or bert_small."),
    device: str = typer.Option("pixel4", "--device", "-d", help="Device (phone profile, or raspberry_pi4)."),
    duration: float = typer.Option(3600.0, "--duration", callback=bounded("shift", "--duration"), help="Simulated seconds."),
    fps: Optional[float] = typer.Option(None, "--fps", callback=bounded("shift", "--fps"), help="Request rate (default: large variant 80 % busy)."),
    reload: float = typer.Option(1.0, "--reload", callback=bounded("shift", "--reload"), help="Model reload time per switch (s); 0 = shared weights."),
    ambient: Optional[float] = typer.Option(None, "--ambient", help="Ambient °C (default: the device's)."),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32, fp16 or int8."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Play It Cool dynamic model shifting vs always-large and always-small."""
    from ..workflow.requests import parse_request
    from ..workflow.thermal import run_shift_request
    from ..workflow.thermal_requests import ShiftRequest

    request = parse_request(ShiftRequest, {"model": model, "device": device, "duration_s": duration, "fps": fps,
                                           "reload_s": reload, "ambient_c": ambient, "dtype": dtype},
                            labels=SHIFT_OPTIONS)
    setup, res = run_shift_request(request)
    if as_json:
        print_json({"setup": {"device": setup.device, "model": setup.model, "fps": setup.fps,
                              "latency_s": setup.latency_s, "t_lim_c": setup.t_lim_c, "g_lim": setup.g_lim,
                              "reload_s": setup.reload_s},
                    "runs": {k: v.to_dict() for k, v in res.items()}})
        return
    from rich.table import Table

    console.print(f"[bold]{setup.model} on {setup.device}[/]: {setup.fps:.2f} req/s, large "
                  f"{1e3 * setup.latency_s[0]:.1f} ms / small {1e3 * setup.latency_s[1]:.1f} ms at max clock; "
                  f"tLim {setup.t_lim_c:g} °C, gLim {setup.g_lim:g}, reload {setup.reload_s:g} s")
    t = Table(header_style="bold")
    for c in ("mode", "mean latency ms", "large %", "small %", "accuracy", "switches", "throttle events",
              "first throttle", "peak CPU °C"):
        t.add_column(c, justify="right")
    for k, r in res.items():
        t.add_row(k, f"{1e3 * r.mean_latency_s:.1f}", f"{100 * r.time_share['large']:.1f}",
                  f"{100 * r.time_share['small']:.1f}",
                  "-" if r.accuracy_score is None else f"{r.accuracy_score:.3f}", str(r.switches),
                  str(r.throttle_events), _opt(r.time_to_first_throttle_s), f"{r.peak_cpu_c:.1f}")
    console.print(t)
