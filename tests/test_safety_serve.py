"""``serve`` under slow and idle connections (a whole-frame deadline, bounded connections) and with a
shared token (a HELLO exchange per connection, then HMAC-SHA256 with its session key; required beyond
loopback; recorded frames cannot be replayed). The tail is an ONNX part of
the tiny network's split: no TensorFlow, and every deadline is short."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from optimizer.errors import ConfigError, MeasurementError
from optimizer.runtime import wire


@pytest.fixture(scope="module")
def split_art(tmp_path_factory, tiny_onnx):
    from optimizer.cli import main
    from optimizer.plan.manifest import read_manifest

    d = tmp_path_factory.mktemp("serve")
    plan, art = d / "split.json", d / "art"
    assert main(["--quiet", "split", str(tiny_onnx), "--device", "galaxy_j6", "--network", "wifi_10",
                 "--interior-only", "--out", str(plan)]) == 0
    assert main(["--quiet", "export", str(plan), "--out", str(art)]) == 0
    m = read_manifest(art)
    rng = np.random.default_rng(0)
    request = {t.name: rng.standard_normal(t.shape).astype(t.dtype) for t in m.wire.request}
    return {"plan": plan, "art": art, "manifest": m, "request": request}


@pytest.fixture
def token_file(tmp_path):
    f = tmp_path / "token"
    f.write_text("0123456789abcdef0123456789abcdef\n")
    return f


def _hold(port: int, stop: threading.Event, dribble: bool) -> None:
    """A hostile peer until ``stop``: a slow sender (one byte of a frame every 0.1 s) or an idle
    connection; reconnects whenever the server closes it."""
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            time.sleep(0.05)
            continue
        try:
            s.settimeout(0.1)
            data = b"\x10\x00\x00\x00" + b"D" * 16  # a 16-byte frame, never finished in time
            for i in range(10_000):
                if stop.is_set():
                    break
                if dribble and i < len(data):
                    s.sendall(data[i:i + 1])
                try:
                    if s.recv(1 << 16) == b"":
                        break
                except socket.timeout:
                    pass
        except OSError:
            pass
        finally:
            s.close()


def test_slow_and_idle_connections_cannot_hold_the_server(split_art):
    """64 slow senders and 64 idle connections, reconnecting whenever closed: a well-behaved
    client is still answered within 1 s. Before: 32 slots, an idle timeout restarted by every byte,
    and the client was refused ('busy')."""
    from optimizer.runtime import SplitClient, TailServer

    m = split_art["manifest"]
    srv = TailServer(split_art["art"], "127.0.0.1", 0, workers=1, frame_deadline_s=0.5, idle_timeout_s=1.5).start()
    stop = threading.Event()
    peers = [threading.Thread(target=_hold, args=(srv.port, stop, i < 64), daemon=True) for i in range(128)]
    try:
        for t in peers:
            t.start()
        time.sleep(1.0)  # every slot taken, the first slow frames past their deadline
        took = []
        with SplitClient("127.0.0.1", srv.port, m.wire, timeout_s=5, retries=1) as client:
            for _ in range(8):
                t0 = time.perf_counter()
                outs, _ = client.request(split_art["request"])
                took.append(time.perf_counter() - t0)
                assert set(outs) == {t.name for t in m.wire.response}
                time.sleep(0.1)
    finally:
        stop.set()
        for t in peers:
            t.join(timeout=5)
        srv.stop()
    assert max(took) < 1.0, took
    assert srv.stats.deadlines >= 64 and srv.stats.requests == 8


def test_with_a_token_unsigned_and_badly_signed_requests_are_refused(split_art, token_file):
    from optimizer.runtime import SplitClient, TailServer
    from optimizer.runtime.wire import read_token

    m, token = split_art["manifest"], read_token(token_file)
    with TailServer(split_art["art"], "127.0.0.1", 0, workers=1, token=token) as srv:
        for key in (None, b"a-different-token-of-32-bytes-xx"):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
                s.sendall(wire.encode(wire.REQUEST, 7, split_art["request"], token=key))
                reply = wire.decode(wire.read_frame(s, 1 << 20), token=token)
                assert reply.type == wire.ERROR and reply.error_code == wire.E_UNAUTHORIZED, reply
                assert wire.read_frame(s, 1 << 20) is None  # and the connection is closed
        with SplitClient("127.0.0.1", srv.port, m.wire, token=token) as client:
            outs, _ = client.request(split_art["request"])
        with SplitClient("127.0.0.1", srv.port, m.wire) as client, \
                pytest.raises(MeasurementError, match="signed but this end has no token"):
            client.request(split_art["request"])
    assert srv.stats.requests == 1 and srv.stats.unauthorized == 3


def test_beyond_loopback_a_token_is_required(split_art, token_file, run_cli):
    from optimizer.runtime import TailServer, parse_server
    from optimizer.runtime.wire import read_token

    r = run_cli("serve", "--artifacts", split_art["art"], "--host", "0.0.0.0", "--port", "0")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--host '0.0.0.0': only loopback addresses" in r.stderr and "--token-file" in r.stderr, r.stderr
    with pytest.raises(ConfigError, match="--server '10.0.0.5'.*--token-file"):
        parse_server("10.0.0.5:5599")
    token = read_token(token_file)
    assert parse_server("10.0.0.5:5599", token) == ("10.0.0.5", 5599)
    with TailServer(split_art["art"], "0.0.0.0", 0, workers=1, token=token) as srv:
        assert srv.port > 0
    short = token_file.with_name("short")
    short.write_text("secret\n")
    r = run_cli("serve", "--artifacts", split_art["art"], "--token-file", short)
    assert r.exit_code == 2 and "the token has 6 bytes; give at least 16" in r.stderr, r.stderr


def test_run_signs_its_requests_with_the_token_file(split_art, token_file, run_cli):
    from optimizer.runtime import TailServer
    from optimizer.runtime.wire import read_token

    with TailServer(split_art["art"], "127.0.0.1", 0, workers=1, token=read_token(token_file)) as srv:
        args = ("run", split_art["plan"], "--artifacts", split_art["art"], "--server", f"127.0.0.1:{srv.port}",
                "--frames", "3", "--json")
        signed = run_cli(*args, "--token-file", token_file)
        unsigned = run_cli(*args)
    assert signed.exit_code == 0, signed.stderr
    assert unsigned.exit_code == 2 and "no token" in unsigned.stderr, unsigned.stderr
    assert srv.stats.requests >= 3 and srv.stats.unauthorized == 1


def test_version_1_peers_are_still_answered_and_unknown_versions_named(split_art):
    from optimizer.runtime import TailServer

    with TailServer(split_art["art"], "127.0.0.1", 0, workers=1) as srv, \
            socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(wire.encode(wire.REQUEST, 3, split_art["request"], version=1))
        reply = wire.decode(wire.read_frame(s, 1 << 20))
        assert reply.type == wire.RESPONSE and reply.version == 1
        frame = bytearray(wire.encode(wire.REQUEST, 4, split_art["request"]))
        frame[8] = 9  # the version byte (after the length and the magic)
        s.sendall(bytes(frame))
        reply = wire.decode(wire.read_frame(s, 1 << 20))
        assert reply.error_code == wire.E_VERSION and "version 9 is not supported; this end speaks versions 1, 2, 3" \
            in reply.error


def _session(port: int, token: bytes) -> tuple[socket.socket, bytes]:
    """A raw connection after the HELLO exchange, and its session key (what SplitClient does)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    mine = wire.new_nonce()
    s.sendall(wire.encode_hello(0, {wire.CLIENT_NONCE: mine}, token))
    hello = wire.decode(wire.read_frame(s, 1 << 20), token=token)
    echoed, theirs = wire.hello_nonces(hello, wire.CLIENT_NONCE, wire.SERVER_NONCE)
    assert echoed == mine
    return s, wire.session_key(token, mine, theirs)


