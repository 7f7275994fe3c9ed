"""Export plans of ``.tflite`` and ``.onnx`` model files: sub-models cut in the file's own format.

Nothing is re-converted: a part is the original model restricted to its operators.

* TFLite: the flatbuffer is read through the schema's object API (``ai_edge_litert``'s
  ``schema_py_generated``, through :mod:`optimizer.graph.tflite_flatbuffer`) and every part gets a
  new main subgraph holding its operators, plus the constant-only operators that feed them
  (``DEQUANTIZE`` of float16 weights, ``DENSIFY`` of sparse weights), the tensors they touch
  with their quantization parameters unchanged (so the cut tensors of an INT8 model keep the
  scale and zero point the single-file model uses), only the buffers they read, and a
  ``serving_default`` signature ``in0.. / output_0..`` like converted parts. Custom operators
  are copied as they are (their options and operator codes included), so each stays inside
  one part.
* ONNX: ``onnx.utils.Extractor`` (the ONNX project's sub-model extraction) between the part's
  input and output tensors.

The inputs and outputs of a part are the DAG cut of
:meth:`optimizer.graph.layergraph.LayerGraph.cut_tensors` (:func:`optimizer.plan.parts.part_io`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from ..graph.layergraph import LayerGraph
from ..graph.tflite_flatbuffer import read_model, sub_model, tflite_schema, write_model
from .manifest import Quantization, TensorSpec

FILE_FORMATS = (".tflite", ".onnx")


class TfliteCutter:
    """Cuts sub-models out of one ``.tflite`` file (see the module docstring)."""

    suffix = ".tflite"

    def __init__(self, path: Path, graph: LayerGraph) -> None:
        self.path = path
        self.model = read_model(path.read_bytes(), str(path))
        self.sg = self.model.subgraphs[0]
        ops = self.sg.operators or []
        producer = {int(t): k for k, op in enumerate(ops) for t in (op.outputs if op.outputs is not None else [])}
        try:
            self.layer_ops = [producer[int(layer.outputs[0])] for layer in graph.layers]
        except (KeyError, ValueError, IndexError):
            raise ModelFormatError(f"{path}: its operators do not match the imported graph; re-import "
                                   "the file and make the plan again") from None
        self.producer = producer
        self.multi = len(self.model.subgraphs) > 1

    def check_cuttable(self, parts: int) -> None:
        """Refuse to divide a model with control-flow subgraphs into ``parts > 1`` parts."""
        if self.multi and parts > 1:
            raise ModelFormatError(f"{self.path}: the model holds {len(self.model.subgraphs) - 1} control-flow "
                                   "subgraphs (WHILE/IF bodies) that a cut cannot divide; export it as one "
                                   "part (a single-stage plan) or re-export it without control flow")

    def _check_exchangeable(self, names: list[str], part: str, schema: Any) -> None:
        """Parts exchange plain tensors: refuse a boundary through a variable, string, resource
        or variant tensor (state a runtime cannot ship between parts)."""
        kinds = schema.TensorType
        for n in names:
            t = self.sg.tensors[int(n)]
            if t.isVariable or t.type in (kinds.STRING, kinds.RESOURCE, kinds.VARIANT):
                label = t.name.decode(errors="replace") if isinstance(t.name, bytes) else str(t.name)
                raise ModelFormatError(f"{self.path}: a boundary of {part} crosses tensor {n} ({label}), a "
                                       "variable/resource tensor that TFLite parts cannot exchange; move the "
                                       "boundary to another operator")

    def _ops_of(self, first_op: int, end_op: int) -> list[int]:
        """Flatbuffer operator indices of layers ``[first_op, end_op)`` and of the constant-only
        operators feeding them, in the file's order."""
        chosen = set(self.layer_ops[first_op:end_op])
        layer_set = set(self.layer_ops)
        stack = list(chosen)
        while stack:
            op = self.sg.operators[stack.pop()]
            for t in op.inputs if op.inputs is not None else []:
                k = self.producer.get(int(t))
                if k is not None and k not in layer_set and k not in chosen:  # folded constant op
                    chosen.add(k)
                    stack.append(k)
        return sorted(chosen)

    def write(self, first_op: int, end_op: int, ins: list[str], outs: list[str], path: Path,
              name: str, parts: int) -> tuple[list[TensorSpec], list[TensorSpec]]:
        """Write the part computing layers ``[first_op, end_op)`` to ``path``; return its I/O specs."""
        from ..fileio import atomic_write_bytes

        self.check_cuttable(parts)
        schema = tflite_schema()
        self._check_exchangeable(ins + outs, f"the part of ops {first_op}-{end_op - 1}", schema)
        op_ids = self._ops_of(first_op, end_op)
        part = sub_model(self.model, op_ids, [int(t) for t in ins], [int(t) for t in outs], name,
                         f"dnnplan part {name} of {self.path.name}", keep_all_buffers=self.multi)
        sg = part.subgraphs[0]
        atomic_write_bytes(path, write_model(part))
        return (self._specs(ins, "in", list(sg.inputs), sg.tensors),
                self._specs(outs, "output_", list(sg.outputs), sg.tensors))

    @staticmethod
    def _specs(names: list[str], prefix: str, indices: list[int], tensors: list[Any]) -> list[TensorSpec]:
        """Specs of the part's tensors ``names`` (original tensor ids) stored at ``indices`` of ``tensors``."""
        from ..graph.tflite_import import tflite_np_type

        schema = tflite_schema()
        types = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
        specs = []
        for k, tid in enumerate(names):
            t = tensors[indices[k]]
            q = t.quantization
            quant = None
            if q is not None and q.scale is not None and len(q.scale) == 1 and float(q.scale[0]) > 0:
                zp = int(q.zeroPoint[0]) if q.zeroPoint is not None and len(q.zeroPoint) else 0
                quant = Quantization(scale=float(q.scale[0]), zero_point=zp)
            specs.append(TensorSpec(name=tid, signature_name=f"{prefix}{k}", index=indices[k],
                                    shape=[int(s) for s in t.shape],
                                    dtype=np.dtype(tflite_np_type(types.get(t.type, "FLOAT32"))).name,
                                    quantization=quant))
        return specs


