"""``dnnplan calibrate``: the cost model against published absolute figures (``--report``), or a
device's processor fitted to per-operator profiles (``--from-profile``)."""

from __future__ import annotations

from typing import Optional

import typer

from . import app
from .common import console, input_shape_option, output_file, parse_input_shape_option, print_json


@app.command("calibrate")
def calibrate(
    report: bool = typer.Option(False, "--report", help="Print modeled / published for every published point and fact."),
    published: Optional[str] = typer.Option(None, "--published", help="Published-points YAML (default: the shipped search_spaces/calibration/published.yaml)."),
    no_pipeline: bool = typer.Option(False, "--no-pipeline", help="Skip the exact pipeline rows (the slowest part)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any row fails, known failures included."),
    device: Optional[str] = typer.Option(None, "--device", "-d", help="With --from-profile: the device (name or YAML) whose processor is fitted."),
    from_profile: Optional[list[str]] = typer.Option(None, "--from-profile", help="Per-operator profile(s) to fit to (repeat the flag): TFLite benchmark_model --enable_op_profiling output or CSV, onnxruntime profiling JSON."),
    model: Optional[list[str]] = typer.Option(None, "--model", "-m", help="With --from-profile: the model each profile was taken of (one for all, or one per profile, in order)."),
    processor: Optional[str] = typer.Option(None, "--processor", "-p", help="With --from-profile: the processor fitted (default: the device's processor of the profile's kind, else its CPU)."),
    dtype: str = typer.Option("fp32", "--dtype", help="With --from-profile: the dtype the profiled model ran in (fp32, fp16, int8)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", callback=output_file, help="With --from-profile: write the fitted device YAML here."),
    input_shape: Optional[list[str]] = input_shape_option(),
) -> None:
    """Fidelity report of the device models (docs/METHODS.md sections 1-8); exit 1 when a row fails that
    is not a known failure (``known_failures`` of the published data; all rows with --strict).
    With --from-profile, fit a processor of --device to profiles and print per op family the
    profiled, modeled-before and modeled-after times."""
    from ..errors import ConfigError

    if from_profile:
        _from_profile(device, from_profile, model or [], processor, dtype, out, as_json,
                      parse_input_shape_option(input_shape))
        return
    for flag, value in (("--device", device), ("--model", model), ("--processor", processor), ("--out", out),
                        ("--input-shape", input_shape)):
        if value:
            raise ConfigError(f"calibrate {flag} is only used with --from-profile FILE")
    if not report:
        raise ConfigError("calibrate: give --report, or --device D --from-profile FILE --model M [--out D.yaml]")
    from ..report.fidelity import fidelity_report, format_report

    rep = fidelity_report(published, pipeline=not no_pipeline)
    if as_json:
        print_json(rep.to_dict())
    else:
        console.print("\n".join(format_report(rep)), markup=False, highlight=False)
    raise typer.Exit(0 if (rep.passed if strict else not rep.unexpected_failures) else 1)


def _from_profile(device, files, models, processor, dtype, out, as_json, shapes=None) -> None:
    from datetime import datetime, timezone

    from ..errors import ConfigError
    from ..graph import load_graph
    from ..hardware.loader import load_device, resolve_shipped
    from ..hardware.schema import DTYPES
    from ..measure.profile_fit import device_yaml, fit_processor_to_profiles, write_device_yaml
    from ..measure.profile_import import import_profile, pick_processor, read_profile

    if device is None:
        raise ConfigError("--from-profile needs --device D (the device whose processor the profiles are fitted to)")
    if not models:
        raise ConfigError("--from-profile needs --model M (the zoo name or model file each profile was taken of)")
    if len(models) not in (1, len(files)):
        raise ConfigError(f"give one --model for all profiles or one per --from-profile (got {len(models)} models "
                          f"for {len(files)} profiles)")
    if dtype not in DTYPES:
        raise ConfigError(f"--dtype {dtype!r} is not valid; expected one of {', '.join(DTYPES)}")
    if out is not None and not out.endswith((".yaml", ".yml")):
        raise ConfigError(f"--out {out!r}: the fitted device is a .yaml file")
    path = resolve_shipped(device, "devices", "device")
    dev = load_device(path)
    name = pick_processor(dev, read_profile(files[0]), processor)
    graphs: dict[str, object] = {}
    matches = []
    for f, m in zip(files, models * len(files) if len(models) == 1 else models, strict=False):
        if m not in graphs:
            graphs[m] = load_graph(m, input_shapes=shapes)
        matches.append(import_profile(f, graphs[m], dev, name, dtype)[1])
    fit = fit_processor_to_profiles(dev, name, matches, dtype)
    if out:
        date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        write_device_yaml(out, device_yaml(str(path), name, fit, list(files), date))
    if as_json:
        print_json({"device": dev.name, "out": out, **fit.to_dict()})
        return
    console.print(f"{dev.name} {name}: fitted to {len(files)} profile(s)" + (f" → {out}" if out else ""), highlight=False)
    console.print("  efficiency " + ", ".join(f"{k} {v:.4g}" for k, v in fit.efficiency.items())
                  + f"; layer_overhead {fit.layer_overhead_s * 1e6:.3g} us; memory_bandwidth "
                  f"{fit.memory_bandwidth_bytes_per_s / 1e9:.3g} GB/s"
                  + (f"; invoke_overhead {fit.invoke_overhead_s * 1e6:.3g} us" if fit.invoke_overhead_s is not None else ""),
                  highlight=False)
    head = f"  {'profile':30s} {'family':8s} {'profile ms':>11s} {'before ms':>10s} {'after ms':>10s} {'before/prof':>11s} {'after/prof':>10s}"
    console.print(head, highlight=False, markup=False)
    for r in fit.rows:
        console.print(f"  {r.model[:30]:30s} {r.family:8s} {r.profile_s * 1e3:11.3f} {r.before_s * 1e3:10.3f} "
                      f"{r.after_s * 1e3:10.3f} {r.ratio_before:11.3f} {r.ratio_after:10.3f}", highlight=False, markup=False)
    for m in matches:
        apart = float(m.unmodeled_s.sum()) if m.unmodeled_s is not None else 0.0
        if apart > 0:
            console.print(f"  {m.graph.name}: {apart * 1e3:.3f} ms of layout operators the model does not cost "
                          "(a converter's transposes) left out of the fit", highlight=False)
