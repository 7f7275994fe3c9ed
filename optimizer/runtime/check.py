"""``dnnplan run --check``: do the deployed parts compute what the single-file model computes?

The parts run as :func:`optimizer.runtime.pipeline.run_plan` runs them (threaded pipeline, the
tail of a split over a real loopback socket); the single-file reference model runs on the same
input frames with LiteRT (``.tflite``) or onnxruntime (``.onnx``). The reference is the model
file the plan was made from (its SHA-256 must be the plan's), or the single-file INT8 model an
export shipped (``dnnplan export`` keeps it unless ``--no-reference``).

Per network output: top-1 agreement (share of frames whose arg-max over the flattened output
is the same), the largest absolute difference, and the signal-to-quantization-noise ratio
``SQNR = 10 log10(sum(ref^2) / sum((ref - parts)^2))`` dB (the fidelity measure of
Jacob et al. 2018 and of TFLite's quantization debugger; null when the outputs are equal).
When the server sends an SSD head's best anchors (``split.result: topk``) one row compares the
best detection (anchor and class, and its score) with the reference's reduced the same way.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, SchemaError
from ..fileio import sha256_file
from ..plan.manifest import Manifest, Quantization, TensorInfo, artifact_path
from .tensors import Value, convert_tensor


@dataclass
class OutputCheck:
    """Agreement of one network output between the parts and the reference."""

    name: str
    top1_agreement: float
    max_abs_diff: float
    sqnr_db: float | None


@dataclass
class CheckReport:
    """What ``--check`` found (``passed``: every output agrees at least ``min_agreement``)."""

    reference: str
    frames: int
    min_agreement: float
    agreement: float
    passed: bool
    outputs: list[OutputCheck]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_outputs(name: str, parts: np.ndarray, ref: np.ndarray) -> OutputCheck:
    """Top-1 agreement, max |diff| and SQNR of ``parts`` against ``ref`` (both ``[N, ...]``),
    accumulated frame by frame in float64: a 640x640 SSD's class logits are 4.7 M values per frame,
    and whole-array float64 copies of 20 frames took 3 GB."""
    p, r = parts.reshape(len(parts), -1), ref.reshape(len(ref), -1)
    same, worst, signal, noise = 0, 0.0, 0.0, 0.0
    for pi, ri in zip(p, r, strict=True):
        pf, rf = pi.astype(np.float64), ri.astype(np.float64)
        same += int(np.argmax(pf) == np.argmax(rf))
        diff = rf - pf
        worst = max(worst, float(np.max(np.abs(diff)))) if diff.size else worst
        signal += float(np.dot(rf, rf))
        noise += float(np.dot(diff, diff))
    return OutputCheck(name, same / max(len(p), 1), worst, _sqnr_from(signal, noise))


def _sqnr_db(ref: np.ndarray, test: np.ndarray) -> float | None:
    """``10 log10(sum(ref^2) / sum((ref - test)^2))`` dB; None when they are equal."""
    return _sqnr_from(float(np.sum(ref ** 2)), float(np.sum((ref - test) ** 2)))


def _sqnr_from(signal: float, noise: float) -> float | None:
    """``10 log10(signal / noise)`` dB from the summed squares; None without noise."""
    return None if noise == 0 else 10 * math.log10(max(signal, 1e-300) / noise)


def compare_detections(parts: dict[str, np.ndarray], ref_boxes: np.ndarray, ref_logits: np.ndarray,
                       k: int) -> OutputCheck:
    """A top-k split against the reference's raw head outputs reduced the same way
    (:func:`optimizer.runtime.detections.topk_detections`): top-1 agreement = share of frames
    whose best detection has the same anchor and class; max |diff| and SQNR of the best score."""
    from .detections import ANCHOR, CLASS, SCORE, topk_detections

    ref = [topk_detections(b, lg, k) for b, lg in zip(ref_boxes, ref_logits)]
    same = [int(parts[ANCHOR][i].ravel()[0]) == int(r[ANCHOR].ravel()[0])
            and int(parts[CLASS][i].ravel()[0]) == int(r[CLASS].ravel()[0]) for i, r in enumerate(ref)]
    got = np.array([parts[SCORE][i].ravel()[0] for i in range(len(ref))], dtype=np.float64)
    want = np.array([r[SCORE].ravel()[0] for r in ref], dtype=np.float64)
    return OutputCheck(f"detections (top-1 of the best {k} anchors)", float(np.mean(same)),
                       float(np.max(np.abs(want - got))), _sqnr_db(want, got))


def reference_file(manifest: Manifest, artifacts_dir: Path) -> Path:
    """The single-file model to compare against (see the module docstring)."""
    src = Path(manifest.model.source or "")
    if src.suffix.lower() in (".tflite", ".onnx"):
        if not src.is_file():
            raise ConfigError(f"--check: the plan's model file {src} is missing; the reference run needs it")
        digest = sha256_file(src)
        if manifest.model.sha256 and digest != manifest.model.sha256:
            raise SchemaError(f"--check: {src} (sha256 {digest[:12]}...) is not the model the artifacts in "
                              f"{artifacts_dir} were cut from ({manifest.model.sha256[:12]}...); export again")
        return src
    if manifest.reference is not None:
        return artifact_path(artifacts_dir, manifest.reference.file, "manifest field reference.file")
    raise ConfigError(f"--check: {artifacts_dir} has no single-file reference model; check exports of "
                      ".tflite/.onnx models, or export again without --no-reference")


def run_reference(path: Path, manifest: Manifest, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference model's outputs (float32, dequantized) frame by frame, keyed like the
    manifest's network outputs (matched by position)."""
    n = len(next(iter(inputs.values())))
    if path.suffix.lower() == ".onnx":
        from .tensors import onnx_runner

        run = onnx_runner(path, 1)
        rows = [run(**{t.name: inputs[t.name][i:i + 1] for t in manifest.inputs}) for i in range(n)]
        return {t.name: np.concatenate([np.asarray(r[t.name], np.float32) for r in rows])
                for t in manifest.outputs}
    from ..lazy import litert_interpreter, silenced_stderr

    with silenced_stderr():
        interp = litert_interpreter()(model_path=str(path), num_threads=1)
        if manifest.model.input_shapes:  # a dynamic model runs at the shapes it was exported at
            for d, spec in zip(interp.get_input_details(), manifest.inputs, strict=False):
                interp.resize_tensor_input(d["index"], list(spec.shape))
        interp.allocate_tensors()
    ins, outs = interp.get_input_details(), interp.get_output_details()
    if len(ins) != len(manifest.inputs) or len(outs) != len(manifest.outputs):
        raise SchemaError(f"--check: {path.name} has {len(ins)} inputs/{len(outs)} outputs; the artifacts "
                          f"have {len(manifest.inputs)}/{len(manifest.outputs)}; export again")
    result: dict[str, list[np.ndarray]] = {t.name: [] for t in manifest.outputs}
    outs = _match_outputs(outs, manifest.outputs)
    for i in range(n):
        for d, spec in zip(ins, manifest.inputs, strict=True):
            info = TensorInfo(name=spec.name, shape=[int(s) for s in d["shape"]], dtype=np.dtype(d["dtype"]).name,
                              quantization=_quant(d))
            interp.set_tensor(d["index"], convert_tensor(Value(inputs[spec.name][i:i + 1]), info))
        interp.invoke()
        for d, spec in zip(outs, manifest.outputs, strict=True):
            result[spec.name].append(Value(np.array(interp.get_tensor(d["index"])), _quant(d)).real())
    return {k: np.concatenate(v) for k, v in result.items()}


