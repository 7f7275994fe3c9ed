"""SSD MobileNet V2 FPNLite 640x640 (TF2 Detection Model Zoo
``ssd_mobilenet_v2_fpnlite_640x640_coco17``; MobileNetV2 of Sandler et al. 2018 with the
"lite" FPN: depthwise-separable 3x3 convs, depth 128).

Backbone: ``keras.applications.MobileNetV2`` (width 1.0, ``weights=None``) tapped at
``block_5_add`` / ``block_12_add`` (strides 8/16) and, as the config's
``ssd_mobilenet_v2_fpn_keras`` extractor with ``use_depthwise`` does, its last 1x1 conv cut
to 256 channels (stride 32); FPN depth 128, 4-layer weight-shared separable box predictor
of depth 128 whose one tower feeds both heads (``share_prediction_tower: true`` in the zoo's
pipeline.config; :mod:`models._ssd`). 90 COCO classes + background, 6 anchors per location:
51,150 anchors at 640x640 (12,804 at 320x320, the zoo's other FPNLite size). No NMS.

Reference checked: no published MAC/param figure; the structure follows the pipeline config
(levels 3-7, depth 128, 4 tower layers, ``use_depthwise: true``, ``share_prediction_tower:
true``). This build: 2.2 M params, 3.75 G MACs at 640x640. As TFLite operators (separable
convs as depthwise + pointwise, batch norm and ReLU6 fused, each upsampling one op) it has 149
inference-body operators, the count Park & Ha give for this network (docs/METHODS.md section 2);
with separate box and class towers it would have 189. (The API's default upsampling,
``ops.nearest_neighbor_upsampling``, exports as two PACK + one RESHAPE, which would make 153.)
"""

from __future__ import annotations

from typing import Any

from models import _ssd
from models._common import check_size, check_variant

NAME = "ssd_mobilenet_v2_fpnlite"
TASK = "detection"
INPUT_SIZE = 640
REFERENCE = {"macs": None, "params": None,
             "source": "TF2 Detection Model Zoo ssd_mobilenet_v2_fpnlite_640x640_coco17_tpu-8 "
                       "pipeline.config (no published MAC/param figure)"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [127.5] * 3}
num_anchors = _ssd.num_anchors


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """SSD-FPNLite detector at ``input_size`` x ``input_size`` (no variant arguments)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    L = keras.layers
    check_variant(NAME, variant, {})
    check_size(NAME, input_size, 128)
    inp = keras.Input((input_size, input_size, 3), name="input")
    base = keras.applications.MobileNetV2(include_top=False, weights=None, input_tensor=inp)
    top = L.Conv2D(256, 1, use_bias=False, name="layer_19_conv")(
        base.get_layer("block_16_project_BN").output)
    top = L.BatchNormalization(epsilon=1e-3, name="layer_19_bn")(top)
    top = L.ReLU(6.0, name="layer_19_relu")(top)
    feats = [base.get_layer("block_5_add").output, base.get_layer("block_12_add").output, top]
    levels = _ssd.fpn(keras, feats, 128, depthwise=True)
    outs = _ssd.box_predictor(keras, levels, 128, depthwise=True, share_tower=True)
    return keras.Model(inp, outs, name=NAME)


def block_of(layer_name: str) -> str:
    """Backbone ``features.N`` (torchvision numbering), ``layer_19``; ``fpn.P<l>``;
    ``head.P<l>``; ``outputs``."""
    label = _ssd.head_block_of(layer_name)
    if label:
        return label
    if layer_name.startswith("layer_19"):
        return "layer_19"
    from models.mobilenet_v2 import block_of as backbone_block

    return backbone_block(layer_name)
