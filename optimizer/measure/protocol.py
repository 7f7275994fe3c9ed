"""Client side of the external measurement protocol (see ``optimizer/measure/PROTOCOL.md``).

:class:`ExternalMeasurer` keeps a user-given command alive and exchanges JSON lines with it:
one request per candidate, one reply back. Hangs (timeout), deaths and garbage replies restart
the command and retry; when the retries are spent a :class:`MeasurementError` names the
command, the exit status or the offending line, and the tail of its stderr.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import shlex
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from ..errors import ConfigError, MeasurementError

PROTOCOL_VERSION = 1
_EOF = object()


class _Failure(Exception):
    """A transport failure worth a restart and retry (hang, death, garbage)."""


class ExternalMeasurer:
    """Measure model artifacts through a long-running command speaking JSON lines.

    Parameters
    ----------
    command : str
        Shell-style command line (split with :func:`shlex.split`, no shell).
    timeout_s : float
        Seconds to wait for each reply.
    retries : int
        Restarts (and re-sends) after a hang, death or garbage reply.
    cwd : path-like, optional
        Working directory of the command.

    Notes
    -----
    One request is in flight at a time (the protocol is strictly request/reply).
    """

    def __init__(self, command: str, *, timeout_s: float = 120.0, retries: int = 1,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        self.command = command
        self.timeout_s = timeout_s
        self.retries = retries
        self.cwd = cwd
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[object] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        self._next_id = 0

    # ------------------------------------------------------------------ process
    def _argv(self) -> list[str]:
        try:
            argv = shlex.split(self.command)
        except ValueError as exc:
            raise ConfigError(f"--measure-cmd {self.command!r}: cannot split it ({exc})") from None
        if not argv:
            raise ConfigError("--measure-cmd is empty; give the command that runs the measurements")
        if self.timeout_s <= 0 or self.retries < 0:
            raise ConfigError(f"measure timeout {self.timeout_s} s / retries {self.retries}: need > 0 and >= 0")
        return argv

    def _start(self) -> None:
        argv = self._argv()
        self._lines = queue.Queue()
        self._stderr.clear()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, bufsize=1, cwd=self.cwd,
                                    start_new_session=True)
        except OSError as exc:
            raise MeasurementError(f"--measure-cmd {self.command!r} cannot be started ({exc.strerror})") from None
        self._proc = proc
        threading.Thread(target=self._pump, args=(proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._pump_err, args=(proc.stderr, self._stderr), daemon=True).start()

    @staticmethod
    def _pump(stream: Any, out: queue.Queue[object]) -> None:
        for line in stream:
            out.put(line)
        out.put(_EOF)

    @staticmethod
    def _pump_err(stream: Any, out: collections.deque[str]) -> None:
        for line in stream:
            out.append(line.rstrip("\n"))

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:  # the command's own process group (start_new_session), children included
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def close(self) -> None:
        """Close the command's stdin and let it exit (killed after 5 s)."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()

    def __enter__(self) -> ExternalMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ protocol
    def _stderr_tail(self) -> str:
        tail = " | ".join(list(self._stderr)[-3:])
        return f"; stderr: {tail[-300:]}" if tail else ""

    def _exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._proc is None or self._proc.poll() is not None:
            self._kill()
            self._start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
        except OSError:  # it died already; whatever it printed is still read below
            pass
        try:
            line = self._lines.get(timeout=self.timeout_s)
        except queue.Empty:
            raise _Failure(f"gave no reply within {self.timeout_s:g} s (hung?)") from None
        if line is _EOF:
            status = proc.wait()
            raise _Failure(f"exited with status {status} without replying")
        text = str(line).strip()
        try:
            reply = json.loads(text)
        except json.JSONDecodeError:
            raise _Failure(f"replied with a line that is not JSON: {text[:80]!r}") from None
        if not isinstance(reply, dict) or "ok" not in reply:
            raise _Failure(f"replied with JSON that is not a reply object (needs 'id' and 'ok'): {text[:80]!r}")
        if reply.get("id") != request["id"]:
            raise _Failure(f"replied to id {reply.get('id')!r} while {request['id']} was asked")
        if reply["ok"] is True:
            metrics = reply.get("metrics")
            lat = metrics.get("latency_s") if isinstance(metrics, dict) else None
            if not isinstance(lat, (int, float)) or isinstance(lat, bool) or not lat > 0:
                raise _Failure(f"replied ok without a positive metrics.latency_s: {text[:80]!r}")
        return reply

    def measure(self, artifact: str | os.PathLike[str], assignment: dict[str, Any], *,
                dtype: str = "fp32", repeats: int = 10, warmup: int = 2) -> dict[str, Any]:
        """Send one request; return the reply's ``metrics`` (``latency_s`` at least).

        Raises
        ------
        MeasurementError
            The command failed the candidate (``ok: false``), or it hung, died or replied
            garbage more than ``retries`` times in a row.
        """
        path = Path(artifact).resolve()
        fmt = path.suffix.lstrip(".").lower()
        if fmt not in ("tflite", "onnx"):
            raise ConfigError(f"{artifact}: artifacts for the measure command are .tflite or .onnx files")
        self._next_id += 1
        request = {"protocol": PROTOCOL_VERSION, "id": self._next_id, "artifact": str(path),
                   "format": fmt, "assignment": assignment, "dtype": dtype, "repeats": int(repeats),
                   "warmup": int(warmup)}
        last = ""
        for _ in range(self.retries + 1):
            try:
                reply = self._exchange(request)
            except _Failure as exc:
                last = f"{exc}{self._stderr_tail()}"
                self._kill()
                continue
            if reply["ok"] is not True:
                raise MeasurementError(f"--measure-cmd {self.command!r} could not measure {path.name}: "
                                       f"{reply.get('error', 'no error text')}")
            return dict(reply["metrics"])
        raise MeasurementError(f"--measure-cmd {self.command!r} {last} (after {self.retries + 1} attempt"
                               f"{'s' if self.retries else ''})")
