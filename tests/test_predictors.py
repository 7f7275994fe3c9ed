"""Kernel probes and per-device predictors (nn-Meter's method): kernel configurations, probe
models in both runtimes, probe tables, fusion rules, the probe campaign (resumable), the
``predicted`` cost backend and ``dnnplan calibrate --probes``."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from optimizer.errors import ConfigError, InputFileError, SchemaError
from optimizer.graph.kernel_config import KernelConfig, layer_kernels
from optimizer.measure.probe_models import PROBE_KINDS, probe_model

REPO = Path(__file__).resolve().parents[1]

#: one configuration of every probe kind (small: each runs in microseconds)
KINDS = {
    "conv": KernelConfig("conv", 28, 28, 32, 14, 14, 64, k=3, stride=2),
    "dwconv": KernelConfig("dwconv", 28, 28, 32, 28, 28, 32, k=3),
    "conv_transpose": KernelConfig("conv_transpose", 14, 14, 32, 28, 28, 16, k=2, stride=2),
    "fc": KernelConfig("fc", c_in=256, c_out=100),
    "bmm": KernelConfig("bmm", h_in=4, h_out=4, rows=16, c_in=32, c_out=16),
    "max_pool": KernelConfig("max_pool", 28, 28, 32, 14, 14, 32, k=2, stride=2),
    "avg_pool": KernelConfig("avg_pool", 28, 28, 32, 14, 14, 32, k=3, stride=2),
    "global_avg_pool": KernelConfig("global_avg_pool", 7, 7, 64, 1, 1, 64, k=7, stride=7),
    "global_max_pool": KernelConfig("global_max_pool", 7, 7, 64, 1, 1, 64, k=7, stride=7),
    "add": KernelConfig("add", 28, 28, 32, 28, 28, 32, n_in=2),
    "mul": KernelConfig("mul", 28, 28, 32, 28, 28, 32, n_in=2, bcast=1),
    "sub": KernelConfig("sub", 28, 28, 32, 28, 28, 32, n_in=2),
    "maximum": KernelConfig("maximum", 28, 28, 32, 28, 28, 32, n_in=2),
    "relu": KernelConfig("relu", 28, 28, 32, 28, 28, 32),
    "relu6": KernelConfig("relu6", 28, 28, 32, 28, 28, 32),
    "leaky_relu": KernelConfig("leaky_relu", 28, 28, 32, 28, 28, 32),
    "prelu": KernelConfig("prelu", 28, 28, 32, 28, 28, 32),
    "sigmoid": KernelConfig("sigmoid", 28, 28, 32, 28, 28, 32),
    "tanh": KernelConfig("tanh", 28, 28, 32, 28, 28, 32),
    "hard_swish": KernelConfig("hard_swish", 28, 28, 32, 28, 28, 32),
    "softmax": KernelConfig("softmax", 16, 1, 64, 16, 1, 64),
    "unary": KernelConfig("unary", 28, 28, 32, 28, 28, 32),
    "batch_norm": KernelConfig("batch_norm", 28, 28, 32, 28, 28, 32),
    "layer_norm": KernelConfig("layer_norm", 16, 1, 64, 16, 1, 64),
    "concat": KernelConfig("concat", 14, 14, 32, 14, 14, 96, n_in=3),
    "pad": KernelConfig("pad", 14, 14, 32, 15, 15, 32),
    "transpose": KernelConfig("transpose", 14, 14, 32, 14, 14, 32),
    "slice": KernelConfig("slice", 14, 14, 32, 13, 13, 32),
    "gather": KernelConfig("gather", rows=16, c_in=1000, c_out=64),
    "resize_bilinear": KernelConfig("resize_bilinear", 14, 14, 32, 28, 28, 32),
    "resize_nearest": KernelConfig("resize_nearest", 14, 14, 32, 28, 28, 32),
    "depth_to_space": KernelConfig("depth_to_space", 14, 14, 32, 28, 28, 8),
    "dequantize": KernelConfig("dequantize", 28, 28, 32, 28, 28, 32),
}
#: configurations of a kind's other paths (a scalar second operand)
VARIANTS = {"add_scalar": KernelConfig("add", 28, 28, 32, 28, 28, 32, n_in=2, bcast=2),
            "dwconv_global": KernelConfig("dwconv", 7, 7, 64, 1, 1, 64, k=7, stride=7)}


# ------------------------------------------------------------------ kernel configurations

def test_every_probe_kind_has_a_test_configuration():
    assert set(KINDS) == set(PROBE_KINDS)


def test_mobilenet_v2_kernels_keep_every_mac_and_name_the_activations(zoo_graph):
    from optimizer.graph.kernel_config import graph_kernels

    g = zoo_graph("mobilenet_v2")
    kernels = [k for ks in graph_kernels(g) for k in ks]
    assert sum(k.macs for k in kernels) == g.total_macs
    fams = {k.family for k in kernels}
    assert {"convstem", "conv1x1", "dwconv_s1", "dwconv_s2", "dense", "pool", "eltwise"} <= fams
    stem = next(k for k in kernels if k.family == "convstem")
    assert (stem.h_in, stem.c_in, stem.h_out, stem.c_out, stem.k, stem.stride) == (224, 3, 112, 32, 3, 2)


def test_keras_swish_is_recorded_and_runs_as_sigmoid_and_multiply(zoo_graph):
    g = zoo_graph("efficientnet_b0")
    act = next(la for la in g.layers if la.op_type.startswith("Activation:"))
    assert act.op_type == "Activation:silu"  # Keras 3 names swish silu
    assert [k.kind for k in layer_kernels(act, g.fmt)] == ["sigmoid", "mul"]



def test_a_keras_swish_after_a_convolution_keeps_onnxruntime_blocked(zoo_graph):
    """Exported, a Keras swish is a Sigmoid and a Mul, both run by onnxruntime's NCHWc transformer:
    no layout conversion between a convolution and its swish (efficientnet_b0 priced 2.7 ms of
    reorders on its batch norms, 13 % of the network, that the exported file does not run)."""
    from optimizer.cost.fusion import runtime_kernels

    g = zoo_graph("efficientnet_b0")
    n = len(g.layers)
    reorders = [sum(k.kind == "reorder" for k in ks) for ks in runtime_kernels(g, "onnxruntime")]
    before_swish = [i for i, la in enumerate(g.layers) if la.op_type == "BatchNormalization"
                    and {g.layers[c].op_type for t in la.outputs for c in g.tensors[t].consumers if c < n}
                    == {"Activation:silu"}]
    assert len(before_swish) == 33 and all(reorders[i] == 0 for i in before_swish)
    assert 95 <= sum(reorders) <= 110  # onnxruntime's optimizer writes 107 in the exported file


def test_a_separable_convolution_takes_its_batch_norm_and_relu(zoo_graph):
    """A Keras ``SeparableConv2D`` is two kernels; its pointwise one writes the output, and the
    batch norm and ReLU6 after it fold into that kernel in every runtime (they had been priced as
    kernels of their own: ssd_mobilenet_v2_fpnlite's graph at 96 ms for TFLite INT8, its file 51 ms)."""
    from optimizer.cost.fusion import runtime_kernels

    g = zoo_graph("ssd_mobilenet_v2_fpnlite")
    n = len(g.layers)
    after = [i for i, la in enumerate(g.layers) if la.op_type == "BatchNormalization"
             and any(g.layers[g.tensors[t].producer].op_type == "SeparableConv2D" for t in la.inputs if t in g.tensors)]
    after += [c for i in after for t in g.layers[i].outputs for c in g.tensors[t].consumers if c < n]
    assert len(after) >= 20
    for runtime in ("tflite_xnnpack", "onnxruntime"):
        kernels = runtime_kernels(g, runtime, "int8")
        assert all(kernels[i] == [] for i in after), runtime

def test_a_keras_prelu_is_priced_for_onnxruntime_as_its_export_runs_it(zoo_graph, tmp_path):
    """tf2onnx writes a Keras PReLU as Relu, Neg, Relu, Mul and Add (onnxruntime's ``PRelu`` probe
    had priced arcface_mobilenet's graph at +131 % of its measured export); quantized, the ReLU
    after the Neg folds into its conversion. An ONNX file's own ``PRelu`` stays onnxruntime's kernel; the TFLite
    converter writes ``PRELU`` at FP32 and a ``MUL`` and an ``ADD`` at INT8."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    g = zoo_graph("arcface_mobilenet")
    i = next(k for k, la in enumerate(g.layers) if la.op_type == "PReLU")
    kinds = {(rt, dt): [k.kind for k in runtime_kernels(g, rt, dt)[i]]
             for rt in ("onnxruntime", "tflite") for dt in ("fp32", "int8")}
    assert kinds[("onnxruntime", "fp32")] == ["relu", "unary", "relu", "mul", "add"]
    assert kinds[("onnxruntime", "int8")] == ["relu", "unary", "mul", "add"]  # as a QDQ file's view folds them
    assert kinds[("tflite", "fp32")] == ["prelu"] and kinds[("tflite", "int8")] == ["mul", "add"]
    slope = helper.make_tensor("slope", TensorProto.FLOAT, [8, 1, 1], [0.25] * 8)
    graph = helper.make_graph([helper.make_node("PRelu", ["x", "slope"], ["y"])], "p",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], [slope])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "p.onnx"))
    assert [k.kind for k in runtime_kernels(load_graph(str(tmp_path / "p.onnx")), "onnxruntime")[0]] == ["prelu"]


def test_an_attention_softmax_of_an_onnx_file_normalises_rows_of_tokens():
    """bert_small's exported ``Softmax`` over ``[heads, tokens, tokens]``: rows of 128 tokens (ONNX's
    axis -1), not an NCHW tensor of 8 channels."""
    from optimizer.graph.layergraph import Layer

    la = Layer(0, "softmax", "act", "Softmax", "", ("a",), ("b",), ((8, 128, 128),), ((8, 128, 128),), 0, 0)
    (k,) = layer_kernels(la, "onnx")
    assert (k.kind, k.h_in * k.w_in, k.c_in) == ("softmax", 8 * 128, 128)
    assert layer_kernels(replace(la, op_type="Relu"), "onnx")[0].c_in == 8  # other kinds keep NCHW channels


def test_the_prior_probes_global_depthwise_windows():
    """A depthwise window as large as its input (MobileFaceNet's GDConv) is in the prior, kept
    though its work is a microsecond's: XNNPACK's INT8 runs it 30-50x slower per MAC than a 3 x 3
    depthwise (arcface_mobilenet's had been priced at 0.1 ms against 1.7 ms in its network)."""
    from optimizer.measure.probes import prior_sample

    prior = prior_sample(1500)
    global_dw = [c for c in prior if c.kind == "dwconv" and c.k == c.h_in == c.stride > 1]
    assert len(global_dw) >= 10 and all((c.h_out, c.w_out) == (1, 1) and c.family == "dwconv_s2" for c in global_dw)
    windows = {c.k for c in global_dw}
    assert 7 in windows and len(windows) >= 3

def test_a_keras_attention_softmax_covers_every_head(zoo_graph):
    """A Keras ``MultiHeadAttention`` keeps its heads: its softmax normalises heads x tokens rows
    (bert_small: 8 x 128 rows of 128), where the merged view had priced one head's."""
    g = zoo_graph("bert_small")
    la = next(la for la in g.layers if la.op_type == "MultiHeadAttention")
    (soft,) = [k for k in layer_kernels(la, g.fmt) if k.kind == "softmax"]
    assert la.heads == 8 and (soft.h_in, soft.c_in) == (8 * 128, 128)
    assert all(other.heads == 0 for other in g.layers if other is not la and other.op_type != "MultiHeadAttention")


@pytest.mark.parametrize("kind", ["conv", "dwconv", "fc", "max_pool", "avg_pool", "global_avg_pool", "add", "mul",
                                  "add_scalar", "conv_transpose", "dequantize", "resize_nearest", "resize_bilinear", "pad", "softmax", "relu6", "concat", "unary",
                                  "dwconv_global"])
@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_a_probe_imports_back_to_its_own_configuration(tmp_path, kind, fmt):
    """Probes and priced layers share one description: importing a probe file with the project's
    importer gives the layer the configuration the probe was built from."""
    from optimizer.graph import load_graph

    cfg = {**KINDS, **VARIANTS}[kind]
    if (fmt, kind) == ("onnx", "resize_bilinear"):  # an ONNX graph keeps no Resize mode: priced as nearest
        cfg = replace(cfg, kind="resize_nearest")
    path = tmp_path / f"p.{fmt}"
    path.write_bytes(probe_model(cfg, fmt, "fp32"))
    g = load_graph(str(path))
    kernels = [k for la in g.layers for k in layer_kernels(la, g.fmt) if k.kind not in ("relu",)]
    if kind.endswith("_pool") and not kind.startswith("global"):  # graphs keep no pool window
        kernels = [replace(k, k=cfg.k) for k in kernels]
    assert cfg in kernels


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_a_channel_padding_probe_pads_channels(tmp_path, fmt):
    """A PAD that widens the channels (a residual shortcut into a wider stage) is probed as such,
    not as a spatial pad: the probe imports back to its configuration."""
    from optimizer.graph import load_graph

    cfg = KernelConfig("pad", 64, 64, 8, 64, 64, 16)
    path = tmp_path / f"p.{fmt}"
    path.write_bytes(probe_model(cfg, fmt, "fp32"))
    g = load_graph(str(path))
    assert cfg in [k for la in g.layers for k in layer_kernels(la, g.fmt)]


def test_the_prior_covers_full_resolution_stages_and_channel_padding():
    """The design prior includes networks without a down-sampling stem (VGG-like k x k convolutions
    at 112-320 px), channel-widening pads and input normalizations (a per-channel mean over an
    image's three channels), not only MobileNet-like stages."""
    from optimizer.measure.probes import prior_sample

    configs = prior_sample(2000)
    full_res = [c for c in configs if c.family == "convkxk" and c.h_out >= 112]
    assert len(full_res) >= 30, len(full_res)
    assert sum(c.kind == "pad" and c.c_out > c.c_in for c in configs) >= 3
    norms = [c for c in configs if c.kind in ("sub", "mul", "add") and c.bcast and c.c_in <= 3]
    assert len(norms) >= 8 and max(c.h_in for c in norms) >= 320  # input normalizations of images


# ------------------------------------------------------------------ probe models in both runtimes

@pytest.mark.parametrize("fmt,runner", [("tflite", "litert"), ("onnx", "ort")])
@pytest.mark.parametrize("dtype", ["fp32", "int8"])
def test_every_probe_kind_runs_in_its_runtime(fmt, runner, dtype):
    from optimizer.measure.probe_runner import in_process_runner, time_interleaved

    r = in_process_runner(runner, 1)
    invokers = [r.load(probe_model(cfg, fmt, dtype)) for cfg in KINDS.values()]
    timings = time_interleaved(invokers, sample_s=2e-4, min_rounds=2, max_rounds=2)
    assert all(t.median_s > 0 and t.samples == 2 for t in timings)


@pytest.mark.parametrize("fmt,runner", [("tflite", "litert"), ("onnx", "ort")])
def test_a_gather_of_fewer_rows_than_the_ids_range_builds_and_runs(fmt, runner):
    """A network's Gather of a short table (retinaface's shape gathers: one row) is a near probe;
    its ids are drawn from [0, 8), so the probe's table has at least 8 rows (calibration crashed)."""
    from optimizer.measure.probe_runner import in_process_runner

    r = in_process_runner(runner, 1)
    for dtype in ("fp32", "int8"):
        r.load(probe_model(KernelConfig("gather", rows=3, c_in=1, c_out=4), fmt, dtype))()


def test_litert_cpu_delegate_runs_the_builtin_kernels():
    """``--delegate cpu`` times TFLite's built-in kernels (``benchmark_model --use_xnnpack=false``, what
    the public x86 logs ran): no delegate node in the interpreter, where the default has XNNPACK's;
    its tables carry runtime ``tflite_cpu``. A delegate this process cannot run is refused."""
    from optimizer.hardware import load_device
    from optimizer.measure.device_predictors import RunnerSettings, runner_runtime
    from optimizer.measure.probe_runner import in_process_runner

    host = load_device("host")
    blob = probe_model(KINDS["conv"], "tflite", "int8")
    ops = {d: {o["op_name"] for o in in_process_runner("litert", 1, d).load(blob).__self__._get_ops_details()}
           for d in ("xnnpack", "cpu")}
    assert "DELEGATE" in ops["xnnpack"] and "DELEGATE" not in ops["cpu"] and "CONV_2D" in ops["cpu"], ops
    assert runner_runtime(RunnerSettings(runner="litert", delegate="cpu"), host) == "tflite_cpu"
    assert runner_runtime(RunnerSettings(runner="litert"), host) == "tflite_xnnpack"
    with pytest.raises(ConfigError, match="--delegate 'gpu' with --runner litert; expected one of xnnpack, cpu"):
        in_process_runner("litert", 1, "gpu")
    with pytest.raises(ConfigError, match="applies to --runner litert and adb, not ort"):
        in_process_runner("ort", 1, "cpu")


def test_probe_bytes_are_seeded():
    cfg = KINDS["conv"]
    assert probe_model(cfg, "tflite", "int8", 3) == probe_model(cfg, "tflite", "int8", 3)
    assert probe_model(cfg, "onnx", "fp32", 3) != probe_model(cfg, "onnx", "fp32", 4)


def test_int8_tflite_probe_activations_have_the_converters_nonzero_zero_point():
    """A network's INT8 activations are asymmetric; TFLite's INT8 BATCH_MATMUL takes a fast path
    only at a zero point of 0, which no network has: probes must not take it either."""
    from ai_edge_litert.interpreter import Interpreter

    from optimizer.measure.probe_models import ACT_ZERO

    it = Interpreter(model_content=probe_model(KernelConfig("bmm", h_in=2, rows=8, c_in=4, c_out=8), "tflite", "int8"))
    zeros = {d["quantization"][1] for d in it.get_input_details() + it.get_output_details()}
    assert zeros == {ACT_ZERO} and ACT_ZERO != 0


def test_int8_onnx_probe_takes_and_gives_quantized_tensors():
    import onnx

    m = onnx.load_from_string(probe_model(KINDS["conv"], "onnx", "int8"))
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert m.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert [n.op_type for n in m.graph.node].count("QuantizeLinear") == 1  # the output's, as in a network


def test_unknown_kind_is_refused():
    with pytest.raises(ConfigError, match="no probe builder"):
        probe_model(KernelConfig("gelu", 4, 4, 8, 4, 4, 8), "tflite", "fp32")


# ------------------------------------------------------------------ probe tables

def _synthetic_table(configs, dtype="fp32", runtime="tflite_xnnpack", threads=1):
    """A probe table whose latencies follow a roofline (a stand-in for measurements in tests of
    the fitting code; every measuring test uses a real runner)."""
    from optimizer.cost.probe_table import empty_table, probe_id

    rows = []
    for c in configs:
        t = c.macs / 20e9 + (c.in_elems + c.out_elems + c.weight_elems) * 4 / 10e9 + 2e-6
        rows.append({"id": probe_id(c, dtype), **c.as_row(), "dtype": dtype, "latency_s": t, "raw_s": t + 1e-6,
                     "spread": 0.01, "samples": 5, "source": "prior"})
    meta = {"runner": "litert", "runtime": runtime, "runtime_version": "test", "dtype": dtype, "threads": threads,
            "cpu": "test", "measured_at_utc": "2026-01-01T00:00:00Z", "invoke_overhead_s": 1e-6, "seed": 0}
    return empty_table(meta).with_rows(rows)


@pytest.fixture(scope="module")
def prior_configs():
    from optimizer.measure.probes import prior_sample

    return prior_sample(400, seed=1)


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".json"])
def test_probe_table_round_trips(tmp_path, prior_configs, suffix):
    from optimizer.cost.probe_table import read_probe_table, write_probe_table

    table = _synthetic_table(prior_configs[:50])
    path = write_probe_table(table, tmp_path / f"t{suffix}")
    back = read_probe_table(path)
    assert back.meta["runtime"] == "tflite_xnnpack" and len(back.rows) == 50
    assert back.configs() == table.configs()
    np.testing.assert_allclose(back.rows["latency_s"], table.rows["latency_s"], rtol=1e-5)


