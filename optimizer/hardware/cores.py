"""Efficiency per (core microarchitecture, runtime), shared across devices (docs/METHODS.md section 8b).

A runtime's kernels reach about the same MACs per cycle per core on every core of one
microarchitecture: the Jetson Nano's Cortex-A57 under PyTorch and a phone's Cortex-A53 under FP32
PyTorch Mobile differ by what the microarchitectures explain, not by device. The shared table
(``search_spaces/calibration/cores.yaml``, :class:`CoreTable`) gives, per runtime and core class,
the achieved MACs per cycle per core for each dtype (``default`` plus the op families the sources
set apart), either measured or as a sourced per-clock ratio to another class. A CPU processor that
declares its ``clusters`` (:class:`~optimizer.hardware.schema.CoreCluster`) then runs op family
``f`` at::

    rate_f = sum over clusters c of  count_c * clock_c * mpc[runtime][class_c][dtype][f]

where a family the table does not list keeps the device's efficiency table's shape,
``mpc[default] * eff[f] / eff[default]``. The rate replaces ``peak * efficiency`` in the
roofline (:func:`core_efficiency` returns it as a fraction of the processor's peak) under the
device's default runtime and every runtime a processor lists in ``runtimes`` (an entry may hold
just its ``source``: the table gives the rates); the cost
backends apply it as a factor per op family on the device's efficiency
(:func:`family_scales`), so finer entries of the efficiency table (kernel families) keep their
ratio to their op family. A lower clock scales every cluster by ``f / f_max``, as the peak
does. Memory bandwidth and overheads stay the device's.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field, model_validator

from ..graph.layergraph import OP_FAMILIES
from .schema import CORE_CLASSES, DTYPES, Processor, _Model

PositiveRate = Annotated[float, Field(gt=0)]


class ClassRate(_Model):
    """One core class under one runtime: MACs per cycle per core per dtype and op family
    (``{fp32: {default: 0.6, conv: 2.1, dense: 0.02}}``), or ``ratio`` times the rates of class
    ``like`` (a published per-clock ratio), with its ``source``."""

    rates: dict[str, dict[str, PositiveRate]] | None = None
    like: str | None = None
    ratio: PositiveRate | None = None
    source: str

    @model_validator(mode="after")
    def _one_form(self) -> ClassRate:
        if (self.rates is None) == (self.like is None):
            raise ValueError("give either rates (MACs per cycle per core) or like + ratio")
        if (self.like is None) != (self.ratio is None):
            raise ValueError("like and ratio go together")
        if self.like is not None and self.like not in CORE_CLASSES:
            raise ValueError(f"like: unknown core class {self.like!r}; expected one of {', '.join(CORE_CLASSES)}")
        for dtype, fams in (self.rates or {}).items():
            if dtype not in DTYPES:
                raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
            bad = [f for f in fams if f not in OP_FAMILIES and f != "default"]
            if bad or "default" not in fams:
                raise ValueError(f"rates.{dtype}: needs 'default' and op families from {', '.join(OP_FAMILIES)}"
                                 + (f" (got {bad[0]!r})" if bad else ""))
        return self


class RuntimeRates(_Model):
    """One runtime's rates per core class, or ``kernels``: the runtime whose kernels it runs."""

    kernels: str | None = None
    classes: dict[str, ClassRate] = Field(default_factory=dict)
    source: str

    @model_validator(mode="after")
    def _known(self) -> RuntimeRates:
        bad = [c for c in self.classes if c not in CORE_CLASSES]
        if bad:
            raise ValueError(f"unknown core class {bad[0]!r}; expected one of {', '.join(CORE_CLASSES)}")
        if self.kernels is not None and self.classes:
            raise ValueError("give either kernels (another runtime) or classes, not both")
        return self


