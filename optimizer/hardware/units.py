"""Quantities with units, parsed at the edge ("2.84 GHz", "10 Mbps", "4 GB", "283.17 mW/Mbps").

Hardware YAML files may write any quantity as a string with a unit; the schemas in
:mod:`optimizer.hardware.schema` convert it to SI (Hz, bit/s, B, s, W, J, B/s, MAC/s) with the
annotated types below. A bare number is taken as already in SI units. Byte prefixes are
decimal (``GB`` = 1e9 B) and binary with an ``i`` (``GiB`` = 2**30 B); ``TOPS``/``GOPS`` count
two operations per multiply-accumulate.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import BeforeValidator

_SI = {"": 1.0, "p": 1e-12, "n": 1e-9, "u": 1e-6, "µ": 1e-6, "m": 1e-3, "k": 1e3, "K": 1e3,
       "M": 1e6, "G": 1e9, "T": 1e12}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


def _prefixed(base: str, prefixes: str = "pnuµmkKMGT", scale: float = 1.0) -> dict[str, float]:
    table = {base: scale}
    for p in prefixes:
        table[p + base] = _SI[p] * scale
    return table


def _byte_units() -> dict[str, float]:
    table = {"B": 1.0}
    for p in "kKMGT":
        table[p + "B"] = _SI[p]
    for p, f in _BIN.items():
        table[p + "B"] = f
    return table


_BYTES = _byte_units()

#: dimension -> {unit spelling: factor to SI}
UNITS: dict[str, dict[str, float]] = {
    "frequency": _prefixed("Hz", "kKMGT"),
    "bitrate": {**_prefixed("bps", "kKMGT"), **{u.replace("bps", "bit/s"): f
                                                for u, f in _prefixed("bps", "kKMGT").items()}},
    "bytes": _BYTES,
    "byterate": {u + "/s": f for u, f in _BYTES.items()},
    "time": {**_prefixed("s", "pnuµm"), "min": 60.0},
    "power": _prefixed("W", "uµmk"),
    "energy": _prefixed("J", "pnuµmk"),
    "energy_per_byte": {j + "/B": f for j, f in _prefixed("J", "pnuµm").items()},
    "macrate": {**_prefixed("MAC/s", "kKMGT"),
                **{p + "OPS": _SI[p] / 2.0 for p in "kKMGT"}, "OPS": 0.5,
                **{p + "FLOPS": _SI[p] / 2.0 for p in "kKMGT"}, "FLOPS": 0.5},
    # power per throughput (Huang et al. MobiSys'12 radio model): W per bit/s
    "power_per_bitrate": {w + "/" + b: fw / fb
                          for w, fw in _prefixed("W", "m").items()
                          for b, fb in _prefixed("bps", "kMG").items()},
    # Upsilon of P = Upsilon * f^3: W per Hz^3
    "upsilon": {w + "/" + h + "^3": fw / fh**3
                for w, fw in _prefixed("W", "m").items()
                for h, fh in _prefixed("Hz", "MG").items()},
    "dimensionless": {"": 1.0, "%": 0.01},
    # thermal RC networks (optimizer.hardware.thermal_spec)
    "capacitance": {"J/K": 1.0, "mJ/K": 1e-3, "kJ/K": 1e3, "J/C": 1.0, "J/°C": 1.0},
    "conductance": {"W/K": 1.0, "mW/K": 1e-3, "W/C": 1.0, "W/°C": 1.0, "mW/°C": 1e-3},
    "temperature": {"C": 1.0, "°C": 1.0, "degC": 1.0},
}

_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


def parse_quantity(value: object, dimension: str) -> float:
    """Convert ``value`` (number or "<number> <unit>" string) of ``dimension`` to SI.

    Raises
    ------
    ValueError
        The value is not a number, the unit is unknown for this dimension, or it is NaN.
    """
    units = UNITS[dimension]
    if isinstance(value, bool):
        raise ValueError(f"expected a {dimension} quantity, got a boolean")
    if isinstance(value, (int, float)):
        number, unit = float(value), ""
    elif isinstance(value, str):
        m = _NUMBER.match(value)
        if not m:
            raise ValueError(f"cannot parse {value!r} as a {dimension} quantity; expected "
                             f"'<number> <unit>' with unit one of {_unit_list(units)}")
        number, unit = float(m.group(1)), m.group(2).replace(" ", "")
    else:
        raise ValueError(f"expected a {dimension} quantity (number or '<number> <unit>'), "
                         f"got {type(value).__name__}")
    if unit and unit not in units:
        raise ValueError(f"unknown {dimension} unit {unit!r} in {value!r}; expected one of "
                         f"{_unit_list(units)}")
    out = number * units[unit] if unit else number
    if not math.isfinite(out):
        raise ValueError(f"{value!r} is not a finite number")
    return out


def _unit_list(units: dict[str, float]) -> str:
    shown = [u for u in units if u and "µ" not in u and not u.startswith("K")]
    return ", ".join(shown[:16]) + (", ..." if len(shown) > 16 else "")


def _quantity(dimension: str) -> BeforeValidator:
    return BeforeValidator(lambda v: parse_quantity(v, dimension))


def reject_duplicates(names: list[str], what: str) -> None:
    """Raise ``ValueError`` naming the first name that appears twice (for schema validators)."""
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{what} {dup[0]!r} appears twice")


#: A duration in s ("12 ms", "1.5 min").
Seconds = Annotated[float, _quantity("time")]
#: A clock in Hz ("2.84 GHz").
Frequency = Annotated[float, _quantity("frequency")]
#: Compute throughput in MAC/s ("26 TOPS" = 13e12 MAC/s: two operations per MAC).
MacRate = Annotated[float, _quantity("macrate")]
#: A size in B, decimal or binary prefixes ("4 GB", "512 MiB").
Bytes = Annotated[float, _quantity("bytes")]
#: Memory or copy bandwidth in B/s ("51.2 GB/s").
ByteRate = Annotated[float, _quantity("byterate")]
#: A link rate in bit/s ("10 Mbps").
Bitrate = Annotated[float, _quantity("bitrate")]
#: Power in W ("850 mW").
Watts = Annotated[float, _quantity("power")]
#: Transfer energy in J/B ("120 pJ/B").
JoulesPerByte = Annotated[float, _quantity("energy_per_byte")]
#: Radio power per throughput in W per bit/s ("283.17 mW/Mbps"; Huang et al., MobiSys'12).
WattsPerBitrate = Annotated[float, _quantity("power_per_bitrate")]
#: Dynamic-power coefficient of P = Upsilon * f^3 in W/Hz^3 ("0.05 W/GHz^3").
Upsilon = Annotated[float, _quantity("upsilon")]
#: A plain number or a percentage ("80 %" = 0.8).
Fraction = Annotated[float, _quantity("dimensionless")]
