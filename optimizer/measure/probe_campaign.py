"""A probe campaign: sample kernel configurations, build their probe models, time them on a runner
and keep the results in a probe table, resumably (nn-Meter's predictor building, Zhang et al.,
MobiSys 2021: prior sampling, profiling, then adaptive sampling where the predictor errs).

The table is rewritten after every group of probes, so an interrupted campaign (Ctrl-C, a lost
phone) resumes where it stopped: probes already in the table are never measured again (their ids
are stable, :func:`optimizer.cost.probe_table.probe_id`). Each group also times an *overhead
probe* (a one-element addition): its median is the runner's per-invocation overhead, subtracted
from the group's probes and added back once per network by the predictor; a *node chain* of
:data:`NODE_CHAIN` such additions, whose time per addition past the first is what the runtime
spends per node of a network beyond the kernel's work (``node_overhead_s``, added per kernel by
the predictor: onnxruntime's is about 0.7 us, which a 200-node detector pays 200 times); and the speed
reference's kernels (:mod:`~.speed_reference`), timed at checkpoints between the samples, whose
level each sample is divided by; the group's median level is kept per row (``reference_s``).
On onnxruntime FP32 each group also times two convolutions (:data:`ACTIVATION_PASSES`: an output
that fits a core's cache, one that does not) each with a ReLU and with a Clip(0, 6): MLAS runs an
activation other than a ReLU as a pass over a convolution's output, whose time per output element
each pair's difference gives (``activation_pass_points``, interpolated by output size and priced
per fused activation by the predictor). Where the runtime wraps
a lone kernel in layout conversions that a network's consecutive kernels do not need
(onnxruntime's NCHWc ``ReorderInput``/``ReorderOutput`` around a convolution), their share of the
operator time, read from the runtime's node profiler, is left out of the kernel's time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..cost.predictor import broadcast_runs, held_out_errors
from ..cost.probe_table import (ProbeTable, empty_table, probe_id, read_probe_table, write_probe_table)
from ..errors import ConfigError
from ..graph.kernel_config import KernelConfig
from ..graph.layergraph import LayerGraph, dtype_bytes
from .probe_models import PROBE_CHANGES, PROBE_VERSION, probe_model
from .probe_runner import Timing, clock_for, cpu_name, time_interleaved
from .probes import adaptive_sample, check_families, near_sample, prior_sample
from .speed_reference import REFERENCE_VERSION, is_reference, level_timings, reference_models

#: the overhead probe: the smallest kernel a runtime can run
OVERHEAD = KernelConfig("add", n_in=2)
NODE_CHAIN = 17  # overhead kernels chained in the node-chain probe
#: the activation-pass pairs' convolutions (onnxruntime FP32): 200,704 output elements (0.8 MB) and
#: 1,204,224 (4.8 MB); on the development host the pass costs 0.21 and 0.28 ns per element
ACTIVATION_PASSES = (KernelConfig("conv", 56, 56, 64, 56, 56, 64, k=1, stride=1),
                     KernelConfig("conv", 112, 112, 32, 112, 112, 96, k=1, stride=1))
GROUP_PROBES = 16  # probes loaded and timed together (interleaved)
GROUP_BYTES = 384 * 2**20  # and at most this many weight and activation bytes among them
ADAPTIVE_SHARE = 0.25  # of the budget kept for adaptive sampling
ADAPTIVE_ROUNDS = 2
Progress = Callable[[int, int, str], None]


class ProbeRunner(Protocol):
    """What a campaign needs of a runner (:mod:`optimizer.measure.probe_runner`,
    :mod:`optimizer.measure.probe_remote`)."""

    name: str
    runtime: str
    fmt: str
    threads: int

    def version(self) -> str: ...

    def measure(self, models: Sequence[tuple[str, bytes]], seed: int) -> Sequence[Timing | None]: ...


@dataclass
class InProcess:
    """A campaign runner over an in-process runner (``LiteRTRunner`` / ``OrtRunner``): loads a
    group and times it with :func:`optimizer.measure.probe_runner.time_interleaved`."""

    runner: Any
    timing: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.runner.name)

    @property
    def runtime(self) -> str:
        return str(self.runner.runtime)

    @property
    def fmt(self) -> str:
        return str(self.runner.fmt)

    @property
    def threads(self) -> int:
        return int(self.runner.threads)

    def version(self) -> str:
        return str(self.runner.version())

    def measure(self, models: Sequence[tuple[str, bytes]], seed: int) -> list[Timing]:
        refs = [k for k, (name, _) in enumerate(models) if is_reference(name)]
        others = [k for k in range(len(models)) if k not in refs]
        load = [self.runner.load(blob, seed) for _, blob in models]
        timed = time_interleaved([load[k] for k in others], seed=seed, reference=[load[k] for k in refs],
                                 **{"clock": clock_for(self.threads), **self.timing})
        timings: list[Timing] = [timed[0]] * len(models)
        for k, t in zip([*others, *refs], timed, strict=True):
            timings[k] = t
        share = getattr(self.runner, "layout_share", None)
        if share is None:
            return timings
        return [t if is_reference(name) else replace(t, layout_share=share(blob, seed=seed))
                for t, (name, blob) in zip(timings, models, strict=True)]


@dataclass
class CampaignPlan:
    """The configurations to probe and why (``source`` per configuration)."""

    configs: list[KernelConfig]
    sources: list[str]


def plan_campaign(budget: int, seed: int = 0, near: Sequence[LayerGraph] = (), near_jitter: int = 2,
                  adaptive_share: float = ADAPTIVE_SHARE, families: Sequence[str] | None = None
                  ) -> tuple[CampaignPlan, int]:
    """The prior sample (``budget`` less the adaptive share) of ``families`` plus the probes near
    ``near``; returns the plan and the number of probes kept for adaptive sampling."""
    adaptive = int(round(budget * adaptive_share))
    prior = prior_sample(budget - adaptive, seed, families)
    wanted = set(check_families(families))
    extra = [c for c in near_sample(near, near_jitter, seed) if c not in set(prior) and c.family in wanted]
    return CampaignPlan(prior + extra, ["prior"] * len(prior) + ["near"] * len(extra)), adaptive


def _probe_bytes(cfg: KernelConfig, dtype: str) -> int:
    return (cfg.in_elems + cfg.out_elems + cfg.weight_elems) * dtype_bytes(dtype)


def _groups(configs: list[KernelConfig], dtype: str) -> list[list[int]]:
    out: list[list[int]] = []
    size = 0
    for i, c in enumerate(configs):
        b = _probe_bytes(c, dtype)
        if not out or len(out[-1]) >= GROUP_PROBES or size + b > GROUP_BYTES:
            out.append([])
            size = 0
        out[-1].append(i)
        size += b
    return out


def open_table(path: Path, meta: dict[str, Any], fmt: str = "") -> ProbeTable:
    """The campaign's table at ``path`` (resumed) or a new one with ``meta``; refuses a table of
    another runner, runtime, dtype or thread count, or one whose ``fmt`` probes were built by
    probe models that have changed since (:data:`~.probe_models.PROBE_CHANGES`; a table without
    ``probe_version`` is of version 1)."""
    if not path.is_file():
        return empty_table(meta)
    table = read_probe_table(path)
    for key in ("runner", "runtime", "dtype", "threads"):
        if table.meta.get(key) != meta.get(key):
            raise ConfigError(f"{path}: the probes there were measured with {key} {table.meta.get(key)!r}, this "
                              f"campaign uses {meta.get(key)!r}; give another --table or remove the file")
    old = table.meta.get("probe_version", 1)
    if not isinstance(old, int) or isinstance(old, bool) or old < 1:
        raise ConfigError(f"{path}: probe_version {old!r}; expected a positive integer (the probe models' "
                          "version); give another --table or remove the file")
    changed = [what for v, (f, dtype, what) in sorted(PROBE_CHANGES.items())
               if v > old and f == fmt and dtype == meta.get("dtype")]
    if changed:
        raise ConfigError(f"{path}: its probes were built by probe models of version {old}, this campaign builds "
                          f"version {PROBE_VERSION} ({changed[0]}); give another --table or remove the file")
    return table


def activation_pass_pairs(fmt: str, dtype: str, seed: int = 0) -> list[tuple[str, bytes]]:
    """The activation-pass pairs (module doc), a ReLU then a Clip probe per size of
    :data:`ACTIVATION_PASSES`, where a runtime has them (onnxruntime FP32), else none."""
    if fmt != "onnx" or dtype != "fp32":
        return []
    from .probe_onnx import with_clip_activation

    out = []
    for cfg in ACTIVATION_PASSES:
        relu = probe_model(cfg, fmt, dtype, seed)
        out += [(f"activation-relu-{cfg.out_elems}", relu), (f"activation-clip-{cfg.out_elems}", with_clip_activation(relu))]
    return out


def measure_configs(table: ProbeTable, configs: Sequence[KernelConfig], sources: Sequence[str], runner: ProbeRunner,
                    dtype: str, path: Path, *, seed: int = 0, progress: Progress | None = None,
                    stage: str = "probes") -> ProbeTable:
    """Measure the ``configs`` not yet in ``table`` on ``runner``, group by group, rewriting the
    table at ``path`` after each group; returns the grown table."""
    have = table.ids
    todo = [(c, s) for c, s in zip(configs, sources, strict=True) if probe_id(c, dtype) not in have]
    total, done = len(todo), 0
    if progress is not None:
        progress(0, total, stage)
    overheads = list(table.meta.get("overhead_samples_s", []))
    nodes = list(table.meta.get("node_overhead_samples_s", []))
    levels = list(table.meta.get("reference_levels_s", []))
    passes: dict[str, list[float]] = {str(c.out_elems): [] for c in ACTIVATION_PASSES}
    kept = table.meta.get("activation_pass_samples_s", {})
    passes.update(kept if isinstance(kept, dict) else {})
    references = reference_models(runner.fmt, dtype, seed)
    pair = activation_pass_pairs(runner.fmt, dtype, seed)
    fixed = [("overhead", probe_model(OVERHEAD, runner.fmt, dtype, seed)),
             ("node-chain", probe_model(OVERHEAD, runner.fmt, dtype, seed, repeat=NODE_CHAIN)), *pair, *references]
    lead = 2 + len(pair)  # the fixed probes timed for themselves, before the references
    for group in _groups([c for c, _ in todo], dtype):
        models = fixed + [(probe_id(todo[i][0], dtype), probe_model(todo[i][0], runner.fmt, dtype, seed))
                          for i in group]
        timings = runner.measure(models, seed + len(table.rows))
        done += len(group)
        if any(t is None for t in timings[:len(fixed)]):  # a phone's script has yet to time this group
            continue
        levelled = level_timings(timings, range(lead, len(fixed)))
        over = levelled.timings[0].median_s
        overheads.append(over)
        nodes.append(max(levelled.timings[1].median_s - over, 0.0) / (NODE_CHAIN - 1))
        for j, cfg in enumerate(ACTIVATION_PASSES if pair else ()):
            relu, clip = levelled.timings[2 + 2 * j].median_s, levelled.timings[3 + 2 * j].median_s
            passes[str(cfg.out_elems)].append(max(clip - relu, 0.0) / cfg.out_elems)
        levels.append(_sig(levelled.level_s))
        records = []
        for i, t in zip(group, levelled.timings[lead:], strict=True):
            if not t.samples:
                continue
            cfg, source = todo[i]
            kernel_s = max(t.median_s - over, 0.02 * t.median_s) * (1.0 - t.layout_share)
            records.append({"id": probe_id(cfg, dtype), **cfg.as_row(), "dtype": dtype,
                            "latency_s": _sig(kernel_s), "raw_s": _sig(t.median_s),
                            "spread": _sig(t.spread), "samples": t.samples, "source": source,
                            "reference_s": levels[-1]})
        table = table.with_rows(records, {"invoke_overhead_s": float(np.median(overheads)),
                                          "overhead_samples_s": [round(v, 9) for v in overheads[-64:]],
                                          "node_overhead_s": float(np.median(nodes)),
                                          "node_overhead_samples_s": [round(v, 9) for v in nodes[-64:]],
                                          "reference_version": REFERENCE_VERSION, "reference_levels_s": levels,
                                          **({"activation_pass_points": [[int(n), float(np.median(v))]
                                                                         for n, v in passes.items() if v],
                                              "activation_pass_samples_s": {n: [float(f"{x:.4g}") for x in v[-64:]]
                                                                            for n, v in passes.items()}}
                                             if pair else {})})
        write_probe_table(table, path)
        if progress is not None:
            progress(done, total, stage)
    return table


def _sig(value: float) -> float:
    """``value`` to the 6 significant digits a table stores, so that a resumed campaign sees
    exactly the numbers it saw before (its adaptive samples depend on them)."""
    return float(f"{value:.6g}")


def _check_pending(runner: ProbeRunner) -> None:
    """Stop the campaign when probe models wait for a phone (:class:`~.probe_remote.ProbesPending`)."""
    pending = int(getattr(runner, "pending", 0))
    if pending:
        from .probe_remote import ProbesPending

        script = runner.write_script()  # type: ignore[attr-defined]
        raise ProbesPending(f"{pending} probe models wait for the phone in {script.parent}: run {script}, then run "
                            "this command again to read the timings back")


def run_campaign(runner: ProbeRunner, dtype: str, budget: int, path: Path, *, seed: int = 0,
                 near: Sequence[LayerGraph] = (), families: Sequence[str] | None = None,
                 extra_meta: dict[str, Any] | None = None, adaptive_rounds: int = ADAPTIVE_ROUNDS,
                 progress: Progress | None = None) -> ProbeTable:
    """The whole campaign (module doc): prior and near probes, then ``adaptive_rounds`` rounds of
    adaptive sampling with the rest of the budget, resumable from the table at ``path``."""
    if budget < 1:
        raise ConfigError(f"--probes {budget}: need a positive budget")
    meta = {"runner": runner.name, "runtime": runner.runtime, "runtime_version": runner.version(), "dtype": dtype,
            "threads": runner.threads, "cpu": cpu_name(), "seed": seed, "budget": budget,
            **({"clock": clock_for(runner.threads)} if isinstance(runner, InProcess) else {}),
            "measured_at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "invoke_overhead_s": 0.0,
            "probe_version": PROBE_VERSION, **(extra_meta or {})}
    table = open_table(path, meta, runner.fmt)
    table = table.with_rows([], {k: v for k, v in meta.items()
                                 if k not in table.meta or k in ("budget", "probe_version")})
    plan, adaptive = plan_campaign(budget, seed, near, families=families,
                                   adaptive_share=ADAPTIVE_SHARE if adaptive_rounds else 0.0)
    table = measure_configs(table, plan.configs, plan.sources, runner, dtype, path, seed=seed, progress=progress)
    _check_pending(runner)
    per_round = adaptive // max(adaptive_rounds, 1)
    chosen = list(plan.configs)  # each round looks only at the probes chosen before it: a resumed
    for r in range(adaptive_rounds):  # campaign chooses the same adaptive probes again
        if per_round < 1:
            break
        # at the level of the probes chosen before this round, which a resumed campaign sees alike
        seen = table.rows["id"].isin({probe_id(c, dtype) for c in chosen}).to_numpy()
        by_id = dict(zip(table.rows["id"][seen], replace(table, rows=table.rows[seen]).latency_s, strict=True))
        configs = [c for c in chosen if probe_id(c, dtype) in by_id]
        y = np.array([by_id[probe_id(c, dtype)] for c in configs])
        errors = held_out_errors(configs, y, dtype, seed=seed + r, runs=broadcast_runs(runner.runtime, dtype))
        new = adaptive_sample(configs, errors, per_round, seed=seed + r, exclude=chosen)
        chosen += new
        table = measure_configs(table, new, ["adaptive"] * len(new), runner, dtype, path, seed=seed,
                                progress=progress, stage=f"adaptive {r + 1}/{adaptive_rounds}")
        _check_pending(runner)
    return table
