"""Registry of cost backends: the one interface every cost model plugs into.

A backend is a callable ``fn(inputs: BackendInputs, **options) -> BackendCosts`` registered
under a name (as the solvers are in :mod:`optimizer.search.solve`; pluggable cost models behind
one interface as in Timeloop/Accelergy and ZigZag). It may be registered as the callable itself
or as a lazy ``"package.module:function"`` string, so registering the learned backend does not
import scikit-learn until it runs. :func:`optimizer.cost.build_cost_table` resolves the clocks
and power of the device once (no latency model is evaluated for that), calls the backend, and
assembles the :class:`~optimizer.cost.table.CostTable`; options a backend does not accept are an
error, never silently ignored.

Built-in backends: ``analytic`` (roofline with CPU fallback, :mod:`optimizer.cost.analytic`),
``measured`` (per-layer tables, :mod:`optimizer.cost.measured`), ``learned`` (a fitted
scikit-learn Pipeline, :mod:`optimizer.cost.learned`) and ``predicted`` (per-device kernel
predictors fitted on probe tables, :mod:`optimizer.cost.predicted`). The measured and learned backends take
the support matrix from the device's op lists, not from the analytic model: they build their
own latency and energy tables without an analytic pass.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError, UnknownNameError

if TYPE_CHECKING:
    from ..graph.layergraph import LayerGraph
    from ..hardware.schema import Device
    from .features import LayerArrays


@dataclass(frozen=True)
class BackendInputs:
    """What every backend is given: the network, the device and its operating point."""

    graph: LayerGraph
    device: Device
    dtype: str
    runtime: str | None  # efficiency profile (Device.runtimes), checked
    clock_hz: Mapping[str, float] | None  # as the caller gave it (None: maximum clocks)
    clocks: np.ndarray  # [P] resolved clock of every processor, Hz
    power_w: np.ndarray  # [P] active power at ``clocks``, W

    @property
    def clock_ratio(self) -> np.ndarray:
        """[P] ``f / f_max`` of every processor (measured and learned latencies were taken at f_max)."""
        return self.clocks / np.array([p.max_clock_hz for p in self.device.processors])


@dataclass(frozen=True)
class BackendCosts:
    """A backend's answer, arrays [L, P]: latency and energy (CPU fallback included) and the
    native-support matrix; ``arrays`` the per-layer quantities if the backend computed them."""

    latency_s: np.ndarray
    energy_j: np.ndarray
    supported: np.ndarray
    arrays: LayerArrays | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: [P] per-call overhead a backend measured (NaN: the device file's ``invoke_overhead``)
    invoke_overhead_s: np.ndarray | None = None
    #: [L] the CPU's time of each layer when a delegate hands it over (None: ``latency_s`` of the CPU)
    fallback_cpu_s: np.ndarray | None = None


BackendFn = Callable[..., BackendCosts]
_REGISTRY: dict[str, BackendFn | str] = {}


def register_backend(name: str, fn: BackendFn | str) -> None:
    """Register cost backend ``name``: ``fn(inputs, **options) -> BackendCosts`` or a lazy
    ``"package.module:function"`` reference resolved on first use. Re-registering replaces it."""
    if not isinstance(fn, str) and not callable(fn):
        raise TypeError(f"cost backend {name!r}: expected a callable or 'module:function', got {fn!r}")
    if isinstance(fn, str) and ":" not in fn:
        raise ValueError(f"cost backend {name!r}: lazy reference {fn!r} must look like 'package.module:function'")
    _REGISTRY[name] = fn


def backend_names() -> list[str]:
    """Names of the registered cost backends, sorted."""
    return sorted(_REGISTRY)


def get_backend(name: str) -> BackendFn:
    """The backend callable (a lazy reference is imported here)."""
    try:
        fn = _REGISTRY[name]
    except KeyError:
        raise UnknownNameError("cost backend", name, backend_names()) from None
    if isinstance(fn, str):
        module, _, attr = fn.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        _REGISTRY[name] = fn
    return fn


def backend_options(name: str) -> list[str]:
    """Keyword options backend ``name`` accepts (besides its inputs)."""
    params = list(inspect.signature(get_backend(name)).parameters.values())[1:]
    return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def run_backend(name: str, inputs: BackendInputs, options: Mapping[str, Any]) -> BackendCosts:
    """Call backend ``name`` after checking ``options`` against its signature."""
    fn = get_backend(name)
    valid = backend_options(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(f"cost backend {name!r}: unknown option {unknown[0]!r}; valid: "
                          f"{', '.join(valid) or '(none)'}")
    return fn(inputs, **options)


#: the built-in backends, registered lazily so that ``import optimizer.cost`` stays light
BUILTIN_BACKENDS: dict[str, str] = {
    "analytic": "optimizer.cost.analytic:analytic_backend",
    "measured": "optimizer.cost.measured:measured_backend",
    "learned": "optimizer.cost.learned:learned_backend",
    "predicted": "optimizer.cost.predicted:predicted_backend",
}
for _name, _ref in BUILTIN_BACKENDS.items():
    register_backend(_name, _ref)
