"""Every boundary exports and runs: the failure classes ``dnnplan export-sweep`` found, each on the
smallest real file that shows it, export's own load check, and the sweep command itself (the full
sweep over the real-model set is ``benchmarks/bench_export_sweep.py``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

REC_SHAPE = {"x": (1, 3, 48, 320)}


def _fixture(name: str) -> Path:
    from third_party.fetch_models import FetchError, fetch, fetch_onnx

    try:
        found = {**fetch_onnx(), **fetch()}
    except FetchError as exc:
        pytest.fail(str(exc))
    return found[name]


def _check(model: Path, tmp: Path, kind: str, cuts: list[int], shapes=None, frames: int = 2):
    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.runtime import run_plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_for_boundaries(str(model), cuts, kind=kind, input_shapes=shapes)
        manifest = export_plan(plan, tmp / "art")
        return manifest, run_plan(plan, tmp / "art", frames=frames, pin=False, check_min_agreement=1.0)


# ------------------------------------------------------------- shape arithmetic at the fixed shape
def test_rec_attention_reshape_targets_fold_to_the_fixed_width():
    """PP-OCRv4 rec computes its attention Reshape target [0, N, 3, 8, 15] from Shape(x); at
    48x320 the sequence N is 40 (onnxsim's folding gave 78, and no part of the file loaded)."""
    import onnx

    from optimizer.graph.onnx_folding import fold_shape_arithmetic
    from optimizer.graph.onnx_import import prepared_model

    model, dims = prepared_model(onnx.load(str(_fixture("ppocr_v4_rec"))), REC_SHAPE, "rec")
    folded, names = fold_shape_arithmetic(model, dims)
    target = next(n.input[1] for n in folded.graph.node if n.name == "p2o.Reshape.67")
    value = next(onnx.numpy_helper.to_array(t) for t in folded.graph.initializer if t.name == target)
    assert value.tolist() == [0, 40, 3, 8, 15] and target in names
    assert not any(n.op_type == "Shape" for n in folded.graph.node)  # every Shape of a static tensor folded


@pytest.mark.parametrize("kind, cuts", [("split", [440]), ("pipeline", [282, 355])])
def test_rec_parts_load_and_equal_the_single_file(tmp_path, kind, cuts):
    """The issue's chain: boundary 440 of 440 (the whole recogniser as the head) and a pipeline
    through the attention blocks export, load and compute what the file computes."""
    manifest, report = _check(_fixture("ppocr_v4_rec"), tmp_path, kind, cuts, REC_SHAPE)
    assert report.check.agreement == 1.0 and report.check.outputs[0].max_abs_diff < 1e-5
    assert manifest.model.input_shapes == {"x": [1, 3, 48, 320]}


# ------------------------------------------------------------- crossing tensors of any rank and dtype
def _masks_onnx(path: Path) -> Path:
    """Conv -> ReduceMax (a scalar) -> Greater (a bool mask) -> ArgMax (int64) -> Where/Cast/Add:
    every boundary after the Conv crosses a scalar, a bool and/or an int64 tensor."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.float32(0.5).reshape(()), "half"),
             numpy_helper.from_array(np.float32(0).reshape(()), "zero"),
             numpy_helper.from_array(np.linspace(-1, 1, 288, dtype=np.float32).reshape(8, 4, 3, 3), "w")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("ReduceMax", ["c"], ["mx"], name="max_all", keepdims=0),
             helper.make_node("Greater", ["c", "zero"], ["mask"], name="positive"),
             helper.make_node("ArgMax", ["c"], ["am"], name="argmax", axis=1, keepdims=1),
             helper.make_node("Mul", ["mx", "half"], ["thr"], name="threshold"),
             helper.make_node("Where", ["mask", "c", "thr"], ["kept"], name="where"),
             helper.make_node("Cast", ["am"], ["amf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Add", ["kept", "amf"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "masks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_scalar_bool_and_int64_tensors_cross_a_split(tmp_path):
    """A scalar keeps shape [] in the manifest and on the wire (numpy's ascontiguousarray made
    it [1] and the server refused it); bool and int64 tensors cross with their dtypes."""
    manifest, report = _check(_masks_onnx(tmp_path / "masks.onnx"), tmp_path, "split", [4])
    crossing = {t.name: (t.shape, t.dtype) for t in manifest.wire.request}
    assert crossing == {"c": ([1, 8, 8, 8], "float32"), "mx": ([], "float32"), "mask": ([1, 8, 8, 8], "bool"),
                        "am": ([1, 1, 8, 8], "int64")}
    assert report.check.agreement == 1.0 and report.check.outputs[0].max_abs_diff == 0.0


# ------------------------------------------------------------- export's own load check
def _broken_hand_recrop(path: Path) -> Path:
    """hand_recrop.tflite with its second channel PAD widened from 16 to 24 channels: the file
    imports (shapes are read from the tensors), but LiteRT cannot prepare the ADD that follows."""
    from optimizer.graph.tflite_flatbuffer import read_model, tflite_schema, write_model

    model = read_model(_fixture("hand_recrop").read_bytes())
    sg = model.subgraphs[0]
    pad = tflite_schema().BuiltinOperator.PAD
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    ops = [op for op in sg.operators if codes[op.opcodeIndex] == pad]
    paddings = sg.tensors[ops[1].inputs[1]]
    model.buffers[paddings.buffer].data = np.array([[0, 0], [0, 0], [0, 0], [0, 24]], np.int32).view(np.uint8).ravel()
    path.write_bytes(write_model(model))
    return path


def test_export_refuses_a_part_that_does_not_run(tmp_path, run_cli):
    from optimizer.plan import write_plan
    from optimizer.plan.manual_plan import plan_for_boundaries

    model = _broken_hand_recrop(tmp_path / "hand_recrop_broken.tflite")
    plan = write_plan(plan_for_boundaries(str(model), [15, 40]), tmp_path / "plan.json")
    res = run_cli("--quiet", "export", str(plan), "--out", str(tmp_path / "art"))
    assert res.exit_code == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "part stage1 (stage1.tflite) does not run in LiteRT" in lines[0]
    assert "node 7 (ADD, output 'add_1" in lines[0] and "choose other boundaries" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hand_recrop_broken.tflite", "plan.json"]


def test_an_onnx_part_onnxruntime_refuses_is_an_export_error_naming_its_node(tmp_path):
    """The form of the failure the sweep was built for: a part whose fixed shapes make a node's
    dimensions incompatible. onnxruntime refuses it at load; the error names the part, its file
    and the node, in one line."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.errors import PartLoadError
    from optimizer.plan.manifest import TensorSpec
    from optimizer.plan.part_load import check_part_runs

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["y"], name="p2o.Add.240")], "part",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("bias", TensorProto.FLOAT, [78], np.zeros(78, np.float32))])
    path = tmp_path / "stage1.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    spec = TensorSpec(name="x", signature_name="x", index=0, shape=[1, 40], dtype="float32")
    with pytest.raises(PartLoadError) as err:
        check_part_runs(path, "stage1", [spec])
    message = str(err.value)
    assert "\n" not in message and message.startswith("export: part stage1 (stage1.onnx) does not run in onnxruntime")
    assert "p2o.Add.240" in message and "choose other boundaries" in message