def test_corrupt_or_incomplete_tables_are_refused_by_name(tmp_path, prior_configs):
    from optimizer.cost.probe_table import read_probe_table, write_probe_table

    path = write_probe_table(_synthetic_table(prior_configs[:5]), tmp_path / "t.csv.gz")
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(path.read_bytes()[:40])
    with pytest.raises(SchemaError, match="bad.csv.gz: not a readable probe table"):
        read_probe_table(bad)
    text = gzip.decompress(path.read_bytes()).decode()
    (tmp_path / "nometa.csv").write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("# runtime:")))
    with pytest.raises(SchemaError, match="lacks header field 'runtime'"):
        read_probe_table(tmp_path / "nometa.csv")
    (tmp_path / "neg.csv").write_text(text.replace(",prior\n", ",prior\n", 1).replace(
        text.splitlines()[-1], text.splitlines()[-1].replace(",fp32,", ",fp32,-1,", 1).replace(",-1,", ",-", 1)))
    with pytest.raises(SchemaError, match="not a non-negative number|row"):
        read_probe_table(tmp_path / "neg.csv")


# ------------------------------------------------------------------ speed reference

def _drifting_timings(rounds=20, stop=None):
    """Three reference kernels' checkpoints and two models timed between them while the host's
    speed jumps between 1.0 and 1.4 (a noisy neighbour), every kernel slowed alike."""
    from optimizer.measure.probe_runner import Timing

    speed = np.where(np.arange(rounds + 1) % 3 == 0, 1.4, 1.0)
    out = []
    for base in (100e-6, 300e-6, 50e-6):  # one sample per checkpoint
        v = base * speed
        out.append(Timing(float(np.median(v)), float(np.percentile(v, 25)), float(np.percentile(v, 75)), rounds + 1,
                          rounds + 1, values_s=tuple(v)))
    level = (100e-6 * 300e-6 * 50e-6) ** (1 / 3) * speed
    for base, n in ((2e-3, rounds), (5e-3, stop or rounds)):
        v = base * speed[:n]  # each sample timed at its checkpoint's speed
        out.append(Timing(float(np.median(v)), float(np.percentile(v, 25)), float(np.percentile(v, 75)), n, n,
                          values_s=tuple(v), levels_s=tuple(level[:n])))
    return out


def test_the_speed_reference_takes_out_a_drift_every_kernel_shares():
    from optimizer.measure.probe_runner import Timing
    from optimizer.measure.speed_reference import level_timings

    timings = _drifting_timings(stop=7)  # the last model was stable after 7 rounds
    raw_spread = timings[3].spread
    lv = level_timings(timings, [0, 1, 2])
    ref_level = (100e-6 * 300e-6 * 50e-6) ** (1 / 3)
    assert lv.level_s == pytest.approx(ref_level) and lv.level_spread > 0.3
    assert raw_spread > 0.3 and len(lv.timings) == 2
    assert lv.timings[0].median_s == pytest.approx(2e-3) and lv.timings[0].spread == pytest.approx(0.0, abs=1e-12)
    assert lv.timings[1].median_s == pytest.approx(5e-3) and lv.timings[1].samples == 7
    # on another level (a probe table's): scaled by the levels' ratio
    assert lv.on_level(2 * ref_level)[0].median_s == pytest.approx(4e-3)
    # a runner that reports medians only (a phone's logs): the medians over the references' level
    medians = [Timing(t.median_s, t.p25_s, t.p75_s, t.samples, 1) for t in timings]
    lv = level_timings(medians, [0, 1, 2])
    assert lv.timings[0].median_s == pytest.approx(2e-3) and lv.level_spread == 0.0


def test_interleaved_timing_brackets_every_sample_with_reference_checkpoints():
    from optimizer.measure.probe_runner import time_interleaved

    invokers = [lambda: sum(range(300)), lambda: sum(range(50))]
    reference = [lambda: sum(range(100)), lambda: sum(range(200))]
    t = time_interleaved(invokers, sample_s=1e-4, min_rounds=3, max_rounds=9, rel_tol=-1.0, reference=reference,
                         reference_gap_s=0.0)
    assert len(t) == 4 and t[0].samples == t[1].samples == 9
    # a checkpoint at the start, after every sample and at the end
    assert t[2].samples == t[3].samples == 1 + 18 + 1
    levels = np.sqrt(np.array(t[2].values_s) * np.array(t[3].values_s))
    for model in t[:2]:
        assert len(model.levels_s) == len(model.values_s) == 9
        assert all(min(levels) <= v <= max(levels) for v in model.levels_s)
    rare = time_interleaved(invokers, sample_s=1e-4, min_rounds=3, max_rounds=9, rel_tol=-1.0, reference=reference,
                            reference_gap_s=60.0)
    assert rare[2].samples == 2 and len(set(rare[0].levels_s)) == 1  # only the start and the end


def test_a_table_is_fitted_at_its_median_speed_reference_level(tmp_path, prior_configs):
    from optimizer.cost.probe_table import read_probe_table, write_probe_table

    table = _synthetic_table(prior_configs[:9])
    rows = table.rows.copy()
    # three groups: the host at its usual speed, 25 % slower, then usual again
    level = np.repeat([1e-4, 1.25e-4, 1e-4], 3)
    rows["latency_s"] *= level / 1e-4
    rows["reference_s"] = level
    levelled = type(table)(rows, table.meta)
    np.testing.assert_allclose(levelled.latency_s, table.rows["latency_s"], rtol=1e-12)
    assert levelled.reference_s == 1e-4 and table.reference_s is None
    np.testing.assert_allclose(table.latency_s, table.rows["latency_s"])  # timed without one: as measured
    for suffix in (".csv.gz", ".json"):
        back = read_probe_table(write_probe_table(levelled, tmp_path / f"t{suffix}"))
        np.testing.assert_allclose(back.latency_s, table.rows["latency_s"], rtol=1e-5)
    # a table resumed by a campaign with the reference: the rows timed without one stay as measured
    mixed = table.with_rows(levelled.rows.iloc[:3].assign(id=lambda d: d["id"] + "x").to_dict("records"))
    assert mixed.rows["reference_s"].isna().sum() == 9 and mixed.reference_s == 1e-4
    text = gzip.decompress((tmp_path / "t.csv.gz").read_bytes()).decode()
    (tmp_path / "bad.csv").write_text(text.replace(",0.000125\n", ",slow\n", 1))
    with pytest.raises(SchemaError, match=r"bad.csv: row 4: reference_s = 'slow' is not a positive number"):
        read_probe_table(tmp_path / "bad.csv")


# ------------------------------------------------------------------ fusion rules

