"""Builders for torchvision's plain ``features``/``avgpool``/``classifier`` networks (AlexNet, VGG).

Every torchvision module becomes one Keras layer named after its module path with ``_`` for
``.`` (``features_3``, ``classifier_1``); explicit zero padding is a separate Keras layer named
``<conv>_pad`` so its block is the convolution's. ``block_of`` maps names back to the module
path, so the block view has exactly torchvision's module count.
"""

from __future__ import annotations

from typing import Any

# VGG configurations of torchvision.models.vgg (numbers = conv widths, "M" = max pool)
VGG_CFGS: dict[str, tuple[int | str, ...]] = {
    "vgg11": (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    "vgg13": (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    "vgg16": (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
              512, 512, 512, "M"),
}


def classifier(keras: Any, x: Any, spec: tuple[tuple[str, int], ...]) -> Any:
    """torchvision ``classifier`` Sequential: ("drop", 0) / ("linear", units) / ("relu", 0)."""
    for i, (kind, units) in enumerate(spec):
        name = f"classifier_{i}"
        if kind == "drop":
            x = keras.layers.Dropout(0.5, name=name)(x)
        elif kind == "linear":
            x = keras.layers.Dense(units, name=name)(x)
        else:
            x = keras.layers.ReLU(name=name)(x)
    return x


def avgpool_flatten(keras: Any, x: Any, size: int) -> Any:
    """``AdaptiveAvgPool2d((size, size))`` followed by ``torch.flatten`` (one block)."""
    x = keras.layers.AdaptiveAveragePooling2D((size, size), name="avgpool")(x)
    return keras.layers.Flatten(name="avgpool_flatten")(x)


def vgg(keras: Any, name: str, input_size: int, num_classes: int = 1000) -> Any:
    """torchvision VGG without batch norm."""
    inp = keras.Input((input_size, input_size, 3), name="input")
    x = inp
    i = 0
    for v in VGG_CFGS[name]:
        if v == "M":
            x = keras.layers.MaxPooling2D(2, strides=2, name=f"features_{i}")(x)
            i += 1
        else:
            x = keras.layers.Conv2D(int(v), 3, padding="same", name=f"features_{i}")(x)
            x = keras.layers.ReLU(name=f"features_{i + 1}")(x)
            i += 2
    x = avgpool_flatten(keras, x, 7)
    x = classifier(keras, x, (("linear", 4096), ("relu", 0), ("drop", 0), ("linear", 4096),
                              ("relu", 0), ("drop", 0), ("linear", num_classes)))
    return keras.Model(inp, x, name=name)


def block_of(layer_name: str) -> str:
    """torchvision module path (``features_3_pad`` → ``features.3``, ``avgpool_flatten`` →
    ``avgpool``)."""
    if layer_name.startswith("avgpool"):
        return "avgpool"
    for group in ("features", "classifier"):
        if layer_name.startswith(group + "_"):
            return f"{group}.{layer_name.split('_')[1]}"
    return layer_name
