"""thermal/plant.py: the one RC + governor stepping object and its shared metrics."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.errors import ConfigError
from optimizer.hardware.thermal_spec import load_thermal_spec
from optimizer.thermal.governor import Governor, GovernorEvent
from optimizer.thermal.plant import PlantLog, ThermalPlant
from optimizer.thermal.rc import RCNetwork
from optimizer.thermal.simulate import reference_workload, simulate


@pytest.fixture(scope="module")
def pixel4():
    return load_thermal_spec("pixel4")


def _log(caps, status, severe=2, events=()) -> PlantLog:
    caps = np.asarray(caps, float)
    n = len(caps)
    temps = np.column_stack([np.linspace(30.0, 60.0, n), np.linspace(25.0, 41.0, n), np.full(n, 20.0)])
    return PlantLog(sample_times_s=2.0 * np.arange(n), caps=caps, status=np.asarray(status),
                    times_s=2.0 * np.arange(1, n + 1), temps_c=temps, energy_j=np.ones((n, 2)), events=list(events),
                    status_names=("none", "light", "severe"), severe_level=severe, die_index=np.array([0, 2]),
                    skin_index=1)


def test_metrics_have_one_definition_each():
    caps = [[1, 1], [1, 1], [1, 0.7], [1, 1], [0, 0.5]]
    log = _log(caps, [0, 1, 1, 2, 2])
    # first throttle: the first sample after which some cap is below maximum (t = 2 * 2 s)
    assert log.time_to_first_throttle_s() == 4.0
    assert log.throttled_fraction() == pytest.approx(2 / 5)
    assert log.time_to_severe_s() == 6.0
    assert log.peak_die_c() == 60.0 and log.peak_skin_c() == 41.0
    np.testing.assert_array_equal(log.peak_c(), [60.0, 41.0, 20.0])
    np.testing.assert_array_equal(log.energy_total_j(), [5.0, 5.0])


def test_a_trip_that_caps_nothing_is_not_a_throttle_and_no_ladder_has_no_severe():
    trip = GovernorEvent(0.0, "trip", "row 0", 80.0)
    log = _log([[1, 1], [1, 1 - 1e-12]], [0, 0], severe=None, events=[trip])
    assert log.time_to_first_throttle_s() is None and log.throttled_fraction() == 0.0
    assert log.time_to_severe_s() is None


def test_plant_steps_are_the_exact_closed_form_response(pixel4):
    power = np.array([2.0, 1.0, 0.0, 0.5, 0.3])
    plant = ThermalPlant(pixel4, 1.0, substeps=10, ambient_c=25.0)
    for _ in range(300):
        plant.step(power)
    expect = RCNetwork.from_spec(pixel4).response(power[None, :], np.array([30.0]), 25.0)[0, 0]
    np.testing.assert_allclose(plant.x, expect, rtol=0, atol=1e-9)
    # the clock counts periods and substeps: 30 periods exactly
    assert plant.time_s == 30.0 and plant.dt == pytest.approx(0.1)
    plant.record()
    np.testing.assert_allclose(plant.log().energy_total_j(), power * 30.0, rtol=1e-12)


def test_plant_matches_the_plain_loop_it_replaces(pixel4):
    """simulate() on the plant equals the RC + governor loop written out (bit for bit)."""
    wl = reference_workload(pixel4)
    res = simulate(pixel4, wl, duration_s=300.0, ambient_c=27.0)
    disc = RCNetwork.from_spec(pixel4).discretise(1.0)
    gov = Governor(pixel4)
    procs = pixel4.processor_names
    x = np.full(len(pixel4.node_names), 27.0)
    temps, caps = [], []
    for k in range(300):
        gov.update(x, float(k))
        c = gov.caps
        pt = wl(dict(zip(procs, c.tolist())))
        p = np.minimum([pt.power_w.get(q, 0.0) for q in procs], pixel4.power_limit_w())
        x = x @ disc.Ad.T + p @ disc.Bd.T + disc.ed * 27.0
        temps.append(x)
        caps.append(c)
    np.testing.assert_array_equal(res.temps_c, np.array(temps))
    np.testing.assert_array_equal(res.caps, np.array(caps))
    first = next(k for k, c in enumerate(caps) if (c < 1 - 1e-9).any())
    assert res.time_to_first_throttle_s == float(first)
    assert res.peak_die_c == max(t[pixel4.node_index(n)] for t in temps for n in pixel4.die_nodes)


def test_samples_happen_on_whole_periods_and_record_what_was_asked(pixel4):
    plant = ThermalPlant(pixel4, substeps=4, initial_c=30.0)
    power = np.full(len(pixel4.processor_names), 1.0)
    for _ in range(3):
        plant.sample()
        plant.run(np.tile(power, (4, 1)))
        plant.record()
    log = plant.log()
    np.testing.assert_array_equal(log.sample_times_s, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(log.times_s, [1.0, 2.0, 3.0])
    assert log.temps_c.shape == (3, len(pixel4.node_names)) and log.caps.shape == (3, len(pixel4.processor_names))
    np.testing.assert_allclose(log.energy_j, np.ones((3, len(power))), rtol=1e-12)


@pytest.mark.parametrize("kw", [{"period_s": 0.0}, {"substeps": 0}])
def test_bad_plant_settings_fail_in_one_line(pixel4, kw):
    with pytest.raises(ConfigError, match="plant period"):
        ThermalPlant(pixel4, **kw)
