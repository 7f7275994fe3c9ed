"""Plans name only real processors of their device, and say when the device changed:
``validate``, ``export`` and ``run`` refuse a stage on a processor the device lacks, before
anything is written, and warn when the device's identity differs from the one recorded."""

from __future__ import annotations

import json

import pytest

from optimizer import shipped
from optimizer.errors import ConfigError
from optimizer.hardware import load_device
from optimizer.plan.device_check import DEVICE_INPUT, check_processors, device_sha256


@pytest.fixture(scope="module")
def plan_json(tmp_path_factory) -> dict:
    """A real pipeline plan of alexnet on pixel6 (block view, exact solver)."""
    from optimizer.cli import main

    out = tmp_path_factory.mktemp("plan") / "plan.json"
    assert main(["--quiet", "map", "alexnet", "--device", "pixel6", "--granularity", "block", "--solver", "exact",
                 "--out", str(out)]) == 0
    return json.loads(out.read_text())


def _write(tmp_path, plan: dict, name: str = "plan.json"):
    p = tmp_path / name
    p.write_text(json.dumps(plan))
    return p


def test_the_plan_records_its_device_identity(plan_json):
    assert plan_json["provenance"]["inputs"][DEVICE_INPUT] == device_sha256(load_device("pixel6"))
    assert plan_json["provenance"]["inputs"]["model"]


def test_a_stage_on_a_processor_the_device_lacks_is_refused_before_anything_is_written(plan_json, tmp_path,
                                                                                        run_cli):
    bad = json.loads(json.dumps(plan_json))
    bad["stages"][-1]["processor"] = "quantum"
    path = _write(tmp_path, bad)
    k = len(bad["stages"]) - 1
    expected = f"stages[{k}].processor 'quantum' is not a processor of device 'pixel6' (cpu, gpu, tpu)"
    res = run_cli("validate", path)
    assert res.exit_code == 2 and expected in res.stderr.replace("\n", "")
    out = tmp_path / "artifacts"
    res = run_cli("export", path, "--out", out)
    assert res.exit_code == 2 and expected in res.stderr.replace("\n", "") and not out.exists()
    res = run_cli("run", path, "--artifacts", tmp_path, "--frames", "1")
    assert res.exit_code == 2 and expected in res.stderr.replace("\n", "")
    assert run_cli("validate", _write(tmp_path, plan_json, "good.json")).exit_code == 0


def test_a_changed_device_warns_and_an_unknown_one_is_not_checked(plan_json, tmp_path, monkeypatch, run_cli):
    good = _write(tmp_path, plan_json)
    res = run_cli("validate", good)
    assert res.exit_code == 0 and "warning" not in res.stderr
    user = tmp_path / "mine"
    (user / "devices").mkdir(parents=True)
    text = (shipped.shipped_root() / "devices" / "pixel6.yaml").read_text()
    (user / "devices" / "pixel6.yaml").write_text(text.replace("memory: ", "memory: 4 GB  # ", 1))
    monkeypatch.setenv(shipped.ENV, str(user))
    res = run_cli("validate", good)
    assert res.exit_code == 0
    assert "device 'pixel6' changed since the plan was made" in res.stderr.replace("\n", " ")
    other = json.loads(json.dumps(plan_json))
    other["device"] = "pixel99"
    res = run_cli("validate", _write(tmp_path, other, "other.json"))
    assert res.exit_code == 0 and "processors not checked: unknown device 'pixel99'" in res.stderr.replace("\n", " ")


def test_old_plans_without_a_device_identity_are_still_read(plan_json, tmp_path, run_cli):
    old = json.loads(json.dumps(plan_json))
    del old["provenance"]["inputs"][DEVICE_INPUT]
    res = run_cli("validate", _write(tmp_path, old))
    assert res.exit_code == 0 and "warning" not in res.stderr


def test_split_head_processor_is_checked():
    with pytest.raises(ConfigError, match="split.head_processor 'npu' is not a processor of device 'galaxy_j6'"):
        check_processors("galaxy_j6", [("split.head_processor", "npu")], "plan.json")
    check_processors("galaxy_j6", [("split.head_processor", "cpu")], "plan.json")


def test_a_core_of_a_cpu_processor_is_a_processor():
    """plan_for_boundaries's host plans run stages on cpu0, cpu1, ... (cores of host's 'cpu')."""
    check_processors("host", [("stages[0].processor", "cpu0"), ("stages[2].processor", "cpu2")], "plan.json")
    with pytest.raises(ConfigError, match="'gpu0' is not a processor of device 'host'"):
        check_processors("host", [("stages[0].processor", "gpu0")], "plan.json")