def _chain_graph():
    """conv -> batch-norm -> ReLU -> sigmoid ; pad -> conv ; add(conv, conv) -> ReLU (Keras op types)."""
    from optimizer.graph.layergraph import LayerSpec, build_graph

    specs = [
        LayerSpec("c1", "conv", "Conv2D", ("x",), ("a",), ((8, 8, 16),), macs=8 * 8 * 16 * 3 * 9, params=448),
        LayerSpec("bn", "norm", "BatchNormalization", ("a",), ("b",), ((8, 8, 16),), params=64),
        LayerSpec("r1", "act", "ReLU", ("b",), ("c",), ((8, 8, 16),)),
        LayerSpec("sg", "act", "Activation:sigmoid", ("c",), ("d",), ((8, 8, 16),)),
        LayerSpec("c2", "conv", "Conv2D", ("d",), ("e",), ((8, 8, 16),), macs=8 * 8 * 16 * 16, params=272),
        LayerSpec("sg2", "act", "Activation:sigmoid", ("e",), ("f",), ((8, 8, 16),)),
        LayerSpec("pd", "reshape", "ZeroPadding2D", ("f",), ("g",), ((10, 10, 16),)),
        LayerSpec("c3", "conv", "Conv2D", ("g",), ("h",), ((8, 8, 16),), macs=8 * 8 * 16 * 16 * 9, params=2320),
        LayerSpec("ad", "add", "Add", ("h", "f"), ("i",), ((8, 8, 16),)),
        LayerSpec("r2", "act", "ReLU", ("i",), ("j",), ((8, 8, 16),)),
    ]
    return build_graph("chain", specs, [("x", (8, 8, 3))], ["j"], fmt="keras", kernel_order=False)


def test_fusion_rules_fold_what_each_runtime_fuses():
    from optimizer.cost.fusion import runtime_kernels

    g = _chain_graph()
    names = [la.name for la in g.layers]

    def kept(runtime):
        return {n for n, ks in zip(names, runtime_kernels(g, runtime), strict=True) if ks}

    tfl, ort = kept("tflite_xnnpack"), kept("onnxruntime")
    assert {"bn", "r1", "pd"}.isdisjoint(tfl | ort)  # folded / fused / a conv's padding in both
    assert "sg" in tfl and "sg" in ort  # the sigmoid follows a ReLU, not a convolution
    assert "sg2" in tfl and "sg2" not in ort  # onnxruntime's FusedConv takes a sigmoid
    assert "r2" not in tfl and "r2" in ort  # TFLite's ADD clamps in place; onnxruntime fuses only into conv/gemm


def test_a_qdq_matrix_product_with_a_dequantized_weight_is_priced_as_a_dense_kernel(tmp_path):
    """onnxruntime's static quantizer dequantizes each weight with a DequantizeLinear of its own:
    the MatMul reading it runs as QLinearMatMul (a dense kernel), not a product of activations."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    rng = np.random.default_rng(0)
    inits = [helper.make_tensor("wq", TensorProto.INT8, [64, 32], rng.integers(-127, 128, 64 * 32).tolist()),
             helper.make_tensor("ws", TensorProto.FLOAT, [], [0.01]),
             helper.make_tensor("wz", TensorProto.INT8, [], [0]),
             helper.make_tensor("xs", TensorProto.FLOAT, [], [0.02]),
             helper.make_tensor("xz", TensorProto.UINT8, [], [128])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])], inits)
    path = tmp_path / "qdq_dense.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    g = load_graph(str(path))
    kernels = [k for la, ks in zip(g.layers, runtime_kernels(g, "onnxruntime"), strict=True)
               if la.op_type == "MatMul" for k in ks]
    assert [(k.kind, k.c_in, k.c_out, k.rows) for k in kernels] == [("fc", 64, 32, 1)]


def _nchwc_net(path, qdq=False):
    """A small FP32 ONNX network (or its QDQ form) with layers onnxruntime's NCHWc transformer
    keeps blocked (convolutions, ReLU, addition, pooling) and some it does not (PRelu, Flatten)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    inits = [w("w1", 32, 3, 3, 3), w("w2", 32, 32, 3, 3), w("w3", 32, 32, 1, 1), w("w4", 32, 32, 3, 3),
             w("slope", 32, 1, 1), w("fc", 32, 10)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "w2"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["c", "slope"], ["d"]),  # not blocked: reorder out, then in
             helper.make_node("Conv", ["d", "w3"], ["e"]),
             helper.make_node("Add", ["e", "b"], ["f"]),
             helper.make_node("Conv", ["f", "w4"], ["g"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["g"], ["h"]),
             helper.make_node("Flatten", ["h"], ["i"]),  # not blocked: reorder out
             helper.make_node("MatMul", ["i", "fc"], ["y"])]
    graph = helper.make_graph(nodes, "nchwc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if qdq:
        from optimizer.measure.probe_onnx import qdq_model

        model = qdq_model(model, [(1, 3, 32, 32)])
        model.graph.output[0].CopyFrom(onnx.shape_inference.infer_shapes(model).graph.output[0])
    onnx.save(model, str(path))
    return path


def test_onnxruntime_nchwc_reorders_are_those_of_its_optimized_graph(tmp_path):
    """The layout conversions the kernel view adds for onnxruntime FP32 are the ReorderInput and
    ReorderOutput nodes onnxruntime's own optimizer writes (none in a QDQ file)."""
    import onnx
    import onnxruntime as ort

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    for qdq in (False, True):
        path = _nchwc_net(tmp_path / f"n{int(qdq)}.onnx", qdq)
        so = ort.SessionOptions()
        so.optimized_model_filepath = str(tmp_path / "opt.onnx")
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        theirs = sum(n.op_type.startswith("Reorder") for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node)
        g = load_graph(str(path))
        ours = [(la.op_type, k.c_in) for la, ks in zip(g.layers, runtime_kernels(g, "onnxruntime"), strict=True)
                for k in ks if k.kind == "reorder"]
        assert len(ours) == theirs, (qdq, ours, theirs)
        assert (theirs == 0) == qdq


def _saved_and_ort_optimized(tmp_path, name, nodes, x_shape, y_shape, inits, opset=17):
    """Save a one-input, one-output FP32 ONNX graph as ``name``.onnx and return its path and the
    nodes of the graph onnxruntime's own optimizer makes of it (``optimized_model_filepath``)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / f"{name}-opt.onnx")
    ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return path, list(onnx.load(str(tmp_path / f"{name}-opt.onnx")).graph.node)


def test_onnxruntime_sums_and_activations_into_nchwc_convolutions_as_its_optimized_graph(tmp_path):
    """onnxruntime FP32 folds an addition of two blocked tensors into the convolution writing one
    of them (its sum input), with the ReLU after it, unless that convolution took an activation or
    the other operand is not blocked; a convolution's Clip (ReLU6) is a pass over its output, priced
    as a ReLU6 kernel on the convolution (MLAS fuses only ReLU into the kernel itself)."""
    from onnx import helper, numpy_helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    inits = [w("w1", 32, 3, 3, 3), w("w2", 32, 32, 1, 1), w("w3", 32, 32, 1, 1), w("w4", 32, 32, 1, 1),
             w("w5", 32, 32, 1, 1), w("slope", 32, 1, 1), numpy_helper.from_array(np.float32(0), "lo"),
             numpy_helper.from_array(np.float32(6), "hi")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "w2"], ["c"]),
             helper.make_node("Add", ["c", "b"], ["d"]),  # summed into w2's convolution ...
             helper.make_node("Relu", ["d"], ["e"]),  # ... which then takes this ReLU
             helper.make_node("Conv", ["e", "w3"], ["f"]),
             helper.make_node("Relu", ["f"], ["g"]),
             helper.make_node("Add", ["g", "e"], ["h"]),  # w3's convolution has its ReLU: stays an Add
             helper.make_node("PRelu", ["h", "slope"], ["i"]),  # not blocked
             helper.make_node("Conv", ["h", "w4"], ["j"]),
             helper.make_node("Add", ["j", "i"], ["k"]),  # one operand not blocked: stays an Add
             helper.make_node("Conv", ["k", "w5"], ["m"]),
             helper.make_node("Clip", ["m", "lo", "hi"], ["y"])]
    path, theirs = _saved_and_ort_optimized(tmp_path, "sums", nodes, [1, 3, 16, 16], [1, 32, 16, 16], inits)
    summed = [n for n in theirs if n.op_type == "Conv" and len(n.input) > 3 and n.input[3]]
    g = load_graph(str(path))
    kernels = runtime_kernels(g, "onnxruntime")
    kinds = {la.name: [k.kind for k in ks if k.kind != "reorder"] for la, ks in zip(g.layers, kernels, strict=True)}
    adds = [la.name for la in g.layers if la.op_type == "Add"]
    assert [kinds[a] for a in adds] == [[], ["add"], ["add"]]
    assert len(summed) == 1 and sum(n.op_type == "Add" for n in theirs) == 2
    relus = [la.name for la in g.layers if la.op_type == "Relu"]
    assert [kinds[r] for r in relus] == [[], [], []]  # into their convolutions, the second through the sum
    assert kinds[g.layers[-2].name] == ["conv", "activation_pass"] and kinds[g.layers[-1].name] == []
    assert {a.s for n in theirs if n.op_type == "Conv" for a in n.attribute if a.name == "activation"} == {b"Relu",
                                                                                                      b"Clip"}


def test_onnxruntime_nchwc_layout_rules_are_those_of_its_optimized_graph(tmp_path):
    """The tensors onnxruntime FP32 reorders (ReorderOutput, ReorderInput) are those the kernel view
    prices, on the rules its NCHWc transformer keeps: a depthwise convolution of 8 channels reads
    blocks, a convolution's output channels need no alignment (10 here), a convolution of fewer
    input channels than a block reads NCHW, concatenation and pooling need whole blocks, a constant
    operand keeps an addition out, a one-element one is not folded into the convolution, and a
    zero padding is not a max pooling's."""
    from onnx import helper, numpy_helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    inits = [w("w1", 8, 3, 3, 3), w("dw", 8, 1, 3, 3), w("w2", 10, 8, 1, 1), w("w3", 16, 10, 1, 1),
             w("w4", 8, 16, 1, 1), w("w5", 8, 16, 1, 1), w("w6", 32, 16, 3, 3), w("w7", 32, 32, 1, 1),
             w("w8", 16, 16, 1, 1),
             numpy_helper.from_array(np.array([2.0], np.float32), "two"),
             numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "dw"], ["c"], pads=[1, 1, 1, 1], group=8),  # blocked: no reorder
             helper.make_node("Conv", ["c", "w2"], ["d"]),  # 8 channels in: reads NCHW, 10 out
             helper.make_node("Conv", ["d", "w3"], ["e"]),  # 10 in: reads NCHW
             helper.make_node("Conv", ["e", "w4"], ["f"]),
             helper.make_node("Conv", ["e", "w5"], ["g"]),
             helper.make_node("Concat", ["f", "g"], ["h"], axis=1),  # of 8-channel tensors: NCHW
             helper.make_node("MaxPool", ["f"], ["i"], kernel_shape=[2, 2], strides=[2, 2]),  # 8 channels: NCHW
             helper.make_node("Conv", ["h", "w6"], ["j"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["j", "two"], ["k"]),  # one element: not folded, not blocked
             helper.make_node("Conv", ["k", "w7"], ["m"]),
             helper.make_node("Relu", ["m"], ["n"]),
             helper.make_node("Pad", ["n", "pads"], ["o"]),  # not folded into the max pooling
             helper.make_node("MaxPool", ["o"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["i"], ["q"]),  # 8 channels: NCHW
             helper.make_node("Conv", ["e", "w8"], ["v"]),
             helper.make_node("Transpose", ["v"], ["t"], perm=[0, 2, 3, 1]),  # a channels-last ReorderOutput
             helper.make_node("Flatten", ["p"], ["r"]), helper.make_node("Flatten", ["q"], ["s"]),
             helper.make_node("Flatten", ["t"], ["u"]), helper.make_node("Concat", ["r", "s", "u"], ["y"], axis=1)]
    path, theirs = _saved_and_ort_optimized(tmp_path, "layout", nodes, [1, 3, 16, 16],
                                            [1, 32 * 8 * 8 + 8 + 16 * 16 * 16], inits)
    g = load_graph(str(path))
    shape = {t: tuple(g.tensors[t].shape) for t in g.tensors}
    reordered = sorted([shape[n.output[0]] for n in theirs if n.op_type == "ReorderOutput" and n.output[0] != "t"]
                       + [shape[n.input[0]] for n in theirs if n.op_type == "ReorderInput"])
    kernels = runtime_kernels(g, "onnxruntime")
    ours = sorted((k.c_in, k.h_in, k.w_in) for la, ks in zip(g.layers, kernels, strict=True) for k in ks
                  if k.kind == "reorder")
    assert ours == reordered, (ours, reordered)
    assert [n.output[0] for n in theirs if n.op_type == "Transpose"] == []  # the transpose is a reorder ...
    assert [[k.kind for k in ks] for la, ks in zip(g.layers, kernels, strict=True) if la.op_type == "Transpose"] == [
        ["transpose"]]  # ... priced as its own transpose kernel, with no reorder before it
    assert (10, 16, 16) in ours and (8, 16, 16) in ours and (8, 8, 8) not in ours  # the NCHW readers' inputs
    kinds = {la.op_type: [k.kind for k in ks if k.kind != "reorder"]
             for la, ks in zip(g.layers, kernels, strict=True) if la.op_type in ("Mul", "Pad")}
    assert kinds == {"Mul": ["mul"], "Pad": ["pad"]}
    assert sum(n.op_type in ("Mul", "Pad") for n in theirs) == 2


@pytest.mark.parametrize("mode, ctm, blocked", [("nearest", "asymmetric", True), ("nearest", "half_pixel", False),
                                                ("linear", "half_pixel", True), ("linear", "pytorch_half_pixel", False)])
def test_onnxruntime_blocks_the_resizes_its_optimized_graph_blocks(tmp_path, mode, ctm, blocked):
    """A resize reads onnxruntime FP32's blocked tensors as an NCHWc ``Upsample`` when its optimized
    graph makes it one (a nearest one mapping asymmetrically and rounding down, a linear one but
    PyTorch's half pixel): the importer keeps the interpolation, and the kernel view reorders
    around the others only."""
    from onnx import helper, numpy_helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 16, 1, 1)).astype(np.float32), "w")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"]),
             helper.make_node("Resize", ["a", "", "scales"], ["r"], mode=mode, coordinate_transformation_mode=ctm,
                              nearest_mode="floor"),
             helper.make_node("Conv", ["r", "w"], ["y"])]
    path, theirs = _saved_and_ort_optimized(tmp_path, f"resize_{mode}_{ctm}", nodes, [1, 16, 8, 8], [1, 16, 16, 16],
                                            [w, scales])
    g = load_graph(str(path))
    assert [la.interpolation for la in g.layers if la.op_type == "Resize"] == [f"{mode}/{ctm}/floor"]
    reorders = sum(n.op_type.startswith("Reorder") for n in theirs)
    ours = sum(k.kind == "reorder" for ks in runtime_kernels(g, "onnxruntime") for k in ks)
    assert (any(n.op_type == "Upsample" for n in theirs), ours) == (blocked, reorders)
    assert ours == (2 if blocked else 4)  # in and out, and around the resize when it is not blocked


