"""Calibration and held-out input sets for post-training quantization.

Park & Ha (IEEE Access 2024) calibrate on 1000 samples drawn at random from the training
distribution, normalised and resized exactly like inference inputs (METHODS.md §1). Four
sources are accepted:

* a directory of images (searched recursively), decoded with Pillow, converted to the model's
  colour order, resized to the model's input size and normalised as ``x = (pixel - mean) / std``
  from the zoo builder's ``PREPROCESS`` declaration;
* an ``.npz`` file holding one array per model input (first axis = samples), already
  preprocessed;
* ``sample-images``: seeded random crops and flips of the real photographs scikit-learn ships
  (:func:`sklearn.datasets.load_sample_images`), resized and normalised like a folder's images:
  real image statistics with no download;
* ``synthetic``: random values in the preprocessed range (or random token ids for text models);
  accuracy figures are then not meaningful.

Samples are drawn with ``numpy.random.default_rng(seed)``; the same seed gives the same sets.
A disjoint held-out set (never used for calibration) is drawn for the fidelity report.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError
from ..fileio import read_npz

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".gif", ".webp", ".tif", ".tiff")

#: Preprocessing assumed when a model declares none: pixel values scaled to [0, 1].
DEFAULT_PREPROCESS: dict[str, Any] = {"layout": "NHWC", "color": "RGB", "mean": [0.0], "std": [255.0]}


@dataclass(frozen=True)
class InputSpec:
    """One model input: signature name, shape without the batch axis, numpy dtype name."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def describe(self) -> str:
        return f"{self.name} {list(self.shape)} {self.dtype}"


@dataclass
class CalibrationSet:
    """Calibration and held-out samples, one array per input name (first axis = samples)."""

    calib: dict[str, np.ndarray]
    heldout: dict[str, np.ndarray]
    source: str
    notes: list[str] = field(default_factory=list)

    def size(self, which: str = "calib") -> int:
        """Number of ``calib`` or ``heldout`` samples."""
        return _count(self.calib if which == "calib" else self.heldout)

    def samples(self, which: str = "calib") -> list[dict[str, np.ndarray]]:
        """Per-sample dicts with a batch axis of 1 (the converter's representative dataset)."""
        arrays = self.calib if which == "calib" else self.heldout
        n = _count(arrays)
        return [{k: v[i:i + 1] for k, v in arrays.items()} for i in range(n)]


def _count(arrays: dict[str, np.ndarray]) -> int:
    return int(next(iter(arrays.values())).shape[0]) if arrays else 0


def check_calibration(source: str | os.PathLike[str], samples: int, heldout: int) -> None:
    """Refuse a bad calibration request before any model is opened: counts out of range, or a
    source that is neither a keyword nor an existing directory or file."""
    if samples < 1:
        raise ConfigError(f"--samples must be >= 1, got {samples}")
    if heldout < 0:
        raise ConfigError(f"held-out sample count must be >= 0, got {heldout}")
    src = str(source)
    if src not in ("synthetic", "sample-images") and not Path(src).exists():
        raise InputFileError(f"{src}: calibration source not found; give a directory of images, "
                             "an .npz file, 'sample-images' or 'synthetic'")


def load_calibration(source: str | os.PathLike[str], specs: list[InputSpec],
                     preprocess: dict[str, Any] | None, samples: int = 1000,
                     heldout: int = 100, seed: int = 0) -> CalibrationSet:
    """Build calibration and held-out sets for a model with inputs ``specs``.

    Parameters
    ----------
    source
        ``"synthetic"``, ``"sample-images"``, a directory of images or an ``.npz`` file.
    specs
        The model's inputs (shape without batch axis).
    preprocess
        The model's ``PREPROCESS`` declaration (``None``: pixels scaled to [0, 1]).
    samples
        Calibration samples to draw (fewer if the source has fewer; a note says so).
    heldout
        Held-out samples for fidelity; drawn disjoint from the calibration samples.
    seed
        Seed of the random draw.
    """
    check_calibration(source, samples, heldout)
    rng = np.random.default_rng(seed)
    src = str(source)
    if src == "synthetic":
        arrays = {s.name: _synthetic(s, preprocess, samples + heldout, rng) for s in specs}
        return CalibrationSet({k: v[:samples] for k, v in arrays.items()},
                              {k: v[samples:] for k, v in arrays.items()}, "synthetic",
                              ["synthetic calibration data: accuracy figures are not meaningful"])
    if src == "sample-images":
        arrays = _sample_images(specs, preprocess, samples + heldout, rng)
        return CalibrationSet({k: v[:samples] for k, v in arrays.items()},
                              {k: v[samples:] for k, v in arrays.items()},
                              "sample-images (random crops of scikit-learn's china.jpg and flower.jpg)",
                              ["sample-images: real photographs, not the model's training distribution"])
    path = Path(src)
    if path.is_dir():
        files = _image_files(path)
        n_calib, n_held, notes = _split_counts(len(files), samples, heldout, f"{src}")
        order = rng.permutation(len(files))
        chosen_c = [files[i] for i in order[n_held:n_held + n_calib]]
        chosen_h = [files[i] for i in order[:n_held]]
        calib = _images_to_arrays(chosen_c, specs, preprocess)
        held = _images_to_arrays(chosen_h, specs, preprocess) if chosen_h else {}
        return CalibrationSet(calib, held, f"{src} ({len(files)} images)", notes)
    if path.suffix.lower() == ".npz":
        arrays = _load_npz(path, specs)
        total = _count(arrays)
        n_calib, n_held, notes = _split_counts(total, samples, heldout, src)
        order = rng.permutation(total)
        idx_h, idx_c = order[:n_held], order[n_held:n_held + n_calib]
        return CalibrationSet({k: v[idx_c] for k, v in arrays.items()},
                              {k: v[idx_h] for k, v in arrays.items()} if n_held else {},
                              f"{src} ({total} samples)", notes)
    raise InputFileError(f"{src}: calibration source must be a directory of images, an .npz file "
                         "or 'synthetic'")


