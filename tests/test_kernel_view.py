"""The kernel view: ops a runtime fuses (batch-norm, activation, reshape) belong to the kernel of the
op that produces their input, are listed right after it, and no kernel-view cut separates them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optimizer.cost import build_cost_table
from optimizer.graph import LayerSpec, build_graph, load_graph
from optimizer.plan import read_plan
from optimizer.plan.parts import kernel_splits, plan_parts


def _towers():
    """Two conv -> BN -> ReLU towers listed interleaved (as Keras lists SSD box/class heads), a conv
    whose output has two readers (nothing fuses into it) and a ReLU on a graph output."""
    s = (4, 4, 8)
    specs = [
        LayerSpec("stem", "conv", "Conv2D", ("x",), ("t0",), (s,), macs=96, params=32),
        LayerSpec("box", "conv", "Conv2D", ("t0",), ("b1",), (s,), macs=512, params=72),
        LayerSpec("cls", "conv", "Conv2D", ("t0",), ("c1",), (s,), macs=512, params=72),
        LayerSpec("box_bn", "norm", "BatchNormalization", ("b1",), ("b2",), (s,), params=32),
        LayerSpec("cls_bn", "norm", "BatchNormalization", ("c1",), ("c2",), (s,), params=32),
        LayerSpec("box_relu", "act", "ReLU", ("b2",), ("b3",), (s,)),
        LayerSpec("cls_relu", "act", "ReLU", ("c2",), ("c3",), (s,)),
        LayerSpec("add", "add", "Add", ("b3", "c3"), ("y",), (s,)),
        LayerSpec("out_relu", "act", "ReLU", ("y",), ("z",), (s,)),
    ]
    return build_graph("towers", specs, [("x", (4, 4, 3))], ["y", "z"])


def test_fused_ops_follow_their_kernel_and_the_kernel_view_merges_them():
    g = _towers()
    assert [la.name for la in g.layers] == ["stem", "box", "box_bn", "box_relu", "cls", "cls_bn", "cls_relu",
                                            "add", "out_relu"]
    assert g.kernel_anchors.tolist() == [0, 1, 1, 1, 4, 4, 4, 7, 8]  # y is a graph output: out_relu stays apart
    k = g.with_granularity("kernel")
    assert [(la.name, la.op, la.members) for la in k.layers] == [
        ("stem", "conv", ("stem",)), ("box", "conv", ("box", "box_bn", "box_relu")),
        ("cls", "conv", ("cls", "cls_bn", "cls_relu")), ("add", "add", ("add",)), ("out_relu", "act", ("out_relu",))]
    assert k.total_macs == g.total_macs and k.total_params == g.total_params
    # kernel boundaries are op boundaries 0, 1, 4, 7, 8, 9 with the same cuts
    assert [k.cut_bytes(i) for i in range(len(k) + 1)] == [g.cut_bytes(i) for i in (0, 1, 4, 7, 8, 9)]
    assert k.op_view is g


def test_an_op_read_twice_or_a_multi_input_op_is_not_fused():
    s = (2, 2, 4)
    specs = [
        LayerSpec("conv", "conv", "Conv2D", ("x",), ("a",), (s,), macs=64),
        LayerSpec("relu", "act", "ReLU", ("a",), ("b",), (s,)),  # 'a' also read by the add: not fused
        LayerSpec("add", "add", "Add", ("a", "b"), ("c",), (s,)),
        LayerSpec("flat", "reshape", "Reshape", ("c",), ("d",), ((16,),)),
    ]
    g = build_graph("skip", specs, [("x", (2, 2, 3))], ["d"])
    assert g.kernel_anchors.tolist() == [0, 1, 2, 2]
    assert len(g.with_granularity("kernel")) == 3


@pytest.mark.parametrize("model", ["ssd_resnet50_fpn", "ssd_mobilenet_v2_fpnlite"])
def test_kernel_view_costs_what_the_op_view_costs(model):
    g = load_graph(model)
    k = g.with_granularity("kernel")
    assert len(k) < len(g) / 2 and k.total_macs == g.total_macs
    a = np.asarray(g.kernel_anchors)
    assert np.all(a[1:] >= a[:-1]), "a kernel's members are consecutive in the op view"
    op, ker = build_cost_table(g, "pixel6", "int8"), build_cost_table(k, "pixel6", "int8")
    np.testing.assert_allclose(ker.latency_s.sum(axis=0), op.latency_s.sum(axis=0), rtol=1e-12)


def test_map_cuts_between_kernels_by_default_and_export_names_an_op_plan_cutting_one(run_cli, tmp_path):
    """ssd_resnet50_fpn on pixel6: the op-view optimum cut a convolution from its batch-norm (layers
    122|123, conv4_block5_1); the kernel-view plan reaches the same throughput with clean cuts."""
    plans = {}
    for view in ("kernel", "op"):
        out = tmp_path / f"{view}.json"
        extra = () if view == "kernel" else ("--granularity", "op")
        res = run_cli("--quiet", "map", "ssd_resnet50_fpn", "--device", "pixel6", "--solver", "exact",
                      "--out", str(out), *extra)
        assert res.exit_code == 0, res.stderr
        plans[view] = read_plan(out)
    kplan = plans["kernel"]
    assert kplan.model.granularity == "kernel"
    assert kplan.predicted.throughput_fps == pytest.approx(plans["op"].predicted.throughput_fps, rel=0.02)
    g = load_graph("ssd_resnet50_fpn")
    assert kernel_splits(g.with_granularity("kernel"), plan_parts(kplan, g.with_granularity("kernel"))) == []
    # an op-view plan cutting conv4_block5_1_conv from its batch-norm is named, part and op
    bad = json.loads((tmp_path / "op.json").read_text())
    names = [la.name for la in g.layers]
    cut, clean = names.index("conv4_block5_1_bn"), names.index("conv5_block1_1_conv")
    bad["stages"][0]["last_layer"], bad["stages"][1]["first_layer"] = cut - 1, cut
    bad["stages"][1]["last_layer"], bad["stages"][2]["first_layer"] = clean - 1, clean
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    lines = kernel_splits(g, plan_parts(read_plan(tmp_path / "bad.json"), g))
    assert len(lines) == 1 and lines[0].startswith("stage1 starts at 'conv4_block5_1_bn' (norm)")
    assert "'conv4_block5_1_conv'" in lines[0] and "--granularity kernel" in lines[0]


@pytest.mark.slow
def test_a_kernel_view_ssd_pipeline_computes_exactly_what_the_single_model_computes(run_cli, tmp_path):
    """Before the kernel view, the default (op) plan of ssd_mobilenet_v2_fpnlite at 320 cut inside
    kernels and its parts agreed with the single-file INT8 model on 55 % of frames (SQNR 14 dB)."""
    plan, out = tmp_path / "map.json", tmp_path / "art"
    base = ("ssd_mobilenet_v2_fpnlite", "--variant", "input_size=128", "--device", "pixel6")
    assert run_cli("--quiet", "map", *base, "--generations", "40", "--out", str(plan)).exit_code == 0
    assert len(read_plan(plan).stages) >= 2
    res = run_cli("export", str(plan), "--out", str(out), "--samples", "8")  # exact equality: any calibration
    assert res.exit_code == 0, res.stderr
    assert "note:" not in res.stderr
    res = run_cli("run", str(plan), "--artifacts", str(out), "--check", "--frames", "4", "--json")
    assert res.exit_code == 0, res.stderr
    check = json.loads(res.stdout)["check"]
    assert check["agreement"] == 1.0
    assert all(o["max_abs_diff"] == 0 for o in check["outputs"])
