"""``dnnplan calibrate``: the cost model against published absolute figures (``--report``), or a
device's processor fitted to per-operator profiles (``--from-profile``)."""

from __future__ import annotations

from typing import Optional

import typer

from . import app
from .common import STATE, console, console_err, input_shape_option, output_file, parse_input_shape_option, print_json, state_file


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
    out: Optional[str] = typer.Option(None, "--out", "-o", callback=output_file, help="With --from-profile/--probes/--validate: write the device YAML here (probe tables beside it)."),
    input_shape: Optional[list[str]] = input_shape_option(),
    probes: Optional[int] = typer.Option(None, "--probes", help="Measure a probe table of N single-kernel models on the device and fit its predictors (resumable)."),
    runner: str = typer.Option("litert", "--runner", help="With --probes/--validate: litert (LiteRT XNNPACK here), ort (onnxruntime here), adb (a phone's benchmark_model through a generated script), cmd (--measure-cmd)."),
    threads: int = typer.Option(1, "--threads", help="With --probes/--validate: runtime threads."),
    families: Optional[str] = typer.Option(None, "--families", help="With --probes: only these kernel families (comma-separated)."),
    near: Optional[str] = typer.Option(None, "--near", help="With --probes: extra probes near the kernels of these networks (comma-separated)."),
    validate: Optional[str] = typer.Option(None, "--validate", help="Measure these networks (comma-separated) on the same runner and print predicted vs measured; the band goes into --out."),
    seed: int = typer.Option(0, "--seed", help="With --probes: sampling and fitting seed."),
    table: Optional[str] = typer.Option(None, "--table", callback=state_file, help="With --probes: the probe table in progress (default: results/cache/probes/...); kept across runs."),
    measure_cmd: Optional[str] = typer.Option(None, "--measure-cmd", help="With --runner cmd: the measurement command (PROTOCOL.md)."),
    runtime: Optional[str] = typer.Option(None, "--runtime", help="With --runner cmd: the runtime the command runs (default: the device's)."),
    probe_format: str = typer.Option("tflite", "--format", help="With --runner cmd: probe model format, tflite or onnx."),
    delegate: str = typer.Option("xnnpack", "--delegate", help="With --runner adb: benchmark_model delegate: xnnpack, cpu, gpu or nnapi."),
    serial: Optional[str] = typer.Option(None, "--serial", help="With --runner adb: the phone's adb serial."),
) -> None:
    """Fidelity report of the device models (docs/METHODS.md sections 1-8); exit 1 when a row fails that
    is not a known failure (``known_failures`` of the published data; all rows with --strict).
    With --from-profile, fit a processor of --device to profiles and print per op family the
    profiled, modeled-before and modeled-after times. With --probes N, measure N single-kernel
    probes on --device's processor with --runner and write its predictors (nn-Meter's method);
    with --validate, measure whole networks on the same runner against the predictions."""
    from ..errors import ConfigError

    if probes is not None or validate:
        if from_profile or report:
            raise ConfigError("calibrate: --probes/--validate cannot be combined with --from-profile or --report")
        from ..measure.device_predictors import RunnerSettings

        settings = RunnerSettings(runner, threads, measure_cmd, runtime, probe_format, delegate, serial)
        _probe_device(device, processor, probes, settings, dtype, _names(families), _names(near), _names(validate),
                      seed, table, out, as_json)
        return
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
    from ..measure.profile_formats import read_profile
    from ..measure.profile_import import import_profile, pick_processor

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
    if dev.processor(name).predictor(dev.runtime, dtype) is not None:
        _correct_predictor(dev, path, name, matches, dtype, files, out, as_json)
        return
    fit = fit_processor_to_profiles(dev, name, matches, dtype)
    if out:
        date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        write_device_yaml(out, device_yaml(str(path), name, fit, list(files), date, out))
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
    for note in fit.notes:
        console.print(f"  note: {note}", highlight=False, markup=False)
    for m in matches:
        apart = float(m.unmodeled_s.sum()) if m.unmodeled_s is not None else 0.0
        if apart > 0:
            console.print(f"  {m.graph.name}: {apart * 1e3:.3f} ms of layout operators the model does not cost "
                          "(a converter's transposes) left out of the fit", highlight=False)


