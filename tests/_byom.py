"""Helpers of the bring-your-own-model tests: third-party fixture models and one call from a
model file to ``run --check``.

``export_and_check(model, tmp, kind=..., cuts=None)`` makes a plan with evenly spaced cuts
(``plan_for_boundaries``; pass a plan instead to check one made by ``map``/``split``), exports it and
runs it with ``--check`` semantics; the full chain profile → quantize → map → split → export →
run --check only has to hand it the quantized file or the searched plan.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

FIXTURE_MODELS = ("selfie_segmentation", "face_detection_short_range", "face_landmark", "hand_recrop",
                  "iris_landmark")
#: through profile → quantize → map → split → export → run --check at INT8 (all INT8 but the custom op)
INT8_CHAIN_MODELS = ("face_detection_short_range", "face_landmark", "hand_recrop", "iris_landmark",
                     "palm_detection_lite", "selfie_segmentation")
CUSTOM_OP_MODEL = "selfie_segmentation"  # Convolution2DTransposeBias (XNNPACK kernel in LiteRT)
NO_KERNEL_MODEL = "face_landmark_with_attention"  # Landmarks2TransformMatrix & co.: no kernel here


def _save_onnx(path: Path, name: str, nodes: list[Any], x_shape: list[int], y_shape: list[int],
               weights: dict[str, tuple[int, ...]], scale: float) -> Path:
    """Save a float ONNX model (input ``x``, output ``y``) whose ``weights`` are seeded normals
    times ``scale``, drawn in the order given (opset 17)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((scale * rng.standard_normal(shape)).astype(np.float32), w)
             for w, shape in weights.items()]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], initializer=inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def write_tiny_onnx(path: Path) -> Path:
    """Conv-ReLU-Conv-ReLU-pool-flatten-Gemm (7 ops, NCHW input ``x`` [1, 3, 64, 64], seeded
    weights) written with onnx.helper: an ONNX model with no TensorFlow in its making."""
    from onnx import helper

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3"], ["y"], name="fc", transB=1),
    ]
    return _save_onnx(path, "tiny", nodes, [1, 3, 64, 64], [1, 10],
                      {"w1": (16, 3, 3, 3), "w2": (32, 16, 3, 3), "w3": (10, 32)}, scale=1.0)


def write_residual_onnx(path: Path) -> Path:
    """Conv stem, conv blocks with a skip add, pool, fc: 12 ops whose skip makes a DAG cut (NCHW
    input ``x`` [1, 3, 96, 96], seeded weights x 0.1; the report tests' and benchmark's network)."""
    from onnx import helper

    conv = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="stem", strides=[2, 2], **conv),
        helper.make_node("Relu", ["c1"], ["r1"], name="stem_relu"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", **conv),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3", **conv),
        helper.make_node("Add", ["c3", "r1"], ["a3"], name="skip_add"),
        helper.make_node("Conv", ["a3", "w4"], ["c4"], name="conv4", strides=[2, 2], **conv),
        helper.make_node("Relu", ["c4"], ["r4"], name="relu4"),
        helper.make_node("Conv", ["r4", "w5"], ["c5"], name="conv5", **conv),
        helper.make_node("GlobalAveragePool", ["c5"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w6"], ["y"], name="fc", transB=1),
    ]
    return _save_onnx(path, "tinynet", nodes, [1, 3, 96, 96], [1, 10],
                      {"w1": (24, 3, 3, 3), "w2": (24, 24, 3, 3), "w3": (24, 24, 3, 3),
                       "w4": (48, 24, 3, 3), "w5": (64, 48, 3, 3), "w6": (10, 64)}, scale=0.1)


def zoo_onnx(path: Path) -> Path:
    """A tf2onnx export of the zoo's MobileNetV1 (96x96, alpha 0.25; NHWC input, batch norm as
    Mul/Add after depthwise convolutions)."""
    from optimizer.graph.convert import keras_to_onnx
    from optimizer.plan.keras_model import load_plan_model
    from optimizer.plan.manual_plan import plan_for_boundaries

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km, _, _ = load_plan_model(plan_for_boundaries("mobilenet_v1", [], variant={"input_size": 96, "alpha": 0.25}))
    return keras_to_onnx(km, path)


def third_party_models() -> dict[str, Path]:
    """The mediapipe fixture models (downloaded once, see tests/third_party/README.md)."""
    from third_party.fetch_models import FetchError, fetch

    try:
        return fetch()
    except FetchError as exc:
        pytest.fail(str(exc))


def even_cuts(model: Path | str, parts: int, granularity: str = "op") -> list[int]:
    """``parts - 1`` boundaries spread evenly over the model's layers."""
    from optimizer.graph import load_graph

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = len(load_graph(model, granularity))
    return [round(k * n / parts) for k in range(1, parts)]


def export_and_check(model: Path | str, tmp: Path, *, kind: str = "pipeline", cuts: list[int] | None = None,
                     plan: Any = None, frames: int = 3, inputs: Any = None, min_agreement: float = 1.0) -> Any:
    """Export ``plan`` (default: ``kind`` with ``cuts`` on ``model``) into ``tmp`` and run it
    with the single-file check; returns the :class:`RunReport` (``.check`` filled)."""
    from optimizer.plan.export import export_plan
    from optimizer.plan.manual_plan import plan_for_boundaries
    from optimizer.runtime import run_plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if plan is None:
            cuts = cuts if cuts is not None else even_cuts(model, 3 if kind == "pipeline" else 2)
            plan = plan_for_boundaries(str(model), cuts if kind == "pipeline" else cuts[:1], kind=kind)
        art = tmp / f"{kind}-art"
        export_plan(plan, art)
        return run_plan(plan, art, frames=frames, input=inputs, pin=False, check_min_agreement=min_agreement)


def searched_plans(run_cli: Any, model: Path | str, tmp: Path, dtype: str, *, device: str = "pixel6",
                   network: str = "wifi_10") -> dict[str, Path]:
    """The chain's search steps through the CLI: ``dnnplan map`` (pipeline) and ``dnnplan split``
    of ``model`` at ``dtype`` on ``device``; returns the plan files by kind (hand each, read with
    ``read_plan``, to :func:`export_and_check` as ``plan=``)."""
    plans = {"pipeline": tmp / "map_plan.json", "split": tmp / "split_plan.json"}
    for args in (["map", str(model), "--device", device, "--dtype", dtype, "--out", str(plans["pipeline"])],
                 ["split", str(model), "--device", device, "--network", network, "--dtype", dtype,
                  "--out", str(plans["split"]), "--front", str(tmp / "front.csv")]):
        res = run_cli("--quiet", *args)
        assert res.exit_code == 0, f"dnnplan {' '.join(args)}: {res.stderr}"
    return plans



def searched_int8_plans_exact(run_cli: Any, quantized: Path, tmp: Path) -> None:
    """``map`` and ``split`` an INT8 file at int8 (:func:`searched_plans`), export each plan and
    assert ``run --check``: agreement 100 % and max |diff| 0 against the single INT8 file (the
    parts run the same integer kernels with the same parameters)."""
    from optimizer.plan.io import read_plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plans = searched_plans(run_cli, quantized, tmp, "int8")
    for kind, path in plans.items():
        run = export_and_check(quantized, tmp / kind, plan=read_plan(path), frames=3)
        assert run.check.passed and run.check.agreement == 1.0, kind
        for out in run.check.outputs:
            assert out.max_abs_diff == 0.0, (kind, out)
