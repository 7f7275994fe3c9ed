"""Hostile inputs of the safety tests and ``benchmarks/bench_safety.py``, and a runner that measures
a command's peak memory in a fresh process.

Each input is small on disk and asks for much more: a zip of deflated zeros declaring a large
array, a YAML file whose nested aliases expand ten-fold per level, a bandwidth trace whose few
rows at 100 Gbps mean billions of packets, a pickle that runs a shell command when loaded.
"""

from __future__ import annotations

import io
import os
import pickle
import resource
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

import optimizer

#: the checkout whose ``optimizer`` the tests import (the one PYTHONPATH names first)
REPO = Path(optimizer.__file__).resolve().parents[1]
#: address space a measured command may use: a command that would allocate more fails there
#: (MemoryError) instead of exhausting the shared machine
AS_LIMIT_BYTES = 4 << 30

_MEASURED = """\
import sys
from optimizer.workers import proc_kb_bytes
try:
    if sys.argv[2] == "cli":
        from optimizer.cli import main
        rc = main(sys.argv[3:])
    else:
        exec(sys.argv[3])
        rc = 0
finally:
    with open(sys.argv[1], "w") as fh:
        fh.write(str(proc_kb_bytes("/proc/self/status", "VmHWM")))
sys.exit(rc)
"""


def run_measured(cwd: Path, *args: str, code: str | None = None, timeout: float = 300,
                 repo: Path = REPO) -> tuple[int, str, int | None]:
    """Run ``dnnplan ARGS`` (or the Python ``code``) in a fresh process of ``repo``'s code under
    :data:`AS_LIMIT_BYTES`; returns (exit status, stderr, peak resident bytes from ``VmHWM``)."""
    peak_file = cwd / ".peak_rss"
    peak_file.unlink(missing_ok=True)
    argv = [sys.executable, "-c", _MEASURED, str(peak_file), *(("code", code) if code is not None else ("cli", *args))]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT_BYTES, AS_LIMIT_BYTES))

    env = {**os.environ, "PYTHONPATH": str(repo), "TF_CPP_MIN_LOG_LEVEL": "3"}
    res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=limit)
    text = peak_file.read_text() if peak_file.exists() else ""
    return res.returncode, res.stderr, int(text) if text.isdigit() else None


def export_tiny_pipeline(folder: Path, model: Path) -> tuple[Path, Path]:
    """``(plan, artifacts)`` of the exact two-stage pipeline plan of ``model`` on pixel6 and its
    export (ONNX parts: no TensorFlow)."""
    from optimizer.cli import main

    plan, art = folder / "plan.json", folder / "art"
    assert main(["--quiet", "map", str(model), "--device", "pixel6", "--solver", "exact", "--out", str(plan)]) == 0
    assert main(["--quiet", "export", str(plan), "--out", str(art)]) == 0
    return plan, art


def pool_workers(main: object, n: int, timeout: float = 120.0) -> list[object]:
    """The ``forkserver`` pool workers of process ``main`` (a ``psutil.Process``) once ``n`` run
    (the fork server's children; ``[]`` on timeout), then one more second for their tasks to start."""
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        servers = [p for p in main.children(recursive=True)  # type: ignore[attr-defined]
                   if "multiprocessing.forkserver" in " ".join(p.cmdline())]
        workers = [w for s in servers for w in s.children()]
        if len(workers) >= n:
            time.sleep(1.0)
            return workers
        time.sleep(0.1)
    return []


def write_npz_bomb(path: Path, shape: tuple[int, ...], name: str = "x") -> Path:
    """An ``.npz`` whose one member declares ``shape`` float32 zeros, deflated (a few MB on disk
    for a gigabyte declared), written without ever holding the array."""
    dt = np.dtype("float32")
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": np.lib.format.dtype_to_descr(dt), "fortran_order": False,
                                                "shape": shape})
    left = int(np.prod(shape)) * dt.itemsize
    zeros = bytes(1 << 24)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf, \
            zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
        fh.write(head.getvalue())
        while left:
            k = min(left, len(zeros))
            fh.write(zeros[:k])
            left -= k
    return path


def write_yaml_bomb(path: Path, levels: int = 7) -> Path:
    """A batch job (under 600 bytes) whose ``settings`` alias a list ten-fold per level: 10^levels
    entries once expanded."""
    lines = ["name: bomb", "defaults:", "  settings:", "    a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"    a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    lines.append("grid: {models: [mobilenet_v2], devices: [pixel6], map: {solvers: [exact]}}")
    path.write_text("\n".join(lines) + "\n")
    return path


class RunsCommand:
    """Unpickling this runs ``touch MARKER`` (what a crafted checkpoint or model file can do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def write_pickle_bomb(path: Path, marker: Path) -> Path:
    """A pickle that creates ``marker`` when loaded (88 bytes or so)."""
    path.write_bytes(pickle.dumps(RunsCommand(marker)))
    return path
