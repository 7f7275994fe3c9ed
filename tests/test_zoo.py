"""The model zoo: published totals, torchvision block counts, structure of the other networks.

Published figures are hard-coded here (not read back from the builders' REFERENCE), each at
224x224 with 1000 classes: torchvision's model docs (GFLOPS column = multiply-accumulates)
and the MobileNetV1 / EfficientNet papers.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from optimizer.errors import ConfigError
from optimizer.graph.zoo import builder_names

slow = pytest.mark.slow

# name: (MACs, params)
PUBLISHED = {
    "alexnet": (0.71e9, 61.1e6),
    "vgg11": (7.61e9, 132.9e6),
    "vgg13": (11.31e9, 133.0e6),
    "vgg16": (15.47e9, 138.4e6),
    "mobilenet_v1": (569e6, 4.2e6),
    "mobilenet_v2": (300e6, 3.5e6),
    "resnet50": (4.09e9, 25.6e6),
    "efficientnet_b0": (390e6, 5.3e6),
}
BIG = {"alexnet", "vgg11", "vgg13", "vgg16", "ssd_mobilenet_v1_fpn", "ssd_resnet50_fpn"}
# torchvision module-list lengths (features modules one each, avgpool, classifier modules)
TORCHVISION_UNITS = {"alexnet": 21, "vgg11": 29, "vgg13": 33, "vgg16": 39, "mobilenet_v2": 21}
EXPECTED_ZOO = {
    "alexnet", "vgg11", "vgg13", "vgg16", "mobilenet_v1", "mobilenet_v2", "resnet50",
    "slimmable_resnet50", "efficientnet_b0", "ssd_mobilenet_v1_fpn", "ssd_mobilenet_v2_fpnlite",
    "ssd_resnet50_fpn", "retinaface_mobilenet", "arcface_mobilenet", "efficientdet_lite0",
    "bert_small",
}
TASKS = {"classification", "detection", "face_detection", "embedding", "nlp"}


def _params(names):
    return [pytest.param(n, marks=slow) if n in BIG else n for n in names]


def _within(value: float, ref: float, tol: float) -> bool:
    return abs(value - ref) <= tol * ref


# --- contract (no TensorFlow) ------------------------------------------------------------

def test_zoo_has_every_network():
    assert EXPECTED_ZOO <= set(builder_names())


@pytest.mark.parametrize("name", sorted(EXPECTED_ZOO))
def test_builder_contract(name):
    mod = importlib.import_module(f"models.{name}")
    assert mod.NAME == name
    assert mod.TASK in TASKS
    assert isinstance(mod.INPUT_SIZE, int) and mod.INPUT_SIZE > 0
    assert {"macs", "params", "source"} <= set(mod.REFERENCE) and mod.REFERENCE["source"]
    if mod.TASK == "nlp":
        assert mod.PREPROCESS["kind"] == "tokens" and mod.PREPROCESS["vocab_size"] > 0
    else:
        assert mod.PREPROCESS["layout"] == "NHWC"
        assert len(mod.PREPROCESS["mean"]) == len(mod.PREPROCESS["std"]) == 3
    assert callable(mod.build) and callable(mod.block_of)
    assert mod.__doc__ and len(mod.__doc__) > 200  # cites the published structure/figures


def test_importing_builders_does_not_load_tensorflow():
    code = ("import sys\nfrom optimizer.graph.zoo import builder, builder_names\n"
            "for n in builder_names(): builder(n)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- published totals and torchvision block counts ---------------------------------------

@pytest.mark.parametrize("name", _params(PUBLISHED))
def test_totals_match_published_figures(zoo_graph, name):
    g = zoo_graph(name)
    macs, params = PUBLISHED[name]
    assert _within(g.total_macs, macs, 0.02), (name, g.total_macs)
    assert _within(g.total_params, params, 0.02), (name, g.total_params)
    assert g.tensors[g.outputs[0]].shape == (1000,)


@pytest.mark.parametrize("name", _params(TORCHVISION_UNITS))
def test_block_view_has_torchvision_module_count(zoo_graph, name):
    g = zoo_graph(name)
    b = g.with_granularity("block")
    assert len(b) == TORCHVISION_UNITS[name]
    assert b.total_macs == g.total_macs and b.total_params == g.total_params
    names = [la.name for la in b.layers]
    if name == "mobilenet_v2":
        assert names == [f"features.{i}" for i in range(19)] + ["classifier.0", "classifier.1"]
    else:
        assert names[-7:] == [f"classifier.{i}" for i in range(7)]
        assert names[-8] == "avgpool" and b.layers[-8].members == ("avgpool", "avgpool_flatten")


def test_alexnet_block_ops_follow_torchvision_order(zoo_graph):
    b = zoo_graph("alexnet").with_granularity("block")
    ops = [la.op for la in b.layers]
    assert ops == (["conv", "act", "pool"] * 2 + ["conv", "act"] * 3 + ["pool", "pool"]
                   + ["other", "dense", "act", "other", "dense", "act", "dense"])


# --- the other networks ---------------------------------------------------------------

def test_mobilenet_v2_other_input_size(zoo_graph):
    g224, g160 = zoo_graph("mobilenet_v2"), zoo_graph("mobilenet_v2", input_size=160)
    assert g160.inputs and g160.tensors[g160.inputs[0]].shape == (160, 160, 3)
    assert g160.total_params == g224.total_params
    # convolution MACs scale with the pixel count; the classifier (1.28 M MACs) does not
    ratio = (g160.total_macs - 1_281_000) / (g224.total_macs - 1_281_000)
    assert ratio == pytest.approx((160 / 224) ** 2, rel=0.03)


def test_resnet50_is_v1_5_with_bottleneck_blocks(zoo_graph):
    g = zoo_graph("resnet50")
    by_name = {la.name: la for la in g.layers}
    # v1.5: the downsampling stride sits in the 3x3 conv, the first 1x1 keeps the resolution
    assert by_name["layer2_0_conv1"].output_shapes[0] == (56, 56, 128)
    assert by_name["layer2_0_conv2"].output_shapes[0] == (28, 28, 128)
    b = g.with_granularity("block")
    assert len(b) == 20 and sum(la.name.startswith("layer") for la in b.layers) == 16


def test_slimmable_resnet50_widths(zoo_graph):
    full, quarter = zoo_graph("slimmable_resnet50"), zoo_graph("slimmable_resnet50", width=0.25)
    assert full.total_macs == zoo_graph("resnet50").total_macs
    # Yu et al. 2019, Table 3: S-ResNet-50 0.25x 278 M FLOPs, 2.0 M params
    assert _within(quarter.total_macs, 278e6, 0.02) and _within(quarter.total_params, 2.0e6, 0.03)
    assert 13 < full.total_macs / quarter.total_macs < 17
    assert len(quarter) == len(full)


def test_bad_variant_arguments_are_rejected():
    from optimizer.graph import load_graph

    with pytest.raises(ConfigError, match="width=0.3"):
        load_graph("slimmable_resnet50", width=0.3)
    with pytest.raises(ConfigError, match="unknown variant argument 'widht'"):
        load_graph("resnet50", widht=1.0)
    with pytest.raises(ConfigError, match="input_size"):
        load_graph("mobilenet_v2", input_size=0)


def test_retinaface_outputs_and_anchors(zoo_graph):
    from models.retinaface_mobilenet import num_anchors

    g = zoo_graph("retinaface_mobilenet")
    assert num_anchors(160) == 2 * (20 * 20 + 10 * 10 + 5 * 5) == 1050
    assert [g.tensors[t].shape for t in g.outputs] == [(1050, 4), (1050, 2), (1050, 10)]
    # Pytorch_Retinaface mobilenet0.25: 1.7 MB of fp32 tensors = 0.43 M
    assert _within(g.total_params, 0.43e6, 0.02)
    b = g.with_granularity("block")
    names = [la.name for la in b.layers]
    assert len(names) == len(set(names)) == 25  # every module one contiguous block
    assert set(names[-3:]) == {"ClassHead", "BboxHead", "LandmarkHead"}
    big = zoo_graph("retinaface_mobilenet", input_size=640)
    assert [big.tensors[t].shape[0] for t in big.outputs] == [16800] * 3
    assert big.total_macs == pytest.approx(16 * g.total_macs, rel=0.01)


def test_arcface_mobilefacenet(zoo_graph):
    g = zoo_graph("arcface_mobilenet")
    assert [g.tensors[t].shape for t in g.outputs] == [(128,)]
    # MobileFaceNets paper, Table 2: 221 M MAdds, 0.99 M params (+BN statistics, PReLU here)
    assert _within(g.total_macs, 221e6, 0.01)
    assert _within(g.total_params, 0.99e6, 0.05)
    g512 = zoo_graph("arcface_mobilenet", embedding_dim=512)
    assert [g512.tensors[t].shape for t in g512.outputs] == [(512,)]
    assert g512.total_params - g.total_params == 512 * (512 - 128) + 4 * (512 - 128)


def _predictor_params(depth: int, anchors: int, classes: int, layers: int = 4) -> int:
    """Weight-shared SSD box predictor: towers shared over levels, BN per level (5 levels)."""
    tower = 2 * layers * 9 * depth * depth + 2 * layers * 5 * 4 * depth
    heads = (9 * depth * anchors * 4 + anchors * 4) + (9 * depth * anchors * classes
                                                       + anchors * classes)
    return tower + heads


@slow
@pytest.mark.parametrize("name", ["ssd_mobilenet_v1_fpn", "ssd_resnet50_fpn"])
def test_ssd_fpn_structure(zoo_graph, name):
    g = zoo_graph(name)
    assert [g.tensors[t].shape for t in g.outputs] == [(51150, 4), (51150, 91)]
    assert importlib.import_module(f"models.{name}").num_anchors(640) == 6 * (
        80 ** 2 + 40 ** 2 + 20 ** 2 + 10 ** 2 + 5 ** 2)
    b = g.with_granularity("block")
    names = [la.name for la in b.layers]
    assert len(names) == len(set(names))
    assert names[-6:] == ["head.P3", "head.P4", "head.P5", "head.P6", "head.P7", "outputs"]
    # shared tower weights are counted once: only the first level's block carries them
    heads = [la for la in b.layers if la.name.startswith("head.")]
    assert sum(la.params for la in heads) == _predictor_params(256, 6, 91)
    assert heads[1].params == 4 * 2 * 4 * 256  # level 4 only has its own batch norms
    # the towers' MACs scale with each level's area
    assert heads[0].macs == pytest.approx(4 * heads[1].macs, rel=1e-6)


@slow
def test_narrow_ssd_mobilenet_v1_fpn_keeps_the_layers_and_shared_heads(zoo_graph):
    """``alpha``/``depth`` narrow the network without changing its layers (tests cut it where the
    full one is cut) and the predictor's weights follow ``depth``."""
    from optimizer.errors import ConfigError

    g = zoo_graph("ssd_mobilenet_v1_fpn", input_size=128)
    narrow = zoo_graph("ssd_mobilenet_v1_fpn", input_size=128, alpha=0.25, depth=32)
    assert [la.name for la in narrow.layers] == [la.name for la in g.layers]
    assert [narrow.tensors[t].shape for t in narrow.outputs] == [g.tensors[t].shape for t in g.outputs]
    heads = [la for la in narrow.with_granularity("block").layers if la.name.startswith("head.")]
    assert sum(la.params for la in heads) == _predictor_params(32, 6, 91)
    assert narrow.total_macs < g.total_macs / 10
    with pytest.raises(ConfigError, match="depth=48"):
        zoo_graph("ssd_mobilenet_v1_fpn", input_size=128, depth=48)


