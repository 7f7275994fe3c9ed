"""Helpers shared by the zoo builders (not a zoo entry: the leading underscore hides it)."""

from __future__ import annotations

from typing import Any

from optimizer.errors import ConfigError


def check_variant(name: str, variant: dict[str, Any],
                  allowed: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
    """Reject unknown or out-of-range variant arguments of builder ``name``.

    ``allowed`` maps each accepted argument to its valid values (an empty tuple accepts any
    positive number). Returns the arguments as given.
    """
    for key, value in variant.items():
        if key not in allowed:
            valid = ", ".join(sorted(allowed)) or "none"
            raise ConfigError(f"{name}: unknown variant argument {key!r}; valid arguments: {valid}")
        choices = allowed[key]
        if choices and value not in choices:
            raise ConfigError(f"{name}: {key}={value!r} is not supported; expected one of "
                              f"{', '.join(map(str, choices))}")
        if not choices and not (isinstance(value, (int, float)) and value > 0):
            raise ConfigError(f"{name}: {key}={value!r} must be a positive number")
    return variant


def check_size(name: str, input_size: int, minimum: int) -> int:
    """Validate the input size (an int of at least ``minimum``)."""
    if not isinstance(input_size, int) or isinstance(input_size, bool) or input_size < minimum:
        raise ConfigError(f"{name}: input_size={input_size!r} is invalid; expected an integer "
                          f">= {minimum}")
    return input_size


def upsample_to(keras: Any, x: Any, target: tuple[int, int], name: str) -> Any:
    """Nearest-neighbour upsampling of ``x`` to spatial size ``target``.

    For ``target`` = 2n or 2n - 1 (the ceil-halved pyramids of the zoo) this is a 2x
    ``UpSampling2D`` plus a ``Cropping2D`` of the last row/column: the same values as
    ``torch.nn.functional.interpolate(mode="nearest")`` and TF1 ``resize_nearest_neighbor``
    (``src = floor(dst * n / target)``), with static shapes through ONNX export. Other sizes
    use ``Resizing``.
    """
    h, w = (int(d) for d in x.shape[1:3])
    th, tw = (int(d) for d in target)
    if th in (2 * h, 2 * h - 1) and tw in (2 * w, 2 * w - 1):
        x = keras.layers.UpSampling2D(2, interpolation="nearest", name=name)(x)
        if (th, tw) != (2 * h, 2 * w):
            x = keras.layers.Cropping2D(((0, 2 * h - th), (0, 2 * w - tw)), name=name + "_crop")(x)
        return x
    return keras.layers.Resizing(th, tw, interpolation="nearest", name=name)(x)