def test_a_qdq_network_converts_its_float_input_and_output_in_kernels_of_their_own(tmp_path):
    """An INT8 probe reads and writes 8-bit tensors, so the QuantizeLinear of a QDQ file's float
    input and the DequantizeLinear of its float output are priced as kernels (a quantization as its
    inverse pass, a probed kind); the conversions between operators stay in their operators."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.cost.predicted import QDQ_STAND_IN_KINDS
    from optimizer.graph import load_graph

    def const(name, value, dtype):
        return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)

    inits = [const("s", 0.05, np.float32), const("z", 128, np.uint8), const("ws", 0.01, np.float32),
             const("wz", 0, np.int8), const("w", np.ones((8, 3, 3, 3)), np.int8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="in_q"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="in_dq"),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="w_dq"),
             helper.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="out_q"),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"], name="out_dq")]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "qdq.onnx"))
    g = load_graph(str(tmp_path / "qdq.onnx"))
    kinds = {la.name: [k.kind for k in ks] for la, ks in zip(g.layers, runtime_kernels(g, "onnxruntime", "int8"),
                                                             strict=True)}
    assert kinds == {"in_q": ["quantize"], "in_dq": [], "w_dq": [], "conv": ["conv"], "out_q": [],
                     "out_dq": ["dequantize"]}
    assert QDQ_STAND_IN_KINDS["quantize"] == "dequantize"


def test_a_split_is_the_slices_that_write_its_parts():
    """A split copies each part out of its input: one slice kernel per output (not a free layer)."""
    from optimizer.graph.layergraph import Layer

    split = Layer(index=0, name="s", op="reshape", op_type="Split", block="", inputs=("x",), outputs=("a", "b"),
                  input_shapes=((32, 80, 80),), output_shapes=((16, 80, 80), (16, 80, 80)), macs=0, params=0)
    ks = layer_kernels(split, "onnx")
    assert [(k.kind, k.c_in, k.c_out, k.h_out) for k in ks] == [("slice", 32, 16, 80)] * 2


def test_an_onnxruntime_fp32_campaign_times_the_activation_pass_that_prices_fused_activations(tmp_path):
    """onnxruntime FP32 campaigns time one convolution with a ReLU and with a Clip: the difference
    per output element prices a fused activation's pass (``activation_pass`` kernels); a table
    without it prices the pass as a ReLU6 kernel, and other runtimes time no such pair."""
    from types import SimpleNamespace

    from optimizer.cost.predicted import family_layer_seconds
    from optimizer.cost.predictor import predictors_for
    from optimizer.measure.probe_campaign import ACTIVATION_PASSES, InProcess, activation_pass_pairs, run_campaign
    from optimizer.measure.probe_runner import in_process_runner

    fast = {"sample_s": 2e-4, "min_rounds": 2, "max_rounds": 3}
    table = run_campaign(InProcess(in_process_runner("ort", 1), fast), "fp32", 12, tmp_path / "t.csv.gz",
                         families=["eltwise"], adaptive_rounds=0)
    points = table.activation_pass_points
    assert [n for n, _ in points] == sorted(c.out_elems for c in ACTIVATION_PASSES) == [200704, 1204224]
    # under 10 ns per element (0.2-0.4 on the development host; this campaign's few timings can round to 0)
    assert all(0 <= rate < 1e-8 for _, rate in points) and max(rate for _, rate in points) > 0
    assert all(len(v) >= 1 for v in table.meta["activation_pass_samples_s"].values())
    assert activation_pass_pairs("tflite", "fp32") == [] and activation_pass_pairs("onnx", "int8") == []
    graph = SimpleNamespace(layers=[None])
    for (n, rate), hw in zip(points, (56, 112), strict=True):  # at a timed size, that size's rate
        fused = KernelConfig("activation_pass", hw, hw, 96, hw, hw, n // (hw * hw))
        seconds, analytic = family_layer_seconds(graph, [[fused]], predictors_for(table))
        assert not analytic and seconds["eltwise"][0] == pytest.approx(rate * n)
    middle = KernelConfig("activation_pass", 80, 80, 64, 80, 80, 64)
    seconds, _ = family_layer_seconds(graph, [[middle]], predictors_for(table))
    lo, hi = sorted(rate for _, rate in points)
    assert lo * middle.out_elems <= seconds["eltwise"][0] <= hi * middle.out_elems
    fused = middle
    from optimizer.cost.probe_table import read_probe_table, write_probe_table

    bad = table.with_rows([], {"activation_pass_points": [[200704, "fast"]]})
    write_probe_table(bad, tmp_path / "bad.csv.gz")
    with pytest.raises(SchemaError, match="activation_pass_points"):
        read_probe_table(tmp_path / "bad.csv.gz")
    older = table.with_rows([], {"activation_pass_points": None})  # a table from before the pairs
    older.meta.pop("activation_pass_points")
    relu6 = predictors_for(older).predictor("eltwise")
    if relu6 is not None and "relu6" in relu6.kinds:
        seconds, _ = family_layer_seconds(graph, [[fused]], predictors_for(older))
        assert seconds["eltwise"][0] == pytest.approx(relu6.predict([replace(fused, kind="relu6")])[0])


def test_an_nchwc_reorder_is_priced_as_a_transpose_of_its_tensor(prior_configs):
    """No probe times an onnxruntime NCHWc reorder alone: the kernel view's ``reorder`` kernels are
    priced as a transpose of their tensor (the conversions of every network's optimized graph,
    timed in their profiles, ran 0.44-1.8x that: BENCHMARKS.md)."""
    from types import SimpleNamespace

    from optimizer.cost.predicted import family_layer_seconds
    from optimizer.cost.predictor import predictors_for

    predictors = predictors_for(_synthetic_table(prior_configs, runtime="onnxruntime"))
    reorder = KernelConfig("reorder", 40, 40, 64, 40, 40, 64)
    seconds, analytic = family_layer_seconds(SimpleNamespace(layers=[None]), [[reorder]], predictors)
    assert not analytic
    transpose = predictors.predictor("layout").predict([replace(reorder, kind="transpose")])[0]
    assert seconds["layout"][0] == pytest.approx(transpose) and transpose > 0


def test_a_negation_is_a_probed_unary_pass_and_stand_ins_are_probed_kinds_of_their_family():
    """tf2onnx writes a PReLU as Relu, Neg, Mul and Add: the Neg is work, probed as the kind
    ``unary`` (NEG / Neg); kinds the probes do not sample stand in for probed kinds of their family."""
    from optimizer.cost.predicted import OLDER_TABLE_STAND_INS, QDQ_STAND_IN_KINDS, STAND_IN_KINDS
    from optimizer.measure.probes import prior_sample
    from optimizer.graph.kernel_config import KIND_FAMILY, canonical_kind

    assert {canonical_kind(op) for op in ("Neg", "NEG", "Abs", "Erf", "Reciprocal", "Pow", "POW")} == {"unary"}
    assert "unary" in PROBE_KINDS and "unary" in {c.kind for c in prior_sample(2000)}
    for kind, stand_in in (*STAND_IN_KINDS.items(), *QDQ_STAND_IN_KINDS.items()):
        assert stand_in in PROBE_KINDS and kind not in PROBE_KINDS
        assert KIND_FAMILY[kind] == KIND_FAMILY[stand_in], kind
    assert all(k in PROBE_KINDS and v in PROBE_KINDS for k, v in OLDER_TABLE_STAND_INS.items())
    # onnxruntime INT8: a division runs in float between conversions, as a subtraction, not QLinearMul
    assert QDQ_STAND_IN_KINDS["div"] == "sub" and STAND_IN_KINDS["div"] == "mul"
    neg = KernelConfig("unary", 14, 14, 32, 14, 14, 32)
    assert probe_model(neg, "tflite", "int8") and probe_model(neg, "onnx", "fp32")


def _optimized_ops(model: bytes, tmp_path) -> list[str]:
    """The operators onnxruntime's optimizer leaves in ``model`` (its optimized graph)."""
    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]


def test_every_int8_onnxruntime_probe_reads_and_writes_quantized_tensors(tmp_path):
    """As inside a quantized network: an operator that moves 8-bit data runs on it (its
    conversions dropped), one without a quantized kernel runs in float between a
    DequantizeLinear and a QuantizeLinear, and a kept ReLU is those two conversions alone."""
    import onnx
    from onnx import TensorProto

    cases = {KernelConfig("max_pool", 28, 28, 32, 14, 14, 32, k=2, stride=2): ["NhwcMaxPool"],  # as between QLinearConvs
             KernelConfig("global_avg_pool", 7, 7, 32, 1, 1, 32, k=7, stride=7): ["QLinearGlobalAveragePool"],
             KernelConfig("global_max_pool", 7, 7, 32, 1, 1, 32, k=7, stride=7): ["DequantizeLinear", "GlobalMaxPool",
                                                                                  "QuantizeLinear"],
             KernelConfig("transpose", 28, 28, 32, 28, 28, 32): ["Transpose"],
             KernelConfig("sub", 28, 28, 32, 28, 28, 32, n_in=2): ["DequantizeLinear", "DequantizeLinear", "Sub",
                                                                   "QuantizeLinear"],
             KernelConfig("tanh", 28, 28, 32, 28, 28, 32): ["DequantizeLinear", "Tanh", "QuantizeLinear"],
             KernelConfig("relu", 28, 28, 32, 28, 28, 32): ["DequantizeLinear", "QuantizeLinear"],
             KernelConfig("unary", 28, 28, 32, 28, 28, 32): ["DequantizeLinear", "Neg", "QuantizeLinear"],
             KernelConfig("add", 28, 28, 32, 28, 28, 32, n_in=2): ["QLinearAdd"]}
    for cfg, ops in cases.items():
        model = probe_model(cfg, "onnx", "int8")
        g = onnx.load_from_string(model).graph
        assert {i.type.tensor_type.elem_type for i in (*g.input, *g.output)} == {TensorProto.UINT8}, cfg.kind
        assert _optimized_ops(model, tmp_path) == ops, cfg.kind


