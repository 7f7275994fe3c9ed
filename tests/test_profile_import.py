"""Per-operator profiles from phones and hosts: parsing real public benchmark_model logs and
onnxruntime profiles, matching them to layers, and fitting a device to them
(``dnnplan measure --import`` / ``calibrate --from-profile``; tests/data/profiles/README.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from optimizer.errors import ConfigError, SchemaError
from optimizer.measure.profile_import import family_totals, match_profile, read_profile



DATA = Path(__file__).resolve().parent / "data" / "profiles"
GPU = DATA / "tflite_gpu_opencl_mobilenet_v3_issue44369.txt"
CPU_SUMMARY = DATA / "tflite_cpu_mobilenet_v1_quant_issue61950.txt"
NNAPI = DATA / "tflite_nnapi_xnnpack_mixed_issue57758.txt"
FRAGMENT = DATA / "tflite_cpu_mobilenet_v2_pixel_issue23131_fragment.txt"
ORT_V2 = DATA / "ort_cpu_mobilenet_v2_host.json"
ORT_V1 = DATA / "ort_cpu_mobilenet_v1_host.json"


@pytest.fixture(scope="module")
def graphs():
    from optimizer.graph import load_graph

    return {m: load_graph(m) for m in ("mobilenet_v2", "mobilenet_v1")}


# ------------------------------------------------------------------ parsers on real logs

def test_gpu_delegate_log_is_one_partition_row():
    p = read_profile(GPU)
    assert p.format == "tflite_text" and p.processor == "gpu"
    (r,) = p.records  # the Run Order row; Top-by-time and Summary tables repeat it
    assert r.op_type == "TfLiteGpuDelegateV2" and r.delegate and r.node_index == 110
    assert r.time_s == pytest.approx(5.061e-3) and r.tensor_names == ["MobilenetV3/Predictions/Softmax"]


def test_cpu_summary_by_node_type_log():
    p = read_profile(CPU_SUMMARY)
    assert [(r.op_type, r.count, round(r.time_s * 1e3, 3)) for r in p.records] == [
        ("CONV_2D", 15, 38.265), ("DEPTHWISE_CONV_2D", 13, 27.23), ("AVERAGE_POOL_2D", 1, 0.007)]
    assert all(r.summary and r.processor == "cpu" for r in p.records)


def test_nnapi_and_xnnpack_partitions_with_fused_names():
    p = read_profile(NNAPI)
    assert [r.processor for r in p.records] == ["npu", "cpu", "npu"]
    assert [r.node_index for r in p.records] == [219, 222, 218]
    assert p.processor == "npu"  # 17.1 of 22.2 ms ran in NNAPI partitions
    names = p.records[2].tensor_names  # 5 output tensors, each a ';'-joined fused name
    assert len(names) == 21 and "model/conv2d_12/Conv2D" in names and names[-1] == "model/tf.math.add_56/Add/y1"


def test_run_order_fragment_without_header():
    p = read_profile(FRAGMENT)
    assert [r.op_type for r in p.records][:3] == ["DEPTHWISE_CONV_2D", "CONV_2D", "ADD"]
    assert len(p.records) == 9 and p.total_s == pytest.approx(7.295e-3)


def test_onnxruntime_profile_median_per_node():
    p = read_profile(ORT_V2)
    events = json.loads(ORT_V2.read_text())
    runs = [e for e in events if e.get("name") == "model_run"]
    assert p.format == "ort_json" and p.runs == len(runs) == 4
    conv1 = next(r for r in p.records if "Conv1_relu" in r.name and r.op_type == "Conv")
    durs = [e["dur"] * 1e-6 for e in events if e.get("name") == conv1.name + "_kernel_time"]
    assert conv1.time_s == pytest.approx(float(np.median(durs)))
    assert 0 < p.total_s < p.whole_s and p.invoke_overhead_s < 0.5 * p.whole_s


def test_csv_export_parses_like_the_text(tmp_path):
    """The CSV of --profiling_output_csv_file (TFLite's ProfileSummaryCSVFormatter layout: the
    same tables, ", "-separated), written here from the real fragment's rows."""
    text = read_profile(FRAGMENT)
    lines = ["Operator-wise Profiling Info for Regular Benchmark Runs:",
             "============================== Run Order ==============================",
             "node type, start, first, avg_ms, %, cdf%, mem KB, times called, name"]
    for raw in FRAGMENT.read_text().splitlines():
        cells = [c.strip() for c in raw.split("\t") if c.strip()]
        lines.append(", ".join(cells))
    f = tmp_path / "profile.csv"
    f.write_text("\n".join(lines) + "\n")
    got = read_profile(f)
    assert got.format == "tflite_csv"
    assert [(r.op_type, r.name, r.time_s) for r in got.records] == [(r.op_type, r.name, r.time_s) for r in text.records]


