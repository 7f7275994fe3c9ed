"""Keras -> TFLite without the SavedModel round trip (``optimizer.graph.convert.keras_tflite_converter``):
the frozen-function route must give what ``TFLiteConverter.from_keras_model`` gives -- the same
operators, outputs, INT8 quantization and ``serving_default`` signature with the same I/O names --
so that a TensorFlow upgrade that changes either route fails here, not in an export."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dtype", ["fp32", "int8"])
def test_the_frozen_route_gives_the_savedmodel_routes_model(dtype):
    import bench_tflite_convert_route as route

    from optimizer.lazy import litert_interpreter

    model = route.build("two_in_two_out")
    old, _, _ = route.convert("keras", model, dtype)
    new, _, _ = route.convert("frozen", model, dtype)
    (old_ops, old_q, old_signed, old_io), (new_ops, new_q, new_signed, new_io) = route._facts(old), route._facts(new)
    assert collections.Counter(new_ops) == collections.Counter(old_ops)
    assert new_q == old_q
    assert new_signed and old_signed
    assert sorted(new_io) == sorted(old_io) and "serving_default_img:0" in new_io
    for a, b in zip(route._outputs(old, model), route._outputs(new, model), strict=True):
        np.testing.assert_array_equal(a, b)
    runner = litert_interpreter()(model_content=new).get_signature_runner("serving_default")
    assert set(runner.get_input_details()) == {"img", "aux"}
    assert set(runner.get_output_details()) == {"output_0", "output_1"}


@pytest.mark.parametrize("dtype", ["fp32", "int8"])
def test_letting_the_frozen_function_go_changes_no_byte(dtype, monkeypatch):
    """The converter holds only stand-ins of the frozen function's tensors through the MLIR
    conversion, calibration and quantization (``DROP_FROZEN_GRAPH``): the same flatbuffer as
    TensorFlow's own flow, which keeps the frozen function (and a copy of every weight) alive."""
    import bench_tflite_convert_route as route

    from optimizer.graph import convert as graph_convert

    made = []
    real_init = graph_convert.TensorStandIn.__init__

    def spy(self, tensor):
        made.append(tensor.name)
        real_init(self, tensor)

    monkeypatch.setattr(graph_convert.TensorStandIn, "__init__", spy)
    model = route.build("two_in_two_out")
    dropped, _, _ = route.convert("frozen", model, dtype)
    assert len(made) == 4  # two inputs, two outputs stood in for
    monkeypatch.setattr(graph_convert, "DROP_FROZEN_GRAPH", False)
    kept, _, _ = route.convert("frozen", model, dtype)
    assert len(made) == 4
    assert dropped == kept
