"""Quantization of an ``.onnx`` model: ONNX → TensorFlow SavedModel with onnx2tf, then the same
TFLite post-training quantization as every other model (:mod:`.convert`, docs/METHODS.md section 1).

onnx2tf (Hyodo, https://github.com/PINTO0309/onnx2tf, MIT) rewrites the ONNX graph operator by
operator into TensorFlow, moving NCHW tensors to TFLite's NHWC layout: a 4-D image input
``[1, 3, H, W]`` becomes ``[1, H, W, 3]``, so calibration images need no transposition. The
SavedModel it writes (signature ``serving_default``, input names from the ONNX file) is converted
and calibrated like a Keras export, so every scheme and ``--io int8`` are available and the
report is the same.

onnx2tf sets ``TF_USE_LEGACY_KERAS=1`` when imported, which would switch this process's
``tf.keras`` to Keras 2; it therefore runs in a child interpreter. onnx2tf checks its conversion
on a few images it downloads; here it is handed seeded images instead (no network access). It
stops once the SavedModel is written, before the float32/float16 ``.tflite`` files onnx2tf would
convert next (nothing reads them).
Operators onnx2tf has no converter for are refused before conversion with their node names.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, ModelFormatError, UnsupportedOperatorError
from ..workers import die_with_parent

#: onnx2tf is installed without its pinned dependencies (it pins an older TensorFlow); see Makefile
CONVERTER = "onnx2tf"
ONNX_DOMAINS = ("", "ai.onnx")
TIMEOUT_S = 900

# Runs in the child interpreter: argv[1] is a JSON object {onnx, out, nhwc, shapes}.
_CHILD = r"""
import json, sys
import numpy as np
args = json.loads(sys.argv[1])
import onnx
import onnx2tf
import onnx2tf.onnx2tf as o2t

def seeded_images():
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in onnx.load(args["onnx"], load_external_data=False).graph.input]
    n, c, h, w = next((s for s in shapes if len(s) == 4), [1, 3, 1, 1])
    if args["nhwc"]:
        h, w = c, h
    return np.random.default_rng(0).random((20, h or 1, w or 1, 3), dtype=np.float32)

o2t.download_test_image_data = seeded_images

# after writing the SavedModel, onnx2tf converts it to float32 and float16 .tflite files nobody
# reads (the quantizer converts the SavedModel itself): stop at the first of those conversions
class SavedModelWritten(BaseException):  # not an Exception: onnx2tf's handlers let it through
    pass

def stop(*_args, **_kwargs):
    raise SavedModelWritten

import tensorflow as tf
tf.lite.TFLiteConverter.from_keras_model = staticmethod(stop)
tf.lite.TFLiteConverter.from_concrete_functions = staticmethod(stop)
try:
    onnx2tf.convert(input_onnx_file_path=args["onnx"], output_folder_path=args["out"],
                    output_signaturedefs=True, not_use_onnxsim=True,
                    overwrite_input_shape=args["shapes"] or None,
                    keep_nwc_or_nhwc_or_ndhwc_input_names=args["nhwc"] or None,
                    non_verbose=True, verbosity="error")
except SavedModelWritten:
    pass
