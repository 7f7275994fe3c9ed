"""ONNX, TFLite and SavedModel importers and the shared converters.

The same zoo network imported from Keras, from its tf2onnx export and from its TFLite
conversion must agree on total MACs (1 %), on the number of conv/dwconv/dense layers and on
the output sizes. Each conversion runs once per session (conversions are slow on 2 cores).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from optimizer.errors import InputFileError, ModelFormatError, UnsupportedOperatorError
from optimizer.graph import load_graph

#: (zoo name, variant): a depthwise network and a residual one, ResNet-50's topology at quarter width
#: (full-width ResNet-50 is checked the same way by ``benchmarks/bench_test_sweeps.py``)
AGREEMENT_NETS = (("mobilenet_v2", {}), ("slimmable_resnet50", {"width": 0.25}))
WEIGHTED = ("conv", "dwconv", "dense")


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def zoo_model():
    """``zoo_model(name, **variant)`` → the zoo's Keras model, built once per session."""
    from optimizer.graph.zoo import build_keras

    cache: dict[tuple, object] = {}

    def _get(name: str, **variant):
        key = (name, tuple(sorted(variant.items())))
        if key not in cache:
            cache[key] = build_keras(name, **variant)
        return cache[key]

    return _get


@pytest.fixture(scope="session")
def converted(tmp_path_factory, zoo_model):
    """``converted(name, fmt, **variant)`` → path of the zoo network converted to ``onnx`` |
    ``tflite`` | ``int8`` (full-integer PTQ on a few random samples); each conversion runs once."""
    from optimizer.graph.convert import keras_to_onnx, keras_to_tflite, run_converter

    root = tmp_path_factory.mktemp("converted")
    cache: dict[tuple[str, str], object] = {}

    def _get(name: str, fmt: str, **variant):
        key = (name, fmt, tuple(sorted(variant.items())))
        if key in cache:
            return cache[key]
        model = zoo_model(name, **variant)
        stem = "_".join([name, *(f"{k}{v}" for k, v in sorted(variant.items()))])
        if fmt == "onnx":
            path = keras_to_onnx(model, root / f"{stem}.onnx")
        elif fmt == "tflite":
            path = keras_to_tflite(model, root / f"{stem}.tflite")
        else:
            from optimizer.plan.tflite_convert import int8_converter

            shape = (1, *model.inputs[0].shape[1:])
            rng = np.random.default_rng(0)

            def samples():
                for _ in range(3):
                    yield [rng.uniform(-1, 1, shape).astype(np.float32)]

            path = run_converter(int8_converter(model, samples), root / f"{stem}_int8.tflite", name)
        cache[key] = path
        return path

    return _get


