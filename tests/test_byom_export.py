"""Bring your own model: export and ``run --check`` of ``.tflite``/``.onnx`` files.

Third-party pretrained models (mediapipe's wheel, tests/third_party/README.md), an INT8 file made
by ``dnnplan quantize``, a tf2onnx export of a zoo network and the ``onnx.helper`` graph of
conftest: split and pipeline parts computed in the file's format must equal the single file.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from _byom import (CUSTOM_OP_MODEL, FIXTURE_MODELS, NO_KERNEL_MODEL, even_cuts, export_and_check,
                   searched_plans, third_party_models, zoo_onnx)
from _cli_checks import assert_one_line_exit_2



@pytest.fixture(scope="module")
def models() -> dict[str, Path]:
    return third_party_models()


def _assert_exact(report, tol: float = 1e-5) -> None:
    check = report.check
    assert check is not None and check.passed and check.agreement == 1.0
    for o in check.outputs:
        assert o.max_abs_diff <= tol, (o.name, o.max_abs_diff)


# ---------------------------------------------------------------- third-party FP32 .tflite
@pytest.mark.parametrize("name", FIXTURE_MODELS)
def test_third_party_tflite_split_and_pipeline_equal_single_file(name, models, tmp_path):
    for kind in ("pipeline", "split"):
        report = export_and_check(models[name], tmp_path, kind=kind)
        _assert_exact(report)
        assert report.frames == 3 and len(report.stages) == (3 if kind == "pipeline" else 2)
        if kind == "split":
            assert report.wire is not None and report.wire["bytes_per_frame"] > 0  # real socket


def test_custom_op_stays_in_one_part_and_cli_check(models, tmp_path, run_cli):
    """selfie_segmentation ends in MediaPipe's Convolution2DTransposeBias: imported with a warning
    as a CPU-only layer with transposed-convolution MACs, kept in one part, checked by the CLI."""
    from optimizer.graph import load_graph
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.io import write_plan

    path = models[CUSTOM_OP_MODEL]
    with pytest.warns(Warning, match="Convolution2DTransposeBias x1"):
        g = load_graph(path)
    (custom,) = [la for la in g.layers if la.op == "custom"]
    assert custom.macs == 128 * 128 * 16 * 2 * 2 * 1  # input 128x128x16, filter [1, 2, 2, 16]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_for_boundaries(str(path), [custom.index], kind="split")  # the custom op on the server
    write_plan(plan, tmp_path / "plan.json")
    res = run_cli("export", tmp_path / "plan.json", "--out", tmp_path / "art")
    assert res.exit_code == 0, res.stderr
    man = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert [p["file"] for p in man["parts"]] == ["head.tflite", "tail.tflite"]
    assert b"Convolution2DTransposeBias" in (tmp_path / "art" / "tail.tflite").read_bytes()
    assert b"Convolution2DTransposeBias" not in (tmp_path / "art" / "head.tflite").read_bytes()
    frames = np.random.default_rng(5).uniform(0, 1, (2, 256, 256, 3)).astype(np.float32)
    np.save(tmp_path / "frames.npy", frames)
    res = run_cli("run", tmp_path / "plan.json", "--artifacts", tmp_path / "art", "--check", "--frames", 2,
                  "--input", tmp_path / "frames.npy", "--json")
    assert res.exit_code == 0, res.stderr
    check = json.loads(res.stdout)["check"]
    assert check["passed"] and check["frames"] == 2 and check["outputs"][0]["max_abs_diff"] <= 1e-5
    res = run_cli("run", tmp_path / "plan.json", "--artifacts", tmp_path / "art", "--check", "--frames", 2)
    assert res.exit_code == 0 and "top-1 agreement" in res.stdout and "check passed" in res.stdout


def test_custom_ops_without_kernel_export_but_do_not_run(models, tmp_path, run_cli):
    """Landmarks2TransformMatrix & co. have no kernel in LiteRT: the model imports, exports (each
    custom op inside one part), and running it fails with one line, exit 2."""
    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.io import write_plan

    path = models[NO_KERNEL_MODEL]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_for_boundaries(str(path), even_cuts(path, 2))
        man = export_plan(plan, tmp_path / "art")
    parts_with = [p.name for p in man.parts
                  if b"Landmarks2TransformMatrix" in (tmp_path / "art" / p.file).read_bytes()]
    assert len(man.parts) == 2 and len(parts_with) >= 1
    write_plan(plan, tmp_path / "plan.json")
    res = run_cli("run", tmp_path / "plan.json", "--artifacts", tmp_path / "art", "--check", "--frames", 1)
    assert res.exit_code == 2 and "LiteRT cannot load" in res.stderr
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1


# ---------------------------------------------------------------- ONNX
def test_onnx_helper_graph_split_and_pipeline(tiny_onnx, tmp_path):
    for kind, cuts in (("pipeline", [2, 5]), ("split", [3])):
        report = export_and_check(tiny_onnx, tmp_path, kind=kind, cuts=cuts, frames=4)
        assert report.check.passed and report.check.agreement == 1.0
        (out,) = report.check.outputs
        assert out.sqnr_db is None or out.sqnr_db > 100  # float rounding of onnxruntime kernels only
    assert sorted(p.name for p in (tmp_path / "split-art").iterdir()) == ["head.onnx", "manifest.json", "tail.onnx"]


def test_onnx_if_branch_reading_an_outer_tensor_is_cut_with_it(tmp_path):
    """An ONNX ``If`` whose branches read ``r`` from the outer graph: every boundary before the
    ``If`` carries ``r`` to the part holding it (implicit inputs), and the parts equal the file."""
    from onnx import TensorProto, helper, save

    from optimizer.graph import load_graph
    from optimizer.plan.parts import part_io

    vec = [1, 8]
    then_g = helper.make_graph([helper.make_node("Add", ["r", "r"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, vec)])
    else_g = helper.make_graph([helper.make_node("Neg", ["r"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, vec)])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("ReduceSum", ["r"], ["s"], name="sum", keepdims=0),
             helper.make_node("Greater", ["s", "limit"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
             helper.make_node("Relu", ["y"], ["out"], name="relu2")]
    graph = helper.make_graph(nodes, "cf", [helper.make_tensor_value_info("x", TensorProto.FLOAT, vec)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, vec)],
                              initializer=[helper.make_tensor("limit", TensorProto.FLOAT, [], [4.0])])
    path = tmp_path / "if.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    g = load_graph(str(path))
    assert part_io(g, 3, len(g))[0] == ["r", "c"]
    x = np.random.default_rng(3).uniform(-1, 2, (6, 8)).astype(np.float32)   # both branches taken
    assert len({bool(np.maximum(v, 0).sum() > 4) for v in x}) == 2
    for cut in (1, 2, 3, 4):
        _assert_exact(export_and_check(path, tmp_path / str(cut), kind="split", cuts=[cut], frames=6, inputs=x))


@pytest.mark.slow
def test_tf2onnx_zoo_network_split_and_pipeline(tmp_path):
    path = zoo_onnx(tmp_path / "mobilenet_v1.onnx")
    for kind in ("pipeline", "split"):
        report = export_and_check(path, tmp_path, kind=kind, frames=3)
        assert report.check.passed and report.check.agreement == 1.0
        assert all(o.sqnr_db is None or o.sqnr_db > 100 for o in report.check.outputs)


# ---------------------------------------------------------------- INT8 .tflite from `dnnplan quantize`
@pytest.fixture(scope="module")
def int8_tflite(tmp_path_factory):
    """mobilenet_v2 at 96 px (the zoo's layers; a fifth of the calibration work of 224 px) saved as
    a ``.keras`` file with re-estimated batch norms, so its INT8 logits are not all zero."""
    from optimizer.cli import main
    from optimizer.graph.zoo import build_keras
    from optimizer.lazy import keras
    from optimizer.plan.keras_model import reestimate_batchnorm

    d = tmp_path_factory.mktemp("int8")
    keras().utils.set_random_seed(0)
    model = build_keras("mobilenet_v2", input_size=INT8_SIZE)
    reestimate_batchnorm(model, seed=0)
    model.save(d / "mobilenet_v2.keras")
    out = d / "mobilenet_v2.int8.tflite"
    rc = main(["--quiet", "quantize", str(d / "mobilenet_v2.keras"), "--out", str(out), "--samples", "16",
               "--heldout", "4", "--no-latency", "--calib-workers", "1"])
    assert rc == 0 and out.is_file()
    return out


INT8_SIZE = 96


@pytest.mark.slow
def test_int8_tflite_parts_agree_with_single_file(int8_tflite, tmp_path):
    x = np.random.default_rng(9).uniform(-1, 1, (8, INT8_SIZE, INT8_SIZE, 3)).astype(np.float32)
    for kind in ("pipeline", "split"):
        report = export_and_check(int8_tflite, tmp_path, kind=kind, frames=8, inputs=x)
        check = report.check
        assert check.passed and check.agreement == 1.0
        assert all(o.max_abs_diff == 0.0 for o in check.outputs)  # same integer kernels, same parameters
    man = json.loads((tmp_path / "split-art" / "manifest.json").read_text())
    crossing = man["wire"]["request"]
    assert man["dtype"] in ("int8", "fp32") and all(t["dtype"] == "int8" and t["quantization"] for t in crossing)


# ---------------------------------------------------------------- bad input
def test_check_against_changed_model_file(models, tmp_path, run_cli):
    import shutil

    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.io import write_plan

    path = tmp_path / "iris.tflite"
    shutil.copy(models["iris_landmark"], path)
    plan = plan_for_boundaries(str(path), [50])
    export_plan(plan, tmp_path / "art")
    write_plan(plan, tmp_path / "plan.json")
    other = plan_for_boundaries(str(path), [60])
    write_plan(other, tmp_path / "other.json")
    res = run_cli("run", tmp_path / "other.json", "--artifacts", tmp_path / "art", "--check")
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    data = bytearray(path.read_bytes())
    data[-200] ^= 0xFF  # the model file changed after the export
    path.write_bytes(bytes(data))
    res = run_cli("run", tmp_path / "plan.json", "--artifacts", tmp_path / "art", "--check")
    assert res.exit_code == 2 and "is not the model the artifacts" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = run_cli("export", tmp_path / "plan.json", "--out", tmp_path / "art2")
    assert res.exit_code == 2 and "model.sha256" in res.stderr and not (tmp_path / "art2").exists()


def test_corrupt_subgraph_and_corrupt_file(models, tmp_path, run_cli):
    from ai_edge_litert import schema_py_generated as schema

    from optimizer.graph.tflite_flatbuffer import read_model, write_model

    m = read_model(models["hand_recrop"].read_bytes())
    op = m.subgraphs[0].operators[3]
    op.inputs = np.array([10_000, *op.inputs[1:]], dtype=np.int32)  # a tensor that does not exist
    bad = tmp_path / "bad_subgraph.tflite"
    bad.write_bytes(write_model(m))
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(models["hand_recrop"].read_bytes()[:5000])
    assert isinstance(m, schema.ModelT)
    for path in (bad, truncated):
        res = run_cli("profile", path)
        assert res.exit_code == 2, res.stderr
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and path.name in lines[0] and "Traceback" not in res.stderr


@pytest.mark.slow
def test_cut_through_control_flow_refused(tmp_path, run_cli):
    """A WHILE loop's body is a separate subgraph the cut cannot divide: a one-line error, exit 2."""
    from optimizer.graph.convert import run_converter
    from optimizer.lazy import tensorflow
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.io import write_plan

    tf = tensorflow()

    @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32)])
    def loop(x):
        y = tf.nn.relu(x * 2.0)
        _, z = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 0.5 + 1.0), (0, y))
        return tf.nn.relu(z) + y

    conv = tf.lite.TFLiteConverter.from_concrete_functions([loop.get_concrete_function()], loop)
    path = run_converter(conv, tmp_path / "loop.tflite")
    plan = plan_for_boundaries(str(path), [1])
    write_plan(plan, tmp_path / "plan.json")
    res = run_cli("export", tmp_path / "plan.json", "--out", tmp_path / "art")
    assert res.exit_code == 2 and "control-flow" in res.stderr and not (tmp_path / "art").exists()
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1
    single = plan_for_boundaries(str(path), [])
    write_plan(single, tmp_path / "single.json")
    assert run_cli("export", tmp_path / "single.json", "--out", tmp_path / "one").exit_code == 0
    res = run_cli("run", tmp_path / "single.json", "--artifacts", tmp_path / "one", "--check", "--frames", 2)
    assert res.exit_code == 0, res.stderr


