"""Die-level thermal limits: die trips hold every shipped device below 100 °C, and the
radio's heat and thermal mitigation (modem caps) act on offloading."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optimizer.errors import SchemaError
from optimizer.hardware import load_device, load_link
from optimizer.hardware.thermal_spec import ShareCap, available_thermal_specs, load_thermal_spec
from optimizer.thermal.governor import Governor
from optimizer.thermal.simulate import ScaledWorkload, simulate, stress_workload

#: the hottest radio power any shipped link draws: Huang et al.'s LTE uplink (~3.8 W)
FULL_OFFLOAD_W = max(load_link(n).upload_power_w for n in ("lte", "wifi_10", "wifi_13", "wifi_128", "wifi_249"))
PHONES = ("pixel4", "pixel6", "galaxy_s20", "galaxy_s22")


def full_calibration_load(spec) -> ScaledWorkload:
    """Every processor at its full calibration load or at the device's maximum active power,
    whichever is higher (a plan's load), and the radio (if any) at full offload."""
    at_least = {p.name: p.power_w() for p in load_device(spec.device).processors if p.name in spec.processors}
    if "modem" in spec.processors:
        at_least["modem"] = FULL_OFFLOAD_W
    return stress_workload(spec, at_least)


@pytest.mark.parametrize("name", available_thermal_specs())
def test_no_die_above_100_c_under_own_governor(name):
    spec = load_thermal_spec(name)
    amb = 40.0 if name == "jetson_nano" else 25.0          # TADF's Nano experiment ran at 40 °C
    r = simulate(spec, full_calibration_load(spec), duration_s=600.0, ambient_c=amb)
    dies = [spec.node_index(n) for n in spec.die_nodes]
    assert r.temps_c[:, dies].max() <= 100.0, {n: float(r.temps_c[:, spec.node_index(n)].max()) for n in spec.die_nodes}


@pytest.mark.parametrize("name", PHONES)
def test_phone_dies_have_passive_and_critical_trips(name):
    spec = load_thermal_spec(name)
    for proc, p in spec.processors.items():
        node = max(p.heats, key=p.heats.get)
        rows = [r for r in spec.governor.trips if r.sensor == node and proc in r.caps]
        assert rows, f"{name}: no die trip caps {proc}"
        assert min(r.trip_c for r in rows) <= 95.0
        if p.max_clock_hz is not None and proc != "modem":
            assert any(r.trip_c >= 110.0 for r in rows), f"{name}: no critical trip on {proc}"


def test_without_die_trips_the_same_load_overheats():
    """The limit comes from the die trips: drop them and a plan-sized load passes 100 °C."""
    spec = load_thermal_spec("galaxy_s22")
    doc = spec.model_dump(by_alias=True)
    doc["governor"]["trips"] = [r for r in doc["governor"]["trips"] if r["sensor"] == "skin"]
    bare = type(spec).model_validate(doc)
    hot = ScaledWorkload(full_w={"cpu": 5.8, "gpu": 5.2, "dsp": 1.55}, fps_at_max={"cpu": 1.0},
                         idle_w={"cpu": 0.3, "gpu": 0.2, "dsp": 0.05}, combine="parallel")
    assert simulate(bare, hot).peak_die_c > 100.0
    r = simulate(spec, hot)
    assert r.peak_die_c <= 100.0
    assert any(e.kind == "trip" and e.detail.startswith(("cpu", "gpu")) for e in r.events)


def test_map_mobilenet_v2_pixel6_simulates_below_100_c(run_cli, tmp_path):
    plan = tmp_path / "p6.json"
    r = run_cli("--quiet", "map", "mobilenet_v2", "--device", "pixel6", "--out", str(plan))
    assert r.exit_code == 0, r.stderr
    r = run_cli("simulate", str(plan), "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["peak_die_c"] <= 100.0
    assert 0 < out["time_to_first_throttle_s"] < 600  # a full-load pipeline throttles within the 10 minutes


def test_share_caps_parse_and_reach_the_governor(tmp_path):
    spec = load_thermal_spec("pixel4")
    caps = [r.caps["modem"] for r in spec.governor.trips if "modem" in r.caps]
    assert ShareCap(fraction=0.5) in caps and "off" in caps
    gov = Governor(spec)
    temps = np.full(len(spec.node_names), 30.0)
    temps[spec.node_index("modem")] = 92.0
    gov.update(temps)
    assert gov.caps[spec.processor_names.index("modem")] == pytest.approx(0.5)
    doc = spec.model_dump(by_alias=True)
    doc["governor"]["trips"][0]["caps"] = {"cpu": "150 %"}
    import yaml

    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc))
    with pytest.raises(SchemaError, match=r"bad.yaml line \d+: field 'governor\.trips\[0\]\.caps.cpu'.*0-100 %"):
        load_thermal_spec(p)


