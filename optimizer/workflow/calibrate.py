"""``dnnplan calibrate``'s fitting modes, from a typed request to a result and a device file.

Each function takes a request of :mod:`optimizer.workflow.calibrate_requests` (checked before any
work), loads the device, picks the processor, fits, writes the device YAML (through
:func:`optimizer.measure.profile_fit.write_device_yaml`, which renames a temporary sibling at the
end) and returns what the caller prints; the CLI and notebooks call the same functions.

* :func:`fit_device_to_profiles`: per-operator profiles imported
  (:mod:`optimizer.measure.profile_import`) and the analytic model fitted to them
  (:mod:`optimizer.measure.profile_fit`), or, on a processor with a probe predictor, the
  predictor's per-family corrections (:mod:`optimizer.measure.profile_corrections`);
* :func:`probe_device`: a resumable probe campaign and its predictors (nn-Meter's method,
  :mod:`optimizer.measure.device_predictors`), and whole networks measured against them.

The third mode, ``--report``, compares the cost model with published figures in the report layer
(:mod:`optimizer.report.fidelity`), which sits above this one: the CLI runs it directly.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from ..cost.probe_table import ProbeTable
    from ..hardware.schema import Predictor
    from .calibrate_requests import ProbeRequest, ProfileFitRequest
    from .requests import Dtype

#: a campaign's progress callback, ``progress(done, total, stage)``
ProbeProgress = Callable[[int, int, str], None]


def _today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


@dataclass
class ProfileFitOutcome:
    """A processor fitted to profiles: the analytic fit (:class:`~optimizer.measure.profile_fit.ProfileFit`)
    or the predictor's corrections (:class:`~optimizer.measure.profile_corrections.CorrectionFit`)."""

    request: ProfileFitRequest
    device: str                   # the device's name
    processor: str
    fit: Any                      # ProfileFit | CorrectionFit
    matches: list[Any]            # the profiles matched to the models' layers, in order
    corrected: bool               # True: the processor's probe predictor was corrected

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the device, the output file and the fit."""
        return {"device": self.device, "out": self.request.out, **self.fit.to_dict()}


def fit_device_to_profiles(request: ProfileFitRequest) -> ProfileFitOutcome:
    """Import the profiles against their models and fit the processor; writes ``request.out``.

    The processor is ``request.processor``, else the device's processor of the first profile's
    kind, else its CPU (:func:`optimizer.measure.profile_import.pick_processor`). A processor with
    a probe predictor for the device's runtime and the dtype gets per-family corrections of it;
    any other gets the analytic model's efficiency, overheads and bandwidth.
    """
    from ..graph import load_graph
    from ..hardware.loader import load_device, resolve_shipped
    from ..measure.profile_fit import device_yaml, fit_processor_to_profiles, write_device_yaml
    from ..measure.profile_formats import read_profile
    from ..measure.profile_import import import_profile, pick_processor

    assert request.device is not None  # the request refuses a fit without a device
    path = resolve_shipped(request.device, "devices", "device")
    dev = load_device(path)
    name = pick_processor(dev, read_profile(request.profiles[0]), request.processor)
    graphs: dict[str, Any] = {}
    matches = []
    for profile, model in zip(request.profiles, request.model_of_each_profile, strict=False):
        if model not in graphs:
            graphs[model] = load_graph(model, input_shapes=request.input_shape)
        matches.append(import_profile(profile, graphs[model], dev, name, request.dtype)[1])
    if dev.processor(name).predictor(dev.runtime, request.dtype) is not None:
        return ProfileFitOutcome(request, dev.name, name, _correct_predictor(dev, path, name, matches, request),
                                 matches, corrected=True)
    fit = fit_processor_to_profiles(dev, name, matches, request.dtype)
    if request.out:
        write_device_yaml(request.out, device_yaml(str(path), name, fit, list(request.profiles), _today(),
                                                   request.out))
    return ProfileFitOutcome(request, dev.name, name, fit, matches, corrected=False)


def _correct_predictor(dev: Any, path: Path, name: str, matches: list[Any], request: ProfileFitRequest) -> Any:
    """Per-family corrections of ``name``'s probe predictor, written into its entry in ``request.out``."""
    from ..measure.profile_corrections import fit_corrections
    from ..measure.profile_fit import edit_processor_yaml, write_device_yaml

    fit = fit_corrections(dev, name, matches, request.dtype)
    entry = fit.entry
    if request.out:
        source = (f"fitted to profile {', '.join(request.profiles)} by dnnplan calibrate --from-profile on "
                  f"{_today()}")

        def edit(proc: Any) -> None:
            for q in proc.get("predictors") or []:
                if (q.get("runtime"), q.get("dtype"), q.get("threads")) == (entry.runtime, entry.dtype, entry.threads):
                    q["corrections"] = dict(fit.corrections)
                    q["corrections_source"] = source

        note = f"{name}: {entry.runtime}/{entry.dtype}/{entry.threads}-thread predictor corrections {source}"
        write_device_yaml(request.out, edit_processor_yaml(str(path), name, edit, note, request.out))
    return fit