def test_compare_outputs_figures():
    from optimizer.runtime.check import compare_outputs

    ref = np.array([[0.0, 1.0, 0.2], [3.0, 0.0, 1.0]], np.float32)
    test = ref + np.array([[0.0, 0.0, 0.9], [0.0, 0.0, 0.0]], np.float32)  # frame 0 flips to class 2
    o = compare_outputs("y", test, ref)
    assert o.top1_agreement == 0.5 and o.max_abs_diff == pytest.approx(0.9)
    assert o.sqnr_db == pytest.approx(10 * np.log10((1 + 0.04 + 9 + 1) / 0.81), rel=1e-6)
    assert compare_outputs("y", ref, ref).sqnr_db is None


def test_tflite_custom_op_with_unknown_shape_refused(models, tmp_path, run_cli):
    from optimizer.graph.tflite_flatbuffer import read_model, write_model

    m = read_model(models[CUSTOM_OP_MODEL].read_bytes())
    sg = m.subgraphs[0]
    (op,) = [o for o in sg.operators if m.operatorCodes[o.opcodeIndex].customCode]
    out = sg.tensors[op.outputs[0]]
    out.shape = np.array([1, 1, 1, 1], np.int32)  # what the converter stores for unknown dimensions
    out.shapeSignature = np.array([1, -1, -1, 1], np.int32)
    path = tmp_path / "unknown_shape.tflite"
    path.write_bytes(write_model(m))
    res = run_cli("profile", path)
    assert res.exit_code == 2 and "Convolution2DTransposeBias" in res.stderr and "shape is unknown" in res.stderr
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1