def _names(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _probe_device(device, processor, budget, settings, dtype, families, near, validate, seed, table, out,
                  as_json) -> None:
    """``calibrate --probes/--validate`` (see :mod:`optimizer.measure.device_predictors`)."""
    from datetime import datetime, timezone
    from pathlib import Path

    from ..errors import ConfigError, Interrupted
    from ..graph import load_graph
    from ..hardware.loader import load_device, resolve_shipped
    from ..hardware.schema import Predictor
    from ..measure import device_predictors as dp
    from ..measure.probe_campaign import run_campaign
    from ..measure.probe_remote import ProbesPending
    from ..measure.probes import check_families

    if device is None:
        raise ConfigError("--probes/--validate need --device D (the device whose processor is probed)")
    if dtype not in ("fp32", "int8"):
        raise ConfigError(f"--dtype {dtype!r}: probes and validation run at fp32 or int8")
    if budget is not None and budget < 1:
        raise ConfigError(f"--probes {budget}: give a positive number of probes")
    if out is not None and not out.endswith((".yaml", ".yml")):
        raise ConfigError(f"--out {out!r}: the device file is a .yaml file")
    check_families(families)
    path = resolve_shipped(device, "devices", "device")
    dev = load_device(path)
    proc = dev.processor(processor).name if processor else dev.processors[dev.fallback_index].name
    work = Path(table) if table else dp.work_table(dev, proc, settings, dtype, seed)
    runner = dp.make_runner(settings, dev, proc, dp.work_folder(work))
    if validate and settings.runner not in dp.IN_PROCESS:
        raise ConfigError(f"--validate times whole networks in this process: use --runner litert or ort, not "
                          f"{settings.runner!r}")
    prepared = dp.prepare_validation(validate, runner.fmt, dtype, load_graph, getattr(runner, "runner", None))
    near_graphs = [load_graph(m) for m in near]
    if budget is not None:
        try:
            with _progress_bar() as progress:
                probe_table = run_campaign(runner, dtype, budget, work, seed=seed, near=near_graphs,
                                           families=families or None, progress=progress)
        except ProbesPending as exc:
            console.print(str(exc), highlight=False, soft_wrap=True)
            return
        except KeyboardInterrupt:
            from ..cost.probe_table import read_probe_table

            done = len(read_probe_table(work).rows) if work.is_file() else 0
            raise Interrupted(f"{done} probes measured and kept in {work}; re-run the command to resume") from None
        entry = Predictor(runtime=runner.runtime, dtype=dtype, threads=runner.threads, table=str(work.resolve()),
                          seed=seed)
    else:
        from ..cost.predicted import load_predictor_table

        entry = dp.entry_for(dev, proc, runner.runtime, dtype, runner.threads)
        probe_table = load_predictor_table(entry, f"device {dev.name!r}")
    report = dp.family_report(probe_table, seed)
    results = []
    if prepared:
        probed = dp.with_predictor(dev, proc, entry)
        results = dp.validate_networks(probed, proc, runner.runner, dtype, prepared, seed=seed)
        entry = entry.model_copy(update={"validated": dp.band_of(results, runner.name)})
    written = None
    if out:
        date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        note = (f"{proc}: {entry.runtime}/{dtype}/{entry.threads}-thread predictor from {len(probe_table.rows)} probes "
                f"(dnnplan calibrate --probes, {date})")
        written = dp.write_predictor(str(path), out, proc, probe_table, entry, note)
    if as_json:
        print_json({"device": dev.name, "processor": proc, "runtime": entry.runtime, "dtype": dtype,
                    "threads": entry.threads, "probes": len(probe_table.rows), "families": report,
                    "invoke_overhead_s": probe_table.invoke_overhead_s, "out": out, "table": str(written or ""),
                    "validated": entry.validated.model_dump() if entry.validated else None,
                    "networks": [{"model": r.model, "measured_s": r.measured.median_s, "spread": r.measured.spread,
                                  "predicted_s": r.predicted_s, "error": r.error,
                                  "measured_families_s": r.measured_families,
                                  "predicted_families_s": r.predicted_families} for r in results]})
        return
    _print_probe_report(dev.name, proc, entry, probe_table, report, results, out, written)


def _print_probe_report(device, proc, entry, probe_table, report, results, out, written) -> None:
    console.print(f"{device} {proc}: {entry.runtime} {entry.dtype} {entry.threads} thread(s), "
                  f"{len(probe_table.rows)} probes, invoke overhead {probe_table.invoke_overhead_s * 1e6:.2f} us"
                  + (f" -> {out} (table {written})" if out else ""), highlight=False, soft_wrap=True)
    console.print(f"  {'family':10s} {'probes':>6s} {'held-out |err| median':>22s} {'p90':>6s}", markup=False)
    for fam, r in report.items():
        console.print(f"  {fam:10s} {r['probes']:6d} {r['median_abs_error'] * 100:21.1f}% {r['p90_abs_error'] * 100:5.1f}%",
                      markup=False, highlight=False)
    if not results:
        return
    console.print(f"  {'network':28s} {'measured ms':>12s} {'spread':>7s} {'predicted ms':>13s} {'error':>7s}",
                  markup=False)
    for r in results:
        console.print(f"  {r.model[-28:]:28s} {r.measured.median_s * 1e3:12.3f} {r.measured.spread * 100:6.1f}% "
                      f"{r.predicted_s * 1e3:13.3f} {r.error * 100:+6.1f}%", markup=False, highlight=False)
        for fam in sorted(set(r.measured_families) | set(r.predicted_families)):
            m, p = r.measured_families.get(fam), r.predicted_families.get(fam)
            console.print(f"    {fam:26s} {'' if m is None else f'{m * 1e3:12.3f}':>12s} {'':7s} "
                          f"{'' if p is None else f'{p * 1e3:13.3f}':>13s}", markup=False, highlight=False)
    b = entry.validated
    console.print(f"  validated band: {b.error_min * 100:+.1f}% .. {b.error_max * 100:+.1f}%, median |error| "
                  f"{b.median_abs_error * 100:.1f}%, {b.within_10pct * 100:.0f}% within 10% ({len(b.models)} networks)",
                  highlight=False)


def _progress_bar():
    """A Rich progress bar fed by a campaign's ``progress(done, total, stage)`` (None with --quiet)."""
    from contextlib import contextmanager

    @contextmanager
    def bar():
        if STATE.quiet:
            yield None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console_err, transient=True) as prog:
            task = prog.add_task("probes", total=None)

            def update(done: int, total: int, stage: str) -> None:
                prog.update(task, description=stage, completed=done, total=total)
            yield update

    return bar()


