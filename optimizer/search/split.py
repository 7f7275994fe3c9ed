"""Mobile–cloud split selection (SmartSplit: Prakash, Bansal, Verma & Shorey, 2022).

The network is divided at a boundary ``l`` (0..L): layers ``0..l-1`` run on the phone (the
*head*), ``l..L-1`` on a server (the *tail*); every tensor crossing the boundary (skip
connections included) is uploaded, the result downloaded. Decisions are joint: besides ``l``
the phone processor running the head, its clock level, and the dtype of the uploaded tensors.

Objectives (all minimised, SI units):

* ``latency_s = T_client + T_upload + T_server + T_download + RTT``; ``T_client`` is the head plus,
  for a detector, the phone's host work (:func:`optimizer.cost.hostproc.host_costs`: frame
  pre-processing always; post-processing of the whole head output when the phone runs every
  layer or the server sends raw outputs, else only the decoding of the server's top-k anchors);
* ``energy_j = E_client + E_upload + E_download`` (phone only; radio after Huang et al.,
  MobiSys'12: ``E_upload = (alpha_u tau_u + beta) I / B``);
* ``memory_bytes`` = weights + peak live activations of the head,
  :meth:`optimizer.graph.LayerGraph.memory` ``(0, l)``.

Constraint: ``memory_bytes <= memory_limit_bytes``, plus any extra constraints (e.g. a ceiling on
expected latency over a bandwidth trace, :class:`optimizer.search.split_risk.MeanLatencyGuard`).

Two cost models fill the same :class:`SplitCosts` arrays: ``"table"`` (default) reads
:class:`~optimizer.cost.CostTable` s of the phone at every (processor, clock level) and of the
server; ``"smartsplit"`` is the paper's closed form ``T = M / (C S)``, ``E = k C nu^3 T`` with
``k = 1.172`` (``nu`` in GHz, ``M`` in MACs, one MAC per core per cycle), on the phone's CPUs.

This module imports neither pymoo nor DEAP; :mod:`optimizer.search.nsga2` adapts
:class:`SplitProblem` to a pymoo ``Problem``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import ConfigError, ConstraintError
from ..graph.layergraph import DTYPE_BYTES, LayerGraph, dtype_bytes
from .problem import Evaluation, nondominated, unique_rows
from .result import Candidate

OBJECTIVES: tuple[str, ...] = ("latency_s", "energy_j", "memory_bytes")
#: per-candidate components of latency and energy (:meth:`SplitProblem.breakdown`), kept as metrics
BREAKDOWN: tuple[str, ...] = ("client_s", "host_s", "upload_s", "server_s", "download_s", "rtt_s", "client_j", "upload_j",
                              "download_j", "crossing_bytes", "memory_bytes")
WIRE_DTYPES: tuple[str, ...] = ("int8", "fp16", "fp32")
COST_MODELS: tuple[str, ...] = ("table", "smartsplit")
SMARTSPLIT_K = 1.172  # W per (core GHz^3), fitted in SmartSplit


@dataclass(frozen=True)
class HeadOption:
    """One way to run the head: a phone processor at one clock level."""

    processor: str
    kind: str
    clock_hz: float
    level: int  # index into the processor's clock levels (ascending)


@dataclass(frozen=True, eq=False)
class SplitCosts:
    """Everything a split evaluation reads, as arrays (built once, read by every candidate).

    ``K`` head options, ``W`` wire dtypes, ``L`` layers; boundaries ``0..L``.
    """

    model: str
    granularity: str
    dtype: str  # compute dtype of the head (weights and activations in memory)
    device: str
    network: str
    server: str
    cost_model: str
    layer_names: tuple[str, ...]
    options: tuple[HeadOption, ...]
    wire_dtypes: tuple[str, ...]
    head_latency_s: np.ndarray  # [K, L+1] time of layers 0..l-1 on option k
    head_energy_j: np.ndarray  # [K, L+1]
    tail_latency_s: np.ndarray  # [L+1] server time of layers l..L-1
    cut_bytes: np.ndarray  # [W, L+1] bytes crossing boundary l at each wire dtype
    upload_s: np.ndarray  # [W, L+1]
    upload_j: np.ndarray  # [W, L+1]
    download_s: float
    download_j: float
    rtt_s: float
    memory_bytes: np.ndarray  # [L+1] head memory (0 at l = 0)
    device_memory_bytes: float = float("inf")
    download_bytes: float = 0.0  # what the server sends back per frame when it runs any layer
    result: str = "raw"  # "raw" (the network's float32 outputs) or "topk" (cost.hostproc.resolve_result)
    host_s: np.ndarray | None = None  # [L+1] phone host work (detector pre/post-processing); None = none
    host_j: np.ndarray | None = None  # [L+1]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return len(self.layer_names)


def head_memory_array(graph: LayerGraph, dtype: str) -> np.ndarray:
    """``graph.memory(0, l, dtype)`` for every boundary ``l = 0..L`` (0 at ``l = 0``), shape [L+1]."""
    nbytes = dtype_bytes(dtype)
    weights = np.cumsum(graph.params_array) * nbytes
    peak = np.maximum.accumulate(graph.live_bytes_array(dtype))
    return np.concatenate([[0.0], np.floor(weights + peak)])


def _link_arrays(graph: LayerGraph, link: Any, wire_dtypes: Sequence[str], result: str) -> dict[str, Any]:
    """Bytes crossing each boundary and their upload cost per (wire dtype, boundary); download of what the server sends
    back (``result``: :func:`optimizer.cost.hostproc.resolve_result`)."""
    from ..cost.hostproc import resolve_result, result_bytes

    for attr in ("uplink_bps", "downlink_bps"):
        value = float(getattr(link, attr))
        if not value > 0:
            raise ConfigError(f"network {getattr(link, 'name', '?')!r}: {attr} is {value:g}; "
                              "expected a bandwidth > 0")
    cut = np.vstack([graph.cut_bytes_array(w) for w in wire_dtypes])
    mode = resolve_result(graph, result)
    out_bytes = result_bytes(graph, mode)
    return {
        "result": mode,
        "cut_bytes": cut,
        "upload_s": np.asarray(link.upload_s(cut), dtype=np.float64),
        "upload_j": np.asarray(link.upload_j(cut), dtype=np.float64),
        "download_bytes": out_bytes,
        "download_s": float(link.download_s(out_bytes)),
        "download_j": float(link.download_j(out_bytes)),
        "rtt_s": float(link.rtt_s),
    }


def _host_arrays(host: Mapping[str, float] | None, n_layers: int, result: str) -> dict[str, Any]:
    """Host time and energy [L+1] of the phone per boundary
    (:func:`optimizer.cost.hostproc.split_host_seconds`); the host threads' share of the CPU goes
    into ``meta["host_cpu_share"]`` (the thermal objectives heat the CPU with it)."""
    from ..cost.hostproc import split_host_seconds

    if host is None or not host.get("pre_s", 0.0) + host.get("post_s", 0.0) > 0:
        return {}
    seconds = split_host_seconds(dict(host), np.arange(n_layers + 1), n_layers, result)
    return {"host_s": seconds, "host_j": seconds * host["power_w"], "meta": {"host_cpu_share": host["share"]}}


def _check_wire(wire_dtypes: Sequence[str]) -> tuple[str, ...]:
    bad = [w for w in wire_dtypes if w not in DTYPE_BYTES]
    if bad or not wire_dtypes:
        raise ConfigError(f"wire dtype {bad[0] if bad else '(none)'!r} is not valid; expected a "
                          f"non-empty list of {', '.join(WIRE_DTYPES)}")
    return tuple(wire_dtypes)


def split_costs_from_tables(
    graph: LayerGraph,
    head_tables: Mapping[tuple[str, float], Any],
    server_table: Any,
    link: Any,
    *,
    dtype: str = "int8",
    wire_dtypes: Sequence[str] = WIRE_DTYPES,
    device: str = "",
    server: str = "",
    device_memory_bytes: float = float("inf"),
    levels: Mapping[tuple[str, float], int] | None = None,
    result: str = "auto",
    host: Mapping[str, float] | None = None,
) -> SplitCosts:
    """Split costs from CostTables (the ``"table"`` cost model).

    Parameters
    ----------
    graph
        The network, in the granularity of the tables.
    head_tables
        ``{(processor, clock_hz): CostTable}`` of the phone with that processor at that clock;
        the head option reads the processor's column of its table.
    server_table
        CostTable of the server; its first ``cloud`` processor (else its first) runs the tail.
    link
        A :class:`optimizer.hardware.Link` (or anything with ``upload_s/j``, ``download_s/j``,
        ``rtt_s``, ``uplink_bps``, ``downlink_bps``).
    result
        What the server sends back: ``auto`` (default), ``raw`` or ``topk``
        (:func:`optimizer.cost.hostproc.resolve_result`).
    host
        The phone's host work (:func:`optimizer.cost.hostproc.host_costs`); None: none.
    """
    wire = _check_wire(wire_dtypes)
    n = len(graph)
    options, lat, en = [], [], []
    for (proc, clock), table in head_tables.items():
        if table.n_layers != n:
            raise ConfigError(f"cost table for {proc}@{clock:g} Hz has {table.n_layers} layers; "
                              f"the graph {graph.name!r} has {n}")
        p = table.processor_index(proc)
        rank = sorted(f for q, f in head_tables if q == proc).index(clock)
        options.append(HeadOption(proc, table.processor_kinds[p], float(clock),
                                  (levels or {}).get((proc, clock), rank)))
        head_s, head_j = _head_costs(table, p)
        lat.append(head_s)
        en.append(head_j)
    if not options:
        raise ConfigError("no head options: give at least one (processor, clock) cost table")
    kinds = list(server_table.processor_kinds)
    q = kinds.index("cloud") if "cloud" in kinds else 0
    if server_table.n_layers != n:
        raise ConfigError(f"server cost table has {server_table.n_layers} layers; the graph has {n}")
    cum_server = server_table.cum_latency_s[:, q]
    links = _link_arrays(graph, link, wire, result)
    return SplitCosts(
        model=graph.name, granularity=graph.granularity, dtype=dtype, device=device,
        network=str(getattr(link, "name", "")), server=server, cost_model="table",
        layer_names=tuple(la.name for la in graph.layers), options=tuple(options), wire_dtypes=wire,
        head_latency_s=np.vstack(lat), head_energy_j=np.vstack(en),
        tail_latency_s=cum_server[-1] - cum_server, memory_bytes=head_memory_array(graph, dtype),
        device_memory_bytes=float(device_memory_bytes), **links, **_host_arrays(host, n, links["result"]),
    )


def _head_costs(table: Any, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Head time and energy [L+1] of layers 0..l-1 on processor ``p`` of ``table``.

    A head of l > 0 layers is one stage (:meth:`optimizer.cost.CostTable.stage_seconds`): its
    delegate partitions, CPU fallback and the processor's ``invoke_overhead_s`` per call; the
    energy adds the processor's active power times one invoke overhead. l = 0 costs nothing.
    """
    n = table.n_layers
    ends = np.arange(1, n + 1)
    seconds = np.concatenate([[0.0], table.stage_seconds(np.zeros(n, np.int64), ends, p)])
    joules = table.cum_energy_j[:, p] + np.concatenate(
        [[0.0], np.full(n, table.active_power_w[p] * table.invoke_overhead_s[p])])
    return seconds, joules