def test_chain_map_split_export_check_of_a_custom_op_model(models, tmp_path, run_cli):
    """profile -> map / split (real searches) -> export -> run --check on a pretrained file with
    a custom operator: the parts are bit-exact."""
    from optimizer.plan import read_plan

    path = models[CUSTOM_OP_MODEL]
    assert run_cli("--quiet", "profile", str(path), "--json").exit_code == 0
    for kind, plan_file in searched_plans(run_cli, path, tmp_path, "fp16").items():
        plan = read_plan(plan_file)
        assert plan.kind == kind
        _assert_exact(export_and_check(path, tmp_path / kind, plan=plan, frames=2))


def test_boundary_across_a_variable_tensor_is_refused(models, tmp_path, run_cli):
    """TFLite parts exchange plain tensors: a cut through a stateful (variable) tensor is refused
    in one line and nothing is written."""
    from optimizer.graph import load_graph
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.parts import part_io
    from optimizer.plan.io import write_plan
    from optimizer.graph.tflite_flatbuffer import read_model, write_model

    src = models["hand_recrop"]
    cut = even_cuts(src, 2)[0]
    crossing = part_io(load_graph(str(src)), cut, len(load_graph(str(src))))[0]
    model = read_model(src.read_bytes())
    model.subgraphs[0].tensors[int(crossing[0])].isVariable = True
    stateful = tmp_path / "stateful.tflite"
    stateful.write_bytes(write_model(model))
    write_plan(plan_for_boundaries(str(stateful), [cut], kind="split"), tmp_path / "plan.json")
    res = run_cli("--quiet", "export", str(tmp_path / "plan.json"), "--out", str(tmp_path / "art"))
    assert_one_line_exit_2(res, "stateful.tflite", f"crosses tensor {crossing[0]}", "variable")
    assert not (tmp_path / "art").exists()