def test_a_recorded_request_cannot_be_replayed(split_art, token_file):
    """A signed request recorded on one connection is refused on another (its session key differs)
    and when sent again on the same one (its id is not above the last); a version-2 client that
    signs with the token itself is told to update. Before, every replay was answered."""
    from optimizer.runtime import TailServer
    from optimizer.runtime.wire import read_token

    token = read_token(token_file)
    with TailServer(split_art["art"], "127.0.0.1", 0, workers=1, token=token) as srv:
        s, key = _session(srv.port, token)
        with s:
            recorded = wire.encode(wire.REQUEST, 5, split_art["request"], token=key)
            s.sendall(recorded)
            reply = wire.decode(wire.read_frame(s, 1 << 20), token=key)
            assert reply.type == wire.RESPONSE and reply.request_id == 5
            first = reply.tensors
            s.sendall(recorded)  # the same frame again on the same connection
            reply = wire.decode(wire.read_frame(s, 1 << 20), token=key)
            assert reply.error_code == wire.E_UNAUTHORIZED and "not above the connection's last one (5)" in reply.error
            assert wire.read_frame(s, 1 << 20) is None
        s, key2 = _session(srv.port, token)
        with s:
            assert key2 != key
            s.sendall(recorded)  # replayed on a fresh connection
            reply = wire.decode(wire.read_frame(s, 1 << 20), token=key2)
            assert reply.error_code == wire.E_UNAUTHORIZED and "HMAC does not match" in reply.error
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(wire.encode(wire.REQUEST, 1, split_art["request"], token=token, version=2))
            reply = wire.decode(wire.read_frame(s, 1 << 20), token=token)
            assert reply.error_code == wire.E_UNAUTHORIZED and reply.version == 2
            assert "before the hello exchange" in reply.error and "update the client" in reply.error
    assert srv.stats.requests == 1 and srv.stats.unauthorized == 3
    assert all(np.array_equal(v, first[k]) for k, v in first.items())


def test_a_client_refuses_a_reply_recorded_on_another_connection(split_art, token_file):
    """A fake server that plays back a HELLO and a RESPONSE recorded from the real one: the client's
    fresh nonce is not echoed, so it refuses before sending its request."""
    from optimizer.runtime import SplitClient, TailServer
    from optimizer.runtime.wire import read_token

    token, m = read_token(token_file), split_art["manifest"]
    with TailServer(split_art["art"], "127.0.0.1", 0, workers=1, token=token) as srv:
        s, key = _session(srv.port, token)
        with s:
            s.sendall(wire.encode(wire.REQUEST, 1, split_art["request"], token=key))
            response = wire.read_frame(s, 1 << 20)
    hello = wire.encode_hello(0, {wire.CLIENT_NONCE: wire.new_nonce(), wire.SERVER_NONCE: wire.new_nonce()}, token)
    with socket.create_server(("127.0.0.1", 0)) as lsock:
        def play_back() -> None:
            conn, _ = lsock.accept()
            with conn:
                wire.read_frame(conn, 1 << 20)
                conn.sendall(hello)
                conn.sendall(wire.LENGTH.pack(len(response)) + response)
                time.sleep(0.5)

        t = threading.Thread(target=play_back, daemon=True)
        t.start()
        with SplitClient("127.0.0.1", lsock.getsockname()[1], m.wire, token=token, timeout_s=5) as client, \
                pytest.raises(MeasurementError, match="answers another connection's nonce"):
            client.request(split_art["request"])
        t.join(timeout=5)
