"""MobileNetV2 (Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks",
CVPR 2018).

Built from ``keras.applications.MobileNetV2`` (``weights=None``) without its top, plus the
torchvision classifier: global average pooling, ``Dropout(0.2)`` and ``Dense(1000)``.
Reference at 224x224: 300 M MACs, 3.5 M params (torchvision ``mobilenet_v2``: 0.30 GFLOPS,
3,504,872 params; Keras also counts the 34 k batch-norm moving statistics).
Block view = torchvision's module list (21 units): ``features.0`` (ConvBNReLU), ``features.1``
to ``features.17`` (inverted residuals), ``features.18`` (ConvBNReLU + global pooling),
``classifier.0`` (Dropout), ``classifier.1`` (Linear).
"""

from __future__ import annotations

import re
from typing import Any

from models._common import check_size, check_variant

NAME = "mobilenet_v2"
TASK = "classification"
INPUT_SIZE = 224
REFERENCE = {"macs": 300e6, "params": 3.5e6,
             "source": "torchvision.models.mobilenet_v2 docs (0.30 GFLOPS, 3.5 M params); "
                       "Sandler et al. 2018, Table 4 (300 M MAdds, 3.4 M params)"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [127.5] * 3}
NUM_CLASSES = 1000
_ALPHAS = (0.35, 0.5, 0.75, 1.0, 1.3, 1.4)


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """MobileNetV2 at ``input_size`` x ``input_size``; variant ``alpha`` (width multiplier)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    check_variant(NAME, variant, {"alpha": _ALPHAS})
    check_size(NAME, input_size, 32)
    inp = keras.Input((input_size, input_size, 3), name="input")
    base = keras.applications.MobileNetV2(include_top=False, weights=None, input_tensor=inp,
                                          alpha=variant.get("alpha", 1.0))
    x = keras.layers.GlobalAveragePooling2D(name="global_pool")(base.output)
    x = keras.layers.Dropout(0.2, name="classifier_dropout")(x)
    out = keras.layers.Dense(NUM_CLASSES, name="classifier_linear")(x)
    return keras.Model(inp, out, name=NAME)


_BLOCK = re.compile(r"block_(\d+)_")


def block_of(layer_name: str) -> str:
    """torchvision module path of a layer (``features.N`` / ``classifier.N``)."""
    if layer_name.startswith(("Conv1", "bn_Conv1")):
        return "features.0"
    if layer_name.startswith("expanded_conv"):
        return "features.1"
    m = _BLOCK.match(layer_name)
    if m:
        return f"features.{int(m.group(1)) + 1}"
    if layer_name.startswith(("Conv_1", "out_relu", "global_pool")):
        return "features.18"
    if layer_name == "classifier_dropout":
        return "classifier.0"
    if layer_name == "classifier_linear":
        return "classifier.1"
    return layer_name
