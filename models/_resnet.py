"""ResNet-50 v1.5 body shared by ``resnet50`` and ``slimmable_resnet50``.

v1.5 (torchvision) puts the stride-2 of a downsampling bottleneck in its 3x3 convolution
(He et al. 2016 v1 put it in the first 1x1). Layer names follow torchvision's module paths
with ``_`` for ``.`` (``layer2_0_conv2``), so ``block_of`` can recover the bottleneck.
"""

from __future__ import annotations

import re
from typing import Any

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (planes, blocks, stride)
EXPANSION = 4


def _conv_bn(keras: Any, x: Any, filters: int, kernel: int, stride: int, name: str, bn: str,
             relu: str | None) -> Any:
    x = keras.layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False,
                            name=name)(x)
    x = keras.layers.BatchNormalization(epsilon=1e-5, name=bn)(x)
    return keras.layers.ReLU(name=relu)(x) if relu else x


def resnet50_body(keras: Any, x: Any, width: float = 1.0) -> Any:
    """Stem + four stages of bottlenecks, channel counts scaled by ``width``."""
    def ch(c: int) -> int:
        return max(1, int(c * width))

    x = _conv_bn(keras, x, ch(64), 7, 2, "conv1", "bn1", "relu")
    x = keras.layers.MaxPooling2D(3, strides=2, padding="same", name="maxpool")(x)
    for s, (planes, blocks, stride) in enumerate(STAGES, start=1):
        for b in range(blocks):
            p = f"layer{s}_{b}_"
            st = stride if b == 0 else 1
            shortcut = x
            y = _conv_bn(keras, x, ch(planes), 1, 1, p + "conv1", p + "bn1", p + "relu1")
            y = _conv_bn(keras, y, ch(planes), 3, st, p + "conv2", p + "bn2", p + "relu2")
            y = _conv_bn(keras, y, ch(planes) * EXPANSION, 1, 1, p + "conv3", p + "bn3", None)
            if b == 0:
                shortcut = _conv_bn(keras, x, ch(planes) * EXPANSION, 1, st,
                                    p + "downsample_0", p + "downsample_1", None)
            x = keras.layers.Add(name=p + "add")([y, shortcut])
            x = keras.layers.ReLU(name=p + "relu3")(x)
    return x


_LAYER = re.compile(r"layer(\d)_(\d+)_")


def block_of(layer_name: str) -> str:
    """``conv1`` (conv+bn+relu), ``maxpool``, ``layerS.B`` per bottleneck, ``avgpool``, ``fc``."""
    if layer_name in ("conv1", "bn1", "relu"):
        return "conv1"
    m = _LAYER.match(layer_name)
    if m:
        return f"layer{m.group(1)}.{m.group(2)}"
    if layer_name.startswith("avgpool"):
        return "avgpool"
    return layer_name
