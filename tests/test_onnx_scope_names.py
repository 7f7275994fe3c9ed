"""ONNX node names TensorFlow refuses as name scopes (paddle2onnx's ``Softmax@0`` in the
PP-OCR v2 classifier stopped onnx2tf with "not a valid scope name")."""

from __future__ import annotations

from pathlib import Path

import pytest


def _softmax_onnx(path: Path) -> Path:
    """x[1,8] -> Gemm (node 'Gemm@0') -> Softmax (node 'Softmax@0'), plus a node already named 'Softmax_0'."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(8, 2), "w")
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="Gemm@0"),
             helper.make_node("Softmax", ["y"], ["p"], name="Softmax@0", axis=1),
             helper.make_node("Identity", ["p"], ["out"], name="Softmax_0")]
    graph = helper.make_graph(nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2])], initializer=[w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), str(path))
    return path


def test_unsafe_node_names_are_renamed_uniquely(tmp_path):
    import onnx

    from optimizer.quantize.onnx_input import scope_safe_node_names

    model = onnx.load(str(_softmax_onnx(tmp_path / "m.onnx")))
    assert scope_safe_node_names(model) == 2
    names = [n.name for n in model.graph.node]
    assert names == ["Gemm_0", "Softmax_0_1", "Softmax_0"]
    assert [list(n.output) for n in model.graph.node] == [["y"], ["p"], ["out"]]  # tensors untouched
    assert scope_safe_node_names(model) == 0


@pytest.mark.slow
def test_onnx2tf_converts_a_softmax_named_with_an_at_sign(tmp_path):
    import numpy as np

    from optimizer.quantize.onnx_input import onnx_to_savedmodel

    path = _softmax_onnx(tmp_path / "m.onnx")
    saved = onnx_to_savedmodel(path, tmp_path, {"x": (1, 8)})
    from optimizer import lazy

    tf = lazy.tensorflow()
    fn = tf.saved_model.load(str(saved)).signatures["serving_default"]
    x = np.linspace(-2, 2, 8, dtype=np.float32)[None]
    got = next(iter(fn(x=tf.constant(x)).values())).numpy()
    logits = x @ np.linspace(-1, 1, 16, dtype=np.float32).reshape(8, 2)
    want = np.exp(logits) / np.exp(logits).sum()
    assert np.allclose(got, want, atol=1e-5)
