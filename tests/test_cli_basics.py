"""CLI contract: fast --help without TensorFlow, one-line errors with exit 2, --debug traces."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from optimizer.errors import UnknownNameError

NO_TF = (
    "import sys\n"
    "{body}\n"
    "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'onnx', 'tf2onnx'))\n"
    "print('HEAVY=' + ','.join(bad))\n"
)


@pytest.mark.parametrize("body", [
    "import optimizer.graph, optimizer.search, optimizer.plan, optimizer.cost",
    "from optimizer.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
])
def test_light_imports_do_not_load_tensorflow(body):
    out = subprocess.run([sys.executable, "-c", NO_TF.format(body=body)], capture_output=True,
                         text=True, check=True).stdout.strip().splitlines()
    assert out[-1] == "HEAVY=", f"heavy modules imported: {out[-1]}"


def test_unknown_zoo_name_lists_valid_names(run_cli):
    res = run_cli("profile", "mobilenet_v9")
    assert res.exit_code == 2
    assert "unknown zoo network 'mobilenet_v9'" in res.stderr
    assert "mobilenet_v2" in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_model_file(run_cli, tmp_path):
    res = run_cli("profile", tmp_path / "absent.onnx")
    assert res.exit_code == 2
    assert "absent.onnx: no such file" in res.stderr


def test_unknown_format(run_cli, tmp_path):
    p = tmp_path / "model.pt"
    p.write_bytes(b"\x80\x02")
    res = run_cli("profile", p)
    assert res.exit_code == 2 and "unknown model format '.pt'" in res.stderr


def test_bad_option_values(run_cli):
    assert run_cli("profile", "mobilenet_v2", "--granularity", "layer").exit_code == 2
    res = run_cli("profile", "mobilenet_v2", "--dtype", "int4")
    assert res.exit_code == 2 and "unknown dtype 'int4'" in res.stderr


def test_debug_shows_the_traceback(run_cli):
    with pytest.raises(UnknownNameError):
        run_cli("--debug", "profile", "nope_net")


@pytest.mark.slow
def test_profile_json_contract(run_cli):
    res = run_cli("profile", "mobilenet_v2", "--granularity", "block", "--json")
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert set(data) >= {"model", "granularity", "layers", "total_macs", "total_params"}
    assert data["granularity"] == "block" and len(data["layers"]) == 21
    assert abs(data["total_macs"] / 300e6 - 1) < 0.02
    assert sum(la["macs"] for la in data["layers"]) == data["total_macs"]
    first = data["layers"][0]
    assert {"name", "op", "output_shapes", "macs", "params", "output_bytes", "cut_bytes_after"} <= set(first)


@pytest.mark.slow
def test_profile_table(run_cli):
    res = run_cli("profile", "mobilenet_v2", "--dtype", "int8")
    assert res.exit_code == 0, res.stderr
    assert "total" in res.stdout and "MACs" in res.stdout and "int8" in res.stdout


# -- output paths: missing folders are created; impossible paths fail first ----

@pytest.mark.parametrize("argv", [
    ["profile", "{model}", "--out", "{out}"],
    ["split", "{model}", "--device", "galaxy_j6", "--network", "wifi_10", "--out", "{out}"],
    ["split", "{model}", "--device", "galaxy_j6", "--network", "wifi_10", "--front", "{out}"],
    ["map", "{model}", "--device", "pixel6", "--solver", "exact", "--out", "{out}"],
    ["quantize", "{model}", "--out", "{out}"],
    ["report", "{model}", "--out", "{out}"],
])
def test_output_under_a_file_fails_before_any_work(run_cli, tmp_path, tiny_onnx, argv):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    out = blocker / "sub" / "result.json"
    res = run_cli(*[a.format(model=tiny_onnx, out=out) for a in argv])
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and str(blocker) in line and "is a file, not a folder" in line
    assert "Traceback" not in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_folder"]


def test_output_folders_are_created(run_cli, tmp_path, tiny_onnx):
    plan = tmp_path / "a" / "b" / "plan.json"
    front = tmp_path / "c" / "front.csv"
    res = run_cli("--quiet", "split", tiny_onnx, "--device", "galaxy_j6", "--network", "wifi_10",
                  "--out", plan, "--front", front)
    assert res.exit_code == 0, res.stderr
    assert json.loads(plan.read_text())["kind"] == "split"
    assert front.read_text().count("\n") >= 2


def test_output_file_that_is_a_folder_is_refused(run_cli, tmp_path, tiny_onnx):
    res = run_cli("profile", tiny_onnx, "--out", tmp_path)
    assert res.exit_code == 2 and "it is a folder" in res.stderr


def test_library_writer_names_the_blocking_file(tmp_path):
    from optimizer.errors import InputFileError
    from optimizer.fileio import atomic_write_text

    (tmp_path / "f").write_text("x")
    with pytest.raises(InputFileError, match="is a file, not a folder"):
        atomic_write_text(tmp_path / "f" / "g" / "out.txt", "data")


def test_split_table_shows_the_download_and_warns_when_raw_outputs_dominate(run_cli, tmp_path):
    # SSD FPNLite at 640: 51,150 anchors x (4 + 91) float32 = 19.44 MB back per frame over LTE
    res = run_cli("split", "ssd_mobilenet_v2_fpnlite", "--device", "galaxy_s22", "--network", "lte",
                  "--result", "raw", "--out", tmp_path / "raw.json")
    assert res.exit_code == 0, res.stderr
    text = " ".join((res.stdout + res.stderr).split())
    assert "down ms" in text
    assert "latency is downloading the network's raw outputs (19.44 MB per frame" in text
    assert "split" in json.loads((tmp_path / "raw.json").read_text()) and \
        json.loads((tmp_path / "raw.json").read_text())["split"]["result"] is None
    # default (auto): the server sends the 100 best anchors, 2800 B, and the split gets 25x faster
    res = run_cli("split", "ssd_mobilenet_v2_fpnlite", "--device", "galaxy_s22", "--network", "lte",
                  "--out", tmp_path / "topk.json")
    text = " ".join((res.stdout + res.stderr).split())
    assert res.exit_code == 0 and "raw outputs" not in text
    raw, topk = (json.loads((tmp_path / f).read_text()) for f in ("raw.json", "topk.json"))
    assert topk["split"]["result"] == "topk" and topk["search"]["settings"]["download_bytes"] == 2800
    assert topk["predicted"]["latency_s"] < raw["predicted"]["latency_s"] / 10
    res = run_cli("split", "mobilenet_v2", "--device", "galaxy_j6", "--network", "wifi_10",
                  "--out", tmp_path / "mnv2.json")
    text = " ".join((res.stdout + res.stderr).split())
    assert res.exit_code == 0 and "down ms" in text and "raw outputs" not in text
    assert json.loads((tmp_path / "mnv2.json").read_text())["split"]["result"] is None
    res = run_cli("split", "mobilenet_v2", "--device", "galaxy_j6", "--network", "wifi_10", "--result", "topk",
                  "--out", tmp_path / "bad.json")
    assert res.exit_code == 2 and "has no SSD head" in res.stderr and not (tmp_path / "bad.json").exists()
