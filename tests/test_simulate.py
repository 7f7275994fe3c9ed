"""`dnnplan simulate` and plan → simulator workloads (pipeline and split plans)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optimizer.errors import ConfigError
from optimizer.hardware import load_link
from optimizer.plan.io import read_plan, write_plan
from optimizer.workflow import make_pipeline_plan, make_split_plan
from optimizer.search.split import build_split_costs
from optimizer.workflow.simulate import plan_workload, simulate_plan


@pytest.fixture(scope="module")
def graph(zoo_graph):
    return zoo_graph("mobilenet_v2", "block")


@pytest.fixture(scope="module")
def map_plan(graph):
    """Highest-throughput pipeline of MobileNetV2 on Pixel 4: every stage busy, frame after frame."""
    return make_pipeline_plan(graph, "pixel4", solver="exact", cpu_cores=8).plan


@pytest.fixture(scope="module")
def split_plan(graph):
    return make_split_plan(graph, build_split_costs(graph, "pixel4", "wifi_13"), solver="exact").plan


def test_full_load_pipeline_throttles_within_minutes(map_plan, graph):
    res = simulate_plan(map_plan, graph=graph, duration_s=600, ambient_c=25)  # speed: bench_thermal_sim.py
    # SPLASH (docs/METHODS.md section 5): a fully loaded Pixel 4 crosses the 43 °C skin row after ~1-2 min
    assert 30 <= res.time_to_first_throttle_s <= 300
    assert res.time_to_severe_s is not None and res.time_to_severe_s > res.time_to_first_throttle_s
    assert res.fps[0] == pytest.approx(map_plan.predicted.throughput_fps, rel=1e-9)
    assert res.sustained_fps < 0.95 * res.fps[0]
    assert 43 <= res.peak_skin_c < 55
    used = {st.processor for st in map_plan.stages} | {"cpu"}
    p0 = dict(zip(res.processor_names, res.power_w[0]))
    for name, watts in p0.items():
        assert (watts > 0) == (name in used), (name, watts)
    # the plan's predicted thermal fields are this simulation's
    pred = map_plan.predicted
    assert pred.time_to_throttle_s == res.time_to_first_throttle_s
    assert pred.sustained_fps == pytest.approx(res.sustained_fps)
    assert pred.peak_temp_c == pytest.approx(res.peak_die_c)


def test_switched_off_processor_falls_back_to_cpu(map_plan, graph):
    wl = plan_workload(map_plan, graph=graph)
    accel = sorted({st.processor for st in map_plan.stages} & {"npu", "dsp"})
    assert accel, "the Pixel 4 pipeline should use its NPU or DSP"
    on, off = wl({}), wl({accel[0]: 0.0})
    assert off.power_w[accel[0]] == 0.0
    assert off.power_w["cpu"] > on.power_w["cpu"]
    assert 0 < off.fps < on.fps
    capped = wl({"cpu": 0.5})
    assert capped.fps < on.fps and capped.power_w["cpu"] < on.power_w["cpu"]
    shutdown = wl({"cpu": 0.0})
    assert shutdown.fps == 0.0 and not shutdown.power_w


def test_split_plan_workload(split_plan, graph):
    wl = plan_workload(split_plan, graph=graph)
    pt = wl({})
    extra = split_plan.predicted.extra
    assert pt.fps == pytest.approx(1.0 / split_plan.predicted.latency_s, rel=1e-9)
    # transfers, then the radio's tail (the Pixel 4's measured idle power) until the next upload
    rs = load_link("wifi_13").radio_state("pixel4")
    tail = rs.tail_j(max(1.0 / pt.fps - extra["upload_s"] - extra["download_s"], 0.0))
    assert 0 < tail <= rs.tail_w * rs.tail_s
    assert pt.power_w["modem"] == pytest.approx((extra["upload_j"] + extra["download_j"] + tail) * pt.fps, rel=1e-9)
    head = split_plan.split.head_processor
    assert pt.power_w[head] > 0
    res = simulate_plan(split_plan, graph=graph)
    assert split_plan.predicted.sustained_fps == pytest.approx(res.sustained_fps)
    assert split_plan.predicted.peak_temp_c == pytest.approx(res.peak_die_c)


def test_cli_simulate_map_plan(map_plan, run_cli, tmp_path):
    from optimizer.report import plot_thermal

    plan_path = write_plan(map_plan, tmp_path / "map.json")
    sim, png = tmp_path / "sim.json", tmp_path / "sim.png"
    r = run_cli("simulate", str(plan_path), "--duration", "120", "--ambient", "25", "--json",
                "--out", str(sim), "--plot", str(png))
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["duration_s"] == 120 and s["kind"] == "pipeline" and s["device"] == "pixel4"
    assert 30 <= s["time_to_first_throttle_s"] <= 120
    assert s["initial_fps"] == pytest.approx(map_plan.predicted.throughput_fps)
    assert set(s["fps_over_time"]) == {"1 min", "2 min"}
    series = json.loads(sim.read_text())
    assert len(series["times_s"]) == 120 and len(series["fps"]) == 120
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_thermal(series) is not None  # the report package reads --out files


def test_cli_simulate_split_plan(split_plan, run_cli, tmp_path):
    plan_path = write_plan(split_plan, tmp_path / "split.json")
    r = run_cli("simulate", str(plan_path))
    assert r.exit_code == 0, r.stderr
    assert "sustained fps" in r.stdout and "peak skin" in r.stdout
    assert (read_plan(plan_path).predicted.sustained_fps or 0.0) > 0.0


def test_device_without_thermal_section(tiny_onnx, run_cli, tmp_path):
    from optimizer.graph import load_graph

    g = load_graph(str(tiny_onnx), "op")
    plan = make_pipeline_plan(g, "redmi_note8", solver="exact").plan
    assert plan.predicted.peak_temp_c is None and plan.predicted.time_to_throttle_s is None
    path = write_plan(plan, tmp_path / "p.json")
    with pytest.raises(ConfigError, match="redmi_note8.*no thermal section.*pixel4"):
        simulate_plan(plan)
    # the CLI judges the plan at full clocks and says that temperatures are not modelled
    r = run_cli("simulate", str(path))
    assert r.exit_code == 0, r.stderr
    assert "note: device 'redmi_note8' has no thermal section" in r.stderr and "not modelled" in r.stderr
    r = run_cli("simulate", str(path), "--json", "--out", str(tmp_path / "sim.json"))
    out = json.loads(r.stdout)
    assert out["thermal_modelled"] is False and out["peak_die_c"] is None
    assert out["sustained_fps"] == pytest.approx(plan.predicted.throughput_fps, rel=1e-9)
    assert out["power_w"]["cpu"] > 0 and json.loads((tmp_path / "sim.json").read_text()) == out
    r = run_cli("simulate", str(path), "--plot", str(tmp_path / "t.png"))
    assert r.exit_code == 2 and "no temperatures to draw" in r.stderr and not (tmp_path / "t.png").exists()


def test_board_radio_heats_the_board_and_a_spec_without_modem_keeps_the_plan(graph, tmp_path):
    """On the Pi 4 a split's radio heats the board node (its Wi-Fi sits on the PCB); a
    spec without a 'modem' processor leaves the radio's heat out with a note, keeping the plan."""
    import yaml

    from optimizer.hardware import load_device
    from optimizer.hardware.thermal_spec import load_thermal_spec

    spec = load_thermal_spec("raspberry_pi4")
    assert spec.processors["modem"].heats == {"board": 1.0}
    plan = make_split_plan(graph, build_split_costs(graph, "raspberry_pi4", "wifi_10"), solver="exact").plan
    assert plan.split.layer < plan.model.layers
    assert spec.ambient_c < plan.predicted.peak_temp_c < 150.0  # the board heats, within physical range
    doc = spec.model_dump(by_alias=True, mode="json")
    del doc["processors"]["modem"]
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump(doc))
    dev = load_device("raspberry_pi4").model_dump(by_alias=True, mode="json")
    (tmp_path / "pi.yaml").write_text(yaml.safe_dump({**dev, "thermal": str(tmp_path / "bare.yaml")}))
    board = spec.node_index("board")
    full = simulate_plan(plan, duration_s=300.0)
    bare = simulate_plan(plan, device=load_device(tmp_path / "pi.yaml"), duration_s=300.0)
    assert not full.notes and "not modelled" in bare.notes[0] and "'modem'" in bare.notes[0]
    assert full.temps_c[-1, board] > bare.temps_c[-1, board] + 1.0   # ~1 W of radio on a 0.06 W/K board
    assert bare.sustained_fps == pytest.approx(full.sustained_fps)