@pytest.fixture(scope="module")
def tiny_keras():
    """A small functional model whose MACs are computed by hand in the tests."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    inp = keras.Input((16, 16, 3), name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv")(inp)
    y = keras.layers.DepthwiseConv2D(3, padding="same", name="dw")(x)
    x = keras.layers.Add(name="skip")([x, y])
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    out = keras.layers.Dense(10, name="fc")(x)
    return keras.Model(inp, out, name="tiny")


# conv: 16*16*8 outputs * 3*3*3; dw: 16*16*8 * 3*3; fc: 8*10
TINY_MACS = 16 * 16 * 8 * 27 + 16 * 16 * 8 * 9 + 8 * 10


# --------------------------------------------------------------------------- agreement
@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant"), AGREEMENT_NETS, ids=[n for n, _ in AGREEMENT_NETS])
def test_keras_onnx_tflite_agree(name, variant, zoo_graph, converted):
    keras_g = zoo_graph(name, **variant)
    onnx_g = load_graph(converted(name, "onnx", **variant))
    tflite_g = load_graph(converted(name, "tflite", **variant))
    assert (onnx_g.fmt, tflite_g.fmt) == ("onnx", "tflite")
    assert keras_g.total_macs > 1e8
    for g in (onnx_g, tflite_g):
        assert g.total_macs == pytest.approx(keras_g.total_macs, rel=0.01), g.fmt
        assert g.count(*WEIGHTED) == keras_g.count(*WEIGHTED), g.fmt
        assert g.count("dwconv") == keras_g.count("dwconv"), g.fmt
        assert [math.prod(s) for s in g.output_shapes] == [math.prod(s) for s in keras_g.output_shapes]
        assert [math.prod(s) for s in g.input_shapes] == [math.prod(s) for s in keras_g.input_shapes]
        # weights are params of the layers, never graph tensors
        assert len(g.tensors) == len(g.inputs) + sum(len(la.outputs) for la in g.layers)
        assert g.total_params == pytest.approx(keras_g.total_params, rel=0.03), g.fmt
    # TFLite and tf2onnx keep NHWC at the graph boundary, like Keras
    assert tflite_g.input_shapes == keras_g.input_shapes == onnx_g.input_shapes
    assert tflite_g.weight_dtype == "fp32"


BERT_STAND_IN = {"depth": 0.5, "vocab_size": 1000}


@pytest.mark.slow
def test_transformer_with_dynamic_sequence_agrees(zoo_graph, converted):
    """bert_small keeps symbolic batch/sequence dims in ONNX and -1 signatures in TFLite: both
    importers must resolve them to the served shape, so attention MACs are counted, not dropped.
    Two of its four encoder layers (``depth=0.5``: the same layers, half the conversion time) and
    a 1,000-word embedding (``vocab_size``: the same MACs; the 30,522 x 512 table's copies were
    three quarters of the conversions): the attention products are 4 % of its MACs, so dropping
    them fails the 1 % agreement. BERT's own vocabulary is ``benchmarks/bench_test_sweeps.py
    --only importers_bert``."""
    keras_g = zoo_graph("bert_small", **BERT_STAND_IN)
    seq = 128
    attention = 2 * 8 * seq * seq * 128  # 2 layers' attention products (tests/test_zoo.py's per-layer term)
    assert keras_g.total_macs > 0.8e9 and attention / keras_g.total_macs > 0.03
    for fmt in ("onnx", "tflite"):
        g = load_graph(converted("bert_small", fmt, **BERT_STAND_IN))
        assert g.total_macs == pytest.approx(keras_g.total_macs, rel=0.01), fmt
        assert [math.prod(s) for s in g.output_shapes] == [math.prod(s) for s in keras_g.output_shapes], fmt
        assert all(d > 0 for s in g.input_shapes + g.output_shapes for d in s), fmt


@pytest.mark.slow
def test_int8_tflite_imports_with_same_macs(converted):
    fp32 = load_graph(converted("mobilenet_v2", "tflite"))
    int8 = load_graph(converted("mobilenet_v2", "int8"))
    assert int8.weight_dtype == "int8"
    assert int8.total_macs == fp32.total_macs
    assert int8.count(*WEIGHTED) == fp32.count(*WEIGHTED)
    # the int8 model's activations are int8 too: its profile defaults to int8 bytes
    assert int8.cut_bytes(0, "int8") == 224 * 224 * 3


@pytest.mark.slow
def test_fp16_tflite_and_savedmodel(tiny_keras, tmp_path):
    from optimizer.fileio import sha256_file
    from optimizer.graph.convert import keras_to_tflite
    from optimizer.lazy import silenced_stderr

    fp16 = load_graph(keras_to_tflite(tiny_keras, tmp_path / "tiny16.tflite", fp16=True))
    assert fp16.weight_dtype == "fp16"
    assert fp16.total_macs == TINY_MACS
    assert fp16.count("conv", "dwconv", "dense") == 3
    assert not any(la.op_type == "DEQUANTIZE" for la in fp16.layers)  # folded into weights

    saved = tmp_path / "tiny_saved"
    with silenced_stderr():
        tiny_keras.export(saved, verbose=False)
    g = load_graph(saved)
    assert (g.name, g.fmt, g.source_sha256) == ("tiny_saved", "savedmodel", sha256_file(saved))
    assert g.total_macs == TINY_MACS
    assert g.output_shapes == ((10,),)
    assert not list(tmp_path.glob("*.tmp")) and sorted(p.name for p in tmp_path.iterdir()) == [
        "tiny16.tflite", "tiny_saved"]


def test_tiny_keras_macs_match_by_hand(tiny_keras):
    from optimizer.graph.keras_import import graph_from_keras

    assert graph_from_keras(tiny_keras).total_macs == TINY_MACS


# --------------------------------------------------------------------------- ONNX by hand
def _onnx_model(nodes, inputs, outputs, initializers=(), opset=17, domains=()):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets)


def _init(name, shape):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def test_onnx_macs_params_and_shapes_by_hand():
    from onnx import helper

    from optimizer.graph.onnx_import import graph_from_onnx

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="dw", group=8, pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["c2", "w3"], ["c3"], name="deconv", strides=[2, 2]),
        helper.make_node("Reshape", ["c3", "shape"], ["flat"], name="reshape"),
        helper.make_node("MatMul", ["flat", "w4"], ["m"], name="matmul"),
        helper.make_node("Gemm", ["m", "w5"], ["y"], name="gemm", transB=1),
        helper.make_node("Einsum", ["c2", "c2"], ["e"], name="einsum", equation="nchw,ndhw->ncd"),
    ]
    inits = [_init("w1", (8, 3, 3, 3)), _init("b1", (8,)), _init("w2", (8, 1, 3, 3)),
             _init("w3", (8, 4, 2, 2)), _init("w4", (4 * 32 * 32, 16)), _init("w5", (5, 16))]
    from onnx import numpy_helper

    inits.append(numpy_helper.from_array(np.array([-1, 4 * 32 * 32], np.int64), "shape"))
    # listed out of order: the importer must restore a topological order
    model = _onnx_model(nodes[::-1], [("x", ["N", 3, 16, 16])], [("y", ["N", 5]), ("e", ["N", 8, 8])], inits)
    g = graph_from_onnx(model, "hand")
    by = {la.name: la for la in g.layers}
    order = [la.name for la in g.layers]
    chain = ["conv", "relu", "dw", "deconv", "reshape", "matmul", "gemm"]
    assert [order.index(n) for n in chain] == sorted(order.index(n) for n in chain)
    assert order.index("dw") < order.index("einsum") and len(order) == 8
    assert by["conv"].macs == 8 * 16 * 16 * 3 * 3 * 3 and by["conv"].params == 8 * 27 + 8
    assert by["conv"].output_shapes == ((8, 16, 16),)  # batch dim dropped
    assert (by["conv"].op, by["dw"].op, by["matmul"].op, by["gemm"].op) == ("conv", "dwconv", "dense", "dense")
    assert by["dw"].macs == 8 * 16 * 16 * 9
    assert by["deconv"].macs == 8 * 16 * 16 * 4 * 2 * 2 and by["deconv"].output_shapes == ((4, 32, 32),)
    assert by["matmul"].macs == 4 * 32 * 32 * 16 and by["matmul"].params == 4 * 32 * 32 * 16
    assert by["gemm"].macs == 5 * 16 and by["gemm"].output_shapes == ((5,),)
    assert by["einsum"].macs == 8 * 8 * 16 * 16 and by["einsum"].output_shapes == ((8, 8),)
    assert by["reshape"].params == 2 and by["reshape"].inputs == ("c3",)
    # initializers are weights, not tensors; every weight counted exactly once
    assert not set(g.tensors) & {"w1", "b1", "w2", "w3", "w4", "w5", "shape"}
    assert g.total_params == sum(math.prod(t.dims) for t in inits)
    assert g.cut_bytes(1, "fp32") == 8 * 16 * 16 * 4


def test_onnx_constant_nodes_are_weights():
    from onnx import helper

    from optimizer.graph.onnx_import import graph_from_onnx

    w = _init("wc", (4, 6))
    nodes = [helper.make_node("Constant", [], ["w"], name="const", value=w),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    g = graph_from_onnx(_onnx_model(nodes, [("x", [1, 6])], [("y", [1, 4])]), "const")
    assert [la.name for la in g.layers] == ["mm"]
    assert g.layers[0].params == 24 and g.layers[0].macs == 4 * 6
    assert g.output_shapes == ((4,),)


def test_onnx_lstm_macs():
    from onnx import helper

    from optimizer.graph.onnx_import import graph_from_onnx

    # X [seq=5, batch, I=3], hidden 4: 5 steps x 4 gates*4 x (3 + 4)
    nodes = [helper.make_node("LSTM", ["x", "w", "r"], ["y"], name="lstm", hidden_size=4)]
    model = _onnx_model(nodes, [("x", [5, 1, 3])], [("y", [5, 1, 1, 4])],
                        [_init("w", (1, 16, 3)), _init("r", (1, 16, 4))])
    g = graph_from_onnx(model, "lstm")
    assert (g.layers[0].op, g.layers[0].macs, g.layers[0].params) == ("dense", 5 * 16 * 7, 16 * 7)


# --------------------------------------------------------------------------- bad input
def test_onnx_custom_domain_op_imports_cpu_only_with_warning(tmp_path):
    import onnx
    from onnx import helper

    from optimizer.errors import CustomOperatorWarning
    from optimizer.hardware import load_device

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("FancyAttention", ["r"], ["y"], name="block3/attn", domain="com.acme")]
    path = tmp_path / "custom.onnx"
    onnx.save(_onnx_model(nodes, [("x", [1, 8])], [("y", [1, 8])], domains=["com.acme"]), path)
    with pytest.warns(CustomOperatorWarning, match=r"com\.acme\.FancyAttention x1"):
        g = load_graph(path)
    assert [(la.op, la.op_type) for la in g.layers] == [("act", "Relu"), ("custom", "FancyAttention")]
    pixel6 = load_device("pixel6")
    assert {p.name: p.supports("custom", "fp32") for p in pixel6.processors} == {
        p.name: p.kind == "cpu" for p in pixel6.processors}


def test_onnx_custom_domain_op_with_unknown_shape_named(tmp_path):
    import onnx
    from onnx import helper

    nodes = [helper.make_node("FancyAttention", ["x"], ["a"], name="block3/attn", domain="com.acme"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    path = tmp_path / "custom.onnx"
    onnx.save(_onnx_model(nodes, [("x", [1, 8])], [("y", [1, 8])], domains=["com.acme"]), path)
    with pytest.raises(ModelFormatError) as err:
        load_graph(path)
    msg = str(err.value)
    assert "block3/attn" in msg and "'a'" in msg and "cannot be inferred" in msg and str(path) in msg


def test_onnx_unknown_default_domain_op_named(tmp_path):
    from onnx import helper

    from optimizer.graph.onnx_import import graph_from_onnx

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("NotAnOnnxOp", ["r"], ["y"], name="layer7")]
    with pytest.raises(UnsupportedOperatorError, match=r"layer7.*NotAnOnnxOp"):
        graph_from_onnx(_onnx_model(nodes, [("x", [1, 8])], [("y", [1, 8])]), "m")


def test_missing_files(tmp_path):
    from optimizer.graph.onnx_import import graph_from_onnx_file
    from optimizer.graph.savedmodel_import import graph_from_savedmodel
    from optimizer.graph.tflite_import import graph_from_tflite_file

    for fn, name in ((graph_from_onnx_file, "nope.onnx"), (graph_from_tflite_file, "nope.tflite"),
                     (graph_from_savedmodel, "nope_dir")):
        with pytest.raises(InputFileError, match=name):
            fn(tmp_path / name)
    (tmp_path / "not_saved").mkdir()
    (tmp_path / "not_saved" / "variables.txt").write_text("x")
    with pytest.raises(InputFileError, match=r"not_saved.*saved_model\.pb"):
        load_graph(tmp_path / "not_saved")


@pytest.fixture(scope="module")
def small_onnx_bytes():
    from onnx import helper

    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    return _onnx_model(nodes, [("x", [1, 3, 8, 8])], [("y", [1, 4, 6, 6])], [_init("w", (4, 3, 3, 3))]).SerializeToString()


@pytest.mark.parametrize("kind", ["random", "truncated", "empty"])
def test_corrupt_onnx(tmp_path, kind, small_onnx_bytes):
    data = {"random": np.random.default_rng(7).bytes(4096), "truncated": small_onnx_bytes[:-40],
            "empty": b""}[kind]
    path = tmp_path / f"{kind}.onnx"
    path.write_bytes(data)
    with pytest.raises(ModelFormatError, match=str(path)):
        load_graph(path)


@pytest.mark.parametrize("kind", ["random", "truncated", "onnx_renamed"])
def test_corrupt_tflite(tmp_path, kind, small_onnx_bytes, converted_tiny_tflite):
    good = converted_tiny_tflite.read_bytes()
    data = {"random": np.random.default_rng(7).bytes(4096), "truncated": good[: len(good) // 2],
            "onnx_renamed": small_onnx_bytes}[kind]
    path = tmp_path / f"{kind}.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFormatError, match=str(path)) as err:
        load_graph(path)
    assert "TFLite" in str(err.value)


@pytest.fixture(scope="module")
def converted_tiny_tflite(tiny_keras, tmp_path_factory):
    from optimizer.graph.convert import keras_to_tflite

    return keras_to_tflite(tiny_keras, tmp_path_factory.mktemp("tiny") / "tiny.tflite")


def test_tiny_tflite_macs(converted_tiny_tflite):
    g = load_graph(converted_tiny_tflite)
    assert g.total_macs == TINY_MACS
    assert [la.op for la in g.layers if la.op in WEIGHTED] == ["conv", "dwconv", "dense"]
    assert g.input_shapes == ((16, 16, 3),) and g.output_shapes == ((10,),)


def test_tflite_custom_op_imports_with_warning(tmp_path):
    from optimizer.errors import CustomOperatorWarning
    from optimizer.graph.convert import run_converter
    from optimizer.lazy import tensorflow

    tf = tensorflow()

    @tf.function(input_signature=[tf.TensorSpec([1, 2, 2], tf.float32)])
    def invert(x):
        return tf.linalg.inv(x) + 1.0

    conv = tf.lite.TFLiteConverter.from_concrete_functions([invert.get_concrete_function()], invert)
    conv.allow_custom_ops = True
    path = run_converter(conv, tmp_path / "custom.tflite")
    with pytest.warns(CustomOperatorWarning, match=r"custom\.tflite.*MatrixInverse x1"):
        g = load_graph(path)
    custom = [la for la in g.layers if la.op == "custom"]
    assert [la.op_type for la in custom] == ["MatrixInverse"] and custom[0].output_shapes == ((2, 2),)


def test_converter_failure_leaves_no_file(tmp_path):
    from optimizer.graph.convert import keras_to_onnx

    with pytest.raises(UnsupportedOperatorError):
        keras_to_onnx(object(), tmp_path / "x.onnx")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("kind", ["missing", "corrupt_onnx", "corrupt_tflite", "custom_op"])
def test_cli_profile_bad_model_files(kind, tmp_path, run_cli):
    import onnx
    from onnx import helper

    if kind == "missing":
        path, expect = tmp_path / "absent.onnx", "no such file"
    elif kind == "corrupt_onnx":
        path, expect = tmp_path / "bad.onnx", "not a readable ONNX model"
        path.write_bytes(np.random.default_rng(3).bytes(2048))
    elif kind == "corrupt_tflite":
        path, expect = tmp_path / "bad.tflite", "not a TFLite flatbuffer"
        path.write_bytes(np.random.default_rng(3).bytes(2048))
    else:
        path, expect = tmp_path / "custom.onnx", "cannot be inferred"  # custom op, unknown shape
        nodes = [helper.make_node("Mystery", ["x"], ["m"], name="head/mystery", domain="org.x"),
                 helper.make_node("Relu", ["m"], ["y"], name="relu")]
        onnx.save(_onnx_model(nodes, [("x", [1, 4])], [("y", [1, 4])], domains=["org.x"]), path)
    res = run_cli("profile", str(path), "--json")
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert expect in lines[0] and path.name in lines[0]
    if kind == "custom_op":
        assert "head/mystery" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if kind == "missing" else [path.name])


@pytest.mark.slow
def test_cli_profile_onnx_json(converted, run_cli):
    import json

    res = run_cli("profile", str(converted("mobilenet_v2", "onnx")), "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["model"] == "mobilenet_v2"
    assert doc["total_macs"] == pytest.approx(300e6, rel=0.02)
    assert sum(row["macs"] for row in doc["layers"]) == doc["total_macs"]
