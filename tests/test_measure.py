"""Host measurement (onnxruntime per layer, LiteRT whole model) and the external protocol."""

from __future__ import annotations

import json
import re
import shlex
import sys

import numpy as np
import pytest

from optimizer.errors import ConfigError, MeasurementError
from optimizer.measure import ExternalMeasurer

PY = shlex.quote(sys.executable)
RUNNER = f"{PY} -m optimizer.measure.reference_runner"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A small Keras model saved as .keras, its LayerGraph and float .tflite."""
    from optimizer.graph import load_graph
    from optimizer.graph.convert import keras_to_tflite
    from optimizer.lazy import keras as _keras

    keras = _keras()
    d = tmp_path_factory.mktemp("tiny")
    inp = keras.Input((48, 48, 3), name="input")
    x = keras.layers.Conv2D(16, 3, padding="same", name="c1")(inp)
    x = keras.layers.BatchNormalization(name="bn1")(x)
    x = keras.layers.ReLU(name="r1")(x)
    x = keras.layers.DepthwiseConv2D(3, padding="same", name="dw")(x)
    x = keras.layers.ReLU(name="r2")(x)
    x = keras.layers.Conv2D(32, 1, name="pw")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    out = keras.layers.Dense(10, name="fc")(x)
    model = keras.Model(inp, out, name="tiny")
    path = d / "tiny.keras"
    model.save(path)
    tfl = keras_to_tflite(model, d / "tiny.tflite")
    return {"keras": path, "graph": load_graph(path), "tflite": tfl, "dir": d}


@pytest.mark.slow
def test_ort_profile_maps_nodes_to_layers(tiny, tmp_path, monkeypatch, run_cli):
    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "tiny.csv"
    r = run_cli("measure", str(tiny["keras"]), "--backend", "ort", "--repeats", "5", "--warmup", "1",
                "--out", str(out), "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    # every node is some layer's: onnxruntime's own layout conversions (ReorderOutput) too, charged
    # to the layer whose tensor they convert, as the kernel view prices them
    assert summary["unattributed_share"] == 0.0
    from optimizer.measure.ort_profile import (_layer_matcher, _reorder_owner, attribute_node, kernel_events,
                                               model_runs, profile_events)

    onnx = next((tmp_path / "cache").rglob("*.onnx"))
    reorders: dict = {}
    events, _ = profile_events(onnx, 1, 2, 0, reorders=reorders)
    by_name = _layer_matcher(tiny["graph"])
    orphans = {name: op for _, name, op, *_ in kernel_events(events, model_runs(events))
               if attribute_node(name, op, tiny["graph"], by_name) is None}
    assert set(orphans.values()) <= {"ReorderInput", "ReorderOutput"}, orphans
    assert orphans and all(name in reorders for name in orphans)  # named by the session's optimized graph
    owners = {_reorder_owner(tiny["graph"], *reorders[name], by_name) for name in orphans}
    assert None not in owners and owners <= {la.index for la in tiny["graph"].layers}
    from optimizer.cost import build_cost_table, read_measured_table

    table = read_measured_table(out)
    g = tiny["graph"]
    assert table.rows["layer"].tolist() == [la.name for la in g.layers]
    lat = dict(zip(table.rows["layer"], table.rows["latency_s"]))
    # fused Conv+BN+ReLU nodes are attributed to the convolution, not to the activation
    assert lat["c1"] > 0 and lat["dw"] > 0 and lat["pw"] > 0
    assert lat["c1"] > lat["r1"]
    assert summary["layer_sum_s"] == pytest.approx(sum(lat.values()), rel=1e-6)
    ct = build_cost_table(g, "host", "fp32", "measured", table=out)
    assert np.allclose(ct.latency_s[:, 0], table.rows["latency_s"].to_numpy())


def test_ort_profile_maps_a_quantized_files_fused_kernels_to_their_layers(tmp_path, monkeypatch):
    """onnxruntime names the ``QLinearConv`` it fuses from a QDQ file's ``DequantizeLinear -> Conv ->
    QuantizeLinear`` after the convolution plus ``_token_<n>``: the kernel is the convolution's."""
    import onnx

    from optimizer.graph import load_graph
    from optimizer.graph.kernel_config import KernelConfig
    from optimizer.measure.ort_profile import _layer_matcher, attribute_node, kernel_events, model_runs, profile_events
    from optimizer.measure.probe_models import probe_model
    from optimizer.measure.validate import runtime_artifact

    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    model = onnx.load_from_string(probe_model(KernelConfig("conv", 28, 28, 32, 14, 14, 64, k=3, stride=2), "onnx", "fp32"))
    for i, node in enumerate(model.graph.node):
        node.name = f"net/{node.op_type.lower()}{i}"
    onnx.save(model, tmp_path / "conv.onnx")
    int8 = runtime_artifact(str(tmp_path / "conv.onnx"), load_graph(str(tmp_path / "conv.onnx")), "onnx", "int8")
    g = load_graph(str(int8))
    events, _ = profile_events(int8, 1, 2, 0)
    owners = {(name, op): attribute_node(name, op, g, _layer_matcher(g))
              for _, name, op, *_ in kernel_events(events, model_runs(events))}
    conv = [(name, i) for (name, op), i in owners.items() if op == "QLinearConv"]
    assert conv and all(i is not None and g.layers[i].op_type == "Conv" for _, i in conv), conv
    assert any(re.search(r"_token_\d+$", name) for name, _ in conv)  # the rewritten node's own name


