"""MobileNetV1 (Howard et al., "MobileNets: Efficient Convolutional Neural Networks for Mobile
Vision Applications", 2017), width 1.0, from ``keras.applications.MobileNet`` (``weights=None``)
without its top, plus global average pooling, ``Dropout(1e-3)`` and ``Dense(1000)``.

Reference at 224x224: 569 M MACs, 4.2 M params (paper Table 8, 1.0 MobileNet-224: 569 million
Mult-Adds, 4.2 million parameters). Block view: ``conv1``, ``block1``..``block13`` (depthwise +
pointwise pair), ``avgpool``, ``dropout``, ``fc`` (17 units).
"""

from __future__ import annotations

import re
from typing import Any

from models._common import check_size, check_variant

NAME = "mobilenet_v1"
TASK = "classification"
INPUT_SIZE = 224
REFERENCE = {"macs": 569e6, "params": 4.2e6,
             "source": "Howard et al. 2017, Table 8 (1.0 MobileNet-224: 569 M Mult-Adds, "
                       "4.2 M params)"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [127.5] * 3}
NUM_CLASSES = 1000
_ALPHAS = (0.25, 0.5, 0.75, 1.0)


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """MobileNetV1 at ``input_size`` x ``input_size``; variant ``alpha`` (width multiplier)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    check_variant(NAME, variant, {"alpha": _ALPHAS})
    check_size(NAME, input_size, 32)
    inp = keras.Input((input_size, input_size, 3), name="input")
    base = keras.applications.MobileNet(include_top=False, weights=None, input_tensor=inp,
                                        alpha=variant.get("alpha", 1.0))
    x = keras.layers.GlobalAveragePooling2D(name="avgpool")(base.output)
    x = keras.layers.Dropout(1e-3, name="dropout")(x)
    out = keras.layers.Dense(NUM_CLASSES, name="fc")(x)
    return keras.Model(inp, out, name=NAME)


_BLOCK = re.compile(r"conv_(?:dw|pw|pad)_(\d+)")


def block_of(layer_name: str) -> str:
    """``conv1``, ``blockN`` for the N-th depthwise-separable pair, else the layer name."""
    if layer_name.startswith("conv1"):
        return "conv1"
    m = _BLOCK.match(layer_name)
    return f"block{m.group(1)}" if m else layer_name
