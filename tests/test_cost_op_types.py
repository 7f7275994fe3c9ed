"""Operator types a delegate cannot run although it runs their op family (``unsupported_ops`` of a
device file, from the published delegate op lists): they fall back to the CPU as kernels of their
own, so the cost tables charge the partition boundary, and ``map`` moves a stage boundary there."""

from __future__ import annotations

import pytest

from optimizer.cost import build_cost_table
from optimizer.graph.layergraph import LayerSpec, build_graph
from optimizer.hardware.loader import load_device
from optimizer.hardware.schema import canonical_op_type


def _without_types(device):
    return device.model_copy(update={"processors": [p.model_copy(update={"unsupported_op_types": {}})
                                                    for p in device.processors]})


def _net(head: str = "RELU_0_TO_1", n_conv: int = 6):
    """Convolutions at 40x40x64 ending in a standalone activation of type ``head`` (a detector's
    hard-sigmoid score map)."""
    specs, prev = [], "x"
    for i in range(n_conv):
        specs.append(LayerSpec(f"conv{i}", "conv", "CONV_2D", (prev,), (f"t{i}",), ((40, 40, 64),),
                               macs=40 * 40 * 64 * 64 * 9, params=64 * 64 * 9))
        prev = f"t{i}"
    specs.append(LayerSpec("score", "act", head, (prev,), ("y",), ((40, 40, 64),)))
    return build_graph("scored", specs, [("x", (40, 40, 64))], ["y"], kernel_order=False)


def test_canonical_op_type():
    assert canonical_op_type("HardSigmoid") == "HARD_SIGMOID"
    assert canonical_op_type("RELU_0_TO_1") == "RELU_0_TO_1"
    assert canonical_op_type("hard_swish") == "HARD_SWISH"


@pytest.mark.parametrize("device, proc", [("pixel6", "tpu"), ("galaxy_s22", "dsp")])
def test_unsupported_type_falls_back_and_splits_the_stage(device, proc):
    dev = load_device(device)
    graph = _net()
    after, before = build_cost_table(graph, dev, "int8"), build_cost_table(graph, _without_types(dev), "int8")
    j, last = after.processor_index(proc), graph.layers[-1].index
    assert before.supported[last, j] and not after.supported[last, j]
    # the activation alone costs nothing on the CPU when fused, but the handed-over kernel is a memory pass
    assert after.fallback_cpu_s[last] > 0 and after.latency_s[last, j] > after.fallback_cpu_s[last]
    L = len(graph)
    extra = float(after.stage_seconds(0, L, j) - before.stage_seconds(0, L, j))
    lat, spb = after.handoff_latency_s[j, 0], after.handoff_s_per_byte[j, 0]
    # one more boundary (sync + copy of the 40x40x64 INT8 tensor), one more CPU kernel
    assert extra >= lat + graph.cut_bytes_array("int8")[last] * spb


def test_map_moves_the_stage_boundary_to_the_unsupported_operator():
    """Without the op-type list the best two-stage pipeline on pixel6 runs the score activation in
    the TPU stage (no partition charged); with it, the stage boundary moves to just before it, so the
    TPU stage keeps one partition and the activation runs on the CPU stage."""
    from optimizer.search import solve
    from optimizer.search.pipeline import PipelineProblem

    dev = load_device("pixel6")
    graph = _net()
    score = graph.layers[-1].index
    plans = {}
    for name, device in (("with", dev), ("without", _without_types(dev))):
        table = build_cost_table(graph, device, "int8")
        problem = PipelineProblem(table, stages=2)
        res = solve(problem, "exact")
        stages = res.best.decision["stages"]
        plans[name] = (stages, table)
    tpu_of = {name: [s for s in stages if s["processor"] == "tpu"] for name, (stages, _) in plans.items()}
    assert any(s["first_layer"] <= score <= s["last_layer"] for s in tpu_of["without"])
    assert tpu_of["with"] and not any(s["first_layer"] <= score <= s["last_layer"] for s in tpu_of["with"])
    # judged with the op-type charges, the plan that ignored them is slower
    table = plans["with"][1]
    ignored = max(float(table.stage_seconds(s["first_layer"], s["last_layer"] + 1, table.processor_index(s["processor"])))
                  for s in plans["without"][0])
    chosen = max(float(table.stage_seconds(s["first_layer"], s["last_layer"] + 1, table.processor_index(s["processor"])))
                 for s in plans["with"][0])
    assert chosen < ignored


def test_shipped_device_lists_name_their_sources():
    for name in ("pixel6", "galaxy_s22", "galaxy_s20", "pixel4"):
        dev = load_device(name)
        listed = [p for p in dev.processors if p.unsupported_op_types]
        assert listed, name
        for p in listed:
            assert all(t == canonical_op_type(t) for types in p.unsupported_op_types.values() for t in types)
    from optimizer import shipped

    assert "hexagon/README.md" in shipped.find("devices", "galaxy_s22").read_text()
