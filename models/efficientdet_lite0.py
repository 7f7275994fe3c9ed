"""EfficientDet-Lite0 (Tan, Pang & Le, "EfficientDet: Scalable and Efficient Object Detection",
CVPR 2020; the "lite" variant of google/automl ``efficientdet-lite0``), 320x320.

Structure of automl's ``hparams_config.py`` for ``efficientdet-lite0``: EfficientNet-Lite0
backbone (EfficientNet-B0 blocks without squeeze-excitation, ReLU6), levels P3-P7 (P6, P7 by
1x1 conv + batch norm and 3x3/2 max pooling), 3 BiFPN cells of 64 channels with plain sum
fusion (``fpn_weight_method='sum'``), then ReLU6, a 3x3 separable conv and batch norm per
node; box and class nets of 3 separable 3x3 convs (64 channels, weights shared over levels,
batch norm per level) and separable 3x3 predictors for 9 anchors per location (3 scales x 3
aspect ratios) x 4 box codes / x 90 class logits. Outputs: ``[A, 4]`` and ``[A, 90]`` with
A = 19,206 at 320x320 (no NMS, which is post-processing).

Reference checked: EfficientDet-D0 (same BiFPN/head widths, EfficientNet-B0 backbone,
512x512) has 3.9 M params and 2.5 B FLOPs (paper Table 2). Lite0 drops the backbone's
squeeze-excitation and runs at 320x320: this build has 3.3 M params (below D0's 3.9 M) and
0.974 G MACs, D0's 2.5 G scaled by (320/512)^2 = 0.977 G within 1 %; its 3.3 M weights are
consistent with the 4.4 MB int8 ``efficientdet_lite0`` TFLite model of TFLite Model Maker.
"""

from __future__ import annotations

import re
from typing import Any

from models._common import check_size, check_variant, upsample_to

NAME = "efficientdet_lite0"
TASK = "detection"
INPUT_SIZE = 320
REFERENCE = {"macs": 2.5e9 * (320 / 512) ** 2, "params": 3.9e6,
             "source": "Tan et al. 2020, Table 2: EfficientDet-D0 3.9 M params (an upper bound: "
                       "Lite0 has no squeeze-excitation), 2.5 B FLOPs at 512 scaled to 320x320"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [127.0] * 3, "std": [128.0] * 3}
MIN_LEVEL, MAX_LEVEL = 3, 7
ANCHORS_PER_LOCATION = 9
NUM_CLASSES = 90
FPN_CHANNELS, FPN_CELLS, HEAD_REPEATS = 64, 3, 3
# EfficientNet-Lite0 stages: (kernel, repeats, out_channels, expand_ratio, first_stride)
_STAGES = ((3, 1, 16, 1, 1), (3, 2, 24, 6, 2), (5, 2, 40, 6, 2), (3, 3, 80, 6, 2),
           (5, 3, 112, 6, 1), (5, 4, 192, 6, 2), (3, 1, 320, 6, 1))
# BiFPN nodes: (target level, inputs as ("in", level) = cell input or ("node", index))
_BIFPN = ((6, (("in", 6), ("in", 7))), (5, (("in", 5), ("node", 0))),
          (4, (("in", 4), ("node", 1))), (3, (("in", 3), ("node", 2))),
          (4, (("in", 4), ("node", 2), ("node", 3))), (5, (("in", 5), ("node", 1), ("node", 4))),
          (6, (("in", 6), ("node", 0), ("node", 5))), (7, (("in", 7), ("node", 6))))


