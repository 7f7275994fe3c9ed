"""SSD MobileNet V1 FPN 640x640 (TF2 Detection Model Zoo ``ssd_mobilenet_v1_fpn_640x640_coco17``;
Lin et al., "Focal Loss for Dense Object Detection", ICCV 2017, on a MobileNetV1 backbone).

Backbone: ``keras.applications.MobileNet`` (width 1.0, ``weights=None``) tapped at
``conv_pw_5`` / ``conv_pw_11`` / ``conv_pw_13`` (strides 8/16/32), as the config's
``ssd_mobilenet_v1_fpn_keras`` feature extractor; FPN depth 256 and a 4-layer weight-shared box
predictor of depth 256 (:mod:`models._ssd`). 90 COCO classes + background, 6 anchors per
location: 51,150 anchors at 640x640. No NMS (post-processing).

Variants: ``alpha`` (backbone width multiplier, as MobileNetV1's) and ``depth`` (FPN and predictor
channels, 256 in the config) give a narrower network with the same layers, the same shared heads and
the same outputs, for checks that need the structure but not the size.

Reference checked: the zoo publishes no MAC/parameter figure, so the count was checked
by hand against the pipeline config: 12.1 M params = MobileNetV1 trunk 3.2 M + FPN 2.8 M
(1x1 projections of 256/512/1024 channels, four 3x3x256x256 convs) + predictor 6.1 M (eight
shared 3x3x256x256 tower convs 4.72 M, box head 3x3x256x24, class head 3x3x256x546 = 1.26 M,
per-level batch norms); 61.6 G MACs at 640x640, 84 % of them in the predictor.
"""

from __future__ import annotations

from typing import Any

from models import _ssd
from models._common import check_size, check_variant

NAME = "ssd_mobilenet_v1_fpn"
TASK = "detection"
INPUT_SIZE = 640
REFERENCE = {"macs": None, "params": None,
             "source": "TF2 Detection Model Zoo ssd_mobilenet_v1_fpn_640x640_coco17_tpu-8 "
                       "pipeline.config (no published MAC/param figure)"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [127.5] * 3}
num_anchors = _ssd.num_anchors


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """SSD-FPN detector at ``input_size`` x ``input_size``; variants ``alpha`` (backbone width
    multiplier) and ``depth`` (FPN and predictor channels)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    check_variant(NAME, variant, {"alpha": (0.25, 0.5, 0.75, 1.0), "depth": (32, 64, 128, 256)})
    check_size(NAME, input_size, 128)
    depth = variant.get("depth", 256)
    inp = keras.Input((input_size, input_size, 3), name="input")
    base = keras.applications.MobileNet(include_top=False, weights=None, input_tensor=inp,
                                        alpha=variant.get("alpha", 1.0))
    feats = [base.get_layer(f"conv_pw_{i}_relu").output for i in (5, 11, 13)]
    levels = _ssd.fpn(keras, feats, depth, depthwise=False)
    outs = _ssd.box_predictor(keras, levels, depth, depthwise=False)
    return keras.Model(inp, outs, name=NAME)


def block_of(layer_name: str) -> str:
    """Backbone ``conv1`` / ``blockN``; ``fpn.P<l>``; ``head.P<l>``; ``outputs``."""
    label = _ssd.head_block_of(layer_name)
    if label:
        return label
    from models.mobilenet_v1 import block_of as backbone_block

    return backbone_block(layer_name)
