"""One resolver of shipped data (optimizer.shipped): package data found with importlib.resources,
user folders overlaying it, and every kind of shipped file addressable by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer import shipped
from optimizer.errors import ConfigError, InputFileError, UnknownNameError
from optimizer.hardware import device_names, load_device

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """An empty user folder laid out like search_spaces/, put in $DNNPLAN_SEARCH_SPACES."""
    d = tmp_path / "mine"
    (d / "devices").mkdir(parents=True)
    monkeypatch.setenv(shipped.ENV, str(d))
    return d


def test_shipped_root_is_the_search_spaces_package():
    import search_spaces

    root = shipped.shipped_root()
    assert root == Path(search_spaces.__file__).parent
    assert (root / "devices" / "pixel6.yaml").is_file()


def test_a_user_device_of_the_same_name_wins_and_listing_shows_both(user_dir):
    text = (shipped.shipped_root() / "devices" / "pixel6.yaml").read_text()
    (user_dir / "devices" / "pixel6.yaml").write_text(text.replace("memory: ", "memory: 1 GB  # ", 1))
    (user_dir / "devices" / "myphone.yaml").write_text(text.replace("name: pixel6", "name: myphone"))
    assert load_device("pixel6").memory_bytes == pytest.approx(1e9)
    assert load_device("myphone").name == "myphone"
    names = device_names()
    assert {"myphone", "pixel6", "galaxy_j6"} <= set(names) and names.count("pixel6") == 1
    origin = {(e.name, e.shipped) for e in shipped.entries("devices")}
    assert {("pixel6", False), ("pixel6", True), ("myphone", False)} <= origin
    with pytest.raises(UnknownNameError) as err:
        load_device("pixel99")
    assert "myphone" in str(err.value) and "galaxy_j6" in str(err.value)


def test_without_an_overlay_the_shipped_device_loads(monkeypatch):
    monkeypatch.delenv(shipped.ENV, raising=False)
    assert load_device("pixel6").memory_bytes > 1e9
    with pytest.raises(UnknownNameError, match="myphone|valid"):
        load_device("myphone")


def test_shipped_traces_jobs_and_published_points_resolve_by_name():
    from optimizer.batch import load_job
    from optimizer.hardware.bandwidth import load_trace
    from optimizer.report.fidelity import read_published
    from optimizer.thermal.trace import read_trace

    assert load_job("demo").name == "demo"
    assert load_job("smartsplit").name == "smartsplit"
    t = load_trace("ATT-LTE-driving")
    assert t.source == "search_spaces/bandwidth/mahimahi/ATT-LTE-driving.up" and t.mean_bps > 0
    tr = read_trace("odroid_xu3_rise", "t_s", "t_gpu_c", "p_*_w")
    assert tr.n_rows > 10_000
    assert set(read_published()) >= {"points", "speedups", "pipeline", "band"}
    with pytest.raises(UnknownNameError) as err:
        read_trace("odroid_xu4", "t_s", "t_gpu_c", "p_*_w")
    assert "odroid_xu3_rise" in str(err.value)
    with pytest.raises(InputFileError, match="no such job file"):
        load_job("nope/job.yaml")
    with pytest.raises(UnknownNameError) as err:
        load_job("paper_gird")
    assert "paper_grid" in str(err.value)


def test_search_spaces_flag_overlays_and_a_missing_folder_is_one_line(tmp_path, monkeypatch, run_cli):
    monkeypatch.setenv(shipped.ENV, "")  # restored after the test: the flag writes the variable
    d = tmp_path / "mine"
    (d / "networks").mkdir(parents=True)
    text = (shipped.shipped_root() / "networks" / "wifi_10.yaml").read_text()
    (d / "networks" / "wifi_slow.yaml").write_text(text.replace("name: wifi_10", "name: wifi_slow"))
    res = run_cli("--search-spaces", d, "split", "mobilenet_v2", "--device", "galaxy_j6", "--network", "wifi_nope",
                  "--out", tmp_path / "p.json")
    assert res.exit_code == 2 and "wifi_slow" in res.stderr and "wifi_10" in res.stderr
    assert shipped.user_roots() == [d.resolve()]
    res = run_cli("--search-spaces", tmp_path / "absent", "cost", "mobilenet_v2", "--device", "pixel6")
    assert res.exit_code == 2 and "--search-spaces" in res.stderr and "no such folder" in res.stderr


BAD_DEVICE_JOB = """\
name: bad_names
grid:
  models: [mobilenet_v2]
  devices: [pixel6, pixel99]
  map: {solvers: [ga]}
"""


@pytest.mark.parametrize("text, message", [
    (BAD_DEVICE_JOB, "map mobilenet_v2 on pixel99 ga seed=0: unknown device 'pixel99'"),
    (BAD_DEVICE_JOB.replace("mobilenet_v2]", "mobilenet_v9]").replace(", pixel99", ""),
     "unknown zoo network 'mobilenet_v9'"),
    ("name: bad_names\ntasks:\n  - {kind: split, model: alexnet, device: galaxy_j6, network: wifi_11}\n",
     "unknown network 'wifi_11'"),
    ("name: bad_names\ntasks:\n  - {kind: split, model: alexnet, device: galaxy_j6, network: wifi_10, "
     "server: gpu_srv}\n", "unknown server 'gpu_srv'"),
    ("name: bad_names\ntasks:\n  - {kind: split, model: alexnet, device: galaxy_j6, network: lte, "
     "bandwidth_trace: ATT-LTE-flying}\n", "unknown bandwidth trace 'ATT-LTE-flying'"),
    ("name: bad_names\ntasks:\n  - {kind: map, model: alexnet, device: pixel6, objectives: [speed]}\n",
     "speed"),
])
def test_batch_plan_and_run_resolve_every_name_before_creating_anything(tmp_path, run_cli, text, message):
    job = tmp_path / "job.yaml"
    job.write_text(text)
    res = run_cli("batch", "plan", job)
    assert res.exit_code == 2 and message in res.stderr.replace("\n", " ")
    assert res.stderr.startswith("error: job bad_names: ")
    out = tmp_path / "run"
    res = run_cli("batch", "run", job, "--out", out)
    assert res.exit_code == 2 and message in res.stderr.replace("\n", " ")
    assert not out.exists()


def test_add_user_root_refuses_a_file(tmp_path):
    f = tmp_path / "f.yaml"
    f.write_text("x: 1\n")
    with pytest.raises(ConfigError, match="no such folder"):
        shipped.add_user_root(f)
