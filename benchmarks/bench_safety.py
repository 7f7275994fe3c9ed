"""Hostile and careless inputs, before and after: what each checkout does with them.

Run: .venv/bin/python benchmarks/bench_safety.py [--before /path/to/other/checkout] [-k SUBSTRING]

Every case runs in fresh processes of a checkout's code (``PYTHONPATH``) under a 4 GiB address
space limit (a command that would allocate more fails there instead of exhausting the machine),
peak resident memory from ``VmHWM``. One row per case: what the checkout given with ``--before``
did (the branch point, e.g. /work/main) and what this checkout does, and whether that is safe
(one line and exit 2, nothing run, read, written or deleted outside the folder named, memory
bounded). The inputs are those of ``tests/_safety.py``; the fixtures (tiny ONNX network, its plans
and exports) are made once with this checkout's code.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "tests"))

from _safety import pool_workers, run_measured, write_npz_bomb, write_pickle_bomb, write_yaml_bomb  # noqa: E402

GB = 1 << 30


@dataclass
class Outcome:
    safe: bool
    what: str
    peak: int | None = None

    def cell(self) -> str:
        mem = f"; peak {self.peak / 1e9:.2f} GB" if self.peak else ""
        return f"{'safe' if self.safe else 'UNSAFE'}: {self.what}{mem}"


def _line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    if not lines:
        return "(no message)"
    if any("Traceback" in ln for ln in lines):
        return f"traceback ({lines[-1][:70]})"
    return lines[-1].removeprefix("error: ")[:90]


def _exit(rc: int, err: str, peak: int | None = None, bound: int = GB) -> Outcome:
    clean = rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    return Outcome(clean and (peak is None or peak <= bound), f"exit {rc}, {_line(err)}", peak)


# ----------------------------------------------------------------------------------------- fixtures
def make_fixtures(root: Path) -> dict[str, Path]:
    """Inputs every case shares, made with this checkout: a tiny ONNX network, a pipeline plan and
    its export, a split plan and its export, a 60-layer chain network, the bombs."""
    from _bad_inputs import write_chain_onnx
    from _byom import write_tiny_onnx
    from _safety import export_tiny_pipeline

    from optimizer.cli import main

    root.mkdir(parents=True, exist_ok=True)
    p = {"tiny": write_tiny_onnx(root / "tiny.onnx"), "chain": write_chain_onnx(root / "chain.onnx")}
    p.update(split=root / "split.json", split_art=root / "split_art")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        p["plan"], p["art"] = export_tiny_pipeline(root, p["tiny"])
        for argv in (["split", p["tiny"], "--device", "galaxy_j6", "--network", "wifi_10", "--interior-only",
                      "--out", p["split"]],
                     ["export", p["split"], "--out", p["split_art"]]):
            assert main(["--quiet", *map(str, argv)]) == 0, argv
    p["npz"] = write_npz_bomb(root / "bomb.npz", (24414, 3, 64, 64))
    p["yaml"] = write_yaml_bomb(root / "bomb.yaml", levels=7)
    fast = root / "fast.csv"
    fast.write_text("t_s,mbps\n0,100000\n10000,100000\n20000,100000\n")
    rows, stamps = root / "rows.csv", root / "stamps.up"
    with open(rows, "w") as fh_rows, open(stamps, "w") as fh_up:
        fh_rows.write("t_s,mbps\n")
        for start in range(0, 10_000_000, 100_000):
            fh_rows.write("".join(f"{i * 0.1:.1f},{5 + i % 7}\n" for i in range(start, start + 100_000)))
            fh_up.write("".join(f"{i // 10}\n" for i in range(start, start + 100_000)))
    p.update(fast=fast, rows=rows, stamps=stamps)
    return p


def _job(work: Path, model: Path, name: str = "j", solver: str = "exact", settings: str = "") -> Path:
    job = work / "job.yaml"
    job.write_text(f"name: {name}\ngrid:\n  models: [{model}]\n  devices: [pixel6, pixel4]\n  seeds: [0]\n"
                   f"  map: {{solvers: [{solver}]{settings}}}\n")
    return job


_FAILING_RUN = """\
from optimizer.batch import runner
def broken(*args, **kwargs):
    raise RuntimeError("a worker process was killed")
runner._run_pool = broken
from optimizer.cli import main
try:
    main({argv!r})
except RuntimeError:
    pass
