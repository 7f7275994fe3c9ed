"""AlexNet (Krizhevsky et al., "ImageNet Classification with Deep Convolutional Neural Networks",
NeurIPS 2012) in torchvision's single-tower structure (64-192-384-256-256 filters, adaptive 6x6
average pooling, Dropout-Linear-ReLU classifier).

Reference at 224x224: 0.71 G MACs, 61.1 M params (torchvision.models.alexnet docs: 0.71 GFLOPS,
61,100,840 params). Block view = torchvision's module list (13 features modules, avgpool,
7 classifier modules = 21 units).
"""

from __future__ import annotations

from typing import Any

from models import _torchvision
from models._common import check_size, check_variant

NAME = "alexnet"
TASK = "classification"
INPUT_SIZE = 224
REFERENCE = {"macs": 0.71e9, "params": 61.1e6,
             "source": "torchvision.models.alexnet docs: 0.71 GFLOPS, 61.1 M params"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [123.675, 116.28, 103.53],
              "std": [58.395, 57.12, 57.375]}
NUM_CLASSES = 1000

# torchvision features: (filters, kernel, stride, padding) convs, "M" = MaxPool2d(3, 2)
_FEATURES = ((64, 11, 4, 2), "M", (192, 5, 1, 2), "M", (384, 3, 1, 1), (256, 3, 1, 1),
             (256, 3, 1, 1), "M")


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """AlexNet classifier at ``input_size`` x ``input_size`` (no variant arguments; >= 63)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    check_variant(NAME, variant, {})
    check_size(NAME, input_size, 63)
    inp = keras.Input((input_size, input_size, 3), name="input")
    x = inp
    i = 0
    for spec in _FEATURES:
        if spec == "M":
            x = keras.layers.MaxPooling2D(3, strides=2, name=f"features_{i}")(x)
            i += 1
            continue
        filters, kernel, stride, pad = spec
        x = keras.layers.ZeroPadding2D(pad, name=f"features_{i}_pad")(x)
        x = keras.layers.Conv2D(filters, kernel, strides=stride, name=f"features_{i}")(x)
        x = keras.layers.ReLU(name=f"features_{i + 1}")(x)
        i += 2
    x = _torchvision.avgpool_flatten(keras, x, 6)
    x = _torchvision.classifier(keras, x, (("drop", 0), ("linear", 4096), ("relu", 0), ("drop", 0),
                                           ("linear", 4096), ("relu", 0), ("linear", NUM_CLASSES)))
    return keras.Model(inp, x, name=NAME)


def block_of(layer_name: str) -> str:
    """torchvision module path of a layer (``features.N``, ``avgpool``, ``classifier.N``)."""
    return _torchvision.block_of(layer_name)
