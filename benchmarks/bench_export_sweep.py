"""Every boundary of every real model exports, loads and agrees with the single file.

For each model of the project's real-model set (the public ``.onnx`` files of
tests/third_party: PaddleOCR v4 det/rec and v2 cls, nudenet's YOLOv8n, magika, MTCNN's keras2onnx
P-Net; the MediaPipe ``.tflite`` fixtures) and three zoo networks, FP32 and INT8 (a model file's
INT8 version is what ``dnnplan quantize`` makes of it; a zoo network's INT8 parts are converted and
aligned by ``export``), ``dnnplan export-sweep``'s library
(:mod:`optimizer.runtime.cut_sweep`) picks 0, L and at least 8 boundaries between (inside blocks,
after reshapes, around custom and shape-computing operators, where a vector crosses, one inside a
fused kernel, spread over the rest), exports a split at each, a 2-stage pipeline at each interior
one and 3-stage pipelines over pairs of them, and runs every plan with ``run --check`` on seeded
frames. It prints one Markdown row per model and dtype, then the reason of every case that did
not pass.

Each model and dtype runs in its own process (its peak resident memory, VmHWM, is reported, the
largest of the runs that filled the journal; ``cases s`` sums the cases' export and check times); the
cases are journalled in ``results/bench/export_sweep/`` so an interrupted run resumes (delete the
folder to start over). INT8 files are cached in ``results/cache/export_sweep/``.

Run: ``python benchmarks/bench_export_sweep.py [--only rec,mobilenet] [--dtypes fp32,int8] [--frames 8]
[--journals DIR] [--kinds split] [--no-spread] [--time-limit-s 480]`` (``--kinds`` and
``--no-spread`` make a shorter sweep: the zoo networks' exports convert Keras to TFLite, each
sub-model once per process; ``--time-limit-s`` starts no case after that long, a rerun resumes)
Exit status: 1 when a case failed or disagrees, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

JOURNALS = ROOT / "results" / "bench" / "export_sweep"
INT8_CACHE = ROOT / "results" / "cache" / "export_sweep"
#: zoo networks: name -> builder arguments (small inputs keep the many TFLite conversions short)
ZOO = {"mobilenet_v2": {"input_size": 96}, "efficientnet_b0": {"input_size": 96},
       "ssd_mobilenet_v2_fpnlite": {"input_size": 128}}
#: ``dnnplan quantize`` options a file needs (its custom transposed convolution stays float)
QUANTIZE_ARGS = {"selfie_segmentation": ["--allow-float-ops"]}


def models() -> dict[str, tuple[str, str | None, dict]]:
    """name -> (zoo name or model file, --input-shape or None, builder arguments)."""
    from third_party.fetch_models import DYNAMIC_ONNX, fetch, fetch_onnx

    out: dict[str, tuple[str, str | None, dict]] = {}
    for name, path in fetch_onnx().items():
        out[name] = (str(path), DYNAMIC_ONNX[name][2], {})
    for name, path in fetch().items():
        out[name] = (str(path), None, {})
    for name, variant in ZOO.items():
        out[name] = (name, None, variant)
    return out


def _shapes(text: str | None) -> dict[str, tuple[int, ...]] | None:
    from optimizer.graph.input_shapes import parse_input_shapes

    return parse_input_shapes([text]) if text else None


def int8_file(name: str, path: str, shape: str | None) -> str:
    """The INT8 ``.tflite`` ``dnnplan quantize`` makes of a model file (cached)."""
    out = INT8_CACHE / f"{name}.int8.tflite"
    if not out.is_file():
        INT8_CACHE.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "optimizer.cli", "--quiet", "quantize", path, "--out", str(out)]
        cmd += (["--input-shape", shape] if shape else []) + QUANTIZE_ARGS.get(name, [])
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env())
        if res.returncode != 0:
            raise RuntimeError(f"dnnplan quantize {Path(path).name}: {res.stderr.strip().splitlines()[-1]}")
    return str(out)


def _env() -> dict[str, str]:
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))


def worker(name: str, dtype: str, frames: int, journals: Path = JOURNALS, kinds: str = "",
           no_spread: bool = False, time_limit_s: float | None = None) -> None:
    """Sweep one model at one dtype (in this process); print a JSON line with the summary.

    ``kinds`` (comma-separated, empty for all) and ``no_spread`` (keep 0, L and the structural
    boundaries, not those spread over the rest) make a shorter sweep; ``time_limit_s`` stops
    starting cases after that long (the journal resumes the rest)."""
    from optimizer.graph import load_graph
    from optimizer.quantize.parallel_calibration import peak_rss_bytes
    from optimizer.runtime.cut_sweep import export_sweep, sweep_boundaries, sweep_cases

    model, shape, variant = models()[name]
    shapes, plan_dtype = _shapes(shape), dtype
    if dtype == "int8" and not variant:  # a model file: sweep the INT8 file quantize makes of it
        model, shapes, plan_dtype = int8_file(name, model, shape), None, "fp32"
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = load_graph(model, "op", input_shapes=shapes, **variant)
    chosen = [b for b in sweep_boundaries(graph) if not (no_spread and b.why == "spread")]
    cases = sweep_cases([b.index for b in chosen], len(graph), *([kinds.split(",")] if kinds else []))
    journals.mkdir(parents=True, exist_ok=True)
    results = export_sweep(model, graph, cases, dtype=plan_dtype, input_shapes=shapes, variant=variant,
                           frames=frames, journal=journals / f"{name}-{dtype}.jsonl", time_limit_s=time_limit_s)
    peak_file = journals / f"{name}-{dtype}.peak"  # the largest peak of the runs that made the journal
    peak = max(peak_rss_bytes(), int(peak_file.read_text()) if peak_file.is_file() else 0)
    peak_file.write_text(str(peak))
    print(json.dumps({"name": name, "dtype": dtype, "layers": len(graph), "format": graph.fmt, "cases": len(cases),
                      "boundaries": [[b.index, b.why] for b in chosen], "results": [r.to_dict() for r in results],
                      "wall_s": time.perf_counter() - t0, "peak_rss_bytes": peak}))


def run_worker(name: str, dtype: str, frames: int, journals: Path, kinds: str = "", no_spread: bool = False,
               time_limit_s: float | None = None) -> dict:
    """One model and dtype in a child process; its summary (or the error that stopped it)."""
    cmd = [sys.executable, __file__, "--worker", name, dtype, "--frames", str(frames), "--journals", str(journals),
           "--kinds", kinds] + (["--no-spread"] if no_spread else [])
    cmd += ["--time-limit-s", str(time_limit_s)] if time_limit_s is not None else []
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env())
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
    return {"name": name, "dtype": dtype, "error": tail}


def _row(s: dict) -> str:
    """One Markdown row of a model at a dtype."""
    if "error" in s:
        return f"| {s['name']} | {s['dtype']} | - | - | - | error: {s['error'][:160]} | - | - | - | - | - |"
    rs = s["results"]
    count = {k: sum(r["status"] == k for r in rs) for k in ("passed", "refused", "no kernel", "failed", "disagrees")}
    agree = [r["agreement"] for r in rs if r["agreement"] is not None]
    sqnr = [r["sqnr_db"] for r in rs if r["sqnr_db"] is not None]
    exact = sum(r["max_abs_diff"] == 0 for r in rs if r["max_abs_diff"] is not None)
    kinds = (sum(r["kind"] == "split" for r in rs), sum(r["kind"] == "pipeline" and len(r["cuts"]) == 1 for r in rs),
             sum(len(r["cuts"]) == 2 for r in rs))
    cells = [s["name"], s["dtype"], str(s["layers"]), ",".join(str(b[0]) for b in s["boundaries"]),
             " / ".join(map(str, kinds)), ", ".join(f"{v} {k}" for k, v in count.items() if v),
             f"{min(agree):.3f}" if agree else "-", f"{exact}/{len(agree)}" if agree else "-",
             f"{min(sqnr):.1f}" if sqnr else "-", f"{sum(r['seconds'] for r in rs):.0f}",
             f"{s['peak_rss_bytes'] / 1e9:.2f}"]
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated substrings of model names")
    ap.add_argument("--dtypes", default="fp32,int8")
    ap.add_argument("--frames", type=int, default=8, help="frames each plan runs with --check")
    ap.add_argument("--journals", type=Path, default=JOURNALS, help="folder of the resumable case journals")
    ap.add_argument("--kinds", default="", help="some of split,pipeline2,pipeline3 (default all)")
    ap.add_argument("--no-spread", action="store_true",
                    help="only 0, L and the structural boundaries (blocks, reshapes, kernels, ...), none spread")
    ap.add_argument("--time-limit-s", type=float,
                    help="each model and dtype starts no case after this many seconds (rerun to resume)")
    ap.add_argument("--worker", nargs=2, metavar=("NAME", "DTYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker, args.frames, args.journals, args.kinds, args.no_spread, args.time_limit_s)
        return 0
    keep = [k for k in (args.only or "").split(",") if k]
    names = [n for n in models() if not keep or any(k in n for k in keep)]
    print("| model | dtype | op layers | boundaries | split / 2-stage / 3-stage | status | min top-1 | "
          "exact | min SQNR dB | cases s | peak RSS GB |")
    print("|---|---|---:|---|---|---|---:|---:|---:|---:|---:|", flush=True)
    summaries = []
    for name in names:
        for dtype in args.dtypes.split(","):
            s = run_worker(name, dtype, args.frames, args.journals, args.kinds, args.no_spread, args.time_limit_s)
            summaries.append(s)
            print(_row(s), flush=True)
    print("\nCases that did not pass:\n")
    bad = False
    for s in summaries:
        for r in s.get("results", []):
            if r["status"] != "passed":
                bad |= r["status"] in ("failed", "disagrees")
                print(f"* {s['name']} {s['dtype']} {r['kind']} {','.join(map(str, r['cuts']))}: {r['status']}: "
                      f"{r['reason'][:300]}")
        bad |= "error" in s
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
