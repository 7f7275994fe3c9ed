"""Slimmable ResNet-50 (Yu et al., "Slimmable Neural Networks", ICLR 2019), one width per build.

A slimmable network shares one set of weights across widths; a deployed width is a plain
ResNet-50 (v1.5, stride in the 3x3 conv as in the authors' ``s_resnet.py``) whose every
channel count, stem and classifier input included, is scaled by ``width``. This is the network
the "Play It Cool" dynamic-shifting study switches between at 1.0x and 0.25x.

References at 224x224 (paper Table 3, S-ResNet-50): 1.0x 4.1 G FLOPs (MACs) / 25.5 M params,
0.75x 2.3 G / 14.7 M, 0.5x 1.1 G / 6.9 M, 0.25x 278 M / 2.0 M. This build gives 4.09 G /
25.6 M, 2.32 G / 14.8 M, 1.05 G / 6.9 M and 278 M / 2.0 M (within 5 %, batch-norm moving
statistics counted), so 0.25x costs about 1/15 of the MACs of 1.0x.
"""

from __future__ import annotations

from typing import Any

from models import _resnet
from models._common import check_size, check_variant

NAME = "slimmable_resnet50"
TASK = "classification"
INPUT_SIZE = 224
WIDTHS = (0.25, 0.5, 0.75, 1.0)
REFERENCE = {"macs": 4.1e9, "params": 25.5e6,
             "source": "Yu et al. 2019 (Slimmable Neural Networks), Table 3, S-ResNet-50 1.0x "
                       "(4.1 G FLOPs, 25.5 M); 0.25x: 278 M FLOPs, 2.0 M params",
             "variants": {"width=0.25": {"macs": 278e6, "params": 2.0e6},
                          "width=0.5": {"macs": 1.1e9, "params": 6.9e6},
                          "width=0.75": {"macs": 2.3e9, "params": 14.7e6},
                          "width=1.0": {"macs": 4.1e9, "params": 25.5e6}}}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [123.675, 116.28, 103.53],
              "std": [58.395, 57.12, 57.375]}
NUM_CLASSES = 1000


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """ResNet-50 at ``width`` (0.25, 0.5, 0.75 or 1.0; default 1.0) of its channels."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    check_variant(NAME, variant, {"width": WIDTHS})
    check_size(NAME, input_size, 32)
    width = variant.get("width", 1.0)
    inp = keras.Input((input_size, input_size, 3), name="input")
    x = _resnet.resnet50_body(keras, inp, width=width)
    x = keras.layers.GlobalAveragePooling2D(name="avgpool")(x)
    out = keras.layers.Dense(NUM_CLASSES, name="fc")(x)
    return keras.Model(inp, out, name=f"{NAME}_{width}x")


block_of = _resnet.block_of
