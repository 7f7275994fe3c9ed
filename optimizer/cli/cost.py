"""``dnnplan cost``: the per-layer, per-processor CostTable of a network on a device."""

from __future__ import annotations

import typer

from . import app
from .common import STATE, console, input_shape_option, parse_input_shape_option, print_json


def _device(name: str):
    from ..errors import UnknownNameError
    from ..hardware import device_names, load_device, load_server, server_names

    if name in server_names() and name not in device_names():
        return load_server(name)
    try:
        return load_device(name)
    except UnknownNameError as exc:
        raise UnknownNameError("device", name, device_names() + server_names()) from exc


def _clocks(specs: list[str]) -> dict[str, float]:
    from ..errors import ConfigError
    from ..hardware.units import parse_quantity

    out = {}
    for spec in specs:
        proc, sep, value = spec.partition("=")
        if not sep:
            raise ConfigError(f"--clock {spec!r}: expected PROCESSOR=FREQUENCY, e.g. cpu=1.8GHz")
        try:
            out[proc.strip()] = parse_quantity(value.strip(), "frequency")
        except ValueError as exc:
            raise ConfigError(f"--clock {spec!r}: {exc}") from None
    return out


def cost_to_dict(ct) -> dict:
    """JSON form of a CostTable."""
    procs = list(ct.processors)
    layers = [{"index": i, "name": name,
               "latency_s": dict(zip(procs, ct.latency_s[i].tolist())),
               "energy_j": dict(zip(procs, ct.energy_j[i].tolist())),
               "supported": dict(zip(procs, ct.supported[i].tolist()))}
              for i, name in enumerate(ct.layer_names)]
    return {
        "model": ct.model, "device": ct.device, "dtype": ct.dtype, "backend": ct.backend,
        "granularity": ct.granularity, "processors": procs, "processor_kinds": list(ct.processor_kinds),
        "totals": {"latency_s": dict(zip(procs, ct.cum_latency_s[-1].tolist())),
                   "energy_j": dict(zip(procs, ct.cum_energy_j[-1].tolist())),
                   "fallback_layers": dict(zip(procs, (~ct.supported).sum(axis=0).tolist()))},
        "active_power_w": dict(zip(procs, ct.active_power_w.tolist())), "idle_power_w": ct.idle_power_w,
        "cut_bytes": ct.cut_bytes.tolist(), "handoff_latency_s": ct.handoff_latency_s.tolist(),
        "handoff_s_per_byte": ct.handoff_s_per_byte.tolist(), "layers": layers,
        "meta": {k: v for k, v in ct.meta.items() if k != "table_meta"},
    }


@app.command()
def cost(
    model: str = typer.Argument(..., help="Zoo name or a .keras/.onnx/.tflite file."),
    device: str = typer.Option(..., "--device", "-d", help="Device or server name (search_spaces/) or a YAML path."),
    backend: str | None = typer.Option(None, "--backend", "-b", help="predicted, analytic, measured or learned "
                                       "(registered cost backends); default: predicted when the device file names "
                                       "probe tables, else analytic."),
    dtype: str | None = typer.Option(None, "--dtype", help="int8, fp16 or fp32 (default: int8; measured: the "
                                        "table's, e.g. fp32 for onnxruntime timings)."),
    table: list[str] = typer.Option([], "--table", "-t", help="measured: the table of MODEL; learned: tables to train on (repeatable)."),
    granularity: str = typer.Option("op", "--granularity", "-g", help="op, kernel or block."),
    clock: list[str] = typer.Option([], "--clock", help="PROCESSOR=FREQUENCY (e.g. cpu=1.8GHz); default: max clocks (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON to stdout instead of a table."),
    input_shape: list[str] = input_shape_option(),
) -> None:
    """Latency and energy of every layer on every processor (fallback marked *), with totals."""
    from ..cost import build_cost_table
    from ..errors import ConfigError
    from ..graph import GRANULARITIES, load_graph

    if granularity not in GRANULARITIES:
        raise ConfigError(f"--granularity {granularity!r} is not valid; expected {', '.join(GRANULARITIES)}")
    from ..cost import backend_names
    from ..errors import UnknownNameError

    if backend is not None and backend not in backend_names():
        raise UnknownNameError("cost backend", backend, backend_names())
    dev = _device(device)
    clocks = _clocks(clock)
    unknown = [c for c in clocks if c not in dev.processor_names]
    if unknown:
        raise UnknownNameError("processor", unknown[0], dev.processor_names, where=f"device {dev.name!r}")
    if backend == "measured" and len(table) != 1:
        raise ConfigError("--backend measured needs exactly one --table FILE (from `dnnplan measure`)")
    measured = None
    if backend == "measured":
        from ..cost.measured import read_measured_table

        measured = read_measured_table(table[0])
        timed = measured.meta.get("dtype")
        if dtype is not None and timed and dtype != timed:
            raise ConfigError(f"--dtype {dtype}: {table[0]} holds {timed} timings; drop --dtype or give {timed}")
        dtype = dtype or timed
    dtype = dtype or "int8"
    graph = load_graph(model, granularity, input_shapes=parse_input_shape_option(input_shape))
    if backend == "learned":
        from ..workflow import learned_model_from_tables

        learned = learned_model_from_tables(table)
    else:
        learned = None
    ct = build_cost_table(graph, dev, dtype, backend, clock_hz=clocks or None,
                          table=measured, model=learned)
    if as_json:
        print_json(cost_to_dict(ct))
        return
    _print(ct)