@slow
def test_ssd_mobilenet_v2_fpnlite_structure(zoo_graph):
    g = zoo_graph("ssd_mobilenet_v2_fpnlite")
    assert [g.tensors[t].shape for t in g.outputs] == [(51150, 4), (51150, 91)]
    ops = {la.op_type for la in g.layers if la.block.startswith(("head", "fpn"))}
    assert "SeparableConv2D" in ops  # FPNLite: depthwise-separable FPN and predictor
    assert g.total_macs < zoo_graph("ssd_mobilenet_v1_fpn").total_macs / 10
    # share_prediction_tower: true (TF2 zoo pipeline.config): one tower feeds both heads
    names = [la.name for la in g.layers]
    assert not any(n.startswith("ClassPredictionTower") for n in names)
    # TFLite operator count: convs (separable = 2), adds, resizes, head reshapes, concats;
    # Park & Ha count 149 inference-body layers for this network (docs/METHODS.md section 2)
    kernels = {"conv": 1, "dwconv": 1, "add": 1, "resize": 1, "concat": 1}
    n_ops = sum(2 if la.op_type == "SeparableConv2D" else kernels.get(la.op, 0) for la in g.layers)
    n_ops += sum(la.name.endswith(tuple(f"_reshape_P{lv}" for lv in range(3, 8))) for la in g.layers)
    assert n_ops == 149
    small = zoo_graph("ssd_mobilenet_v2_fpnlite", input_size=320)
    assert [small.tensors[t].shape[0] for t in small.outputs] == [12804, 12804]


