"""Multiply-accumulate counts of ONNX nodes (convolutions, matrix products, Einsum, recurrent
cells) from their tensors' static shapes, for the importer's layer costs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def node_attr(node: Any, key: str, default: Any) -> Any:
    """The value of ONNX attribute ``key`` of ``node``, or ``default``."""
    import onnx.helper

    for a in node.attribute:
        if a.name == key:
            return onnx.helper.get_attribute_value(a)
    return default


def einsum_macs(equation: str, shapes: list[tuple[int, ...]]) -> int:
    """Multiply-accumulates of an Einsum: the product of every index's size (ellipses expanded)."""
    if len(shapes) < 2:
        return 0
    terms = equation.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=False):
        letters = list(term.replace("...", ""))
        if "..." in term:
            n_ell = len(shape) - len(letters)
            head = term.index("...")
            letters = letters[:head] + [f".{k}" for k in range(n_ell)] + letters[head:]
        for letter, size in zip(letters, shape, strict=False):
            sizes[letter] = max(sizes.get(letter, 1), size)
    return int(math.prod(sizes.values()))


def node_macs(node: Any, full: Callable[[str], tuple[int, ...]], out_elems: int) -> int:
    """Multiply-accumulates of one ONNX node from its tensors' full shapes (``full``) and output size;
    0 for operators without a weight contraction."""
    op = node.op_type
    ins = list(node.input)
    if op in ("Conv", "ConvInteger", "DeformConv", "QLinearConv"):
        w = full(ins[3] if op == "QLinearConv" else ins[1])
        return out_elems * math.prod(w[1:])
    if op == "ConvTranspose":
        x, w = full(ins[0]), full(ins[1])
        return _per_sample_elems(x) * math.prod(w[1:])
    if op == "Gemm":
        a = full(ins[0])
        k = a[0] if node_attr(node, "transA", 0) else a[-1]
        return out_elems * k
    if op in ("MatMul", "MatMulInteger", "QLinearMatMul"):
        a = full(ins[0])
        return out_elems * (a[-1] if a else 1)
    if op == "Einsum":
        shapes = [full(t) for t in ins if t]
        equation = node_attr(node, "equation", b"")
        return einsum_macs(equation.decode() if isinstance(equation, bytes) else equation, shapes)
    if op in ("LSTM", "GRU", "RNN"):
        x, w, r = full(ins[0]), full(ins[1]), full(ins[2])
        if len(x) != 3 or len(w) != 3 or len(r) != 3:
            return 0
        seq = x[1] if node_attr(node, "layout", 0) else x[0]
        directions, gates_h, in_size = w
        return seq * directions * gates_h * (in_size + r[-1])
    return 0


def _per_sample_elems(full_shape: tuple[int, ...]) -> int:
    """Elements of one sample: a leading batch dim of 1 is dropped."""
    return int(math.prod(full_shape[1:] if full_shape and full_shape[0] == 1 else full_shape))