@dataclass
class ProbeOutcome:
    """A processor's predictors from a probe table, their held-out errors per family, and the
    networks measured against them; or, with a phone runner, the probes waiting for the phone."""

    request: ProbeRequest
    device: str = ""              # the device's name
    processor: str = ""
    entry: Predictor | None = None   # the predictor entry written (with its validated band)
    table: ProbeTable | None = None
    families: dict[str, dict[str, float]] = field(default_factory=dict)  # family -> held-out errors
    networks: list[Any] = field(default_factory=list)  # NetworkResult per validated network
    written: Path | None = None   # the probe table copied beside request.out
    pending: str | None = None    # probes wait for the phone: what to run, then the command again

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the predictor, its errors per family and the validated networks."""
        assert self.entry is not None and self.table is not None
        entry = self.entry
        return {"device": self.device, "processor": self.processor, "runtime": entry.runtime,
                "dtype": self.request.dtype, "threads": entry.threads, "probes": len(self.table.rows),
                "families": self.families, "invoke_overhead_s": self.table.invoke_overhead_s,
                "out": self.request.out, "table": str(self.written or ""),
                "validated": entry.validated.model_dump() if entry.validated else None,
                "reference_s": self.table.reference_s,
                "networks": [{"model": r.model, "measured_s": r.measured.median_s, "spread": r.measured.spread,
                              "measured_raw_s": r.measured_raw_s, "level_ratio": r.level_ratio if r.level_ratio == r.level_ratio else None,
                              "predicted_s": r.predicted_s, "error": r.error,
                              "measured_families_s": r.measured_families,
                              "predicted_families_s": r.predicted_families} for r in self.networks]}


def probe_device(request: ProbeRequest,
                 progress: Callable[[], AbstractContextManager[ProbeProgress | None]] | None = None) -> ProbeOutcome:
    """Run ``request``'s probe campaign (resumable: the table in progress is kept), or read the
    processor's existing predictor, then measure the ``networks`` against it; writes
    ``request.out`` with the table beside it.

    ``progress`` opens the campaign's progress display (a context manager yielding
    ``progress(done, total, stage)`` or None). Ctrl-C during the campaign raises
    :class:`~optimizer.errors.Interrupted` with the probes kept.
    """
    from ..errors import ConfigError, Interrupted
    from ..graph import load_graph
    from ..hardware.loader import load_device, resolve_shipped
    from ..hardware.schema import Predictor
    from ..measure import device_predictors as dp
    from ..measure.probe_campaign import run_campaign
    from ..measure.probe_remote import ProbesPending
    from ..measure.probe_runner import IN_PROCESS

    settings, dtype, seed = request.settings, cast("Dtype", request.dtype), request.seed
    assert request.device is not None  # the request refuses probes without a device
    path = resolve_shipped(request.device, "devices", "device")
    dev = load_device(path)
    proc = dev.processor(request.processor).name if request.processor else dev.processors[dev.fallback_index].name
    work = Path(request.table) if request.table else dp.work_table(dev, proc, settings, dtype, seed)
    runner: Any = dp.make_runner(settings, dev, proc, dp.work_folder(work))
    if request.networks and settings.runner not in IN_PROCESS:
        raise ConfigError(f"--validate times whole networks in this process: use --runner litert or ort, not "
                          f"{settings.runner!r}")
    # a missing predictor is refused before the networks are converted for --validate
    existing = dp.entry_for(dev, proc, runner.runtime, dtype, runner.threads) if request.probes is None else None
    prepared = dp.prepare_validation(list(request.networks), runner.fmt, dtype, load_graph,
                                     getattr(runner, "runner", None))
    near_graphs = [load_graph(m) for m in request.near]
    if request.probes is not None:
        try:
            with (progress or nullcontext)() as on_progress:
                probe_table = run_campaign(runner, dtype, request.probes, work, seed=seed, near=near_graphs,
                                           families=list(request.families) or None, progress=on_progress)
        except ProbesPending as exc:
            return ProbeOutcome(request, pending=str(exc))
        except KeyboardInterrupt:
            from ..cost.probe_table import read_probe_table

            done = len(read_probe_table(work).rows) if work.is_file() else 0
            raise Interrupted(f"{done} probes measured and kept in {work}; re-run the command to resume") from None
        entry = Predictor(runtime=runner.runtime, dtype=dtype, threads=runner.threads, table=str(work.resolve()),
                          seed=seed)
    else:
        from ..cost.predicted import load_predictor_table

        assert existing is not None
        entry = existing
        probe_table = load_predictor_table(entry, f"device {dev.name!r}")
    families = dp.family_report(probe_table, seed)
    results = []
    if prepared:
        probed = dp.with_predictor(dev, proc, entry)
        results = dp.validate_networks(probed, proc, runner.runner, dtype, prepared, seed=seed)
        entry = entry.model_copy(update={"validated": dp.band_of(results, runner.name)})
    written = None
    if request.out:
        note = (f"{proc}: {entry.runtime}/{dtype}/{entry.threads}-thread predictor from {len(probe_table.rows)} probes "
                f"(dnnplan calibrate --probes, {_today()})")
        written = dp.write_predictor(str(path), request.out, proc, probe_table, entry, note)
    return ProbeOutcome(request, dev.name, proc, entry, probe_table, families, results, written)
