"""EfficientNet-B0 (Tan & Le, "EfficientNet: Rethinking Model Scaling for Convolutional Neural
Networks", ICML 2019) from ``keras.applications.EfficientNetB0`` (``weights=None``) without
its top, plus global average pooling, ``Dropout(0.2)`` and ``Dense(1000)``.

The Keras model rescales internally (``Rescaling(1/255)`` + ``Normalization``), so it takes
raw 0..255 pixels. Reference at 224x224: 390 M MACs (0.39 B FLOPs in the paper's Table 2),
5.3 M params. Block view: ``stem``, the 16 MBConv blocks ``block1a``..``block7a``, ``top``
(1x1 conv + global pooling), ``dropout``, ``fc`` (20 units).
"""

from __future__ import annotations

import re
from typing import Any

from models._common import check_size, check_variant

NAME = "efficientnet_b0"
TASK = "classification"
INPUT_SIZE = 224
REFERENCE = {"macs": 390e6, "params": 5.3e6,
             "source": "Tan & Le 2019, Table 2 (EfficientNet-B0: 5.3 M params, 0.39 B FLOPs)"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [0.0] * 3, "std": [1.0] * 3}
NUM_CLASSES = 1000


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """EfficientNet-B0 at ``input_size`` x ``input_size`` (no variant arguments)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    check_variant(NAME, variant, {})
    check_size(NAME, input_size, 32)
    inp = keras.Input((input_size, input_size, 3), name="input")
    base = keras.applications.EfficientNetB0(include_top=False, weights=None, input_tensor=inp)
    x = keras.layers.GlobalAveragePooling2D(name="top_pool")(base.output)
    x = keras.layers.Dropout(0.2, name="dropout")(x)
    out = keras.layers.Dense(NUM_CLASSES, name="fc")(x)
    return keras.Model(inp, out, name=NAME)


_BLOCK = re.compile(r"(block\d[a-z])_")


def block_of(layer_name: str) -> str:
    """``stem`` (rescaling, normalization, stem conv), ``blockNx``, ``top``, else the name."""
    if layer_name.startswith(("rescaling", "normalization", "stem_")):
        return "stem"
    m = _BLOCK.match(layer_name)
    if m:
        return m.group(1)
    if layer_name.startswith("top_"):
        return "top"
    return layer_name
