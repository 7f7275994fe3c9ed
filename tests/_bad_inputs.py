"""Bad inputs for every command, and the check that each ends cleanly.

Used by ``tests/test_fuzz_cli.py`` (the fast in-process subset) and by
``benchmarks/bench_bad_inputs.py`` (every case, the TensorFlow, write-time and interrupt ones
included). A case is *clean* when the command exits with the expected status (2 for bad input,
130 for an interrupt), prints exactly one line on stderr and no traceback, and leaves the input
and output folders exactly as they were (no file written, changed or left half-written).

``make_fixtures(root)`` writes the inputs the cases refer to under ``root/in`` (a tiny ONNX
network built with ``onnx.helper``, corrupt model files, a plan made by ``map``, its export, a
finished batch run, thermal traces); cases write under ``root/out``, which starts empty.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    """One bad invocation: ``argv`` with ``{name}`` placeholders for the fixture paths."""

    id: str
    argv: tuple[str, ...]
    tf: bool = False  # loads TensorFlow (zoo networks, conversions): seconds per case
    how: str = "inprocess"  # "inprocess", "ulimit" (subprocess, files over 3 KiB fail to write) or "signal"
    signal_after: str = ""  # how="signal": wait for this file pattern under out/ (else 3 s) before signalling
    sig: int = signal.SIGINT
    delay: float = 3.0  # how="signal" without signal_after: seconds before the signal
    limit: int = 3 * 1024  # how="ulimit": the largest file the command may write (bytes)
    preamble: int = 0  # stderr lines the command prints before its work (serve's address line)
    keeps: str = ""  # how="signal": what an interrupted command keeps to resume (glob under out/)
    expect: int = 2

    def args(self, paths: dict[str, Path]) -> list[str]:
        return [a.format(**{k: str(v) for k, v in paths.items()}) for a in self.argv]


@dataclass
class Outcome:
    case: Case
    code: int
    stderr: str
    changed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.strip().splitlines() if ln.strip()]

    @property
    def clean(self) -> bool:
        return (self.code == self.case.expect and len(self.lines) == 1 + self.case.preamble
                and "Traceback" not in self.stderr and not self.changed)

    def why(self) -> str:
        parts = []
        if self.code != self.case.expect:
            parts.append(f"exit {self.code}")
        if len(self.lines) != 1 + self.case.preamble:
            parts.append(f"{len(self.lines)} stderr lines")
        if self.changed:
            parts.append("changed: " + ", ".join(self.changed[:3]))
        return "; ".join(parts) + (f" | {self.lines[-1][:160]}" if self.lines else "")


# ------------------------------------------------------------------------------------ fixtures
def make_fixtures(root: Path, heavy: bool = False, tf: bool = False) -> dict[str, Path]:
    """Write every input the cases name under ``root/in``; return the placeholder paths.
    ``heavy``: also the inputs of the interrupt cases (a 48-task job, a split export, a
    60-layer network); ``tf``: a split plan of MobileNetV2 (TensorFlow) to export."""
    sys.path.insert(0, str(REPO / "tests"))
    from _byom import write_tiny_onnx

    import numpy as np
    import pandas as pd

    d = root / "in"
    out = root / "out"
    d.mkdir(parents=True, exist_ok=True)
    out.mkdir(exist_ok=True)
    tiny = write_tiny_onnx(d / "tiny.onnx")
    blob = tiny.read_bytes()
    p = {"in": d, "out": out, "tiny": tiny}

    def put(name: str, data: bytes | str) -> Path:
        f = d / name
        f.write_bytes(data.encode() if isinstance(data, str) else data)
        p[name.replace(".", "_")] = f
        return f

    os.mkfifo(d / "fifo")
    p["fifo"] = d / "fifo"
    put("trunc.onnx", blob[: len(blob) // 2])
    put("empty.onnx", b"")
    put("text.onnx", "not a model\n")
    put("trunc.tflite", b"\x1c\x00\x00\x00TFL3" + b"\x00" * 40)
    put("text.tflite", "hello\n")
    put("trunc.keras", b"PK\x03\x04" + b"\x00" * 30)
    put("model.pt", b"\x80\x02")
    put("blocker", "a file where a folder is expected\n")
    put("bad.json", '{"schema_version": 1, "kind": "pipeline",')
    put("binary.json", b"\xff\xfe\x00\x01")
    put("list.json", "[1, 2, 3]\n")
    put("bad.yaml", "name: x\ngrid: [unclosed\n")
    put("notdict.yaml", "- a\n- b\n")
    put("job_unknown_key.yaml", "name: j\ngrid:\n  models: [{}]\n  devices: [pixel6]\n  seeds: [0]\n"
        "  map: {{solvers: [exact]}}\n  colour: blue\n".format(tiny))
    put("job_bad_solver.yaml", "name: j\ngrid:\n  models: [{}]\n  devices: [pixel6]\n  seeds: [0]\n"
        "  map: {{solvers: [annealing]}}\n".format(tiny))
    put("job_pixel99.yaml", "name: j\ngrid:\n  models: [{}]\n  devices: [pixel99]\n  seeds: [0]\n"
        "  map: {{solvers: [exact]}}\n".format(tiny))
    put("job_no_tasks.yaml", "name: j\ngrid:\n  models: []\n  devices: [pixel6]\n  seeds: [0]\n"
        "  map: {solvers: [exact]}\n")
    put("device_bad.yaml", "name: broken\nprocessors: 3\n")
    put("device_text.yaml", "just text\n")
    put("workload_bad.yaml", "name: w\ntasks: 5\n")
    put("frames.npy", b"\x93NUMPY garbage")
    put("empty_profile.txt", "")
    p["nnapi_log"] = REPO / "tests" / "data" / "profiles" / "tflite_nnapi_xnnpack_mixed_issue57758.txt"
    p["ort_log"] = REPO / "tests" / "data" / "profiles" / "ort_cpu_mobilenet_v2_host.json"
    put("calib_bad.npz", b"PK\x03\x04garbage")
    put("trace_bad.csv", "t,a\n0,1\n1,\n2,x\n")
    put("trace_header.csv", "time_s,t_die_c,p_w\n")
    put("bw_bad.csv", "t_s,mbps\n0,abc\n")

    rng = np.random.default_rng(0)
    n = 600
    power = np.repeat(rng.uniform(0.5, 3.0, n // 30 + 1), 30)[:n]
    temp = 30 + np.cumsum(0.02 * power - 0.01 * (np.arange(n) > 300))
    trace = d / "trace.csv"
    pd.DataFrame({"time_s": np.arange(n, dtype=float), "t_die_c": temp, "p_w": power}).to_csv(trace, index=False)
    shuffled = d / "trace_unordered.csv"
    pd.DataFrame({"time_s": rng.permutation(n).astype(float), "t_die_c": temp, "p_w": power}).to_csv(
        shuffled, index=False)
    p.update(trace=trace, trace_unordered=shuffled)
    if heavy:  # an RC fit of 20,000 samples runs long enough to be stopped
        m = 20000
        power = np.repeat(rng.uniform(0.5, 3.0, m // 30 + 1), 30)[:m]
        long = d / "trace_long.csv"
        pd.DataFrame({"time_s": np.arange(m, dtype=float), "t_die_c": 30 + np.cumsum(0.02 * power - 0.02 * 1.7),
                      "p_w": power}).to_csv(long, index=False)
        p["trace_long"] = long

    work = root / "fixtures"
    work.mkdir(exist_ok=True)
    from optimizer.cli import main

    plan, split = d / "plan.json", d / "split.json"
    model_json, art, run = d / "thermal.json", d / "art", d / "run"
    job = d / "job.yaml"
    job.write_text(f"name: j\ngrid:\n  models: [{tiny}]\n  devices: [pixel6]\n  seeds: [0]\n"
                   "  map: {solvers: [exact]}\n")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for argv in (["map", tiny, "--device", "pixel6", "--solver", "exact", "--out", plan],
                     ["split", tiny, "--device", "galaxy_j6", "--network", "wifi_10", "--interior-only", "--out", split],
                     ["thermal", "fit", trace, "--time", "time_s", "--temps", "t_die_c", "--inputs", "p_w",
                      "--out", model_json],
                     ["export", plan, "--out", art],
                     ["batch", "run", job, "--out", run, "--workers", "1"]):
            code = main(["--quiet", *map(str, argv)])
            assert code == 0, f"fixture command failed: {argv}"
    plan_doc = json.loads(plan.read_text())
    plan_doc["stages"][0]["processor"] = "quantum"
    put("plan_quantum.json", json.dumps(plan_doc))
    plan_doc = json.loads(plan.read_text())
    plan_doc["kind"] = "teleport"
    put("plan_kind.json", json.dumps(plan_doc))
    put("export_other", "")
    (d / "export_other").unlink()
    (d / "export_other").mkdir()
    (d / "export_other" / "keep.txt").write_text("not an export\n")
    p.update(plan=plan, split=split, thermal=model_json, art=art, run=run, job=job, export_other=d / "export_other")
    if heavy:
        job_many = d / "job_many.yaml"
        job_many.write_text(f"name: many\ngrid:\n  models: [{tiny}]\n  devices: [pixel6, galaxy_s22, pixel4]\n"
                            "  seeds: [0, 1, 2, 3, 4, 5, 6, 7]\n  map: {solvers: [ga]}\n")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["--quiet", "export", str(split), "--out", str(d / "split_art")]) == 0
        p.update(job_many=job_many, split_art=d / "split_art", chain=write_chain_onnx(d / "chain.onnx"))
    if tf:
        zoo_split = d / "zoo_split.json"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["--quiet", "split", "mobilenet_v2", "--device", "galaxy_j6", "--network", "wifi_10",
                         "--population", "8", "--generations", "2", "--out", str(zoo_split)]) == 0
        p.update(zoo_split=zoo_split)
    return p


def write_chain_onnx(path: Path, layers: int = 60) -> Path:
    """A chain of ``layers`` 3x3 convolutions + ReLU on 32x32x8 (seeded weights): a mapping space
    the GA needs many generations for."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        w = numpy_helper.from_array((rng.standard_normal((8, 8, 3, 3)) * 0.1).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes += [helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}" if i < layers - 1 else "y"])]
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


