"""Thermal specs, RC network, governor and sustained-run simulation."""

from __future__ import annotations


import numpy as np
import pytest

from optimizer.errors import SchemaError, UnknownNameError
from optimizer.hardware.thermal_spec import (
    ThermalSpec,
    available_thermal_specs,
    load_thermal_spec,
    parse_thermal_quantity,
)
from optimizer.thermal.governor import replay
from optimizer.thermal.rc import RCNetwork
from optimizer.thermal.simulate import (
    ScaledWorkload,
    SteadyStateObjective,
    reference_workload,
    simulate,
)

DEVICES = ("pixel4", "galaxy_s20", "pixel6", "galaxy_s22", "jetson_nano", "raspberry_pi4")


@pytest.fixture(scope="module")
def pixel4() -> ThermalSpec:
    return load_thermal_spec("pixel4")


def test_all_device_specs_load_with_sources():
    assert set(DEVICES) <= set(available_thermal_specs())
    for name in DEVICES:
        spec = load_thermal_spec(name)
        assert spec.device == name
        assert spec.source and spec.governor.source
        assert all(n.source for n in spec.nodes) and all(c.source for c in spec.couplings)
        assert all(r.source for r in spec.governor.trips)
        assert set(spec.processor_names) <= {"cpu", "gpu", "npu", "dsp", "tpu", "modem"}
        assert spec.full_load_w(), name


def test_units_are_parsed_to_si():
    assert parse_thermal_quantity("940.8 MHz", "frequency") == pytest.approx(940.8e6)
    assert parse_thermal_quantity("25 °C", "temperature") == 25.0
    assert parse_thermal_quantity("450 mW/K", "conductance") == pytest.approx(0.45)
    assert parse_thermal_quantity(2.5, "capacitance") == 2.5
    with pytest.raises(ValueError, match="unknown frequency unit"):
        parse_thermal_quantity("3 furlongs", "frequency")


def test_pixel4_governor_table_is_the_methods_table(pixel4):
    rows = {r.trip_c: r for r in pixel4.governor.trips}
    assert rows[49.0].clear_c == 47.0 and rows[49.0].caps["gpu"] == pytest.approx(427e6)
    assert rows[49.0].caps["cpu.little"] == pytest.approx(940.8e6)
    assert rows[49.0].caps["cpu.prime"] == pytest.approx(1056e6)
    assert rows[50.0].clear_c == 49.0 and rows[50.0].caps["gpu"] == pytest.approx(345e6)
    assert rows[51.0].clear_c == 50.0 and rows[51.0].caps["npu"] == "off"
    assert rows[51.0].caps["cpu.prime"] == pytest.approx(825.6e6)
    assert rows[61.0].shutdown
    assert [lv.trip_c for lv in pixel4.governor.status.levels] == [43, 47, 49, 51, 55, 59]
    assert pixel4.governor.status.hysteresis_c == pytest.approx(1.9)


def test_bad_specs_are_rejected_with_field(tmp_path, pixel4):
    doc = pixel4.model_dump(by_alias=True)
    doc["governor"]["trips"][0]["caps"] = {"cpu.huge": 1e9}
    import yaml

    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(SchemaError, match=r"bad.yaml line \d+: .*unknown cluster 'cpu.huge'"):
        load_thermal_spec(p)
    doc = pixel4.model_dump(by_alias=True)
    doc["nodes"][0]["capacitance"] = "3 parsecs"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(SchemaError, match=r"field 'nodes\[0\]\.capacitance'"):
        load_thermal_spec(p)
    with pytest.raises(UnknownNameError, match="pixel4"):
        load_thermal_spec("pixel99")


def _toy_network() -> RCNetwork:
    g = np.array([[0, 0.5, 0], [0.5, 0, 0.8], [0, 0.8, 0]])
    return RCNetwork(("die", "board", "skin"), ("cpu", "gpu"), np.array([1.0, 8.0, 30.0]), g,
                     np.array([0.0, 0.02, 0.3]), np.array([[1.0, 0.6], [0.0, 0.4], [0.0, 0.0]]))


def test_rc_discretisation_is_exact_and_stable_for_any_step():
    net = _toy_network()
    p = np.array([2.0, 1.0])
    fine = net.discretise(0.01).simulate(np.full(3, 25.0), np.tile(p, (10000, 1)), 25.0)[-1]
    coarse = net.discretise(100.0).simulate(np.full(3, 25.0), p[None, :], 25.0)[-1]
    closed = net.response(p, [100.0], 25.0)[0, 0]
    np.testing.assert_allclose(coarse, fine, atol=1e-6)
    np.testing.assert_allclose(closed, fine, atol=1e-6)
    huge = net.discretise(1e7)          # far beyond every time constant: lands on steady state
    x = huge.step(np.full(3, 25.0), p, 25.0)
    np.testing.assert_allclose(x, net.steady_state(p, 25.0), atol=1e-6)
    assert np.all(np.abs(np.linalg.eigvals(huge.Ad)) < 1.0)
    # steady state by hand: the heat all leaves through g_amb; skin + board carry 3 W
    ss = net.steady_state(p, 25.0)
    assert 0.02 * (ss[1] - 25) + 0.3 * (ss[2] - 25) == pytest.approx(3.0)
    taus = net.time_constants_s()
    assert taus[0] > taus[-1] > 0


