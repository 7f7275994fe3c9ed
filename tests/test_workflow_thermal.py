"""The thermal commands' typed requests: values checked once, before any work, in the caller's words;
the library and the CLI give the same answer."""

from __future__ import annotations

import json

import pytest

from optimizer.errors import ConfigError, DnnplanError, UnknownNameError
from optimizer.workflow import (
    ScheduleRequest,
    ShiftRequest,
    TadfRequest,
    ThermalEvalRequest,
    ThermalFitRequest,
    parse_request,
    run_tadf_request,
)

FIT = {"trace": "odroid_xu3_rise", "time": "t_s", "temps": "t_gpu_c", "inputs": "p_*_w"}


@pytest.mark.parametrize("cls,data", [
    (ThermalFitRequest, {**FIT, "hiden": 1}),
    (ThermalEvalRequest, {"model_path": "m.json", "trace": "t.csv", "horizon": "1"}),
    (ScheduleRequest, {"workload": "person_finder", "polcy": "ppt"}),
    (TadfRequest, {"model": "alexnet", "tmax": 80}),
    (ShiftRequest, {"durations": 10}),
])
def test_unknown_key_is_one_line_naming_it(cls, data):
    with pytest.raises(ConfigError) as err:
        parse_request(cls, data)
    bad = (set(data) - set(cls.model_fields)).pop()
    assert f"unknown field {bad!r}" in str(err.value) and len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("cls,data,labels,message", [
    (ThermalFitRequest, {**FIT, "model": "arx"}, {"model": "--model"}, "--model must be linear or rc, got 'arx'"),
    (ThermalFitRequest, {**FIT, "hidden": "two"}, {}, "hidden must be a whole number >= 0 or auto, got 'two'"),
    (ThermalFitRequest, {**FIT, "ridge": -0.5}, {"ridge": "--ridge"}, "--ridge -0.5: expected a penalty >= 0"),
    (ThermalEvalRequest, {"model_path": "m", "trace": "t", "horizons": "1,soon"}, {},
     "horizons: 'soon' is not a step count (e.g. 10) or a duration (e.g. 60s)"),
    (ThermalEvalRequest, {"model_path": "m", "trace": "t", "horizons": "nans"}, {}, "'nans' is not a step count"),
    (ThermalEvalRequest, {"model_path": "m", "trace": "t", "horizons": " , "}, {}, "horizons is empty"),
    (ScheduleRequest, {"workload": "w", "eta": 1.5}, {"eta": "--eta"}, "--eta 1.5: expected SPLASH's eta between 0 and 1"),
    (ScheduleRequest, {"workload": "w", "duration_s": 0}, {}, "duration_s 0.0: expected simulated seconds > 0"),
    (ScheduleRequest, {"workload": "w", "ambient_c": 90}, {}, "ambient_c 90.0: expected a temperature in °C"),
    (ScheduleRequest, {"workload": "w", "fps": 5, "max_fps": True}, {"fps": "--fps", "max_fps": "--max-fps"},
     "give either --fps N or --max-fps, not both"),
    (ScheduleRequest, {"workload": "w", "network": "none", "policy": "heft-cloud"}, {},
     "policy heft-cloud offloads to the cloud; give network LINK"),
    (TadfRequest, {"model": "alexnet", "theta_c": 0}, {"theta_c": "--theta"}, "--theta 0.0: expected a tolerance"),
    (ShiftRequest, {"duration_s": -1}, {"duration_s": "--duration"}, "--duration -1.0: expected simulated seconds > 0"),
])
def test_bad_values_are_one_line_in_the_callers_words(cls, data, labels, message):
    with pytest.raises(DnnplanError) as err:
        parse_request(cls, data, labels=labels)
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_schedule_names_are_checked_and_normalised():
    with pytest.raises(UnknownNameError, match="unknown policy 'random'; valid: heft, heft-cloud, minheat, ppt"):
        parse_request(ScheduleRequest, {"workload": "w", "policy": "random"})
    with pytest.raises(UnknownNameError, match="unknown network 'pigeon'"):
        parse_request(ScheduleRequest, {"workload": "w", "network": "pigeon"})
    assert parse_request(ScheduleRequest, {"workload": "w", "network": "None"}).network is None
    assert parse_request(ThermalFitRequest, {**FIT, "hidden": "2"}).hidden == 2
    assert parse_request(ThermalEvalRequest, {"model_path": "m", "trace": "t", "horizons": "1, 60s"}).horizons == \
        ("1", "60s")


def test_schedule_help_lists_every_policy(run_cli):
    from optimizer.thermal.policies.splash_policies import POLICIES

    help_text = run_cli("schedule", "--help").stdout
    assert all(p in help_text for p in POLICIES)


def test_tadf_request_gives_what_the_command_prints(run_cli):
    clocks, splits = run_tadf_request(parse_request(TadfRequest, {"model": "alexnet", "device": "jetson_nano"}))
    r = run_cli("tadf", "alexnet", "--device", "jetson_nano", "--json")
    assert r.exit_code == 0, r.stderr
    printed = json.loads(r.stdout)
    assert printed["tadf"]["clock_hz"] == clocks.clock_hz and clocks.clock_hz["cpu"] < clocks.max_clock_hz["cpu"]
    assert printed["hswd"]["latency_s"] == pytest.approx(splits.latency_s)