def split_costs_smartsplit(
    graph: LayerGraph,
    head_cpus: Sequence[tuple[str, int, Sequence[float]]],
    server_cores: int,
    server_clock_hz: float,
    link: Any,
    *,
    dtype: str = "int8",
    wire_dtypes: Sequence[str] = WIRE_DTYPES,
    k: float = SMARTSPLIT_K,
    device: str = "",
    server: str = "",
    device_memory_bytes: float = float("inf"),
    result: str = "auto",
    host: Mapping[str, float] | None = None,
) -> SplitCosts:
    """Split costs from SmartSplit's closed form (the ``"smartsplit"`` cost model).

    ``T_client(l) = M(0..l-1) / (C S)``, ``E_client = k C nu^3 T_client`` (nu = S in GHz),
    ``T_server(l) = M(l..L-1) / (C_server S_server)``; M counts MACs.

    Parameters
    ----------
    head_cpus
        ``[(name, cores, clock_levels_hz), ...]``: the phone CPUs and their clock levels.
    """
    wire = _check_wire(wire_dtypes)
    cum_macs = np.concatenate([[0.0], np.cumsum(graph.macs_array)])
    options, lat, en = [], [], []
    for name, cores, clocks in head_cpus:
        for level, s in enumerate(clocks):
            t = cum_macs / (cores * s)
            options.append(HeadOption(name, "cpu", float(s), level))
            lat.append(t)
            en.append(k * cores * (s / 1e9) ** 3 * t)
    if not options:
        raise ConfigError("the smartsplit cost model needs at least one phone CPU with clock levels")
    server_t = (cum_macs[-1] - cum_macs) / (server_cores * server_clock_hz)
    links = _link_arrays(graph, link, wire, result)
    hosts = _host_arrays(host, len(graph), links["result"])
    return SplitCosts(
        model=graph.name, granularity=graph.granularity, dtype=dtype, device=device,
        network=str(getattr(link, "name", "")), server=server, cost_model="smartsplit",
        layer_names=tuple(la.name for la in graph.layers), options=tuple(options), wire_dtypes=wire,
        head_latency_s=np.vstack(lat), head_energy_j=np.vstack(en), tail_latency_s=server_t,
        memory_bytes=head_memory_array(graph, dtype), device_memory_bytes=float(device_memory_bytes),
        **links, **{**hosts, "meta": {"k": k, **hosts.get("meta", {})}},
    )


