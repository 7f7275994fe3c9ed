"""The split's tail on a real TCP server, speaking :mod:`optimizer.runtime.wire`.

One asyncio event loop (in a background thread) owns every connection: it reads frames, hands
complete ones to a pool of ``workers`` threads, each with its own interpreter, and writes the
replies. A connection costs a buffer, not a thread, so slow or idle peers cannot hold the server:

* **whole-frame deadline**: a frame must arrive complete within ``frame_deadline_s`` of its first
  byte (a timeout that restarted on every byte let a sender dribbling one byte per 20 s hold a
  connection for ever, the "Slowloris" attack); past it the connection gets a ``deadline`` ERROR
  frame and is closed;
* **idle timeout**: a connection that starts no frame within ``idle_timeout_s`` is closed;
* **bounded connections and buffers**: at most ``max_clients`` connections (a connection beyond
  is answered with a ``busy`` ERROR frame and closed), and at most ``max_buffered_bytes`` of
  frames being read at once (a frame's declared length is reserved before its body is read);
  both are freed by the deadline and the idle timeout, so slow senders hold them for seconds;
* **shared token** (optional, ``--token-file``): a connection begins with the HELLO exchange of
  fresh nonces (:mod:`optimizer.runtime.wire`), then every request must carry the HMAC-SHA256 of
  the connection's session key (checked in constant time before the request is parsed) and an
  id above the connection's last one, and every reply carries one; so a recorded request, replayed
  on another connection or again on the same one, is refused. An unsigned, badly signed or
  replayed request gets an ``unauthorized`` ERROR frame and the connection is closed. Binding
  beyond loopback requires a token.

Every request frame is validated against the manifest's ``wire.request`` (version, type, tensor
names, dtypes, shapes, byte counts, frame length); a bad frame is answered with an ERROR frame
and the connection stays usable, because the length prefix keeps the stream in sync. A frame
whose declared length exceeds ``wire.max_frame_bytes`` is answered and the connection closed
(its bytes are never read).
"""

from __future__ import annotations

import asyncio
import ipaddress
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, SchemaError
from ..plan.manifest import Manifest, read_manifest
from . import wire
from .detections import topk_detections
from .tensors import PartRunner, Value, convert_tensor


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_loopback(host: str, what: str = "--host", token: bytes | None = None) -> str:
    """``host`` when it is a loopback address (``localhost`` as 127.0.0.1), or any address when a
    shared ``token`` authenticates the peers; else a one-line :class:`ConfigError`."""
    if host == "localhost":
        return "127.0.0.1"
    if token is not None or is_loopback(host):
        return host
    raise ConfigError(f"{what} {host!r}: only loopback addresses (127.0.0.1, ::1, localhost) are allowed "
                      "without a shared token; give --token-file FILE (the same file on both ends) to use "
                      "another address")


@dataclass
class ServerStats:
    connections: int = 0
    requests: int = 0
    errors: int = 0
    rejected: int = 0
    deadlines: int = 0
    unauthorized: int = 0
    compute_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **kw: float) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)


@dataclass(eq=False)
class Session:
    """A connection's signing state under a shared token: the key its frames are signed with (the
    token until the HELLO exchange, then the session key) and the last request id answered."""

    key: bytes
    established: bool = False
    last_id: int = 0


@dataclass(eq=False)
class _Connection:
    """One client connection as the event loop sees it."""

    writer: asyncio.StreamWriter
    frame_started: float | None = None  # first byte of the frame being read, None while idle
    reserved: int = 0  # bytes of the frame being read, taken from the buffer budget
    session: Session | None = None  # with a token: the connection's signing state

    def drop(self) -> None:
        self.writer.transport.abort()


