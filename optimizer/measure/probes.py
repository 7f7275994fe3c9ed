"""Which kernel configurations to probe: a prior sample, samples near given networks, and
adaptive samples where the predictor errs (nn-Meter's sampling, Zhang et al., MobiSys 2021).

* :func:`prior_sample` draws configurations of every kernel family from a generic prior over
  the design space of CNNs and transformers (spatial sizes 1-640, 8-2048 channels, kernel 1/3/5/7,
  stride 1/2, global depthwise windows, ...), not from any particular network, so that networks
  scored later are never the ones the probes were placed for. nn-Meter draws from a prior "inferred from existing models";
  ours is written out per family in :data:`FAMILY_SHARE` and the ``_sample_*`` functions, with
  caps that keep one probe under about a second and a few hundred MB.
* :func:`near_sample` adds, for each distinct kernel of the given networks, the kernel itself and
  ``jitter`` copies with their channels drawn from ``[0.5, 1.2] x`` (nn-Meter's fine-grained
  range), for users who plan a known set of networks.
* :func:`adaptive_sample` is nn-Meter's adaptive data sampling: around each probe whose
  held-out prediction error exceeds ``threshold`` (largest first), ``per_point`` new
  configurations with the channels drawn from ``[0.5, 1.2] x`` and the rest fixed.

Everything is seeded; the same seed and budget give the same list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from ..cost.predictor import reference_s
from ..errors import ConfigError
from ..graph.kernel_config import BCAST_CHANNEL, BCAST_NONE, BCAST_SCALAR, KernelConfig, graph_kernels
from ..graph.layergraph import LayerGraph
from .probe_models import PROBE_KINDS

#: share of the prior budget per kernel family (the compute families, which dominate networks'
#: time and vary most, get most)
FAMILY_SHARE: dict[str, float] = {
    "conv1x1": 0.21, "convkxk": 0.19, "convstem": 0.05, "dwconv_s1": 0.10, "dwconv_s2": 0.06, "dense": 0.05,
    "matmul": 0.06, "pool": 0.05, "eltwise": 0.13, "layout": 0.06, "resize": 0.04,
}
#: share of the compute families' samples drawn from the CNN design prior (:func:`_stage`), the
#: rest from the broad one (any size with any channels)
DESIGN_SHARE = 0.75
#: spatial sizes a sample snaps to (those of 224/256/300/320/416/512/640 inputs halved repeatedly)
SPATIAL: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 13, 14, 16, 19, 20, 24, 26, 28, 32, 38, 40, 48, 52, 56,
                            64, 76, 80, 96, 104, 112, 128, 150, 160, 192, 208, 224, 256, 300, 320, 384, 416, 448,
                            512, 640)
#: the probe budget the benchmarks use (5-10 minutes per runtime, dtype and thread count on a
#: workstation core). On a shared host one probe's time moves by up to x1.5 between runs, so a
#: forest's leaf needs several neighbours: at 2,000 the large INT8 convolutions had too few
DEFAULT_PROBES = 4000
MAX_MACS = 2.5e9  # per probe: about 0.1 s on one core of a workstation
MAX_ELEMS = 6 * 2**20  # activation elements per tensor (24 MB at FP32)
MAX_WEIGHTS = 24 * 2**20  # weight elements (96 MB at FP32)
JITTER = (0.5, 1.2)  # nn-Meter's fine-grained channel range
TINY_S = 4e-6  # a kernel whose work-proportional reference time is below this is "tiny" ...
TINY_KEEP = 0.3  # ... and kept with this probability by the prior sample
#: share of dense samples with at least ``LARGE_DENSE_WEIGHTS`` weights: past the caches a
#: matrix-vector product streams its weights from memory at another rate per weight (onnxruntime
#: INT8: 71 ps per weight at 4 M weights, 125 ps at 15-20 M), which a log-uniform draw of both
#: sizes seldom reaches
LARGE_DENSE_SHARE, LARGE_DENSE_WEIGHTS = 0.3, 4 * 2**20
#: share of k x k convolution samples that are transposed convolutions (:func:`_convkxk`)
TRANSPOSED_SHARE = 0.06
#: share of the strided depthwise draws that are global: a window as large as the input, one
#: output pixel (MobileFaceNet's GDConv). XNNPACK's INT8 depthwise runs a 7 x 7 window 30-50x
#: slower per MAC than a 3 x 3 one, and this one slowest of all (arcface_mobilenet's 7 x 7 x 512:
#: 0.8 ms alone, 1.7 ms in its network, where a 3 x 3 depthwise of the same input takes 20 us)
GLOBAL_DW_SHARE = 0.15
#: share of design-prior layers from networks without a down-sampling stem (:func:`_stage`)
FULL_RES_SHARE = 0.25
#: grains a design-prior channel count is rounded to, one drawn per layer (:func:`_stage`): width
#: multipliers give multiples of 8 (MobileNets, EfficientNets), designs without one multiples of 64
#: (VGG, ResNet, U-Net, YOLO). A kernel may take a path of its own for a count of whole cache lines
#: (:func:`optimizer.cost.predictor.row_alignment`), which a multiple of 8 reaches one time in eight
CHANNEL_GRAINS: tuple[int, ...] = (8, 16, 32, 64)


def check_families(families: Iterable[str] | None) -> tuple[str, ...]:
    """The probed families (default: all of :data:`FAMILY_SHARE`); an unknown one or one without
    probes is refused by name."""
    if not families:
        return tuple(FAMILY_SHARE)
    chosen = tuple(dict.fromkeys(families))
    bad = [f for f in chosen if f not in FAMILY_SHARE]
    if bad:
        raise ConfigError(f"--families: {bad[0]!r} is not a kernel family with probes; expected some of "
                          f"{', '.join(FAMILY_SHARE)}")
    return chosen


def prior_sample(budget: int, seed: int = 0, families: Iterable[str] | None = None) -> list[KernelConfig]:
    """``budget`` distinct configurations over ``families`` (default: every family of
    :data:`FAMILY_SHARE`, in its shares; module doc)."""
    chosen = check_families(families)
    if budget < len(chosen):
        raise ConfigError(f"--probes {budget}: need at least {len(chosen)} (one per kernel family)")
    rng = np.random.default_rng([seed, 17])
    counts = _allocate(budget, chosen)
    out: list[KernelConfig] = []
    seen: set[KernelConfig] = set()
    for family, n in counts.items():
        draw = _SAMPLERS[family]
        tries = 0
        got = 0
        while got < n and tries < 50 * n:
            tries += 1
            cfg = draw(rng)
            if cfg is None or cfg in seen or not within_caps(cfg):
                continue
            if reference_s([cfg], "fp32")[0] < TINY_S and not _global_window(cfg) and rng.random() > TINY_KEEP:
                continue  # microsecond kernels: noisy to time, and little of any network's time
            seen.add(cfg)
            out.append(cfg)
            got += 1
    return out


def _global_window(cfg: KernelConfig) -> bool:
    """A depthwise convolution whose window is its whole input: little work, but not a
    microsecond kernel everywhere (:data:`GLOBAL_DW_SHARE`)."""
    return cfg.kind == "dwconv" and cfg.k > 1 and cfg.k == cfg.h_in == cfg.stride


def _allocate(budget: int, families: Sequence[str]) -> dict[str, int]:
    """Largest-remainder split of ``budget`` over ``families`` in their :data:`FAMILY_SHARE`
    (at least one each)."""
    total = sum(FAMILY_SHARE[f] for f in families)
    raw = {f: budget * FAMILY_SHARE[f] / total for f in families}
    counts = {f: max(1, int(v)) for f, v in raw.items()}
    left = budget - sum(counts.values())
    for f in sorted(raw, key=lambda k: raw[k] - int(raw[k]), reverse=True)[: max(left, 0)]:
        counts[f] += 1
    return counts


def within_caps(cfg: KernelConfig) -> bool:
    """Whether a probe of ``cfg`` stays within the per-probe caps (time, memory)."""
    return (cfg.macs <= MAX_MACS and cfg.in_elems <= MAX_ELEMS * max(cfg.n_in, 1)
            and cfg.out_elems <= MAX_ELEMS and cfg.weight_elems <= MAX_WEIGHTS and cfg.kind in PROBE_KINDS)


def _spatial(rng: np.random.Generator, lo: int, hi: int) -> int:
    choices = [s for s in SPATIAL if lo <= s <= hi]
    v = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return min(choices, key=lambda s: abs(math.log(s) - math.log(v)))


def _channels(rng: np.random.Generator, lo: int, hi: int) -> int:
    v = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    if rng.random() < 0.75:  # most networks use multiples of 8
        return max(8, int(round(v / 8)) * 8)
    return max(lo, int(round(v)))


def _pick(rng: np.random.Generator, values: Sequence[int], weights: Sequence[float]) -> int:
    p = np.asarray(weights, dtype=float)
    return int(values[int(rng.choice(len(values), p=p / p.sum()))])


def _stage(rng: np.random.Generator) -> tuple[int, int]:
    """(output size, channels) of a layer drawn from the design convention of CNNs (Simonyan &
    Zisserman 2015; He et al. 2016; Sandler et al. 2018): a network of width ``w`` in ``[1/4, 2]``
    has ``32 w 2^s`` channels at stage ``s``, where its 112-640 pixel input is down-sampled ``2^(s+1)``
    times, or ``2^s`` times in the :data:`FULL_RES_SHARE` of networks whose first stage keeps the
    input resolution (VGG, U-Net); the channels spread ``x/ 1.5`` around that, rounded to a grain
    of :data:`CHANNEL_GRAINS` (no larger than the count)."""
    stage = int(rng.integers(0, 6))
    shift = stage + (0 if rng.random() < FULL_RES_SHARE else 1)
    size = _spatial(rng, max(1, 112 >> shift), max(1, 640 >> shift))
    width = math.exp(rng.uniform(math.log(0.25), math.log(2.0)))
    c = 32 * width * 2**stage * math.exp(rng.normal(0.0, math.log(1.5)))
    grain = min(CHANNEL_GRAINS[int(rng.integers(len(CHANNEL_GRAINS)))], 1 << max(3, int(math.log2(max(c, 8)))))
    return size, max(8, int(round(c / grain)) * grain)


def _ratio(rng: np.random.Generator, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _conv(rng: np.random.Generator, k: int | None) -> KernelConfig:
    stride = _pick(rng, (1, 2), (0.75, 0.25))
    kk = k if k is not None else _pick(rng, (3, 5, 7), (0.75, 0.17, 0.08))
    if rng.random() < DESIGN_SHARE:  # expansions and projections (1x1), same or doubled width (k x k), heads
        size, c = _stage(rng)
        c_in = c
        if rng.random() < 0.15:  # a detection or classification head: few output channels
            c_out = _channels(rng, 4, 96)
        else:
            c_out = max(8, int(round(c * (_ratio(rng, 1 / 6, 6) if kk == 1 else _ratio(rng, 0.5, 2)) / 8)) * 8)
    else:
        size = _spatial(rng, 1, 320)
        c_in, c_out = _channels(rng, 8, 2048), _channels(rng, 8, 2048)
    return KernelConfig("conv", size * stride, size * stride, c_in, size, size, c_out, k=kk, stride=stride)


def _convkxk(rng: np.random.Generator) -> KernelConfig:
    if rng.random() >= TRANSPOSED_SHARE:
        return _conv(rng, None)
    # a transposed convolution up-sampling 2x (a segmentation or text-detection head, a decoder)
    size, c = _stage(rng)
    c_out = max(8, int(round(c * _ratio(rng, 0.25, 1) / 8)) * 8)
    return KernelConfig("conv_transpose", size, size, c, 2 * size, 2 * size, c_out,
                        k=_pick(rng, (2, 3, 4), (0.5, 0.3, 0.2)), stride=2)


def _stem(rng: np.random.Generator) -> KernelConfig:
    size = _spatial(rng, 16, 640)
    stride = _pick(rng, (2, 1), (0.8, 0.2))
    out = -(-size // stride)
    return KernelConfig("conv", size, size, _pick(rng, (1, 3, 4), (0.1, 0.8, 0.1)), out, out,
                        _channels(rng, 8, 96), k=_pick(rng, (3, 5, 7), (0.6, 0.1, 0.3)), stride=stride)


def _dwconv(rng: np.random.Generator, stride: int) -> KernelConfig:
    if stride > 1 and rng.random() < GLOBAL_DW_SHARE:
        size = _pick(rng, (3, 4, 5, 6, 7, 8, 10, 14), (1, 1, 1, 1, 3, 1, 1, 1))
        c = _channels(rng, 32, 1024)
        return KernelConfig("dwconv", size, size, c, 1, 1, c, k=size, stride=size)
    if rng.random() < DESIGN_SHARE:  # depthwise layers of inverted residuals run on expanded channels
        size, c = _stage(rng)
        c = max(8, int(round(c * _ratio(rng, 1, 6) / 8)) * 8)
    else:
        size, c = _spatial(rng, 1, 320), _channels(rng, 8, 2048)
    return KernelConfig("dwconv", size * stride, size * stride, c, size, size, c,
                        k=_pick(rng, (3, 5, 7), (0.7, 0.25, 0.05)), stride=stride)


def _dense(rng: np.random.Generator) -> KernelConfig:
    if rng.random() < LARGE_DENSE_SHARE:  # a classifier's hidden layers: their weights stream from memory
        c_out = _channels(rng, 512, 4096)
        weights = _ratio(rng, LARGE_DENSE_WEIGHTS, MAX_WEIGHTS)
        return KernelConfig("fc", c_in=max(16, int(round(weights / c_out / 8)) * 8), c_out=c_out)
    return KernelConfig("fc", c_in=_channels(rng, 16, 32768), c_out=_channels(rng, 8, 4096))


def _matmul(rng: np.random.Generator) -> KernelConfig:
    if rng.random() < 0.7:
        return KernelConfig("fc", rows=_spatial(rng, 2, 512), c_in=_channels(rng, 16, 4096),
                            c_out=_channels(rng, 16, 4096))
    batch = _pick(rng, (1, 2, 4, 8, 12, 16), (1, 1, 1, 1, 1, 1))
    rows = _spatial(rng, 8, 512)
    return KernelConfig("bmm", h_in=batch, h_out=batch, rows=rows, c_in=_channels(rng, 16, 512),
                        c_out=_pick(rng, (rows, _channels(rng, 16, 512)), (0.5, 0.5)))


def _pool(rng: np.random.Generator) -> KernelConfig:
    kind = ("global_avg_pool", "max_pool", "avg_pool", "global_max_pool")[_pick(rng, (0, 1, 2, 3), (0.4, 0.35, 0.2, 0.05))]
    c = _channels(rng, 8, 4096 if kind.startswith("global") else 1024)
    if kind.startswith("global"):
        size = _spatial(rng, 1, 80)
        return KernelConfig(kind, size, size, c, 1, 1, c, k=size, stride=size)
    k = _pick(rng, (2, 3), (0.4, 0.6))
    stride = _pick(rng, (1, 2), (0.25, 0.75)) if k == 3 else 2
    size = _spatial(rng, 2, 320) if rng.random() > DESIGN_SHARE else max(2, _stage(rng)[0] * 2)
    return KernelConfig(kind, size, size, c, -(-size // stride), -(-size // stride), c, k=k, stride=stride)


_ELTWISE: tuple[tuple[str, float], ...] = (
    ("add", 0.18), ("mul", 0.18), ("sigmoid", 0.10), ("relu", 0.04), ("relu6", 0.04), ("hard_swish", 0.08),
    ("leaky_relu", 0.05), ("prelu", 0.05), ("tanh", 0.04), ("softmax", 0.07), ("batch_norm", 0.07),
    ("layer_norm", 0.07), ("sub", 0.03), ("unary", 0.03), ("dequantize", 0.03),
)


#: share of element-wise samples that are an input normalization: a mean or scale of one or three
#: channels over an image, broadcast along the innermost axis, a slow path of its own (onnxruntime
#: INT8: 224 x 224 x 3 less a per-channel mean 1.49 ms, 224 x 224 x 32 by a per-channel scale
#: 0.21 ms), which no draw of 8-1024 channels reaches
INPUT_NORM_SHARE = 0.08
#: share of two-operand element-wise samples whose second operand is a scalar (hard-swish's ``+ 3``,
#: ``/ 6``; a learnable affine block's scale and bias), a path of its own (:data:`BCAST_SCALAR`)
SCALAR_SHARE = 0.2
INPUT_SIZES: tuple[int, ...] = (96, 128, 160, 192, 224, 256, 300, 320, 384, 416, 512, 640)


def _eltwise(rng: np.random.Generator) -> KernelConfig:
    if rng.random() < INPUT_NORM_SHARE:
        kind = ("sub", "mul", "add")[_pick(rng, (0, 1, 2), (0.4, 0.4, 0.2))]
        size, c = INPUT_SIZES[int(rng.integers(len(INPUT_SIZES)))], (1, 3)[_pick(rng, (0, 1), (0.2, 0.8))]
        return KernelConfig(kind, size, size, c, size, size, c, n_in=2, bcast=BCAST_SCALAR if c == 1 else BCAST_CHANNEL)
    kind = _ELTWISE[_pick(rng, tuple(range(len(_ELTWISE))), [w for _, w in _ELTWISE])][0]
    if kind in ("softmax", "layer_norm"):
        rows, c = _spatial(rng, 1, 1024), _channels(rng, 16, 4096)
        return KernelConfig(kind, rows, 1, c, rows, 1, c)
    size, c = _stage(rng) if rng.random() < DESIGN_SHARE else (_spatial(rng, 1, 320), _channels(rng, 8, 1024))
    if kind in ("add", "mul", "sub"):
        u, per_channel = rng.random(), (0.4 if kind == "mul" else 0.1)
        bcast = BCAST_CHANNEL if u < per_channel else BCAST_SCALAR if u < per_channel + SCALAR_SHARE else BCAST_NONE
        if bcast == BCAST_CHANNEL and rng.random() < 0.5:  # few channels: a run per pixel (predictor.RUN_S)
            c = _channels(rng, 4, 64)  # (a quantized network's per-channel scales of its early stages)
        return KernelConfig(kind, size, size, c, size, size, c, n_in=2, bcast=bcast)
    return KernelConfig(kind, size, size, c, size, size, c)


def _layout(rng: np.random.Generator) -> KernelConfig:
    kind = ("concat", "pad", "transpose", "slice", "gather", "depth_to_space")[
        _pick(rng, (0, 1, 2, 3, 4, 5), (0.35, 0.15, 0.15, 0.15, 0.1, 0.1))]
    size, c = _spatial(rng, 1, 320), _channels(rng, 8, 1024)
    if kind == "concat":
        n = _pick(rng, (2, 3, 4), (0.6, 0.2, 0.2))
        return KernelConfig("concat", size, size, max(c // n, 1), size, size, c, n_in=n)
    if kind == "pad":
        if rng.random() < 0.4:  # channel padding (a residual's shortcut widened to the next stage)
            return KernelConfig("pad", size, size, c, size, size, c * _pick(rng, (2, 3), (0.8, 0.2)))
        grow = _pick(rng, (1, 2), (0.6, 0.4))
        return KernelConfig("pad", size, size, c, size + grow, size + grow, c)
    if kind == "slice":
        cut = max(1, size // 2) if rng.random() < 0.5 else max(1, size - 1)
        return KernelConfig("slice", size, size, c, cut, cut, c)
    if kind == "gather":
        return KernelConfig("gather", rows=_spatial(rng, 8, 512), c_in=_channels(rng, 512, 32768),
                            c_out=_channels(rng, 32, 1024))
    if kind == "depth_to_space":
        c4 = max(4, c // 4 * 4)
        return KernelConfig("depth_to_space", size, size, c4, 2 * size, 2 * size, c4 // 4)
    return KernelConfig(kind, size, size, c, size, size, c)


def _resize(rng: np.random.Generator) -> KernelConfig:
    kind = "resize_nearest" if rng.random() < 0.5 else "resize_bilinear"
    size, c = _spatial(rng, 2, 160), _channels(rng, 8, 512)
    scale = _pick(rng, (2, 4, 8), (0.75, 0.15, 0.1))  # x4, x8: a segmentation or text head's upsampling
    return KernelConfig(kind, size, size, c, size * scale, size * scale, c)


_SAMPLERS = {
    "conv1x1": lambda r: _conv(r, 1), "convkxk": _convkxk, "convstem": _stem,
    "dwconv_s1": lambda r: _dwconv(r, 1), "dwconv_s2": lambda r: _dwconv(r, 2), "dense": _dense,
    "matmul": _matmul, "pool": _pool, "eltwise": _eltwise, "layout": _layout, "resize": _resize,
}


def jitter(cfg: KernelConfig, rng: np.random.Generator) -> KernelConfig:
    """``cfg`` with its channels redrawn in ``[0.5, 1.2] x`` (nn-Meter's fine-grained sampling);
    spatial sizes, kernel and stride fixed; channel-preserving kinds keep ``c_in == c_out``."""
    def draw(c: int) -> int:
        return max(1, int(round(c * rng.uniform(*JITTER))))

    if cfg.kind in ("fc", "bmm", "gather"):
        return replace(cfg, c_in=draw(cfg.c_in), c_out=draw(cfg.c_out))
    if cfg.kind == "conv":
        return replace(cfg, c_in=min(draw(cfg.c_in), cfg.c_in) if cfg.c_in <= 4 else draw(cfg.c_in),
                       c_out=draw(cfg.c_out))
    if cfg.kind in ("concat", "depth_to_space"):
        c_out = draw(cfg.c_out)
        if cfg.kind == "depth_to_space":
            return replace(cfg, c_in=c_out * 4, c_out=c_out)
        return replace(cfg, c_in=max(c_out // max(cfg.n_in, 1), 1), c_out=c_out)
    c = draw(cfg.c_in)
    return replace(cfg, c_in=c, c_out=c)


def near_sample(graphs: Iterable[LayerGraph], jitters: int = 2, seed: int = 0) -> list[KernelConfig]:
    """Every distinct probe-able kernel of ``graphs`` (op view) and ``jitters`` jittered copies each."""
    rng = np.random.default_rng([seed, 23])
    out: list[KernelConfig] = []
    seen: set[KernelConfig] = set()
    for g in graphs:
        op = g.op_view if g.op_view is not None else g
        for kernels in graph_kernels(op):
            for cfg in kernels:
                for c in [cfg, *(jitter(cfg, rng) for _ in range(jitters))]:
                    if c not in seen and within_caps(c):
                        seen.add(c)
                        out.append(c)
    return out


def adaptive_sample(configs: Sequence[KernelConfig], errors: Sequence[float], budget: int, *,
                    threshold: float = 0.1, per_point: int = 3, seed: int = 0,
                    exclude: Iterable[KernelConfig] = ()) -> list[KernelConfig]:
    """Up to ``budget`` new configurations near the probes whose held-out relative error
    ``|predicted / measured - 1|`` exceeds ``threshold``, the largest errors first (module doc)."""
    rng = np.random.default_rng([seed, 29])
    seen = set(configs) | set(exclude)
    out: list[KernelConfig] = []
    order = np.argsort(-np.abs(np.asarray(errors, dtype=float)))
    for i in order:
        if abs(errors[i]) <= threshold or len(out) >= budget:
            break
        for _ in range(per_point):
            c = jitter(configs[i], rng)
            if c not in seen and within_caps(c):
                seen.add(c)
                out.append(c)
                if len(out) >= budget:
                    break
    return out