@pytest.mark.slow
def test_zoo_fp32_keep_reference_check_and_exit_1_on_a_mismatched_reference(tmp_path, run_cli):
    """Float zoo exports ship a single-file reference by default, so run --check works after a
    plain export; --no-reference leaves it out (exit 2); a reference of other weights disagrees:
    exit 1, passed false (the seed-1 export without a reference gets the seed-0 export's).
    ``--keep-reference`` is accepted: tests/test_input_shapes.py."""
    import shutil

    from optimizer.fileio import sha256_file
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.plan.io import write_plan

    write_plan(plan_for_boundaries("mobilenet_v1", [10], kind="split", variant={"input_size": 96, "alpha": 0.25}),
               tmp_path / "plan.json")
    art, other = tmp_path / "art", tmp_path / "other"

    def check(d):
        return run_cli("run", str(tmp_path / "plan.json"), "--artifacts", str(d), "--check", "--frames", "20",
                       "--no-pin", "--json")

    for d, seed, flag in ((art, "0", ()), (other, "1", ("--no-reference",))):
        assert run_cli("--quiet", "export", str(tmp_path / "plan.json"), "--out", str(d), *flag,
                       "--seed", seed).exit_code == 0
    assert not (other / "reference.fp32.tflite").exists()
    assert json.loads((other / "manifest.json").read_text()).get("reference") is None
    assert_one_line_exit_2(check(other), "no single-file reference", "--no-reference")
    res = check(art)
    assert res.exit_code == 0, res.stderr
    chk = json.loads(res.stdout)["check"]
    assert chk["reference"].endswith("reference.fp32.tflite") and chk["agreement"] == 1.0
    assert chk["outputs"][0]["max_abs_diff"] <= 1e-5
    # the seed-0 reference beside the seed-1 parts, declared in their manifest
    shutil.copyfile(art / "reference.fp32.tflite", other / "reference.fp32.tflite")
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["reference"] = {"file": "reference.fp32.tflite", "sha256": sha256_file(other / "reference.fp32.tflite"),
                             "bytes": (other / "reference.fp32.tflite").stat().st_size}
    (other / "manifest.json").write_text(json.dumps(manifest))
    res = check(other)
    assert res.exit_code == 1, res.stderr
    chk = json.loads(res.stdout)["check"]
    assert not chk["passed"] and chk["agreement"] < 0.99

