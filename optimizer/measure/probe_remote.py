"""Probe runners for phones: the JSON-lines ``--measure-cmd`` protocol, and an ``adb`` script
around TFLite's ``benchmark_model``.

* :class:`CmdProbeRunner` sends each probe model to the user's measurement command
  (``PROTOCOL.md``, :class:`optimizer.measure.protocol.ExternalMeasurer`) as a one-stage
  assignment of the probed processor and keeps the replied median.
* :class:`AdbProbeRunner` writes the probe models and a shell script that pushes each one to the
  phone with ``adb`` and runs ``benchmark_model`` on it (threads and delegate flags:
  ``--num_threads``, ``--use_xnnpack``, ``--use_gpu``, ``--use_nnapi``), saving its output per
  probe under ``logs/``. The campaign measures whatever logs exist and asks for the script to be
  run for the rest (:class:`ProbesPending`); re-running the command reads them back, so a phone
  campaign is resumable too. Logs are parsed like ``benchmark_model`` output anywhere in the
  project (:func:`optimizer.measure.profile_formats.benchmark_summary`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError, DnnplanError, MeasurementError
from ..fileio import atomic_write_bytes, atomic_write_text
from .probe_runner import LITERT_DELEGATES, Timing
from .profile_formats import benchmark_summary

#: delegate of benchmark_model -> (runtime name of the probe table, benchmark_model flags)
DELEGATES: dict[str, tuple[str, str]] = {
    "xnnpack": (LITERT_DELEGATES["xnnpack"], "--use_xnnpack=true"),
    "cpu": (LITERT_DELEGATES["cpu"], "--use_xnnpack=false"),
    "gpu": ("tflite_gpu", "--use_gpu=true"),
    "nnapi": ("tflite_nnapi", "--use_nnapi=true"),
}
RUNS, WARMUP = 50, 5


class ProbesPending(DnnplanError):
    """Probe models wait for the phone: run the generated script, then the same command again."""

    exit_code = 0


class CmdProbeRunner:
    """Probes timed by the user's ``--measure-cmd`` (module doc)."""

    name = "cmd"

    def __init__(self, command: str, runtime: str, fmt: str, threads: int, processor: str, folder: Path, *,
                 repeats: int = 30, warmup: int = 5, timeout_s: float = 120.0) -> None:
        if fmt not in ("tflite", "onnx"):
            raise ConfigError(f"--format {fmt!r}: probes for a measure command are tflite or onnx")
        self.command, self.runtime, self.fmt, self.threads = command, runtime, fmt, threads
        self.processor, self.folder, self.repeats, self.warmup = processor, folder, repeats, warmup
        self.timeout_s = timeout_s
        self._measurer = None

    def version(self) -> str:
        return f"--measure-cmd {self.command}"

    def measure(self, models: Sequence[tuple[str, bytes]], seed: int) -> list[Timing | None]:
        from .protocol import ExternalMeasurer

        if self._measurer is None:
            self._measurer = ExternalMeasurer(self.command, timeout_s=self.timeout_s)
        self.folder.mkdir(parents=True, exist_ok=True)
        out: list[Timing | None] = []
        assignment = {"kind": "pipeline", "stages": [{"processor": self.processor, "layers": [0, 1],
                                                      "threads": self.threads}]}
        for pid, blob in models:
            path = self.folder / f"{pid}.{self.fmt}"
            atomic_write_bytes(path, blob)
            m = self._measurer.measure(path, assignment, repeats=self.repeats, warmup=self.warmup)
            lat = float(m["latency_s"])
            std = float(m.get("latency_std_s") or 0.0)
            out.append(Timing(lat, max(lat - 0.674 * std, 0.0), lat + 0.674 * std, self.repeats, 1))
            path.unlink(missing_ok=True)
        return out

    def close(self) -> None:
        if self._measurer is not None:
            self._measurer.close()


