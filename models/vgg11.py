"""VGG-11 (Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
Recognition", ICLR 2015, configuration A) in torchvision's structure (no batch norm,
adaptive 7x7 average pooling, Linear-ReLU-Dropout classifier).

Reference at 224x224: 7.61 GFLOPS, 132.9 M params (torchvision.models.vgg11 docs).
Block view = torchvision's module list (features modules one each, avgpool, 7 classifier modules).
"""

from __future__ import annotations

from typing import Any

from models import _torchvision
from models._common import check_size, check_variant

NAME = "vgg11"
TASK = "classification"
INPUT_SIZE = 224
REFERENCE = {"macs": 7.61e9, "params": 132.9e6,
             "source": "torchvision.models.vgg11 docs: 7.61 GFLOPS, 132.9 M params"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [123.675, 116.28, 103.53],
              "std": [58.395, 57.12, 57.375]}


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """VGG-11 classifier (1000 classes) at ``input_size`` x ``input_size`` (no variants)."""
    from optimizer.lazy import keras as _keras

    check_variant(NAME, variant, {})
    check_size(NAME, input_size, 32)
    return _torchvision.vgg(_keras(), NAME, input_size)


def block_of(layer_name: str) -> str:
    """torchvision module path of a layer (``features.N``, ``avgpool``, ``classifier.N``)."""
    return _torchvision.block_of(layer_name)
