"""CPU pre- and post-processing time of a detector, from its tensor shapes.

Park & Ha (IEEE Access 2024; docs/METHODS.md section 2) run a pre-processing stage (image resize and
normalisation) and a post-processing stage (box decoding, score conversion, non-maximum
suppression) on the CPU with 2 threads each, around the inference stages. Their cost is charged
here from the work each step does on the graph's own tensors, at the CPU's vector rate:

* pre-processing: bilinear resize to the input size (4 taps) and mean/std normalisation, 5
  multiply-adds per input element (TFLite ``ResizeBilinear`` reference kernel), reading the
  8-bit frame and writing the float input;
* post-processing of an SSD head (outputs ``[A, 4]`` box encodings and ``[A, C]`` class
  logits, TF Object Detection API ``export_tflite_graph`` with ``score_converter: SIGMOID``):
  a sigmoid per logit (about 10 multiply-add equivalents for the exponential's polynomial) and
  the per-anchor class maximum of ``TFLite_Detection_PostProcess``'s fast NMS (1 per logit),
  then per anchor the box decoding (faster_rcnn_box_coder: about 20) and the score sort (about
  ``log2 A``); the greedy suppression stops at ``max_total_detections`` (100) and is negligible.

Rate: the CPU's fp32 peak times its ``default`` efficiency, scaled to ``host_threads`` of its
``cores``; bytes move at its memory bandwidth; time = max(compute, memory) (roofline, as in
:mod:`optimizer.cost.analytic`). Graphs without an SSD head get 0 for both (no default
pre/post-processing is assumed for classifiers).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..graph.layergraph import LayerGraph
from ..hardware.schema import Device

RESIZE_NORMALISE_MACS_PER_ELEMENT = 5.0
SIGMOID_AND_MAX_MACS_PER_LOGIT = 11.0
DECODE_MACS_PER_ANCHOR = 20.0


def ssd_head_outputs(graph: LayerGraph) -> tuple[str, str] | None:
    """Names of the (box encodings ``[A, 4]``, class logits ``[A, C]``) outputs when the graph's
    two outputs are an SSD head, else None."""
    shapes = {t: tuple(graph.tensors[t].shape) for t in graph.outputs}
    boxes = [t for t, s in shapes.items() if len(s) == 2 and s[1] == 4]
    logits = [t for t, s in shapes.items() if len(s) == 2 and s[1] > 4]
    if len(shapes) == 2 and boxes and logits and shapes[boxes[0]][0] == shapes[logits[0]][0]:
        return boxes[0], logits[0]
    return None


def ssd_head(graph: LayerGraph) -> tuple[int, int] | None:
    """(anchors, classes) when the graph's outputs are an SSD head ``[A, 4]`` + ``[A, C]``."""
    names = ssd_head_outputs(graph)
    if names is None:
        return None
    anchors, classes = graph.tensors[names[1]].shape
    return int(anchors), int(classes)


def _cpu_rates(device: Device, host_threads: int) -> tuple[float, float, float] | None:
    """(MAC/s, bytes/s, share of the CPU) of ``host_threads`` threads on the device's CPU, or None
    when its fallback processor is not a CPU."""
    cpu = device.processors[device.fallback_index]
    if cpu.kind != "cpu":
        return None
    share = min(1.0, host_threads / cpu.cores)
    rate = cpu.peak_macs_per_s.get("fp32", min(cpu.peak_macs_per_s.values())) * cpu.efficiency["default"] * share
    return rate, cpu.memory_bandwidth_bytes_per_s * share, share


def _post_seconds(anchors: int, classes: int, rate: float, bandwidth: float) -> float:
    """SSD post-processing of ``anchors`` x ``classes`` scores (module docstring)."""
    logits = anchors * classes
    macs = logits * SIGMOID_AND_MAX_MACS_PER_LOGIT + anchors * (DECODE_MACS_PER_ANCHOR + math.log2(max(anchors, 2)))
    return max(macs / rate, (logits + 4 * anchors) * 4 / bandwidth)


def host_seconds(graph: LayerGraph, device: Device, host_threads: int = 2) -> dict[str, float]:
    """``{"pre_s", "post_s"}``: per-frame CPU pre-/post-processing time of ``graph`` (module doc)."""
    costs = host_costs(graph, device, host_threads)
    return {"pre_s": costs["pre_s"], "post_s": costs["post_s"]}