def test_ort_profile_runs_a_dynamic_file_at_its_served_shape(tmp_path):
    """A file with dynamic dimensions is profiled at the served shape the graph was imported with,
    not at 1 x 1 (where an unpadded 3 x 3 convolution cannot run)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from optimizer.graph import load_graph
    from optimizer.measure.ort_profile import measure_ort

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, "h2", "w2"])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "dyn.onnx")
    g = load_graph(str(tmp_path / "dyn.onnx"), input_shapes={"x": (1, 3, 32, 32)})
    m = measure_ort(g, tmp_path / "dyn.onnx", repeats=3, warmup=1)
    assert m.whole_median_s > 0 and m.table.rows["latency_s"].sum() > 0


@pytest.mark.slow
def test_litert_whole_model_timing(tiny):
    from optimizer.measure import time_litert

    r = time_litert(tiny["tflite"], threads=1, repeats=7, warmup=1)
    assert 0 < r.p10_s <= r.median_s <= r.p90_s and r.repeats == 7
    with pytest.raises(ConfigError):
        time_litert(tiny["tflite"], repeats=0)


@pytest.mark.slow
def test_reference_runner_measures_on_host(tiny):
    assignment = {"kind": "pipeline", "stages": [{"processor": "cpu", "layers": [0, 8], "threads": 1}]}
    with ExternalMeasurer(RUNNER, timeout_s=120, retries=0) as m:
        a = m.measure(tiny["tflite"], assignment, repeats=5, warmup=1)
        b = m.measure(tiny["tflite"], assignment, repeats=5, warmup=1)  # same process, second request
        assert a["latency_s"] > 0 and a["fps"] == pytest.approx(1 / a["latency_s"])
        assert b["threads"] == 1
        with pytest.raises(MeasurementError, match="could not measure missing.tflite"):
            m.measure(tiny["dir"] / "missing.tflite", assignment)


@pytest.mark.parametrize("script, message", [
    ("import time; time.sleep(30)", "no reply within 0.5 s"),
    ("import sys; sys.exit(3)", "exited with status 3 without replying"),
    ("print('hello')", "not JSON: 'hello'"),
    ("import sys; sys.stdin.readline(); print('[1, 2]')", "not a reply object"),
])
def test_measure_cmd_failures(tiny, script, message):
    cmd = f"{PY} -c {shlex.quote(script)}"
    with pytest.raises(MeasurementError, match=message) as exc:
        ExternalMeasurer(cmd, timeout_s=0.5, retries=1).measure(tiny["tflite"], {})
    assert "after 2 attempts" in str(exc.value)


def test_measure_cmd_errors_through_cli(tiny, run_cli):
    bad = f"{PY} -c {shlex.quote('import sys; sys.exit(3)')}"
    r = run_cli("measure", str(tiny["keras"]), "--measure-cmd", bad, "--measure-retries", "0")
    assert r.exit_code == 2 and "exited with status 3" in r.stderr
    r = run_cli("measure", str(tiny["keras"]), "--measure-cmd", "", "--measure-retries", "0")
    assert r.exit_code == 2 and "--measure-cmd is empty" in r.stderr
    r = run_cli("measure", str(tiny["keras"]), "--backend", "tvm")
    assert r.exit_code == 2 and "expected ort or litert" in r.stderr


@pytest.mark.slow
def test_cli_measure_through_reference_runner(tiny, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    r = run_cli("measure", str(tiny["keras"]), "--measure-cmd", RUNNER, "--repeats", "3", "--warmup", "1", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["metrics"]["latency_s"] > 0


def test_onnx_export_beyond_free_memory_is_refused_before_it_starts(tiny, tmp_path, monkeypatch, run_cli):
    """tf2onnx peaks at ~24 bytes per byte of weights (vgg16: 14 GB): where that is more than the
    machine has free, measuring a Keras model is refused in one line naming the need, not killed
    by the kernel half-way; nothing is cached or written."""
    from optimizer.graph import convert

    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(convert, "available_memory_bytes", lambda: 0.5e9)
    out = tmp_path / "tiny.csv"
    r = run_cli("measure", str(tiny["keras"]), "--backend", "ort", "--out", str(out))
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "tf2onnx needs about 1.0 GB" in lines[0] and "0.5 GB" in lines[0], lines
    assert not out.exists() and not list((tmp_path / "cache").rglob("*.onnx"))


def test_an_operator_cut_out_of_a_tflite_network_carries_only_its_own_weights(tmp_path):
    """``calibrate --validate`` on LiteRT times every operator of a network alone: each cut model
    had carried the whole network's weights (bert_small FP32: 192 operators x 120 MB, 24 GB, which
    a 2-thread run did not survive). Each now keeps its own constants, and runs."""
    import tensorflow as tf

    from optimizer.graph import load_graph
    from optimizer.measure.probe_runner import in_process_runner
    from optimizer.measure.validate import isolated_layer_times, single_op_models

    keras = tf.keras
    inp = keras.Input((8, 8, 4), batch_size=1)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = keras.layers.Flatten()(x)
    out = keras.layers.Dense(4096)(x)  # 2 M weights: 8 MB that only the dense operator needs
    path = tmp_path / "net.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out)).convert())
    g = load_graph(str(path))
    models = dict(single_op_models(path, g))
    sizes = {g.layers[i].op_type: len(blob) for i, blob in models.items()}
    assert sizes["FULLY_CONNECTED"] > 8 * 2**20 > 20 * sizes["CONV_2D"], sizes
    times = isolated_layer_times(in_process_runner("litert", 1), path, g, 0.0)
    assert all(np.isfinite(times[i]) and times[i] > 0 for i in models)