class CoreTable(_Model):
    """The shared table: runtimes -> core classes -> MACs per cycle per core."""

    runtimes: dict[str, RuntimeRates]
    source: str

    @model_validator(mode="after")
    def _resolvable(self) -> CoreTable:
        for name, rt in self.runtimes.items():
            if rt.kernels is not None and (rt.kernels not in self.runtimes or self.runtimes[rt.kernels].kernels):
                raise ValueError(f"runtimes.{name}.kernels: {rt.kernels!r} must name a runtime with classes")
            for cls, rate in rt.classes.items():
                seen = {cls}
                while rate.like is not None:
                    if rate.like in seen or rate.like not in rt.classes:
                        raise ValueError(f"runtimes.{name}.classes.{cls}: 'like' chain reaches {rate.like!r}, "
                                         "which this runtime does not rate (or a cycle)")
                    seen.add(rate.like)
                    rate = rt.classes[rate.like]
        return self

    def kernels_of(self, runtime: str) -> str | None:
        """The runtime whose class rates ``runtime`` uses (itself, its ``kernels``), or None."""
        rt = self.runtimes.get(runtime)
        if rt is None:
            return None
        return rt.kernels or runtime

    def class_rates(self, runtime: str, core: str) -> dict[str, dict[str, float]] | None:
        """MACs per cycle per core of class ``core`` under ``runtime``, per dtype and family
        (``like`` + ``ratio`` resolved), or None where the table does not rate it."""
        name = self.kernels_of(runtime)
        if name is None or core not in self.runtimes[name].classes:
            return None
        entry, scale = self.runtimes[name].classes[core], 1.0
        while entry.like is not None:
            scale *= float(entry.ratio or 1.0)
            entry = self.runtimes[name].classes[entry.like]
        return {d: {f: v * scale for f, v in fams.items()} for d, fams in (entry.rates or {}).items()}


def load_core_table() -> CoreTable:
    """The shared core table (``calibration/cores.yaml`` of the user's, then the shipped search
    spaces); cached while the file is unchanged."""
    from .loader import ShippedYaml

    return ShippedYaml("calibration", "core table", CoreTable, cached=True).load("cores")


def core_rates(proc: Processor, runtime: str, dtype: str,
               shape: dict[str, float]) -> dict[str, float] | None:
    """MAC/s per op family (and ``default``, and every key of ``shape``) of ``proc`` at its highest
    clock under ``runtime`` and ``dtype`` from its clusters and the shared table (module doc);
    None where it declares no clusters or the table does not rate every cluster's class at
    ``dtype``. ``shape`` is the efficiency table whose ratios to ``default`` give the families
    the table does not list."""
    if not proc.clusters:
        return None
    table = load_core_table()
    out = dict.fromkeys((*OP_FAMILIES, *shape, "default"), 0.0)
    base = shape.get("default", proc.efficiency["default"])
    for cl in proc.clusters:
        rates = table.class_rates(runtime, cl.core)
        if rates is None or dtype not in rates:
            return None
        mpc = rates[dtype]
        for f in out:
            per_cycle = mpc[f] if f in mpc else mpc["default"] * shape.get(f, base) / base
            out[f] += cl.count * cl.clock_hz * per_cycle
    return out


def core_efficiency(proc: Processor, runtime: str, dtype: str,
                    shape: dict[str, float]) -> dict[str, float] | None:
    """:func:`core_rates` as fractions of ``proc``'s peak at ``dtype`` (the roofline's
    efficiency), or None where the table does not apply."""
    peak = proc.peak_macs_per_s.get(dtype)
    rates = core_rates(proc, runtime, dtype, shape) if peak else None
    return None if rates is None or not peak else {f: r / peak for f, r in rates.items()}


def family_scales(proc: Processor, runtime: str | None, dtype: str) -> np.ndarray:
    """[len(OP_FAMILIES)] factor on ``proc.op_efficiency(f, runtime)`` that makes op family ``f``
    run at the core table's rate (:func:`core_efficiency`) under ``runtime`` (None: the device's
    default) at ``dtype``; ones where the table does not rate the processor's clusters or its
    runtime profile keeps its own efficiency (``override``)."""
    name = runtime if runtime is not None else proc._default_runtime
    prof = proc.runtime_profiles.get(runtime) if runtime is not None else None
    ones = np.ones(len(OP_FAMILIES))
    if prof is not None and prof.override:
        return ones
    shape = prof.efficiency if prof is not None and prof.efficiency else proc.efficiency
    table = core_efficiency(proc, name, dtype, shape)
    if table is None:
        return ones
    return np.array([table[f] / proc.op_efficiency(f, runtime) for f in OP_FAMILIES])