def build_split_costs(
    graph: LayerGraph,
    device: str,
    network: str,
    server: str = "smartsplit_i5",
    *,
    dtype: str = "int8",
    server_dtype: str = "fp32",
    cost_model: str = "table",
    backend: str | None = None,
    wire_dtypes: Sequence[str] = WIRE_DTYPES,
    bandwidth_bps: float | None = None,
    processors: Sequence[str] | None = None,
    runtime: str | None = None,
    result: str = "auto",
) -> SplitCosts:
    """Load device, link and server by name and build the split cost arrays.

    ``runtime`` picks the phone's inference-runtime profile (``build_cost_table(runtime=)``;
    None: the device's default), e.g. ``pytorch_mobile_fp32`` for SmartSplit's setting.

    ``bandwidth_bps`` overrides the link's uplink and downlink (must be > 0). ``processors``
    restricts the head to those phone processors (default: every processor of the device;
    with ``cost_model="smartsplit"`` only the CPUs). ``result``: what the server sends back
    (``auto``: the best ``topk`` anchors of an SSD head, else the raw outputs;
    :func:`optimizer.cost.hostproc.resolve_result`).
    """
    from ..cost.hostproc import host_costs
    from ..hardware import load_device, load_link, load_server

    if cost_model not in COST_MODELS:
        raise ConfigError(f"unknown cost model {cost_model!r}; expected one of {', '.join(COST_MODELS)}")
    dtype_bytes(dtype), _check_wire(wire_dtypes)
    dev = load_device(device)
    link = load_link(network)
    srv = load_server(server)
    if bandwidth_bps is not None:
        if not bandwidth_bps > 0:
            raise ConfigError(f"bandwidth {bandwidth_bps:g} bit/s is not valid; expected a value > 0")
        link = link.model_copy(update={"uplink_bps": float(bandwidth_bps), "downlink_bps": float(bandwidth_bps)})
    procs = [dev.processor(p) for p in processors] if processors else list(dev.processors)
    if cost_model == "smartsplit":
        cpus = [(p.name, p.cores, list(p.clock_levels_hz)) for p in procs if p.kind == "cpu"]
        cloud = next(p for p in srv.processors if p.kind == "cloud")
        return split_costs_smartsplit(
            graph, cpus, cloud.cores, cloud.max_clock_hz, link, dtype=dtype, wire_dtypes=wire_dtypes,
            device=dev.name, server=srv.name, device_memory_bytes=dev.memory_bytes, result=result,
            host=host_costs(graph, dev))
    from ..cost import build_cost_table

    tables: dict[tuple[str, float], Any] = {}
    levels: dict[tuple[str, float], int] = {}
    for p in procs:
        for level, f in enumerate(p.clock_levels_hz):
            tables[(p.name, f)] = build_cost_table(graph, dev, dtype=dtype, backend=backend,
                                                   clock_hz={p.name: f}, runtime=runtime)
            levels[(p.name, f)] = level
    server_table = build_cost_table(graph, srv, dtype=server_dtype)
    costs = split_costs_from_tables(graph, tables, server_table, link, dtype=dtype,
                                    wire_dtypes=wire_dtypes, device=dev.name, server=srv.name,
                                    device_memory_bytes=dev.memory_bytes, levels=levels, result=result,
                                    host=host_costs(graph, dev))
    costs.meta["runtime"] = dev.check_runtime(runtime) or dev.runtime
    return costs