class TailServer:
    """Serve the tail part of an exported split (or joint) plan (module docstring).

    Parameters
    ----------
    artifacts_dir : path-like
        Directory written by ``dnnplan export`` (its SHA-256s are verified).
    host, port : str, int
        Address; loopback unless a ``token`` is given. Port 0 picks a free port (see
        :attr:`port` after :meth:`start`).
    workers : int
        Interpreters in the pool (concurrent inferences).
    threads : int, optional
        LiteRT threads per interpreter (default: the manifest's).
    max_clients : int
        Connections at once; more are answered with a ``busy`` ERROR frame.
    max_buffered_bytes : int, optional
        Bytes of request frames being read at once (default: 1 GiB, or 4 frames of the manifest's
        ``max_frame_bytes`` when more).
    idle_timeout_s : float
        A connection that starts no frame this long is closed.
    frame_deadline_s : float
        A frame must arrive complete within this long of its first byte.
    token : bytes, optional
        Shared secret (:func:`optimizer.runtime.wire.read_token`): requests must be signed with it.
    """

    def __init__(self, artifacts_dir: str | Path, host: str = "127.0.0.1", port: int = 0, *,
                 workers: int = 2, threads: int | None = None, max_clients: int = 256,
                 idle_timeout_s: float = 30.0, frame_deadline_s: float = 60.0,
                 token: bytes | None = None, max_buffered_bytes: int | None = None) -> None:
        self.artifacts_dir = Path(artifacts_dir)
        self.host, self.port = host, port
        self.workers, self.threads = workers, threads
        self.max_clients, self.idle_timeout_s, self.frame_deadline_s = max_clients, idle_timeout_s, frame_deadline_s
        self.token = token
        self.max_buffered_bytes = max_buffered_bytes
        self._buffered = 0
        self.stats = ServerStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[_Connection] = set()
        self._closed: asyncio.Event | None = None

    # ------------------------------------------------------------- lifecycle
    def start(self) -> TailServer:
        """Verify the artifacts, load the interpreters, bind and serve in a background thread."""
        host = check_loopback(self.host, token=self.token)
        if not 0 <= int(self.port) <= 65535:
            raise ConfigError(f"--port {self.port}: expected 0..65535")
        for name, value in (("--max-clients", self.max_clients), ("--workers", self.workers)):
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} {value!r}: expected an integer >= 1")
        for name, secs in (("--idle-timeout", self.idle_timeout_s), ("--frame-deadline", self.frame_deadline_s)):
            if not 0 < secs <= 3600:
                raise ConfigError(f"{name} {secs:g}: expected seconds in (0, 3600]")
        manifest = read_manifest(self.artifacts_dir)
        if manifest.wire is None or not manifest.server_parts:
            raise SchemaError(f"{self.artifacts_dir}: the export of a {manifest.kind} plan has no tail "
                              "part to serve; export a split or joint plan")
        self.manifest: Manifest = manifest
        self.part = manifest.server_parts[0]
        self.request_specs = {t.name: t for t in manifest.wire.request}
        self.max_frame_bytes = manifest.wire.max_frame_bytes
        if self.max_buffered_bytes is None:
            self.max_buffered_bytes = max(1 << 30, 4 * self.max_frame_bytes)
        self._pool: queue.Queue[PartRunner] = queue.Queue()
        for _ in range(self.workers):
            runner = PartRunner(self.part, self.artifacts_dir, self.threads)
            runner.warm_up()
            self._pool.put(runner)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="dnnplan-tail")
        self._loop = asyncio.new_event_loop()
        try:
            server = self._loop.run_until_complete(asyncio.start_server(
                self._serve, host, int(self.port), reuse_address=True, backlog=4 * self.max_clients))
        except OSError as exc:
            self._loop.close()
            self._executor.shutdown(wait=False)
            raise ConfigError(f"--port {self.port}: cannot listen on {host}:{self.port} ({exc.strerror}); "
                              "is another server using the port?") from None
        self._server = server
        self.port = server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self._loop.run_forever, name="dnnplan-tail-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every open connection, release the port."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
            self._executor.shutdown(wait=False)

    async def _shutdown(self) -> None:
        """Close the listener and every connection, and end their handlers."""
        self._server.close()
        for conn in list(self._conns):
            conn.drop()
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await self._server.wait_closed()

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

    # ------------------------------------------------------------- connections
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: frames in, replies out, until it closes, idles or misses a deadline."""
        loop = asyncio.get_running_loop()
        if len(self._conns) >= self.max_clients:
            self.stats.add(rejected=1)
            writer.write(wire.encode_error(0, wire.E_BUSY, f"server busy: {self.max_clients} clients connected",
                                           token=self.token))
            writer.close()
            return
        conn = _Connection(writer, session=Session(self.token) if self.token is not None else None)
        self._conns.add(conn)
        self.stats.add(connections=1)
        try:
            while await self._exchange(conn, reader, loop):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self._conns.discard(conn)
            writer.transport.abort()

    async def _exchange(self, conn: _Connection, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop) -> bool:
        """Read one frame within the deadline and answer it; False when the connection ends."""
        try:
            first = await asyncio.wait_for(reader.readexactly(1), self.idle_timeout_s)
        except (TimeoutError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            return False
        conn.frame_started = loop.time()
        try:
            payload = await asyncio.wait_for(self._rest_of_frame(first, reader, conn), self.frame_deadline_s)
        except wire.WireError as exc:  # too large or no room: answer, then drop the connection (its bytes unread)
            self.stats.add(errors=1, rejected=exc.code == wire.E_BUSY)
            await self._send(conn, wire.encode_error(0, exc.code, str(exc), token=_key(conn.session)))
            return False
        except (TimeoutError, asyncio.TimeoutError):
            self.stats.add(deadlines=1)
            await self._send(conn, wire.encode_error(0, wire.E_DEADLINE, f"the frame did not arrive within "
                                                     f"{self.frame_deadline_s:g} s of its first byte",
                                                     token=_key(conn.session)))
            return False
        finally:
            self._buffered -= conn.reserved
            conn.reserved = 0
        reply, keep = await loop.run_in_executor(self._executor, self.reply, payload, conn.session)
        await self._send(conn, reply)
        conn.frame_started = None
        return keep

    async def _rest_of_frame(self, first: bytes, reader: asyncio.StreamReader, conn: _Connection) -> bytes:
        """The frame after its first byte; its declared length is reserved from the buffer budget
        (``max_buffered_bytes``) before its body is read."""
        (length,) = wire.LENGTH.unpack(first + await reader.readexactly(wire.LENGTH.size - 1))
        if length > self.max_frame_bytes:
            raise wire.WireError(wire.E_TOO_LARGE, f"frame of {length} bytes exceeds the limit of "
                                                   f"{self.max_frame_bytes}")
        if self._buffered + length > self.max_buffered_bytes:
            raise wire.WireError(wire.E_BUSY, f"server busy: {self._buffered:,} bytes of frames in flight")
        self._buffered += length
        conn.reserved = length
        return await reader.readexactly(length)

    async def _send(self, conn: _Connection, data: bytes) -> None:
        """Write a reply; a peer that does not read it within the deadline is dropped."""
        conn.writer.write(data)
        try:
            await asyncio.wait_for(conn.writer.drain(), self.frame_deadline_s)
        except (TimeoutError, asyncio.TimeoutError):
            conn.drop()

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
        """The reply frame to one request frame's bytes on a connection of a tokenless server
        (never raises)."""
        return self.reply(payload)[0]

    def reply(self, payload: bytes, session: Session | None = None) -> tuple[bytes, bool]:
        """The reply frame to one frame's bytes on a connection with signing state ``session``
        (None without a token), and whether the connection stays open (not after an
        ``unauthorized`` one when the server has a token); never raises."""
        rid, version, key = 0, wire.VERSION, _key(session)
        try:
            frame = wire.decode(payload, max_tensors=len(self.request_specs) + 8, token=key)
            rid, version = frame.request_id, frame.version
            if session is not None:
                hello = self.authorize(frame, session)
                if hello is not None:
                    return hello, True
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
            return wire.encode(wire.RESPONSE, rid, self.response(outs), token=key, version=version), True
        except wire.WireError as exc:
            self.stats.add(errors=1, unauthorized=exc.code == wire.E_UNAUTHORIZED)
            reply = wire.encode_error(exc.request_id or rid, exc.code, str(exc), token=key, version=version)
            return reply, exc.code != wire.E_UNAUTHORIZED or self.token is None  # drop unauthenticated peers
        except Exception as exc:  # an interpreter failure must not end the server
            self.stats.add(errors=1)
            return wire.encode_error(rid, wire.E_INTERNAL, f"{type(exc).__name__}: {exc}", token=key,
                                     version=version), True

    @staticmethod
    def authorize(frame: wire.Frame, session: Session) -> bytes | None:
        """Under a shared token: the HELLO reply that opens ``session`` when ``frame`` is the
        connection's HELLO (its tag already checked with the token), else None after checking that
        the session is open and the request id is above the last one; raises :class:`WireError`
        (``unauthorized``) for a request before the HELLO, a second HELLO or a replayed id."""
        rid = frame.request_id
        if not session.established:
            if frame.type != wire.HELLO:
                raise wire.WireError(wire.E_UNAUTHORIZED, f"a {wire.MESSAGE_TYPES.get(frame.type, frame.type)} "
                                     "frame before the hello exchange: with a shared token, protocol version "
                                     f"{wire.SESSION_VERSION} begins each connection with a HELLO of fresh "
                                     "nonces (replay protection); update the client", rid)
            (client,) = wire.hello_nonces(frame, wire.CLIENT_NONCE)
            server = wire.new_nonce()
            reply = wire.encode_hello(rid, {wire.CLIENT_NONCE: client, wire.SERVER_NONCE: server}, session.key)
            session.key, session.established = wire.session_key(session.key, client, server), True
            return reply
        if frame.type == wire.HELLO:
            raise wire.WireError(wire.E_UNAUTHORIZED, "a second hello frame on the connection", rid)
        if rid <= session.last_id:
            raise wire.WireError(wire.E_UNAUTHORIZED, f"request id {rid} is not above the connection's last "
                                 f"one ({session.last_id}): a replayed frame", rid)
        session.last_id = rid
        return None


def _key(session: Session | None) -> bytes | None:
    """The key a connection's frames are signed with now (None without a token)."""
    return None if session is None else session.key