def _print(ct) -> None:
    from rich.table import Table

    source = {"measured": f" (table {ct.meta.get('table')})",
              "learned": f" (trained on {', '.join(map(str, ct.meta.get('trained_on') or []))})"}.get(ct.backend, "")
    t = Table(title=f"{ct.model} on {ct.device} — {ct.n_layers} layers, {ct.dtype}, {ct.backend}{source} "
                    "(ms; * = CPU fallback)", header_style="bold")
    t.add_column("#", justify="right")
    t.add_column("layer")
    for p in ct.processors:
        t.add_column(p, justify="right")
    if not STATE.quiet:
        for i, name in enumerate(ct.layer_names):
            cells = [f"{ct.latency_s[i, j] * 1e3:.3f}{'' if ct.supported[i, j] else '*'}"
                     for j in range(ct.n_processors)]
            t.add_row(str(i), name, *cells)
        t.add_section()
    t.add_row("", "[bold]total latency (ms)[/]", *[f"{v * 1e3:.2f}" for v in ct.cum_latency_s[-1]])
    t.add_row("", "[bold]total energy (mJ)[/]", *[f"{v * 1e3:.2f}" for v in ct.cum_energy_j[-1]])
    t.add_row("", "fallback layers", *[str(int(v)) for v in (~ct.supported).sum(axis=0)])
    console.print(t)
    for line in predictor_lines(ct.meta.get("predicted") or {}):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def predictor_lines(predicted: dict) -> list[str]:
    """What stands behind a ``predicted`` table, per processor: the predictor, its validated error
    band, and the layers priced analytically (no probes of their kernel)."""
    out = []
    for proc, info in predicted.items():
        pred = info.get("predictor")
        if pred is None:
            out.append(f"{proc}: {info.get('reason', 'no predictor: analytic')}")
            continue
        band = info.get("validated")
        ok = (f"validated error band {band['error_min'] * 100:+.1f}% .. {band['error_max'] * 100:+.1f}% "
              f"(median |error| {band['median_abs_error'] * 100:.1f}%, {band['within_10pct'] * 100:.0f}% within "
              f"10%) over {len(band['models'])} networks ({band['runner']}, {band['date']})" if band
              else "not validated (dnnplan calibrate --validate)")
        fixes = info.get("corrections") or {}
        line = (f"{proc}: predicted from {pred['probes']} {pred['runtime']} {pred['dtype']} "
                f"{pred['threads']}-thread probes ({pred['table']}); {ok}")
        if fixes:
            line += "; profile corrections " + ", ".join(f"{k} x{v:.3g}" for k, v in fixes.items())
        out.append(line)
        by_reason: dict[str, list[str]] = {}
        for row in info.get("analytic_layers") or []:
            by_reason.setdefault(row["reason"], []).append(row["layer"])
        for reason, layers in by_reason.items():
            shown = ", ".join(layers[:6]) + (f" and {len(layers) - 6} more" if len(layers) > 6 else "")
            out.append(f"  {len(layers)} layer(s) priced by the analytic model ({reason}): {shown}")
    return out
