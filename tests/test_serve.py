"""Split serving: wire format, the tail server under corrupt and concurrent traffic, the client.

One FP32 split of MobileNetV2 (64 px) cut inside inverted residual block 2 (two crossing
tensors: the skip and the expanded activation) is exported once for the module, with the
single-file FP32 export of the same weights as the reference. Everything
runs on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import numpy as np
import pytest

from optimizer.errors import ConfigError, MeasurementError
from optimizer.runtime import wire

SIZE = 64
CUT = 20  # after block_2_expand_relu: crosses block_1_project_BN:0 and block_2_expand_relu:0


# ------------------------------------------------------------------ wire format (no TensorFlow)
def test_wire_roundtrip_keeps_names_dtypes_shapes_and_bytes():
    rng = np.random.default_rng(0)
    tensors = {"a:0": rng.standard_normal((1, 3, 4)).astype(np.float32),
               "b:1:0": rng.integers(-128, 127, (1, 5), dtype=np.int8)}
    frame = wire.encode(wire.REQUEST, 77, tensors)
    (length,) = struct.unpack("<I", frame[:4])
    assert length == len(frame) - 4
    back = wire.decode(frame[4:])
    assert back.type == wire.REQUEST and back.request_id == 77
    assert list(back.tensors) == ["a:0", "b:1:0"]
    for k, v in tensors.items():
        assert back.tensors[k].dtype == v.dtype and np.array_equal(back.tensors[k], v)


@pytest.mark.parametrize("mutate, code", [
    (lambda f: b"XXXX" + f[4:], wire.E_MAGIC),
    (lambda f: f[:4] + bytes([9]) + f[5:], wire.E_VERSION),
    (lambda f: f[:5] + bytes([7]) + f[6:], wire.E_TYPE),
    (lambda f: f + b"\0", wire.E_MALFORMED),
    (lambda f: f[:-3], wire.E_MALFORMED),
    (lambda f: f[:10], wire.E_MALFORMED),
])
def test_wire_rejects_corrupt_frames_with_the_right_code(mutate, code):
    frame = wire.encode(wire.REQUEST, 5, {"x:0": np.ones((1, 4), np.float32)})[4:]
    with pytest.raises(wire.WireError) as exc:
        wire.decode(mutate(frame))
    assert exc.value.code == code


def test_wire_rejects_byte_count_that_disagrees_with_shape():
    frame = bytearray(wire.encode(wire.REQUEST, 5, {"x:0": np.ones((1, 4), np.float32)})[4:])
    off = wire.HEADER.size + 2 + 3 + 2 + 8  # name len, name, dtype+ndim, dims
    frame[off:off + 8] = struct.pack("<Q", 12)
    with pytest.raises(wire.WireError) as exc:
        wire.decode(bytes(frame))
    assert exc.value.code == wire.E_TENSOR and "needs 16" in str(exc.value)


def test_only_loopback_addresses_are_accepted():
    from optimizer.runtime import check_loopback, parse_server

    assert parse_server("127.0.0.1:5599") == ("127.0.0.1", 5599)
    assert check_loopback("::1") == "::1"
    for bad in ("10.0.0.1:80", "0.0.0.0:5599", "example.com:80"):
        with pytest.raises(ConfigError, match="loopback"):
            parse_server(bad)
    with pytest.raises(ConfigError, match="HOST:PORT"):
        parse_server("127.0.0.1")


def test_token_bucket_paces_to_the_rate():
    from optimizer.runtime import TokenBucket

    bucket = TokenBucket(8e6, burst_bytes=1000)  # 1 MB/s
    t0 = time.perf_counter()
    for _ in range(100):
        bucket.consume(1000)  # 100 kB: ~0.1 s minus the burst
    assert time.perf_counter() - t0 >= 0.09  # pacing is a lower bound: it may not send faster


def test_client_times_out_and_gives_up_after_retries():
    """A server that accepts but never answers: explicit timeout, retries, then one error."""
    from optimizer.plan.manifest import TensorInfo, Wire
    from optimizer.runtime import SplitClient

    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    spec = Wire(max_frame_bytes=1 << 16, request=[TensorInfo(name="x:0", shape=[1, 2], dtype="float32")],
                response=[], request_bytes=8)
    try:
        client = SplitClient("127.0.0.1", lsock.getsockname()[1], spec, timeout_s=0.2, retries=1)
        t0 = time.perf_counter()
        with pytest.raises(MeasurementError, match="after 2 attempts"):
            client.request({"x:0": np.zeros((1, 2), np.float32)})
        assert time.perf_counter() - t0 > 0.35  # it waited both timeouts before giving up
        assert client.reconnects == 2
    finally:
        lsock.close()


# ------------------------------------------------------------------ with a real export
@pytest.fixture(scope="module")
def split_export(tmp_path_factory):
    from optimizer.plan import write_plan
    from optimizer.plan.export import export_plan
    from optimizer.plan.keras_model import load_plan_model
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.manifest import read_manifest
    from _deploy_cache import single_file_fp32

    from optimizer.runtime import PartRunner, Value

    d = tmp_path_factory.mktemp("split")
    plan = plan_for_boundaries("mobilenet_v2", [CUT], kind="split", dtype="fp32", variant={"input_size": SIZE})
    plan_file = write_plan(plan, d / "plan.json")
    keras_model, _, _ = load_plan_model(plan, seed=0)  # built once: exported, and the float reference
    export_plan(plan, d / "art", model=keras_model, seed=0)
    manifest = read_manifest(d / "art")
    x = np.random.default_rng(3).uniform(-1, 1, (8, SIZE, SIZE, 3)).astype(np.float32)
    keras_out = np.asarray(keras_model(x, training=False))
    reference = single_file_fp32("mobilenet_v2", SIZE, x)
    head = PartRunner(manifest.part("head"), d / "art")
    requests = [{k: v.array for k, v in head({manifest.inputs[0].name: Value(x[i:i + 1])}).items()}
                for i in range(len(x))]
    return {"plan": plan, "plan_file": plan_file, "dir": d / "art", "manifest": manifest, "x": x,
            "reference": reference, "keras": keras_out, "requests": requests}


@pytest.fixture
def server(split_export):
    from optimizer.runtime import TailServer

    srv = TailServer(split_export["dir"], "127.0.0.1", 0, workers=2, idle_timeout_s=5).start()
    yield srv
    srv.stop()


@pytest.mark.slow
def test_split_export_has_two_crossing_tensors_on_the_wire(split_export):
    m = split_export["manifest"]
    assert [p.name for p in m.parts] == ["head", "tail"]
    assert [t.name for t in m.wire.request] == ["block_1_project_BN:0", "block_2_expand_relu:0"]
    assert m.wire.request_bytes == split_export["plan"].split.bytes


@pytest.mark.slow
def test_head_plus_tail_over_the_socket_equals_the_full_model(split_export, server):
    from optimizer.runtime import run_plan

    rep = run_plan(split_export["plan"], split_export["dir"], frames=8, input=split_export["x"],
                   server=("127.0.0.1", server.port), keep_outputs=True)
    out = rep.outputs[split_export["manifest"].outputs[0].name]
    ref = split_export["reference"]
    assert np.abs(ref).max() > 0.1  # a live signal, not vanishing activations
    assert np.abs(out - ref).max() <= 1e-5  # vs the single-file FP32 TFLite model
    keras_out = split_export["keras"]
    assert np.abs(out - keras_out).max() <= 1e-3 * np.abs(keras_out).max()
    assert rep.wire["bytes_per_frame"] > split_export["manifest"].wire.request_bytes
    assert server.stats.requests >= 8


def _corrupt_frames(valid: bytes, rng: np.random.Generator, n: int):
    """(frame bytes, expectation) pairs: 'error' = an ERROR reply and the connection stays,
    'close' = the server may answer once and must drop the connection."""
    body = valid[4:]
    for i in range(n):
        kind = i % 10
        if kind == 0:
            junk = rng.integers(0, 256, int(rng.integers(0, 200)), dtype=np.uint8).tobytes()
            yield struct.pack("<I", len(junk)) + junk, "error"
        elif kind == 1:
            b = bytearray(body)
            for _ in range(int(rng.integers(1, 8))):
                b[int(rng.integers(0, 40))] = int(rng.integers(0, 256))  # header and first tensor header
            yield struct.pack("<I", len(b)) + bytes(b), "any"
        elif kind == 2:
            yield struct.pack("<I", len(body) - 7) + body[:-7], "error"
        elif kind == 3:
            yield struct.pack("<I", len(body) + 5) + body + b"extra", "error"
        elif kind == 4:
            yield struct.pack("<I", 0xFFFFFFF0) + body[:100], "close"
        elif kind == 5:
            yield valid[: int(rng.integers(1, len(valid) - 1))], "truncate"
        elif kind == 6:
            yield wire.encode(wire.RESPONSE, i, {}), "error"
        elif kind == 7:
            yield wire.encode(wire.REQUEST, i, {"nope:0": np.zeros((1, 2), np.float32)}), "error"
        elif kind == 8:
            yield wire.encode(wire.REQUEST, i, {"x": np.zeros((1, 3), np.int64)}), "error"
        else:
            b = bytearray(body)
            b[4] = 9  # version 9 (this end speaks 1, 2 and 3)
            yield struct.pack("<I", len(b)) + bytes(b), "error"


@pytest.mark.slow
def test_server_survives_1000_corrupt_frames_and_truncated_connections(split_export, server):
    import psutil

    from optimizer.runtime import SplitClient

    m = split_export["manifest"]
    valid = wire.encode(wire.REQUEST, 1, split_export["requests"][0])
    rng = np.random.default_rng(11)
    proc = psutil.Process()
    counts = {"error_replies": 0, "closed": 0}
    rss = []

    def connect():
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        return s

    sock = connect()
    for i, (frame, expect) in enumerate(_corrupt_frames(valid, rng, 1000)):
        if i == 100:
            rss.append(proc.memory_info().rss)
        if expect == "truncate":
            sock.sendall(frame)
            sock.close()
            counts["closed"] += 1
            sock = connect()
            continue
        sock.sendall(frame)
        try:
            payload = wire.read_frame(sock, 1 << 20)
        except OSError:
            payload = None
        if payload is None:
            assert expect in ("close", "any"), f"frame {i} ({expect}) closed the connection"
            counts["closed"] += 1
            sock.close()
            sock = connect()
            continue
        reply = wire.decode(payload)
        if reply.type == wire.ERROR:
            counts["error_replies"] += 1
            if expect == "close":
                assert reply.error_code == wire.E_TOO_LARGE
                try:  # then the server hangs up (FIN, or RST because our bytes were unread)
                    assert wire.read_frame(sock, 1 << 20) is None
                except OSError:
                    pass
                sock.close()
                sock = connect()
        else:
            assert expect == "any", f"frame {i} ({expect}) got a {reply.type} reply"
    sock.close()
    rss.append(proc.memory_info().rss)
    assert counts["error_replies"] >= 700
    # bound: 1000 bad frames may not grow the process by more than 32 MiB
    assert rss[1] - rss[0] < 32 * 2**20, f"RSS grew by {(rss[1] - rss[0]) / 2**20:.1f} MiB"
    # and the server still answers a valid request correctly
    with SplitClient("127.0.0.1", server.port, m.wire) as client:
        outs, _ = client.request(split_export["requests"][0])
    ref = split_export["reference"][0:1]
    assert np.abs(outs[m.outputs[0].name] - ref).max() <= 1e-5


@pytest.mark.slow
def test_four_concurrent_clients_250_requests_each_all_correct(split_export, server):
    from optimizer.runtime import SplitClient

    m = split_export["manifest"]
    reqs, ref = split_export["requests"], split_export["reference"]
    out_name = m.outputs[0].name
    bad: list[str] = []
    done = [0] * 4

    def client(c: int) -> None:
        with SplitClient("127.0.0.1", server.port, m.wire, timeout_s=30) as cl:
            for r in range(250):
                i = (c * 3 + r) % len(reqs)
                outs, _ = cl.request(reqs[i])
                if np.abs(outs[out_name] - ref[i:i + 1]).max() > 1e-5:
                    bad.append(f"client {c} request {r}")
                done[c] += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert done == [250] * 4 and not bad


@pytest.mark.slow
def test_client_reconnects_after_the_server_restarts(split_export, server):
    from optimizer.runtime import SplitClient, TailServer

    m = split_export["manifest"]
    port = server.port
    client = SplitClient("127.0.0.1", port, m.wire, timeout_s=5, retries=2)
    client.request(split_export["requests"][1])
    server.stop()
    with TailServer(split_export["dir"], "127.0.0.1", port, workers=1):
        outs, st = client.request(split_export["requests"][1])
    client.close()
    assert client.reconnects >= 1 and st.attempts >= 2
    assert np.abs(outs[m.outputs[0].name] - split_export["reference"][1:2]).max() <= 1e-5


@pytest.mark.slow
def test_cli_run_split_against_server_with_bandwidth_shaping(split_export, server, run_cli):
    rate = 20e6
    res = run_cli("run", split_export["plan_file"], "--artifacts", split_export["dir"], "--server",
                  f"127.0.0.1:{server.port}", "--frames", "4", "--bandwidth", "20Mbps", "--json")
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)
    sent = rep["wire"]["bytes_per_frame"]
    assert sent > split_export["manifest"].wire.request_bytes
    assert rep["wire"]["upload_s_p50"] >= 0.8 * (sent - 16384) * 8 / rate
    assert rep["frames"] == 4 and rep["latency_s"]["p50"] >= rep["wire"]["upload_s_p50"]


@pytest.mark.slow
def test_cli_serve_refuses_a_manifest_naming_a_processor_its_device_lacks(split_export, run_cli, tmp_path):
    """Serve checks the export's device parts against its device before listening."""
    import shutil

    art = tmp_path / "art"
    shutil.copytree(split_export["dir"], art)
    doc = json.loads((art / "manifest.json").read_text())
    k = next(i for i, p in enumerate(doc["parts"]) if p["location"] == "device")
    doc["parts"][k]["processor"] = "quantum"
    (art / "manifest.json").write_text(json.dumps(doc))
    res = run_cli("serve", "--artifacts", art, "--port", "0")
    assert res.exit_code == 2
    assert f"parts[{k}].processor 'quantum' is not a processor of device 'host'" in res.stderr.replace("\n", "")


