"""RetinaFace with a MobileNet-0.25 backbone (Deng et al., "RetinaFace: Single-stage Dense Face
Localisation in the Wild", CVPR 2020), in the structure of the ``biubug6/Pytorch_Retinaface``
repository (``cfg_mnet``): MobileNetV1 x0.25 body with LeakyReLU(0.1), a 3-level FPN (64
channels), an SSH context module per level, and 1x1 class/box/landmark heads with 2 anchors
per location. Outputs (no NMS, which is post-processing): boxes ``[A, 4]``, face scores
``[A, 2]`` (softmax) and landmarks ``[A, 10]`` for ``A = 2 * sum((S/s)^2, s in 8, 16, 32)``
anchors (1050 at 160x160, 16800 at 640x640).

Reference checked: 0.43 M params (the repository's ``mobilenet0.25_Final.pth`` is 1.7 MB of
fp32 tensors, batch-norm statistics included; this build counts the same tensors). MACs are
this build's count (61 M at 160x160, 0.98 G at 640x640; no published figure).
"""

from __future__ import annotations

from typing import Any

from models._common import check_size, check_variant, upsample_to

NAME = "retinaface_mobilenet"
TASK = "face_detection"
INPUT_SIZE = 160
REFERENCE = {"macs": None, "params": 0.43e6,
             "source": "biubug6/Pytorch_Retinaface README: mobilenet0.25 checkpoint 1.7 MB fp32 "
                       "(about 0.43 M tensors incl. batch-norm statistics); MACs: no "
                       "published figure"}
PREPROCESS = {"layout": "NHWC", "color": "BGR", "mean": [104.0, 117.0, 123.0], "std": [1.0] * 3}
NUM_ANCHORS = 2
STEPS = (8, 16, 32)

# body stages: (out_channels, stride) of conv_dw units; stage1 starts with conv_bn(3, 8, 2)
_STAGES = (((16, 1), (32, 2), (32, 1), (64, 2), (64, 1)),
           ((128, 2), (128, 1), (128, 1), (128, 1), (128, 1), (128, 1)),
           ((256, 2), (256, 1)))


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """RetinaFace-MobileNet0.25 at ``input_size`` x ``input_size`` (no variant arguments)."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    L = keras.layers
    check_variant(NAME, variant, {})
    check_size(NAME, input_size, 32)

    def conv_bn(x: Any, filters: int, kernel: int, stride: int, name: str, leaky: float | None,
                depthwise: bool = False) -> Any:
        if depthwise:
            x = L.DepthwiseConv2D(kernel, strides=stride, padding="same", use_bias=False,
                                  name=name + "_conv")(x)
        else:
            x = L.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False,
                         name=name + "_conv")(x)
        x = L.BatchNormalization(epsilon=1e-5, name=name + "_bn")(x)
        return L.LeakyReLU(negative_slope=leaky, name=name + "_act")(x) if leaky is not None else x

    inp = keras.Input((input_size, input_size, 3), name="input")
    x = conv_bn(inp, 8, 3, 2, "body_stage1_0", 0.1)
    feats = []
    for s, units in enumerate(_STAGES, start=1):
        for u, (filters, stride) in enumerate(units, start=1 if s == 1 else 0):
            p = f"body_stage{s}_{u}"
            x = conv_bn(x, 0, 3, stride, p + "_dw", 0.1, depthwise=True)
            x = conv_bn(x, filters, 1, 1, p + "_pw", 0.1)
        feats.append(x)

    out_ch = 64
    lat = [conv_bn(f, out_ch, 1, 1, f"fpn_output{i + 1}", 0.1) for i, f in enumerate(feats)]

    def up(x: Any, ref: Any, name: str) -> Any:
        return upsample_to(keras, x, tuple(ref.shape[1:3]), name)

    o3 = lat[2]
    o2 = L.Add(name="fpn_merge2_add")([lat[1], up(o3, lat[1], "fpn_merge2_up")])
    o2 = conv_bn(o2, out_ch, 3, 1, "fpn_merge2", 0.1)
    o1 = L.Add(name="fpn_merge1_add")([lat[0], up(o2, lat[0], "fpn_merge1_up")])
    o1 = conv_bn(o1, out_ch, 3, 1, "fpn_merge1", 0.1)

    def ssh(x: Any, name: str) -> Any:
        c3 = conv_bn(x, out_ch // 2, 3, 1, name + "_conv3X3", None)
        c5_1 = conv_bn(x, out_ch // 4, 3, 1, name + "_conv5X5_1", 0.1)
        c5 = conv_bn(c5_1, out_ch // 4, 3, 1, name + "_conv5X5_2", None)
        c7_2 = conv_bn(c5_1, out_ch // 4, 3, 1, name + "_conv7X7_2", 0.1)
        c7 = conv_bn(c7_2, out_ch // 4, 3, 1, name + "_conv7x7_3", None)
        y = L.Concatenate(name=name + "_cat")([c3, c5, c7])
        return L.ReLU(name=name + "_relu")(y)

    levels = [ssh(o1, "ssh1"), ssh(o2, "ssh2"), ssh(lat[2], "ssh3")]
    outputs = []
    for head, width in (("BboxHead", 4), ("ClassHead", 2), ("LandmarkHead", 10)):
        parts = []
        for i, f in enumerate(levels):
            y = L.Conv2D(NUM_ANCHORS * width, 1, name=f"{head}_{i}_conv1x1")(f)
            parts.append(L.Reshape((-1, width), name=f"{head}_{i}_reshape")(y))
        y = L.Concatenate(axis=1, name=f"{head}_cat")(parts)
        if head == "ClassHead":
            y = L.Softmax(name="ClassHead_softmax")(y)
        outputs.append(y)
    return keras.Model(inp, outputs, name=NAME)


def block_of(layer_name: str) -> str:
    """Repository module path: ``body.stage1.3``, ``fpn.output2``, ``fpn.merge1``, ``ssh2``,
    ``BboxHead`` / ``ClassHead`` / ``LandmarkHead``."""
    parts = layer_name.split("_")
    if parts[0] == "body":
        return ".".join(parts[:3])
    if parts[0] == "fpn":
        return "fpn." + parts[1]
    if parts[0].startswith("ssh") or parts[0].endswith("Head"):
        return parts[0]
    return layer_name


def num_anchors(input_size: int = INPUT_SIZE) -> int:
    """Anchor count at ``input_size``: 2 per location of the stride-8/16/32 maps (ceil sizes)."""
    total = 0
    for step in STEPS:
        side = input_size
        for _ in range(step.bit_length() - 1):
            side = -(-side // 2)
        total += side * side
    return NUM_ANCHORS * total
