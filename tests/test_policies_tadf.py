"""TADF frequency selection and HSWD layer splitting on the Jetson Nano."""

from __future__ import annotations

import json

import pytest

from optimizer.errors import ConstraintError
from optimizer.hardware import load_device
from optimizer.thermal.policies.tadf import hswd, tadf


@pytest.fixture(scope="module")
def chosen():
    return tadf("jetson_nano", 40.0, 85.0)


def test_tadf_keeps_steady_state_under_tmax(chosen):
    dev = load_device("jetson_nano")
    assert chosen.simulated_peak_die_c <= 85.0
    assert max(chosen.predicted_steady_c.values()) == pytest.approx(chosen.simulated_peak_die_c, abs=0.05)
    assert not chosen.throttled and not chosen.at_max
    for p, f in chosen.clock_hz.items():
        assert f in dev.processor(p).clock_levels_hz
    # max clocks would exceed T_max at 40 °C; the CPU (more heat per MAC/s) is the one slowed
    assert chosen.clock_hz["cpu"] < dev.processor("cpu").max_clock_hz
    assert chosen.clock_hz["gpu"] == dev.processor("gpu").max_clock_hz
    co = chosen.coefficients
    assert co["a2_at_max_c"] + co["a3_at_max_c"] > co["F_c"]       # why TADF had to act


def test_tadf_bad_ambient_and_unreachable_tmax():
    with pytest.raises(ConstraintError, match="ambient 90 °C is not below T_max 85 °C"):
        tadf("jetson_nano", 90.0, 85.0)
    with pytest.raises(ConstraintError, match="even the lowest clocks.*reachable T_max"):
        tadf("jetson_nano", 40.0, 42.0)
    assert tadf("jetson_nano", 10.0, 85.0).at_max


@pytest.mark.parametrize("model", ["alexnet", "vgg16"])
def test_hswd_beats_baselines(model, chosen, zoo_graph):
    h = hswd(zoo_graph(model), "jetson_nano", chosen.clock_hz)
    lat = h.latency_s
    assert lat["hswd"] < min(lat["cpu_only"], lat["gpu_only"], lat["cgp"])
    assert all(r > 1.0 for r in h.speedups().values())
    choices = {la["choice"] for la in h.layers}
    assert "split" in choices
    for la in h.layers:
        if la["choice"] == "split":
            assert la["t_split_ms"] < min(la["t_cpu_ms"], la["t_gpu_ms"])
            assert 0 < la["gpu_share"] < 1


def test_tadf_command_keeps_the_die_under_tmax_and_refuses_ambient_above_it(run_cli):
    r = run_cli("tadf", "alexnet", "--device", "jetson_nano", "--ambient", "40", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tadf"]["simulated_peak_die_c"] <= 85.0
    assert set(out["hswd"]["latency_s"]) == {"hswd", "cpu_only", "gpu_only", "cgp"}
    r = run_cli("tadf", "alexnet", "--ambient", "90")
    assert r.exit_code == 2 and "not below T_max" in r.stderr


def test_a_throttled_tadf_run_names_the_governor_rules(run_cli):
    """The model and simulator temperatures are labelled, and a throttled run says which
    rules of the thermal spec tripped (galaxy_s20's skin trips at 40, 42, 44 °C)."""
    res = tadf("galaxy_s20", 25.0, 85.0)
    assert res.throttled and res.throttle_rules[0] == "skin >= 40 °C" and 0.0 < res.time_to_throttle_s
    assert not tadf("jetson_nano", 40.0, 85.0).throttle_rules
    r = run_cli("tadf", "alexnet", "--device", "galaxy_s20")
    line = " ".join(r.stdout.split()).split("HSWD decisions")[0]
    assert r.exit_code == 0 and "(gpu, no governor)" in line and "with the governor" in line
    assert "THROTTLED at" in line and "governor rule(s) skin >= 40 °C" in line