"""


# -------------------------------------------------------------------------------------------- cases
def case_job_dotdot(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    (work / "keep.txt").write_text("precious\n")
    job = _job(work, fx["tiny"], name="'..'")
    rc, err, _ = run_measured(work, code=_FAILING_RUN.format(argv=["batch", "run", str(job)]), repo=repo)
    if not (work / "keep.txt").exists():
        return Outcome(False, "the failed run deleted the folder holding the job (results/..)")
    return Outcome(True, "refused: 'name' " + ("has a '..' component" if "component" in err else _line(err)))


def case_out_dotdot(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    (work / "keep.txt").write_text("precious\n")
    job = _job(work, fx["tiny"])
    run_measured(work, code=_FAILING_RUN.format(argv=["batch", "run", str(job), "--out", "missing/.."]), repo=repo)
    if not (work / "keep.txt").exists():
        return Outcome(False, "the failed run deleted the current folder")
    polluted = (work / "tasks").exists()
    return Outcome(not polluted, "kept, but tasks/ written into it" if polluted else "refused: not a run folder")


def case_manifest_outside(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    art = work / "art"
    shutil.copytree(fx["art"], art)
    doc = json.loads((art / "manifest.json").read_text())
    part = doc["parts"][0]["file"]
    shutil.move(art / part, work / "outside.onnx")
    doc["parts"][0]["file"] = "../outside.onnx"
    (art / "manifest.json").write_text(json.dumps(doc))
    rc, err, _ = run_measured(work, "run", str(fx["plan"]), "--artifacts", str(art), "--frames", "2", repo=repo)
    if rc == 0:
        return Outcome(False, "ran a part file outside the artifacts folder (../outside.onnx)")
    return _exit(rc, err)


def case_checkpoint(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    marker = work / "ran"
    ckpt = write_pickle_bomb(work / "c.ckpt", marker)
    rc, err, _ = run_measured(work, "map", str(fx["tiny"]), "--device", "pixel6", "--checkpoint", str(ckpt),
                              "--resume", "--out", str(work / "p.json"), repo=repo)
    if marker.exists():
        return Outcome(False, f"the {ckpt.stat().st_size}-byte checkpoint ran a shell command; exit {rc}")
    return _exit(rc, err)


def case_learned(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    marker = work / "ran"
    model = write_pickle_bomb(work / "model.joblib", marker)
    code = ("from optimizer.cost.learned import load_learned_model\n"
            f"try:\n    load_learned_model({str(model)!r})\nexcept Exception as e:\n    print(e)")
    run_measured(work, code=code, repo=repo)
    return Outcome(not marker.exists(), "the model file ran a shell command" if marker.exists() else "refused")


def case_trace_fast(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    rc, err, peak = run_measured(work, "split", str(fx["tiny"]), "--device", "galaxy_j6", "--network", "wifi_10",
                                 "--bandwidth-trace", str(fx["fast"]), "--out", str(work / "p.json"), repo=repo)
    return _exit(rc, err, peak)


def case_trace_rows(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    rc, err, peak = run_measured(work, "split", str(fx["tiny"]), "--device", "galaxy_j6", "--network", "wifi_10",
                                 "--bandwidth-trace", str(fx["rows"]), "--out", str(work / "p.json"), repo=repo)
    return _exit(rc, err, peak)


def _read_within(repo: Path, work: Path, code: str, what: str) -> Outcome:
    """``code`` must end (exit 0) within 1 GB of peak memory."""
    rc, err, peak = run_measured(work, code=code, repo=repo)
    return Outcome(rc == 0 and peak is not None and peak <= GB, what if rc == 0 else _line(err), peak)


def case_trace_stamps(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    code = (f"from optimizer.hardware.bandwidth import load_trace\nt = load_trace({str(fx['stamps'])!r})\n"
            "assert len(t.opportunities_s) == 10_000_000")
    return _read_within(repo, work, code, "read")


def case_npz_export(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    code = ("from optimizer.graph import load_graph\nfrom optimizer.plan.export import calibration_inputs\n"
            f"d, i = calibration_inputs(load_graph({str(fx['tiny'])!r}), {str(fx['npz'])!r}, 8, 0)\n"
            "assert d['x'].shape == (8, 3, 64, 64)")
    return _read_within(repo, work, code, "8 samples read")


def case_npz_quantize(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    code = ("from pathlib import Path\nfrom optimizer.quantize.calibration import InputSpec, load_calibration\n"
            f"load_calibration({str(fx['npz'])!r}, [InputSpec('x', (3, 64, 64), 'float32')], None, samples=64, "
            f"heldout=16, workdir=Path({str(work / 'w')!r}))")
    rc, err, peak = run_measured(work, code=code, repo=repo)
    written = sum(f.stat().st_size for f in (work / "w").rglob("*") if f.is_file())
    return Outcome(rc == 0 and written < 64 << 20, f"{written / 1e6:,.0f} MB unpacked for 80 samples", peak)


def case_yaml(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    rc, err, peak = run_measured(work, "batch", "plan", str(fx["yaml"]), repo=repo)
    return _exit(rc, err, peak)


def _guarded(code: str) -> str:
    """``code`` ending as the CLI does: a project error is one line on stderr and exit 2."""
    body = "\n".join("    " + ln for ln in code.splitlines())
    return (f"import sys\nfrom optimizer.errors import DnnplanError\ntry:\n{body}\nexcept DnnplanError as e:\n"
            "    print(f'error: {e}', file=sys.stderr)\n    sys.exit(2)\n")


def case_input_shape(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    art = work / "art"
    shutil.copytree(fx["art"], art)
    manifest = json.loads((art / "manifest.json").read_text())
    manifest["inputs"][0]["shape"] = [1, 3, 100000, 100000]
    (art / "manifest.json").write_text(json.dumps(manifest))
    code = ("from optimizer.plan.manifest import read_manifest\nfrom optimizer.runtime import input_frames\n"
            f"input_frames(read_manifest({str(art)!r}), None, 50)")
    rc, err, peak = run_measured(work, code=_guarded(code), repo=repo)
    return _exit(rc, err, peak)


def case_batch_settings(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    job = _job(work, fx["tiny"], solver="ga", settings=", settings: {population: 1000000}")
    rc, err, _ = run_measured(work, "batch", "plan", str(job), repo=repo)
    return _exit(rc, err) if rc else Outcome(False, "accepted (population 1,000,000)")


def case_split_fields(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    job = work / "job.yaml"
    job.write_text(f"name: j\ndefaults: {{processors: [cpu, quantum]}}\ngrid:\n  models: [{fx['tiny']}]\n"
                   "  devices: [galaxy_j6]\n  split: {networks: [wifi_10], solvers: [exact]}\n")
    rc, err, _ = run_measured(work, "batch", "plan", str(job), repo=repo)
    return _exit(rc, err) if rc else Outcome(False, "accepted (processor 'quantum')")


def _cli(repo: Path, work: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(repo), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.Popen([sys.executable, "-m", "optimizer.cli", "--quiet", *args], cwd=work, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def case_concurrent(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    import re

    job = _job(work, fx["chain"], solver="ga", settings=", settings: {max_generations: 15, patience: 15}")
    first = _cli(repo, work, "batch", "run", str(job), "--out", "run", "--workers", "1")
    deadline = time.time() + 60
    while not (work / "run" / "run.json").exists() and time.time() < deadline and first.poll() is None:
        time.sleep(0.02)
    second = _cli(repo, work, "batch", "run", str(job), "--out", "run", "--workers", "1")
    outs = [p.communicate(timeout=600) for p in (first, second)]
    ran = sum(int(m.group(1)) for out, _ in outs for m in [re.search(r"\((\d+) run now", out)] if m)
    return Outcome(ran == 2, f"2 tasks computed {ran} times; second run exit {second.returncode}")


def case_kill_workers(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    import psutil

    job = _job(work, fx["chain"], solver="ga", settings=", settings: {max_generations: 100000, patience: 100000}")
    proc = _cli(repo, work, "batch", "run", str(job), "--out", "run", "--workers", "2")
    main, family = psutil.Process(proc.pid), []
    try:
        pool_workers(main, 2)
        family = main.children(recursive=True)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(5)
        alive = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    finally:  # never leave the run or its workers behind
        for p in [main] * (proc.poll() is None) + family:
            with contextlib.suppress(psutil.Error):
                p.kill()
        proc.wait()
    return Outcome(not alive, f"{len(alive)} of {len(family)} child processes still running 5 s after kill -9")


def case_damaged_result(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    job = _job(work, fx["tiny"])
    first = _cli(repo, work, "batch", "run", str(job), "--out", "run", "--workers", "1")
    first.communicate(timeout=300)
    result = sorted((work / "run").glob("tasks/*/result.json"))[0]
    result.write_text(result.read_text()[:40])
    again = _cli(repo, work, "batch", "run", str(job), "--out", "run", "--workers", "1")
    out, err = again.communicate(timeout=300)
    if again.returncode:
        return Outcome(False, f"exit {again.returncode}: {_line(err)}")
    return Outcome("1 run now" in out, f"exit 0, the task ran again ({out.strip()[:40]}...)")


def _result_line(repo: Path, work: Path, code: str) -> str:
    """The ``RESULT ...`` line ``code`` prints, run with ``repo``'s package (else its error line)."""
    res = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    return next((ln[7:] for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), _line(res.stderr))