@pytest.mark.slow
def test_cli_serve_port_in_use_is_one_line_exit_2(split_export, run_cli):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    try:
        res = run_cli("serve", "--artifacts", split_export["dir"], "--port", blocker.getsockname()[1])
    finally:
        blocker.close()
    assert res.exit_code == 2
    assert "in use" in res.stderr or "cannot listen" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_server_refuses_non_loopback_hosts(split_export):
    from optimizer.runtime import TailServer

    with pytest.raises(ConfigError, match="loopback"):
        TailServer(split_export["dir"], "0.0.0.0", 0).start()


def test_trace_pacer_follows_the_trace_over_time(tmp_path):
    """An outage at the start holds the first packet back; afterwards the trace's rate paces."""
    from optimizer.hardware.bandwidth import read_trace
    from optimizer.runtime.client import TracePacer

    trace_file = tmp_path / "outage.csv"
    trace_file.write_text("t_s,mbps\n0,0\n0.15,8\n10,8\n")
    pacer = TracePacer(read_trace(trace_file))
    t0 = time.perf_counter()
    pacer.consume(1500)
    assert time.perf_counter() - t0 >= 0.149  # nothing leaves during the outage
    t1 = time.perf_counter()
    for _ in range(10):
        pacer.consume(10_000)  # 100 kB at 1 MB/s
    assert time.perf_counter() - t1 >= 0.098
    pacer.restart()
    assert pacer.next_g == 0 and pacer.residual == 0
    # restart at a trace time: past the outage, 15 kB at 1 MB/s leaves within ~15 ms, as the model says
    pacer.restart(at_s=0.2)
    t2 = time.perf_counter()
    pacer.consume(15_000)
    took = time.perf_counter() - t2
    model = pacer.trace.transfer_s(np.asarray([15_000]), np.asarray([0.2]))[0, 0]
    assert 0.010 <= model <= 0.016 and model - 0.002 <= took < model + 0.02