class SplitProblem:
    """Choose (split boundary, head option, wire dtype) minimising latency, energy, memory.

    Decision vector ``x = (l, k, w)`` of integers: ``l`` the boundary (``0..L``: 0 runs
    everything on the server, L everything on the phone; ``1..L-1`` as in the paper with
    ``interior_only=True``), ``k`` an index into
    ``costs.options`` (processor and clock level, encoded jointly so every index is valid),
    ``w`` an index into ``costs.wire_dtypes``. :meth:`evaluate` takes a whole population.

    Parameters
    ----------
    costs
        Precomputed :class:`SplitCosts`.
    memory_limit_bytes
        Head memory budget; ``None`` = the device's memory.
    interior_only
        Search the interior boundaries ``1..L-1`` only (SmartSplit's setting); by default not
        splitting (``l = 0``, all on the server, or ``l = L``, all on the phone) is a candidate
        of every solver, front, TOPSIS choice, constraint and risk objective, since a bad uplink
        most often calls for one of them.
    include_extremes
        Accepted for compatibility and ignored: the extremes are searched unless ``interior_only``.
    extra_objectives
        Objective hooks appended after latency, energy, memory (as the pipeline problem's
        :class:`~optimizer.search.pipeline.Objective`: ``fn(problem, X, breakdown) -> [N]`` in
        its natural ``sense``; e.g. :func:`optimizer.search.thermal_objectives.split_thermal_objectives`).
    extra_constraints
        Constraint hooks with ``name``, ``fn(problem, X, breakdown) -> [N]`` (dimensionless,
        ``<= 0`` feasible) and ``describe() -> dict``. With any, the one constraint column is
        ``G = max(memory / limit - 1, each hook)``, so every solver and baseline works unchanged.
    """

    kind = "split"
    objectives = OBJECTIVES
    n_var = 3

    def __init__(self, costs: SplitCosts, *, memory_limit_bytes: float | None = None,
                 interior_only: bool = False, extra_objectives: Sequence[Any] = (),
                 extra_constraints: Sequence[Any] = (), include_extremes: bool | None = None) -> None:
        self.costs = costs
        self.extra_constraints = tuple(extra_constraints)
        self.memory_limit_bytes = memory_limit_bytes
        if interior_only and include_extremes:
            raise ConfigError("interior_only and include_extremes contradict each other; the extremes "
                              "are searched by default, so drop include_extremes (--extremes)")
        self.interior_only = bool(interior_only)
        self.extra_objectives = tuple(extra_objectives)
        if self.extra_objectives:
            names = [o.name for o in self.extra_objectives]
            bad = [o for o in self.extra_objectives if o.sense not in ("min", "max")]
            if bad or len(set(names) | set(OBJECTIVES)) != len(names) + len(OBJECTIVES):
                raise ConfigError(f"extra objectives {names}: names must be distinct from {list(OBJECTIVES)} "
                                  "and each other, senses 'min' or 'max'")
            self.objectives = OBJECTIVES + tuple(names)

    @property
    def objective_names(self) -> tuple[str, ...]:
        """Objective names, as :attr:`objectives` (keys of :attr:`Candidate.objectives`)."""
        return tuple(self.objectives)

    @property
    def objective_senses(self) -> tuple[str, ...]:
        """``min`` for latency, energy and memory; each extra objective's own sense."""
        return ("min",) * len(OBJECTIVES) + tuple(o.sense for o in self.extra_objectives)

    # ------------------------------------------------------------------ space
    @property
    def limit_bytes(self) -> float:
        return float(self.costs.device_memory_bytes if self.memory_limit_bytes is None
                     else self.memory_limit_bytes)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Inclusive integer bounds ``(xl, xu)`` of the decision vector."""
        n = self.costs.n_layers
        lo_l, hi_l = (1, n - 1) if self.interior_only else (0, n)
        if hi_l < lo_l:
            raise ConfigError(f"{self.costs.model!r} has {n} layer(s): no interior split exists; "
                              "drop interior_only (--interior-only)")
        return (np.array([lo_l, 0, 0]),
                np.array([hi_l, len(self.costs.options) - 1, len(self.costs.wire_dtypes) - 1]))

    def space_size(self) -> int:
        xl, xu = self.bounds()
        return int(np.prod(xu - xl + 1))

    space_counting = "split boundaries x (processor, clock level) options x wire dtypes"

    @property
    def boundary_space(self) -> str:
        """Which split boundaries are searched, in words (for the output and the plan)."""
        n = self.costs.n_layers
        return (f"boundaries 1..{n - 1} (interior only)" if self.interior_only else
                f"boundaries 0..{n} (all on the server and all on the phone included)")

    def enumerate(self) -> np.ndarray:
        """Every decision vector, shape [space_size, 3], in lexicographic order."""
        xl, xu = self.bounds()
        grids = np.meshgrid(*[np.arange(a, b + 1) for a, b in zip(xl, xu)], indexing="ij")
        return np.stack([g.ravel() for g in grids], axis=1)

    def check(self) -> None:
        """Raise :class:`ConstraintError` when no split fits the memory budget."""
        xl, xu = self.bounds()
        mem = self.costs.memory_bytes[xl[0]: xu[0] + 1]
        if not (mem <= self.limit_bytes).any():
            raise ConstraintError(
                f"memory limit {self.limit_bytes / 1e6:.3f} MB is below every split of "
                f"{self.costs.model!r}; the smallest reachable head memory is {mem.min() / 1e6:.3f} MB "
                f"(split at boundary {int(xl[0] + mem.argmin())})")

    # ------------------------------------------------------------------ evaluation
    def columns(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != 3:
            raise ValueError(f"expected a population of shape [N, 3], got {X.shape}")
        c = self.costs
        hi = np.array([c.n_layers, len(c.options) - 1, len(c.wire_dtypes) - 1])
        Xi = np.clip(np.rint(X).astype(np.int64), 0, hi)
        return Xi[:, 0], Xi[:, 1], Xi[:, 2]

    def breakdown(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """Per-candidate components of latency and energy for a population ``X`` [N, 3]."""
        c = self.costs
        l, k, w = self.columns(X)
        remote = l < c.n_layers  # something runs on the server
        zero = np.zeros(len(l))
        host_s = zero if c.host_s is None else c.host_s[l]
        return {
            "client_s": c.head_latency_s[k, l] + host_s,
            "host_s": host_s,
            "upload_s": np.where(remote, c.upload_s[w, l], zero),
            "server_s": c.tail_latency_s[l],
            "download_s": np.where(remote, c.download_s, zero),
            "rtt_s": np.where(remote, c.rtt_s, zero),
            "client_j": c.head_energy_j[k, l] + (zero if c.host_j is None else c.host_j[l]),
            "upload_j": np.where(remote, c.upload_j[w, l], zero),
            "download_j": np.where(remote, c.download_j, zero),
            "crossing_bytes": np.where(remote, c.cut_bytes[w, l], zero),
            "memory_bytes": c.memory_bytes[l],
        }

    def evaluate(self, X: np.ndarray) -> Evaluation:
        """Objectives ``F`` [N, M] (latency, energy, memory, then the extra objectives), constraint
        values ``G`` [N, 1] (head memory over the budget, ``<= 0`` feasible) and the
        :meth:`breakdown` metrics of a whole population ``X`` [N, 3] (values are rounded to integers
        and clipped to the valid ranges ``0..L``, ``0..K-1``, ``0..W-1``; the extremes are
        evaluable even when the search excludes them)."""
        b = self.breakdown(X)
        latency = b["client_s"] + b["upload_s"] + b["server_s"] + b["download_s"] + b["rtt_s"]
        energy = b["client_j"] + b["upload_j"] + b["download_j"]
        cols = [latency, energy, b["memory_bytes"]]
        for o in self.extra_objectives:
            v = np.asarray(o.fn(self, X, b), dtype=np.float64)
            cols.append(-v if o.sense == "max" else v)
        F = np.stack(cols, axis=1)
        terms = self.constraint_terms(X, b)
        G = b["memory_bytes"] - self.limit_bytes
        if terms:
            G = np.maximum.reduce([b["memory_bytes"] / max(self.limit_bytes, 1.0) - 1.0, *terms])
        return Evaluation(F, G[:, None], {**b, "latency_s": latency, "energy_j": energy})

    def constraint_terms(self, X: np.ndarray, b: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Dimensionless constraint values beyond head memory (``<= 0`` feasible), one per
        extra constraint (subclasses add their own)."""
        return [np.asarray(c.fn(self, X, b), dtype=np.float64) for c in self.extra_constraints]

    # ------------------------------------------------------------------ exact front
    @cached_property
    def _exact(self) -> tuple[np.ndarray, np.ndarray]:
        X = self.enumerate()
        ev = self.evaluate(X)
        ok = ev.feasible
        idx = nondominated(ev.F[ok])
        Xf, Ff = unique_rows(X[ok][idx], ev.F[ok][idx])
        return Ff, Xf

    def pareto_front(self) -> tuple[np.ndarray, np.ndarray]:
        """The true Pareto front and set ``(F, X)`` of the feasible space, by enumeration;
        one representative (lexicographically first decision) per distinct objective vector."""
        return self._exact

    # ------------------------------------------------------------------ decoding
    def decode(self, x: Sequence[int]) -> dict[str, Any]:
        """The decision dict of one decision vector."""
        l, k, w = (int(v[0]) for v in self.columns(np.asarray([x])))
        opt = self.costs.options[k]
        return {"split": l, "processor": opt.processor, "processor_kind": opt.kind,
                "clock_hz": opt.clock_hz, "clock_level": opt.level,
                "wire_dtype": self.costs.wire_dtypes[w]}

    def candidates(self, X: np.ndarray) -> list[Candidate]:
        """Evaluate ``X`` [N, 3] and wrap each row as a :class:`Candidate`."""
        X = np.asarray(X).reshape(-1, 3)
        if len(X) == 0:
            return []
        ev = self.evaluate(X)
        F, b = ev.F, ev.metrics
        out = []
        for i in range(len(X)):
            viol = float(ev.violation[i])
            out.append(Candidate(
                decision=self.decode(X[i]),
                objectives={name: float(-F[i, j] if j >= len(OBJECTIVES) and
                                        self.extra_objectives[j - len(OBJECTIVES)].sense == "max" else F[i, j])
                            for j, name in enumerate(self.objectives)},
                feasible=viol == 0.0, violation=viol,
                metrics={key: float(b[key][i]) for key in BREAKDOWN},
            ))
        return out

    def encode(self, split: int, processor: str, clock_hz: float | None = None,
               wire_dtype: str | None = None) -> np.ndarray:
        """The decision vector of a decision (clock: the processor's highest by default;
        wire dtype: the compute dtype)."""
        opts = [i for i, o in enumerate(self.costs.options) if o.processor == processor]
        if not opts:
            raise ConfigError(f"processor {processor!r} is not a head option; valid: "
                              f"{', '.join(sorted({o.processor for o in self.costs.options}))}")
        if clock_hz is None:
            k = max(opts, key=lambda i: self.costs.options[i].clock_hz)
        else:
            k = min(opts, key=lambda i: abs(self.costs.options[i].clock_hz - clock_hz))
        wire = wire_dtype or self.costs.dtype
        if wire not in self.costs.wire_dtypes:
            raise ConfigError(f"wire dtype {wire!r} is not searched; valid: {', '.join(self.costs.wire_dtypes)}")
        return np.array([split, k, self.costs.wire_dtypes.index(wire)])

    def get_params(self) -> dict[str, Any]:
        """The problem's settings, JSON-serialisable (recorded in results and plans)."""
        c = self.costs
        return {"model": c.model, "granularity": c.granularity, "dtype": c.dtype, "device": c.device,
                "network": c.network, "server": c.server, "cost_model": c.cost_model,
                "wire_dtypes": list(c.wire_dtypes), "memory_limit_bytes": self.limit_bytes,
                "interior_only": self.interior_only, "split_space": self.boundary_space,
                **({"result": c.result, "download_bytes": c.download_bytes} if c.result != "raw" else {}),
                **({"extra_objectives": [o.name for o in self.extra_objectives]} if self.extra_objectives else {}),
                **({"extra_constraints": [c.describe() for c in self.extra_constraints]}
                   if self.extra_constraints else {}),
                "head_options": [f"{o.processor}@{o.clock_hz / 1e9:.3g}GHz" for o in c.options]}
