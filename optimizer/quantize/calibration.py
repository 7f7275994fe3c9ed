"""Calibration and held-out input sets for post-training quantization.

Park & Ha (IEEE Access 2024) calibrate on 1000 samples drawn at random from the training
distribution, normalised and resized exactly like inference inputs (docs/METHODS.md section 1). Four
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

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputFileError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".gif", ".webp", ".tif", ".tiff")

#: samples an ``.npz`` calibration file may hold (they are permuted in memory)
MAX_NPZ_SAMPLES = 1 << 24
#: ``.npz`` rows read per pass when they are copied into a work directory
NPZ_COPY_ROWS = 64

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
    """Calibration and held-out samples, produced on demand batch by batch (never all held).

    Sample ``i`` of a set is the same whichever batch asks for it and whichever process
    (:meth:`batch` is all a calibrating helper needs: the set pickles as a recipe, a few file
    names or seeds, not as data). Synthetic and sample-image draws use one generator per sample,
    ``numpy.random.default_rng([seed, set, i])`` (set 0 = calibration, 1 = held-out), so the two
    sets are independent and neither depends on the other's size; image folders and ``.npz``
    files are permuted once with ``default_rng(seed)`` and read per sample (``.npz`` arrays
    memory-mapped from ``.npy`` copies when a work directory is given).
    """

    specs: list[InputSpec]
    preprocess: dict[str, Any] | None
    kind: str  # "synthetic", "sample-images", "images", "npz"
    seed: int
    counts: dict[str, int]  # "calib"/"heldout" -> samples
    source: str
    notes: list[str] = field(default_factory=list)
    files: dict[str, list[Path]] = field(default_factory=dict)  # images: per set, in draw order
    npz: dict[str, Any] = field(default_factory=dict)  # npz: input name -> .npy path or array
    rows: dict[str, np.ndarray] = field(default_factory=dict)  # npz: per set, rows in draw order

    def size(self, which: str = "calib") -> int:
        """Number of ``calib`` or ``heldout`` samples."""
        return self.counts[which]

    def frame_bytes(self) -> int:
        """Bytes of one sample (all inputs)."""
        return sum(int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in self.specs)

    def batch(self, which: str, start: int, stop: int) -> dict[str, np.ndarray]:
        """Samples ``start``..``stop`` of set ``which`` as one array per input (first axis = samples)."""
        stop = min(stop, self.size(which))
        part = 0 if which == "calib" else 1
        if self.kind == "images":
            return _images_to_arrays(self.files[which][start:stop], self.specs, self.preprocess)
        if self.kind == "npz":
            rows = self.rows[which][start:stop]
            dtypes = {sp.name: sp.dtype for sp in self.specs}
            return {k: np.asarray((np.load(v, mmap_mode="r") if isinstance(v, Path) else v)[rows],
                                  dtype=dtypes[k]) for k, v in self.npz.items()}
        out: dict[str, np.ndarray] = {s.name: np.empty((stop - start, *s.shape), s.dtype) for s in self.specs}
        for i in range(start, stop):
            rng = np.random.default_rng([self.seed, part, i])
            if self.kind == "sample-images":
                one = _sample_images(self.specs, self.preprocess, 1, rng)
            else:
                one = {s.name: _synthetic(s, self.preprocess, 1, rng) for s in self.specs}
            for k, v in one.items():
                out[k][i - start] = v[0]
        return out

    def batches(self, which: str = "calib", size: int = 1) -> Iterator[dict[str, np.ndarray]]:
        """The set in consecutive batches of ``size`` samples (the last one may be shorter)."""
        for start in range(0, self.size(which), size):
            yield self.batch(which, start, start + size)

    def samples(self, which: str = "calib") -> Iterator[dict[str, np.ndarray]]:
        """Per-sample dicts with a batch axis of 1 (a converter's representative dataset), one at a time."""
        return self.batches(which, 1)

    def arrays(self, which: str = "calib") -> dict[str, np.ndarray]:
        """The whole set stacked, one array per input: for small sets and inspection only."""
        return self.batch(which, 0, self.size(which))



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
                     heldout: int = 100, seed: int = 0, workdir: Path | None = None) -> CalibrationSet:
    """Describe calibration and held-out sets for a model with inputs ``specs`` (no sample is
    produced here; see :class:`CalibrationSet`).

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
    workdir
        Where an ``.npz`` source's arrays are unpacked as ``.npy`` files to be memory-mapped
        (``None``: they are read into memory).
    """
    check_calibration(source, samples, heldout)
    src = str(source)
    counts = {"calib": samples, "heldout": heldout}
    if src == "synthetic":
        return CalibrationSet(specs, preprocess, "synthetic", seed, counts, "synthetic",
                              ["synthetic calibration data: accuracy figures are not meaningful"])
    if src == "sample-images":
        _sample_image_spec(specs, preprocess)
        return CalibrationSet(specs, preprocess, "sample-images", seed, counts,
                              "sample-images (random crops of scikit-learn's china.jpg and flower.jpg)",
                              ["sample-images: real photographs, not the model's training distribution"])
    rng = np.random.default_rng(seed)
    path = Path(src)
    if path.is_dir():
        files = _image_files(path)
        n_calib, n_held, notes = _split_counts(len(files), samples, heldout, f"{src}")
        order = rng.permutation(len(files))
        _images_to_arrays([], specs, preprocess)  # refuses a model without one image input now
        chosen = {"calib": [files[i] for i in order[n_held:n_held + n_calib]],
                  "heldout": [files[i] for i in order[:n_held]]}
        return CalibrationSet(specs, preprocess, "images", seed, {"calib": n_calib, "heldout": n_held},
                              f"{src} ({len(files)} images)", notes, files=chosen)
    if path.suffix.lower() == ".npz":
        members = _npz_members(path, specs)
        total = next(iter(members.values())).shape[0]
        if total > MAX_NPZ_SAMPLES:
            raise InputFileError(f"{src}: {total:,} samples; calibration draws from at most {MAX_NPZ_SAMPLES:,} "
                                 "(its permutation is held in memory): give a file of fewer samples")
        n_calib, n_held, notes = _split_counts(total, samples, heldout, src)
        order = rng.permutation(total)
        drawn = order[:n_held + n_calib]  # held-out rows first: only these are read
        stored = {name: _npz_rows(path, m, drawn, workdir) for name, m in members.items()}
        rows = {"calib": np.arange(n_held, n_held + n_calib), "heldout": np.arange(n_held)}
        return CalibrationSet(specs, preprocess, "npz", seed, {"calib": n_calib, "heldout": n_held},
                              f"{src} ({total} samples)", notes, npz=stored, rows=rows)
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


