"""Plan export (sub-model artifacts + manifest) and the threaded pipeline runtime.

The slow part exports one INT8 three-stage pipeline of MobileNetV2 (64 px) whose two cuts both
fall inside inverted residual block 2: the skip tensor crosses both cuts, so the middle stage
never reads it and the runtime must route it from stage 0 to stage 2. The export ships the
single-file INT8 model of the same weights and calibration (``keep_reference``); the threaded
pipeline must agree with it on 200 inputs (top-1 >= 99 %, SQNR printed). FP32 equivalence is
checked in ``test_serve.py`` (MobileNetV2 split) and ``test_runtime_equivalence.py`` (ResNet-50).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from optimizer.errors import ConfigError, InputFileError
from optimizer.plan.parts import op_boundaries, part_io

from _cli_checks import assert_one_line_exit_2
from _deploy_cache import run_single_file, sqnr_db

SIZE = 64
CUTS = [20, 23]  # after block_2_expand_relu, after block_2_depthwise_relu
SKIP = "block_1_project_BN:0"
N = 200


def test_manifest_schema_file_is_current():
    from optimizer.plan.manifest import manifest_json_schema, shipped_manifest_schema

    assert shipped_manifest_schema() == json.loads(json.dumps(manifest_json_schema()))


def test_block_boundaries_map_to_the_first_op_of_each_block(zoo_graph):
    op = zoo_graph("mobilenet_v2", "op", input_size=SIZE)
    block = zoo_graph("mobilenet_v2", "block", input_size=SIZE)
    ob = op_boundaries(block)
    assert ob[0] == 0 and ob[-1] == len(op) and len(ob) == len(block) + 1
    for i, layer in enumerate(block.layers):
        assert op.layers[ob[i]].name == layer.members[0]
        # a block boundary crosses the same bytes in both views
        assert op.cut_bytes(ob[i]) == block.cut_bytes(i)


def test_part_io_is_the_dag_cut_inside_a_residual_block(zoo_graph):
    g = zoo_graph("mobilenet_v2", "op", input_size=SIZE)
    _, head_out = part_io(g, 0, CUTS[0])
    assert head_out == sorted((t.name for t in g.cut_tensors(CUTS[0])), key=lambda n: g.tensors[n].producer)
    assert SKIP in head_out and len(head_out) == 2
    mid_in, mid_out = part_io(g, CUTS[0], CUTS[1])
    assert SKIP not in mid_in and SKIP not in mid_out  # passes through the middle stage
    tail_in, tail_out = part_io(g, CUTS[1], len(g))
    assert SKIP in tail_in and tail_out == list(g.outputs)


# ------------------------------------------------------------------ slow: a real export
@pytest.fixture(scope="module")
def pipeline_export(tmp_path_factory):
    from optimizer.plan import write_plan
    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries

    d = tmp_path_factory.mktemp("pipe")
    plan = plan_for_boundaries("mobilenet_v2", CUTS, dtype="int8", variant={"input_size": SIZE})
    plan_file = write_plan(plan, d / "plan.json")
    manifest = export_plan(plan, d / "art", seed=0, samples=32, keep_reference=True)
    x = np.random.default_rng(42).uniform(-1, 1, (N, SIZE, SIZE, 3)).astype(np.float32)
    return {"plan": plan, "plan_file": plan_file, "dir": d / "art", "manifest": manifest, "x": x,
            "root": d}


@pytest.mark.slow
def test_manifest_validates_against_the_shipped_schema_and_hashes(pipeline_export):
    import jsonschema

    from optimizer.fileio import sha256_file
    from optimizer.plan.manifest import shipped_manifest_schema

    d = pipeline_export["dir"]
    from optimizer.fileio import _umask

    assert d.stat().st_mode & 0o777 == 0o777 & ~_umask()  # an ordinary folder, not mkdtemp's 0700
    data = json.loads((d / "manifest.json").read_text())
    jsonschema.validate(data, shipped_manifest_schema())
    assert sorted(p.name for p in d.iterdir()) == ["manifest.json", "reference.int8.tflite", "stage0.tflite",
                                                    "stage1.tflite", "stage2.tflite"]
    m = pipeline_export["manifest"]
    for part in m.parts:
        assert part.sha256 == sha256_file(d / part.file)
        assert part.threads == 1 and part.delegate == "xnnpack" and part.dtype == "int8"
        assert all(t.dtype == "int8" and t.quantization is not None for t in part.inputs + part.outputs)
    # at every cut the consumer reads with exactly the producer's quantization parameters
    produced = {t.name: t.quantization for p in m.parts for t in p.outputs}
    for part in m.parts[1:]:
        for t in part.inputs:
            assert t.quantization == produced[t.name]
    assert m.calibration.aligned_to_single_file and m.calibration.samples == 32
    assert [t.name for t in m.parts[0].outputs] == [SKIP, "block_2_expand_relu:0"]
    assert SKIP in [t.name for t in m.parts[2].inputs]
    assert m.model.weight_seed == 0 and m.model.ops == 156


@pytest.mark.slow
def test_threaded_int8_pipeline_agrees_with_the_single_file_int8_model(pipeline_export):
    from optimizer.plan.keras_model import load_plan_model
    from optimizer.runtime import run_plan

    m, x = pipeline_export["manifest"], pipeline_export["x"]
    rep = run_plan(pipeline_export["plan"], pipeline_export["dir"], frames=N, input=x, keep_outputs=True)
    parts = rep.outputs[m.outputs[0].name]
    single = run_single_file(pipeline_export["dir"] / m.reference.file, x)
    keras_model, _, _ = load_plan_model(pipeline_export["plan"], seed=0)
    ref = np.asarray(keras_model.predict(x, batch_size=50, verbose=0))
    agree = float(np.mean(parts.argmax(1) == single.argmax(1)))
    print(f"\nmobilenet_v2 int8 3-stage pipeline (cuts {CUTS}): top-1 agreement with single-file INT8 "
          f"{agree:.1%} on {N} inputs; SQNR parts vs single-file {sqnr_db(single, parts):.1f} dB, parts vs "
          f"float {sqnr_db(ref, parts):.1f} dB, single-file vs float {sqnr_db(ref, single):.1f} dB")
    assert np.abs(ref).max() > 0.1  # a live signal (BN statistics re-estimated), not ~1e-11
    assert len(set(single.argmax(1))) > 10  # the inputs really are classified differently
    assert agree >= 0.99
    assert rep.frames == N and rep.throughput_fps > 0
    assert rep.latency_s["p50"] <= rep.latency_s["p90"] <= rep.latency_s["p99"]
    assert [s.name for s in rep.stages] == ["stage0", "stage1", "stage2"]
    assert all(s.busy_s > 0 for s in rep.stages)
    assert [s.cores for s in rep.stages][:2] == [[0], [1]]  # round-robin over this host's CPUs


@pytest.mark.slow
def test_cli_run_reports_json(pipeline_export, run_cli, tmp_path):
    np.save(tmp_path / "in.npy", pipeline_export["x"][:3])  # cycled over 5 frames
    res = run_cli("run", pipeline_export["plan_file"], "--artifacts", pipeline_export["dir"],
                  "--frames", "5", "--input", tmp_path / "in.npy", "--json")
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["frames"] == 5 and len(rep["stages"]) == 3 and rep["throughput_fps"] > 0


@pytest.mark.slow
def test_bad_artifacts_and_inputs_are_one_line_errors(pipeline_export, run_cli, tmp_path):
    src = pipeline_export["dir"]
    plan_file = pipeline_export["plan_file"]
    # sha256 mismatch
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    blob = bytearray((bad / "stage1.tflite").read_bytes())
    blob[-1] ^= 0xFF
    (bad / "stage1.tflite").write_bytes(bytes(blob))
    assert_one_line_exit_2(run_cli("run", plan_file, "--artifacts", bad, "--frames", "2"), "stage1.tflite", "sha256")
    # missing file
    (bad / "stage1.tflite").unlink()
    assert_one_line_exit_2(run_cli("run", plan_file, "--artifacts", bad, "--frames", "2"), "stage1.tflite", "missing")
    # missing directory
    assert_one_line_exit_2(run_cli("run", plan_file, "--artifacts", tmp_path / "nope"), "no such artifacts directory")
    # input of the wrong shape
    np.save(tmp_path / "wrong.npy", np.zeros((2, 32, 32, 3), np.float32))
    assert_one_line_exit_2(run_cli("run", plan_file, "--artifacts", src, "--input", tmp_path / "wrong.npy"),
                     "wrong.npy", "[N, 64, 64, 3]")
    # artifacts of another plan
    from optimizer.plan import write_plan
    from optimizer.plan.manual_plan import plan_for_boundaries

    other = write_plan(plan_for_boundaries("mobilenet_v2", [30], dtype="fp32", variant={"input_size": SIZE}),
                       tmp_path / "other.json")
    assert_one_line_exit_2(run_cli("run", other, "--artifacts", src), "another plan")


@pytest.mark.slow
def test_failed_export_leaves_nothing_behind(pipeline_export, run_cli, tmp_path):
    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries

    np.savez(tmp_path / "calib.npz", x=np.zeros((4, 32, 32, 3), np.float32))
    plan = plan_for_boundaries("mobilenet_v2", [20], dtype="int8", variant={"input_size": SIZE})
    out = tmp_path / "out"
    with pytest.raises(InputFileError, match=r"calib.npz.*\[N, 64, 64, 3\]"):
        export_plan(plan, out, calib=tmp_path / "calib.npz")
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    # a directory that is not an export is never overwritten
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not a dnnplan export"):
        export_plan(plan, tmp_path / "mine")
    res = run_cli("export", pipeline_export["plan_file"], "--out", tmp_path / "mine")
    assert_one_line_exit_2(res, "not a dnnplan export")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


SHARED_HEAD_VARIANT = {"input_size": 128, "alpha": 0.25, "depth": 32}


@pytest.mark.slow
def test_a_shared_head_call_cut_off_from_its_other_calls_is_aligned_to_the_single_file(tmp_path):
    """ssd_mobilenet_v1_fpn's box head is one layer called on every FPN level. Cut so that stage0
    holds its P3 call and stage1 the others, TensorFlow names that call ``BoxHead_1`` in stage0 and
    ``BoxHead_9`` in the single file (where ``BoxHead_1`` is the P7 call): matched by name, the
    part's convolution kept its own output scale and bias, and the box encodings agreed with the
    single file at SQNR 29 dB (640x640, three stages: top-1 75 %). Run on the narrow variant (same
    layers and shared heads); the full-width one is ``benchmarks/bench_test_sweeps.py --only
    shared_head``."""
    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.runtime import run_plan

    plan = plan_for_boundaries("ssd_mobilenet_v1_fpn", [49], dtype="int8", granularity="kernel",
                               variant=SHARED_HEAD_VARIANT)
    m = export_plan(plan, tmp_path / "art", samples=8, keep_reference=True)
    assert "BoxHead_reshape_P3:0" in [t.name for t in m.parts[0].outputs]  # P3's call before the cut
    assert [t.name for t in m.parts[1].outputs] == ["box_encodings:0", "class_predictions_with_background:0"]
    x = np.random.default_rng(3).uniform(-1, 1, (4, 128, 128, 3)).astype(np.float32)
    check = run_plan(plan, tmp_path / "art", frames=4, input=x, check_min_agreement=0.99).check
    assert check is not None and check.passed
    diffs = {o.name: o.max_abs_diff for o in check.outputs}
    assert diffs == {"box_encodings:0": 0.0, "class_predictions_with_background:0": 0.0}, diffs