def test_export_notes_parts_without_a_kernel(tmp_path, run_cli):
    """MediaPipe's Landmarks2TransformMatrix has no LiteRT kernel here: export keeps the part and
    says it was not run; the part without it was run."""
    from optimizer.plan import write_plan
    from optimizer.plan.manual_plan import plan_for_boundaries

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = write_plan(plan_for_boundaries(str(_fixture("face_landmark_with_attention")), [44]), tmp_path / "plan.json")
    res = run_cli("export", str(plan), "--out", str(tmp_path / "art"))
    assert res.exit_code == 0, res.stderr
    assert "part stage1 was not run at export: LiteRT here has no kernel for its custom operator " \
           "Landmarks2TransformMatrix" in res.stderr
    assert "stage0 was not run" not in res.stderr


# ------------------------------------------------------------- the sweep
def test_sweep_boundaries_cover_the_kinds_of_cut():
    from optimizer.graph import load_graph
    from optimizer.runtime.cut_sweep import sweep_boundaries, sweep_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = load_graph(_fixture("ppocr_v4_rec"), "op", input_shapes=REC_SHAPE)
    chosen = sweep_boundaries(g)
    why = {b.why for b in chosen}
    assert [chosen[0].index, chosen[-1].index] == [0, 440] and len(chosen) - 2 >= 8
    assert {"inside a block", "after a reshape", "after a shape op", "inside a kernel", "spread"} <= why
    for b in chosen:
        if b.why == "after a shape op":
            assert g.layers[b.index - 1].op_type == "Shape"
        if b.why == "inside a block":
            assert len(g.cut_tensors(b.index)) > 1 and g.kernel_anchors[b.index] == b.index
    cases = sweep_cases([b.index for b in chosen], len(g))
    interior = len(chosen) - 2
    assert len([c for c in cases if c.kind == "split"]) == len(chosen)
    assert len([c for c in cases if len(c.cuts) == 1 and c.kind == "pipeline"]) == interior
    assert len([c for c in cases if len(c.cuts) == 2]) == (interior + 1) // 2


