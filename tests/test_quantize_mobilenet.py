"""mobilenet_v2 (zoo, 224x224) through TFLite post-training quantization.

One FP32 reference and three quantized models are built once for the module (about a minute
on two cores): per-channel with int8 and with float I/O, and per-tensor.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

SAMPLES = 32  # the acceptance figures are about size and ops, which calibration size does not change


@pytest.fixture(scope="module")
def mnv2(tmp_path_factory):
    from optimizer.quantize import prepare, quantize_prepared
    from optimizer.quantize.convert import temp_workdir

    out = tmp_path_factory.mktemp("mnv2")
    reports = {}
    with temp_workdir() as tmp:
        from pathlib import Path

        prep = prepare("mobilenet_v2", Path(tmp), calib="synthetic", samples=SAMPLES, heldout=16, seed=3)
        for key, scheme, io in (("pc_int8", "per-channel", "int8"), ("pc_float", "per-channel", "float"),
                                ("pt_int8", "per-tensor", "int8")):
            reports[key] = quantize_prepared(prep, out / f"mobilenet_v2_{key}.tflite", scheme=scheme,
                                             io=io, runs=5, warmup=2)
    return reports


def test_size_ratio(mnv2):
    pc, pt = mnv2["pc_int8"].sizes, mnv2["pt_int8"].sizes
    # the int8 weight payload is a quarter of the FP32 weights
    payload = sum(pc.weight_bytes_by_type.values())
    assert payload <= 0.26 * pc.fp32_bytes
    # INT8 file <= 0.27 x FP32 file (Park & Ha: 18-26.4 %), with the default scheme
    assert pc.ratio <= 0.27 and pt.ratio <= 0.27
    # as converted, per-channel stores a float32 scale and an int64 zero point per output
    # channel of every conv/depthwise weight and bias (~34 k channels x 12 B = 0.4 MB); the
    # all-zero zero-point vectors are then stored once per length
    assert pc.compacted and pc.converter_bytes / pc.fp32_bytes > 0.28
    assert pc.converter_bytes - pc.quantized_bytes > 0.2e6
    assert pt.ratio < pc.ratio
    assert pc.per_channel_tensors >= 2 * 52  # 52 conv/depthwise layers: weights and biases
    print(f"mobilenet_v2 INT8/FP32: per-channel {pc.ratio:.3f} (as converted "
          f"{pc.converter_bytes / pc.fp32_bytes:.3f}), per-tensor {pt.ratio:.3f}")


def test_calibration_runs_in_batches(mnv2):
    cal = mnv2["pc_int8"].calibration
    assert cal.batch == 32 and cal.samples_used == SAMPLES


def test_default_scheme_leaves_no_float_compute(mnv2):
    rep = mnv2["pc_int8"]
    assert rep.ops.float_ops == [] and rep.ops.conversion_ops == []
    assert rep.ops.cpu_fallback_counts == {} and rep.ops.cpu_segments == 0
    assert rep.ops.counts["CONV_2D"] == 35 and rep.ops.counts["DEPTHWISE_CONV_2D"] == 17
    float_io = mnv2["pc_float"]
    assert float_io.ops.float_ops == []
    assert sorted(e.op for e in float_io.ops.io_conversion_ops) == ["DEQUANTIZE", "QUANTIZE"]
    assert float_io.ops.conversion_ops == float_io.ops.io_conversion_ops
    assert float_io.ops.cpu_segments == 2  # first and last op, on the CPU


def test_fidelity_and_latency_reported(mnv2):
    for rep in mnv2.values():
        out = rep.fidelity.outputs[0]
        assert rep.fidelity.samples == 16
        # BN statistics are estimated, so the random network's logits are well scaled and
        # INT8 tracks FP32 (an untouched random MobileNetV2 has logits near 1e-11: SQNR ~0 dB)
        assert out.sqnr_db is not None and out.sqnr_db > 8.0
        assert out.top1_agreement is not None and out.top1_agreement >= 0.3  # measured 0.56-0.63; chance 0.001
        assert rep.latency.fp32.median_ms > 0 and rep.latency.quantized.median_ms > 0
    pc = mnv2["pc_int8"].fidelity.outputs[0].sqnr_db
    pt = mnv2["pt_int8"].fidelity.outputs[0].sqnr_db
    print(f"mobilenet_v2 SQNR per-channel {pc:.2f} dB, per-tensor {pt:.2f} dB; top-1 agreement "
          f"{[r.fidelity.outputs[0].top1_agreement for r in mnv2.values()]}")


def test_quantized_file_is_a_first_class_input(mnv2):
    from optimizer.graph import load_graph

    path = mnv2["pc_int8"].output
    graph = load_graph(path)
    assert graph.weight_dtype == "int8"
    assert graph.count("conv") + graph.count("dwconv") == 52
    assert 3.3e6 < graph.total_params < 3.7e6
