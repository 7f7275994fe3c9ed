"""INT8 parts aligned to the single-file INT8 model: the parts compute exactly what it computes.

Separately converted INT8 parts differ from the single-file INT8 model in the last float bits of
their scales (their calibrators see float activations computed in a different order), and a
random-weight network amplifies the resulting one-LSB flips. A multi-part INT8 export therefore
converts the whole network once and :meth:`Int8Reference.align` copies onto every part the
quantization parameters of its activations, the constants of its matched operators and, at every
boundary, the producer's parameters (Jacob et al., CVPR 2018, for the affine quantization).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import numpy as np

from .int8_scales import unify_same_scale
from .manifest import Quantization


class Int8Reference:
    """The single-file INT8 model of the whole network, as a TFLite object tree.

    Parts quantized separately agree with it only up to the last float bits of their scales
    (their calibrators see float activations computed in a different order), and a random-
    weight network amplifies the resulting one-LSB flips. :meth:`align` therefore copies the
    reference's quantization parameters onto every activation tensor of a part, the reference's
    constants onto every matched operator (so biases quantized against the reference's input
    scales), and makes each part input use its producer's parameters: the parts then compute
    exactly what the single-file model computes.

    Part tensors are matched by structure first (:meth:`_follow`: from the part inputs, each
    operator is the reference operator reading the matched tensors), then by the TensorFlow op
    name the converter gives each tensor. Names alone are not enough: a layer called several
    times (the box head shared by the FPN levels of an SSD) gets scopes numbered in the order a
    model traces its calls (``BoxHead_1``, ``BoxHead_3``, ...), so a part that traces fewer calls
    of it names them after other calls of the single file. The reference tensor of every part
    output is remembered for the parts that read it (:attr:`placed`).
    """

    def __init__(self, path: Path, graph_inputs: list[str], graph_outputs: list[str]) -> None:
        from ..lazy import tensorflow

        tensorflow()
        from tensorflow.lite.tools import flatbuffer_utils

        self.flatbuffer_utils = flatbuffer_utils
        self.model = flatbuffer_utils.read_model(str(path))
        subgraph = self.model.subgraphs[0]
        self.activation_quantization: dict[str, Any] = {}
        self.ops: dict[str, Any] = {}
        self.producer: dict[int, Any] = {}
        self.readers: dict[int, list[int]] = {}  # tensor -> indices of the operators reading it
        for t in subgraph.tensors:
            if self._is_activation(self.model, t):
                self.activation_quantization.setdefault(_op_key(t.name), t.quantization)
        for k, op in enumerate(subgraph.operators):
            for output_tensor in op.outputs:
                self.ops.setdefault(_op_key(subgraph.tensors[output_tensor].name), op)
                self.producer[output_tensor] = op
            for input_tensor in dict.fromkeys(op.inputs):
                if input_tensor >= 0:
                    self.readers.setdefault(int(input_tensor), []).append(k)
        signature = self.model.signatureDefs[0]
        by_signature = {tensor_map.name.decode(): tensor_map.tensorIndex for tensor_map in signature.outputs}
        self.outputs = {name: by_signature.get(f"output_{k}") for k, name in enumerate(graph_outputs)}
        by_signature = {tensor_map.name.decode(): tensor_map.tensorIndex for tensor_map in signature.inputs}
        self.input_index = {name: by_signature.get(f"in{k}") for k, name in enumerate(graph_inputs)}
        self.inputs = {name: None if i is None else subgraph.tensors[i].quantization
                       for name, i in self.input_index.items()}
        #: LayerGraph tensor id -> the reference's tensor, for every part output aligned so far
        self.placed: dict[str, int] = {}

    @staticmethod
    def _is_activation(model: Any, t: Any) -> bool:
        quantization = t.quantization
        return (quantization is not None and quantization.scale is not None and len(quantization.scale) == 1
                and not _is_constant(model, t))

    def _follow(self, part_model: Any, seeds: dict[int, int]) -> dict[int, int]:
        """Part tensor -> reference tensor for every tensor of part ``part_model`` computed, operator by
        operator, from the matched tensors ``seeds`` (its inputs).

        A part operator reading a matched tensor is the reference operator, not yet taken, that
        reads it at the same position with the same operator code, options, constant shapes and
        output shapes (:func:`_same_operator`). Several such operators are told apart by the
        constants they share byte for byte (weights quantize alike in both models), then by op
        name; an operator still ambiguous is left unmatched, and so is what it computes."""
        subgraph, reference_subgraph = part_model.subgraphs[0], self.model.subgraphs[0]
        found = dict(seeds)
        taken: set[int] = set()
        for op in subgraph.operators:
            reads = [ti for ti in op.inputs if ti in found]
            if not reads:
                continue
            reference_ops = reference_subgraph.operators
            candidates = [k for k in self.readers.get(found[reads[0]], []) if k not in taken
                          and _same_operator(part_model, op, self.model, reference_ops[k], found)]
            if len(candidates) > 1:
                score = {k: _shared_constants(part_model, op, self.model, reference_ops[k]) for k in candidates}
                candidates = [k for k in candidates if score[k] == max(score.values())]
            if len(candidates) > 1:
                key = _op_key(subgraph.tensors[op.outputs[0]].name)
                candidates = [k for k in candidates
                              if _op_key(reference_subgraph.tensors[reference_ops[k].outputs[0]].name) == key]
            if len(candidates) != 1:
                continue
            taken.add(candidates[0])
            found.update(zip((int(t) for t in op.outputs), (int(t) for t in reference_ops[candidates[0]].outputs)))
        return found

    def _tensor_index(self, tid: str, shape: list[int]) -> int | None:
        """The reference's tensor holding LayerGraph tensor ``tid`` (by the producing layer's
        op-name scope and the shape), or None."""
        if self.outputs.get(tid) is not None:
            return self.outputs[tid]
        layer = tid.split(":")[0]
        scope = re.compile(rf"^{re.escape(layer)}(_\d+)?/")
        subgraph = self.model.subgraphs[0]
        found = [i for i, t in enumerate(subgraph.tensors) if self._is_activation(self.model, t)
                 and scope.match(_op_key(t.name)) and list(t.shape) == shape]
        return found[-1] if found else None

    def align(self, path: Path, part_inputs: list[str], part_outputs: list[str],
              known: dict[str, Quantization]) -> None:
        """Rewrite the INT8 part at ``path`` in place (see the class docstring)."""
        from ..fileio import atomic_write_bytes
        from ..graph.tflite_flatbuffer import write_model

        flatbuffer_utils = self.flatbuffer_utils
        part_model = flatbuffer_utils.read_model(str(path))
        subgraph = part_model.subgraphs[0]
        reference_subgraph = self.model.subgraphs[0]
        signature = part_model.signatureDefs[0]
        index = {tensor_map.name.decode(): tensor_map.tensorIndex
                 for tensor_map in list(signature.inputs) + list(signature.outputs)}
        seeds: dict[int, int] = {}
        for k, tid in enumerate(part_inputs):
            ti = index[f"in{k}"]
            ri = self.placed.get(tid, self.input_index.get(tid))
            ri = self._tensor_index(tid, list(subgraph.tensors[ti].shape)) if ri is None else ri
            if ri is not None:
                seeds[ti] = ri
        matched = self._follow(part_model, seeds)
        for i, t in enumerate(subgraph.tensors):  # activations: by structure, else by op name
            if not self._is_activation(part_model, t):
                continue
            if i in matched:
                if self._is_activation(self.model, reference_subgraph.tensors[matched[i]]):
                    t.quantization = copy.deepcopy(reference_subgraph.tensors[matched[i]].quantization)
            elif not _signature_named(t.name):  # signature I/O are named after the signature
                quantization = self.activation_quantization.get(_op_key(t.name))
                if quantization is not None:
                    t.quantization = copy.deepcopy(quantization)
        # part output tensor -> the reference's tensor with the same LayerGraph id
        out_ref: dict[int, int] = {}
        for k, tid in enumerate(part_outputs):
            ti = index[f"output_{k}"]
            ri = matched.get(ti)
            ri = self._tensor_index(tid, list(subgraph.tensors[ti].shape)) if ri is None else ri
            if ri is not None:
                out_ref[ti] = self.placed[tid] = ri
        for op in subgraph.operators:  # constants (weights, biases) of matched operators
            ri = matched.get(op.outputs[0], out_ref.get(op.outputs[0]))
            if ri is not None:
                ref = self.producer.get(ri)
            elif not _signature_named(subgraph.tensors[op.outputs[0]].name):
                ref = self.ops.get(_op_key(subgraph.tensors[op.outputs[0]].name))
            else:
                ref = None
            if ref is None or len(ref.inputs) != len(op.inputs):
                continue
            for ti, ri in zip(op.inputs, ref.inputs, strict=True):
                if ti < 0 or ri < 0:
                    continue
                t, rt = subgraph.tensors[ti], reference_subgraph.tensors[ri]
                data = part_model.buffers[t.buffer].data
                if data is not None and len(data) and list(t.shape) == list(rt.shape):
                    part_model.buffers[t.buffer].data = self.model.buffers[rt.buffer].data
                    t.quantization = copy.deepcopy(rt.quantization)
        for k, tid in enumerate(part_inputs):  # inputs: exactly the producer's parameters
            t = subgraph.tensors[index[f"in{k}"]]
            if t.quantization is None or t.quantization.scale is None:
                continue
            quantization = known.get(tid)
            if quantization is not None:
                t.quantization.scale, t.quantization.zeroPoint = [quantization.scale], [quantization.zero_point]
            elif self.inputs.get(tid) is not None:
                t.quantization = copy.deepcopy(self.inputs[tid])
        for ti, ri in out_ref.items():
            subgraph.tensors[ti].quantization = copy.deepcopy(self.model.subgraphs[0].tensors[ri].quantization)
        unify_same_scale(part_model)  # where the single file fused a PAD/RESHAPE away, its two sides came apart
        atomic_write_bytes(path, write_model(part_model))  # identical vectors stored once, buffers aligned


def _is_constant(model: Any, t: Any) -> bool:
    """Whether tensor ``t`` of ``model`` holds data (weights, biases, shapes)."""
    data = model.buffers[t.buffer].data
    return data is not None and len(data) > 0


def _same_value(a: Any, b: Any) -> bool:
    """Equality of operator options (flatbuffer objects, vectors, scalars), field by field."""
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if hasattr(a, "__dict__") or hasattr(b, "__dict__"):
        return type(a) is type(b) and vars(a).keys() == vars(b).keys() and all(
            _same_value(v, vars(b)[k]) for k, v in vars(a).items())
    return bool(a == b)


def _same_operator(part_model: Any, op: Any, reference_model: Any, ref: Any, found: dict[int, int]) -> bool:
    """Whether reference operator ``ref`` (of model ``reference_model``) computes what part operator ``op`` (of
    ``part_model``) computes, given the matched tensors ``found``: same operator code and options,
    matched tensors read at the same positions (a tensor not matched, such as a shape the part
    computes from a float copy of an activation, where the reference reads no constant),
    constants of the same shape and type where the part has constants, outputs of the same shapes."""
    subgraph, reference_subgraph = part_model.subgraphs[0], reference_model.subgraphs[0]
    code, rcode = part_model.operatorCodes[op.opcodeIndex], reference_model.operatorCodes[ref.opcodeIndex]
    if (max(code.builtinCode, code.deprecatedBuiltinCode) != max(rcode.builtinCode, rcode.deprecatedBuiltinCode)
            or code.customCode != rcode.customCode or len(op.inputs) != len(ref.inputs)
            or len(op.outputs) != len(ref.outputs) or op.builtinOptionsType != ref.builtinOptionsType
            or not _same_value(op.builtinOptions, ref.builtinOptions)):
        return False
    for ti, ri in zip(op.inputs, ref.inputs, strict=True):
        if (ti < 0) != (ri < 0):
            return False
        if ti < 0:
            continue
        t, rt = subgraph.tensors[ti], reference_subgraph.tensors[ri]
        if _is_constant(part_model, t):
            if not _is_constant(reference_model, rt) or list(t.shape) != list(rt.shape) or t.type != rt.type:
                return False
        elif found.get(int(ti), ri) != ri or _is_constant(reference_model, rt):
            return False
    return all(list(subgraph.tensors[ti].shape) == list(reference_subgraph.tensors[ri].shape)
               for ti, ri in zip(op.outputs, ref.outputs, strict=True))


def _shared_constants(part_model: Any, op: Any, reference_model: Any, ref: Any) -> int:
    """How many constant inputs of ``op`` hold the same bytes as ``ref``'s at that position."""
    subgraph, reference_subgraph = part_model.subgraphs[0], reference_model.subgraphs[0]
    return sum(1 for ti, ri in zip(op.inputs, ref.inputs, strict=True)
               if ti >= 0 and ri >= 0 and _is_constant(part_model, subgraph.tensors[ti])
               and _is_constant(reference_model, reference_subgraph.tensors[ri])
               and bytes(part_model.buffers[subgraph.tensors[ti].buffer].data)
               == bytes(reference_model.buffers[reference_subgraph.tensors[ri].buffer].data))


def _signature_named(name: bytes | str) -> bool:
    """Tensors the converter names after the signature (``serving_default_in0:0``,
    ``StatefulPartitionedCall_1:0``) rather than after the TensorFlow op computing them."""
    text = name.decode() if isinstance(name, bytes) else name
    return text.startswith(("serving_default_", "StatefulPartitionedCall"))


def _op_key(name: bytes | str) -> str:
    """``b"stage1_1/block_3_add_1/Add;..."`` -> ``"block_3_add_1/Add"`` (model scope dropped)."""
    first = (name.decode() if isinstance(name, bytes) else name).split(";")[0]
    return first.split("/", 1)[1] if "/" in first else first