class AdbProbeRunner:
    """Probes timed on an Android phone by ``benchmark_model`` through a generated script."""

    name = "adb"
    fmt = "tflite"

    def __init__(self, folder: Path, threads: int, delegate: str = "xnnpack", serial: str | None = None,
                 benchmark_model: str = "/data/local/tmp/benchmark_model") -> None:
        if delegate not in DELEGATES:
            raise ConfigError(f"--delegate {delegate!r}; expected one of {', '.join(DELEGATES)}")
        self.folder, self.threads, self.delegate, self.serial = folder, threads, delegate, serial
        self.benchmark_model = benchmark_model
        self.runtime = DELEGATES[delegate][0]
        self.pending = 0

    def version(self) -> str:
        return f"benchmark_model ({self.benchmark_model}, {DELEGATES[self.delegate][1]})"

    @property
    def models_dir(self) -> Path:
        return self.folder / "models"

    @property
    def logs_dir(self) -> Path:
        return self.folder / "logs"

    @property
    def script(self) -> Path:
        return self.folder / "run_probes.sh"

    def measure(self, models: Sequence[tuple[str, bytes]], seed: int) -> list[Timing | None]:
        """Timings of the probes whose logs exist; the others' models are written for the script."""
        out: list[Timing | None] = []
        for pid, blob in models:
            log = self.logs_dir / f"{pid}.txt"
            if log.is_file():
                out.append(read_benchmark_log(log))
                (self.models_dir / f"{pid}.tflite").unlink(missing_ok=True)
                continue
            atomic_write_bytes(self.models_dir / f"{pid}.tflite", blob)
            self.pending += 1
            out.append(None)
        return out

    def write_script(self) -> Path:
        """The shell script that runs every waiting probe model on the phone."""
        adb = "adb" + (f" -s {shlex.quote(self.serial)}" if self.serial else "")
        flags = f"--num_threads={self.threads} {DELEGATES[self.delegate][1]} --warmup_runs={WARMUP} --num_runs={RUNS}"
        text = f"""#!/bin/sh
# Generated by `dnnplan calibrate --runner adb`: runs each probe model in models/ on the phone with
# TFLite's benchmark_model and keeps its output in logs/; then run the same dnnplan command again.
# BENCHMARK_MODEL: path of benchmark_model on the phone (default {self.benchmark_model}).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BM=${{BENCHMARK_MODEL:-{self.benchmark_model}}}
DIR=/data/local/tmp/dnnplan_probes
mkdir -p "$HERE/logs"
{adb} shell mkdir -p $DIR || exit 1
for f in "$HERE"/models/*.tflite; do
  [ -e "$f" ] || continue
  id=$(basename "$f" .tflite)
  [ -s "$HERE/logs/$id.txt" ] && continue
  {adb} push "$f" "$DIR/$id.tflite" >/dev/null || exit 1
  if {adb} shell "$BM --graph=$DIR/$id.tflite {flags}" > "$HERE/logs/$id.tmp" 2>&1; then
    mv "$HERE/logs/$id.tmp" "$HERE/logs/$id.txt"
  else
    echo "benchmark_model failed on $id (see logs/$id.tmp)" >&2
  fi
  {adb} shell rm -f "$DIR/$id.tflite"
done
"""
        path = atomic_write_text(self.script, text)
        path.chmod(0o755)
        return path


def read_benchmark_log(path: Path) -> Timing:
    """The timing ``benchmark_model`` printed into ``path``.

    Raises
    ------
    MeasurementError
        The log holds no inference timing (benchmark_model failed on the probe).
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    summary = benchmark_summary(text)
    if summary is None:
        first = next((ln for ln in text.splitlines() if "ERROR" in ln or "error" in ln), text.strip()[:120])
        raise MeasurementError(f"{path}: no 'Inference (avg)' timing in the benchmark_model output ({first[:160]}); "
                               "delete the log and run the script again")
    avg, std, count = summary
    return Timing(avg, max(avg - 0.674 * std, 0.0), avg + 0.674 * std, count, 1)
