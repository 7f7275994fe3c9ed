"""Benchmark: time to render ``dnnplan report`` for a batch run of >= 100 tasks (target < 10 s).

Two kinds of run folder, both in the result-store layout (``run.json``, ``tasks/<id>/{task.json,
plan.json, result.json}``, ``index.sqlite``):

* real: a 106-task job (a 12-op ONNX network written with onnx.helper × pixel6, galaxy_s22 ×
  map/GA and split/NSGA-II × 26 seeds, plus a task that fails when it runs (a corrupt ``.onnx``
  file) and a split under a 1 kB phone memory limit, which only the all-on-the-server split meets) run by
  :func:`optimizer.batch.run_job` on 2 worker processes;
* synthetic: 120 and 480 tasks recorded through :class:`optimizer.batch.ResultStore` with
  schema-valid plans whose metrics come from a seeded generator (5 % failed), for size scaling.

Each is timed through :func:`optimizer.report.document.write_report`.

Run: ``.venv/bin/python benchmarks/bench_report.py [--synthetic-only]``
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _byom import write_residual_onnx  # noqa: E402


from optimizer.batch import ResultStore, TaskOutcome, TaskSpec  # noqa: E402
from optimizer.batch.jobspec import JobSpec  # noqa: E402
from optimizer.plan.schema import (  # noqa: E402
    HostStage,
    ModelRef,
    Plan,
    Predicted,
    SearchInfo,
    Split,
    Stage,
    new_provenance,
)

MODELS = ("mobilenet_v2", "resnet50", "ssd_mobilenet_v1", "ssd_mobilenet_v2", "alexnet", "vgg16")
DEVICES = ("pixel6", "galaxy_s22")
TARGET_S = 10.0


def _plan(task: TaskSpec, rng: np.random.Generator) -> dict:
    layers = int(rng.integers(20, 200))
    model = ModelRef(name=task.model, sha256="0" * 64, layers=layers, granularity=task.granularity or "op")
    search = SearchInfo(solver=task.solver or "", seed=task.seed, objectives=list(task.objectives or []),
                        evaluations=int(rng.integers(500, 2000)), space_size=7e4,
                        explored_fraction=float(rng.uniform(0.005, 0.03)), wall_time_s=float(rng.uniform(0.5, 3)))
    if task.kind == "map":
        cuts = np.sort(rng.choice(np.arange(1, layers), 2, replace=False))
        bounds = [0, *cuts.tolist(), layers]
        times = rng.uniform(2e-3, 6e-3, 3)
        stages = [Stage(processor=p, first_layer=bounds[k], last_layer=bounds[k + 1] - 1,
                        predicted_time_s=float(times[k])) for k, p in enumerate(("tpu", "gpu", "cpu"))]
        pred = Predicted(throughput_fps=float(1 / times.max()), latency_s=float(times.sum()),
                         energy_j=float(rng.uniform(0.02, 0.05)), memory_bytes=float(rng.uniform(2e6, 8e6)))
        plan = Plan(kind="pipeline", model=model, device=task.device, preprocess=HostStage(), stages=stages,
                    postprocess=HostStage(), predicted=pred, search=search, provenance=new_provenance())
    else:
        k = int(rng.integers(1, layers))
        parts = rng.uniform(2e-3, 2e-2, 4)
        pred = Predicted(latency_s=float(parts.sum() + 0.01), energy_j=float(rng.uniform(0.015, 0.08)),
                         memory_bytes=float(rng.uniform(5e5, 4e6)),
                         extra={"client_s": float(parts[0]), "upload_s": float(parts[1]),
                                "server_s": float(parts[2]), "download_s": float(parts[3]), "rtt_s": 0.01})
        plan = Plan(kind="split", model=model, device=task.device, network=task.network,
                    split=Split(layer=k, bytes=int(rng.integers(1000, 400000)), head_processor="cpu",
                                head_clock_hz=1.5e9, wire_dtype="int8", server="smartsplit_i5"),
                    predicted=pred, search=search, provenance=new_provenance())
    return plan.model_dump(mode="json")


def build_run(root: Path, seeds: int) -> int:
    """A run of len(MODELS) x len(DEVICES) x (map + split) x seeds tasks; returns the task count."""
    tasks = [TaskSpec(kind=kind, model=m, device=d, network="wifi_10" if kind == "split" else None, seed=s)
             for kind in ("map", "split") for m in MODELS for d in DEVICES for s in range(seeds)]
    store = ResultStore(root)
    store.initialise(JobSpec(name=f"bench{len(tasks)}", tasks=[t.canonical() for t in tasks]), tasks)
    rng = np.random.default_rng(0)
    for i, t in enumerate(tasks):
        if i % 20 == 7:
            store.record(t, TaskOutcome(t.task_id, "failed", 0.01, error=f"unknown model 'x{i}'"))
            continue
        plan = _plan(t, rng)
        metrics = {k: v for k, v in plan["predicted"].items() if isinstance(v, (int, float))}
        s = plan["search"]
        store.record(t, TaskOutcome(t.task_id, "done", s["wall_time_s"], metrics=metrics, plan=plan,
                                    search={k: s[k] for k in ("evaluations", "space_size", "explored_fraction",
                                                              "wall_time_s")}))
    return len(tasks)


def build_real_run(root: Path, seeds: int = 26) -> int:
    """Run a real job with optimizer.batch (2 workers); returns the task count."""
    from optimizer.batch import run_job

    model = str(write_residual_onnx(root.parent / "tinynet.onnx"))
    broken = root.parent / "broken.onnx"  # a name the up-front check resolves; the task fails on reading it
    broken.write_bytes(b"not an ONNX protobuf")
    job = JobSpec.model_validate({
        "name": "bench_real",
        "grid": {"models": [model], "devices": list(DEVICES), "seeds": list(range(seeds)),
                 "map": {"solvers": ["ga"]}, "split": {"networks": ["wifi_10"], "solvers": ["nsga2"]}},
        "tasks": [{"kind": "map", "model": str(broken), "device": "pixel6"},
                  {"kind": "split", "model": model, "device": "pixel6", "network": "wifi_10",
                   "memory_limit": "1 kB"}]})
    summary = run_job(job, ResultStore(root), workers=2)
    return summary.total


def main() -> int:
    from optimizer.report import load_run
    from optimizer.report.document import write_report

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    worst = 0.0
    kinds = [("synthetic", 5), ("synthetic", 20)]
    if "--synthetic-only" not in sys.argv[1:]:
        kinds.insert(0, ("real", 26))
    with tempfile.TemporaryDirectory() as tmp:
        for kind, seeds in kinds:
            run = Path(tmp) / f"{kind}{seeds}" / "run"
            run.parent.mkdir()
            t0 = time.perf_counter()
            n = build_real_run(run, seeds) if kind == "real" else build_run(run, seeds)
            build_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            df = load_run(run)
            load_s = time.perf_counter() - t0
            t0, c0 = time.perf_counter(), time.process_time()
            files = write_report([run], Path(tmp) / f"report_{kind}{seeds}")
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            worst = max(worst, wall) if n >= 100 else worst
            size = files.html.stat().st_size / 1e3
            print(f"{kind:9s} {n:4d} tasks ({(df['status'] == 'failed').sum()} failed): built in {build_s:.1f} s; load_run "
                  f"{load_s:.2f} s; report {wall:.2f} s wall ({cpu:.2f} s CPU), {len(files.figures)} figures, "
                  f"report.html {size:.0f} kB -> {wall / TARGET_S:.0%} of the {TARGET_S:.0f} s budget")
    print(f"worst report time for >= 100 tasks: {worst:.2f} s (target < {TARGET_S:.0f} s): "
          f"{'PASS' if worst < TARGET_S else 'FAIL'}")
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
