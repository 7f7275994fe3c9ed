"""Executing one exported part with LiteRT, and moving tensors between parts.

Adjacent INT8 parts are calibrated separately, so a tensor's producer and consumer may use
different affine quantization parameters; :func:`convert_tensor` re-quantizes through real
values (``real = scale * (q - zero_point)``), and quantizes or dequantizes at float/int8 edges.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputFileError, ModelFormatError
from ..plan.manifest import Part, Quantization, TensorInfo, TensorSpec, artifact_path

# silenced_stderr swaps the process-wide fd 2: interpreters created in parallel threads take turns
_QUIET = threading.Lock()


@dataclass(frozen=True)
class Value:
    """A tensor value with its element type and quantization (None = real-valued)."""

    array: np.ndarray
    quantization: Quantization | None = None

    def real(self) -> np.ndarray:
        """The real values (dequantized float32)."""
        if self.quantization is None:
            return self.array.astype(np.float32, copy=False)
        q = self.quantization
        return (self.array.astype(np.float32) - q.zero_point) * np.float32(q.scale)


def convert_tensor(value: Value, spec: TensorSpec | TensorInfo) -> np.ndarray:
    """``value`` as ``spec`` expects it (dtype and quantization); no copy when they already match."""
    dtype = np.dtype(spec.dtype)
    if value.array.dtype == dtype and value.quantization == spec.quantization:
        return value.array
    real = value.real()
    q = spec.quantization
    if q is None:
        return real.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.rint(real / np.float32(q.scale)) + q.zero_point, info.min, info.max).astype(dtype)


class PartRunner:
    """A LiteRT interpreter for one part, fed from and feeding a tensor environment.

    Create it in the thread that will run it: LiteRT's worker threads inherit that thread's
    CPU affinity.
    """

    def __init__(self, part: Part, artifacts_dir: str | Path, threads: int | None = None) -> None:
        from ..lazy import litert_interpreter, silenced_stderr

        self.part = part
        path = artifact_path(artifacts_dir, part.file, f"manifest part {part.name!r} file")
        if not path.is_file():
            raise InputFileError(f"{path}: artifact of part {part.name!r} is missing")
        if path.suffix.lower() == ".onnx":
            self.runner = onnx_runner(path, threads or part.threads)
            return
        try:
            with _QUIET, silenced_stderr():  # LiteRT's "Created ... XNNPACK delegate" line
                self.interpreter = litert_interpreter()(model_path=str(path), num_threads=threads or part.threads)
                self.interpreter.allocate_tensors()  # unresolved custom operators fail here
                self.runner = self.interpreter.get_signature_runner("serving_default")
        except (ValueError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelFormatError(f"{path}: LiteRT cannot load it ({first}); re-export the plan "
                                   "(a custom operator needs a runtime with its kernel)") from None

    def __call__(self, env: dict[str, Value]) -> dict[str, Value]:
        """Run on the tensors of ``env`` (by tensor name); return the part's outputs."""
        feeds = {t.signature_name: convert_tensor(env[t.name], t) for t in self.part.inputs}
        res = self.runner(**feeds)
        return {t.name: Value(np.array(res[t.signature_name]), t.quantization) for t in self.part.outputs}

    def warm_up(self) -> None:
        """One invocation on zeros (first-call allocations stay out of the timings)."""
        from ..lazy import silenced_stderr

        with _QUIET, silenced_stderr():
            self.runner(**{t.signature_name: np.zeros(t.shape, np.dtype(t.dtype)) for t in self.part.inputs})


def onnx_runner(path: Path, threads: int) -> Any:
    """A callable ``runner(**feeds) -> {output name: array}`` over an onnxruntime session (the
    ONNX counterpart of LiteRT's signature runner)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, threads)
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph exceptions
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ModelFormatError(f"{path}: onnxruntime cannot load it ({first}); re-export the plan") from None
    names = [o.name for o in session.get_outputs()]

    def run(**feeds: np.ndarray) -> dict[str, np.ndarray]:
        return dict(zip(names, session.run(names, feeds), strict=True))

    return run


def as_frames(inputs: Any, spec: TensorInfo, where: str) -> np.ndarray:
    """Inputs for one network input as frames ``[N, *shape[1:]]`` of its dtype (float32 for
    image inputs, integers for token/byte inputs of model files)."""
    a = np.asarray(inputs)
    want = tuple(spec.shape[1:])
    if a.ndim == len(want):
        a = a[None]
    if tuple(a.shape[1:]) != want or a.shape[0] < 1:
        raise InputFileError(f"{where}: input has shape {list(a.shape)}; expected [N, "
                             f"{', '.join(map(str, want))}] (or one frame [{', '.join(map(str, want))}]) "
                             f"for network input {spec.name!r}")
    if not np.issubdtype(a.dtype, np.number):
        raise InputFileError(f"{where}: input has dtype {a.dtype}; expected numbers")
    return a.astype(np.dtype(spec.dtype), copy=False)


def load_input(path: str | Path, spec: TensorInfo, frames: int | None = None) -> np.ndarray:
    """Frames from an ``.npy`` file (at most ``frames`` of them are read), checked against the
    network input."""
    from ..npyfile import npy_member, read_rows

    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{p}: no such input file; give an .npy array of frames")
    m = npy_member(p)
    many = len(m.shape) == len(spec.shape) and frames is not None and m.shape[0] > frames
    return as_frames(read_rows(p, m, range(frames) if many and frames is not None else None, "input frames"),
                     spec, str(p))
