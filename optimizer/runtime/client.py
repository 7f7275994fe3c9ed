"""Client side of the split: sends the crossing tensors to a :class:`TailServer`.

Bandwidth shaping is a token bucket on send (Turner's leaky/token-bucket shaper, as in Linux
``tc tbf``): the frame goes out in chunks and each chunk waits for its tokens, so upload time
emulates the plan's uplink; or a :class:`TracePacer` whose rate follows a bandwidth trace. Timeouts are explicit (connect and per-request); a request that
fails on a broken connection is retried on a fresh one, ``retries`` times.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, MeasurementError
from ..plan.manifest import Wire
from . import wire
from .server import check_loopback

CHUNK = 16 * 1024


class TokenBucket:
    """Rate ``rate_bps`` bits/s with a burst of ``burst_bytes``; :meth:`consume` blocks."""

    def __init__(self, rate_bps: float, burst_bytes: int = CHUNK) -> None:
        if rate_bps <= 0:
            raise ConfigError(f"--bandwidth {rate_bps}: expected a positive bit rate")
        self.rate = rate_bps / 8.0
        self.burst = float(burst_bytes)
        self.tokens = self.burst
        self.stamp = time.perf_counter()
        self._lock = threading.Lock()

    def consume(self, n: int) -> None:
        with self._lock:
            now = time.perf_counter()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            self.tokens -= n
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if wait > 0:
            time.sleep(wait)


class TracePacer:
    """Pacing that follows a bandwidth trace over time (Mahimahi's link rule, Netravali et al.,
    ATC 2015): each 1500-byte packet leaves at the next unused delivery opportunity of
    :class:`~optimizer.hardware.bandwidth.BandwidthTrace` at or after the moment it is queued;
    opportunities nobody used expire; the trace repeats. Time 0 is the pacer's creation (or
    :meth:`restart`). Same :meth:`consume` as :class:`TokenBucket`."""

    def __init__(self, trace: object) -> None:
        self.trace = trace
        self._lock = threading.Lock()
        self.restart()

    def restart(self, at_s: float = 0.0) -> None:
        """Start the trace again, at its time ``at_s`` (default 0) now, with an idle link."""
        self.t0 = time.perf_counter() - float(at_s)
        self.next_g = 0  # global index of the next usable opportunity
        self.residual = 0  # bytes left in the last packet sent

    def consume(self, n: int) -> None:
        from ..hardware.bandwidth import PACKET_BYTES

        with self._lock:
            now = time.perf_counter() - self.t0
            need = n - self.residual
            packets = -(-need // PACKET_BYTES) if need > 0 else 0
            self.residual = packets * PACKET_BYTES - need if need > 0 else -need
            if packets == 0:
                return
            g = max(self.next_g, int(self.trace.first_opportunity(now))) + packets - 1  # type: ignore[attr-defined]
            self.next_g = g + 1
            wait = float(self.trace.opportunity_s(g)) - now  # type: ignore[attr-defined]
        if wait > 0:
            time.sleep(wait)


def parse_server(address: str, token: bytes | None = None) -> tuple[str, int]:
    """``HOST:PORT`` (loopback only, unless a shared ``token`` is given) → (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ConfigError(f"--server {address!r}: expected HOST:PORT, e.g. 127.0.0.1:5599")
    return check_loopback(host.strip("[]"), "--server", token), int(port)


def parse_bandwidth(text: str | float | None) -> float | None:
    """``"10Mbps"`` → 1e7 bits/s (None stays None)."""
    if text is None:
        return None
    from ..hardware.units import parse_quantity

    try:
        rate = parse_quantity(text, "bitrate")
    except ValueError as exc:
        raise ConfigError(f"--bandwidth {text!r}: {exc}") from None
    if rate <= 0:
        raise ConfigError(f"--bandwidth {text!r}: expected a positive bit rate")
    return rate


@dataclass
class RequestStats:
    bytes_sent: int
    bytes_received: int
    upload_s: float
    round_trip_s: float
    attempts: int


class SplitClient:
    """A connection to a tail server; one request at a time (use one client per thread). With a
    shared ``token`` each connection begins with the HELLO exchange of fresh nonces
    (:mod:`optimizer.runtime.wire`), then every request is signed with the session key and every
    reply's signature checked with it, so a reply recorded on another connection does not verify."""

    def __init__(self, host: str, port: int, wire_spec: Wire, *, timeout_s: float = 10.0,
                 connect_timeout_s: float = 5.0, retries: int = 2,
                 bandwidth_bps: float | None = None, bandwidth_trace: object = None,
                 token: bytes | None = None) -> None:
        self.host, self.port = check_loopback(host, "--server", token), port
        self.token = token
        self.wire = wire_spec
        self.timeout_s, self.connect_timeout_s, self.retries = timeout_s, connect_timeout_s, retries
        if bandwidth_bps and bandwidth_trace is not None:
            raise ConfigError("--bandwidth and --bandwidth-trace both given; choose one uplink")
        self.bucket: TokenBucket | TracePacer | None = (
            TracePacer(bandwidth_trace) if bandwidth_trace is not None else
            TokenBucket(bandwidth_bps) if bandwidth_bps else None)
        self._sock: socket.socket | None = None
        self._key: bytes | None = None  # the connection's session key (with a token)
        self._next_id = 1
        self.reconnects = 0

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                s = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
            except OSError as exc:
                raise MeasurementError(f"cannot connect to the tail server {self.host}:{self.port} "
                                       f"({exc.strerror or exc}); start it with 'dnnplan serve'") from None
            s.settimeout(self.timeout_s)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = s
            if self.token is not None:
                self._key = self._hello(s, self.token)
        return self._sock

    def _hello(self, sock: socket.socket, token: bytes) -> bytes:
        """The HELLO exchange on a fresh connection: the session key (module docstring of
        :mod:`optimizer.runtime.wire`). A server's refusal raises :class:`MeasurementError`."""
        mine = wire.new_nonce()
        sock.sendall(wire.encode_hello(0, {wire.CLIENT_NONCE: mine}, token))
        payload = wire.read_frame(sock, self.wire.max_frame_bytes)
        if payload is None:
            raise ConnectionError("server closed the connection during the hello exchange")
        try:
            reply = wire.decode(payload, token=token)
        except wire.WireError as exc:
            raise self._refused(f": the hello exchange failed: {_refusal(payload) or exc}") from None
        if reply.type == wire.ERROR:
            raise self._refused(f" refused the session: {reply.error_text}")
        try:
            echoed, theirs = wire.hello_nonces(reply, wire.CLIENT_NONCE, wire.SERVER_NONCE)
        except wire.WireError as exc:
            raise self._refused(f": bad hello reply: {exc}") from None
        if echoed != mine:
            raise self._refused(": the hello reply answers another connection's nonce (a replayed frame)")
        return wire.session_key(token, mine, theirs)

    def _refused(self, what: str) -> MeasurementError:
        """Close the connection; the error naming the server and ``what`` went wrong."""
        self.close()
        return MeasurementError(f"tail server {self.host}:{self.port}{what}")

    def close(self) -> None:
        self._key = None
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> SplitClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, sock: socket.socket, data: bytes) -> float:
        t0 = time.perf_counter()
        if self.bucket is None:
            sock.sendall(data)
        else:
            view = memoryview(data)
            for i in range(0, len(view), CHUNK):
                chunk = view[i:i + CHUNK]
                self.bucket.consume(len(chunk))
                sock.sendall(chunk)
        return time.perf_counter() - t0

    def request(self, tensors: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], RequestStats]:
        """Send one request (tensors in the manifest's wire order) and wait for the response."""
        rid = self._next_id
        self._next_id += 1
        ordered = {t.name: tensors[t.name] for t in self.wire.request}
        last: Exception | None = None
        for attempt in range(1, self.retries + 2):
            try:
                sock = self._connect()
                frame = wire.encode(wire.REQUEST, rid, ordered, token=self._key)  # the connection's key
                t0 = time.perf_counter()
                upload = self._send(sock, frame)
                payload = wire.read_frame(sock, self.wire.max_frame_bytes)
                rtt = time.perf_counter() - t0
                if payload is None:
                    raise ConnectionError("server closed the connection")
            except (OSError, TimeoutError, wire.WireError) as exc:
                last = exc
                self.close()
                self.reconnects += 1
                continue
            try:
                reply = wire.decode(payload, token=self._key)
            except wire.WireError as exc:
                self.close()
                raise MeasurementError(f"tail server {self.host}:{self.port} replied to request {rid} with a bad "
                                       f"frame: {exc}") from None
            if reply.type == wire.ERROR:
                raise MeasurementError(f"tail server rejected request {rid}: {reply.error_text}")
            if reply.request_id != rid:
                self.close()
                raise MeasurementError(f"tail server answered request {reply.request_id}, expected {rid}")
            stats = RequestStats(len(frame), len(payload) + wire.LENGTH.size, upload, rtt, attempt)
            return reply.tensors, stats
        raise MeasurementError(f"tail server {self.host}:{self.port} did not answer request {rid} after "
                               f"{self.retries + 1} attempts (timeout {self.timeout_s} s): {last}")


def _refusal(payload: bytes) -> str | None:
    """An unsigned ERROR frame's text (a tokenless server refusing a signed hello), else None."""
    try:
        frame = wire.decode(payload)
    except wire.WireError:
        return None
    if frame.type != wire.ERROR:
        return None
    return frame.error_text