def test_format_comes_from_the_content_not_the_name(tmp_path):
    shutil.copy(GPU, tmp_path / "log.json")
    shutil.copy(ORT_V2, tmp_path / "trace.txt")
    assert read_profile(tmp_path / "log.json").format == "tflite_text"
    assert read_profile(tmp_path / "trace.txt").format == "ort_json"


@pytest.mark.parametrize("content, message", [
    ("", "empty"), ("hello world\n", "not a profile"), ('{"a": 1', "not valid JSON"),
    ('{"a": 1}', "not an onnxruntime profile"), ("[]", "without node kernel events"),
    ("Operator-wise Profiling Info for Regular Benchmark Runs:\n\tCONV_2D\t1.0\tx\n", "without an operator table"),
])
def test_bad_profiles_name_file_and_formats(tmp_path, content, message):
    f = tmp_path / "p.txt"
    f.write_text(content)
    with pytest.raises(SchemaError, match=message) as e:
        read_profile(f)
    assert str(f) in str(e.value)


# ------------------------------------------------------------------ matching

def test_ort_profile_matches_by_name(graphs):
    g = graphs["mobilenet_v2"]
    p = read_profile(ORT_V2)
    m = match_profile(p, g)
    assert m.mode == "name"
    assert [r.op_type for r in m.unmatched_rows] == ["ReorderOutput"]  # onnxruntime's layout node
    assert m.latency_s.sum() == pytest.approx(p.total_s - m.unmatched_rows[0].time_s)
    by = {la.name: i for i, la in enumerate(g.layers)}
    dw = next(r for r in p.records if r.op_type == "Conv" and "block_5_depthwise_relu" in r.name)
    assert m.latency_s[by["block_5_depthwise"]] == pytest.approx(dw.time_s, rel=1e-6)
    assert m.single[by["block_5_depthwise"]]
    # onnxruntime fuses residual Adds into the following conv: reported, counted as 0
    assert all(g.layers[i].op == "add" for i in m.unmatched_layers) and len(m.unmatched_layers) == 10
    assert all("has no profile row" in w for w in m.warnings()[1:11])


def test_delegate_row_is_split_by_modeled_share(graphs):
    from optimizer.hardware.loader import load_device
    from optimizer.measure.profile_import import modeled_layers

    g = graphs["mobilenet_v2"]
    w = modeled_layers(load_device("pixel6"), "gpu", g, "fp32")
    m = match_profile(read_profile(GPU), g, w)
    assert m.mode == "delegate" and m.covered.all() and not m.unmatched_layers
    assert m.latency_s.sum() == pytest.approx(5.061e-3)
    share = m.latency_s / m.latency_s.sum()
    np.testing.assert_allclose(share, w / w.sum(), rtol=1e-9, atol=1e-12)


def test_summary_rows_cover_their_op_family(graphs):
    g = graphs["mobilenet_v1"]
    m = match_profile(read_profile(CPU_SUMMARY), g)
    fam = family_totals(m)  # kernel families: the CONV_2D time is split over conv1x1 and convstem
    assert fam["conv1x1"] + fam["convstem"] == pytest.approx(38.265e-3)
    assert fam["dwconv_s1"] + fam["dwconv_s2"] == pytest.approx(27.23e-3)
    assert fam["conv1x1"] > 20 * fam["convstem"]  # one 3x3 conv on 3 channels, 14 pointwise ones
    convs = [i for i, la in enumerate(g.layers) if la.op == "conv"]
    assert (m.latency_s[convs] > 0).all()
    # the quantized model's classifier is a 1x1 CONV_2D, the zoo's a Dense layer: both said
    assert any("ran 15 such nodes" in w for w in m.warnings())
    assert any("'fc' (dense) has no profile row" in w for w in m.warnings())


