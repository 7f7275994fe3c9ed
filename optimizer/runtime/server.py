"""The split's tail on a real TCP server (loopback only), speaking :mod:`optimizer.runtime.wire`.

One thread per connection (``socketserver.ThreadingTCPServer``), a bounded number of
connections, and a pool of LiteRT interpreters (one per worker) shared by the connections.
Every request frame is validated against the manifest's ``wire.request`` (version, type,
tensor names, dtypes, shapes, byte counts, frame length); a bad frame is answered with an ERROR
frame and the connection stays usable, because the length prefix keeps the stream in sync. A
frame whose declared length exceeds ``wire.max_frame_bytes`` is answered and the connection
closed (its bytes are never read). Idle or stalled connections are closed after
``idle_timeout_s``.
"""

from __future__ import annotations

import ipaddress
import queue
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, SchemaError
from ..plan.manifest import Manifest, read_manifest
from . import wire
from .detections import topk_detections
from .tensors import PartRunner, Value, convert_tensor


def check_loopback(host: str, what: str = "--host") -> str:
    """Accept only loopback addresses (this reference runtime never listens or connects elsewhere)."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{what} {host!r}: only loopback addresses (127.0.0.1, ::1, localhost) are "
                          "allowed by the reference runtime")
    return host


@dataclass
class ServerStats:
    connections: int = 0
    requests: int = 0
    errors: int = 0
    rejected: int = 0
    compute_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **kw: float) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)


class _Handler(socketserver.BaseRequestHandler):
    server: _TCPServer

    def handle(self) -> None:
        srv = self.server.tail
        sock: socket.socket = self.request
        sock.settimeout(srv.idle_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not srv.slots.acquire(blocking=False):
            srv.stats.add(rejected=1)
            self._send(wire.encode_error(0, wire.E_BUSY, f"server busy: {srv.max_clients} clients connected"))
            return
        srv.stats.add(connections=1)
        srv.track(sock, True)
        try:
            while True:
                try:
                    payload = wire.read_frame(sock, srv.max_frame_bytes)
                except wire.WireError as exc:  # too large: answer, then drop the connection
                    srv.stats.add(errors=1)
                    self._send(wire.encode_error(0, exc.code, str(exc)))
                    return
                if payload is None:
                    return
                self._send(srv.answer(payload))
        except (OSError, TimeoutError):
            return
        finally:
            srv.track(sock, False)
            srv.slots.release()

    def _send(self, data: bytes) -> None:
        try:
            self.request.sendall(data)
        except OSError:
            pass


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    tail: TailServer


class TailServer:
    """Serve the tail part of an exported split (or joint) plan.

    Parameters
    ----------
    artifacts_dir : path-like
        Directory written by ``dnnplan export`` (its SHA-256s are verified).
    host, port : str, int
        Loopback address; port 0 picks a free port (see :attr:`port` after :meth:`start`).
    workers : int
        Interpreters in the pool (concurrent inferences).
    threads : int, optional
        LiteRT threads per interpreter (default: the manifest's).
    max_clients : int
        Concurrent connections; more are answered with a ``busy`` ERROR frame.
    idle_timeout_s : float
        A connection silent this long (or stalled mid-frame) is closed.
    """

    def __init__(self, artifacts_dir: str | Path, host: str = "127.0.0.1", port: int = 0, *,
                 workers: int = 2, threads: int | None = None, max_clients: int = 32,
                 idle_timeout_s: float = 30.0) -> None:
        self.artifacts_dir = Path(artifacts_dir)
        self.host, self.port = host, port
        self.workers, self.threads = workers, threads
        self.max_clients, self.idle_timeout_s = max_clients, idle_timeout_s
        self.stats = ServerStats()
        self._server: _TCPServer | None = None
        self._thread: threading.Thread | None = None
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def track(self, sock: socket.socket, add: bool) -> None:
        with self._open_lock:
            (self._open.add if add else self._open.discard)(sock)

    # ------------------------------------------------------------- lifecycle
    def start(self) -> TailServer:
        """Verify the artifacts, load the interpreters, bind and serve in a background thread."""
        host = check_loopback(self.host)
        if not 0 <= int(self.port) <= 65535:
            raise ConfigError(f"--port {self.port}: expected 0..65535")
        manifest = read_manifest(self.artifacts_dir)
        if manifest.wire is None or not manifest.server_parts:
            raise SchemaError(f"{self.artifacts_dir}: the export of a {manifest.kind} plan has no tail "
                              "part to serve; export a split or joint plan")
        self.manifest: Manifest = manifest
        self.part = manifest.server_parts[0]
        self.request_specs = {t.name: t for t in manifest.wire.request}
        self.max_frame_bytes = manifest.wire.max_frame_bytes
        self.slots = threading.BoundedSemaphore(self.max_clients)
        self._pool: queue.Queue[PartRunner] = queue.Queue()
        for _ in range(max(1, self.workers)):
            runner = PartRunner(self.part, self.artifacts_dir, self.threads)
            runner.warm_up()
            self._pool.put(runner)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        _TCPServer.address_family = family
        try:
            self._server = _TCPServer((host, int(self.port)), _Handler)
        except OSError as exc:
            raise ConfigError(f"--port {self.port}: cannot listen on {host}:{self.port} ({exc.strerror}); "
                              "is another server using the port?") from None
        self._server.tail = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="dnnplan-tail-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every open connection, release the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._open_lock:
            for s in list(self._open):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve_forever(self) -> None:
        """Block until interrupted (Ctrl-C)."""
        try:
            while self._thread is not None and self._thread.is_alive():
                time.sleep(0.5)
        finally:
            self.stop()

    def __enter__(self) -> TailServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------- protocol
    def validate(self, frame: wire.Frame) -> None:
        rid = frame.request_id
        if frame.type != wire.REQUEST:
            raise wire.WireError(wire.E_TYPE, f"expected a request frame, got "
                                 f"{wire.MESSAGE_TYPES.get(frame.type, frame.type)}", rid)
        got, want = set(frame.tensors), set(self.request_specs)
        if got != want:
            missing, extra = sorted(want - got), sorted(got - want)
            raise wire.WireError(wire.E_TENSOR, f"request tensors do not match the manifest (missing "
                                 f"{missing[:3]}, unexpected {extra[:3]})", rid)
        for name, arr in frame.tensors.items():
            spec = self.request_specs[name]
            if arr.dtype.name != spec.dtype or list(arr.shape) != spec.shape:
                raise wire.WireError(wire.E_TENSOR, f"tensor {name!r}: got {arr.dtype.name}{list(arr.shape)}, "
                                     f"expected {spec.dtype}{spec.shape}", rid)

    def response(self, outs: dict[str, Value]) -> dict[str, np.ndarray]:
        """The response tensors: the tail's outputs as the wire expects them, or their top-k
        detections when the wire reduces an SSD head (:mod:`optimizer.runtime.detections`)."""
        assert self.manifest.wire is not None
        topk = self.manifest.wire.result
        if topk is not None:
            return topk_detections(outs[topk.boxes].real(), outs[topk.logits].real(), topk.k)
        return {t.name: convert_tensor(outs[t.name], t) for t in self.manifest.wire.response}

    def answer(self, payload: bytes) -> bytes:
        """The reply frame to one request frame's bytes (never raises)."""
        rid = 0
        try:
            frame = wire.decode(payload, max_tensors=len(self.request_specs) + 8)
            rid = frame.request_id
            self.validate(frame)
            env = {n: Value(a, self.request_specs[n].quantization) for n, a in frame.tensors.items()}
            runner = self._pool.get()
            try:
                t0 = time.perf_counter()
                outs = runner(env)
                dt = time.perf_counter() - t0
            finally:
                self._pool.put(runner)
            self.stats.add(requests=1, compute_s=dt)
            return wire.encode(wire.RESPONSE, rid, self.response(outs))
        except wire.WireError as exc:
            self.stats.add(errors=1)
            return wire.encode_error(exc.request_id or rid, exc.code, str(exc))
        except Exception as exc:  # an interpreter failure must not kill the connection thread
            self.stats.add(errors=1)
            return wire.encode_error(rid, wire.E_INTERNAL, f"{type(exc).__name__}: {exc}")
