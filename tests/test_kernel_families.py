"""Kernel families (graph/kernel_families.py) and the efficiency look-up that uses them."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from optimizer.cost import build_cost_table
from optimizer.graph import load_graph
from optimizer.graph.kernel_families import KERNEL_FAMILIES, kernel_family, kernel_family_index
from optimizer.hardware import load_device


@pytest.fixture(scope="module")
def mobilenet_v2():
    return load_graph("mobilenet_v2", "op")


def test_mobilenet_v2_kernels(mobilenet_v2):
    """MobileNetV2: one 3x3 stem conv on RGB, 17 depthwise convs (4 of stride 2), 1x1 convs elsewhere."""
    g = mobilenet_v2
    fams = Counter(kernel_family(la, g.fmt) for la in g.layers)
    assert fams["convstem"] == 1 and fams["convkxk"] == 0
    assert fams["dwconv_s1"] + fams["dwconv_s2"] == 17
    assert fams["dwconv_s2"] == 4
    assert fams["conv1x1"] == 34
    assert fams["dense"] == 1
    by_name = {la.name: kernel_family(la, g.fmt) for la in g.layers}
    assert by_name["Conv1"] == "convstem"
    assert by_name["block_1_depthwise"] == "dwconv_s2"
    assert by_name["block_2_depthwise"] == "dwconv_s1"
    assert by_name["block_1_expand"] == "conv1x1"


def test_channels_first_onnx_agrees_with_keras(tmp_path, mobilenet_v2):
    """The same network exported to ONNX (channels-first) gets the same kernel counts."""
    pytest.importorskip("tf2onnx")
    from optimizer.graph.convert import keras_to_onnx  # noqa: PLC0415
    from optimizer.graph.zoo import build_keras

    path = tmp_path / "m.onnx"
    keras_to_onnx(build_keras("mobilenet_v2"), path)
    onnx_graph = load_graph(str(path), "op")
    assert onnx_graph.fmt == "onnx"
    keras_counts = Counter(kernel_family(la, mobilenet_v2.fmt) for la in mobilenet_v2.layers)
    onnx_counts = Counter(kernel_family(la, onnx_graph.fmt) for la in onnx_graph.layers)
    for fam in ("convstem", "conv1x1", "convkxk", "dwconv_s1", "dwconv_s2"):
        assert onnx_counts[fam] == keras_counts[fam], fam


def test_index_matches_names(mobilenet_v2):
    idx = kernel_family_index(mobilenet_v2)
    assert len(idx) == len(mobilenet_v2.layers)
    assert [KERNEL_FAMILIES[i] for i in idx[:4]] == [kernel_family(la, mobilenet_v2.fmt) for la in mobilenet_v2.layers[:4]]


def test_kernel_entry_overrides_coarse_family(tmp_path, mobilenet_v2):
    """A device's efficiency table may give a kernel family; it overrides the coarse op family only
    for that kernel: halving dwconv_s2 slows exactly the stride-2 depthwise layers."""
    import yaml

    base = yaml.safe_load(open(_shipped("pixel6")))
    for proc in base["processors"]:
        if proc["name"] == "cpu":
            proc["efficiency"] = {**proc["efficiency"], "dwconv_s2": proc["efficiency"]["dwconv"] / 2}
    path = tmp_path / "pixel6_dw.yaml"
    path.write_text(yaml.safe_dump(base))
    before = build_cost_table(mobilenet_v2, load_device("pixel6"), "fp32")
    after = build_cost_table(mobilenet_v2, load_device(str(path)), "fp32")
    cpu = before.processor_index("cpu")
    changed = ~np.isclose(before.latency_s[:, cpu], after.latency_s[:, cpu])
    fams = np.array([kernel_family(la, mobilenet_v2.fmt) for la in mobilenet_v2.layers])
    assert changed.any()
    assert set(fams[changed]) == {"dwconv_s2"}
    assert (after.latency_s[changed, cpu] > before.latency_s[changed, cpu]).all()


def test_unknown_kernel_key_refused(tmp_path):
    import yaml

    from optimizer.errors import DnnplanError

    base = yaml.safe_load(open(_shipped("pixel6")))
    base["processors"][0]["efficiency"]["conv5x5"] = 0.5
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(base))
    with pytest.raises(DnnplanError, match="conv5x5.*kernel family"):
        load_device(str(path))


def _shipped(name: str) -> str:
    from optimizer.shipped import shipped_root

    return str(shipped_root() / "devices" / f"{name}.yaml")


def test_detection_postprocess_is_its_own_cpu_only_family():
    """A TFLite file's TFLite_Detection_PostProcess imports as a custom op: CPU-only everywhere,
    kernel family postprocess; any other custom op is 'other'."""
    from optimizer.graph import LayerSpec, build_graph

    specs = [LayerSpec("nms", "custom", "TFLite_Detection_PostProcess", ("x",), ("y",), ((100, 4),)),
             LayerSpec("mystery", "custom", "MyOp", ("y",), ("z",), ((100, 4),))]
    g = build_graph("det", specs, [("x", (1917, 4))], ["z"], fmt="tflite")
    assert [kernel_family(la, g.fmt) for la in g.layers] == ["postprocess", "other"]
    dev = load_device("pixel6")
    assert [p.name for p in dev.processors if p.supports("custom", "int8")] == ["cpu"]


def test_matrix_products_on_several_rows_are_matmul():
    """bert_small's projections act on [tokens, hidden] rows (a GEMM), its classifier on one row
    (a GEMV): ``matmul`` and ``dense``. A table without ``matmul`` gives it ``conv1x1``'s
    efficiency (the same GEMM kernels), else the coarse ``dense`` one; an own entry wins."""
    from optimizer.hardware.schema import Processor

    g = load_graph("bert_small", "op")
    fams = {la.name: kernel_family(la, g.fmt) for la in g.layers if la.op == "dense"}
    assert set(fams.values()) == {"matmul", "dense"}
    one_row = [n for n, f in fams.items() if f == "dense"]
    assert all(len(g.layers[[la.name for la in g.layers].index(n)].output_shapes[0]) == 1 for n in one_row)
    assert sum(f == "matmul" for f in fams.values()) >= 4 * len(one_row)
    pixel4_cpu = load_device("pixel4").processor("cpu")
    assert pixel4_cpu.op_efficiency("dense", None, "matmul") == pixel4_cpu.efficiency["conv1x1"]
    assert pixel4_cpu.op_efficiency("dense", None, "dense") == pixel4_cpu.efficiency["dense"]
    pixel6_cpu = load_device("pixel6").processor("cpu")  # coarse table: no conv1x1, matmul = dense
    assert pixel6_cpu.op_efficiency("dense", None, "matmul") == pixel6_cpu.efficiency["dense"]
    own = Processor.model_validate({**pixel4_cpu.model_dump(by_alias=True, exclude_none=True),
                                    "efficiency": {**pixel4_cpu.efficiency, "matmul": 0.5}})
    assert own.op_efficiency("dense", None, "matmul") == 0.5