def test_profile_of_another_model_is_refused(graphs):
    with pytest.raises(ConfigError, match=r"3 of 3 profile rows match no layer of 'mobilenet_v2'"):
        match_profile(read_profile(NNAPI), graphs["mobilenet_v2"])


# ------------------------------------------------------------------ fitting

def test_fit_brings_each_family_within_1_25_and_improves_an_unseen_network(graphs):
    """Fitted on the mobilenet_v2 profile, every op family's modeled time is
    within x1.25 of it; the mobilenet_v1 profile, not used in the fit, is modeled closer."""
    from optimizer.hardware.loader import load_device
    from optimizer.measure.profile_fit import family_rows, fit_processor_to_profiles
    from optimizer.measure.profile_import import import_profile

    host = load_device("host")
    with pytest.warns(UserWarning):
        _, seen = import_profile(ORT_V2, graphs["mobilenet_v2"], host, "cpu")
        _, unseen = import_profile(ORT_V1, graphs["mobilenet_v1"], host, "cpu")
    fit = fit_processor_to_profiles(host, "cpu", [seen])
    assert {r.family for r in fit.rows} >= {"conv1x1", "convstem", "dwconv_s1", "dwconv_s2", "dense"}
    for r in fit.rows:
        assert 1 / 1.25 <= r.ratio_after <= 1.25, (r.family, r.ratio_after)
    rows = family_rows(host, fit.device, "cpu", unseen, "fp32")
    prof = sum(r.profile_s for r in rows)
    before = abs(np.log(sum(r.before_s for r in rows) / prof))
    after = abs(np.log(sum(r.after_s for r in rows) / prof))
    assert after < before
    assert all(0 < v <= 4 for v in fit.efficiency.values())


# ------------------------------------------------------------------ command line

def test_cli_measure_import_table_feeds_the_measured_backend(run_cli, tmp_path):
    from optimizer.cost.measured import read_measured_table

    out = tmp_path / "v2.json"
    r = run_cli("measure", "--import", str(ORT_V2), "--model", "mobilenet_v2", "--device", "host", "--out", str(out))
    assert r.exit_code == 0, (r.stdout + r.stderr)
    assert "56 rows matched by name" in r.stdout and "conv1x1" in r.stdout
    t = read_measured_table(out)
    assert t.processors == ["cpu"] and t.meta["profile_format"] == "ort_json"
    fam = t.meta["family_totals_s"]
    assert fam["conv1x1"] > fam["dwconv_s1"] > fam["dwconv_s2"] > 0
    r = run_cli("cost", "mobilenet_v2", "--device", "host", "--backend", "measured", "--table", str(out), "--json")
    assert r.exit_code == 0, (r.stdout + r.stderr)


def test_cli_calibrate_from_profile_writes_a_loadable_device(run_cli, tmp_path):
    from optimizer.hardware.loader import load_device

    out = tmp_path / "host_fit.yaml"
    r = run_cli("calibrate", "--device", "host", "--from-profile", str(ORT_V2), "--model", "mobilenet_v2",
                "--out", str(out))
    assert r.exit_code == 0, (r.stdout + r.stderr)
    for fam in ("conv1x1", "convstem", "dwconv_s1", "dwconv_s2", "dense"):
        assert f"mobilenet_v2                   {fam} " in r.stdout
    dev = load_device(out)
    cpu = dev.processor("cpu")
    assert "fitted to profile" in cpu.source and str(ORT_V2) in cpu.source
    assert {"conv1x1", "convstem", "dwconv_s1", "dwconv_s2", "dense"} <= set(cpu.efficiency)
    assert cpu.efficiency["conv"] == load_device("host").processor("cpu").efficiency["conv"]  # kept
    assert cpu.invoke_overhead_s > 0


def test_onnxruntime_nodes_of_another_provider_are_partitions(tmp_path):
    """A node an execution provider took (NNAPI here) is a fused partition, like a TFLite delegate
    row: its processor kind comes from the provider."""
    events = json.loads(ORT_V2.read_text())
    for e in events:
        if e.get("cat") == "Node" and "block_16_project" in e["name"]:
            e["args"]["provider"] = "NnapiExecutionProvider"
    f = tmp_path / "nnapi.json"
    f.write_text(json.dumps(events))
    recs = {r.name: r for r in read_profile(f).records}
    hit = [r for n, r in recs.items() if "block_16_project" in n]
    assert hit and all(r.processor == "npu" and r.delegate for r in hit)
    assert sum(r.processor == "cpu" and not r.delegate for r in recs.values()) == len(recs) - len(hit)


