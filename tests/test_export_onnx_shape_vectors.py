"""Exports of ONNX files cut where a shape vector crosses: tf2onnx computes ``Reshape``
targets from ``Shape(input)`` (magika_standard_v3_3's ``LayerNorm_1/Reshape__131:0``). With the
input shapes fixed these vectors are constants: each part holds them, they are not exchanged as
``[1, *shape]`` activations; integer network inputs keep their dtype."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CUT = 4  # after Cast, Shape, Slice, Concat: the int64 Reshape target crosses the cut


def _shape_vector_onnx(path: Path) -> Path:
    """ids[n,16] int32 -> Cast -> Mul -> Reshape(to Concat(Shape(ids)[:1], [-1, 4])) -> ReduceMax -> Relu
    (the Cast first in the file: the first part also computes an activation)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array([0], np.int64), "s0"), numpy_helper.from_array(np.array([1], np.int64), "s1"),
             numpy_helper.from_array(np.array([-1, 4], np.int64), "tail"),
             numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32), "w")]
    nodes = [helper.make_node("Cast", ["ids"], ["f"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Shape", ["ids"], ["shape"], name="shape"),
             helper.make_node("Slice", ["shape", "s0", "s1"], ["batch"], name="batch"),
             helper.make_node("Concat", ["batch", "tail"], ["target"], name="target", axis=0),
             helper.make_node("Mul", ["f", "w"], ["g"], name="scale"),
             helper.make_node("Reshape", ["g", "target"], ["r"], name="reshape"),
             helper.make_node("ReduceMax", ["r"], ["m"], name="max", axes=[2], keepdims=0),
             helper.make_node("Relu", ["m"], ["out"], name="relu")]
    graph = helper.make_graph(nodes, "tf2onnx_like", [helper.make_tensor_value_info("ids", TensorProto.INT32, ["n", 16])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 4])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_cut_through_a_shape_vector_exports_and_runs(tmp_path, run_cli):
    from optimizer.graph import load_graph
    from optimizer.plan import write_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.parts import part_io

    path = _shape_vector_onnx(tmp_path / "m.onnx")
    shapes = {"ids": (1, 16)}
    g = load_graph(path, "op", input_shapes=shapes)
    assert "target" in part_io(g, 0, CUT)[1]  # the cut the GA may choose crosses the shape vector
    plan = write_plan(plan_for_boundaries(str(path), [CUT], input_shapes=shapes), tmp_path / "plan.json")
    art = tmp_path / "art"
    res = run_cli("export", str(plan), "--out", str(art))
    assert res.exit_code == 0, res.stderr
    manifest = json.loads((art / "manifest.json").read_text())
    exchanged = [t["name"] for p in manifest["parts"] for t in p["inputs"] + p["outputs"]]
    assert "target" not in exchanged and "shape" not in exchanged
    assert manifest["inputs"] == [{"name": "ids", "shape": [1, 16], "dtype": "int32", "quantization": None}]
    res = run_cli("run", str(plan), "--artifacts", str(art), "--check", "--frames", "8")
    assert res.exit_code == 0, res.stderr + res.stdout
    assert "top-1 agreement 100.0%" in res.stdout


@pytest.mark.parametrize("fold", [True, False])
def test_exchanged_tensors_keep_their_onnx_shapes(tmp_path, fold, monkeypatch):
    """A tensor without a batch axis keeps its inferred shape in the manifest (not [1, *shape]),
    also where the shape arithmetic cannot be folded."""
    from optimizer.graph import load_graph
    from optimizer.plan.export_files import OnnxCutter

    if not fold:
        monkeypatch.setattr("optimizer.graph.onnx_folding.fold_shape_arithmetic", lambda model, dims: None)
    path = _shape_vector_onnx(tmp_path / "m.onnx")
    g = load_graph(path, "op", input_shapes={"ids": (1, 16)})
    assert g.served_input_shapes == {"ids": (1, 16)}
    cutter = OnnxCutter(path, g)
    ins, outs = cutter.write(0, CUT, ["ids"], ["f", "target"], tmp_path / "p.onnx", "p", 2)
    assert [s.dtype for s in ins] == ["int32"] and ins[0].shape == [1, 16]
    assert [s.shape for s in outs] == ([[1, 16]] if fold else [[1, 16], [3]])
    assert [s.dtype for s in outs] == (["float32"] if fold else ["float32", "int64"])


def test_magika_cut_through_its_reshape_targets_checks_exactly(tmp_path, run_cli):
    """The public tf2onnx file itself, cut where ``LayerNorm_1/Reshape__131:0`` (shape [2]) and
    ``LayerNorm_0/BroadcastTo__109:0`` cross: before, ``run --check`` failed in onnxruntime."""
    from third_party.fetch_models import FetchError, fetch_onnx

    from optimizer.plan import write_plan
    from optimizer.plan.manual_plan import plan_for_boundaries

    try:
        path = fetch_onnx()["magika_standard_v3_3"]
    except FetchError as exc:
        pytest.fail(str(exc))
    plan = write_plan(plan_for_boundaries(str(path), [30, 60], input_shapes={"bytes": (1, 2048)}), tmp_path / "plan.json")
    art = tmp_path / "art"
    res = run_cli("export", str(plan), "--out", str(art))
    assert res.exit_code == 0, res.stderr
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["inputs"][0]["dtype"] == "int32"
    exchanged = {t["name"] for p in manifest["parts"] for t in p["inputs"]}
    assert not any("Reshape__131" in n or "BroadcastTo__109" in n for n in exchanged)
    res = run_cli("run", str(plan), "--artifacts", str(art), "--check", "--frames", "10")
    assert res.exit_code == 0, res.stderr + res.stdout
    assert "top-1 agreement 100.0%" in res.stdout