def test_export_sweep_command_and_resume(tmp_path, run_cli):
    model = _masks_onnx(tmp_path / "masks.onnx")
    journal = tmp_path / "sweep.jsonl"
    args = ["export-sweep", str(model), "--boundaries", "0,4,6,L", "--kinds", "split,pipeline3",
            "--journal", str(journal), "--json"]
    res = run_cli(*args)
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert [(r["kind"], r["cuts"], r["status"]) for r in out["results"]] == [
        ("split", [0], "passed"), ("split", [4], "passed"), ("split", [6], "passed"), ("split", [8], "passed"),
        ("pipeline", [4, 6], "passed")]
    assert len(journal.read_text().splitlines()) == 5
    lines = journal.read_text()
    res = run_cli(*args)  # resumed: every case is in the journal, nothing runs again
    assert res.exit_code == 0 and journal.read_text() == lines
    assert [r["seconds"] for r in json.loads(res.stdout)["results"]] == [r["seconds"] for r in out["results"]]


@pytest.mark.parametrize("args, words", [
    (["--boundaries", "0,x"], "'x' is not a boundary"), (["--boundaries", "0,99"], "99 is outside 0..8"),
    (["--kinds", "split,tree"], "unknown kind 'tree'"), (["--dtype", "int8"], "quantize it first"),
    (["--between", "0"], "out of range")])
def test_export_sweep_refuses_bad_options(tmp_path, run_cli, args, words):
    res = run_cli("export-sweep", str(_masks_onnx(tmp_path / "masks.onnx")), *args)
    assert res.exit_code == 2 and words in res.stderr, res.stderr


# ------------------------------------------------------------- INT8 parts aligned to the single file
@pytest.mark.slow
def test_int8_part_ending_at_a_pad_loads_and_equals_the_single_file(tmp_path):
    """The single-file INT8 MobileNetV2 fuses block_3_pad into its depthwise convolution; a stage
    ending at that PAD took its two sides' scales from different tensors, and XNNPACK refused it
    ('failed to delegate PAD node'). Now export loads it and the parts equal the single file."""
    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.runtime import run_plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_for_boundaries("mobilenet_v2", [17, 30], dtype="int8", variant={"input_size": 96})
        export_plan(plan, tmp_path / "art", samples=8, keep_reference=True)
        report = run_plan(plan, tmp_path / "art", frames=4, pin=False, check_min_agreement=1.0)
    assert report.check.agreement == 1.0 and report.check.outputs[0].max_abs_diff == 0.0


def test_int8_boundaries_inside_a_kernel_move_to_its_end(zoo_graph):
    """A split between block_8_depthwise_BN and its ReLU6 agreed with the single INT8 file on 75 %
    of frames (SQNR 19 dB): INT8 parts keep the kernel whole; a stage made only of fused operators
    is refused in one line."""
    from optimizer.errors import ModelFormatError
    from optimizer.plan.parts import PartRange, op_boundaries
    from optimizer.plan.kernel_cuts import whole_kernels

    g = zoo_graph("mobilenet_v2")
    names = [la.name for la in g.layers]
    dw, relu, project = (names.index(f"block_8_{s}") for s in ("depthwise", "depthwise_relu", "project"))

    def parts(*cuts: int) -> list[PartRange]:
        bounds = [0, *cuts, len(g)]
        return [PartRange(f"stage{k}", "stage", a, b - 1, a, b, "cpu", 1, "int8", "device")
                for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]

    moved, lines = whole_kernels(g, parts(relu), op_boundaries(g))
    assert [(p.first_op, p.end_op) for p in moved] == [(0, project), (project, len(g))]
    assert moved[0].last_layer == project - 1 and moved[1].first_layer == project
    assert len(lines) == 1 and "inside the kernel of 'block_8_depthwise'" in lines[0]
    assert whole_kernels(g, parts(project), op_boundaries(g)) == (parts(project), [])
    with pytest.raises(ModelFormatError, match="stage1 .* holds only operators fused into the kernel of 'block_8_depth"):
        whole_kernels(g, parts(dw + 1, relu), op_boundaries(g))