def test_cli_simulate_bad_input(map_plan, run_cli, tmp_path):
    path = write_plan(map_plan, tmp_path / "p.json")
    r = run_cli("simulate", str(path), "--duration", "0")
    assert r.exit_code == 2 and "--duration" in r.stderr
    r = run_cli("simulate", str(path), "--plot", str(tmp_path / "x.svg"))
    assert r.exit_code == 2 and ".png" in r.stderr
    assert not (tmp_path / "x.svg").exists()
    r = run_cli("simulate", str(tmp_path / "missing.json"))
    assert r.exit_code == 2 and "missing.json" in r.stderr


def test_workload_power_tracks_utilisation(map_plan, graph):
    """A stage's power is static + (active - static) x busy share of the period."""
    from optimizer.hardware import load_device

    dev = load_device("pixel4")
    wl = plan_workload(map_plan, graph=graph)
    pt = wl({})
    period = 1.0 / pt.fps
    for st in map_plan.stages:
        if st.processor == "cpu":
            continue
        proc = dev.processor(st.processor)
        static, active = proc.power.static_w, proc.power_w()
        util = (pt.power_w[st.processor] - static) / (active - static)
        assert 0 < util <= 1.0 + 1e-9
        assert util * period <= st.predicted_time_s + 1e-12
    assert np.isclose(max(s.predicted_time_s for s in map_plan.stages), period)
