"""SSD ResNet50 V1 FPN 640x640, i.e. RetinaNet-50 (Lin et al., "Focal Loss for Dense Object
Detection", ICCV 2017) as in the TF2 Detection Model Zoo ``ssd_resnet50_v1_fpn_640x640_coco17``.

Backbone: ``keras.applications.ResNet50`` (v1, as the API's ``resnet_v1_50`` Keras model,
``weights=None``) tapped at ``conv3_block4_out`` / ``conv4_block6_out`` / ``conv5_block3_out``
(strides 8/16/32); FPN depth 256 and a 4-layer weight-shared box predictor of depth 256
(:mod:`models._ssd`). 90 COCO classes + background, 6 anchors per location: 51,150 anchors
at 640x640. No NMS (post-processing).

Reference checked: no published figure for this config; the count was checked by hand:
32.9 M params = Keras ResNet-50 v1 trunk 23.6 M + FPN 3.3 M (1x1 projections of
512/1024/2048 channels, four 3x3x256x256 convs) + predictor 6.1 M (as in
``ssd_mobilenet_v1_fpn``); 89.2 G MACs at 640x640 (trunk 31.5 G = 3.86 G x (640/224)^2).
RetinaNet-R50-FPN implementations with P6 from C5 and 9 anchors x 80 classes (mmdetection,
Detectron) are about 5 M params larger.
"""

from __future__ import annotations

from typing import Any

from models import _ssd
from models._common import check_size, check_variant

NAME = "ssd_resnet50_fpn"
TASK = "detection"
INPUT_SIZE = 640
REFERENCE = {"macs": None, "params": None,
             "source": "TF2 Detection Model Zoo ssd_resnet50_v1_fpn_640x640_coco17_tpu-8 "
                       "pipeline.config (no published MAC/param figure)"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [123.68, 116.78, 103.94], "std": [1.0] * 3}
num_anchors = _ssd.num_anchors


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """RetinaNet-50 detector at ``input_size`` x ``input_size`` (no variant arguments)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    check_variant(NAME, variant, {})
    check_size(NAME, input_size, 128)
    inp = keras.Input((input_size, input_size, 3), name="input")
    base = keras.applications.ResNet50(include_top=False, weights=None, input_tensor=inp)
    feats = [base.get_layer(n).output
             for n in ("conv3_block4_out", "conv4_block6_out", "conv5_block3_out")]
    levels = _ssd.fpn(keras, feats, 256, depthwise=False)
    outs = _ssd.box_predictor(keras, levels, 256, depthwise=False)
    return keras.Model(inp, outs, name=NAME)


def block_of(layer_name: str) -> str:
    """Backbone ``stem`` / ``convS_blockB``; ``fpn.P<l>``; ``head.P<l>``; ``outputs``."""
    label = _ssd.head_block_of(layer_name)
    if label:
        return label
    if layer_name.startswith(("conv1_", "pool1_")):
        return "stem"
    if layer_name.startswith("conv") and "_block" in layer_name:
        return "_".join(layer_name.split("_")[:2])
    return layer_name