"""


def converter_ops() -> set[str]:
    """ONNX operator types onnx2tf converts (one module per operator in ``onnx2tf/ops``)."""
    spec = importlib.util.find_spec(CONVERTER)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"quantizing an .onnx model needs {CONVERTER}, which is not installed; run "
                          f"'make install' (it installs {CONVERTER} without its pinned TensorFlow)")
    ops_dir = Path(next(iter(spec.submodule_search_locations))) / "ops"
    return {p.stem for p in ops_dir.glob("*.py") if p.stem[:1].isupper()}


IMAGE_CHANNELS = (1, 3, 4)


def check_onnx(path: Path, input_shapes: dict[str, tuple[int, ...]] | None = None
               ) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    """Refuse files onnx2tf cannot convert; returns every input's full shape (the file's
    layout: ``input_shapes`` where given, a dynamic batch alone fixed to 1) and the 4-D inputs
    already in NHWC layout (``[N, H, W, C]`` with C of 1, 3 or 4 and H not; e.g. tf2onnx exports
    of Keras models), which onnx2tf must keep as they are.

    Raises :class:`ModelFormatError` (unreadable file, dynamic non-batch dimensions without a
    shape), :class:`ConfigError` (a shape naming no input, of the wrong rank, with a dimension
    below 1 or contradicting a fixed one) or :class:`UnsupportedOperatorError` naming the first
    unsupported operator and its node.
    """
    import onnx

    from ..graph.input_shapes import resolve_input_shapes

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError, OSError
        raise ModelFormatError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from None
    graph = model.graph
    known = converter_ops()
    bad = [n for n in graph.node if n.domain not in ONNX_DOMAINS or n.op_type not in known]
    if bad:
        names = sorted({(f"{n.domain}." if n.domain not in ONNX_DOMAINS else "") + n.op_type for n in bad})
        first = bad[0]
        raise UnsupportedOperatorError(
            f"{path}: {CONVERTER} cannot convert ONNX operator {', '.join(names)} (node "
            f"{first.name or first.output[0]!r}); replace it before quantizing, or use the float model")
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    declared = {i.name: [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                         for d in i.type.tensor_type.shape.dim] for i in inputs}
    for name, shape in (input_shapes or {}).items():
        if min(shape, default=1) < 1:
            raise ConfigError(f"{path}: input shape {name}:{','.join(map(str, shape))} has a dimension below 1; "
                              "give positive dimensions")
    shapes = resolve_input_shapes(input_shapes, declared, str(path))
    nhwc = [n for n, s in shapes.items() if len(s) == 4 and s[3] in IMAGE_CHANNELS and s[1] not in IMAGE_CHANNELS]
    return shapes, nhwc


def fix_input_shapes(path: Path, shapes: dict[str, tuple[int, ...]], out: Path) -> Path:
    """``path`` with its inputs fixed to ``shapes``, shapes inferred and constants folded by
    onnx-simplifier (Zhang et al., https://github.com/daquexian/onnx-simplifier), written to
    ``out``: ``Shape``/``Gather``/``Concat`` chains that compute resize sizes and reshape
    targets from the input become constants, so onnx2tf sees a static graph and can keep every
    tensor in NHWC instead of transposing around shape-dependent operators."""
    import onnx
    import onnxsim

    model = onnx.load(str(path))
    try:
        simplified, ok = onnxsim.simplify(model, overwrite_input_shapes={k: list(v) for k, v in shapes.items()},
                                          check_n=0)
    except Exception as exc:  # onnxsim raises RuntimeError/ValueError/onnx errors on graphs it cannot fold
        raise ModelFormatError(f"{path}: the model cannot take input shapes "
                               f"{', '.join(f'{k}:{list(v)}' for k, v in shapes.items())} ({_child_error(str(exc))})"
                               ) from None
    if not ok:
        raise ModelFormatError(f"{path}: onnx-simplifier could not check the model with shapes {shapes}")
    onnx.save(simplified, str(out))
    return out


def _rewrite(path: Path, change: Any) -> None:
    """Apply ``change(model)`` to the ONNX file ``path`` in place (initializers are ONNX
    Runtime's after :func:`ort_basic_optimized`, where weights are no longer ``Constant`` nodes)."""
    import onnx

    model = onnx.load(str(path))
    if change(model):
        onnx.save(model, str(path))


ELEMENTWISE = ("Add", "Sub", "Mul", "Div")
COMMUTATIVE = ("Add", "Mul")


def scalar_broadcast_operands(model: Any) -> int:
    """Make one-element constant operands of ``Add``/``Sub``/``Mul``/``Div`` scalars (rank 0) and
    put the constant second in ``Add``/``Mul``; returns the number of operands changed.

    onnx2tf loses an NHWC tensor's layout at an elementwise op whose constant has shape ``[1]``
    (paddle2onnx writes the learnable affine blocks of PP-LCNet, ``w0 · x + w1``, and conv biases
    that way) and transposes to NCHW and back around it: the PP-OCRv4 detector kept 53 TRANSPOSE
    ops, 5 after this rewrite. A rank-0 constant broadcasts to the same values, so the model
    computes the same function.
    """
    from onnx import numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    changed = 0
    for node in graph.node:
        if node.op_type not in ELEMENTWISE or len(node.input) != 2:
            continue
        for k, name in enumerate(node.input):
            t = inits.get(name)
            if t is not None and list(t.dims) == [1]:
                scalar = f"{name}__scalar"
                if scalar not in inits:
                    inits[scalar] = numpy_helper.from_array(numpy_helper.to_array(t).reshape(()), scalar)
                    graph.initializer.append(inits[scalar])
                node.input[k] = scalar
                changed += 1
        if node.op_type in COMMUTATIVE and node.input[0] in inits and node.input[1] not in inits:
            node.input[0], node.input[1] = node.input[1], node.input[0]
            changed += 1
    return changed


#: characters TensorFlow accepts in a name scope (``ops.py``: ``^[A-Za-z0-9_.\\/>-]*$``)
_SCOPE_UNSAFE = re.compile(r"[^A-Za-z0-9_.\\/>-]")


def scope_safe_node_names(model: Any) -> int:
    """Rename ONNX nodes whose names TensorFlow refuses as name scopes (paddle2onnx writes
    ``Softmax@0``; onnx2tf passes a node's name to ``tf.nn.softmax(..., name=)``, which raises
    "not a valid scope name"); returns the number renamed. Node names are labels, not tensor
    names: the graph computes the same function."""
    names = {n.name for n in model.graph.node}
    changed = 0
    for node in model.graph.node:
        if node.name and _SCOPE_UNSAFE.search(node.name):
            base = new = _SCOPE_UNSAFE.sub("_", node.name)
            k = 1
            while new in names:
                new, k = f"{base}_{k}", k + 1
            names.add(new)
            node.name = new
            changed += 1
    return changed


def ort_basic_optimized(path: Path, out: Path) -> Path:
    """``path`` after ONNX Runtime's basic graph optimizations (constant folding, Conv+Mul/Add/BN
    fusion: standard ONNX operators only), written to ``out``. Exports that keep batch norm as
    ``Mul``/``Add`` after a depthwise ``Conv`` (tf2onnx's) otherwise mislead onnx2tf's layout
    tracking; onnx2tf's own pre-pass (onnxsim) is not installed."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(out)
    try:
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/InvalidArgument types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ModelFormatError(f"{path}: onnxruntime cannot load the model ({first})") from None
    return out


def onnx_to_savedmodel(path: Path, workdir: Path,
                       input_shapes: dict[str, tuple[int, ...]] | None = None) -> Path:
    """Convert ``path`` with onnx2tf in a child interpreter; returns the SavedModel directory.

    ``input_shapes`` (input name -> full shape in the file's layout) fixes dynamic dimensions;
    the shapes are folded into the graph (:func:`fix_input_shapes`) and handed to onnx2tf
    (``overwrite_input_shape``), so it converts a static NHWC graph.
    """
    shapes, _ = check_onnx(path, input_shapes)
    fixed = fix_input_shapes(path, shapes, workdir / f"{path.stem}.fixed.onnx")
    optimized = ort_basic_optimized(fixed, workdir / f"{path.stem}.ort.onnx")
    _rewrite(optimized, scalar_broadcast_operands)
    _rewrite(optimized, scope_safe_node_names)
    shapes, nhwc = check_onnx(optimized, shapes)
    out = workdir / f"{path.stem}_onnx2tf"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "-1"}
    args = json.dumps({"onnx": str(optimized), "out": str(out), "nhwc": nhwc,
                       "shapes": [f"{k}:{','.join(map(str, v))}" for k, v in shapes.items()]})
    try:
        res = subprocess.run([sys.executable, "-c", _CHILD, args], capture_output=True, text=True,
                             timeout=TIMEOUT_S, env=env, cwd=workdir, preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired:
        raise ModelFormatError(f"{path}: {CONVERTER} did not finish within {TIMEOUT_S} s") from None
    if res.returncode != 0 or not (out / "saved_model.pb").is_file():
        raise UnsupportedOperatorError(f"{path}: {CONVERTER} cannot convert the model "
                                       f"({_child_error(res.stdout + res.stderr)})")
    return out


def _child_error(text: str) -> str:
    """The converter's error in one line: the Python exception and the ONNX node onnx2tf names."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    raised = [ln for ln in lines if re.match(r"^[A-Za-z_.]*(Error|Exception): ", ln)]
    node = [ln.split("onnx_op_name:", 1)[1].strip() for ln in lines if "onnx_op_name:" in ln]
    msg = raised[0] if raised else (lines[-1] if lines else "no output")
    return (msg[:240] + (f"; at node {node[0]!r}" if node else "")).replace("\n", " ")


def conversion_gap(path: Path, fp32: bytes, samples: Iterable[dict[str, np.ndarray]]) -> tuple[float, float]:
    """Largest ``|onnxruntime − FP32 TFLite|`` over the outputs on ``samples`` (per-sample dicts by
    TFLite input name, NHWC, taken one at a time) and the largest ``|onnxruntime|`` it is
    relative to; outputs are paired in order and 4-D ones compared after moving ONNX's NCHW to NHWC."""
    import onnxruntime as ort

    from .evaluate import TfliteRunner

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    runner = TfliteRunner(fp32, 1)
    gap, scale = 0.0, 0.0
    for sample in samples:
        feeds = {}
        for inp in sess.get_inputs():
            x = sample[inp.name]
            if x.ndim == 4 and inp.shape[1] in (x.shape[3],) and inp.shape[1] != x.shape[1]:
                x = x.transpose(0, 3, 1, 2)
            feeds[inp.name] = x
        ref = sess.run(None, feeds)
        got = runner.run(runner.feed(sample))
        for r, g in zip(ref, (got[k] for k in sorted(got)), strict=False):
            if r.shape != g.shape and r.ndim == 4:
                r = r.transpose(0, 2, 3, 1)
            if r.shape == g.shape:
                gap, scale = max(gap, float(np.max(np.abs(r - g)))), max(scale, float(np.max(np.abs(r))))
    return gap, scale
