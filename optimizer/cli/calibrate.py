"""``dnnplan calibrate``: the cost model against published absolute figures (``--report``), a
device's processor fitted to per-operator profiles (``--from-profile``), or its predictors fitted
to measured probes (``--probes``, ``--validate``).

The options become a request of :mod:`optimizer.workflow.calibrate_requests` (which options go
with which mode is checked there) and the fitting modes run in :mod:`optimizer.workflow.calibrate`;
this module only parses and prints. ``--report`` calls :mod:`optimizer.report.fidelity` here: the
report layer sits above the workflow, so the workflow cannot run it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Optional

import typer

from . import app
from .common import console, input_shape_option, output_file, print_json, stage_progress, state_file

if TYPE_CHECKING:
    from ..workflow.calibrate import ProbeOutcome, ProfileFitOutcome

#: how the calibrate requests' fields are named on the command line (errors speak of the options)
OPTIONS = {"report": "--report", "published": "--published", "device": "--device", "profiles": "--from-profile",
           "models": "--model", "processor": "--processor", "dtype": "--dtype", "out": "--out",
           "input_shape": "--input-shape", "probes": "--probes", "runner": "--runner", "threads": "--threads",
           "families": "--families", "near": "--near", "networks": "--validate", "seed": "--seed",
           "table": "--table", "measure_cmd": "--measure-cmd", "runtime": "--runtime", "probe_format": "--format",
           "delegate": "--delegate", "serial": "--serial"}


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
    delegate: str = typer.Option("xnnpack", "--delegate", help="With --runner litert: xnnpack (default) or cpu (TFLite's built-in kernels, as benchmark_model --use_xnnpack=false); with --runner adb: benchmark_model delegate: xnnpack, cpu, gpu or nnapi."),
    serial: Optional[str] = typer.Option(None, "--serial", help="With --runner adb: the phone's adb serial."),
) -> None:
    """Fidelity report of the device models (docs/METHODS.md sections 1-8); exit 1 when a row fails that
    is not a known failure (``known_failures`` of the published data; all rows with --strict).
    With --from-profile, fit a processor of --device to profiles and print per op family the
    profiled, modeled-before and modeled-after times. With --probes N, measure N single-kernel
    probes on --device's processor with --runner and write its predictors (nn-Meter's method);
    with --validate, measure whole networks on the same runner against the predictions."""
    from ..workflow.calibrate import fit_device_to_profiles, probe_device
    from ..workflow.calibrate_requests import ProbeRequest, ProfileFitRequest, parse_calibrate_request

    request = parse_calibrate_request({
        "report": report, "published": published, "pipeline": not no_pipeline, "strict": strict, "device": device,
        "profiles": from_profile, "models": model, "processor": processor, "dtype": dtype, "out": out,
        "input_shape": input_shape, "probes": probes, "runner": runner, "threads": threads, "families": families,
        "near": near, "networks": validate, "seed": seed, "table": table, "measure_cmd": measure_cmd,
        "runtime": runtime, "probe_format": probe_format, "delegate": delegate, "serial": serial},
        labels=OPTIONS)
    if isinstance(request, ProbeRequest):
        outcome = probe_device(request, _progress_bar)
        if outcome.pending is not None:
            console.print(outcome.pending, highlight=False, soft_wrap=True)
        elif as_json:
            print_json(outcome.to_dict())
        else:
            _print_probe_report(outcome)
        return
    if isinstance(request, ProfileFitRequest):
        fitted = fit_device_to_profiles(request)
        if as_json:
            print_json(fitted.to_dict())
        elif fitted.corrected:
            _print_corrections(fitted)
        else:
            _print_profile_fit(fitted)
        return
    from ..report.fidelity import fidelity_report, format_report

    rep = fidelity_report(request.published, pipeline=request.pipeline)
    if as_json:
        print_json(rep.to_dict())
    else:
        console.print("\n".join(format_report(rep)), markup=False, highlight=False)
    raise typer.Exit(0 if (rep.passed if request.strict else not rep.unexpected_failures) else 1)


def _print_profile_fit(fitted: ProfileFitOutcome) -> None:
    """The analytic fit: its parameters, per profile and family the times before and after, notes."""
    fit, out, files = fitted.fit, fitted.request.out, fitted.request.profiles
    console.print(f"{fitted.device} {fitted.processor}: fitted to {len(files)} profile(s)" + (f" → {out}" if out else ""),
                  highlight=False)
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
    for m in fitted.matches:
        apart = float(m.unmodeled_s.sum()) if m.unmodeled_s is not None else 0.0
        if apart > 0:
            console.print(f"  {m.graph.name}: {apart * 1e3:.3f} ms of layout operators the model does not cost "
                          "(a converter's transposes) left out of the fit", highlight=False)


def _print_probe_report(outcome: ProbeOutcome) -> None:
    """The predictor, its held-out errors per family and, with --validate, the networks and the band."""
    import numpy as np

    entry, probe_table, report, results = outcome.entry, outcome.table, outcome.families, outcome.networks
    out, written = outcome.request.out, outcome.written
    assert entry is not None and probe_table is not None
    console.print(f"{outcome.device} {outcome.processor}: {entry.runtime} {entry.dtype} {entry.threads} thread(s), "
                  f"{len(probe_table.rows)} probes, invoke overhead {probe_table.invoke_overhead_s * 1e6:.2f} us"
                  + (f" -> {out} (table {written})" if out else ""), highlight=False, soft_wrap=True)
    levels = probe_table.meta.get("reference_levels_s") or []
    if probe_table.reference_s is not None and levels:
        lo, hi = np.percentile(levels, [10, 90]) / probe_table.reference_s - 1.0
        console.print(f"  speed reference: {probe_table.reference_s * 1e6:.1f} us, groups from {lo * 100:+.1f}% to "
                      f"{hi * 100:+.1f}% (10th-90th percentile of {len(levels)}); every probe put on its median level"
                      + ("; the host's speed moved: predictions hold at its median speed" if hi - lo > 0.10 else ""),
                      highlight=False, soft_wrap=True)
    console.print(f"  {'family':10s} {'probes':>6s} {'held-out |err| median':>22s} {'p90':>6s}", markup=False)
    for fam, r in report.items():
        console.print(f"  {fam:10s} {r['probes']:6d} {r['median_abs_error'] * 100:21.1f}% {r['p90_abs_error'] * 100:5.1f}%",
                      markup=False, highlight=False)
    if not results:
        return
    if np.isfinite(results[0].level_ratio):
        console.print(f"  networks timed with the speed reference at {results[0].level_ratio:.3f}x the probes' level; "
                      "measured times below are put on the probes' level", highlight=False, soft_wrap=True)
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
    assert b is not None  # validation records its band
    console.print(f"  validated band: {b.error_min * 100:+.1f}% .. {b.error_max * 100:+.1f}%, median |error| "
                  f"{b.median_abs_error * 100:.1f}%, {b.within_10pct * 100:.0f}% within 10% ({len(b.models)} networks)",
                  highlight=False)


@contextmanager
def _progress_bar() -> Iterator[Callable[[int, int, str], None] | None]:
    """The shared progress bar fed by a campaign's ``progress(done, total, stage)``."""
    with stage_progress("probes") as update:
        yield None if update is None else (lambda done, total, stage: update(stage, done, total))


def _print_corrections(fitted: ProfileFitOutcome) -> None:
    """The probe predictor's per-family corrections, per profile and family the times before and after."""
    fit, out, files = fitted.fit, fitted.request.out, fitted.request.profiles
    e = fit.entry
    console.print(f"{fitted.device} {fitted.processor}: {e.runtime} {e.dtype} {e.threads}-thread predictor corrected by {len(files)} "
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