# --------------------------------------------------------------------------------------- cases
def _c(id: str, *argv: str, **kw: object) -> Case:
    return Case(id, tuple(argv), **kw)  # type: ignore[arg-type]


MAP = ("map", "{tiny}", "--device", "pixel6", "--solver", "exact")
SPLIT = ("split", "{tiny}", "--device", "galaxy_j6", "--network", "wifi_10")
FIT = ("thermal", "fit", "{trace}", "--time", "time_s", "--temps", "t_die_c", "--inputs", "p_w")
UNWRITABLE = ("/proc/dnnplan_x", "/sys/dnnplan_x", "{blocker}/sub/x")


def cases() -> list[Case]:
    """Every bad input of the sweep (the fuzz test runs those with ``how="inprocess"`` and no TF)."""
    cs: list[Case] = []
    # --- profile: corrupt files, unknown names, unwritable outputs
    for name in ("absent.onnx", "trunc.onnx", "empty.onnx", "text.onnx", "trunc.tflite", "text.tflite", "model.pt"):
        cs.append(_c(f"profile-{name}", "profile", "{in}/" + name))
    cs.append(_c("profile-trunc.keras", "profile", "{trunc_keras}", tf=True))
    cs.append(_c("profile-folder-model", "profile", "{export_other}"))
    cs.append(_c("profile-unknown-zoo", "profile", "mobilenet_v9"))
    cs.append(_c("profile-dtype", "profile", "{tiny}", "--dtype", "int4"))
    cs.append(_c("profile-granularity", "profile", "{tiny}", "--granularity", "layer"))
    cs.append(_c("profile-variant-syntax", "profile", "mobilenet_v2", "--variant", "width"))
    cs.append(_c("profile-variant-unknown", "profile", "mobilenet_v2", "--variant", "width=0.25", tf=True))
    for i, target in enumerate(UNWRITABLE):
        cs.append(_c(f"profile-out-unwritable{i}", "profile", "{tiny}", "--out", target + ".json"))
    cs.append(_c("profile-out-folder", "profile", "{tiny}", "--out", "{out}"))
    # a pipe, not /dev/null: code without the check would replace the target with a regular file
    cs.append(_c("profile-out-fifo", "profile", "{tiny}", "--out", "{fifo}"))
    cs.append(_c("profile-missing-arg", "profile"))
    cs.append(_c("profile-unknown-option", "profile", "{tiny}", "--colour"))
    cs.append(_c("unknown-command", "teleport"))
    # --- cost
    cs += [_c("cost-unknown-device", "cost", "{tiny}", "--device", "pixel99"),
           _c("cost-device-yaml-bad", "cost", "{tiny}", "--device", "{bad_yaml}"),
           _c("cost-device-yaml-schema", "cost", "{tiny}", "--device", "{device_bad_yaml}"),
           _c("cost-device-yaml-text", "cost", "{tiny}", "--device", "{device_text_yaml}"),
           _c("cost-unknown-model", "cost", "resnet_9000", "--device", "pixel6"),
           _c("cost-trunc-model", "cost", "{trunc_onnx}", "--device", "pixel6"),
           _c("cost-backend", "cost", "{tiny}", "--device", "pixel6", "--backend", "oracle"),
           _c("cost-dtype", "cost", "{tiny}", "--device", "pixel6", "--dtype", "int3"),
           _c("cost-clock-syntax", "cost", "{tiny}", "--device", "pixel6", "--clock", "cpu"),
           _c("cost-clock-unknown-proc", "cost", "{tiny}", "--device", "pixel6", "--clock", "quantum=1GHz"),
           _c("cost-clock-negative", "cost", "{tiny}", "--device", "pixel6", "--clock", "cpu=-1GHz"),
           _c("cost-clock-unit", "cost", "{tiny}", "--device", "pixel6", "--clock", "cpu=3 parsecs"),
           _c("cost-measured-no-table", "cost", "{tiny}", "--device", "pixel6", "--backend", "measured"),
           _c("cost-table-missing", "cost", "{tiny}", "--device", "pixel6", "--backend", "measured",
              "--table", "{in}/absent.csv"),
           _c("cost-table-corrupt", "cost", "{tiny}", "--device", "pixel6", "--backend", "measured",
              "--table", "{trace_bad_csv}"),
           _c("cost-granularity", "cost", "{tiny}", "--device", "pixel6", "--granularity", "tile")]
    # --- measure
    cs += [_c("measure-backend", "measure", "{tiny}", "--backend", "gpu"),
           _c("measure-out-ext", "measure", "{tiny}", "--out", "{out}/t.txt"),
           _c("measure-out-proc", "measure", "{tiny}", "--out", "/proc/t.csv"),
           _c("measure-repeats", "measure", "{tiny}", "--repeats", "0"),
           _c("measure-threads", "measure", "{tiny}", "--threads", "0"),
           _c("measure-warmup", "measure", "{tiny}", "--warmup", "-1"),
           _c("measure-trunc", "measure", "{trunc_onnx}"),
           _c("measure-unknown-model", "measure", "nonet"),
           _c("measure-two-models", "measure", "{tiny}", "{tiny}"),
           _c("measure-calibrate-no-out", "measure", "{tiny}", "--calibrate-host"),
           _c("measure-cmd-missing", "measure", "{tiny}", "--measure-cmd", "/nonexistent/runner --x"),
           _c("measure-litert-csv", "measure", "{tiny}", "--backend", "litert", "--out", "{out}/t.csv"),
           _c("measure-import-missing", "measure", "--import", "{in}/absent.txt", "--model", "{tiny}"),
           _c("measure-import-empty", "measure", "--import", "{empty_profile_txt}", "--model", "{tiny}"),
           _c("measure-import-corrupt", "measure", "--import", "{text_onnx}", "--model", "{tiny}"),
           _c("measure-import-bad-json", "measure", "--import", "{bad_json}", "--model", "{tiny}"),
           _c("measure-import-other-model", "measure", "--import", "{nnapi_log}", "--model", "{tiny}",
              "--out", "{out}/t.json"),
           _c("measure-import-no-model", "measure", "--import", "{ort_log}", "--out", "{out}/t.json"),
           _c("measure-import-unknown-proc", "measure", "--import", "{ort_log}", "--model", "{tiny}",
              "--device", "pixel6", "--processor", "quantum"),
           _c("measure-import-out-ext", "measure", "--import", "{ort_log}", "--model", "{tiny}", "--out", "{out}/t.txt"),
           _c("measure-model-without-import", "measure", "{tiny}", "--model", "{tiny}")]
    # --- map
    cs += [_c("map-unknown-device", "map", "{tiny}", "--device", "pixel99", "--out", "{out}/p.json"),
           _c("map-unknown-model", "map", "mobilenet_v9", "--device", "pixel6", "--out", "{out}/p.json"),
           _c("map-trunc-model", "map", "{trunc_onnx}", "--device", "pixel6", "--out", "{out}/p.json"),
           _c("map-solver", *MAP[:4], "--solver", "annealing", "--out", "{out}/p.json"),
           _c("map-objective", *MAP, "--objectives", "beauty", "--out", "{out}/p.json"),
           _c("map-three-objectives", *MAP, "--objectives", "latency,energy,memory", "--out", "{out}/p.json"),
           _c("map-stages-0", *MAP, "--stages", "0", "--out", "{out}/p.json"),
           _c("map-stages-neg", *MAP, "--stages", "-3", "--out", "{out}/p.json"),
           _c("map-processor", *MAP, "--processors", "quantum", "--out", "{out}/p.json"),
           _c("map-memory-limit", *MAP, "--memory-limit", "lots", "--out", "{out}/p.json"),
           _c("map-memory-limit-neg", *MAP, "--memory-limit", "-2 GB", "--out", "{out}/p.json"),
           _c("map-cpu-cores", *MAP, "--cpu-cores", "0", "--out", "{out}/p.json"),
           _c("map-pre-ms", *MAP, "--pre-ms", "-5", "--out", "{out}/p.json"),
           _c("map-post-ms-nan", *MAP, "--post-ms", "nan", "--out", "{out}/p.json"),
           _c("map-generations", "map", "{tiny}", "--device", "pixel6", "--generations", "0", "--out", "{out}/p.json"),
           _c("map-population", "map", "{tiny}", "--device", "pixel6", "--population", "1", "--out", "{out}/p.json"),
           _c("map-dtype", *MAP, "--dtype", "int4", "--out", "{out}/p.json"),
           _c("map-granularity", *MAP, "--granularity", "x", "--out", "{out}/p.json"),
           _c("map-measure", *MAP, "--measure", "phone", "--out", "{out}/p.json"),
           _c("map-measure-repeats", *MAP, "--measure", "host", "--measure-repeats", "0", "--out", "{out}/p.json"),
           _c("map-resume-no-ckpt", "map", "{tiny}", "--device", "pixel6", "--resume", "--out", "{out}/p.json"),
           _c("map-variant-file", *MAP, "--variant", "alpha=0.5", "--out", "{out}/p.json"),
           _c("map-out-folder", *MAP, "--out", "{out}"),
           _c("map-checkpoint-proc", "map", "{tiny}", "--device", "pixel6", "--checkpoint", "/proc/c.ckpt",
              "--out", "{out}/p.json"),
           _c("map-no-out", *MAP)]
    for i, target in enumerate(UNWRITABLE):
        cs.append(_c(f"map-out-unwritable{i}", *MAP, "--out", target + ".json"))
    # --- validate
    for name in ("absent.json", "bad.json", "binary.json", "list.json", "empty.onnx", "plan_kind.json"):
        cs.append(_c(f"validate-{name}", "validate", "{in}/" + name))
    cs.append(_c("validate-quantum-processor", "validate", "{plan_quantum_json}"))
    # --- split
    cs += [_c("split-unknown-device", "split", "{tiny}", "--device", "pixel99", "--network", "wifi_10"),
           _c("split-unknown-network", "split", "{tiny}", "--device", "galaxy_j6", "--network", "5g_magic"),
           _c("split-unknown-server", *SPLIT, "--server", "mainframe"),
           _c("split-unknown-model", "split", "mobilenet_v9", "--device", "galaxy_j6", "--network", "wifi_10"),
           _c("split-trunc-model", "split", "{trunc_onnx}", "--device", "galaxy_j6", "--network", "wifi_10"),
           _c("split-solver", *SPLIT, "--solver", "magic"),
           _c("split-wire", *SPLIT, "--wire", "int4"),
           _c("split-dtype", *SPLIT, "--dtype", "bf8"),
           _c("split-cost-model", *SPLIT, "--cost-model", "guess"),
           _c("split-granularity", *SPLIT, "--granularity", "atom"),
           _c("split-runtime", *SPLIT, "--runtime", "coreml_fp8"),
           _c("split-memory-limit", *SPLIT, "--memory-limit", "big"),
           _c("split-min-accuracy-no-data", *SPLIT, "--min-accuracy", "0.9"),
           _c("split-accuracy-data-missing", *SPLIT, "--accuracy-data", "{in}/absent.npz", "--min-accuracy", "0.9"),
           _c("split-accuracy-data-corrupt", *SPLIT, "--accuracy-data", "{calib_bad_npz}", "--min-accuracy", "0.9"),
           _c("split-memory-budget", *SPLIT, "--memory-budget", "-1MB"),
           _c("split-bandwidth", *SPLIT, "--bandwidth", "fast"),
           _c("split-bandwidth-neg", *SPLIT, "--bandwidth", "-5 Mbps"),
           _c("split-objectives", *SPLIT, "--objectives", "happiness"),
           _c("split-weights-count", *SPLIT, "--weights", "1,2"),
           _c("split-weights-text", *SPLIT, "--weights", "a,b,c"),
           _c("split-topsis", *SPLIT, "--topsis", "modern"),
           _c("split-trace-missing", *SPLIT, "--bandwidth-trace", "{in}/absent.trace"),
           _c("split-trace-unknown", *SPLIT, "--bandwidth-trace", "Mars-uplink"),
           _c("split-trace-corrupt", *SPLIT, "--bandwidth-trace", "{bw_bad_csv}"),
           _c("split-risk", *SPLIT, "--bandwidth-trace", "ATT-LTE-driving", "--risk", "worst"),
           _c("split-max-mean-increase", *SPLIT, "--bandwidth-trace", "ATT-LTE-driving",
              "--max-mean-increase", "lots"),
           _c("split-result", *SPLIT, "--result", "jpeg"),
           _c("split-population", *SPLIT, "--population", "0"),
           _c("split-generations", *SPLIT, "--generations", "-1"),
           _c("split-population-text", *SPLIT, "--population", "many"),
           _c("split-no-device", "split", "{tiny}", "--network", "wifi_10"),
           _c("split-job-missing", "split", "--job", "{in}/absent.yaml"),
           _c("split-job-bad-yaml", "split", "--job", "{bad_yaml}"),
           _c("split-front-proc", *SPLIT, "--out", "{out}/ok.json", "--front", "/proc/f.csv"),
           _c("split-front-folder", *SPLIT, "--out", "{out}/ok.json", "--front", "{out}")]
    for i, target in enumerate(UNWRITABLE):
        cs.append(_c(f"split-out-unwritable{i}", *SPLIT, "--out", target + ".json"))
    # --- export / run / serve
    cs += [_c("export-plan-missing", "export", "{in}/absent.json", "--out", "{out}/art"),
           _c("export-plan-corrupt", "export", "{bad_json}", "--out", "{out}/art"),
           _c("export-out-proc", "export", "{plan}", "--out", "/proc/art"),
           _c("export-out-blocker", "export", "{plan}", "--out", "{blocker}/art"),
           _c("export-out-file", "export", "{plan}", "--out", "{tiny}"),
           _c("export-out-other-folder", "export", "{plan}", "--out", "{export_other}"),
           _c("export-calib-missing", "export", "{plan}", "--out", "{out}/art", "--calib", "{in}/absent.npz"),
           _c("export-memory-budget", "export", "{plan}", "--out", "{out}/art", "--memory-budget", "4 GHz"),
           _c("export-model-missing", "export", "{plan}", "--out", "{out}/art", "--model", "{in}/absent.onnx"),
           _c("export-model-trunc", "export", "{plan}", "--out", "{out}/art", "--model", "{trunc_onnx}"),
           _c("export-quantum", "export", "{plan_quantum_json}", "--out", "{out}/art"),
           _c("export-sweep-model-missing", "export-sweep", "{in}/absent.onnx"),
           _c("export-sweep-boundary-text", "export-sweep", "{tiny}", "--boundaries", "0,x"),
           _c("export-sweep-boundary-range", "export-sweep", "{tiny}", "--boundaries", "0,99"),
           _c("export-sweep-kinds", "export-sweep", "{tiny}", "--kinds", "tree"),
           _c("export-sweep-int8-file", "export-sweep", "{tiny}", "--dtype", "int8"),
           _c("export-sweep-journal-proc", "export-sweep", "{tiny}", "--journal", "/proc/j.jsonl"),
           _c("run-plan-missing", "run", "{in}/absent.json", "--artifacts", "{art}"),
           _c("run-artifacts-missing", "run", "{plan}", "--artifacts", "{in}/absent"),
           _c("run-artifacts-other", "run", "{plan}", "--artifacts", "{export_other}"),
           _c("run-frames-0", "run", "{plan}", "--artifacts", "{art}", "--frames", "0"),
           _c("run-frames-neg", "run", "{plan}", "--artifacts", "{art}", "--frames", "-5"),
           _c("run-input-missing", "run", "{plan}", "--artifacts", "{art}", "--input", "{in}/absent.npy"),
           _c("run-input-corrupt", "run", "{plan}", "--artifacts", "{art}", "--input", "{frames_npy}"),
           _c("run-server-syntax", "run", "{plan}", "--artifacts", "{art}", "--server", "localhost"),
           _c("run-bandwidth", "run", "{plan}", "--artifacts", "{art}", "--bandwidth", "quick"),
           _c("run-bw-both", "run", "{plan}", "--artifacts", "{art}", "--bandwidth", "5Mbps",
              "--bandwidth-trace", "ATT-LTE-driving"),
           _c("run-fps-neg", "run", "{plan}", "--artifacts", "{art}", "--fps", "-1"),
           _c("run-min-agreement", "run", "{plan}", "--artifacts", "{art}", "--min-agreement", "1.5"),
           _c("run-other-plan", "run", "{split}", "--artifacts", "{art}"),
           _c("run-quantum", "run", "{plan_quantum_json}", "--artifacts", "{art}"),
           _c("serve-artifacts-missing", "serve", "--artifacts", "{in}/absent"),
           _c("serve-pipeline-artifacts", "serve", "--artifacts", "{art}"),
           _c("serve-port", "serve", "--artifacts", "{art}", "--port", "70000"),
           _c("serve-workers", "serve", "--artifacts", "{art}", "--workers", "0")]
    # --- schedule / tadf / shift / simulate / calibrate
    cs += [_c("schedule-unknown-workload", "schedule", "gaming"),
           _c("schedule-workload-bad", "schedule", "{workload_bad_yaml}"),
           _c("schedule-unknown-device", "schedule", "person_finder", "--device", "pixel99"),
           _c("schedule-unknown-network", "schedule", "person_finder", "--network", "carrier_pigeon"),
           _c("schedule-policy", "schedule", "person_finder", "--policy", "random"),
           _c("schedule-duration-neg", "schedule", "person_finder", "--duration", "-1"),
           _c("schedule-fps-0", "schedule", "person_finder", "--fps", "0"),
           _c("schedule-eta", "schedule", "person_finder", "--eta", "-1"),
           _c("schedule-ambient", "schedule", "person_finder", "--ambient", "500"),
           _c("schedule-plot-proc", "schedule", "person_finder", "--plot", "/proc/s.png"),
           _c("tadf-unknown-model", "tadf", "alexnet9"),
           _c("tadf-unknown-device", "tadf", "alexnet", "--device", "pixel99"),
           _c("tadf-no-gpu", "tadf", "alexnet", "--device", "host_cores"),
           _c("tadf-dtype", "tadf", "alexnet", "--dtype", "int2"),
           _c("tadf-theta", "tadf", "alexnet", "--theta", "0"),
           _c("tadf-tmax-below-ambient", "tadf", "alexnet", "--tmax", "20", "--ambient", "40", tf=True),
           _c("tadf-ambient", "tadf", "alexnet", "--ambient", "500"),
           _c("shift-unknown-device", "shift", "--device", "pixel99"),
           _c("shift-duration", "shift", "--duration", "-10"),
           _c("shift-fps", "shift", "--fps", "-2"),
           _c("shift-reload", "shift", "--reload", "-1"),
           _c("shift-dtype", "shift", "--dtype", "int1"),
           _c("shift-ambient", "shift", "--ambient", "-300"),
           _c("simulate-plan-missing", "simulate", "{in}/absent.json"),
           _c("simulate-plan-corrupt", "simulate", "{bad_json}"),
           _c("simulate-duration-0", "simulate", "{plan}", "--duration", "0"),
           _c("simulate-duration-huge", "simulate", "{plan}", "--duration", "1e12"),
           _c("simulate-ambient", "simulate", "{plan}", "--ambient", "500"),
           _c("simulate-plot-ext", "simulate", "{plan}", "--plot", "{out}/s.txt"),
           _c("simulate-plot-proc", "simulate", "{plan}", "--out", "{out}/s.json", "--plot", "/proc/s.png"),
           _c("simulate-out-proc", "simulate", "{plan}", "--out", "/proc/s.json"),
           _c("simulate-quantum", "simulate", "{plan_quantum_json}"),
           _c("calibrate-published-missing", "calibrate", "--published", "{in}/absent.yaml"),
           _c("calibrate-published-bad", "calibrate", "--published", "{bad_yaml}"),
           _c("calibrate-profile-no-device", "calibrate", "--from-profile", "{ort_log}", "--model", "{tiny}",
              "--out", "{out}/d.yaml"),
           _c("calibrate-profile-no-model", "calibrate", "--device", "host", "--from-profile", "{ort_log}"),
           _c("calibrate-profile-unknown-proc", "calibrate", "--device", "host", "--from-profile", "{ort_log}",
              "--model", "{tiny}", "--processor", "gpu", "--out", "{out}/d.yaml"),
           _c("calibrate-profile-other-model", "calibrate", "--device", "host", "--from-profile", "{nnapi_log}",
              "--model", "{tiny}", "--out", "{out}/d.yaml"),
           _c("calibrate-profile-missing", "calibrate", "--device", "host", "--from-profile", "{in}/absent.json",
              "--model", "{tiny}", "--out", "{out}/d.yaml"),
           _c("calibrate-profile-corrupt", "calibrate", "--device", "host", "--from-profile", "{bad_json}",
              "--model", "{tiny}"),
           _c("calibrate-profile-unknown-device", "calibrate", "--device", "pixel99", "--from-profile", "{ort_log}",
              "--model", "{tiny}"),
           _c("calibrate-profile-out-ext", "calibrate", "--device", "host", "--from-profile", "{ort_log}",
              "--model", "{tiny}", "--out", "{out}/d.txt"),
           _c("calibrate-profile-dtype", "calibrate", "--device", "host", "--from-profile", "{ort_log}",
              "--model", "{tiny}", "--dtype", "int4"),
           _c("calibrate-device-without-profile", "calibrate", "--device", "host")]
    # --- report
    cs += [_c("report-input-missing", "report", "{in}/absent.json", "--out", "{out}/rep"),
           _c("report-input-corrupt", "report", "{bad_json}", "--out", "{out}/rep"),
           _c("report-input-model", "report", "{tiny}", "--out", "{out}/rep"),
           _c("report-input-list", "report", "{list_json}", "--out", "{out}/rep"),
           _c("report-out-proc", "report", "{plan}", "--out", "/proc/rep"),
           _c("report-out-blocker", "report", "{plan}", "--out", "{blocker}/rep"),
           _c("report-out-file", "report", "{plan}", "--out", "{tiny}"),
           _c("report-no-input", "report", "--out", "{out}/rep")]
    # --- batch
    cs += [_c("batch-plan-missing", "batch", "plan", "{in}/absent.yaml"),
           _c("batch-plan-bad-yaml", "batch", "plan", "{bad_yaml}"),
           _c("batch-plan-not-dict", "batch", "plan", "{notdict_yaml}"),
           _c("batch-plan-unknown-key", "batch", "plan", "{job_unknown_key_yaml}"),
           _c("batch-plan-bad-solver", "batch", "plan", "{job_bad_solver_yaml}"),
           _c("batch-plan-no-tasks", "batch", "plan", "{job_no_tasks_yaml}"),
           _c("batch-plan-pixel99", "batch", "plan", "{job_pixel99_yaml}"),
           _c("batch-run-missing", "batch", "run", "{in}/absent.yaml", "--out", "{out}/run"),
           _c("batch-run-bad-yaml", "batch", "run", "{bad_yaml}", "--out", "{out}/run"),
           _c("batch-run-workers", "batch", "run", "{job}", "--out", "{out}/run", "--workers", "0"),
           _c("batch-run-both-dask", "batch", "run", "{job}", "--out", "{out}/run", "--scheduler", "tcp://x:1",
              "--local-cluster", "2"),
           _c("batch-run-out-proc", "batch", "run", "{job}", "--out", "/proc/run"),
           _c("batch-run-out-file", "batch", "run", "{job}", "--out", "{tiny}"),
           _c("batch-run-pixel99", "batch", "run", "{job_pixel99_yaml}", "--out", "{out}/run"),
           _c("batch-status-missing", "batch", "status", "{in}/absent"),
           _c("batch-status-not-run", "batch", "status", "{export_other}"),
           _c("batch-report-missing", "batch", "report", "{in}/absent"),
           _c("batch-report-job-file", "batch", "report", "{job}"),
           _c("batch-collect-missing", "batch", "collect", "{in}/absent", "--out", "{out}/t.csv"),
           _c("batch-collect-out-proc", "batch", "collect", "{run}", "--out", "/proc/t.csv"),
           _c("batch-collect-out-ext", "batch", "collect", "{run}", "--out", "{out}/t.xlsx"),
           _c("batch-collect-no-out", "batch", "collect", "{run}")]
    # --- thermal
    cs += [_c("fit-trace-missing", "thermal", "fit", "{in}/absent.csv", *FIT[3:], "--out", "{out}/m.json"),
           _c("fit-trace-corrupt", "thermal", "fit", "{trace_bad_csv}", *FIT[3:], "--out", "{out}/m.json"),
           _c("fit-trace-header-only", "thermal", "fit", "{trace_header_csv}", *FIT[3:], "--out", "{out}/m.json"),
           _c("fit-trace-binary", "thermal", "fit", "{tiny}", *FIT[3:], "--out", "{out}/m.json"),
           _c("fit-unknown-time", *FIT[:3], "--time", "clock", "--temps", "t_die_c", "--inputs", "p_w",
              "--out", "{out}/m.json"),
           _c("fit-unknown-temp", *FIT[:5], "--temps", "t_gpu_c", "--inputs", "p_w", "--out", "{out}/m.json"),
           _c("fit-unknown-input", *FIT[:7], "--inputs", "p_npu", "--out", "{out}/m.json"),
           _c("fit-model", *FIT, "--model", "neural", "--out", "{out}/m.json"),
           _c("fit-window", *FIT, "--window", "0", "--out", "{out}/m.json"),
           _c("fit-ridge", *FIT, "--ridge", "-1", "--out", "{out}/m.json"),
           _c("fit-hidden", *FIT, "--model", "rc", "--hidden", "many", "--out", "{out}/m.json"),
           _c("fit-step", *FIT, "--fit-step", "-1", "--out", "{out}/m.json"),
           _c("fit-gap-factor", *FIT, "--gap-factor", "0", "--out", "{out}/m.json"),
           _c("fit-train-range", *FIT, "--train-from", "500", "--train-to", "100", "--out", "{out}/m.json"),
           _c("fit-unordered", "thermal", "fit", "{trace_unordered}", *FIT[3:], "--out", "{out}/m.json"),
           _c("fit-out-folder", *FIT, "--out", "{out}")]
    for i, target in enumerate(UNWRITABLE):
        cs.append(_c(f"fit-out-unwritable{i}", *FIT, "--out", target + ".json"))
    cs += [_c("eval-model-missing", "thermal", "eval", "{in}/absent.json", "{trace}"),
           _c("eval-model-corrupt", "thermal", "eval", "{bad_json}", "{trace}"),
           _c("eval-model-wrong", "thermal", "eval", "{plan}", "{trace}"),
           _c("eval-trace-missing", "thermal", "eval", "{thermal}", "{in}/absent.csv"),
           _c("eval-horizons", "thermal", "eval", "{thermal}", "{trace}", "--horizons", "soon"),
           _c("eval-horizons-neg", "thermal", "eval", "{thermal}", "{trace}", "--horizons", "-5"),
           _c("eval-time", "thermal", "eval", "{thermal}", "{trace}", "--time", "clock"),
           _c("eval-unordered", "thermal", "eval", "{thermal}", "{trace_unordered}")]
    # --- quantize (TensorFlow)
    Q = ("quantize", "{tiny}", "--out", "{out}/q.tflite", "--samples", "8", "--heldout", "2", "--runs", "1")
    cs += [_c("quantize-unknown-model", "quantize", "mobilenet_v9", "--out", "{out}/q.tflite"),
           _c("quantize-trunc-onnx", "quantize", "{trunc_onnx}", "--out", "{out}/q.tflite", tf=True),
           _c("quantize-trunc-tflite", "quantize", "{trunc_tflite}", "--out", "{out}/q.tflite", tf=True),
           _c("quantize-trunc-keras", "quantize", "{trunc_keras}", "--out", "{out}/q.tflite", tf=True),
           _c("quantize-scheme", *Q, "--scheme", "int3"),
           _c("quantize-io", *Q, "--io", "int4"),
           _c("quantize-samples", *Q[:4], "--samples", "0"),
           _c("quantize-heldout", *Q[:6], "--heldout", "-1"),
           _c("quantize-threads", *Q, "--threads", "0"),
           _c("quantize-calib-missing", *Q, "--calib", "{in}/absent_dir"),
           _c("quantize-calib-corrupt", *Q, "--calib", "{calib_bad_npz}", tf=True),
           _c("quantize-calib-workers", *Q, "--calib-workers", "0"),
           _c("quantize-out-proc", "quantize", "{tiny}", "--out", "/proc/q.tflite"),
           _c("quantize-report-proc", *Q, "--report", "/proc/r.json"),
           _c("quantize-out-folder", "quantize", "{tiny}", "--out", "{out}")]
    # --- write-time failures (a file-size limit: the pre-check passes, the write fails)
    cs += [_c("wt-split-out-front", *SPLIT, "--out", "{out}/ok.json", "--front", "{out}/f.csv", how="ulimit"),
           _c("wt-profile-out", "profile", "{tiny}", "--out", "{out}/p.json", how="ulimit"),
           _c("wt-map-out", *MAP, "--out", "{out}/p.json", how="ulimit"),
           _c("wt-simulate-out-plot", "simulate", "{plan}", "--out", "{out}/s.json", "--plot", "{out}/s.png",
              how="ulimit"),
           _c("wt-report", "report", "{plan}", "--out", "{out}/rep", how="ulimit"),
           _c("wt-fit", *FIT, "--out", "{out}/m.json", how="ulimit", limit=256),
           _c("wt-collect", "batch", "collect", "{run}", "--out", "{out}/t.csv", how="ulimit", limit=256),
           _c("wt-export", "export", "{plan}", "--out", "{out}/art", how="ulimit"),
           _c("wt-quantize-report", *Q, "--report", "{out}/r.json", "--no-latency", how="ulimit", tf=True),
           _c("wt-batch-run", "batch", "run", "{job}", "--out", "{out}/run", how="ulimit")]
    # --- interrupts: exit 130, one line, nothing half-written
    cs += [_c("int-batch-run", "batch", "run", "{job_many}", "--out", "{out}/run", "--workers", "2", how="signal",
              signal_after="run/tasks/*/result.json", keeps="run/**/*", expect=130),
           _c("term-batch-run", "batch", "run", "{job_many}", "--out", "{out}/run2", "--workers", "2", how="signal",
              signal_after="run2/tasks/*/result.json", sig=signal.SIGTERM, keeps="run2/**/*", expect=130),
           _c("int-batch-dask", "batch", "run", "{job_many}", "--out", "{out}/run", "--local-cluster", "2",
              how="signal", signal_after="run/tasks/*/result.json", keeps="run/**/*", expect=130),
           _c("int-map-ga", "map", "{chain}", "--device", "pixel6", "--generations", "100000", "--out", "{out}/p.json",
              how="signal", signal_after="p.json.ckpt", keeps="p.json.ckpt", expect=130),
           _c("term-fit-rc", "thermal", "fit", "{trace_long}", *FIT[3:], "--model", "rc", "--hidden", "2", "--shooting", "600", "--out",
              "{out}/m.json", how="signal", sig=signal.SIGTERM, delay=1.5, expect=130),
           _c("term-serve", "serve", "--artifacts", "{split_art}", "--port", "0", how="signal",
              sig=signal.SIGTERM, expect=130, preamble=1),
           _c("int-quantize", "quantize", "mobilenet_v2", "--out", "{out}/q.tflite", how="signal", tf=True,
              delay=12.0, expect=130),
           _c("int-export", "export", "{zoo_split}", "--out", "{out}/art", how="signal", tf=True,
              signal_after=".art.tmp-*", expect=130)]
    return cs