class OnnxCutter:
    """Cuts sub-models out of one ``.onnx`` file with ``onnx.utils.Extractor``."""

    suffix = ".onnx"

    def __init__(self, path: Path, graph: LayerGraph) -> None:
        import onnx
        import onnx.utils

        self.path = path
        try:
            model = onnx.load(str(path))
        except Exception as exc:  # protobuf DecodeError and friends
            raise ModelFormatError(f"{path}: not a readable ONNX model ({type(exc).__name__}); re-export it") from None
        from ..graph.onnx_folding import fold_shape_arithmetic
        from ..graph.onnx_import import prepared_model

        # the model the graph was built from: functions inlined, sorted, at the graph's input shapes
        model, self.dims = prepared_model(model, graph.served_input_shapes, str(path))
        folded = fold_shape_arithmetic(model, self.dims)
        self.constants: set[str] = set()
        if folded is not None:  # shape vectors computed from the fixed input shapes: folded away
            model, self.constants = folded
        model = onnx.shape_inference.infer_shapes(model)
        self.extractor = onnx.utils.Extractor(model)
        self.graph = graph

    def check_cuttable(self, parts: int) -> None:
        """Every ONNX plan boundary is a set of named tensors, which ``Extractor`` can cut at."""

    def write(self, first_op: int, end_op: int, ins: list[str], outs: list[str], path: Path,
              name: str, parts: int) -> tuple[list[TensorSpec], list[TensorSpec]]:
        """Write the part reading ``ins`` and producing ``outs`` to ``path``; return its I/O specs.

        Tensors that constant folding (:func:`~optimizer.graph.onnx_import.constant_folded`) made
        constants, such as the int64 shape vector a ``Reshape`` reads, are not exchanged: each
        part holds them as initializers. Specs carry the shapes ONNX infers for the part (a shape
        vector ``[2]`` or a batch-folded ``[2048, 256]`` is not a batch-1 activation)."""
        import onnx
        from onnx import helper

        from ..fileio import atomic_write_bytes

        ins = [t for t in ins if t not in self.constants]
        outs = [t for t in outs if t not in self.constants]
        if not outs:
            raise ModelFormatError(f"{self.path}: part {name} computes only constants (shape arithmetic of the "
                                   "fixed input shapes); move its boundary so that it computes an activation")
        try:
            part = self.extractor.extract_model(ins, outs)
        except Exception as exc:  # onnx raises KeyError/ValidationError for tensors it cannot cut at
            raise ModelFormatError(f"{self.path}: part {name} cannot be cut at tensors {ins} -> {outs} "
                                   f"({type(exc).__name__}: {exc}); choose other boundaries") from None
        part.graph.name = name
        atomic_write_bytes(path, part.SerializeToString())
        onnx.checker.check_model(str(path))

        def specs(values: Any, names: list[str]) -> list[TensorSpec]:
            by_name = {v.name: v for v in values}
            out = []
            for k, t in enumerate(names):
                tt = by_name[t].type.tensor_type
                dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim]
                known = self.dims.get(t)
                if tt.HasField("shape") and all(d > 0 for d in dims):  # a scalar's dims are []
                    shape = dims
                elif known is not None and all(d is not None and d > 0 for d in known):
                    shape = [int(d or 0) for d in known]
                else:
                    shape = [1, *self.graph.tensors[t].shape]
                out.append(TensorSpec(name=t, signature_name=t, index=k, shape=shape,
                                      dtype=np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)).name))
            return out

        return specs(part.graph.input, ins), specs(part.graph.output, outs)


def file_cutter(path: Path, graph: LayerGraph) -> TfliteCutter | OnnxCutter:
    """The cutter for a ``.tflite`` or ``.onnx`` model file."""
    return TfliteCutter(path, graph) if path.suffix.lower() == ".tflite" else OnnxCutter(path, graph)