@functools.lru_cache(maxsize=1)
def _photographs() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_sample_images

    return tuple(load_sample_images().images)


def _sample_image_spec(specs: list[InputSpec], preprocess: dict[str, Any] | None) -> InputSpec:
    spec = _image_spec(specs, preprocess)
    pre = preprocess or DEFAULT_PREPROCESS
    if (spec.shape[0] if pre.get("layout", "NHWC") == "NCHW" else spec.shape[2]) not in (1, 3):
        raise InputFileError(f"calibration images need 1 or 3 channels; input {spec.describe()}")
    return spec


def _sample_images(specs: list[InputSpec], preprocess: dict[str, Any] | None, n: int,
                   rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` real photographs for calibration: random crops of scikit-learn's sample images.

    The two photographs scikit-learn ships (``load_sample_images``: china.jpg, flower.jpg, 427x640)
    are cut into seeded random crops (10-100 % of the area, aspect ratio 3/4-4/3, as in
    Inception-style augmentation, Szegedy et al. 2015), flipped left-right with probability 1/2,
    then resized and normalised exactly like images from a folder.
    """
    from PIL import Image

    spec = _sample_image_spec(specs, preprocess)
    pre = preprocess or DEFAULT_PREPROCESS
    photos = _photographs()
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


def _npz_members(path: Path, specs: list[InputSpec]) -> dict[str, Any]:
    """The ``.npz`` member of each model input (:class:`optimizer.npyfile.NpyMember`, from the
    headers only: no data is read), checked against the input's shape and kind."""
    from ..npyfile import npz_members

    found = npz_members(path)
    expected = "; ".join(s.describe() for s in specs)
    if not found:
        raise InputFileError(f"{path}: no arrays in .npz; expected {expected}")
    names = [s.name for s in specs]
    if set(found) == set(names):
        pairs = [(s, s.name, found[s.name]) for s in specs]
    elif len(found) == len(specs):
        pairs = [(s, k, found[k]) for s, k in zip(specs, found)]
    else:
        got = "; ".join(m.describe() for m in found.values())
        raise InputFileError(f"{path}: {len(found)} arrays ({got}) for {len(specs)} model inputs; "
                             f"expected {expected}")
    members: dict[str, Any] = {}
    for spec, key, m in pairs:
        want = np.dtype(spec.dtype)
        kind_ok = (np.issubdtype(m.dtype, np.floating) if np.issubdtype(want, np.floating)
                   else np.issubdtype(m.dtype, np.integer))
        if len(m.shape) != len(spec.shape) + 1 or tuple(m.shape[1:]) != spec.shape or not kind_ok:
            raise InputFileError(
                f"{path}: array {key!r} has shape {list(m.shape)} {m.dtype}; input {spec.name!r} "
                f"expects [N, {', '.join(map(str, spec.shape))}] {want.name} (preprocessed values)")
        members[spec.name] = m  # cast to the input's dtype batch by batch
    counts = sorted({m.shape[0] for m in members.values()})
    if len(counts) != 1:
        raise InputFileError(f"{path}: arrays have different sample counts {counts}")
    return members


def _npz_rows(path: Path, member: Any, rows: np.ndarray, workdir: Path | None) -> Any:
    """Rows ``rows`` of an ``.npz`` member, in that order: in memory, or (with ``workdir``) written
    row by row into a ``.npy`` file there and returned as its path (memory-mapped per batch).
    Only these rows are read or written, whatever size the file declares."""
    from ..npyfile import iter_rows, read_rows

    if workdir is None or member.fortran:
        arr = read_rows(path, member, rows, "calibration array")
        if workdir is None:
            return arr
    out_dir = workdir / f"calib-{path.stem}"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{member.name.replace('/', '_')}-{len(list(out_dir.iterdir()))}.npy"
    np.lib.format.open_memmap(target, mode="w+", dtype=member.dtype, shape=(len(rows), *member.shape[1:])).flush()
    offset = target.stat().st_size - len(rows) * member.row_bytes
    with open(target, "r+b") as fh:  # plain writes at each row's place: nothing mapped, nothing held
        for k, row in (enumerate(arr) if member.fortran else iter_rows(path, member, rows)):
            os.pwrite(fh.fileno(), np.ascontiguousarray(row).tobytes(), offset + k * member.row_bytes)
    return target
