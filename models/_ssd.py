"""SSD with FPN and a weight-shared box predictor, as in the TensorFlow Object Detection API.

The TF2 detection-zoo configs ``ssd_mobilenet_v1_fpn_640x640``, ``ssd_mobilenet_v2_fpnlite_*``
and ``ssd_resnet50_v1_fpn_640x640`` share this head (``KerasFpnTopDownFeatureMaps`` plus
``WeightSharedConvolutionalBoxPredictor``):

* FPN levels 3..7: 1x1 projections (with bias) of the stride-8/16/32 backbone maps, nearest 2x
  top-down upsampling and addition, a 3x3 smoothing conv + batch norm + ReLU6 on levels 3, 4;
  levels 6 and 7 are 3x3 stride-2 convs + batch norm + ReLU6 on top of level 5.
* Box predictor: separate box and class towers (one tower read by both heads when the config
  sets ``share_prediction_tower``, as the FPNLite configs do) of ``tower_layers`` 3x3 convs whose weights are
  shared over the levels (one Keras layer called once per level; its batch norms are per
  level), then 3x3 prediction convs for ``anchors_per_location`` x 4 box codes and
  x (``num_classes`` + 1) class logits (background included).
* ``anchors_per_location`` = 6 (multiscale anchor generator: 2 scales per octave x aspect
  ratios 1, 2, 0.5). Outputs are the raw encodings ``[A, 4]`` and logits ``[A, 91]``; anchor
  decoding, sigmoid scores and NMS are post-processing.

With ``depthwise=True`` (the "FPNLite" configs) every 3x3 conv of FPN and predictor is a
``SeparableConv2D``. Layer names are ``fpn_P<l>_<part>``, ``<Box|Class>PredictionTower_conv2d_<i>``
(shared; Keras import names the k-th call ``...@k``), ``..._BatchNorm_P<l>``, ``<Box|Class>Head``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from models._common import upsample_to

MIN_LEVEL, MAX_LEVEL = 3, 7
ANCHORS_PER_LOCATION = 6
NUM_CLASSES = 90


def level_sizes(input_size: int) -> list[int]:
    """Spatial side of FPN levels 3..7 (SAME-padded stride-2 steps: ceil halving)."""
    sizes, side = [], input_size
    for level in range(1, MAX_LEVEL + 1):
        side = math.ceil(side / 2)
        if level >= MIN_LEVEL:
            sizes.append(side)
    return sizes


def num_anchors(input_size: int) -> int:
    """Anchor count of the 5-level, 6-anchor generator at ``input_size`` x ``input_size``."""
    return ANCHORS_PER_LOCATION * sum(s * s for s in level_sizes(input_size))


def _conv(keras: Any, filters: int, kernel: int, stride: int, name: str, depthwise: bool,
          use_bias: bool = False) -> Any:
    L = keras.layers
    if depthwise and kernel > 1:
        return L.SeparableConv2D(filters, kernel, strides=stride, padding="same",
                                 use_bias=use_bias, name=name)
    return L.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=use_bias, name=name)


def _bn_relu6(keras: Any, x: Any, name: str) -> Any:
    x = keras.layers.BatchNormalization(epsilon=1e-3, name=name + "_BatchNorm")(x)
    return keras.layers.ReLU(6.0, name=name + "_Relu6")(x)


def fpn(keras: Any, feats: list[Any], depth: int, depthwise: bool) -> list[Any]:
    """FPN maps of levels 3..7 from the stride-8/16/32 backbone maps ``feats``."""
    L = keras.layers
    top = _conv(keras, depth, 1, 1, "fpn_P5_projection", False, use_bias=True)(feats[2])
    outs = {5: top}
    for level, feat in ((4, feats[1]), (3, feats[0])):
        p = f"fpn_P{level}_"
        up = upsample_to(keras, top, tuple(feat.shape[1:3]), p + "upsample")
        res = _conv(keras, depth, 1, 1, p + "projection", False, use_bias=True)(feat)
        top = L.Add(name=p + "add")([up, res])
        top = _conv(keras, depth, 3, 1, p + "smoothing", depthwise)(top)
        top = _bn_relu6(keras, top, p + "smoothing")
        outs[level] = top
    x = outs[5]
    for level in (6, 7):
        p = f"fpn_P{level}_bottom_up"
        x = _conv(keras, depth, 3, 2, p, depthwise)(x)
        x = _bn_relu6(keras, x, p)
        outs[level] = x
    return [outs[level] for level in range(MIN_LEVEL, MAX_LEVEL + 1)]


def box_predictor(keras: Any, levels: list[Any], depth: int, depthwise: bool,
                  tower_layers: int = 4, share_tower: bool = False) -> list[Any]:
    """Weight-shared box/class towers and heads over the FPN ``levels``; returns
    ``[box_encodings, class_predictions_with_background]``.

    ``share_tower`` is the config's ``share_prediction_tower``: the class head then reads the
    box tower's output (``WeightSharedConvolutionalBoxPredictor`` builds only the
    ``BoxPredictionTower``), halving the towers' work.
    """
    L = keras.layers
    n_cls = NUM_CLASSES + 1
    a = ANCHORS_PER_LOCATION
    kinds = ("Box",) if share_tower else ("Box", "Class")
    shared: dict[str, list[Any]] = {
        kind: [_conv(keras, depth, 3, 1, f"{kind}PredictionTower_conv2d_{i}", depthwise)
               for i in range(tower_layers)]
        for kind in kinds}
    heads = {"Box": _conv(keras, a * 4, 3, 1, "BoxHead", depthwise, use_bias=True),
             "Class": _conv(keras, a * n_cls, 3, 1, "ClassHead", depthwise, use_bias=True)}
    parts: dict[str, list[Any]] = {"Box": [], "Class": []}
    for level, feat in zip(range(MIN_LEVEL, MAX_LEVEL + 1), levels, strict=True):
        towers = {}
        for kind in kinds:
            y = feat
            for i, conv in enumerate(shared[kind]):
                y = _bn_relu6(keras, conv(y), f"{kind}PredictionTower_conv2d_{i}_P{level}")
            towers[kind] = y
        for kind, width in (("Box", 4), ("Class", n_cls)):
            y = heads[kind](towers.get(kind, towers["Box"]))
            parts[kind].append(L.Reshape((-1, width), name=f"{kind}Head_reshape_P{level}")(y))
    return [L.Concatenate(axis=1, name="box_encodings")(parts["Box"]),
            L.Concatenate(axis=1, name="class_predictions_with_background")(parts["Class"])]


_LEVEL = re.compile(r"_P(\d)(?:_|$)")
_SHARED = re.compile(r"^(Box|Class)(?:PredictionTower_conv2d_\d+|Head)(?:@(\d+))?$")


def head_block_of(layer_name: str) -> str | None:
    """Block label of an FPN / predictor layer (``fpn.P4``, ``head.P3``, ``outputs``), or None."""
    if layer_name.startswith("fpn_"):
        return "fpn.P" + layer_name.split("_")[1][1:]
    m = _SHARED.match(layer_name)
    if m:  # k-th call of a shared conv runs on level MIN_LEVEL + k
        return f"head.P{MIN_LEVEL + int(m.group(2) or 0)}"
    if layer_name.startswith(("BoxPrediction", "ClassPrediction", "BoxHead", "ClassHead")):
        m = _LEVEL.search(layer_name)
        if m:
            return f"head.P{m.group(1)}"
    if layer_name in ("box_encodings", "class_predictions_with_background"):
        return "outputs"
    return None
