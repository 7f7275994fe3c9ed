"""CostTable: every number a search reads, as arrays over [layers x processors].

Built once per (graph, device, dtype, cost backend) by a backend in :mod:`optimizer.cost`; the
searches only read it. Conventions:

* ``latency_s[l, p]`` is the time layer ``l`` takes when its stage runs on processor ``p``,
  *including* CPU fallback when ``p`` does not support the op (CPU time plus the transfer of
  the layer's inputs and outputs between ``p`` and the CPU); ``supported[l, p]`` tells which.
  That is the cost of one layer alone; a stage of consecutive layers is costed by
  :meth:`CostTable.stage_seconds`, which groups supported layers into delegate partitions and
  charges transfers only at partition boundaries (:mod:`optimizer.cost.partition`).
* ``energy_j[l, p]`` is the phone's energy for the same (active power x time, fallback included).
* ``cut_bytes[i]`` are the bytes crossing boundary ``i`` (0..L) at the table's dtype, from
  :meth:`optimizer.graph.LayerGraph.cut_bytes_array` (DAG cut, skip connections included).
* A hand-off of ``n`` bytes from processor ``p`` to ``q`` (p != q) costs
  ``handoff_latency_s[p, q] + n * handoff_s_per_byte[p, q]`` seconds and
  ``n * handoff_j_per_byte[p, q]`` joules; the diagonal is zero.
* Prefix sums (``cum_latency_s``, ``cum_energy_j``: shape [L+1, P]) make any stage O(1):
  ``stage_latency(a, b, p) = cum[b, p] - cum[a, p]`` for layers a..b-1, vectorised over arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import UnknownNameError
from .partition import Partitions, build_partitions, stage_parts, stage_seconds


@dataclass(frozen=True, eq=False)
class CostTable:
    """Per-layer, per-processor costs of one network on one device at one dtype."""

    model: str
    device: str
    dtype: str
    backend: str  # analytic | measured | learned
    granularity: str
    processors: tuple[str, ...]  # P processor names, in the device file's order
    processor_kinds: tuple[str, ...]  # cpu | gpu | npu | dsp | tpu
    layer_names: tuple[str, ...]  # L
    latency_s: np.ndarray  # [L, P]
    energy_j: np.ndarray  # [L, P]
    supported: np.ndarray  # [L, P] bool: op runs natively (else CPU fallback is in latency_s)
    cut_bytes: np.ndarray  # [L+1]
    weight_bytes: np.ndarray  # [L]
    live_bytes: np.ndarray  # [L] activation bytes alive while each layer runs
    macs: np.ndarray  # [L]
    handoff_latency_s: np.ndarray  # [P, P]
    handoff_s_per_byte: np.ndarray  # [P, P]
    handoff_j_per_byte: np.ndarray  # [P, P]
    memory_capacity_bytes: np.ndarray  # [P] (inf when unlimited)
    active_power_w: np.ndarray  # [P] power while busy (for thermal models)
    idle_power_w: float = 0.0  # whole-phone idle power
    meta: dict[str, object] = field(default_factory=dict)
    invoke_overhead_s: np.ndarray | None = None  # [P] per call into a processor (once per delegate partition); None = 0
    max_delegated_partitions: np.ndarray | None = None  # [P] delegated partitions per stage (0 = no limit); None = 0
    #: [P] on-chip parameter cache bytes (inf = none) and seconds per streamed weight byte beyond it
    parameter_cache_bytes: np.ndarray | None = None
    parameter_stream_s_per_byte: np.ndarray | None = None
    #: [L] the CPU's time of a layer a delegate hands over (an operator type it cannot run then is a
    #: CPU kernel of its own, even where the CPU would fuse it); None = ``latency_s`` of the CPU
    fallback_cpu_s: np.ndarray | None = None

    def __post_init__(self) -> None:
        n_layers, n_procs = len(self.layer_names), len(self.processors)
        for name in ("latency_s", "energy_j", "supported"):
            arr = getattr(self, name)
            if arr.shape != (n_layers, n_procs):
                raise ValueError(f"CostTable.{name} has shape {arr.shape}, expected {(n_layers, n_procs)}")
        if self.cut_bytes.shape != (n_layers + 1,):
            raise ValueError(f"CostTable.cut_bytes has shape {self.cut_bytes.shape}, expected {(n_layers + 1,)}")
        if self.invoke_overhead_s is None:
            object.__setattr__(self, "invoke_overhead_s", np.zeros(n_procs))
        elif np.shape(self.invoke_overhead_s) != (n_procs,):
            raise ValueError(f"CostTable.invoke_overhead_s has shape {np.shape(self.invoke_overhead_s)}, "
                             f"expected {(n_procs,)}")
        if self.max_delegated_partitions is None:
            object.__setattr__(self, "max_delegated_partitions", np.zeros(n_procs, np.int64))
        elif np.shape(self.max_delegated_partitions) != (n_procs,):
            raise ValueError(f"CostTable.max_delegated_partitions has shape {np.shape(self.max_delegated_partitions)}, "
                             f"expected {(n_procs,)}")
        if self.parameter_cache_bytes is None:
            object.__setattr__(self, "parameter_cache_bytes", np.full(n_procs, np.inf))
        if self.parameter_stream_s_per_byte is None:
            object.__setattr__(self, "parameter_stream_s_per_byte", np.zeros(n_procs))
        for name in ("parameter_cache_bytes", "parameter_stream_s_per_byte"):
            if np.shape(getattr(self, name)) != (n_procs,):
                raise ValueError(f"CostTable.{name} has shape {np.shape(getattr(self, name))}, expected {(n_procs,)}")
        for arr in (self.latency_s, self.energy_j, self.cut_bytes):
            arr.setflags(write=False)

    @property
    def n_layers(self) -> int:
        return len(self.layer_names)

    @property
    def n_processors(self) -> int:
        return len(self.processors)

    def processor_index(self, name: str) -> int:
        """Index of processor ``name`` (clear error listing the device's processors)."""
        try:
            return self.processors.index(name)
        except ValueError:
            raise UnknownNameError("processor", name, self.processors, where=f"device {self.device!r}") from None

    @cached_property
    def cum_latency_s(self) -> np.ndarray:
        """Prefix sums over layers, shape [L+1, P]."""
        return np.vstack([np.zeros((1, self.n_processors)), np.cumsum(self.latency_s, axis=0)])

    @cached_property
    def cum_energy_j(self) -> np.ndarray:
        """Prefix sums over layers, shape [L+1, P]."""
        return np.vstack([np.zeros((1, self.n_processors)), np.cumsum(self.energy_j, axis=0)])

    @cached_property
    def cum_weight_bytes(self) -> np.ndarray:
        """Prefix sums of weight bytes, shape [L+1]."""
        return np.concatenate([[0.0], np.cumsum(self.weight_bytes, dtype=np.float64)])

    def stage_latency(self, a: np.ndarray | int, b: np.ndarray | int, p: np.ndarray | int) -> np.ndarray:
        """Compute time of layers a..b-1 on processor p (broadcasts over arrays)."""
        return self.cum_latency_s[b, p] - self.cum_latency_s[a, p]

    def stage_energy(self, a: np.ndarray | int, b: np.ndarray | int, p: np.ndarray | int) -> np.ndarray:
        """Energy of layers a..b-1 on processor p (broadcasts over arrays)."""
        return self.cum_energy_j[b, p] - self.cum_energy_j[a, p]

    def handoff(self, boundary: np.ndarray | int, p: np.ndarray | int, q: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """(seconds, joules) to pass the tensors crossing ``boundary`` from p to q."""
        nbytes = self.cut_bytes[boundary]
        seconds = np.where(np.asarray(p) == np.asarray(q), 0.0,
                           self.handoff_latency_s[p, q] + nbytes * self.handoff_s_per_byte[p, q])
        joules = nbytes * self.handoff_j_per_byte[p, q]
        return seconds, joules

    @cached_property
    def partitions(self) -> Partitions | None:
        """Delegate-partition prefix sums (:mod:`optimizer.cost.partition`); None without a CPU."""
        if "cpu" not in self.processor_kinds:
            return None
        assert self.invoke_overhead_s is not None and self.max_delegated_partitions is not None  # __post_init__
        return build_partitions(self.latency_s, self.supported, self.processor_kinds.index("cpu"), self.cut_bytes,
                                self.handoff_latency_s, self.handoff_s_per_byte, self.invoke_overhead_s,
                                self.max_delegated_partitions, self.fallback_cpu_s)

    def stage_seconds(self, a: np.ndarray | int, b: np.ndarray | int, p: np.ndarray | int) -> np.ndarray:
        """Time of layers a..b-1 (b > a) as one stage on p: delegate partitions, CPU fallback,
        partition-boundary transfers and invoke overheads (:func:`optimizer.cost.partition.stage_seconds`;
        without a CPU: ``stage_latency`` plus one invoke). Broadcasts over arrays."""
        part = self.partitions
        if part is None:
            assert self.invoke_overhead_s is not None  # __post_init__ fills it
            return self.stage_latency(a, b, p) + self.invoke_overhead_s[p] + self.parameter_stream_s(a, b, p)
        return stage_seconds(part, a, b, p) + self.parameter_stream_s(a, b, p)

    def parameter_stream_s(self, a: np.ndarray | int, b: np.ndarray | int, p: np.ndarray | int) -> np.ndarray:
        """Seconds per call to stream the weights of layers a..b-1 that do not fit ``p``'s parameter
        cache (0 without one; Coral "Edge TPU parameter data caching"). Broadcasts."""
        assert self.parameter_cache_bytes is not None and self.parameter_stream_s_per_byte is not None
        weights = self.cum_weight_bytes[b] - self.cum_weight_bytes[a]
        return np.maximum(0.0, weights - self.parameter_cache_bytes[p]) * self.parameter_stream_s_per_byte[p]

    def stage_parts(self, a: np.ndarray | int, b: np.ndarray | int,
                    p: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """(``stage_seconds``, of which seconds on the CPU: fallback layers, or all of a CPU stage)."""
        part = self.partitions
        if part is None:
            return self.stage_seconds(a, b, p), np.zeros(np.broadcast(a, b, p).shape)
        total, cpu_s = stage_parts(part, a, b, p)
        return total + self.parameter_stream_s(a, b, p), cpu_s

    def whole_network_latency(self) -> np.ndarray:
        """Latency of the whole network on each single processor (one stage), shape [P]."""
        procs = np.arange(self.n_processors)
        return self.stage_seconds(np.zeros_like(procs), np.full_like(procs, self.n_layers), procs)