@pytest.mark.slow
def test_cli_run_replays_a_bandwidth_trace(split_export, server, run_cli, tmp_path):
    trace_file = tmp_path / "up.csv"
    trace_file.write_text("t_s,mbps\n0,40\n0.3,5\n0.6,40\n")
    res = run_cli("run", split_export["plan_file"], "--artifacts", split_export["dir"], "--server",
                  f"127.0.0.1:{server.port}", "--frames", "6", "--fps", "20", "--bandwidth-trace", trace_file,
                  "--json")
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)
    w, lat = rep["wire"], rep["latency_s"]
    assert w["bandwidth_trace"] == "up" and w["trace_mean_bps"] == pytest.approx(28.3e6, rel=0.01)
    assert w["upload_s_p95"] >= w["upload_s_p50"] >= 0.8 * (w["bytes_per_frame"] - 16384) * 8 / 40e6
    assert lat["p95"] >= lat["p50"] >= w["upload_s_p50"]
    table = run_cli("run", split_export["plan_file"], "--artifacts", split_export["dir"], "--server",
                    f"127.0.0.1:{server.port}", "--frames", "3", "--bandwidth-trace", trace_file)
    assert table.exit_code == 0 and "trace up replayed" in table.stdout and "p95" in table.stdout
    both = run_cli("run", split_export["plan_file"], "--artifacts", split_export["dir"], "--bandwidth", "5Mbps",
                   "--bandwidth-trace", trace_file)
    assert both.exit_code == 2 and "--bandwidth and --bandwidth-trace both given" in both.stderr


