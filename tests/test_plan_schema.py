"""Plan schema v1: validation, shipped JSON Schema, atomic writes, clear errors."""

from __future__ import annotations

import json
import re
import os

import jsonschema
import pytest

from optimizer.errors import InputFileError

from optimizer.errors import SchemaError
from optimizer.plan import (
    ModelRef, Plan, Predicted, SearchInfo, Split, Stage, new_provenance, plan_json_schema,
    read_plan, shipped_schema, write_plan,
)


def _pipeline(**over) -> Plan:
    data = dict(
        kind="pipeline",
        model=ModelRef(name="mobilenet_v2", sha256="ab" * 32, layers=10, granularity="op", dtype="int8"),
        device="pixel6",
        stages=[Stage(processor="cpu", first_layer=0, last_layer=3, threads=4),
                Stage(processor="gpu", first_layer=4, last_layer=9)],
        predicted=Predicted(throughput_fps=120.0, latency_s=0.02),
        search=SearchInfo(solver="ga", seed=1, evaluations=300, space_size=1e4, explored_fraction=0.03),
        provenance=new_provenance({"model": "ab" * 32}),
    )
    data.update(over)
    return Plan(**data)


def test_shipped_schema_is_current():
    assert shipped_schema() == json.loads(json.dumps(plan_json_schema())), (
        "regenerate with: python -c \"from optimizer.plan.io import write_schema; "
        "write_schema('optimizer/plan/schemas/plan-v1.schema.json')\"")


def test_round_trip_and_json_schema_accepts_written_plans(tmp_path):
    plan = _pipeline()
    out = write_plan(plan, tmp_path / "p.json")
    data = json.loads(out.read_text())
    jsonschema.validate(data, shipped_schema())
    assert read_plan(out) == plan
    assert data["schema_version"] == 1
    assert data["predicted"]["peak_temp_c"] is None  # null where not computed


def test_split_plan_valid(tmp_path):
    plan = Plan(
        kind="split", model=ModelRef(name="alexnet", sha256="0" * 64, layers=21, granularity="block"),
        device="galaxy_j6", network="wifi_10",
        split=Split(layer=5, bytes=46656, tensors=[], head_processor="cpu", server="smartsplit_i5"),
        search=SearchInfo(solver="nsga2"), provenance=new_provenance())
    assert read_plan(write_plan(plan, tmp_path / "s.json")).split.layer == 5


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["stages"][1].update(first_layer=5), "first_layer is 5, expected 4"),
    (lambda d: d["stages"][1].update(processor="cpu"), "'cpu' is used by an earlier stage"),
    (lambda d: d["stages"][1].update(last_layer=8), "must end at layer 9"),
    (lambda d: d["model"].pop("sha256"), "field 'model.sha256' is missing (required)"),
    (lambda d: d["predicted"].update(throughput_fps="fast"), "field 'predicted.throughput_fps': Input should be a valid number"),
    (lambda d: d.update(kind="mesh"), "field 'kind': Input should be 'pipeline', 'split' or 'joint'"),
    (lambda d: d.update(colour="red"), "field 'colour' is not allowed here"),
    (lambda d: d.update(schema_version=7), "schema_version: 7 is not supported"),
])
def test_invalid_plans_name_the_field(tmp_path, run_cli, mutate, field):
    data = json.loads(_pipeline().model_dump_json())
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SchemaError, match=re.escape(field)):
        read_plan(path)
    res = run_cli("validate", path)
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert str(path) in res.stderr.replace("\n", "")


def test_malformed_json_names_line(tmp_path, run_cli):
    path = tmp_path / "broken.json"
    path.write_text('{"kind": "pipeline",\n "model": }')
    res = run_cli("validate", path)
    assert res.exit_code == 2
    assert "not valid JSON at line 2" in res.stderr


def test_validate_accepts_good_plan(tmp_path, run_cli):
    path = write_plan(_pipeline(), tmp_path / "ok.json")
    res = run_cli("validate", path)
    assert res.exit_code == 0, res.stderr
    assert "valid" in res.stdout and "pipeline" in res.stdout


def test_atomic_write_leaves_nothing_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "plan.json"

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(InputFileError, match="plan.json: cannot write"):  # the one-line write error
        write_plan(_pipeline(), target)
    assert list(tmp_path.iterdir()) == []