def test_governor_replay_changes_caps_exactly_at_table_thresholds(pixel4):
    up = np.round(np.arange(40.0, 55.0 + 1e-9, 0.1), 1)
    temps_skin = np.concatenate([up, up[::-1]])
    temps = np.full((len(temps_skin), len(pixel4.node_names)), 30.0)
    temps[:, pixel4.node_index("skin")] = temps_skin
    tr = replay(pixel4, np.arange(len(temps_skin), dtype=float), temps)
    gpu = tr.caps[:, pixel4.processor_names.index("gpu")]
    npu = tr.caps[:, pixel4.processor_names.index("npu")]
    cpu = tr.caps[:, pixel4.processor_names.index("cpu")]
    n = len(up)

    def first(mask, part):
        idx = np.flatnonzero(mask[:n] if part == "up" else mask[n:])
        return temps_skin[:n][idx[0]] if part == "up" else temps_skin[n:][idx[0]]

    assert first(gpu < 1, "up") == 49.0
    assert first(np.isclose(gpu, 345 / 585), "up") == 50.0
    assert first(np.isclose(gpu, 257 / 585), "up") == 51.0
    assert first(npu == 0, "up") == 51.0
    assert first(cpu < 1, "up") == 43.0                       # step-wise prime cap at 43 °C
    # on the way down each row clears at its clear level
    assert first(npu == 1, "down") == 50.0
    assert first(np.isclose(gpu, 345 / 585), "down") == 50.0
    assert first(np.isclose(gpu, 427 / 585), "down") == 49.0
    assert first(gpu == 1, "down") == 47.0
    assert first(cpu == 1, "down") == 41.0
    # CPU fraction under the 49 °C row: little 940.8/1785.6 (w 0.2) + prime 1056/2841.6 (w 0.8)
    k = np.flatnonzero(temps_skin == 49.0)[0]
    assert cpu[k] == pytest.approx(0.2 * 940.8 / 1785.6 + 0.8 * 1056 / 2841.6)
    # status: severe at 49, leaves it below 49 - 1.9 °C
    severe = tr.status_names.index("severe")
    assert first(tr.status >= severe, "up") == 49.0
    assert first(tr.status < severe, "down") == 47.0
    kinds = [e.kind for e in tr.events]
    assert kinds.count("trip") == 6 and kinds.count("clear") == 6


def test_pixel4_full_load_throttles_within_minutes(pixel4):
    """SPLASH, Pixel 4 at 25 °C under a multi-DNN load: dies > 80 °C within ~40 s, skin 49 °C
    then 51 °C (NPU off) at ~170 s, then cycling as the NPU comes back."""
    wl = reference_workload(pixel4, fps_at_max={"cpu": 10, "gpu": 20, "dsp": 15, "npu": 30})
    r = simulate(pixel4, wl, duration_s=600, ambient_c=25.0)  # speed: benchmarks/bench_thermal_sim.py
    cpu = r.temps_c[:, pixel4.node_index("cpu")]
    skin = r.temps_c[:, pixel4.node_index("skin")]
    assert 20 <= r.times_s[np.argmax(cpu >= 80)] <= 60
    assert 30 <= r.time_to_first_throttle_s <= 300
    assert 60 <= r.time_to_severe_s <= 240
    assert 120 <= r.times_s[np.argmax(skin >= 51)] <= 240
    npu_on = r.caps[:, pixel4.processor_names.index("npu")] > 0
    assert (~npu_on).any() and npu_on[-120:].any()             # NPU switched off, then back on
    assert r.sustained_fps < r.fps[0]
    assert 49 <= r.peak_skin_c < 52 and r.peak_die_c > 80


def test_simulation_without_throttling_matches_closed_form(pixel4):
    wl = ScaledWorkload(full_w={"cpu": 0.3, "gpu": 0.2}, fps_at_max={"cpu": 5.0, "gpu": 8.0})
    r = simulate(pixel4, wl, duration_s=300, ambient_c=25.0)
    assert r.time_to_first_throttle_s is None and r.time_to_severe_s is None
    assert r.sustained_fps == pytest.approx(5.0)
    obj = SteadyStateObjective(pixel4)
    p = np.array([[0.3, 0.2, 0, 0, 0]])
    closed = obj.network.response(p, r.times_s, 25.0)[0]
    np.testing.assert_allclose(r.temps_c, closed, atol=1e-6)


def test_steady_state_objective_is_vectorised(pixel4):
    obj = SteadyStateObjective(pixel4)
    rng = np.random.default_rng(0)
    P = rng.uniform(0, 3, size=(200, len(pixel4.processor_names)))
    peak = obj.peak_die_c(P, 25.0)
    one = np.array([obj.peak_die_c(P[i], 25.0)[0] for i in range(5)])
    np.testing.assert_allclose(peak[:5], one)
    assert np.all(obj.peak_skin_c(P) <= peak)
    full = np.array([[3.2, 1.6, 0.8, 1.0, 0.0], [0.3, 0.2, 0.1, 0.1, 0.0]])
    t = obj.time_to_first_trip_s(full, 25.0)
    assert 30 < t[0] < 300 and np.isinf(t[1])
