"""Names that become paths stay inside the folder they belong to, and a failed command deletes only
what it created itself: job names, run folders, manifest part and reference files, cache keys."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from optimizer.errors import ConfigError, SchemaError

JOB = "name: {name}\ngrid:\n  models: [{model}]\n  devices: [pixel6]\n  seeds: [0]\n  map: {{solvers: [exact]}}\n"


# ---------------------------------------------------------------------------------------- helper
@pytest.mark.parametrize("name, problem", [
    ("..", "or '..' component"), (".", "or '..' component"), ("a/../../b", "or '..' component"), ("", "is empty"),
    ("/etc/passwd", "absolute path"), ("C:\\x", "absolute path"), ("a\x00b", "NUL"),
])
def test_inside_refuses_names_that_leave_their_folder(tmp_path, name, problem):
    from optimizer.confine import inside

    with pytest.raises(ConfigError, match=r"^parts\[0\]\.file .*" + re.escape(problem)):
        inside(tmp_path, name, "parts[0].file")


def test_inside_follows_symlinks_and_accepts_plain_names(tmp_path):
    from optimizer.confine import inside

    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "root" / "out").symlink_to(tmp_path / "outside")
    (tmp_path / "root" / "in").symlink_to(tmp_path / "root" / "sub")
    assert inside(tmp_path / "root", "sub/a.onnx", "f") == tmp_path / "root" / "sub" / "a.onnx"
    assert inside(tmp_path / "root", "in/a.onnx", "f") == tmp_path / "root" / "in" / "a.onnx"
    with pytest.raises(SchemaError, match="leads outside .* symbolic link"):
        inside(tmp_path / "root", "out/a.onnx", "f", error=SchemaError)
    with pytest.raises(ConfigError, match="folder separator"):
        inside(tmp_path / "root", "sub/a", "key", single=True)


# ------------------------------------------------------------------------------------ batch runs
def test_job_named_dotdot_is_refused_naming_the_field(tmp_path, tiny_onnx, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.txt").write_text("precious\n")
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(name="'..'", model=tiny_onnx))
    r = run_cli("batch", "run", job)
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "field 'name'" in r.stderr and "'..'" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml", "keep.txt"]


def _failing_pool(monkeypatch):
    """Every run fails before a task finishes, as when a worker is killed."""
    from optimizer.batch import runner

    def broken(*args, **kwargs):
        raise RuntimeError("a worker process was killed")

    monkeypatch.setattr(runner, "_run_pool", broken)


def test_a_failed_run_never_deletes_a_folder_that_existed(tmp_path, tiny_onnx, run_cli, monkeypatch):
    """``--out missing/..`` named the current folder: the clean-up of a failed first run deleted it."""
    _failing_pool(monkeypatch)
    monkeypatch.chdir(tmp_path)
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(name="j", model=tiny_onnx))
    (tmp_path / "keep.txt").write_text("precious\n")
    try:
        r = run_cli("batch", "run", job, "--out", "missing/..")
        assert r.exit_code == 2 and "not a batch run folder (it holds 'job.yaml'" in r.stderr, r.stderr
    except RuntimeError:  # the run failed (after writing into the folder)
        pass
    assert (tmp_path / "keep.txt").read_text() == "precious\n" and job.is_file()
    assert not (tmp_path / "missing").exists() and not (tmp_path / "tasks").exists()


def test_a_failed_first_run_removes_only_the_folder_it_made(tmp_path, tiny_onnx, run_cli, monkeypatch):
    _failing_pool(monkeypatch)
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(name="j", model=tiny_onnx))
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (tmp_path / "new" / "run", empty):
        with pytest.raises(RuntimeError):
            run_cli("batch", "run", job, "--out", out)
    assert not (tmp_path / "new").exists()  # made by the run: removed, its parent too
    assert empty.is_dir()  # existed before the run: kept (what the run wrote in it stays to resume)


def test_run_folder_holding_other_files_is_refused(tmp_path, tiny_onnx, run_cli):
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(name="j", model=tiny_onnx))
    r = run_cli("batch", "run", job, "--out", tmp_path)
    assert r.exit_code == 2 and "not a batch run folder (it holds 'job.yaml'" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]


# ------------------------------------------------------------------------------------ manifests
@pytest.fixture(scope="module")
def pipeline_export(tmp_path_factory, tiny_onnx):
    """A two-stage pipeline export of the tiny ONNX network (ONNX parts, no TensorFlow)."""
    from _safety import export_tiny_pipeline

    return export_tiny_pipeline(tmp_path_factory.mktemp("paths"), tiny_onnx)


def _tampered(tmp_path, pipeline_export, file: str, link_to=None):
    plan, art = pipeline_export
    copy = tmp_path / "art"
    shutil.copytree(art, copy)
    doc = json.loads((copy / "manifest.json").read_text())
    if link_to is not None:
        os.symlink(link_to, copy / file)
    doc["parts"][0]["file"] = file
    (copy / "manifest.json").write_text(json.dumps(doc))
    return plan, copy


@pytest.mark.parametrize("file, message", [
    ("../secret.onnx", "parts[0].file '../secret.onnx' has a '.' or '..' component"),
    ("/etc/passwd", "parts[0].file '/etc/passwd' is an absolute path"),
    ("link.onnx", "parts[0].file 'link.onnx' leads outside"),
])
def test_manifest_files_outside_the_artifacts_folder_are_refused(tmp_path, pipeline_export, run_cli, file, message):
    """Before: a part file '../x.onnx' or an absolute path was opened (hashed, then loaded) by
    ``run`` and ``serve``."""
    outside = tmp_path / "secret.onnx"
    outside.write_bytes(b"not to be read")
    plan, art = _tampered(tmp_path, pipeline_export, file, link_to=outside if file == "link.onnx" else None)
    r = run_cli("run", plan, "--artifacts", art, "--frames", "1")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert message in r.stderr and "manifest.json" in r.stderr, r.stderr


def test_cache_keys_stay_in_their_folder(tmp_path):
    from optimizer.confine import inside
    from optimizer.runtime.host_evaluator import _verified_stage

    inside(tmp_path, "0123abcd.tflite", "stage cache key", single=True)
    with pytest.raises(ConfigError, match="artifact cache key"):
        inside(tmp_path, "../model-0123.onnx", "artifact cache key", single=True)
    assert _verified_stage(tmp_path / "missing.tflite", tmp_path / "missing.json") is None