def _match_outputs(details: list[dict[str, Any]], specs: list[TensorInfo]) -> list[dict[str, Any]]:
    """The reference's output details in the order of ``specs``: by shape when every shape is
    distinct (a converter may order a model's outputs differently, e.g. an SSD's class logits
    before its box encodings), else by position."""
    shapes = [tuple(int(v) for v in d["shape"]) for d in details]
    want = [tuple(t.shape) for t in specs]
    if len(set(shapes)) == len(shapes) and sorted(shapes) == sorted(want):
        return [details[shapes.index(w)] for w in want]
    return details


def _quant(detail: dict[str, Any]) -> Quantization | None:
    scale, zp = detail["quantization"]
    return Quantization(scale=float(scale), zero_point=int(zp)) if scale else None


def check_outputs(manifest: Manifest, artifacts_dir: Path, inputs: dict[str, np.ndarray],
                  parts_out: dict[str, np.ndarray], min_agreement: float) -> CheckReport:
    """Compare the parts' outputs on ``inputs`` with the reference model's."""
    ref_path = reference_file(manifest, artifacts_dir)
    ref = run_reference(ref_path, manifest, inputs)
    topk = manifest.wire.result if manifest.wire is not None else None
    if topk is not None:
        outs = [compare_detections(parts_out, ref[topk.boxes], ref[topk.logits], topk.k)]
    else:
        outs = [compare_outputs(t.name, parts_out[t.name], ref[t.name]) for t in manifest.outputs]
    agreement = min(o.top1_agreement for o in outs)
    return CheckReport(reference=str(ref_path), frames=len(next(iter(inputs.values()))),
                       min_agreement=min_agreement, agreement=agreement,
                       passed=agreement >= min_agreement, outputs=outs)
