"""ResNet-50 v1.5 (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016;
torchvision's variant with the downsampling stride in the bottleneck's 3x3 convolution).

``keras.applications.ResNet50`` is v1 (stride in the first 1x1, 3.86 G MACs), so the body is
built here (:mod:`models._resnet`). Reference at 224x224: 4.09 G MACs, 25.6 M params
(torchvision ``resnet50`` docs: 4.09 GFLOPS, 25,557,032 params; Keras also counts the 53 k
batch-norm moving statistics). Block view: ``conv1``, ``maxpool``, 16 bottlenecks
``layerS.B``, ``avgpool`` (+ flatten), ``fc`` (20 units).
"""

from __future__ import annotations

from typing import Any

from models import _resnet
from models._common import check_size, check_variant

NAME = "resnet50"
TASK = "classification"
INPUT_SIZE = 224
REFERENCE = {"macs": 4.09e9, "params": 25.6e6,
             "source": "torchvision.models.resnet50 (IMAGENET1K_V1) docs: 4.09 GFLOPS, "
                       "25.6 M params"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [123.675, 116.28, 103.53],
              "std": [58.395, 57.12, 57.375]}
NUM_CLASSES = 1000


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """ResNet-50 v1.5 classifier at ``input_size`` x ``input_size`` (no variant arguments)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    check_variant(NAME, variant, {})
    check_size(NAME, input_size, 32)
    inp = keras.Input((input_size, input_size, 3), name="input")
    x = _resnet.resnet50_body(keras, inp)
    x = keras.layers.GlobalAveragePooling2D(name="avgpool")(x)
    out = keras.layers.Dense(NUM_CLASSES, name="fc")(x)
    return keras.Model(inp, out, name=NAME)


block_of = _resnet.block_of