def test_a_qdq_relu_on_a_float_operator_folds_into_its_quantize(tmp_path):
    """tf2onnx's PReLU in a QDQ file: Neg reads a DequantizeLinear and a ReLU follows it before the
    QuantizeLinear; onnxruntime fuses that ReLU into the QuantizeLinear (DequantizeLinear -> Neg ->
    QuantizeLinear, as the Neg's probe), while the ReLU reading a DequantizeLinear stays (its two
    conversions, as the ReLU's probe)."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    inits = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.05]), helper.make_tensor("z", TensorProto.UINT8, [], [128]),
             helper.make_tensor("z0", TensorProto.UINT8, [], [0])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Relu", ["xd"], ["pos"], name="kept_relu"),
             helper.make_node("Neg", ["xd"], ["neg"]),
             helper.make_node("Relu", ["neg"], ["negr"], name="folded_relu"),
             helper.make_node("QuantizeLinear", ["pos", "s", "z0"], ["pq"]),
             helper.make_node("QuantizeLinear", ["negr", "s", "z0"], ["nq"]),
             helper.make_node("DequantizeLinear", ["pq", "s", "z0"], ["pd"]),
             helper.make_node("DequantizeLinear", ["nq", "s", "z0"], ["nd"]),
             helper.make_node("Add", ["pd", "nd"], ["y"])]
    graph = helper.make_graph(nodes, "prelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], inits)
    path = tmp_path / "prelu_qdq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    g = load_graph(str(path))
    kernels = {la.name: [k.kind for k in ks] for la, ks in zip(g.layers, runtime_kernels(g, "onnxruntime"), strict=True)}
    assert kernels["kept_relu"] == ["relu"] and kernels["folded_relu"] == []
    assert [ks for name, ks in kernels.items() if "unary" in ks] == [["unary"]]


def test_a_qdq_files_conversions_are_priced_inside_its_operators(tmp_path):
    """onnxruntime fuses a QDQ file's conversions into its QLinear kernels or runs them beside a
    float operator, which an INT8 probe times with them: they get no kernel of their own."""
    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    g = load_graph(str(_nchwc_net(tmp_path / "q.onnx", qdq=True)))
    kernels = dict(zip([la.op_type for la in g.layers], runtime_kernels(g, "onnxruntime"), strict=False))
    assert {la.op_type for la in g.layers} >= {"QuantizeLinear", "DequantizeLinear", "Conv", "PRelu"}
    assert kernels["QuantizeLinear"] == [] and kernels["DequantizeLinear"] == []
    assert [k.kind for k in kernels["PRelu"]] == ["prelu"] and [k.kind for k in kernels["Conv"]] == ["conv"]


def test_an_operand_varying_along_the_last_axis_makes_a_binary_kernel_channels_last(tmp_path):
    """A Keras Normalization's mean ahead of an ONNX file's first transpose ([1, 224, 224, 3] less a
    [1, 1, 1, 3] mean) is three channels broadcast innermost, not 224 channels of 224 x 3."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from optimizer.graph import load_graph

    mean = numpy_helper.from_array(np.array([[[[0.4, 0.5, 0.6]]]], np.float32), "mean")
    scale = numpy_helper.from_array(np.full((1, 8, 1, 1), 2.0, np.float32), "scale")
    nodes = [helper.make_node("Sub", ["x", "mean"], ["a"]), helper.make_node("Transpose", ["a"], ["b"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["b", "w"], ["c"]), helper.make_node("Mul", ["c", "scale"], ["y"])]
    w = numpy_helper.from_array(np.ones((8, 3, 1, 1), np.float32), "w")
    graph = helper.make_graph(nodes, "norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 224, 224, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 224, 224])], [mean, scale, w])
    path = tmp_path / "norm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    g = load_graph(str(path))
    kernels = {la.op_type: layer_kernels(la, g.fmt) for la in g.layers}
    assert [(k.h_in, k.w_in, k.c_in, k.bcast) for k in kernels["Sub"]] == [(224, 224, 3, 1)]
    assert [(k.h_in, k.w_in, k.c_in, k.bcast) for k in kernels["Mul"]] == [(224, 224, 8, 1)]  # per channel, NCHW


def test_ort_layout_share_counts_the_nhwc_transposes_around_an_int8_convolution():
    """onnxruntime runs an INT8 convolution in NHWC between two Transposes it inserts (absent
    between the convolutions of a network); a probe's own Transpose is its work, not layout."""
    from optimizer.measure.probe_runner import OrtRunner

    runner = OrtRunner(1)
    conv = KernelConfig("conv", 28, 28, 64, 28, 28, 64, k=1)
    share = runner.layout_share(probe_model(conv, "onnx", "int8"))
    assert 0.05 < share < 0.9
    transpose = KernelConfig("transpose", 28, 28, 64, 28, 28, 64)
    assert runner.layout_share(probe_model(transpose, "onnx", "int8")) == 0.0
    # FP32: the NCHWc reorders around it (their share is timing, which a loaded host moves: 0.1-0.8)
    assert 0.0 < runner.layout_share(probe_model(conv, "onnx", "fp32")) < 0.95


# ------------------------------------------------------------------ predictors

def test_predictors_fit_deterministically_and_generalise(prior_configs):
    from optimizer.cost.predictor import held_out_errors, predictors_for

    table = _synthetic_table(prior_configs)
    a, b = predictors_for(table, seed=3), predictors_for(table, seed=3)
    assert a is b  # cached by the table's hash
    test = [KINDS["conv"], KernelConfig("conv", 56, 56, 64, 56, 56, 128, k=1), KINDS["dwconv"]]
    fresh = predictors_for(_synthetic_table(prior_configs), seed=3)
    for c in test:
        p1, p2 = a.predictor(c.family).predict([c])[0], fresh.predictor(c.family).predict([c])[0]
        assert p1 == p2
    errors = held_out_errors(table.configs(), table.rows["latency_s"].to_numpy(), "fp32")
    assert np.median(np.abs(errors)) < 0.15  # a smooth roofline is learnt from 400 probes


def test_channels_that_fill_the_vector_lanes_are_a_path_of_their_own():
    """onnxruntime's INT8 depthwise convolution runs a multiple of 16 channels 2.6x faster than any
    other count (56 x 56 x 144: 0.42 ms, x 136: 1.10 ms); the alignment is a feature, so the forest
    tells the two paths apart instead of averaging them."""
    from optimizer.cost.predictor import channel_alignment, fit_family

    configs = [KernelConfig("dwconv", h_in=s, w_in=s, c_in=c, h_out=s, w_out=s, c_out=c, k=3)
               for s in (14, 28, 56) for c in range(64, 400, 4)]
    lat = np.array([c.h_out * c.w_out * c.c_out * (0.9e-9 if c.c_out % 16 == 0 else 2.6e-9) for c in configs])
    model = fit_family(configs, lat, "int8", "dwconv_s1", seed=0)
    aligned, ragged = (KernelConfig("dwconv", h_in=40, w_in=40, c_in=c, h_out=40, w_out=40, c_out=c, k=3)
                       for c in (144, 136))
    ratio = model.predict([ragged])[0] / model.predict([aligned])[0]
    assert 2.2 < ratio < 3.2
    assert [channel_alignment(KernelConfig("conv", c_in=c, c_out=32)) for c in (3, 24, 48, 64, 1024)] == [0, 3, 4, 5, 5]


def test_a_well_probed_element_wise_kind_has_a_forest_of_its_own():
    """In a family of unlike kernels, a kind with enough probes in one broadcast mode is predicted by
    its own forest: the family's split on the channel alignment before the kind, so a softmax on
    aligned rows (bert's 128 tokens) fell among cheap aligned passes (onnxruntime INT8: predicted
    130 us where probes of that size take 430). A mode with few probes stays with the family."""
    from optimizer.cost.predictor import MIN_KIND_PROBES, fit_family

    rng = np.random.default_rng(0)
    passes = [KernelConfig(k, s, s, c, s, s, c) for k in ("relu", "add", "sigmoid")
              for s, c in zip(rng.integers(8, 160, 40).tolist(), (8 * rng.integers(1, 64, 40)).tolist(), strict=True)]
    softmax = [KernelConfig("softmax", r, 1, c, r, 1, c)  # odd channel counts, as the prior draws them
               for r, c in zip(rng.integers(16, 1024, 30).tolist(), (rng.integers(20, 2000, 30) | 1).tolist(),
                               strict=True)]
    scaled = [KernelConfig("sub", s, s, c, s, s, c, n_in=2, bcast=1) for s, c in ((64, 3), (96, 1), (128, 3))]
    configs = passes + softmax + scaled
    ns = {"relu": 0.3e-9, "add": 0.5e-9, "sigmoid": 0.8e-9, "softmax": 4.5e-9, "sub": 2e-9}
    lat = np.array([c.out_elems * ns[c.kind] + 2e-6 for c in configs])
    model = fit_family(configs, lat, "int8", "eltwise", seed=0)
    assert set(model.by_kind) == {("relu", 0), ("add", 0), ("sigmoid", 0), ("softmax", 0)} and len(softmax) >= MIN_KIND_PROBES
    query = KernelConfig("softmax", 1024, 1, 128, 1024, 1, 128)  # aligned rows: no softmax probe has them
    assert model.predict([query])[0] == pytest.approx(query.out_elems * 4.5e-9, rel=0.3)
    family_only = replace(model, by_kind={})
    assert family_only.predict([query])[0] < 0.7 * model.predict([query])[0]


def test_an_input_pixel_of_whole_cache_lines_is_a_path_of_its_own():
    """XNNPACK's INT8 convolution runs an input of whole 64-byte pixels 1.5-2x faster per MAC
    (56 x 56 x 256 -> 256 at 500 GMAC/s, x 288 at 280): the pixel's alignment is a feature, which
    tells 352 channels (32 x 11) from 384 (64 x 6) where the channel-count alignment cannot."""
    from optimizer.cost.predictor import channel_alignment, fit_family, row_alignment

    assert [row_alignment(KernelConfig("conv", c_in=c, c_out=8), 1) for c in (3, 24, 240, 256, 1024)] == [0, 3, 4, 6, 6]
    assert row_alignment(KernelConfig("conv", c_in=16, c_out=8), 4) == 6  # 16 floats fill a line
    configs = [KernelConfig("conv", h_in=s, w_in=s, c_in=c, h_out=s, w_out=s, c_out=256, k=3)
               for s in (14, 28, 56) for c in range(64, 640, 8)]
    lat = np.array([c.macs / (500e9 if c.c_in % 64 == 0 else 280e9) for c in configs])
    model = fit_family(configs, lat, "int8", "convkxk", seed=0)
    lines, ragged = (KernelConfig("conv", h_in=40, w_in=40, c_in=c, h_out=40, w_out=40, c_out=256, k=3) for c in (384, 352))
    assert channel_alignment(lines) == channel_alignment(ragged)
    per_mac = (model.predict([ragged])[0] / ragged.macs) / (model.predict([lines])[0] / lines.macs)
    assert 1.5 < per_mac < 2.1, per_mac


def test_the_prior_draws_channel_counts_of_whole_cache_lines():
    """Designs without a width multiplier use multiples of 64 channels (VGG, ResNet, YOLO): a
    quarter or more of the prior's convolutions read whole 64-byte INT8 pixels, where rounding to
    multiples of 8 reached one in eight."""
    from optimizer.measure.probes import prior_sample

    convs = [c for c in prior_sample(2000) if c.kind == "conv" and c.family in ("conv1x1", "convkxk")]
    lines = [c for c in convs if c.c_in % 64 == 0]
    assert len(lines) >= 0.25 * len(convs) and len({c.c_in for c in lines if c.c_in >= 128}) >= 8


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_a_node_chain_probe_chains_its_kernel(tmp_path, fmt):
    """The node-chain probe is the overhead kernel repeated, each copy reading the one before."""
    from optimizer.graph import load_graph
    from optimizer.measure.probe_campaign import NODE_CHAIN, OVERHEAD

    path = tmp_path / f"chain.{fmt}"
    path.write_bytes(probe_model(OVERHEAD, fmt, "fp32", repeat=NODE_CHAIN))
    g = load_graph(str(path))
    assert [k.kind for la in g.layers for k in layer_kernels(la, g.fmt)] == ["add"] * NODE_CHAIN
    with pytest.raises(ConfigError, match="only two-operand kernels chain"):
        probe_model(KINDS["conv"], fmt, "fp32", repeat=2)


def test_the_node_overhead_is_charged_per_kernel(prior_configs, zoo_graph):
    """A table's ``node_overhead_s`` is added once per kernel a layer runs (a swish: two), never to
    a layer folded away."""
    from optimizer.cost.fusion import runtime_kernels
    from optimizer.cost.predicted import price_layers
    from optimizer.cost.predictor import predictors_for

    g = zoo_graph("efficientnet_b0")
    op = g.op_view if g.op_view is not None else g
    kernels = runtime_kernels(op, "tflite_xnnpack")
    table = _synthetic_table(prior_configs)
    charged = table.with_rows([], {"node_overhead_s": 1e-3})
    zero = np.zeros(len(op.layers))
    base, _ = price_layers(op, kernels, predictors_for(table), zero)
    more, analytic = price_layers(op, kernels, predictors_for(charged), zero)
    counts = np.array([0 if i in analytic else len(ks) for i, ks in enumerate(kernels)])
    assert np.allclose(more - base, 1e-3 * counts) and counts.max() == 2 and (counts == 0).any()


def test_tiles_are_copies_and_onnxruntime_shape_nodes_cost_a_node(prior_configs, tmp_path):
    """tf2onnx's nearest up-sampling (Reshape, Tile, Reshape) writes the larger tensor: the Tile is a
    ``tile`` kernel of its output, priced as the concatenation writing it (it was priced as a free
    reshape); the Shape, Cast and Unsqueeze of shape arithmetic and the Reshapes run as onnxruntime
    nodes without a kernel, each charged a node's overhead (not under TFLite's rules)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from optimizer.cost.fusion import runtime_kernels, runtime_nodes
    from optimizer.cost.predicted import STAND_IN_KINDS, price_layers
    from optimizer.cost.predictor import predictors_for
    from optimizer.graph import load_graph
    from optimizer.graph.kernel_config import canonical_kind

    assert {canonical_kind(op) for op in ("Tile", "TILE", "Expand", "BROADCAST_TO")} == {"tile"}
    assert STAND_IN_KINDS["tile"] == "concat"
    init = [numpy_helper.from_array(np.array(v, dtype=np.int64), n) for n, v in
            (("s6", [1, 8, 1, 20, 1, 20]), ("reps", [1, 1, 2, 1, 2, 1]), ("s4", [1, 8, 40, 40]), ("ax", [0]))]
    nodes = [helper.make_node("Reshape", ["x", "s6"], ["r6"]), helper.make_node("Tile", ["r6", "reps"], ["t6"]),
             helper.make_node("Reshape", ["t6", "s4"], ["y"]), helper.make_node("Shape", ["y"], ["shp"]),
             helper.make_node("Cast", ["shp"], ["shpf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["shpf", "ax"], ["z"])]
    graph = helper.make_graph(nodes, "ups", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 20, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 40, 40]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])], init)
    path = tmp_path / "ups.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    g = load_graph(str(path))
    op = g.op_view if g.op_view is not None else g
    kernels = runtime_kernels(op, "onnxruntime")
    types = [la.op_type for la in op.layers]
    (tile,) = kernels[types.index("Tile")]
    assert tile.kind == "tile" and tile.family == "layout" and tile.out_elems == 8 * 40 * 40 and 2 <= tile.n_in <= 4
    assert dict(zip(types, runtime_nodes(op, "onnxruntime", kernels))) == {
        "Reshape": 1, "Tile": 1, "Shape": 1, "Cast": 1, "Unsqueeze": 1}
    assert sum(runtime_nodes(op, "tflite_xnnpack", runtime_kernels(op, "tflite_xnnpack"))) == 1  # the tile
    table = _synthetic_table(prior_configs, runtime="onnxruntime").with_rows([], {"node_overhead_s": 1e-3})
    seconds, analytic = price_layers(op, kernels, predictors_for(table), np.zeros(len(op.layers)))
    assert not analytic and seconds[types.index("Tile")] > 1e-3
    assert np.allclose([seconds[i] for i, t in enumerate(types) if t != "Tile"], 1e-3)


def _qdq_conv_transpose_shape(tmp_path, monkeypatch):
    """A QDQ file of Conv -> Transpose -> {Shape, Relu}, quantized with a validation file's settings
    (without onnxruntime's optimizations first, which would fold this static ``Shape``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from optimizer.graph import load_graph
    from optimizer.measure.validate import _quantize_onnx

    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Transpose", ["c"], ["t"], name="transpose", perm=[0, 2, 3, 1]),
             helper.make_node("Shape", ["t"], ["s"], name="shape"), helper.make_node("Relu", ["t"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 8]),
                               helper.make_tensor_value_info("s", TensorProto.INT64, [4])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "m.onnx")
    _quantize_onnx(tmp_path / "m.onnx", tmp_path / "m-int8.onnx", load_graph(str(tmp_path / "m.onnx")), 32, 0)
    return load_graph(str(tmp_path / "m-int8.onnx"))


def test_a_quantized_tensor_a_shape_reads_is_dequantized_by_a_kernel_of_its_own(tmp_path, monkeypatch):
    """In onnxruntime's optimized QDQ graph the ``DequantizeLinear`` a ``Shape`` reads stays a kernel
    (the other conversions fuse into ``QLinear*`` kernels or run inside their operator's probe)."""
    from optimizer.cost.fusion import runtime_kernels

    g = _qdq_conv_transpose_shape(tmp_path, monkeypatch)
    kernels = {la.name: [k.kind for k in ks] for la, ks in zip(g.layers, runtime_kernels(g, "onnxruntime"), strict=True)}
    assert kernels["t_DequantizeLinear"] == ["dequantize"]
    # the float input's quantization and the float output's dequantization are kernels too (the
    # network's boundary, which no 8-bit probe converts); every other conversion is in an operator
    boundary = {la.name for la in g.layers if set(la.inputs) & set(g.inputs) or set(la.outputs) & set(g.outputs)}
    conversions = [name for name in kernels if name.endswith("Linear") and name != "t_DequantizeLinear"]
    assert all(kernels[n] == [] for n in conversions if n not in boundary)
    assert sorted(k for n in conversions if n in boundary for k in kernels[n]) == ["dequantize", "quantize"]


def test_measured_conversions_are_charged_to_the_operator_they_serve(tmp_path, monkeypatch):
    """A conversion the profiler times as a node of its own counts for the operator whose probe and
    price include it (the Relu's QuantizeLinear), so per-layer and per-family figures compare alike."""
    from optimizer.cost.fusion import runtime_kernels
    from optimizer.measure.device_predictors import conversions_charged

    g = _qdq_conv_transpose_shape(tmp_path, monkeypatch)
    kernels = runtime_kernels(g, "onnxruntime")
    names = [la.name for la in g.layers]
    charged = dict(zip(names, conversions_charged(g, np.ones(len(names)), kernels), strict=True))
    assert charged["y_QuantizeLinear"] == 0 and charged["relu"] == 2  # its output's conversion
    assert charged["x_DequantizeLinear"] == 0 and charged["conv"] >= 2  # the conversion into the convolution
    assert charged["w_DequantizeLinear"] == 1  # a weight's conversion: no activation, not moved
    assert sum(charged.values()) == len(names)


def test_a_per_channel_operand_broadcast_innermost_is_referenced_by_its_runs():
    """onnxruntime INT8 (NHWC) reads a per-channel operand in h x w runs: its reference time counts
    them, for that operand only; FP32 (NCHW) and LiteRT tables keep the work-only reference."""
    from optimizer.cost.predictor import RUN_S, broadcast_runs, reference_s

    assert broadcast_runs("onnxruntime", "int8") and not broadcast_runs("onnxruntime", "fp32")
    assert not broadcast_runs("tflite_xnnpack", "int8")
    scale, scalar = (KernelConfig("mul", 80, 80, 8, 80, 80, 8, n_in=2, bcast=b) for b in (1, 2))
    plain, runs = reference_s([scale, scalar], "int8"), reference_s([scale, scalar], "int8", runs=True)
    assert runs[0] - plain[0] == pytest.approx(80 * 80 * RUN_S) and runs[1] == plain[1]


def test_a_kernel_larger_than_every_probe_extrapolates_by_its_work(prior_configs):
    from optimizer.cost.predictor import predictors_for

    preds = predictors_for(_synthetic_table(prior_configs))
    big = KernelConfig("conv", 320, 320, 256, 320, 320, 256, k=3)  # 60 GMAC, far beyond the 2.5 GMAC cap
    true = big.macs / 20e9 + (big.in_elems + big.out_elems + big.weight_elems) * 4 / 10e9
    assert preds.predictor("convkxk").predict([big])[0] == pytest.approx(true, rel=0.35)


# ------------------------------------------------------------------ the predicted backend

@pytest.fixture
def host_with_table(tmp_path, prior_configs):
    """A copy of the shipped host device whose CPU names a (synthetic) FP32 probe table."""
    import yaml

    from optimizer.cost.probe_table import write_probe_table

    folder = tmp_path / "dev"
    folder.mkdir()
    write_probe_table(_synthetic_table([c for c in prior_configs if c.family != "resize"]),
                      folder / "host.probes" / "t.csv.gz")
    doc = yaml.safe_load((REPO / "search_spaces" / "devices" / "host.yaml").read_text())
    doc["runtime"] = "tflite_xnnpack"
    doc["processors"][0]["predictors"] = [{"runtime": "tflite_xnnpack", "dtype": "fp32", "threads": 1,
                                           "table": "host.probes/t.csv.gz"}]
    path = folder / "host_pred.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_device_naming_a_probe_table_is_priced_by_its_predictors(host_with_table, zoo_graph):
    from optimizer.cost import build_cost_table
    from optimizer.hardware import load_device

    dev = load_device(host_with_table)
    op, kernel = zoo_graph("mobilenet_v2"), zoo_graph("mobilenet_v2", "kernel")
    ct = build_cost_table(kernel, dev, "fp32")
    assert ct.backend == "predicted"
    assert ct.meta["predicted"]["cpu"]["predictor"]["probes"] > 300
    assert ct.invoke_overhead_s[0] == pytest.approx(1e-6)
    assert ct.cum_latency_s[-1, 0] == pytest.approx(build_cost_table(op, dev, "fp32").cum_latency_s[-1, 0])
    analytic = build_cost_table(kernel, dev, "fp32", "analytic")
    assert not np.allclose(ct.latency_s, analytic.latency_s)
    assert build_cost_table(kernel, dev, "int8").meta["predicted"]["cpu"]["predictor"] is None  # no INT8 table


def test_a_family_without_probes_is_priced_analytically_and_said_per_layer(host_with_table, zoo_graph, prior_configs):
    from optimizer.cost import build_cost_table
    from optimizer.hardware import load_device

    ct = build_cost_table(zoo_graph("efficientdet_lite0", "kernel"), load_device(host_with_table), "fp32")
    rows = ct.meta["predicted"]["cpu"]["analytic_layers"]
    resize = [r for r in rows if r["reason"] == "no resize probes"]  # the table has no resize probes
    assert len(resize) == sum(1 for la in zoo_graph("efficientdet_lite0").layers if la.op_type == "UpSampling2D")
    sampled = {c.kind for c in prior_configs}  # any other layer: a kind this small prior draw missed
    assert all(r["reason"].split()[1] not in sampled for r in rows if r not in resize)


def test_a_table_of_another_dtype_or_a_missing_table_is_refused(host_with_table, zoo_graph, tmp_path):
    import yaml

    from optimizer.cost import build_cost_table
    from optimizer.cost.probe_table import write_probe_table
    from optimizer.hardware import load_device

    doc = yaml.safe_load(host_with_table.read_text())
    write_probe_table(_synthetic_table([KINDS["conv"]] * 1, dtype="int8"), host_with_table.parent / "i8.csv")
    doc["processors"][0]["predictors"][0]["table"] = "i8.csv"
    other = host_with_table.parent / "other.yaml"
    other.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigError, match="i8.csv.*measured with dtype 'int8'.*dtype 'fp32'"):
        build_cost_table(zoo_graph("mobilenet_v2"), load_device(other), "fp32")
    doc["processors"][0]["predictors"][0]["table"] = "missing.csv.gz"
    other.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InputFileError, match="missing.csv.gz: no such probe table"):
        build_cost_table(zoo_graph("mobilenet_v2"), load_device(other), "fp32")


