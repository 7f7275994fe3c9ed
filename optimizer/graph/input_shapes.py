"""Input shapes given by the user: ``[NAME:]D0,D1,...`` → ``{name: full shape}``, checked against a model.

The textual form is onnxsim's and onnx2tf's ``--overwrite-input-shape name:1,3,640,640``
(https://github.com/daquexian/onnx-simplifier, https://github.com/PINTO0309/onnx2tf). A shape
is the input's full shape in the file's own layout, batch included. Without ``NAME`` the shape
applies to the model's only input. :func:`parse_input_shapes` reads the command line's
``--input-shape`` values and the batch/job field ``input_shape``; :func:`resolve_input_shapes`
matches them with the inputs a model declares (dims ``None`` where dynamic) and returns a
concrete shape for every input, or refuses with one line naming each input, its dims and an
example flag.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError, InputShapeNote
from ..memory import check_fits, gigabytes

InputShapes = dict[str, tuple[int, ...]]
ONLY_INPUT = ""  # key of a shape given without a name: the model's only input
FLAG = "--input-shape"
#: elements per input above which a shape is warned about (4 GB as float32 per frame)
LARGE_INPUT_ELEMENTS = 10**9
EXAMPLE_DIM = 640  # the example's size of a dynamic non-batch dim (onnx2tf's README uses 640)


def parse_input_shapes(value: Any, label: str = FLAG) -> InputShapes:
    """``["x:1,3,640,640"]`` (or one string, or ``{"x": [1, 3, 640, 640]}``) → ``{"x": (1, 3, 640, 640)}``.

    Parameters
    ----------
    value
        None, a ``[NAME:]D0,D1,...`` string, a list of them, or a mapping name → dims.
    label
        How the caller names the option in errors (``--input-shape``, ``input_shape``).

    Raises
    ------
    ConfigError
        A dim that is not an integer ≥ 1, an empty shape, or a name given twice.
    """
    if value is None:
        return {}
    if isinstance(value, Mapping):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in value.items()]
    else:
        texts = [value] if isinstance(value, str) else list(value)
        items = []
        for text in texts:
            name, sep, dims = str(text).strip().rpartition(":")
            items.append((name.strip() if sep else ONLY_INPUT, dims))
    out: InputShapes = {}
    for name, dims in items:
        shown = f"{name}:{dims}" if name else str(dims)
        if name in out:
            raise ConfigError(f"{label} {shown!r}: input {name or '(unnamed)'!r} is given twice; give one "
                              "shape per input")
        out[name] = _dims(dims, shown, label)
        if math.prod(out[name]) > LARGE_INPUT_ELEMENTS:
            warnings.warn(f"{label} {shown!r}: {math.prod(out[name]):,} elements per frame ("
                          f"{gigabytes(4 * math.prod(out[name]))} as float32), over {LARGE_INPUT_ELEMENTS:.0e}; "
                          "commands that hold frames of it refuse what does not fit in memory", stacklevel=2)
    if ONLY_INPUT in out and len(out) > 1:
        raise ConfigError(f"{label}: a shape without a name and named shapes both given; name every input, "
                          f"e.g. {label} x:1,3,640,640")
    return out


def _dims(dims: Any, shown: str, label: str) -> tuple[int, ...]:
    parts: Sequence[Any] = dims.split(",") if isinstance(dims, str) else dims
    try:
        values = tuple(int(str(p).strip()) for p in parts)
    except (TypeError, ValueError):
        values = ()
        parts = ["?"]
    if not values or any(str(p).strip() == "" for p in parts):
        raise ConfigError(f"{label} {shown!r}: expected [NAME:]D0,D1,... with integer sizes, e.g. "
                          f"{label} x:1,3,640,640")
    bad = [v for v in values if v < 1]
    if bad:
        raise ConfigError(f"{label} {shown!r}: size {bad[0]} is not positive; every dim must be >= 1")
    return values


def check_frames_fit(shapes: Mapping[str, Sequence[int]], frames: int, what: str, fix: str,
                     dtypes: Mapping[str, str] | None = None) -> None:
    """Refuse (:func:`optimizer.memory.check_fits`) ``frames`` frames of every input of ``shapes``
    (full shapes, batch included; ``dtypes`` by name, float32 by default) that do not fit in the
    available memory, naming the inputs, their size and the memory available."""
    import numpy as np

    types = {name: (dtypes or {}).get(name, "float32") for name in shapes}
    per_frame = sum(np.dtype(types[name]).itemsize * math.prod(dims) for name, dims in shapes.items())
    shown = ", ".join(f"{name or 'input'} {list(dims)} {types[name]}" for name, dims in shapes.items())
    check_fits(frames * per_frame, f"{what}: {frames} frame(s) of {shown} ({gigabytes(per_frame)} each)", fix)


def format_input_shapes(shapes: Mapping[str, Sequence[int]]) -> list[str]:
    """``{"x": (1, 3, 8, 8)}`` → ``["x:1,3,8,8"]`` (the flag's form, e.g. for a re-run hint)."""
    return [f"{name}:" * bool(name) + ",".join(str(d) for d in dims) for name, dims in shapes.items()]


def shapes_flag(shapes: Mapping[str, Sequence[int]]) -> str:
    """``{"x": (1, 3, 8, 8)}`` → ``"--input-shape x:1,3,8,8"`` (how messages show given shapes)."""
    return " ".join(f"{FLAG} {s}" for s in format_input_shapes(shapes))


def shape_refused(where: str, shapes: Mapping[str, Sequence[int]], reason: str) -> ConfigError:
    """The one-line error of input shapes the model cannot take (a Reshape, a fixed weight, an
    incompatible broadcast contradicts them), naming them and the reason."""
    return ConfigError(f"{where}: the model cannot take {shapes_flag(shapes)} ({reason}); give the shape it was "
                       "exported for")


def _shown(dims: Sequence[int | None]) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def resolve_input_shapes(given: InputShapes | None, declared: Mapping[str, Sequence[int | None]],
                         where: str) -> InputShapes:
    """A concrete full shape for every input of a model.

    Parameters
    ----------
    given
        From :func:`parse_input_shapes` (``{}`` or None: none given).
    declared
        The model's inputs in order: name → dims, ``None`` for a dynamic dim.
    where
        The model, for messages.

    Returns
    -------
    dict
        Every input → its shape. A dynamic leading (batch) dim that no shape fixes becomes 1,
        with an :class:`~optimizer.errors.InputShapeNote` warning.

    Raises
    ------
    ConfigError
        A name that is not an input, an unnamed shape for a model with several inputs, a rank
        or fixed dim the model does not have, a dynamic batch given as more than 1 (plans are
        per frame), or dynamic non-batch dims with no shape given.
    """
    given = dict(given or {})
    names = list(declared)
    if ONLY_INPUT in given:
        if len(names) != 1:
            raise ConfigError(f"{where}: {FLAG} {','.join(map(str, given[ONLY_INPUT]))} has no input name and the "
                              f"model has {len(names)} inputs ({', '.join(names)}); name one, e.g. "
                              f"{FLAG} {names[0] if names else 'x'}:{','.join(map(str, given[ONLY_INPUT]))}")
        given = {names[0]: given[ONLY_INPUT]}
    for name in given:
        if name not in declared:
            raise ConfigError(f"{where}: {FLAG} names {name!r}, which is not an input of the model; inputs: "
                              f"{', '.join(f'{n}{_shown(declared[n])}' for n in names)}")
    out: InputShapes = {}
    missing: list[str] = []
    batch_only: list[str] = []
    for name in names:
        dims = list(declared[name])
        if name in given:
            shape = given[name]
            if len(shape) != len(dims):
                raise ConfigError(f"{where}: {FLAG} {name}:{','.join(map(str, shape))} has rank {len(shape)}, but "
                                  f"input {name!r}{_shown(dims)} has rank {len(dims)}")
            for k, (d, s) in enumerate(zip(dims, shape, strict=True)):
                if d is not None and d != s:
                    raise ConfigError(f"{where}: {FLAG} {name}:{','.join(map(str, shape))}: dim {k} of input "
                                      f"{name!r}{_shown(dims)} is fixed at {d} in the model, not {s}")
            if len(dims) > 1 and dims[0] is None and shape[0] != 1:
                raise ConfigError(f"{where}: {FLAG} {name}:{','.join(map(str, shape))}: batch {shape[0]}; plans are "
                                  f"per frame, give batch 1 ({name}:1,{','.join(map(str, shape[1:]))})")
            out[name] = tuple(shape)
        elif any(d is None for d in dims[1:]):
            missing.append(name)
        else:
            if dims and dims[0] is None:
                batch_only.append(name)
            out[name] = tuple(1 if d is None else int(d) for d in dims)
    if missing:
        examples = " ".join(
            f"{FLAG} {n}:" + ",".join(str(d) if d is not None else ("1" if k == 0 else str(EXAMPLE_DIM))
                                      for k, d in enumerate(declared[n])) for n in missing)
        listed = ", ".join(f"{n}{_shown(declared[n])}" for n in missing)
        raise ConfigError(f"{where}: input dims are dynamic ({listed}); give the served shape: {examples}")
    if batch_only:
        warnings.warn(f"{where}: dynamic batch of input {', '.join(batch_only)} set to 1 (give {FLAG} to choose)",
                      InputShapeNote, stacklevel=3)
    return out


def input_shapes_or_none(shapes: Mapping[str, Iterable[int]] | None) -> dict[str, list[int]] | None:
    """JSON form (lists) of a shape mapping, None when empty (what plans and manifests store)."""
    return {k: [int(d) for d in v] for k, v in shapes.items()} if shapes else None
