"""Bounded reads of ``.npy`` and ``.npz`` files: sizes from their headers, only the rows needed.

An ``.npz`` is a zip of ``.npy`` members, each a header (dtype, shape, order) and the raw data.
A few kilobytes of deflated zeros can declare gigabytes, so :func:`npz_members` reads only the
zip directory and each member's header (never the data), refuses object arrays (pickles) and a
member whose header and zip entry disagree on its size, and :func:`read_rows` then streams one
member and keeps only the rows asked for (calibration takes ``--samples`` of a larger file).
Whole arrays are read only after :func:`optimizer.memory.check_fits` approved their size.
"""

from __future__ import annotations

import contextlib
import math
import os
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from .errors import InputFileError
from .memory import check_fits

#: the largest ``.npy`` header read (numpy's own default limit)
MAX_HEADER_BYTES = 10_000


@dataclass(frozen=True)
class NpyMember:
    """One array of an ``.npy``/``.npz`` file, from its header: name, shape, dtype, order, and
    where its data starts in the member (``offset``)."""

    name: str
    member: str  # the zip entry ("" for an .npy file)
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fortran: bool
    offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def row_bytes(self) -> int:
        """Bytes of one entry along the first axis."""
        return math.prod(self.shape[1:]) * self.dtype.itemsize

    def describe(self) -> str:
        return f"{self.name} {list(self.shape)} {self.dtype.name}"


def _header(fh: IO[bytes], where: str) -> tuple[tuple[int, ...], np.dtype[Any], bool, int]:
    """(shape, dtype, fortran order, data offset) of the ``.npy`` stream ``fh``."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read(fh, max_header_size=MAX_HEADER_BYTES)
    except (ValueError, OSError, EOFError) as exc:
        raise InputFileError(f"{where}: not a readable .npy array ({exc})") from None
    if dtype.hasobject:
        raise InputFileError(f"{where}: holds Python objects (a pickle), which are never loaded; save plain "
                             "numeric arrays")
    return tuple(int(d) for d in shape), dtype, bool(fortran), fh.tell()


def npz_members(path: str | os.PathLike[str]) -> dict[str, NpyMember]:
    """The arrays of an ``.npz`` by name, from the zip directory and the member headers only.

    Raises
    ------
    InputFileError
        Not a zip, a member that is not an ``.npy`` array or holds objects, or a member whose
        header declares another size than its zip entry (a damaged or crafted file).
    """
    p = Path(path)
    out: dict[str, NpyMember] = {}
    try:
        with zipfile.ZipFile(p) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    continue
                where = f"{p} member {info.filename}"
                with zf.open(info) as fh:
                    shape, dtype, fortran, offset = _header(fh, where)
                m = NpyMember(info.filename.removesuffix(".npy"), info.filename, shape, dtype, fortran, offset)
                if info.file_size != offset + m.nbytes:
                    raise InputFileError(f"{where}: its header declares {m.describe()} ({m.nbytes:,} bytes) but "
                                         f"the entry holds {info.file_size - offset:,}; the file is damaged")
                out[m.name] = m
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputFileError(f"{p}: not a readable .npz file ({exc})") from None
    return out


def npy_member(path: str | os.PathLike[str]) -> NpyMember:
    """The array of an ``.npy`` file, from its header only (its size checked against the file's)."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            shape, dtype, fortran, offset = _header(fh, str(p))
    except OSError as exc:
        raise InputFileError(f"{p}: cannot read ({exc.strerror or exc})") from None
    m = NpyMember(p.stem, "", shape, dtype, fortran, offset)
    if p.stat().st_size < offset + m.nbytes:
        raise InputFileError(f"{p}: its header declares {m.describe()} ({m.nbytes:,} bytes) but the file holds "
                             f"{p.stat().st_size - offset:,}; the file is truncated")
    return m


def read_rows(path: str | os.PathLike[str], m: NpyMember, rows: Sequence[int] | np.ndarray | None = None,
              what: str = "array") -> np.ndarray:
    """Rows ``rows`` (indices along the first axis, any order) of member ``m`` of ``path``, or the
    whole array (``None``). Only the rows asked for are kept, and their total size is checked
    against the available memory first."""
    p = Path(path)
    idx = None if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
    whole = idx is None or m.fortran or not m.shape
    check_fits(m.nbytes if whole else len(idx) * m.row_bytes, f"{what} {m.describe()} of {p}",
               "give a smaller file or fewer samples")
    if whole:
        arr = np.empty(m.shape, dtype=m.dtype, order="F" if m.fortran else "C")
        with _at_data(p, m) as fh:
            _read_into(fh, arr, p)
        return arr if idx is None else arr[_checked(idx, m, p)]
    out = np.empty((len(idx), *m.shape[1:]), dtype=m.dtype)
    for k, row in iter_rows(p, m, idx):
        out[k] = row
    return out


def iter_rows(path: str | os.PathLike[str], m: NpyMember, rows: Sequence[int] | np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``(k, rows[k]-th row)`` of a C-ordered member, in file order: the member is streamed
    forward once (a deflated member is never rewound), one row held at a time."""
    p = Path(path)
    idx = _checked(np.asarray(rows, dtype=np.int64).reshape(-1), m, p)
    if m.fortran or not m.shape:
        raise InputFileError(f"{p}: {m.describe()} is not stored row by row (Fortran order or a scalar)")
    with _at_data(p, m) as fh:
        pos = 0
        for k in np.argsort(idx, kind="stable"):
            row = int(idx[k])
            if row != pos:
                fh.seek(m.offset + row * m.row_bytes)
            one = np.empty(m.shape[1:], dtype=m.dtype)
            _read_into(fh, one, p)
            pos = row + 1
            yield int(k), one


def _checked(idx: np.ndarray, m: NpyMember, p: Path) -> np.ndarray:
    n = m.shape[0] if m.shape else 1
    if len(idx) and (idx.min() < 0 or idx.max() >= n):
        raise InputFileError(f"{p}: {m.describe()} has no row {int(idx.max())}")
    return idx


@contextlib.contextmanager
def _at_data(path: Path, m: NpyMember) -> Iterator[IO[bytes]]:
    """The data stream of ``m`` (the ``.npy`` file, or its member of the ``.npz``) at its first
    data byte; read errors become one-line :class:`InputFileError`."""
    try:
        with contextlib.ExitStack() as stack:
            if m.member:
                zf = stack.enter_context(zipfile.ZipFile(path))
                fh: IO[bytes] = stack.enter_context(zf.open(m.member))
            else:
                fh = stack.enter_context(open(path, "rb"))
            fh.seek(m.offset)
            yield fh
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputFileError(f"{path}: cannot read {m.describe()} ({exc})") from None


def _read_into(fh: IO[bytes], out: np.ndarray, where: Path) -> None:
    """Fill the contiguous array ``out`` from ``fh`` (a one-line error when the data ends early)."""
    view = memoryview(out.reshape(-1, order="A").view(np.uint8))
    got = 0
    while got < len(view):
        k = fh.readinto(view[got:])  # type: ignore[attr-defined]
        if not k:
            raise InputFileError(f"{where}: the data ends {len(view) - got:,} bytes early; the file is truncated")
        got += k