def host_costs(graph: LayerGraph, device: Device, host_threads: int = 2) -> dict[str, float]:
    """Per-frame host work of a detector on the phone's CPU, all 0 for graphs without an SSD head:

    * ``pre_s``: resize and normalise the frame into the input;
    * ``post_s``: post-process the whole head output (every anchor and class);
    * ``finish_s``: decode and suppress the :data:`SERVER_TOPK` anchors a split's server sends
      back with ``result="topk"`` (one class score each);
    * ``power_w``: the CPU's active power at its top clock times the threads' share of its cores
      (energy = power x time, as the cost tables charge a processor);
    * ``share``: that share (the fraction of the CPU the host threads keep busy).
    """
    head = ssd_head(graph)
    rates = _cpu_rates(device, host_threads)
    if head is None or rates is None:
        return dict.fromkeys(("pre_s", "post_s", "finish_s", "power_w", "share"), 0.0)
    rate, bandwidth, share = rates
    n_in = sum(math.prod(graph.tensors[t].shape) for t in graph.inputs)
    pre = max(n_in * RESIZE_NORMALISE_MACS_PER_ELEMENT / rate, n_in * (1 + 4) / bandwidth)
    anchors, classes = head
    cpu = device.processors[device.fallback_index]
    return {"pre_s": float(pre), "post_s": float(_post_seconds(anchors, classes, rate, bandwidth)),
            "finish_s": float(_post_seconds(min(SERVER_TOPK, anchors), 1, rate, bandwidth)),
            "power_w": float(cpu.power_w(cpu.max_clock_hz) * share), "share": float(share)}


def split_host_seconds(host: dict[str, float], boundaries: np.ndarray, n_layers: int, result: str) -> np.ndarray:
    """Host seconds per frame of a split of a detector at each boundary (``host``:
    :func:`host_costs`): the frame's pre-processing always; then post-processing of the whole
    head output when the phone runs every layer (``l = L``) or the server sends raw outputs, else
    (``result="topk"``) only the decoding of the server's top-k anchors."""
    b = np.asarray(boundaries)
    whole = (b >= n_layers) | (result == "raw")
    return np.asarray(host["pre_s"] + np.where(whole, host["post_s"], host["finish_s"]), dtype=np.float64)


def host_seconds_at_cap(seconds: Any, cpu_cap: float) -> Any:
    """Host seconds on a CPU capped at ``cpu_cap`` of its top clock (the work scales with the
    clock; ``cpu_cap`` is clipped to (0, 1])."""
    return seconds / min(max(float(cpu_cap), 1e-9), 1.0)


# ------------------------------------------------------------------ what a split's server sends back
#: Detections a split's server returns per frame for an SSD head (``result="topk"``): the TF
#: Object Detection API's ``max_total_detections`` (100 in the TF2 zoo SSD configs).
SERVER_TOPK = 100
#: What the server returns per detection: (tensor name, per-detection shape, dtype). The anchor
#: index, its box encoding, its score (the best class logit) and its class (that logit's column).
#: ``plan.manifest.topk_outputs`` builds the served response from this one layout.
TOPK_LAYOUT: tuple[tuple[str, tuple[int, ...], str], ...] = (
    ("detection_anchor", (), "int32"),
    ("detection_box_encoding", (4,), "float32"),
    ("detection_score", (), "float32"),
    ("detection_class", (), "int32"))
#: Bytes per returned detection (28).
TOPK_BYTES_PER_DETECTION = sum(math.prod(shape) * np.dtype(dtype).itemsize for _, shape, dtype in TOPK_LAYOUT)
RESULT_MODES = ("auto", "raw", "topk")


def resolve_result(graph: LayerGraph, result: str) -> str:
    """``"raw"`` or ``"topk"``: what the server of a split of ``graph`` sends back.

    ``raw``: the network's outputs as float32. ``topk``: for an SSD head (:func:`ssd_head`), the
    :data:`SERVER_TOPK` anchors of highest class score, each with its box encoding, score and
    class; the phone decodes those boxes with its anchors and finishes non-maximum suppression on
    them (``TFLite_Detection_PostProcess`` keeps at most that many detections). ``auto``: ``topk``
    when the graph has an SSD head, else ``raw``.
    """
    from ..errors import ConfigError

    if result not in RESULT_MODES:
        raise ConfigError(f"--result {result!r}: expected one of {', '.join(RESULT_MODES)}")
    head = ssd_head(graph)
    if result == "topk" and head is None:
        raise ConfigError(f"--result topk: {graph.name} has no SSD head (outputs [A, 4] box encodings and "
                          "[A, C] class logits); use --result raw")
    if result == "auto":
        return "topk" if head is not None and head[0] > SERVER_TOPK else "raw"
    return result


def result_bytes(graph: LayerGraph, mode: str) -> float:
    """Bytes the server sends back per frame; ``mode`` is ``"raw"`` or ``"topk"``, as
    :func:`resolve_result` gives it."""
    head = ssd_head(graph)
    if mode == "topk" and head is not None:
        return float(min(SERVER_TOPK, head[0]) * TOPK_BYTES_PER_DETECTION)
    return float(graph.cut_bytes_array("fp32")[-1])
