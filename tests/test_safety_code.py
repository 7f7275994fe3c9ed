"""No code from data: checkpoints and learned models are data formats with a version and a content
hash; a crafted pickle is refused without being loaded, and nothing in the package unpickles (or
evaluates) a file a user can name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from _safety import write_pickle_bomb

import optimizer
from optimizer.errors import InputFileError

PACKAGE = Path(optimizer.__file__).resolve().parent  # the package the tests import
#: loaders that execute what the file says (pickle, joblib, PyYAML's full loaders, Keras without
#: its safe mode, eval/exec)
UNSAFE = re.compile(r"\b(pickle|cPickle|joblib|dill|cloudpickle|marshal|shelve)\.(load|loads|open|Unpickler)\b"
                    r"|allow_pickle\s*=\s*True|\byaml\.(load|full_load|unsafe_load)\(|\bUnsafeLoader\b|\bFullLoader\b"
                    r"|safe_mode\s*=\s*False|\btorch\.load\(|(?<![\w.])(eval|exec)\(")


def test_no_loader_in_the_package_runs_code_from_a_file():
    found = [f"{p.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
             for p in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if UNSAFE.search(line)]
    assert not found, "\n".join(found)


def test_a_crafted_checkpoint_is_refused_without_running_it(tmp_path, tiny_onnx, run_cli):
    """Before: ``map --checkpoint F --resume`` unpickled F, which ran a shell command."""
    marker = tmp_path / "ran"
    ckpt = write_pickle_bomb(tmp_path / "c.ckpt", marker)
    r = run_cli("map", tiny_onnx, "--device", "pixel6", "--checkpoint", ckpt, "--resume", "--out", tmp_path / "p.json")
    assert not marker.exists()
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "not a version-2 dnnplan GA checkpoint" in r.stderr and "re-run without --resume" in r.stderr
    assert not (tmp_path / "p.json").exists()


def test_an_altered_checkpoint_is_refused_and_a_good_one_resumes(tmp_path):
    from test_search_pipeline import synthetic_table

    from optimizer.search import solve
    from optimizer.search.pipeline import PipelineProblem

    pb = PipelineProblem(synthetic_table(40, seed=3), stages=3)
    full = solve(pb, "ga", seed=5)
    ckpt = tmp_path / "run.ckpt"

    def stop_at_3(gen, best, evals):
        if gen == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        solve(pb, "ga", seed=5, checkpoint=ckpt, progress=stop_at_3)
    doc = json.loads(ckpt.read_text())  # JSON data, not a pickle
    assert doc["format"] == "dnnplan-ga-checkpoint" and doc["version"] == 2 and len(doc["sha256"]) == 64
    good = ckpt.read_text()
    doc["state"]["generation"] = 0
    ckpt.write_text(json.dumps(doc))
    with pytest.raises(InputFileError, match="damaged or was altered .* re-run without --resume"):
        solve(pb, "ga", seed=5, checkpoint=ckpt, resume=True)
    ckpt.write_text(good)
    resumed = solve(pb, "ga", seed=5, checkpoint=ckpt, resume=True)
    assert resumed.best == full.best and resumed.history == full.history


def test_a_crafted_learned_model_file_is_refused_without_running_it(tmp_path):
    """Before: the learned backend ``joblib.load``-ed a model path."""
    from optimizer.cost.learned import load_learned_model

    marker = tmp_path / "ran"
    model = write_pickle_bomb(tmp_path / "model.joblib", marker)
    with pytest.raises(InputFileError, match="not a version-1 dnnplan learned cost model"):
        load_learned_model(model)
    assert not marker.exists()


def test_a_learned_model_saves_as_data_and_predicts_the_same(tmp_path, options, toy):
    from optimizer.cost import build_cost_table
    from optimizer.cost.learned import load_learned_model, save_learned_model

    g, _, opts = options
    fitted = opts["learned"]["model"]
    path = save_learned_model(fitted, tmp_path / "model.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "dnnplan-learned-cost-model" and doc["processors"] == list(fitted.processors_)
    direct = build_cost_table(g, toy, "fp32", backend="learned", model=fitted)
    from_file = build_cost_table(g, toy, "fp32", backend="learned", model=path)
    assert np.array_equal(direct.latency_s, from_file.latency_s) and direct.latency_s.max() > 0
    assert load_learned_model(path).trained_on_ == fitted.trained_on_
    doc["coefficients"][next(iter(doc["coefficients"]))] += 1.0
    path.write_text(json.dumps(doc))
    with pytest.raises(InputFileError, match="damaged or was altered"):
        load_learned_model(path)