# ------------------------------------------------------------------ server-side top-k of an SSD head
@pytest.mark.slow
def test_ssd_split_with_server_topk_sends_the_best_anchors_of_the_full_model(tmp_path):
    """FP32 split of SSD MobileNetV2 FPNLite at 128 px (2,046 anchors, 91 classes; its predictor
    convs are shared across the 5 levels): the server sends its 100 best anchors (2,800 B instead
    of 2046 x 95 x 4 = 777 kB); they are the full network's outputs reduced the same way."""
    from optimizer.plan import Plan, write_plan
    from optimizer.plan.export import export_plan
    from optimizer.plan.keras_model import load_plan_model
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.manifest import read_manifest
    from optimizer.runtime import TailServer, run_plan
    from optimizer.runtime.check import compare_detections
    from optimizer.runtime.detections import ANCHOR, BOX, CLASS, SCORE, topk_detections

    raw = plan_for_boundaries("ssd_mobilenet_v2_fpnlite", [40], kind="split", dtype="fp32", variant={"input_size": 128})
    plan = Plan.model_validate({**raw.model_dump(), "split": {**raw.split.model_dump(), "result": "topk"}})
    write_plan(plan, tmp_path / "plan.json")
    # the network the parts are cut from (seed-0 weights, batch norms re-estimated) is built once:
    # exported here, and it gives the full network's outputs below
    keras_model, op_graph, _ = load_plan_model(plan, seed=0)
    export_plan(plan, tmp_path / "art", model=keras_model, seed=0)
    m = read_manifest(tmp_path / "art")
    assert m.wire.result is not None and m.wire.result.k == 100
    assert [t.name for t in m.wire.response] == [ANCHOR, BOX, SCORE, CLASS]
    assert sum(int(np.prod(t.shape)) * 4 for t in m.wire.response) == 2800
    assert [t.shape for t in m.outputs] == [[1, 2046, 4], [1, 2046, 91]]  # the network's outputs stay listed
    x = np.random.default_rng(5).uniform(-1, 1, (4, 128, 128, 3)).astype(np.float32)
    with TailServer(tmp_path / "art", "127.0.0.1", 0, workers=1) as srv:
        rep = run_plan(plan, tmp_path / "art", frames=4, input=x, server=("127.0.0.1", srv.port), keep_outputs=True)
    assert sorted(rep.outputs) == sorted([ANCHOR, BOX, CLASS, SCORE])
    assert 2800 < rep.wire["response_bytes_per_frame"] < 3200  # 2,800 B of tensors plus the frame's headers
    # the full network: the Keras model the parts were cut from; SSD parts agreeing with the
    # single-file export is tests/test_kernel_view.py's and tests/test_export.py's check
    ref = dict(zip(op_graph.outputs, keras_model.predict(x, batch_size=len(x), verbose=0), strict=True))
    boxes, logits = ref[m.wire.result.boxes], ref[m.wire.result.logits]
    for i in range(len(x)):
        want = topk_detections(boxes[i], logits[i], 100)
        got = {k: v[i][None] for k, v in rep.outputs.items()}
        assert int(got[ANCHOR][0, 0]) == int(want[ANCHOR][0, 0]) and int(got[CLASS][0, 0]) == int(want[CLASS][0, 0])
        overlap = len(set(got[ANCHOR][0].astype(int).tolist()) & set(want[ANCHOR][0].tolist()))
        assert overlap >= 98  # near-ties at the 100th place may swap between FP32 kernels
        assert np.allclose(got[SCORE], want[SCORE], atol=1e-4) and np.all(np.diff(got[SCORE][0]) <= 0)
        j = int(got[ANCHOR][0, 0])
        assert np.allclose(got[BOX][0, 0], boxes[i].reshape(-1, 4)[j], atol=1e-4)
        assert np.isclose(got[SCORE][0, 0], logits[i].reshape(-1, 91)[j, 1:].max(), atol=1e-4)
    check = compare_detections(rep.outputs, boxes, logits, 100)
    assert check.top1_agreement == 1.0 and check.max_abs_diff < 1e-4
