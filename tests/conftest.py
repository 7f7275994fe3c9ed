"""Shared fixtures: a fixed seed, a CLI runner and cached zoo graphs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def seed() -> int:
    return 1234


@pytest.fixture
def run_cli(capsys):
    """Run ``dnnplan ARGS...`` in-process; returns exit code, stdout and stderr."""
    from optimizer.cli import main

    def _run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return _run


_GRAPHS: dict[tuple, object] = {}


@pytest.fixture(scope="session")
def zoo_graph():
    """``zoo_graph(name, granularity="op", **variant)`` → LayerGraph, built once per session."""
    from optimizer.graph import load_graph

    def _get(name: str, granularity: str = "op", **variant):
        key = (name, granularity, tuple(sorted(variant.items())))
        if key not in _GRAPHS:
            _GRAPHS[key] = load_graph(name, granularity, **variant)
        return _GRAPHS[key]

    return _get


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory):
    """Conv-ReLU-Conv-ReLU-pool-flatten-Gemm (7 ops) written with onnx.helper (no TensorFlow)."""
    from _byom import write_tiny_onnx

    return write_tiny_onnx(tmp_path_factory.mktemp("onnx") / "tiny.onnx")


@pytest.fixture
def toy(tmp_path):
    """The toy two-processor device of ``tests/test_cost.py`` (modules may override it)."""
    import yaml
    from test_cost import TOY_DEVICE

    from optimizer.hardware import load_device

    p = tmp_path / "toy.yaml"
    p.write_text(yaml.safe_dump(TOY_DEVICE))
    return load_device(p)


@pytest.fixture
def options(toy):
    """The option each built-in cost backend needs, fitted/measured on the toy device:
    ``(graph, its analytic table, {backend: options})``."""
    from test_cost import _table_from, chain_graph

    from optimizer.cost import build_cost_table
    from optimizer.cost.learned import fit_learned_model

    g = chain_graph(9)
    ref = build_cost_table(g, toy, "fp32")
    graphs = [chain_graph(9, name=f"n{s}", hw=8 + 4 * s, seed=s) for s in range(4)]
    model = fit_learned_model([(h, _table_from(build_cost_table(h, toy, "fp32"))) for h in graphs], dtype="fp32")
    # predicted: the toy device names no probe table, so every processor is priced analytically
    # (tests/test_predictors.py covers devices that do)
    return g, ref, {"analytic": {}, "measured": {"table": _table_from(ref)}, "learned": {"model": model},
                    "predicted": {}}