def test_cost_prints_the_predictor_and_its_band(run_cli, host_with_table):
    r = run_cli("cost", "mobilenet_v2", "-d", str(host_with_table), "--dtype", "fp32", "-g", "kernel")
    assert r.exit_code == 0, r.stderr
    assert "predicted from" in r.stdout and "not validated" in r.stdout


# ------------------------------------------------------------------ campaigns

class _Counting:
    """A real runner that counts the probes it is asked to time (and may be stopped)."""

    def __init__(self, inner, stop_after=None):
        self.inner, self.stop_after, self.timed = inner, stop_after, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def measure(self, models, seed):
        from optimizer.measure.speed_reference import is_reference

        if self.stop_after is not None and self.timed >= self.stop_after:
            raise KeyboardInterrupt
        self.timed += sum(name not in ("overhead", "node-chain") and not name.startswith("activation-")
                          and not is_reference(name) for name, _ in models)
        return self.inner.measure(models, seed)


def test_a_campaign_resumes_after_an_interrupt_and_measures_nothing_twice(tmp_path):
    from optimizer.cost.probe_table import read_probe_table
    from optimizer.measure.probe_campaign import InProcess, run_campaign
    from optimizer.measure.probe_runner import LiteRTRunner

    path = tmp_path / "work.csv.gz"
    fast = {"sample_s": 2e-4, "min_rounds": 2, "max_rounds": 3}
    first = _Counting(InProcess(LiteRTRunner(1), fast), stop_after=1)
    with pytest.raises(KeyboardInterrupt):
        run_campaign(first, "fp32", 40, path, families=["conv1x1", "eltwise"], adaptive_rounds=1)
    kept = read_probe_table(path)
    assert 0 < len(kept.rows) == first.timed < 40
    second = _Counting(InProcess(LiteRTRunner(1), fast))
    table = run_campaign(second, "fp32", 40, path, families=["conv1x1", "eltwise"], adaptive_rounds=1)
    assert second.timed == len(table.rows) - len(kept.rows)
    assert kept.ids <= table.ids and len(table.rows) >= 30
    third = _Counting(InProcess(LiteRTRunner(1), fast))
    assert len(run_campaign(third, "fp32", 40, path, families=["conv1x1", "eltwise"], adaptive_rounds=1).rows) \
        == len(table.rows) and third.timed == 0
    assert table.meta["invoke_overhead_s"] > 0 and (table.rows["latency_s"] > 0).all()
    # and a chain of overhead kernels: a node's own cost, well under a whole invocation's
    assert 0 < table.node_overhead_s < table.invoke_overhead_s and len(table.meta["node_overhead_samples_s"]) >= 3
    # every group timed the speed reference beside its probes: one level per group, kept per row
    levels = table.meta["reference_levels_s"]
    assert len(levels) == table.rows["reference_s"].nunique() >= 3 and (table.rows["reference_s"] > 0).all()
    assert set(table.rows["reference_s"]) == set(levels) and table.reference_s == pytest.approx(
        float(np.median(table.rows["reference_s"])))


def test_a_campaign_resumes_only_tables_whose_probes_have_not_changed(tmp_path):
    """Tables record their probe models' version; resuming one whose probes have changed since
    (INT8 TFLite: the activations' zero point; INT8 onnxruntime: the layout share) would mix two
    kinds of probes and is refused."""
    from optimizer.cost.probe_table import write_probe_table
    from optimizer.measure.probe_campaign import open_table
    from optimizer.measure.probe_models import PROBE_VERSION

    for dtype, fmt, refused in (("fp32", "tflite", False), ("fp32", "onnx", False), ("int8", "tflite", True),
                                ("int8", "onnx", True)):
        path = tmp_path / f"{dtype}-{fmt}.csv.gz"
        old = _synthetic_table([KINDS["conv"]], dtype=dtype)  # written before tables had probe_version
        write_probe_table(old, path)
        meta = {**old.meta, "probe_version": PROBE_VERSION}
        if refused:
            with pytest.raises(ConfigError, match=f"version 1, this campaign builds version {PROBE_VERSION}"):
                open_table(path, meta, fmt)
        else:
            assert len(open_table(path, meta, fmt).rows) == 1
        bad = tmp_path / f"bad-{dtype}-{fmt}.csv.gz"
        write_probe_table(old.with_rows([], {"probe_version": "2; rm -rf ~"}), bad)
        with pytest.raises(ConfigError, match="probe_version '2; rm -rf ~'; expected a positive integer"):
            open_table(bad, meta, fmt)
        current = tmp_path / f"new-{dtype}-{fmt}.csv.gz"
        write_probe_table(old.with_rows([], {"probe_version": PROBE_VERSION}), current)
        assert len(open_table(current, meta, fmt).rows) == 1


# ------------------------------------------------------------------ dnnplan calibrate --probes

@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """``dnnplan calibrate --probes`` on the host CPU with LiteRT: two families, a tiny budget."""
    from optimizer.cli import main

    folder = tmp_path_factory.mktemp("calibrated")
    out = folder / "host_litert.yaml"
    work = folder / "work.csv.gz"
    code = main(["--quiet", "calibrate", "--device", "host", "--probes", "24", "--runner", "litert",
                 "--families", "conv1x1,eltwise", "--table", str(work), "--out", str(out)])
    assert code == 0
    return out, work


def test_calibrate_probes_writes_the_table_beside_the_device_file(calibrated):
    from optimizer.cost.probe_table import read_probe_table
    from optimizer.hardware import load_device

    out, work = calibrated
    table = out.parent / "host_litert.probes" / "tflite_xnnpack-fp32-t1.csv.gz"
    assert table.is_file() and read_probe_table(table).rows.equals(read_probe_table(work).rows)
    entry = load_device(out).processor("cpu").predictor("tflite_xnnpack", "fp32")
    assert entry is not None and entry.table == "host_litert.probes/tflite_xnnpack-fp32-t1.csv.gz"
    assert entry.table_path.resolve() == table.resolve()
    assert set(read_probe_table(table).families()) == {"conv1x1", "eltwise"}


