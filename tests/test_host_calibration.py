"""Host calibration (``dnnplan measure --calibrate-host``) through the one fit of a processor
(:func:`optimizer.measure.profile_fit.fit_processor_to_profiles`), on real onnxruntime
measurements of two ONNX networks written without TensorFlow."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from _byom import write_residual_onnx, write_tiny_onnx

#: every kernel family of a network fitted in-sample: modeled / measured within this (the
#: acceptance of the profile fit, issue 31 item 5)
FAMILY_BOUND = 1.25


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """(model path, graph, host table) of the tiny and the residual ONNX network."""
    from optimizer.graph import load_graph
    from optimizer.measure.host import measure_model

    folder = tmp_path_factory.mktemp("hostfit")
    out = []
    for path in (write_tiny_onnx(folder / "tiny.onnx"), write_residual_onnx(folder / "tinynet.onnx")):
        g = load_graph(str(path))
        out.append((str(path), g, measure_model(str(path), g, threads=1, repeats=20, warmup=3, refresh=True)))
    return out


def test_table_match_gives_each_layer_its_measured_time(measured):
    from optimizer.cost.features import layer_arrays
    from optimizer.measure.profile_fit import family_sums, kernel_families
    from optimizer.measure.profile_import import table_match

    _, g, table = measured[1]
    y = table.rows["latency_s"].to_numpy()
    m = table_match(table, g)
    np.testing.assert_array_equal(m.latency_s, y)
    assert m.profile.invoke_overhead_s is None  # the executor's time is inside the layer times
    kernels = np.asarray(layer_arrays(g, "fp32").dispatched, dtype=bool)
    np.testing.assert_array_equal(m.single, kernels & (y > 0))
    fams = family_sums(m, m.latency_s)
    assert sum(fams.values()) == pytest.approx(y.sum())  # every measured second lands in a family
    assert {"convstem", "convkxk", "dense"} <= set(fams)
    assert set(fams) <= set(kernel_families(m))
    first, second = measured
    with pytest.raises(Exception, match="was the table measured on this model"):
        table_match(first[2], second[1])


def test_cli_calibrate_host_fits_kernel_families_and_writes_a_loadable_host(measured, run_cli, tmp_path):
    from optimizer.cost import build_cost_table
    from optimizer.hardware.loader import load_device

    out = tmp_path / "host.yaml"
    r = run_cli("measure", *[p for p, _, _ in measured], "--calibrate-host", "--out", str(out), "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    fit = json.loads(r.stdout)
    assert fit["processor"] == "cpu" and fit["invoke_overhead_s"] is None
    rows = fit["families"]
    assert {(row["model"], row["family"]) for row in rows} >= {("tiny", "convstem"), ("tinynet", "convkxk"),
                                                               ("tinynet", "dense")}
    for row in rows:  # the fitted model per kernel family of each network, in-sample
        assert 1 / FAMILY_BOUND <= row["after_over_profile"] <= FAMILY_BOUND, row
    for model, ratio in fit["model_over_measured"].items():  # the whole network, in-sample
        assert abs(math.log(ratio)) < math.log(1.1), (model, ratio)
        timed = [x for x in rows if x["model"] == model]  # the fit beats the nominal start
        before, after = (sum(x[k] for x in timed) / sum(x["profile_ms"] for x in timed) for k in ("before_ms", "after_ms"))
        assert abs(math.log(after)) < abs(math.log(before)), (model, after, before)
    host = load_device(out)
    cpu = host.processor("cpu")
    assert {"default", "convstem", "convkxk", "dense"} <= set(cpu.efficiency)
    assert cpu.efficiency["convkxk"] == pytest.approx(fit["efficiency"]["convkxk"], rel=1e-3)
    assert cpu.invoke_overhead_s is None or cpu.invoke_overhead_s == 0
    for _, g, table in measured:  # the written file is the fitted model: same whole-network ratio
        modeled = build_cost_table(g, host, "fp32").whole_network_latency()[0]
        assert modeled / table.rows["latency_s"].sum() == pytest.approx(fit["model_over_measured"][g.name], rel=0.02)
    assert f"host calibrated from {measured[0][0]}" in run_cli(
        "measure", *[p for p, _, _ in measured], "--calibrate-host", "--out", str(tmp_path / "again.yaml")).stdout


def test_fit_host_needs_a_table():
    from optimizer.errors import ConfigError
    from optimizer.measure.host import fit_host, host_device

    with pytest.raises(ConfigError, match="at least one measured table"):
        fit_host(host_device([]), [])