def _split_counts(total: int, samples: int, heldout: int, src: str) -> tuple[int, int, list[str]]:
    """Calibration/held-out counts from ``total`` available samples (held-out kept disjoint)."""
    notes: list[str] = []
    if total == 0:
        raise InputFileError(f"{src}: no calibration samples found")
    if total >= samples + heldout:
        return samples, heldout, notes
    n_held = min(heldout, total // 5)
    n_calib = min(samples, total - n_held)
    notes.append(f"{src} has {total} samples: calibrating on {n_calib} (asked {samples}), "
                 f"{n_held} held out for fidelity")
    return n_calib, n_held, notes


def _synthetic(spec: InputSpec, preprocess: dict[str, Any] | None, n: int,
               rng: np.random.Generator) -> np.ndarray:
    shape = (n, *spec.shape)
    if np.issubdtype(np.dtype(spec.dtype), np.integer):
        vocab = int((preprocess or {}).get("vocab_size", 2))
        return rng.integers(0, vocab, size=shape).astype(spec.dtype)
    pre = preprocess or DEFAULT_PREPROCESS
    if pre.get("kind") == "tokens":
        return rng.integers(0, int(pre["vocab_size"]), size=shape).astype(spec.dtype)
    pixels = rng.uniform(0.0, 255.0, size=shape)
    mean, std = _mean_std(pre, spec)
    return ((pixels - mean) / std).astype(spec.dtype)


def _mean_std(pre: dict[str, Any], spec: InputSpec) -> tuple[np.ndarray, np.ndarray]:
    channels = spec.shape[0] if pre.get("layout", "NHWC") == "NCHW" else spec.shape[-1]
    mean = np.asarray(pre.get("mean", [0.0]), dtype=np.float64)
    std = np.asarray(pre.get("std", [1.0]), dtype=np.float64)
    if mean.size not in (1, channels) or std.size not in (1, channels):
        raise ConfigError(f"PREPROCESS mean/std have {mean.size}/{std.size} values; "
                          f"the input {spec.name} has {channels} channels")
    if pre.get("layout", "NHWC") == "NCHW":
        return mean.reshape(-1, 1, 1), std.reshape(-1, 1, 1)
    return mean, std


def _image_files(path: Path) -> list[Path]:
    try:
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read calibration directory ({exc.strerror})") from None
    if not files:
        raise InputFileError(f"{path}: no images ({', '.join(IMAGE_SUFFIXES[:4])}, ...) in "
                             "calibration directory")
    return files


def _image_spec(specs: list[InputSpec], preprocess: dict[str, Any] | None) -> InputSpec:
    if preprocess is not None and preprocess.get("kind") == "tokens":
        raise InputFileError("calibration images given for a text model (token inputs); "
                             "give an .npz of token ids or 'synthetic'")
    if len(specs) != 1 or len(specs[0].shape) != 3:
        found = "; ".join(s.describe() for s in specs)
        raise InputFileError(f"calibration images need one image input [H, W, C]; the model has {found}")
    return specs[0]


def _images_to_arrays(files: list[Path], specs: list[InputSpec],
                      preprocess: dict[str, Any] | None) -> dict[str, np.ndarray]:
    from PIL import Image, UnidentifiedImageError

    spec = _image_spec(specs, preprocess)
    pre = preprocess or DEFAULT_PREPROCESS
    c = spec.shape[0] if pre.get("layout", "NHWC") == "NCHW" else spec.shape[2]
    if c not in (1, 3):
        raise InputFileError(f"calibration images need 1 or 3 channels; input {spec.describe()}")
    out = np.empty((len(files), *spec.shape), dtype=spec.dtype)
    for i, f in enumerate(files):
        try:
            with Image.open(f) as img:
                out[i] = _normalised(img, spec, pre)
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise InputFileError(f"{f}: unreadable calibration image ({exc})") from None
    return {spec.name: out}


def _normalised(img: Any, spec: InputSpec, pre: dict[str, Any]) -> np.ndarray:
    """A Pillow image as one preprocessed model input: colour order, size, layout, (x - mean) / std."""
    from PIL import Image

    nchw = pre.get("layout", "NHWC") == "NCHW"
    c, h, w = spec.shape if nchw else (spec.shape[2], spec.shape[0], spec.shape[1])
    pix = np.asarray(img.convert("L" if c == 1 else "RGB").resize((w, h), Image.BILINEAR), dtype=np.float64)
    if c == 1:
        pix = pix[..., None]
    elif str(pre.get("color", "RGB")).upper() == "BGR":
        pix = pix[..., ::-1]
    if nchw:
        pix = pix.transpose(2, 0, 1)
    mean, std = _mean_std(pre, spec)
    return (pix - mean) / std


def _sample_images(specs: list[InputSpec], preprocess: dict[str, Any] | None, n: int,
                   rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` real photographs for calibration: random crops of scikit-learn's sample images.

    The two photographs scikit-learn ships (``load_sample_images``: china.jpg, flower.jpg, 427x640)
    are cut into seeded random crops (10-100 % of the area, aspect ratio 3/4-4/3, as in
    Inception-style augmentation, Szegedy et al. 2015), flipped left-right with probability 1/2,
    then resized and normalised exactly like images from a folder.
    """
    from PIL import Image
    from sklearn.datasets import load_sample_images

    spec = _image_spec(specs, preprocess)
    pre = preprocess or DEFAULT_PREPROCESS
    if (spec.shape[0] if pre.get("layout", "NHWC") == "NCHW" else spec.shape[2]) not in (1, 3):
        raise InputFileError(f"calibration images need 1 or 3 channels; input {spec.describe()}")
    photos = load_sample_images().images
    out = np.empty((n, *spec.shape), dtype=spec.dtype)
    for i in range(n):
        photo = photos[int(rng.integers(len(photos)))]
        ph, pw = photo.shape[:2]
        area = rng.uniform(0.1, 1.0) * ph * pw
        aspect = float(np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3))))
        ch = int(min(ph, max(8, round(np.sqrt(area / aspect)))))
        cw = int(min(pw, max(8, round(np.sqrt(area * aspect)))))
        y, x = int(rng.integers(ph - ch + 1)), int(rng.integers(pw - cw + 1))
        crop = photo[y:y + ch, x:x + cw]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        out[i] = _normalised(Image.fromarray(np.ascontiguousarray(crop)), spec, pre)
    return {spec.name: out}


def _load_npz(path: Path, specs: list[InputSpec]) -> dict[str, np.ndarray]:
    found = read_npz(path, "no such .npz calibration file")
    expected = "; ".join(s.describe() for s in specs)
    if not found:
        raise InputFileError(f"{path}: no arrays in .npz; expected {expected}")
    names = [s.name for s in specs]
    if set(found) == set(names):
        pairs = [(s, s.name, found[s.name]) for s in specs]
    elif len(found) == len(specs):
        pairs = [(s, k, found[k]) for s, k in zip(specs, found)]
    else:
        got = "; ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in found.items())
        raise InputFileError(f"{path}: {len(found)} arrays ({got}) for {len(specs)} model inputs; "
                             f"expected {expected}")
    arrays: dict[str, np.ndarray] = {}
    counts = set()
    for spec, key, arr in pairs:
        want = np.dtype(spec.dtype)
        kind_ok = (np.issubdtype(arr.dtype, np.floating) if np.issubdtype(want, np.floating)
                   else np.issubdtype(arr.dtype, np.integer))
        if arr.ndim != len(spec.shape) + 1 or tuple(arr.shape[1:]) != spec.shape or not kind_ok:
            raise InputFileError(
                f"{path}: array {key!r} has shape {list(arr.shape)} {arr.dtype}; input {spec.name!r} "
                f"expects [N, {', '.join(map(str, spec.shape))}] {want.name} (preprocessed values)")
        arrays[spec.name] = arr.astype(want, copy=False)
        counts.add(arr.shape[0])
    if len(counts) != 1:
        raise InputFileError(f"{path}: arrays have different sample counts {sorted(counts)}")
    return arrays