def test_calibrate_validate_measures_networks_and_records_the_band(run_cli, calibrated, tmp_path):
    from optimizer.hardware import load_device

    out, _ = calibrated
    again = tmp_path / "validated.yaml"
    r = run_cli("calibrate", "--device", str(out), "--validate", "mobilenet_v2", "--runner", "litert",
                "--out", str(again))
    assert r.exit_code == 0, r.stderr
    assert "mobilenet_v2" in r.stdout and "validated band" in r.stdout and "conv1x1" in r.stdout
    assert "speed reference" in r.stdout and "networks timed with the speed reference at" in r.stdout
    band = load_device(again).processor("cpu").predictor("tflite_xnnpack", "fp32").validated
    assert band is not None and band.models == ["mobilenet_v2"] and band.error_min == band.error_max
    c = run_cli("cost", "mobilenet_v2", "-d", str(again), "--dtype", "fp32", "-g", "kernel")
    assert c.exit_code == 0 and "validated error band" in c.stdout and "priced by the analytic model" in c.stdout


def test_onnxruntime_layer_times_of_a_quantized_file_are_its_kernels_inside_the_network(tmp_path, monkeypatch):
    """``--validate``'s per-family times on onnxruntime come from its node profiler on the whole
    network: a QDQ file's convolution is the ``QLinearConv`` it runs as, put on the table's level."""
    import onnx

    from optimizer.graph import load_graph
    from optimizer.measure.device_predictors import measured_layer_times
    from optimizer.measure.probe_runner import in_process_runner
    from optimizer.measure.validate import runtime_artifact

    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    model = onnx.load_from_string(probe_model(KernelConfig("conv", 56, 56, 64, 56, 56, 64, k=3), "onnx", "fp32"))
    for i, node in enumerate(model.graph.node):
        node.name = f"net/{node.op_type.lower()}{i}"
    onnx.save(model, tmp_path / "conv.onnx")
    int8 = runtime_artifact(str(tmp_path / "conv.onnx"), load_graph(str(tmp_path / "conv.onnx")), "onnx", "int8")
    g = load_graph(str(int8))
    runner = in_process_runner("ort", 1)
    times = measured_layer_times(runner, int8, g, 0.0, "int8", None, float("nan"))
    halved = measured_layer_times(runner, int8, g, 0.0, "int8", 1.0, 2.0)  # the host twice as slow as the table
    conv = next(i for i, la in enumerate(g.layers) if la.op_type == "Conv")
    assert times.shape == (len(g.layers),) and times[conv] > 0.5 * times.sum()  # 231 MMACs: the network's time
    assert halved[conv] == pytest.approx(times[conv] / 2, rel=0.5)


@pytest.mark.parametrize("case", ["other_runtime", "corrupt", "family", "validate_onnx", "other_dtype_entry",
                                  "old_int8_probes", "delegate", "builtin_table"])
def test_calibrate_bad_input_is_one_line_exit_2_nothing_written(run_cli, calibrated, tmp_path, case):
    from optimizer.cost.probe_table import write_probe_table

    out_dir = tmp_path / "out"
    out = out_dir / "dev.yaml"
    dev = str(calibrated[0])
    args = ["calibrate", "--device", dev, "--runner", "litert", "--out", str(out)]
    if case == "other_runtime":
        table = tmp_path / "ort.csv.gz"
        write_probe_table(_synthetic_table([KINDS["conv"]], runtime="onnxruntime").with_rows([], {"runner": "ort"}),
                          table)
        args += ["--probes", "20", "--table", str(table)]
        want = "measured with runner 'ort'"
    elif case == "corrupt":
        table = tmp_path / "bad.csv.gz"
        table.write_bytes(b"\x1f\x8b\x08garbage")
        args += ["--probes", "20", "--table", str(table)]
        want = "bad.csv.gz: not a readable probe table"
    elif case == "family":
        args += ["--probes", "20", "--families", "conv1x1,dwconv_s3"]
        want = "'dwconv_s3' is not a kernel family with probes"
    elif case == "old_int8_probes":  # a table measured before INT8 TFLite probes' zero point changed
        table = tmp_path / "old.csv.gz"
        write_probe_table(_synthetic_table([KINDS["conv"]], dtype="int8"), table)
        args += ["--probes", "20", "--table", str(table), "--dtype", "int8"]
        want = "old.csv.gz: its probes were built by probe models of version 1"
    elif case == "delegate":  # a phone's delegate asked of the in-process runner
        args += ["--probes", "20", "--delegate", "nnapi"]
        want = "--delegate 'nnapi' with --runner litert; expected one of xnnpack, cpu"
    elif case == "builtin_table":  # XNNPACK probes resumed by a built-in-kernel campaign
        table = tmp_path / "xnn.csv.gz"
        write_probe_table(_synthetic_table([KINDS["conv"]]).with_rows([], {"runner": "litert"}), table)
        args += ["--probes", "20", "--table", str(table), "--delegate", "cpu"]
        want = "measured with runtime 'tflite_xnnpack', this campaign uses 'tflite_cpu'"
    elif case == "validate_onnx":
        onnx = tmp_path / "m.onnx"
        onnx.write_bytes(probe_model(KINDS["conv"], "onnx", "fp32"))
        args += ["--validate", str(onnx)]
        want = "the tflite runner cannot run a .onnx file"
    else:
        args += ["--validate", "mobilenet_v2", "--dtype", "int8"]
        want = "has no tflite_xnnpack/int8/1-thread predictor"
    r = run_cli(*args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert want in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out_dir.exists() or not any(out_dir.iterdir())


# ------------------------------------------------------------------ phones: adb script, --measure-cmd

BENCHMARK_LOG = """INFO: Initialized TensorFlow Lite runtime.
INFO: Created TensorFlow Lite XNNPACK delegate for CPU.
INFO: The input model file size (MB): 0.0752
INFO: Initialized session in 3.052ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=5 first=310 curr=93 min=88 max=310 avg=138 std=87
INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count={n} first=95 curr=91 min=86 max=120 avg={avg} std=4
INFO: Inference timings in us: Init: 3052, First inference: 310, Warmup (avg): 138, Inference (avg): {avg}
"""


def test_adb_runner_writes_a_script_then_reads_benchmark_model_logs_back(tmp_path):
    from optimizer.measure.probe_campaign import run_campaign
    from optimizer.measure.probe_remote import AdbProbeRunner, ProbesPending

    folder = tmp_path / "phone"
    runner = AdbProbeRunner(folder, threads=4, delegate="gpu", serial="R5CT")
    with pytest.raises(ProbesPending, match="run .*run_probes.sh"):
        run_campaign(runner, "fp32", 20, tmp_path / "t.csv", families=["conv1x1"], adaptive_rounds=0)
    script = (folder / "run_probes.sh").read_text()
    assert "--num_threads=4 --use_gpu=true" in script and "adb -s R5CT push" in script
    models = sorted((folder / "models").glob("*.tflite"))
    assert len(models) == 20 + 2 + 3  # the probes, the overhead and node-chain probes and the speed reference (one for every group)
    (folder / "logs").mkdir()
    for k, m in enumerate(models):  # what the script leaves: benchmark_model's output per model
        (folder / "logs" / f"{m.stem}.txt").write_text(BENCHMARK_LOG.format(n=50, avg=100 + 10 * k))
    table = run_campaign(AdbProbeRunner(folder, threads=4, delegate="gpu"), "fp32", 20, tmp_path / "t.csv",
                         families=["conv1x1"], adaptive_rounds=0)
    assert len(table.rows) == 20 and table.meta["runtime"] == "tflite_gpu" and table.meta["threads"] == 4
    assert (table.rows["samples"] == 50).all() and table.rows["raw_s"].min() >= 99e-6
    assert not any((folder / "models").glob("*.tflite"))  # read back: the models are gone


def test_measure_cmd_runner_times_probes_through_the_protocol(tmp_path):
    import sys

    from optimizer.measure.probe_campaign import run_campaign
    from optimizer.measure.probe_remote import CmdProbeRunner

    runner = CmdProbeRunner(f"{sys.executable} -m optimizer.measure.reference_runner", "tflite_xnnpack", "tflite",
                            1, "cpu", tmp_path / "cmd", repeats=5, warmup=1)
    try:
        table = run_campaign(runner, "fp32", 12, tmp_path / "t.csv", families=["conv1x1", "dwconv_s1"],
                             adaptive_rounds=0)
    finally:
        runner.close()
    assert len(table.rows) == 12 and table.meta["runner"] == "cmd" and (table.rows["raw_s"] > 0).all()


# ------------------------------------------------------------------ profiles adjust predictors

PROFILES = REPO / "tests" / "data" / "profiles"


def test_a_profile_corrects_the_predictor_per_family_and_reports_what_it_cannot_see(host_with_table, zoo_graph):
    import warnings

    from optimizer.hardware import load_device
    from optimizer.measure.profile_corrections import fit_corrections
    from optimizer.measure.profile_import import import_profile

    dev = load_device(host_with_table)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, match = import_profile(PROFILES / "tflite_x86_avx2_mobilenet_v1_float_1t_tflitesoc.txt",
                                  zoo_graph("mobilenet_v1"), dev, "cpu", "fp32")
    fit = fit_corrections(dev, "cpu", [match], "fp32")
    assert {"default", "conv1x1", "dwconv_s1"} <= set(fit.corrections)
    assert any(n.startswith("dense: no profile row times it") for n in fit.notes)  # TF-slim's logits are a conv
    (profiled, before, after), = fit.totals.values()
    assert abs(after / profiled - 1) < 0.05 < abs(before / profiled - 1)
    by = {r.family: r for r in fit.rows}
    assert abs(by["conv1x1"].after_s / by["conv1x1"].profile_s - 1) < 0.1


def test_a_family_profiled_far_from_its_prediction_keeps_its_factor_without_moving_the_common_one(
        host_with_table, zoo_graph):
    """A family whose profiled kernel is not the one priced (the public quantized MobileNet's
    AVERAGE_POOL_2D, 9 us, against the zoo network's MEAN, which TFLite's built-in INT8 kernel runs
    in 0.84 ms here) gets its own factor; the common factor, which every family the profile does
    not time takes, stays where the other families put it (a quadratic prior moved it x0.55)."""
    import dataclasses
    import warnings

    from optimizer.graph.kernel_families import kernel_family
    from optimizer.hardware import load_device
    from optimizer.measure.profile_corrections import fit_corrections
    from optimizer.measure.profile_import import import_profile

    dev = load_device(host_with_table)
    g = zoo_graph("mobilenet_v1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, match = import_profile(PROFILES / "tflite_x86_avx2_mobilenet_v1_float_1t_tflitesoc.txt", g, dev, "cpu",
                                  "fp32")
    pool = np.array([kernel_family(la) == "pool" for la in g.layers])
    assert pool.any() and match.covered[pool].all()
    off = dataclasses.replace(match, latency_s=np.where(pool, match.latency_s * 0.01, match.latency_s))
    base, skewed = (fit_corrections(dev, "cpu", [m], "fp32").corrections for m in (match, off))
    assert skewed["pool"] == pytest.approx(base["pool"] * 0.01, rel=0.2)
    assert skewed["default"] == pytest.approx(base["default"], rel=0.1)


def test_calibrate_from_profile_writes_corrections_the_cost_table_uses(run_cli, host_with_table, tmp_path):
    from optimizer.hardware import load_device

    out = tmp_path / "corrected.yaml"
    r = run_cli("calibrate", "--device", str(host_with_table), "--from-profile",
                str(PROFILES / "tflite_x86_avx2_mobilenet_v1_float_1t_tflitesoc.txt"), "--model", "mobilenet_v1",
                "--dtype", "fp32", "--out", str(out))
    assert r.exit_code == 0, r.stderr
    assert "corrections" in r.stdout and "note: dense" in r.stdout
    entry = load_device(out).processor("cpu").predictor("tflite_xnnpack", "fp32")
    assert entry.corrections["default"] > 0 and entry.corrections_source.startswith("fitted to profile")
    c = run_cli("cost", "mobilenet_v2", "-d", str(out), "--dtype", "fp32")
    assert c.exit_code == 0 and "profile corrections" in c.stdout


def test_the_analytic_profile_fit_says_which_parameters_the_profile_leaves_open(run_cli):
    r = run_cli("calibrate", "--device", "pixel6", "--from-profile",
                str(PROFILES / "tflite_gpu_opencl_mobilenet_v3_issue44369.txt"), "--model", "mobilenet_v2", "--json")
    assert r.exit_code == 0, r.stderr
    import json

    fit = json.loads(r.stdout)
    assert any(n.startswith("memory_bandwidth: the profile(s) hardly constrain it") for n in fit["notes"])
    assert 1e9 < fit["memory_bandwidth_bytes_per_s"] < 1e12  # not pinned to the 10,000 GB/s bound


def test_an_onnx_network_with_integer_ids_quantizes_for_validation(tmp_path, monkeypatch):
    """The INT8 file ``calibrate --validate --runner ort`` times is calibrated with inputs of each
    input's own type: token ids of an embedding are integers (float data was refused by
    onnxruntime for an int64 input)."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.graph import load_graph
    from optimizer.measure.validate import runtime_artifact

    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    table = helper.make_tensor("table", TensorProto.FLOAT, [32, 16], rng.standard_normal(32 * 16).tolist())
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 8], rng.standard_normal(16 * 8).tolist())
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0), helper.make_node("MatMul", ["emb", "w"], ["y"])],
        "ids_net", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12, 8])], [table, w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "ids_net.onnx"
    onnx.save(model, str(path))
    out = runtime_artifact(str(path), load_graph(str(path)), "onnx", "int8")
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert "QuantizeLinear" in ops and "MatMul" in ops


def test_constant_node_weights_are_quantized_as_int8_weights(tmp_path, monkeypatch):
    """paddle2onnx gives PaddleOCR's convolution weights as ``Constant`` nodes; onnxruntime's
    quantizer treated them as activations (UINT8 weights, a ``QLinearConv`` 2-4x slower than with
    INT8 ones). The INT8 file validated is quantized with them as initializers."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.graph import load_graph
    from optimizer.measure.validate import runtime_artifact

    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    w = helper.make_tensor("wv", TensorProto.FLOAT, [8, 3, 3, 3], rng.standard_normal(8 * 27).tolist())
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["w"], value=w), helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        "constant_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])])
    path = tmp_path / "constant_conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]), str(path))
    out = runtime_artifact(str(path), load_graph(str(path)), "onnx", "int8")
    q = onnx.load(str(out))
    init = {i.name: i for i in q.graph.initializer}
    weight_dq = [n for n in q.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in init
                 and init[n.input[0]].data_type == TensorProto.INT8]
    assert out.name.endswith("-prepared.onnx") and "Constant" not in {n.op_type for n in q.graph.node}
    assert len(weight_dq) == 1 and list(init[weight_dq[0].input[1]].dims) == []  # opset 12: per tensor
    from optimizer.measure.probe_runner import OrtRunner

    OrtRunner(1).load(out)()  # a valid file (per-channel weights need opset 13)


