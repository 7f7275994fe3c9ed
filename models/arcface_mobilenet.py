"""ArcFace face-embedding network with a MobileFaceNet body (Chen et al., "MobileFaceNets:
Efficient CNNs for Accurate Real-Time Face Verification on Mobile Devices", CCBR 2018, Table 1;
trained with the ArcFace loss of Deng et al., CVPR 2019, which only changes training).

112x112 input; 3x3 conv, 3x3 depthwise conv, 15 inverted-residual bottlenecks (MobileNetV2
style, PReLU), 1x1 conv to 512, the linear global depthwise conv (GDConv 7x7) and a linear 1x1
conv to the embedding (128-d as in the paper; ``embedding_dim=512`` as in insightface's
``arcface_torch`` MobileFaceNet), each followed by batch norm.

Reference at 112x112, 128-d: 221 M MAdds, 0.99 M params (paper Table 2). This build counts
batch-norm statistics and per-channel PReLU slopes as params (1.02 M, +3 %).
"""

from __future__ import annotations

from typing import Any

from models._common import check_size, check_variant

NAME = "arcface_mobilenet"
TASK = "embedding"
INPUT_SIZE = 112
REFERENCE = {"macs": 221e6, "params": 0.99e6,
             "source": "Chen et al. 2018 (MobileFaceNets), Table 2: 0.99 M params, 221 M MAdds"}
PREPROCESS = {"layout": "NHWC", "color": "RGB", "mean": [127.5] * 3, "std": [128.0] * 3}

# bottlenecks of the paper's Table 1: (expansion t, channels c, repeats n, first stride s)
_BOTTLENECKS = ((2, 64, 5, 2), (4, 128, 1, 2), (2, 128, 6, 1), (4, 128, 1, 2), (2, 128, 2, 1))


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """MobileFaceNet at ``input_size`` x ``input_size``; variant ``embedding_dim`` (128 or 512)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    L = keras.layers
    check_variant(NAME, variant, {"embedding_dim": (128, 512)})
    check_size(NAME, input_size, 32)
    emb = variant.get("embedding_dim", 128)

    def conv_bn(x: Any, filters: int, kernel: int | tuple[int, int], stride: int, name: str,
                act: bool = True, depthwise: bool = False, padding: str = "same") -> Any:
        if depthwise:
            x = L.DepthwiseConv2D(kernel, strides=stride, padding=padding, use_bias=False,
                                  name=name + "_conv")(x)
        else:
            x = L.Conv2D(filters, kernel, strides=stride, padding=padding, use_bias=False,
                         name=name + "_conv")(x)
        x = L.BatchNormalization(epsilon=1e-5, name=name + "_bn")(x)
        return L.PReLU(shared_axes=[1, 2], name=name + "_prelu")(x) if act else x

    inp = keras.Input((input_size, input_size, 3), name="input")
    x = conv_bn(inp, 64, 3, 2, "conv1")
    x = conv_bn(x, 64, 3, 1, "conv2_dw", depthwise=True)
    b = 0
    cin = 64
    for t, c, n, s in _BOTTLENECKS:
        for i in range(n):
            p = f"bottleneck{b}"
            stride = s if i == 0 else 1
            y = conv_bn(x, cin * t, 1, 1, p + "_expand")
            y = conv_bn(y, 0, 3, stride, p + "_dw", depthwise=True)
            y = conv_bn(y, c, 1, 1, p + "_project", act=False)
            x = L.Add(name=p + "_add")([x, y]) if stride == 1 and cin == c else y
            cin = c
            b += 1
    x = conv_bn(x, 512, 1, 1, "conv_last")
    spatial = tuple(int(d) for d in x.shape[1:3])
    x = conv_bn(x, 0, spatial, 1, "gdconv", act=False, depthwise=True, padding="valid")
    x = conv_bn(x, emb, 1, 1, "linear", act=False)
    out = L.Flatten(name="embedding")(x)
    return keras.Model(inp, out, name=NAME)


def block_of(layer_name: str) -> str:
    """``conv1``, ``conv2_dw``, ``bottleneckN``, ``conv_last``, ``gdconv``, ``linear``."""
    if layer_name == "embedding":
        return "linear"
    for prefix in ("conv1", "conv2_dw", "conv_last", "gdconv", "linear"):
        if layer_name.startswith(prefix + "_"):
            return prefix
    return layer_name.split("_")[0]
