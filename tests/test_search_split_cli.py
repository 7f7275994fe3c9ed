"""``dnnplan split``: plan + front on real device/link/server files, the job runner, bad input."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest


def _split(run_cli, model, tmp_path, *extra):
    return run_cli("split", model, "--device", "galaxy_j6", "--network", "wifi_10", "--granularity", "op",
                   "--out", tmp_path / "plan.json", "--front", tmp_path / "front.csv", *extra)


def test_split_writes_plan_and_front(run_cli, tiny_onnx, tmp_path):
    from optimizer.graph import load_graph
    from optimizer.plan import read_plan

    res = _split(run_cli, tiny_onnx, tmp_path, "--solver", "exact", "--extremes")
    assert res.exit_code == 0, res.stderr
    for label in ("exact", "LBO", "EBO", "COS", "COC", "RS"):
        assert label in res.stdout
    plan = read_plan(tmp_path / "plan.json")
    g = load_graph(tiny_onnx, "op")
    assert plan.kind == "split" and plan.device == "galaxy_j6" and plan.network == "wifi_10"
    assert plan.split.server == "smartsplit_i5" and plan.model.layers == len(g) == 7
    layer = plan.split.layer
    if 0 < layer < len(g):
        assert [t.name for t in plan.split.tensors] == [t.name for t in g.cut_tensors(layer)]
        assert plan.split.bytes == g.cut_bytes(layer, plan.split.wire_dtype)
    rows = list(csv.DictReader((tmp_path / "front.csv").open()))
    assert {"latency_s", "energy_j", "memory_bytes", "split", "processor", "clock_hz", "wire_dtype"} <= set(rows[0])
    assert sum(int(r["chosen"]) for r in rows) == 1
    F = np.array([[float(r["latency_s"]), float(r["energy_j"]), float(r["memory_bytes"])] for r in rows])
    dominated = ((F[None] <= F[:, None]).all(-1) & (F[None] < F[:, None]).any(-1)).any(1)
    assert not dominated.any()
    chosen = next(r for r in rows if r["chosen"] == "1")
    assert int(chosen["split"]) == layer
    assert float(chosen["latency_s"]) == pytest.approx(plan.predicted.latency_s)
    assert plan.search.evaluations == plan.search.space_size


def test_same_seed_same_plan(run_cli, tiny_onnx, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for d in (a, b):
        assert _split(run_cli, tiny_onnx, d, "--seed", "3", "--population", "12", "--generations", "8").exit_code == 0
    pa, pb = (json.loads((d / "plan.json").read_text()) for d in (a, b))
    for p in (pa, pb):
        p["provenance"].pop("created_at"), p["search"].pop("wall_time_s")
    assert pa == pb and pa["search"]["solver"] == "nsga2"
    assert (a / "front.csv").read_text() == (b / "front.csv").read_text()


@pytest.mark.parametrize("extra, message", [
    # --interior-only: boundary 0 (nothing on the phone) fits any limit
    (["--memory-limit", "1 kB", "--interior-only"],
     "memory limit 0.001 MB is below every split of 'tiny'; the smallest reachable"),
    (["--bandwidth", "0 Mbps"], "--bandwidth '0 Mbps': expected a value > 0"),
    (["--bandwidth", "-5 Mbps"], "--bandwidth '-5 Mbps': expected a value > 0"),
    (["--weights", "1,1"], "--weights: weights 1,1 has 2 value(s); expected 3"),
    (["--weights", "1,-1,1"], "--weights: weight -1 is not valid"),
    (["--server", "mainframe"], "unknown server 'mainframe'; valid: gpu_server, smartsplit_i5"),
    (["--solver", "magic"], "unknown solver 'magic'"),
    (["--runtime", "tensorrt"], "unknown runtime 'tensorrt'"),
])
def test_bad_input_one_line_exit_2_nothing_written(run_cli, tiny_onnx, tmp_path, extra, message):
    res = _split(run_cli, tiny_onnx, tmp_path, *extra)
    assert res.exit_code == 2
    assert message in res.stderr.replace("\n", "")
    assert "Traceback" not in res.stderr
    assert not list(tmp_path.iterdir())


def test_unknown_network_and_bad_link_file(run_cli, tiny_onnx, tmp_path):
    res = run_cli("split", tiny_onnx, "--device", "galaxy_j6", "--network", "wifi_99", "--out", tmp_path / "p.json")
    assert res.exit_code == 2 and "unknown network 'wifi_99'; valid: lte, wifi_10" in res.stderr
    from optimizer.hardware import search_spaces_dir

    text = (search_spaces_dir() / "networks" / "wifi_10.yaml").read_text().replace("uplink: 10 Mbps", "uplink: 0 Mbps")
    bad = tmp_path / "zero.yaml"
    bad.write_text(text)
    res = run_cli("split", tiny_onnx, "--device", "galaxy_j6", "--network", bad, "--out", tmp_path / "p.json")
    assert res.exit_code == 2 and "uplink" in res.stderr and "greater than 0" in res.stderr
    assert not (tmp_path / "p.json").exists()


def test_job_runner(run_cli, tiny_onnx, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(f"name: t\nmodels: ['{tiny_onnx}']\ndevices: [galaxy_j6, redmi_note8]\nnetwork: wifi_10\n"
                   "server: smartsplit_i5\ngranularity: op\nsolver: exact\nseeds: [0]\n")
    res = run_cli("split", "--job", job)
    assert res.exit_code == 0, res.stderr
    assert "galaxy_j6" in res.stdout and "redmi_note8" in res.stdout and "COC" in res.stdout
    job.write_text(job.read_text() + "colour: red\n")
    res = run_cli("split", "--job", job)
    assert res.exit_code == 2 and "colour" in res.stderr


def test_smartsplit_job_file_is_valid():
    from optimizer.hardware import search_spaces_dir
    from optimizer.search.split_job import SplitJob
    from optimizer.yamlio import load_model_yaml

    job = load_model_yaml(search_spaces_dir() / "jobs" / "smartsplit.yaml", SplitJob)
    assert job.models == ["alexnet", "vgg11", "vgg13", "vgg16", "mobilenet_v2"]
    assert job.devices == ["galaxy_j6", "redmi_note8"] and job.network == "wifi_10"
    assert job.granularity == "block"