@slow
def test_efficientdet_lite0_structure(zoo_graph):
    from models.efficientdet_lite0 import num_anchors

    g = zoo_graph("efficientdet_lite0")
    assert num_anchors(320) == 9 * (40 ** 2 + 20 ** 2 + 10 ** 2 + 5 ** 2 + 3 ** 2) == 19206
    assert [g.tensors[t].shape for t in g.outputs] == [(19206, 4), (19206, 90)]
    # EfficientDet-D0 (Tan et al. 2020, Table 2): 2.5 B FLOPs at 512 -> x (320/512)^2 at 320;
    # 3.9 M params with squeeze-excitation, which Lite0 drops
    assert _within(g.total_macs, 2.5e9 * (320 / 512) ** 2, 0.03)
    assert 3.0e6 < g.total_params < 3.9e6
    b = g.with_granularity("block")
    assert sum(la.name.startswith("fpn_cell") for la in b.layers) == 3 * 8  # 3 BiFPN cells


def test_bert_small_and_dynabert_variants(zoo_graph):
    g = zoo_graph("bert_small")
    assert g.tensors[g.inputs[0]].shape == (128,)
    assert [g.tensors[t].shape for t in g.outputs] == [(2,)]
    # Turc et al. 2019: BERT-Small 29.1 M params with pre-training heads (28.8 M without)
    assert _within(g.total_params, 29.1e6, 0.02)
    seq, hid, ffn = 128, 512, 2048
    per_layer = 4 * seq * hid * hid + 8 * seq * seq * 128 + 2 * seq * hid * ffn
    assert g.total_macs == 4 * per_layer + hid * hid + hid * 2
    b = g.with_granularity("block")
    assert [la.name for la in b.layers] == (
        ["embeddings"] + [f"encoder.layer.{i}" for i in range(4)] + ["pooler", "classifier"])
    narrow, shallow = zoo_graph("bert_small", width=0.25), zoo_graph("bert_small", depth=0.5)
    assert narrow.total_macs < g.total_macs / 3
    enc = 4 * per_layer
    assert g.total_macs - shallow.total_macs == enc // 2
    short = zoo_graph("bert_small", input_size=64)
    assert short.tensors[short.inputs[0]].shape == (64,)
    # another vocabulary: the same layers and MACs, only the word embedding's rows change
    # (tests/test_importers.py's transformer check runs this stand-in)
    words = zoo_graph("bert_small", depth=0.5, vocab_size=1000)
    assert [la.name for la in words.layers] == [la.name for la in shallow.layers]
    assert words.total_macs == shallow.total_macs
    assert shallow.total_params - words.total_params == (30522 - 1000) * hid
    with pytest.raises(ConfigError, match="vocab_size=0.5"):
        zoo_graph("bert_small", vocab_size=0.5)


@pytest.mark.parametrize("name", _params(sorted(EXPECTED_ZOO)))
def test_every_network_builds_with_contiguous_blocks(zoo_graph, name):
    g = zoo_graph(name)
    assert g.total_macs > 0 and g.total_params > 0
    b = g.with_granularity("block")
    names = [la.name for la in b.layers]
    assert len(names) == len(set(names)), f"{name}: a block label is split into several runs"
    assert 5 <= len(b) < len(g)