def _correct_predictor(dev, path, name, matches, dtype, files, out, as_json) -> None:
    """``--from-profile`` on a processor with a probe predictor: per-family corrections of it
    (:mod:`optimizer.measure.profile_corrections`), written into the predictor's entry."""
    from datetime import datetime, timezone

    from ..measure.profile_corrections import fit_corrections
    from ..measure.profile_fit import edit_processor_yaml, write_device_yaml

    fit = fit_corrections(dev, name, matches, dtype)
    e = fit.entry
    if out:
        date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        source = f"fitted to profile {', '.join(files)} by dnnplan calibrate --from-profile on {date}"

        def edit(proc) -> None:
            for q in proc.get("predictors") or []:
                if (q.get("runtime"), q.get("dtype"), q.get("threads")) == (e.runtime, e.dtype, e.threads):
                    q["corrections"] = dict(fit.corrections)
                    q["corrections_source"] = source

        note = f"{name}: {e.runtime}/{e.dtype}/{e.threads}-thread predictor corrections {source}"
        write_device_yaml(out, edit_processor_yaml(str(path), name, edit, note, out))
    if as_json:
        print_json({"device": dev.name, "out": out, **fit.to_dict()})
        return
    console.print(f"{dev.name} {name}: {e.runtime} {e.dtype} {e.threads}-thread predictor corrected by {len(files)} "
                  "profile(s)" + (f" → {out}" if out else ""), highlight=False)
    console.print("  corrections " + ", ".join(f"{k} x{v:.3g}" for k, v in fit.corrections.items()), highlight=False)
    console.print(f"  {'profile':30s} {'family':10s} {'profile ms':>11s} {'before ms':>10s} {'after ms':>10s}",
                  markup=False)
    for r in fit.rows:
        console.print(f"  {r.model[:30]:30s} {r.family:10s} {r.profile_s * 1e3:11.3f} {r.before_s * 1e3:10.3f} "
                      f"{r.after_s * 1e3:10.3f}", markup=False, highlight=False)
    for prof, (p, b, a) in fit.totals.items():
        console.print(f"  {prof}: profiled {p * 1e3:.3f} ms, predicted {b * 1e3:.3f} ms before, {a * 1e3:.3f} ms after",
                      highlight=False, markup=False)
    for note in fit.notes:
        console.print(f"  note: {note}", highlight=False, markup=False)
