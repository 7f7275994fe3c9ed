"""Open an exported part in its runtime, and prove at export time that every part loads and runs.

``dnnplan export`` hands each part it wrote to :func:`check_part_runs` (through
:func:`checked_part`, which then makes the part's manifest entry) before the artifacts folder is
renamed into place: onnxruntime (``.onnx``) or LiteRT (``.tflite``, its default XNNPACK delegate
included, as ``dnnplan run`` loads it) loads the part and runs it once on zeros of its input
shapes (one frame, one thread: the memory of one inference). A part that does not load or
run is an export error (:class:`~optimizer.errors.PartLoadError`) naming the part and the node,
instead of a ``run`` error later. A ``.tflite`` part holding custom operators that this LiteRT
has no kernel for (MediaPipe's ``Landmarks2TransformMatrix``) cannot be run here; it is skipped
with a note, since a runtime that registers the kernel runs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelFormatError, PartLoadError
from .manifest import Part, TensorSpec, manifest_part

if TYPE_CHECKING:
    from .parts import PartRange

#: words of the note for a part that cannot run here for want of a custom kernel
NO_KERNEL = "has no kernel for its custom operator"
_UNRESOLVED = re.compile(r"unresolved custom op: ([^.\s]+)", re.IGNORECASE)
_NODE_NUMBER = re.compile(r"Node number (\d+) \((\w+)\)")
_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")
_ORT_LOAD = re.compile(r"^Load model from .*? failed:\s*")


def first_line(exc: BaseException, limit: int = 240) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:limit]


def _ort_session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, threads)
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def onnx_session(path: Path, threads: int = 1) -> Any:
    """An onnxruntime CPU session over ``path``; ModelFormatError (one line) when it cannot load."""
    try:
        return _ort_session(path, threads)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph exceptions
        raise ModelFormatError(f"{path}: onnxruntime cannot load it ({first_line(exc, 200)}); re-export the plan") from None


def _ort_reason(exc: BaseException) -> str:
    """onnxruntime's message without its status prefix and the file path:
    ``Node (p2o.Add.240) Op (Add) [ShapeInferenceError] Incompatible dimensions``."""
    text = _ORT_PREFIX.sub("", first_line(exc, 400))
    return _ORT_LOAD.sub("", text)[:300]


def _zeros(specs: list[TensorSpec]) -> dict[str, np.ndarray]:
    return {t.signature_name: np.zeros(t.shape, np.dtype(t.dtype)) for t in specs}


def _tflite_node(path: Path, message: str) -> str:
    """``"node 6 (PAD, output 'block_3_pad')"`` for a LiteRT message naming ``Node number 6``."""
    m = _NODE_NUMBER.search(message)
    if not m or "Delegate" in m.group(2):  # a delegate's node stands for many operators
        return ""
    from ..graph.tflite_flatbuffer import read_model, tflite_schema

    try:
        model = read_model(path.read_bytes(), str(path))
        sg = model.subgraphs[0]
        op = sg.operators[int(m.group(1))]
    except (ModelFormatError, IndexError, TypeError):
        return ""
    code = model.operatorCodes[op.opcodeIndex]
    names = {v: k for k, v in vars(tflite_schema().BuiltinOperator).items() if not k.startswith("_")}
    kind = (code.customCode.decode(errors="replace") if code.customCode
            else names.get(max(code.builtinCode, code.deprecatedBuiltinCode), "?"))
    out = sg.tensors[op.outputs[0]].name if op.outputs is not None and len(op.outputs) else b""
    label = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
    return f"node {m.group(1)} ({kind}, output {label.split(';')[0]!r})"


def check_part_runs(path: Path, part: str, inputs: list[TensorSpec]) -> str | None:
    """Load the part at ``path`` and run it once on zeros of ``inputs``.

    Returns
    -------
    str or None
        A note when the part cannot be run here because LiteRT has no kernel for one of its
        custom operators (the part is kept); None when it ran.

    Raises
    ------
    PartLoadError
        The runtime refused the part or failed running it (the message names the part, the file,
        the node and the runtime's reason).
    """
    where = f"export: part {part} ({path.name})"
    fix = "nothing was written; choose other boundaries ('dnnplan export-sweep MODEL' lists the boundaries that work)"
    if path.suffix.lower() == ".onnx":
        try:
            _ort_session(path, 1).run(None, _zeros(inputs))
        except Exception as exc:  # noqa: BLE001 - onnxruntime's own exception types
            raise PartLoadError(f"{where} does not run in onnxruntime ({_ort_reason(exc)}); {fix}") from None
        return None
    try:
        _litert_run(path, inputs)
    except (ValueError, RuntimeError) as exc:
        missing = _UNRESOLVED.search(str(exc))
        if missing:
            return (f"part {part} was not run at export: LiteRT here {NO_KERNEL} {missing.group(1)} (a runtime "
                    "that registers it runs the part)")
        node = _tflite_node(path, str(exc)) or _node_without_delegate(path, inputs)
        raise PartLoadError(f"{where} does not run in LiteRT ({first_line(exc)}{'; ' + node if node else ''}); "
                            f"{fix}") from None
    return None


def _litert_run(path: Path, inputs: list[TensorSpec], delegates: bool = True) -> None:
    """Load ``path`` in LiteRT (with its default XNNPACK delegate, as ``dnnplan run`` does, or
    with the builtin kernels only) and run its signature once on zeros."""
    from ai_edge_litert.interpreter import OpResolverType

    from ..lazy import litert_interpreter, silenced_stderr

    resolver = OpResolverType.AUTO if delegates else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    with silenced_stderr():  # LiteRT's "Created ... XNNPACK delegate" line
        interp = litert_interpreter()(model_path=str(path), num_threads=1, experimental_op_resolver_type=resolver)
        interp.allocate_tensors()
        interp.get_signature_runner("serving_default")(**_zeros(inputs))


def _node_without_delegate(path: Path, inputs: list[TensorSpec]) -> str:
    """The node the builtin kernels fail on (the delegate's message names only its own node)."""
    try:
        _litert_run(path, inputs, delegates=False)
    except (ValueError, RuntimeError) as exc:
        return _tflite_node(path, str(exc))
    return "the builtin kernels run it; the XNNPACK delegate does not"


def checked_part(part: PartRange, path: Path, inputs: list[TensorSpec], outputs: list[TensorSpec],
                 note: Callable[[str], None] | None = None) -> Part:
    """:func:`~optimizer.plan.manifest.manifest_part` of a part just written, after loading it and
    running it once on zeros (:func:`check_part_runs`, which raises
    :class:`~optimizer.errors.PartLoadError`); a part that cannot run here for want of a custom
    kernel is reported through ``note``."""
    skipped = check_part_runs(path, part.name, inputs)
    if skipped and note:
        note(skipped)
    return manifest_part(part, path, inputs, outputs)
