"""Reference measurement command: the device side of ``PROTOCOL.md``, measuring on this host.

Run as ``python -m optimizer.measure.reference_runner``; it reads JSON-line requests on stdin
and answers each with LiteRT (``.tflite``) or onnxruntime (``.onnx``) whole-model timings on
this host's CPU. A stage assignment is honoured as far as one CPU allows: every stage runs on
the host CPU with the largest thread count asked for. Errors become ``ok: false`` replies.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def _time_onnx(path: str, threads: int, repeats: int, warmup: int) -> dict[str, float]:
    import numpy as np
    import onnxruntime as ort

    from .ort_profile import random_input_feed

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = random_input_feed(sess, 0)
    for _ in range(warmup):
        sess.run(None, feed)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - t0)
    arr = np.array(times)
    return {"latency_s": float(np.median(arr)), "latency_std_s": float(arr.std())}


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Measure one request; never raises (errors become an ``ok: false`` reply)."""
    rid = request.get("id") if isinstance(request, dict) else None
    try:
        if not isinstance(request, dict) or request.get("protocol") != 1:
            raise ValueError("expected a protocol-1 request object")
        stages = (request.get("assignment") or {}).get("stages") or [{}]
        threads = max(int(s.get("threads", 1)) for s in stages)
        repeats, warmup = int(request.get("repeats", 10)), int(request.get("warmup", 2))
        artifact, fmt = str(request["artifact"]), request.get("format", "tflite")
        if fmt == "tflite":
            from .litert import time_litert

            r = time_litert(artifact, threads=threads, repeats=repeats, warmup=warmup)
            metrics = {"latency_s": r.median_s, "latency_std_s": r.std_s}
        elif fmt == "onnx":
            metrics = _time_onnx(artifact, threads, repeats, warmup)
        else:
            raise ValueError(f"unknown artifact format {fmt!r}")
        metrics["fps"] = 1.0 / metrics["latency_s"]
        metrics["threads"] = threads
        return {"id": rid, "ok": True, "metrics": metrics}
    except Exception as exc:  # the runner reports every failure to the client as a reply
        return {"id": rid, "ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}


def main() -> int:
    """Serve requests from stdin until it closes (library prints go to stderr, not the replies)."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            reply = {"id": None, "ok": False, "error": f"request is not JSON ({exc.msg})"}
        else:
            reply = handle(request)
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
