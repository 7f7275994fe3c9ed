"""Equivalence of exported INT8 parts with the whole model, cut inside a residual block.

The network is the ResNet-50 topology at a quarter of its channels (``slimmable_resnet50``,
width 0.25: the same 16 bottlenecks, layer names and cut tensors as ``resnet50``, 16x fewer
weights; conversion time follows the layer count, not the width), 32 px. It is exported as a
split cut inside bottleneck ``layer1.2`` (the skip and ``relu1`` cross) and run over a real
loopback socket against the single-file INT8 model of the same weights and calibration (shipped
by the export with ``keep_reference``): top-1 agreement on 200 inputs >= 99 %; SQNR printed.

MobileNetV2's INT8 pipeline is checked in ``test_export.py``; an FP32 split cut inside a
residual block (two crossing tensors) over the socket against the single-file FP32 model and
Keras in ``test_serve.py``. Both checks at full width on ``resnet50`` (INT8 and FP32, with the
SQNRs against the float model) are ``benchmarks/bench_runtime_equivalence.py``.
"""

from __future__ import annotations

import pytest

from _deploy_cache import split_over_socket

pytestmark = pytest.mark.slow

N = 200
MODEL, WIDTH, SIZE, CUT = "slimmable_resnet50", 0.25, 32, 29


def test_resnet50_int8_split_over_socket_agrees_with_single_file(tmp_path):
    r = split_over_socket(tmp_path, MODEL, SIZE, CUT, "int8", frames=N, float_reference=False, width=WIDTH)
    plan, manifest, rep = r["plan"], r["manifest"], r["report"]
    assert [t.name for t in plan.split.tensors] == ["layer1_1_relu3:0", "layer1_2_relu1:0"]
    assert manifest.calibration.aligned_to_single_file and manifest.reference.file == "reference.int8.tflite"
    print(f"\nresnet50 x{WIDTH} int8 split at {CUT} over loopback: top-1 agreement with single-file INT8 "
          f"{r['agreement']:.1%} on {N} inputs; SQNR parts vs single-file {r['sqnr_parts_single']:.1f} dB")
    assert len(set(r["single"].argmax(1))) > 10  # the inputs really are classified differently
    assert r["agreement"] >= 0.99
    assert rep.wire is not None and rep.wire["payload_bytes"] == plan.split.bytes