def _offload_rise(device: str) -> float:
    """Skin rise (K) after 10 minutes of the radio alone sending at Wi-Fi's capped power."""
    spec = load_thermal_spec(device)
    radio = load_link("wifi_249").upload_power_w
    wl = ScaledWorkload(full_w={"modem": radio}, fps_at_max={"modem": 1.0}, combine="parallel")
    return simulate(spec, wl).peak_skin_c - spec.ambient_c


def test_offloading_over_wifi_heats_pixel4_more_than_s20():
    """SPLASH: the thermal cost of offloading is much larger on the Pixel 4 than on the Galaxy S20."""
    p4, s20 = _offload_rise("pixel4"), _offload_rise("galaxy_s20")
    assert p4 > 2.0 * s20 and p4 > 5.0


def test_modem_cap_slows_offloading_in_splash():
    """A capped radio (modem mitigation) stretches the cloud worker's transfers."""
    from optimizer.thermal.policies.splash import run_schedule
    from optimizer.thermal.policies.workload import load_workload, worker_profiles

    spec = load_thermal_spec("galaxy_s20")
    doc = spec.model_dump(by_alias=True)
    doc["governor"]["trips"].insert(0, {"sensor": "skin", "trip": 0.0, "clear": -50.0,
                                        "caps": {"modem": "10 %"}, "source": "test"})
    capped = type(spec).model_validate(doc)
    wl = load_workload("person_finder")
    prof = worker_profiles(wl, "galaxy_s20", "wifi_249")
    free = run_schedule(prof, spec, "heft-cloud", wl.fps, duration_s=60.0)
    slow = run_schedule(prof, capped, "heft-cloud", wl.fps, duration_s=60.0)
    assert free.share["cloud"] > 0.3
    assert slow.share["cloud"] < 0.5 * free.share["cloud"]


def test_heft_with_cloud_throttles_earlier_on_pixel4_not_on_s20():
    """SPLASH: a latency-greedy scheduler that also offloads can throttle earlier than the
    mobile-only one on the Pixel 4 (its radio heat is large); on the S20 offloading still cools.
    Person finder over wifi_249 at 60 FPS, above both schedulers' capacity (every worker busy)."""
    from optimizer.thermal.policies.splash import run_schedule
    from optimizer.thermal.policies.workload import load_workload, worker_profiles

    wl = load_workload("person_finder")
    severe = {}
    for device in ("pixel4", "galaxy_s20"):
        spec = load_thermal_spec(device)
        prof = worker_profiles(wl, device, "wifi_249")
        for pol in ("heft", "heft-cloud"):
            r = run_schedule(prof, spec, pol, 60.0, stop_at_severe=True)
            assert r.time_to_severe_s is not None, (device, pol)
            severe[device, pol] = r.time_to_severe_s
    assert severe["pixel4", "heft-cloud"] < severe["pixel4", "heft"]
    assert severe["galaxy_s20", "heft-cloud"] > 1.2 * severe["galaxy_s20", "heft"]
