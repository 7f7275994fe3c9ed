"""Every command on every shipped device, through the real CLI.

For each device file in ``search_spaces/devices`` (the list is read from the folder, so a new
device joins the contract by being added), with the zoo's MobileNetV1, the commands a user runs
after ``profile``:

* ``cost``: every processor of the device has a finite, positive latency for the network;
* ``map`` (default stages: 3, or as many as the device has processors): the plan validates,
  its stages run on distinct processors of the device and cover every layer once, in order;
* ``split`` over ``wifi_10``: the plan validates and its head runs on a processor of the device;
* ``simulate`` of both plans: a device with a thermal section gives temperatures above ambient
  and a positive sustained FPS; a device without one is not an error: the plan is judged at
  full clocks (the FPS the plan predicts) and a note says temperatures are not modelled;
* ``schedule`` (SPLASH's multi-DNN scheduler, whose policies steer by temperature) needs a
  thermal section: it runs on the devices that have one and refuses the others in one line,
  exit 2, naming the device.

Searches are short (few generations) and the simulations two minutes long: the contract is
that every command completes with values that make sense, not that the search converges.
"""
from __future__ import annotations

import json
import math

import pytest

from optimizer.hardware import load_device
from optimizer.hardware.loader import device_names
from optimizer.plan.io import read_plan

MODEL = "mobilenet_v1"
GA = ("--generations", "8", "--population", "16", "--seed", "0")
SIM = ("--duration", "120", "--json")


def _ok(res):
    assert res.exit_code == 0, res.stderr
    return res


def _check_simulation(res, plan, device) -> None:
    out = json.loads(_ok(res).stdout)
    assert out["device"] == device.name
    if device.thermal is None:
        assert out["thermal_modelled"] is False and out["peak_die_c"] is None
        assert "not modelled" in out["notes"][0] and device.name in out["notes"][0]
        assert out["sustained_fps"] > 0 and out["power_w"]
        if plan.kind == "pipeline":   # the plan at full clocks is the plan as predicted
            assert out["sustained_fps"] == pytest.approx(plan.predicted.throughput_fps, rel=1e-6)
        return
    assert out["peak_die_c"] > out["ambient_c"] and out["peak_skin_c"] >= out["ambient_c"]
    assert 0 < out["sustained_fps"] <= out["initial_fps"] * (1 + 1e-9)
    assert out["duration_s"] == pytest.approx(120.0)


def test_profile_of_the_contract_model(run_cli):
    out = json.loads(_ok(run_cli("profile", MODEL, "--json")).stdout)
    assert out["total_macs"] == pytest.approx(569e6, rel=0.02)   # MobileNetV1 1.0-224: 569 M MACs (Howard et al. 2017)
    assert out["inputs"][0]["shape"] == [224, 224, 3]


@pytest.mark.parametrize("name", device_names())
def test_every_command_on(name, run_cli, tmp_path):
    device = load_device(name)
    procs = device.processor_names

    cost = json.loads(_ok(run_cli("cost", MODEL, "--device", name, "--granularity", "kernel", "--json")).stdout)
    assert cost["processors"] == list(procs)
    for p in procs:
        t = cost["totals"]["latency_s"][p]
        assert math.isfinite(t) and t > 0, (p, t)
    layers = len(cost["layers"])  # kernels: map's default view

    mapped = tmp_path / "map.json"
    _ok(run_cli("--quiet", "map", MODEL, "--device", name, "--out", mapped, *GA))
    _ok(run_cli("validate", mapped))
    plan = read_plan(mapped)
    used = [st.processor for st in plan.stages]
    assert set(used) <= set(procs) and len(set(used)) == len(used)
    assert 1 <= len(used) <= min(3, len(procs))
    assert plan.search.settings["problem"]["stages"] == min(3, len(procs))
    bounds = [(st.first_layer, st.last_layer) for st in plan.stages]
    assert bounds[0][0] == 0 and bounds[-1][1] == plan.model.layers - 1 == layers - 1
    assert all(b[0] == a[1] + 1 for a, b in zip(bounds, bounds[1:]))
    assert plan.predicted.throughput_fps > 0
    assert (plan.predicted.peak_temp_c is not None) == (device.thermal is not None)
    _check_simulation(run_cli("simulate", mapped, *SIM), plan, device)

    split = tmp_path / "split.json"
    _ok(run_cli("--quiet", "split", MODEL, "--device", name, "--network", "wifi_10", "--out", split, *GA))
    _ok(run_cli("validate", split))
    sp = read_plan(split)
    assert sp.kind == "split" and sp.device == name and sp.network == "wifi_10"
    assert 0 <= sp.split.layer <= sp.model.layers
    assert sp.split.layer == 0 or sp.split.head_processor in procs
    assert sp.predicted.latency_s > 0
    assert (sp.predicted.peak_temp_c is not None) == (device.thermal is not None)
    _check_simulation(run_cli("simulate", split, *SIM), sp, device)

    res = run_cli("schedule", "person_finder", "--device", name, "--duration", "30", "--json")
    if device.thermal is None:
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
        assert f"device {name!r} has no thermal section" in res.stderr
        return
    out = json.loads(_ok(res).stdout)
    assert out["device"] == name and out["duration_s"] == pytest.approx(30.0)
    assert set(out["share"]) <= {*procs, "cloud"} and sum(out["share"].values()) == pytest.approx(1.0)
    assert 0 <= out["slo_rate"] <= 1 and out["mean_latency_ms"] > 0


@pytest.mark.slow
def test_run_check_after_a_plain_export_of_a_zoo_plan(run_cli, tmp_path):
    """``export`` keeps the single-file reference unless told not to, so ``run --check`` works
    after a plain export of an INT8 zoo plan."""
    plan = tmp_path / "plan.json"
    # full width: at alpha=0.25 the GA's cut between a batch norm and its ReLU (conv_dw_7_bn) leaves
    # random-weight logits so close that INT8 parts agree on 65 % of top-1 (SQNR 17.6 dB)
    _ok(run_cli("--quiet", "map", MODEL, "--device", "host_cores", "--variant", "input_size=96",
                "--out", plan, *GA))
    art = tmp_path / "art"
    _ok(run_cli("--quiet", "export", plan, "--out", art))
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["reference"]["file"] == "reference.int8.tflite" and (art / "reference.int8.tflite").is_file()
    out = json.loads(_ok(run_cli("run", plan, "--artifacts", art, "--check", "--frames", "20", "--no-pin",
                                 "--json")).stdout)
    assert out["check"]["passed"] and out["check"]["agreement"] >= 0.99