def test_logcat_prefixes_are_dropped(tmp_path):
    """benchmark_model run as an Android app logs through logcat (tensorflow#56301 shows the
    prefix): the same tables behind ``MM-DD hh:mm:ss.mmm pid tid I tflite  :``."""
    prefix = "05-31 10:38:42.569 22206 22206 I tflite  : "
    f = tmp_path / "logcat.txt"
    f.write_text("".join(prefix + line + "\n" for line in GPU.read_text().splitlines()))
    assert read_profile(f).records == read_profile(GPU).records


def test_an_invalid_fitted_device_is_not_written(tmp_path):
    from optimizer.measure.profile_fit import write_device_yaml

    out = tmp_path / "dev.yaml"
    with pytest.raises(SchemaError):
        write_device_yaml(str(out), "name: broken\nprocessors: 3\n")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_space_padded_tables_as_pasted(tmp_path):
    """Logs pasted into issues often lose their tabs (tensorflow#25021 shows space-padded rows)."""
    f = tmp_path / "spaces.txt"
    f.write_text(FRAGMENT.read_text().replace("\t", "    "))
    assert read_profile(f).records == read_profile(FRAGMENT).records


def test_converter_layout_transposes_stay_out_of_the_kernels(graphs):
    """tf2onnx's NHWC->NCHW input Transpose is named after the first batch-norm: its time is kept
    on that layer (the measured table has it) but not put on the stem conv, and the fit leaves it
    out (the model costs no layout op)."""
    from optimizer.measure.profile_fit import fit_times

    g = graphs["mobilenet_v2"]
    p = read_profile(ORT_V2)
    m = match_profile(p, g)
    tr = next(r for r in p.records if r.op_type == "Transpose")
    by = {la.name: i for i, la in enumerate(g.layers)}
    assert m.unmodeled_s[by["bn_Conv1"]] == pytest.approx(tr.time_s) and m.unmodeled_s.sum() == pytest.approx(tr.time_s)
    conv = next(r for r in p.records if r.op_type == "Conv" and "Conv1_relu" in r.name)
    assert m.latency_s[by["Conv1"]] == pytest.approx(conv.time_s) and m.single[by["Conv1"]]
    assert fit_times(m).sum() == pytest.approx(m.latency_s.sum() - tr.time_s)


def test_fitted_device_file_keeps_the_users_comments_and_layout(run_cli, tmp_path):
    """The fitted YAML is the user's file edited in place (ruamel.yaml round trip): every comment
    and the handoff section stay as written, the other processors unchanged (a flow mapping written
    over two lines comes back on one); only the fitted fields move."""
    from optimizer.hardware.loader import load_device, resolve_shipped

    src = resolve_shipped("jetson_nano", "devices", "device").read_text(encoding="utf-8")
    out = tmp_path / "nano_fit.yaml"
    r = run_cli("calibrate", "--device", "jetson_nano", "--processor", "cpu", "--from-profile", str(ORT_V2),
                "--model", "mobilenet_v2", "--out", str(out))
    assert r.exit_code == 0, (r.stdout + r.stderr)
    text = out.read_text(encoding="utf-8")
    comments = [ln.split("#", 1)[1] for ln in src.splitlines() if "#" in ln]
    assert comments and all(c.strip() in text for c in comments)
    # the comment on a rewritten field described the old value, and now says so
    bw = next(ln for ln in text.splitlines() if ln.strip().startswith("memory_bandwidth:") and "LPDDR4" in ln)
    assert "# was 8 GB/s: LPDDR4 25.6 GB/s rated" in bw and not bw.strip().startswith("memory_bandwidth: 8 GB/s")
    assert text.split("handoff:", 1)[1] == src.split("handoff:", 1)[1]
    fitted = load_device(out).processor("cpu")
    assert "fitted to profile" in fitted.source and "conv1x1" in fitted.efficiency
    assert load_device(out).processor("gpu") == load_device("jetson_nano").processor("gpu")