def test_an_onnx_network_is_quantized_after_onnxruntime_folds_its_batch_norms_and_pads(tmp_path, monkeypatch):
    """tf2onnx keeps a depthwise convolution's batch norm as a ``Mul`` and ``ZeroPadding2D`` as a
    ``Pad``; quantized as they are, they ran as ``QLinearMul`` and a float ``Pad`` between
    conversions (mobilenet_v2 INT8: 1.3 ms of 8.8). The INT8 file validated is quantized after
    onnxruntime's basic optimizations, as onnxruntime's quantization guide prepares a model: both
    are folded into the convolution."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.graph import load_graph
    from optimizer.measure.probe_runner import OrtRunner
    from optimizer.measure.validate import runtime_artifact

    monkeypatch.setenv("DNNPLAN_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [8, 1, 3, 3], rng.standard_normal(72).tolist()),
             helper.make_tensor("b", TensorProto.FLOAT, [8], rng.standard_normal(8).tolist()),
             helper.make_tensor("s", TensorProto.FLOAT, [1, 8, 1, 1], (1 + rng.random(8)).tolist()),
             helper.make_tensor("pads", TensorProto.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1])]
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["xp"]),
         helper.make_node("Conv", ["xp", "w", "b"], ["c"], group=8, name="net/depthwise"),
         helper.make_node("Mul", ["c", "s"], ["y"], name="net/bn")],
        "dw_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], inits)
    path = tmp_path / "dw_bn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    out = runtime_artifact(str(path), load_graph(str(path)), "onnx", "int8")
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert "Conv" in ops and "Mul" not in ops and "Pad" not in ops, ops
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # the optimized float file is not kept
    OrtRunner(1).load(out)()


def test_an_onnxruntime_fp32_swish_is_one_quickgelu_kernel_named_back_to_its_product(tmp_path):
    """onnxruntime FP32 fuses ``x * sigmoid(x)`` after a convolution into one ``QuickGelu`` node
    (named ``<product>/QuickGeluFusion/``), with no reorder between it and the NCHWc convolutions:
    the kernel view prices the product as the sigmoid's kernel and the sigmoid as nothing, adds
    the reorders onnxruntime's optimized graph has, and the profiler's node is the product's. A
    sigmoid read by another layer as well stays a kernel; at INT8 (QDQ) both stay."""
    from onnx import helper, numpy_helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph
    from optimizer.measure.ort_profile import _layer_matcher, attribute_node, kernel_events, model_runs, profile_events

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
             for n, s in (("w1", (32, 3, 3, 3)), ("w2", (32, 32, 1, 1)), ("w3", (32, 32, 1, 1)))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="net/conv1"),
             helper.make_node("Sigmoid", ["a"], ["s"], name="net/act1/sigmoid"),
             helper.make_node("Mul", ["a", "s"], ["b"], name="net/act1/mul"),  # a swish: QuickGelu
             helper.make_node("Conv", ["b", "w2"], ["c"], name="net/conv2"),
             helper.make_node("Sigmoid", ["c"], ["t"], name="net/act2/sigmoid"),
             helper.make_node("Mul", ["t", "c"], ["d"], name="net/act2/mul"),  # operands swapped: QuickGelu
             helper.make_node("Conv", ["d", "w3"], ["e"], name="net/conv3"),
             helper.make_node("Sigmoid", ["e"], ["u"], name="net/act3/sigmoid"),
             helper.make_node("Mul", ["e", "u"], ["f"], name="net/act3/mul"),
             helper.make_node("Add", ["f", "u"], ["y"], name="net/add")]  # the sigmoid read twice: no fusion
    path, optimized = _saved_and_ort_optimized(tmp_path, "swish", nodes, [1, 3, 24, 24], [1, 32, 24, 24], inits)
    theirs = [n.op_type for n in optimized]
    assert theirs.count("QuickGelu") == 2 and theirs.count("Sigmoid") == 1

    g = load_graph(str(path))
    kernels = runtime_kernels(g, "onnxruntime")
    kinds = {la.name: [k.kind for k in ks] for la, ks in zip(g.layers, kernels, strict=True)}
    assert kinds["net/act1/mul"] == ["sigmoid"] and kinds["net/act1/sigmoid"] == []
    assert kinds["net/act2/mul"] == ["sigmoid"] and kinds["net/act2/sigmoid"] == []
    assert kinds["net/act3/mul"][0] == "mul" and kinds["net/act3/sigmoid"][0] == "sigmoid"
    assert sum(k == "reorder" for ks in kinds.values() for k in ks) == sum(op.startswith("Reorder") for op in theirs)
    assert kinds["net/conv1"] == ["conv"] and kinds["net/conv2"] == ["conv"]  # no reorder around a QuickGelu
    int8 = {la.name: [k.kind for k in ks] for la, ks in zip(g.layers, runtime_kernels(g, "onnxruntime", "int8"),
                                                               strict=True)}
    assert int8["net/act1/mul"] == ["mul"] and int8["net/act1/sigmoid"] == ["sigmoid"]
    assert [k.kind for k in runtime_kernels(g, "tflite_xnnpack")[2]] == ["mul"]  # TFLite: LOGISTIC and MUL

    events, _ = profile_events(path, 1, 2, 0)
    owners = {(name, op): attribute_node(name, op, g, _layer_matcher(g))
              for _, name, op, *_ in kernel_events(events, model_runs(events))}
    fused = {name: g.layers[i].name for (name, op), i in owners.items() if op == "QuickGelu"}
    assert len(fused) == 2 and sorted(fused.values()) == ["net/act1/mul", "net/act2/mul"], fused
    assert all(name.endswith("/QuickGeluFusion/") for name in fused)


def test_a_depthwise_1x1_convolution_is_priced_as_a_channel_product_under_tflite(prior_configs):
    """The probes sample depthwise windows of 3 to 7: a 1 x 1 one (an unfolded batch norm) is priced
    under TFLite as the per-channel product of its tensor, which XNNPACK times alike, and under
    onnxruntime (a grouped convolution, 2.5-7x slower) analytically, with the reason; a table that
    probes 1 x 1 windows prices them with its own forest."""
    from dataclasses import replace

    from optimizer.cost.predicted import depthwise_1x1_stand_in, probes_depthwise_1x1
    from optimizer.graph.kernel_config import BCAST_CHANNEL, KernelConfig

    dw1 = KernelConfig("dwconv", 128, 128, 8, 128, 128, 8, k=1, stride=1)
    assert depthwise_1x1_stand_in(dw1, "tflite_xnnpack", False) == replace(dw1, kind="mul", n_in=2, bcast=BCAST_CHANNEL)
    assert "1x1 depthwise" in depthwise_1x1_stand_in(dw1, "onnxruntime", False)  # type: ignore[operator]
    assert depthwise_1x1_stand_in(dw1, "tflite_xnnpack", True) == dw1
    dw3 = replace(dw1, k=3)
    assert depthwise_1x1_stand_in(dw3, "onnxruntime", False) == dw3
    assert depthwise_1x1_stand_in(replace(dw1, stride=2, h_out=64, w_out=64), "tflite_xnnpack", False).kind == "dwconv"
    table = _synthetic_table(prior_configs)
    assert not probes_depthwise_1x1(table)
    assert probes_depthwise_1x1(_synthetic_table(prior_configs + [dw1]))


def test_an_onnxruntime_fp32_tanh_gelu_is_one_fastgelu_kernel_found_in_the_profile(tmp_path):
    """onnxruntime FP32 fuses the tanh approximation of a GELU (tf2onnx's export of a Keras
    ``gelu(approximate=True)``: constants first) into one ``FastGelu`` node named ``GPT2Gelu``, but not
    one writing a graph output: the kernel view prices the fused one as a tanh and a product on its
    last product (the seven other layers none), leaves the other's eight passes, and the profiler's
    unnamed node is given to that product."""
    from onnx import helper, numpy_helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph
    from optimizer.measure.ort_profile import _node_times, model_runs, profile_events

    def const(name, v):
        return numpy_helper.from_array(np.array(v, dtype=np.float32), name)

    def gelu(x, p, y):
        n = helper.make_node
        return [n("Mul", ["half", x], [f"{p}m"], name=f"{p}/mul"), n("Pow", [x, "three"], [f"{p}p"], name=f"{p}/Pow"),
                n("Mul", ["k", f"{p}p"], [f"{p}m1"], name=f"{p}/mul_1"),
                n("Add", [x, f"{p}m1"], [f"{p}a"], name=f"{p}/add"),
                n("Mul", ["s", f"{p}a"], [f"{p}m2"], name=f"{p}/mul_2"),
                n("Tanh", [f"{p}m2"], [f"{p}t"], name=f"{p}/Tanh"),
                n("Add", ["one", f"{p}t"], [f"{p}a1"], name=f"{p}/add_1"),
                n("Mul", [f"{p}m", f"{p}a1"], [y], name=f"{p}/mul_3")]

    rng = np.random.default_rng(0)
    nodes = ([helper.make_node("MatMul", ["x", "w"], ["h"], name="dense/MatMul")] + gelu("h", "g1", "g")
             + [helper.make_node("MatMul", ["g", "w2"], ["h2"], name="dense2/MatMul")] + gelu("h2", "g2", "y"))
    inits = [const("half", 0.5), const("three", 3.0), const("k", 0.044715), const("s", 0.7978845608), const("one", 1.0),
             const("w", rng.standard_normal((64, 256)) * 0.1), const("w2", rng.standard_normal((256, 64)) * 0.1)]
    path, optimized = _saved_and_ort_optimized(tmp_path, "gelu", nodes, [1, 32, 64], [1, 32, 64], inits, opset=15)
    theirs = [n.op_type for n in optimized]
    assert theirs.count("FastGelu") == 1 and theirs.count("Tanh") == 1  # the second writes the graph's output

    g = load_graph(str(path))
    kinds = {la.name: [k.kind for k in ks] for la, ks in zip(g.layers, runtime_kernels(g, "onnxruntime"), strict=True)}
    first = {n: k for n, k in kinds.items() if n.startswith("g1/")}
    assert first.pop("g1/mul_3") == ["tanh", "mul"] and all(k == [] for k in first.values()), first
    assert all(k for n, k in kinds.items() if n.startswith("g2/")) and kinds["g2/Tanh"] == ["tanh"]
    int8 = {la.name: ks for la, ks in zip(g.layers, runtime_kernels(g, "onnxruntime", "int8"), strict=True)}
    assert all(int8[n] for n in first)  # a QDQ file keeps them

    events, _ = profile_events(path, 1, 2, 0)
    per_run, unattributed, _ = _node_times(events, model_runs(events), g)
    names = [la.name for la in g.layers]
    assert (per_run[:, names.index("g1/mul_3")] > 0).all() and (unattributed == 0).all()


def test_an_onnxruntime_fp32_softmax_over_an_inner_axis_is_transposed_there_and_back(tmp_path):
    """A Softmax (opset 13 on) over an axis other than the last keeps that axis (per sample) on its
    layer; onnxruntime FP32 transposes it to the last axis and back inside the node, so its kernels
    are a transpose, the softmax over the axis's rows and the transpose back; over the last axis, at
    INT8, or under an older opset's 2-D semantics it stays one softmax."""
    import onnx
    from onnx import TensorProto, helper

    from optimizer.cost.fusion import runtime_kernels
    from optimizer.graph import load_graph

    def net(axis, opset):
        g = helper.make_graph([helper.make_node("Softmax", ["x"], ["s"], axis=axis), helper.make_node("Relu", ["s"], ["y"])],
                              "sm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 16])])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        path = tmp_path / f"sm{axis}_{opset}.onnx"
        onnx.save(model, str(path))
        return load_graph(str(path))

    g = net(2, 15)
    assert g.layers[0].axis == 1  # of the per-sample [8, 32, 16]
    t1, sm, t2 = runtime_kernels(g, "onnxruntime")[0]
    assert (t1.kind, sm.kind, t2.kind) == ("transpose", "softmax", "transpose")
    assert (sm.h_in, sm.c_in) == (8 * 16, 32) and t1.in_elems == t2.in_elems == 8 * 32 * 16
    assert [k.kind for k in runtime_kernels(g, "onnxruntime", "int8")[0]] == ["softmax"]
    assert [k.kind for k in runtime_kernels(g, "tflite_xnnpack")[0]] == ["softmax"]
    for axis, opset in ((-1, 15), (3, 15), (2, 11)):
        g = net(axis, opset)
        assert g.layers[0].axis == -1 and [k.kind for k in runtime_kernels(g, "onnxruntime")[0]] == ["softmax"]
