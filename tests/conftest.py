"""Shared fixtures: a fixed seed, a CLI runner and cached zoo graphs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
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
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(0)

    def init(name, shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        initializer=[init("w1", (16, 3, 3, 3)), init("w2", (32, 16, 3, 3)), init("w3", (10, 32))])
    path = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path