def case_serve_slow(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    code = f"""
import socket, threading, time
from optimizer.plan.manifest import read_manifest
from optimizer.runtime import SplitClient, TailServer
import inspect
art = {str(fx['split_art'])!r}
m = read_manifest(art)
import numpy as np
req = {{t.name: np.zeros(t.shape, t.dtype) for t in m.wire.request}}
kw = dict(frame_deadline_s=0.5, idle_timeout_s=1.5) if 'frame_deadline_s' in inspect.signature(TailServer).parameters else {{}}
srv = TailServer(art, "127.0.0.1", 0, workers=1, **kw).start()
stop = threading.Event()
def hold(dribble):
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
        except OSError:
            time.sleep(0.05); continue
        try:
            s.settimeout(0.1)
            data = b"\\x10\\x00\\x00\\x00" + b"D" * 16
            for i in range(10000):
                if stop.is_set(): break
                if dribble and i < len(data): s.sendall(data[i:i + 1])
                try:
                    if s.recv(65536) == b"": break
                except socket.timeout: pass
        except OSError: pass
        finally: s.close()
peers = [threading.Thread(target=hold, args=(i < 64,), daemon=True) for i in range(128)]
for t in peers: t.start()
time.sleep(1.0)
took = []
try:
    with SplitClient("127.0.0.1", srv.port, m.wire, timeout_s=5, retries=1) as c:
        for _ in range(8):
            t0 = time.perf_counter(); c.request(req); took.append(time.perf_counter() - t0); time.sleep(0.1)
    print("RESULT answered 8/8, slowest %.3f s" % max(took))
except Exception as e:
    print("RESULT refused after %d answers: %s" % (len(took), str(e)[:80]))
stop.set()
"""
    line = _result_line(repo, work, code)
    slowest = float(line.rsplit(" ", 2)[-2]) if line.startswith("answered 8/8") else None
    return Outcome(slowest is not None and slowest < 1.0, f"64 slow + 64 idle peers: {line}")


def case_serve_token(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    token = work / "token"
    token.write_text("0123456789abcdef0123456789abcdef\n")
    code = f"""
import socket, inspect
import numpy as np
from optimizer.plan.manifest import read_manifest
from optimizer.runtime import TailServer, wire
art = {str(fx['split_art'])!r}
m = read_manifest(art)
if 'token' not in inspect.signature(TailServer).parameters:
    print("RESULT no --token-file: every loopback peer is served")
else:
    with TailServer(art, "127.0.0.1", 0, workers=1, token=wire.read_token({str(token)!r})) as srv, \\
            socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(wire.encode(wire.REQUEST, 1, {{t.name: np.zeros(t.shape, t.dtype) for t in m.wire.request}}))
        head = wire.read_frame(s, 1 << 20)
        reply = wire.decode(head, token=wire.read_token({str(token)!r}))
        print("RESULT unsigned request answered:", wire.ERROR_NAMES.get(reply.error_code, "a response"),
              "then", "closed" if wire.read_frame(s, 1 << 20) is None else "kept")
"""
    line = _result_line(repo, work, code)
    return Outcome("unauthorized then closed" in line, line)


def case_serve_replay(repo: Path, work: Path, fx: dict[str, Path]) -> Outcome:
    """Everything a signed client sent, recorded by a proxy and sent again on a fresh connection."""
    token = work / "token"
    token.write_text("0123456789abcdef0123456789abcdef\n")
    code = f"""
import socket, threading, time
import numpy as np
from optimizer.plan.manifest import read_manifest
from optimizer.runtime import SplitClient, TailServer, wire
art = {str(fx['split_art'])!r}
m = read_manifest(art)
token = wire.read_token({str(token)!r})
req = {{t.name: np.zeros(t.shape, t.dtype) for t in m.wire.request}}
recorded = []

def pump(a, b, rec):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            if rec is not None:
                rec.append(d)
            b.sendall(d)
    except OSError:
        pass

with TailServer(art, "127.0.0.1", 0, workers=1, token=token, idle_timeout_s=2) as srv, \\
        socket.create_server(("127.0.0.1", 0)) as lsock:
    def proxy():
        c, _ = lsock.accept()
        u = socket.create_connection(("127.0.0.1", srv.port))
        threading.Thread(target=pump, args=(u, c, None), daemon=True).start()
        pump(c, u, recorded)
    threading.Thread(target=proxy, daemon=True).start()
    with SplitClient("127.0.0.1", lsock.getsockname()[1], m.wire, token=token, timeout_s=5) as cl:
        cl.request(req)
    time.sleep(0.3)
    types = []
    with socket.create_connection(("127.0.0.1", srv.port), timeout=4) as s:
        s.sendall(b"".join(recorded))
        try:
            while (p := wire.read_frame(s, 1 << 24)) is not None:
                types.append(wire.MESSAGE_TYPES.get(wire.HEADER.unpack_from(p, 0)[2], "?"))
        except (socket.timeout, OSError):
            pass
    answered = "response" in types
    print("RESULT", "replayed request answered" if answered else "replay refused",
          "(replies: " + ", ".join(types) + ")")
"""
    line = _result_line(repo, work, code)
    return Outcome(line.startswith("replay refused"), line)


CASES: list[tuple[str, str, Callable[[Path, Path, dict[str, Path]], Outcome]]] = [
    ("job-name-dotdot", "job named '..', the run fails before a task finishes", case_job_dotdot),
    ("out-dotdot", "batch run --out missing/.., the run fails", case_out_dotdot),
    ("manifest-outside", "manifest part file ../outside.onnx", case_manifest_outside),
    ("checkpoint-pickle", "map --resume from a crafted pickle (about 100 bytes)", case_checkpoint),
    ("learned-pickle", "learned cost model file that is a crafted pickle", case_learned),
    ("trace-100gbps", "3-row t_s,mbps trace at 100 Gbps (split --bandwidth-trace)", case_trace_fast),
    ("trace-csv-rows", "10^7-row t_s,mbps trace", case_trace_rows),
    ("trace-mahimahi", "10^7-line Mahimahi trace", case_trace_stamps),
    ("npz-export", "5 MB .npz declaring 1.2 GB, export calibration of 8 samples", case_npz_export),
    ("npz-quantize", "same .npz, quantize calibration of 64+16 samples (work folder bytes)", case_npz_quantize),
    ("yaml-aliases", "529-byte job, 7 levels of nested anchors (batch plan)", case_yaml),
    ("input-shape", "run frames of input x:1,3,100000,100000", case_input_shape),
    ("batch-settings", "batch task settings.population 1,000,000", case_batch_settings),
    ("batch-processors", "split task processors [cpu, quantum] (batch plan)", case_split_fields),
    ("batch-concurrent", "two batch run on one folder at once", case_concurrent),
    ("batch-kill", "kill -9 of batch run with 2 pool workers", case_kill_workers),
    ("batch-damaged", "truncated result.json, batch run again", case_damaged_result),
    ("serve-slow", "serve under 64 slow senders + 64 idle connections", case_serve_slow),
    ("serve-token", "unsigned request to serve --token-file F", case_serve_token),
    ("serve-replay", "a signed client's bytes, recorded and sent again on a new connection", case_serve_replay),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="another checkout to run the same cases with (e.g. /work/main)")
    ap.add_argument("-k", default="", help="only cases whose id contains this")
    args = ap.parse_args()
    repos = ([("before", args.before.resolve())] if args.before else []) + [("after", HERE)]
    with tempfile.TemporaryDirectory(prefix="dnnplan-safety-") as tmp:
        fx = make_fixtures(Path(tmp) / "fixtures")
        rows = []
        for cid, what, fn in CASES:
            if args.k not in cid:
                continue
            cells = []
            for label, repo in repos:
                work = Path(tmp) / label / cid
                work.mkdir(parents=True)
                t0 = time.perf_counter()
                try:
                    o = fn(repo, work, fx)
                except Exception as exc:  # noqa: BLE001 - a case that crashes the harness is reported
                    o = Outcome(False, f"harness error {type(exc).__name__}: {str(exc)[:80]}")
                cells.append(f"{o.cell()} ({time.perf_counter() - t0:.0f} s)")
                print(f"{cid:18s} {label:6s} {cells[-1]}", file=sys.stderr, flush=True)
            rows.append((cid, what, cells))
        head = " | ".join(label for label, _ in repos)
        print(f"| case | input | {head} |\n|---|---|{'---|' * len(repos)}")
        for cid, what, cells in rows:  # temporary paths left out
            print(f"| {cid} | {what} | " + " | ".join(c.replace(f"{tmp}/", "").replace("|", "\\|") for c in cells)
                  + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
