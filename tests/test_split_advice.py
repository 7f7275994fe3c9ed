"""Decision support for split plans: baselines dominating the TOPSIS choice, memory as a budget."""

from __future__ import annotations

import json

import pytest


def _split(run_cli, model, tmp_path, *extra, name="plan.json"):
    return run_cli("split", model, "--device", "galaxy_j6", "--network", "lte", "--granularity", "op",
                   "--solver", "exact", "--out", tmp_path / name, *extra)


def test_dominating_baseline_is_said_in_table_json_and_report(run_cli, tiny_onnx, tmp_path):
    # --interior-only: COS is a candidate by default, so only SmartSplit's space can lose to it
    res = _split(run_cli, tiny_onnx, tmp_path, "--bandwidth", "0.1Mbps", "--weights", "1,1,0", "--interior-only")
    assert res.exit_code == 0, res.stderr
    out = res.stdout.replace("\n", " ")
    assert "warning: COS dominates the chosen split in latency_s, energy_j" in out
    plan = json.loads((tmp_path / "plan.json").read_text())
    dom = plan["search"]["decision"]["dominated_by"]
    cos = next(d for d in dom if d["baseline"] == "cos")
    assert cos["objectives"] == ["latency_s", "energy_j"] and "except" not in cos
    for k in cos["objectives"]:
        assert cos["baseline_values"][k] < cos["chosen"][k]
    assert cos["chosen"]["latency_s"] == pytest.approx(plan["predicted"]["latency_s"])
    assert plan["search"]["decision"]["weights"] == [1.0, 1.0, 0.0]
    rep = run_cli("report", tmp_path / "plan.json", "--out", tmp_path / "rep")
    assert rep.exit_code == 0, rep.stderr
    assert "COS dominates the chosen split" in (tmp_path / "rep" / "report.md").read_text()


def test_memory_only_advantage_is_flagged_against_the_phone_memory(run_cli, tiny_onnx, tmp_path):
    # --interior-only: COS is a candidate by default, so only SmartSplit's space can lose to it
    res = _split(run_cli, tiny_onnx, tmp_path, "--bandwidth", "0.1Mbps", "--interior-only")
    assert res.exit_code == 0, res.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    cos = next(d for d in plan["search"]["decision"]["dominated_by"] if d["baseline"] == "cos")
    assert cos["except"] == "memory_bytes" and 0 < cos["extra_memory_fraction_of_phone"] < 0.01
    assert "COS beats the chosen split in every weighted objective but memory" in res.stdout.replace("\n", " ")


def test_no_warning_when_the_choice_is_not_dominated(run_cli, tiny_onnx, tmp_path):
    res = _split(run_cli, tiny_onnx, tmp_path, "--bandwidth", "20Mbps")
    assert res.exit_code == 0, res.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["search"]["decision"]["dominated_by"] == [] and "warning:" not in res.stdout


def test_memory_budget_is_a_constraint_not_an_objective(run_cli, tiny_onnx, tmp_path):
    res = _split(run_cli, tiny_onnx, tmp_path, "--bandwidth", "0.1Mbps", "--memory-budget", "512MB", "--extremes")
    assert res.exit_code == 0, res.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["search"]["decision"]["weights"] == [1.0, 1.0, 0.0]
    assert plan["search"]["settings"]["memory_limit_bytes"] == 512e6
    assert plan["split"]["layer"] == plan["model"]["layers"]  # all on the phone: fastest and least energy
    assert plan["search"]["decision"]["dominated_by"] == []
    assert "--memory-budget 512MB" in plan["provenance"]["command"]


@pytest.mark.parametrize("extra, message", [
    (["--memory-budget", "512MB", "--memory-limit", "1GB"], "--memory-budget and --memory-limit both given"),
    (["--memory-budget", "0MB"], "--memory-budget '0MB': expected a value > 0"),
    # --interior-only: boundary 0 (nothing on the phone) fits any budget
    (["--memory-budget", "1 kB", "--interior-only"], "memory limit 0.001 MB is below every split"),
])
def test_memory_budget_errors(run_cli, tiny_onnx, tmp_path, extra, message):
    res = _split(run_cli, tiny_onnx, tmp_path, *extra)
    assert res.exit_code == 2 and message in res.stderr.replace("\n", ""), res.stderr
    assert not (tmp_path / "plan.json").exists()
