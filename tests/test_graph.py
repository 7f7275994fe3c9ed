"""LayerGraph semantics: DAG cuts, memory, block view, immutability."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from optimizer.errors import ConfigError, ModelFormatError
from optimizer.graph import LayerSpec, build_graph


def _residual_graph():
    """x -> a -> b -> add(a, b... ) : a skip from a's output to the add."""
    specs = [
        LayerSpec("a", "conv", "Conv2D", ("x",), ("ta",), ((4, 4, 8),), macs=100, params=10, block="b1"),
        LayerSpec("b", "conv", "Conv2D", ("ta",), ("tb",), ((4, 4, 8),), macs=200, params=20, block="b2"),
        LayerSpec("c", "act", "ReLU", ("tb",), ("tc",), ((4, 4, 8),), block="b2"),
        LayerSpec("add", "add", "Add", ("ta", "tc"), ("td",), ((4, 4, 8),), block="b2"),
        LayerSpec("fc", "dense", "Dense", ("td",), ("y",), ((10,),), macs=1280, params=1290, block="head"),
    ]
    return build_graph("toy", specs, [("x", (4, 4, 3))], ["y"])


def test_cut_bytes_counts_skip_connections():
    g = _residual_graph()
    e = 4 * 4 * 8
    # boundary 0: input; 1: ta; 2: ta (skip) + tb; 3: ta + tc; 4: td; 5: y (graph output)
    expected = [48, e, 2 * e, 2 * e, e, 10]
    assert [g.cut_bytes(i, "int8") for i in range(len(g) + 1)] == expected
    assert g.cut_bytes(2, "fp32") == 4 * 2 * e
    assert list(g.cut_bytes_array("fp16")) == [2 * v for v in expected]
    assert {t.name for t in g.cut_tensors(2)} == {"ta", "tb"}


def test_memory_is_weights_plus_peak_live():
    g = _residual_graph()
    e = 4 * 4 * 8
    # while 'b' runs: ta (still needed by add) + tb; while 'add' runs: ta + tc + td
    assert g.live_bytes_array("int8")[1] == 2 * e
    assert g.live_bytes_array("int8")[3] == 3 * e
    assert g.memory(1, 4, "int8") == 20 + 3 * e
    assert g.memory(0, 1, "fp32") == 4 * 10 + 4 * (48 + e)
    with pytest.raises(ConfigError):
        g.memory(3, 3)


def test_block_view_merges_consecutive_labels_and_keeps_cuts():
    g = _residual_graph()
    b = g.with_granularity("block")
    assert [la.name for la in b.layers] == ["b1", "b2", "head"]
    assert b.layers[1].macs == 200 and b.layers[1].members == ("b", "c", "add")
    assert b.total_macs == g.total_macs and b.total_params == g.total_params
    # block boundaries are a subset of op boundaries with the same cut
    assert [b.cut_bytes(i) for i in range(4)] == [g.cut_bytes(i) for i in (0, 1, 4, 5)]


def test_graph_is_immutable():
    g = _residual_graph()
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.layers[0].macs = 5  # type: ignore[misc]
    assert isinstance(g.layers, tuple)


def test_reading_an_unproduced_tensor_is_an_error():
    with pytest.raises(ModelFormatError, match="reads tensor 'nope'"):
        build_graph("bad", [LayerSpec("a", "act", "ReLU", ("nope",), ("t",), ((1,),))], [("x", (1,))], ["t"])


def _brute_force_cut(graph, i: int, dtype: str) -> int:
    """Every tensor produced before boundary i and consumed at or after it, by walking layers."""
    n = len(graph.layers)
    produced_before = set(graph.inputs) | {t for la in graph.layers[:i] for t in la.outputs}
    needed_after = {t for la in graph.layers[i:] for t in la.inputs} | set(graph.outputs)
    crossing = produced_before & needed_after
    if i == n:
        crossing = set(graph.outputs)
    return sum(graph.tensors[t].nbytes(dtype) for t in crossing)


@pytest.mark.slow
def test_resnet50_cut_bytes_matches_brute_force_inside_residual_blocks(zoo_graph):
    g = zoo_graph("resnet50")
    cut = g.cut_bytes_array("int8")
    brute = np.array([_brute_force_cut(g, i, "int8") for i in range(len(g) + 1)])
    np.testing.assert_array_equal(cut, brute)
    # a boundary inside a bottleneck: after a conv that is followed by more convs of the
    # same block must carry the block input (skip) too, so it exceeds that layer's output
    adds = [la.index for la in g.layers if la.op == "add"]
    first_add = adds[1]
    inside = first_add - 2  # between the block's last conv/bn and its add
    layer_out = g.layers[inside - 1].output_bytes("int8")
    assert g.cut_bytes(inside, "int8") > layer_out
    assert g.cut_bytes(inside, "int8") == brute[inside]