def num_anchors(input_size: int = INPUT_SIZE) -> int:
    """9 anchors per location of levels 3..7 (ceil-halved sides)."""
    side, total = input_size, 0
    for level in range(1, MAX_LEVEL + 1):
        side = -(-side // 2)
        total += side * side if level >= MIN_LEVEL else 0
    return ANCHORS_PER_LOCATION * total


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """EfficientDet-Lite0 at ``input_size`` x ``input_size`` (no variant arguments)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    L = keras.layers
    check_variant(NAME, variant, {})
    check_size(NAME, input_size, 128)

    def bn(x: Any, name: str, act: bool) -> Any:
        x = L.BatchNormalization(epsilon=1e-3, name=name + "_bn")(x)
        return L.ReLU(6.0, name=name + "_relu6")(x) if act else x

    inp = keras.Input((input_size, input_size, 3), name="input")
    x = bn(L.Conv2D(32, 3, strides=2, padding="same", use_bias=False, name="stem_conv")(inp),
           "stem", True)
    cin, idx, feats = 32, 0, {}
    for stage, (k, repeats, cout, expand, stride) in enumerate(_STAGES, start=1):
        for r in range(repeats):
            p = f"blocks_{idx}"
            s = stride if r == 0 else 1
            y = x
            if expand != 1:
                y = L.Conv2D(cin * expand, 1, use_bias=False, name=p + "_expand_conv")(y)
                y = bn(y, p + "_expand", True)
            y = L.DepthwiseConv2D(k, strides=s, padding="same", use_bias=False,
                                  name=p + "_depthwise_conv")(y)
            y = bn(y, p + "_depthwise", True)
            y = L.Conv2D(cout, 1, use_bias=False, name=p + "_project_conv")(y)
            y = bn(y, p + "_project", False)
            x = L.Add(name=p + "_add")([x, y]) if s == 1 and cin == cout else y
            cin, idx = cout, idx + 1
        if stage in (3, 5, 7):
            feats[{3: 3, 5: 4, 7: 5}[stage]] = x

    def resample(x: Any, level_from: int, level_to: int, target: Any, name: str) -> Any:
        """automl ``resample_feature_map``: 1x1 conv + BN if channels differ, then max pool
        (down) or nearest resize (up) to ``target``'s spatial size."""
        if int(x.shape[-1]) != FPN_CHANNELS:
            x = L.Conv2D(FPN_CHANNELS, 1, padding="same", name=name + "_conv")(x)
            x = bn(x, name, False)
        if level_to > level_from:
            x = L.MaxPooling2D(3, strides=2, padding="same", name=name + "_maxpool")(x)
        elif level_to < level_from:
            x = upsample_to(keras, x, target, name + "_upsample")
        return x

    sizes = {lv: int(f.shape[1]) for lv, f in feats.items()}
    for lv in (6, 7):
        sizes[lv] = -(-sizes[lv - 1] // 2)
    feats[6] = resample(feats[5], 5, 6, (sizes[6],) * 2, "resample_p6")
    feats[7] = resample(feats[6], 6, 7, (sizes[7],) * 2, "resample_p7")

    levels = dict(feats)
    for c in range(FPN_CELLS):
        nodes: list[Any] = []
        for n, (target, inputs) in enumerate(_BIFPN):
            p = f"fpn_cell{c}_node{n}"
            parts = []
            for j, (kind, ref) in enumerate(inputs):
                if kind == "in":
                    src, src_level = levels[ref], ref
                else:
                    src, src_level = nodes[ref], _BIFPN[ref][0]
                parts.append(resample(src, src_level, target, (sizes[target],) * 2,
                                      f"{p}_resample{j}"))
            y = L.Add(name=p + "_add")(parts)
            y = L.ReLU(6.0, name=p + "_relu6")(y)
            y = L.SeparableConv2D(FPN_CHANNELS, 3, padding="same", name=p + "_sepconv")(y)
            nodes.append(bn(y, p, False))
        levels = {lv: nodes[n] for n, lv in ((3, 3), (4, 4), (5, 5), (6, 6), (7, 7))}

    outs: dict[str, list[Any]] = {"box": [], "class": []}
    for net, width in (("box", 4), ("class", NUM_CLASSES)):
        convs = [L.SeparableConv2D(FPN_CHANNELS, 3, padding="same", name=f"{net}_net_conv{i}")
                 for i in range(HEAD_REPEATS)]
        head = L.SeparableConv2D(ANCHORS_PER_LOCATION * width, 3, padding="same",
                                 name=f"{net}_net_predict")
        for lv in range(MIN_LEVEL, MAX_LEVEL + 1):
            y = levels[lv]
            for i, conv in enumerate(convs):
                y = bn(conv(y), f"{net}_net_conv{i}_P{lv}", True)
            y = head(y)
            outs[net].append(L.Reshape((-1, width), name=f"{net}_net_reshape_P{lv}")(y))
    return keras.Model(inp, [L.Concatenate(axis=1, name="box_outputs")(outs["box"]),
                             L.Concatenate(axis=1, name="class_outputs")(outs["class"])],
                       name=NAME)


_SHARED = re.compile(r"^(box|class)_net_(?:conv\d|predict)(?:@(\d+))?$")
_LEVEL = re.compile(r"_P(\d)_")


def block_of(layer_name: str) -> str:
    """``stem``, ``blocks_N``, ``resample_p6``/``p7``, ``fpn_cellC_nodeN``, ``head.P<l>``
    (box and class nets of one level), ``outputs``."""
    m = _SHARED.match(layer_name)
    if m:  # k-th call of a shared head conv runs on level MIN_LEVEL + k
        return f"head.P{MIN_LEVEL + int(m.group(2) or 0)}"
    if layer_name.startswith(("box_net", "class_net")):
        m = _LEVEL.search(layer_name + "_")
        return f"head.P{m.group(1)}" if m else layer_name
    if layer_name in ("box_outputs", "class_outputs"):
        return "outputs"
    if layer_name.startswith("stem"):
        return "stem"
    parts = layer_name.split("_")
    if parts[0] in ("blocks", "resample"):
        return "_".join(parts[:2])
    if parts[0].startswith("fpn"):
        return "_".join(parts[:3])
    return layer_name