# ------------------------------------------------------------------------------------- running
def snapshot(*folders: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folders``: relative path -> (size, mtime)."""
    snap: dict[str, tuple[int, int]] = {}
    for top in folders:
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                f = Path(dirpath) / name
                st = f.lstat()
                snap[str(f.relative_to(top.parent))] = (st.st_size if name in filenames else -1, st.st_mtime_ns)
    return snap


def diff(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def run_case(case: Case, paths: dict[str, Path]) -> Outcome:
    """Run ``case`` (in-process, or in a subprocess for ``ulimit``/``signal``) on an emptied
    ``out/`` and compare the input and output folders before and after."""
    watched = (paths["in"], paths["out"])
    shutil.rmtree(paths["out"])  # each case starts from an empty output folder
    paths["out"].mkdir()
    before = snapshot(*watched)
    argv = case.args(paths)
    t0 = time.perf_counter()
    if case.how == "inprocess":
        from optimizer.cli import main

        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except Exception:  # noqa: BLE001 — a crash is what the sweep looks for
                import traceback

                traceback.print_exc()
                code = 1
        stderr = err.getvalue()
    else:
        code, stderr = _run_subprocess(case, argv, paths)
    out = Outcome(case, code, stderr, seconds=time.perf_counter() - t0)
    after = snapshot(*watched)
    changed = diff(before, after)
    if case.keeps:  # kept to resume (finished batch tasks, a GA checkpoint); never a half-written file
        found = list(paths["out"].glob(case.keeps))
        kept = {str(g.relative_to(paths["out"].parent)) for f in found for g in (f, *f.parents)
                if paths["out"] in g.parents}
        changed = [c for c in changed if c not in kept or Path(c).name.startswith(".")]
    out.changed = changed
    return out


def _run_subprocess(case: Case, argv: list[str], paths: dict[str, Path]) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    cmd = [sys.executable, "-m", "optimizer.cli", "--quiet", *argv]  # progress lines of work done are no errors
    cwd = paths["in"].parent / "cwd"
    cwd.mkdir(exist_ok=True)
    if case.how == "ulimit":
        def limit() -> None:
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.limit, case.limit))

        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, preexec_fn=limit, timeout=600)
        return res.returncode, res.stderr
    def as_from_a_shell() -> None:
        # default dispositions, as a terminal starts a command: a sweep started in the background
        # of a non-interactive shell ignores SIGINT, and the commands it starts would inherit that
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True, preexec_fn=as_from_a_shell)
    start = time.time()
    while proc.poll() is None and time.time() < start + 300:
        if case.signal_after and list(paths["out"].glob(case.signal_after)):
            break
        if not case.signal_after and time.time() > start + case.delay:
            break
        time.sleep(0.02)
    if proc.poll() is None:
        os.killpg(proc.pid, case.sig)  # the whole process group, as a terminal's Ctrl-C
    try:
        _, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
        return -9, stderr + "\n(killed: did not stop within 120 s)"
    return proc.returncode, stderr

