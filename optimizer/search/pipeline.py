"""Pipeline mapping problem (Park & Ha, IEEE Access 2024; docs/METHODS.md section 2).

The application is a pipeline: a CPU pre-processing stage (2 threads), up to K inference
stages (default 3), each running consecutive layers (execution order) on its own processor,
and a CPU post-processing stage (2 threads). A mapping is the 2K-gene chromosome
``[n_1..n_K, p_1..p_K]``: ``n_k`` layers on stage k (sum = L; ``n_k = 0`` = stage unused) and
``p_k`` the index of its processor in the CostTable (processors of used stages are distinct).

Modeled stage time (everything from the CostTable's prefix sums, vectorised over a population):

* compute ``CostTable.stage_seconds(a, b, p)``: each maximal run of ``p``-supported layers is one
  delegate partition paying ``invoke_overhead_s``, the layers between fall back to the CPU with a
  tensor copy/sync at each partition boundary, and at most ``max_delegated_partitions`` runs are
  delegated (:mod:`optimizer.cost.partition`; prefix sums, O(1) per stage);
* plus the hand-off of the tensors crossing its input boundary from the previous stage's
  processor (the CPU pre-processing stage for the first one) and of its output boundary to the
  next one (the CPU post-processing stage for the last): a stage is busy while it receives and
  while it sends, so each hand-off occupies both neighbouring stages;
* CPU sharing: a stage that runs anything on the CPU (the CPU stage, or a delegate stage with
  fallback partitions) runs ``cpu_threads`` threads (4), pre- and post-processing
  ``host_threads`` each (2). When the threads in use exceed the device's CPU cores, all CPU work
  (CPU stage compute, fallback partitions, pre, post) slows down by ``threads_in_use /
  cpu_cores`` (fair time-slicing of the cores).

Throughput = 1 / max stage time (pre and post included; a one-stage mapping runs pre, inference
and post one frame at a time, so its frame time is their sum, see ``serial_single``); latency per frame = pre + sum of
compute + every hand-off once + post; energy per frame = sum of stage energies + hand-off
energy + pre/post energy (CPU active power x time x host_threads / cpu_threads). Memory of a
stage = weights of its layers + the peak live activation bytes among them (range maximum by a
sparse table); the constraint is ``memory <= min(capacity of its processor, memory_limit)``.

Design space: distinct mappings = ordered processor assignments to non-empty consecutive
stages, ``sum_{k=1..K} C(L-1, k-1) * P!/(P-k)!`` (compositions of L into k non-empty parts
times ordered choices of k distinct processors among the P allowed).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..cost.table import CostTable
from ..errors import ConfigError, ConstraintError, UnknownNameError
from .problem import Evaluation, nondominated, unique_rows
from .result import Candidate

#: objective name -> (metric key, sense)
OBJECTIVES: dict[str, tuple[str, str]] = {
    "throughput": ("throughput_fps", "max"),
    "latency": ("latency_s", "min"),
    "energy": ("energy_j", "min"),
    "memory": ("memory_bytes", "min"),
}
ALIASES = {"fps": "throughput"}


@dataclass(frozen=True)
class Objective:
    """An extra objective over a population (the hook for thermal objectives).

    ``fn(problem, X, out) -> ndarray [N]`` gets the population ``X`` [N, 2K] and the modeled
    metrics ``out`` of :meth:`PipelineProblem.evaluate` (``stage_time_s``, ``throughput_fps``,
    ...) and returns the objective in its natural sense; ``sense`` is ``"min"`` or ``"max"``.
    """

    name: str
    fn: Callable[[Any, np.ndarray, dict[str, np.ndarray]], np.ndarray]
    sense: str = "min"


@dataclass(frozen=True)
class _Prepared:
    K: int
    L: int
    allowed: np.ndarray  # [P'] processor indices a stage may use
    cpu: int
    cores: float
    caps: np.ndarray  # [P] per-processor memory limit (bytes)
    pre: float  # pre-processing seconds per frame (idle CPU)
    post: float
    live_sparse: np.ndarray  # [log2 L + 1, L] range-max table
    objectives: tuple[tuple[str, str, str, Objective | None], ...]  # (name, key, sense, hook)


@dataclass(eq=False)
class PipelineProblem:
    """Map a network onto a device as a pipeline of up to ``stages`` processor stages.

    Parameters
    ----------
    cost_table
        Per-layer, per-processor costs (:class:`optimizer.cost.CostTable`).
    stages
        K, the most inference stages (Park & Ha: 3).
    objectives
        Names among ``throughput`` (alias ``fps``), ``latency``, ``energy``, ``memory``, and
        the names of ``extra_objectives``.
    memory_limit
        Bytes any one processor may hold (weights + peak live activations), on top of each
        processor's own capacity; None = capacities only.
    processors
        Names of the processors stages may use (default: all in the table).
    cpu_threads, host_threads
        Threads of a CPU inference stage (4) and of pre/post-processing (2).
    cpu_cores
        CPU cores shared by those threads; None = ``cost_table.meta["cpu_cores"]`` or 8.
    pre_s, post_s
        Pre-/post-processing time per frame with ``host_threads`` threads on an idle CPU; None =
        the cost table's ``meta`` (:func:`optimizer.cost.hostproc.host_seconds`: a detector's
        resize/normalise and decode/NMS; 0 for other networks).
    serial_single
        A one-stage mapping runs pre-processing, inference and post-processing one frame after
        the other (the seed's single-processor application), so its frame time is their sum and
        its threads never overlap; a pipeline of two or more stages overlaps them (Park & Ha).
    extra_objectives
        :class:`Objective` hooks (e.g. sustained fps from the thermal simulator).

    Notes
    -----
    A dataclass: constructor arguments are stored as given (``dataclasses.replace`` makes a
    variant); they are validated by :meth:`prepare`, which every method calls first.
    """

    kind = "pipeline"

    cost_table: CostTable
    _: KW_ONLY
    stages: int = 3
    objectives: Sequence[str] = ("throughput",)
    memory_limit: float | None = None
    processors: Sequence[str] | None = None
    cpu_threads: int = 4
    host_threads: int = 2
    cpu_cores: int | None = None
    pre_s: float | None = None
    post_s: float | None = None
    serial_single: bool = True
    extra_objectives: Sequence[Objective] = ()
    _prep: _Prepared | None = field(default=None, init=False, repr=False)

    # ------------------------------------------------------------------ set-up
    def get_params(self) -> dict[str, Any]:
        """Settings as given (for logging, comparison and re-running)."""
        params = {f.name: getattr(self, f.name) for f in fields(self) if f.init and f.name != "cost_table"}
        return {**params, "objectives": list(self.objectives),
                "processors": None if self.processors is None else list(self.processors),
                "extra_objectives": [o.name for o in self.extra_objectives]}

    def prepare(self) -> _Prepared:
        """Validate the settings against the cost table and build the derived arrays."""
        if self._prep is not None:
            return self._prep
        ct = self.cost_table
        K = self.stages
        if not isinstance(K, (int, np.integer)) or isinstance(K, bool) or K < 1:
            raise ConfigError(f"stages: expected an integer >= 1, got {K!r}")
        names = list(ct.processors) if self.processors is None else list(self.processors)
        if not names:
            raise ConfigError("processors: the list of processors a stage may use is empty")
        allowed = np.array([ct.processor_index(n) for n in names], dtype=np.int64)
        if len(set(allowed.tolist())) != len(allowed):
            raise ConfigError(f"processors: {names} names a processor twice")
        if K > len(allowed):
            raise ConfigError(f"stages: {K} stages need {K} distinct processors but {ct.device!r} offers "
                              f"{len(allowed)} ({', '.join(names)}); use --stages {len(allowed)} or fewer")
        L = ct.n_layers
        if L < K:
            raise ConfigError(f"stages: network {ct.model!r} has {L} layer{'s' if L != 1 else ''} at "
                              f"{ct.granularity} granularity, fewer than the {K} stages asked for; "
                              f"use --stages {L} or fewer")
        if "cpu" not in ct.processor_kinds:
            raise ConfigError(f"device {ct.device!r} has no CPU for the pre-/post-processing stages")
        cpu = ct.processor_kinds.index("cpu")
        for name, val, lo in (("cpu_threads", self.cpu_threads, 1), ("host_threads", self.host_threads, 1)):
            if not isinstance(val, (int, np.integer)) or val < lo:
                raise ConfigError(f"{name}: expected an integer >= {lo}, got {val!r}")
        cores = self.cpu_cores if self.cpu_cores is not None else ct.meta.get("cpu_cores", 8)
        if not isinstance(cores, (int, float, np.number)) or not cores >= 1:
            raise ConfigError(f"cpu_cores: expected a number >= 1, got {cores!r}")
        host = {}
        for name, given in (("pre_s", self.pre_s), ("post_s", self.post_s)):
            seconds = ct.meta.get(name, 0.0) if given is None else given
            if not isinstance(seconds, (int, float)) or not seconds >= 0:
                raise ConfigError(f"{name}: expected seconds >= 0, got {seconds!r}")
            host[name] = float(seconds)
        caps = np.asarray(ct.memory_capacity_bytes, dtype=np.float64).copy()
        if self.memory_limit is not None:
            if not isinstance(self.memory_limit, (int, float)) or not self.memory_limit > 0:
                raise ConfigError(f"memory_limit: expected bytes > 0, got {self.memory_limit!r}")
            caps = np.minimum(caps, float(self.memory_limit))
        objs: list[tuple[str, str, str, Objective | None]] = []
        hooks = {o.name: o for o in self.extra_objectives}
        if isinstance(self.objectives, str) or not self.objectives:
            raise ConfigError(f"objectives: expected a non-empty list of names, got {self.objectives!r}")
        for raw in self.objectives:
            name = ALIASES.get(raw, raw)
            if name in OBJECTIVES:
                key, sense = OBJECTIVES[name]
                objs.append((name, key, sense, None))
            elif name in hooks:
                if hooks[name].sense not in ("min", "max"):
                    raise ConfigError(f"objective {name!r}: sense must be 'min' or 'max', got {hooks[name].sense!r}")
                objs.append((name, name, hooks[name].sense, hooks[name]))
            else:
                raise UnknownNameError("objective", raw, [*OBJECTIVES, *ALIASES, *hooks])
        if len({o[0] for o in objs}) != len(objs):
            raise ConfigError(f"objectives: {list(self.objectives)} names an objective twice")
        self._prep = _Prepared(K=int(K), L=L, allowed=allowed, cpu=cpu, cores=float(cores), caps=caps,
                               pre=host["pre_s"], post=host["post_s"],
                               live_sparse=_sparse_max_table(np.asarray(ct.live_bytes, dtype=np.float64)),
                               objectives=tuple(objs))
        return self._prep

    def host_s(self) -> tuple[float, float]:
        """(pre, post) seconds per frame on an idle CPU as used (``pre_s``/``post_s`` or the table's)."""
        prep = self.prepare()
        return prep.pre, prep.post

    # --------------------------------------------------------------- geometry
    @property
    def n_genes(self) -> int:
        """Chromosome length 2K."""
        return 2 * self.prepare().K

    @property
    def n_var(self) -> int:
        """Decision-vector length (the chromosome's, 2K)."""
        return self.n_genes

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Inclusive integer bounds of a chromosome: counts ``0..L``, processor indices ``0..P-1``
        (rows must also satisfy :meth:`check_population`: counts summing to L, distinct processors)."""
        prep = self.prepare()
        P = len(self.cost_table.processors)
        return (np.zeros(2 * prep.K, np.int64),
                np.array([prep.L] * prep.K + [P - 1] * prep.K, np.int64))

    @property
    def objective_names(self) -> tuple[str, ...]:
        return tuple(o[0] for o in self.prepare().objectives)

    @property
    def objective_keys(self) -> tuple[str, ...]:
        """Metric keys of the objectives (``throughput_fps``, ``energy_j``...)."""
        return tuple(o[1] for o in self.prepare().objectives)

    @property
    def objective_senses(self) -> tuple[str, ...]:
        return tuple(o[2] for o in self.prepare().objectives)

    def space_size(self) -> int:
        """Distinct mappings: ``sum_{k=1..K} C(L-1, k-1) * P!/(P-k)!`` (see module docstring)."""
        prep = self.prepare()
        P = len(prep.allowed)
        return sum(math.comb(prep.L - 1, k - 1) * math.perm(P, k) for k in range(1, prep.K + 1))

    space_counting = ("ordered assignments of distinct processors to non-empty consecutive stages: "
                      "sum over k=1..K of C(L-1, k-1) * P!/(P-k)!")

    # ------------------------------------------------------------- evaluation
    def check_population(self, X: np.ndarray) -> np.ndarray:
        """Validate a population [N, 2K] of chromosomes; returns it as int64."""
        prep = self.prepare()
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != 2 * prep.K:
            raise ValueError(f"population must have shape [N, {2 * prep.K}], got {X.shape}")
        X = X.astype(np.int64, copy=False)
        counts, procs = X[:, :prep.K], X[:, prep.K:]
        used = counts > 0
        bad = (counts < 0).any(axis=1) | (counts.sum(axis=1) != prep.L) | ~used.any(axis=1)
        bad |= (used & ~np.isin(procs, prep.allowed)).any(axis=1)
        for i, j in itertools.combinations(range(prep.K), 2):
            bad |= used[:, i] & used[:, j] & (procs[:, i] == procs[:, j])
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"population row {row} is not a valid mapping: {X[row].tolist()} "
                             f"(counts >= 0 summing to {prep.L}, distinct allowed processors on used stages)")
        return X

    def evaluate(self, X: np.ndarray) -> Evaluation:
        """Model a whole population at once.

        Parameters
        ----------
        X
            A whole population: int array of shape [N, 2K] (N chromosomes
            ``[n_1..n_K, p_1..p_K]``; [N, 6] for the default K = 3). One candidate is a
            population of one row, ``X[None]``.

        Returns
        -------
        Evaluation
            ``F`` [N, M] objectives in minimisation form (maximised ones negated), ``G`` [N, 1]
            memory over the cap in bytes (0 = feasible), and per-candidate metrics:
            ``throughput_fps``, ``latency_s``, ``energy_j``, ``memory_bytes`` (largest stage),
            ``bottleneck_s``, ``stage_time_s`` [N, K], ``stage_compute_s`` [N, K],
            ``stage_memory_bytes`` [N, K], ``pre_s``, ``post_s``, ``cpu_slowdown``.
        """
        prep = self.prepare()
        X = self.check_population(X)
        ct = self.cost_table
        K, cpu = prep.K, prep.cpu
        counts, procs = X[:, :K], X[:, K:].copy()
        used = counts > 0
        procs[~used] = cpu  # any valid index; unused stages contribute nothing
        b = np.cumsum(counts, axis=1)
        a = b - counts
        # partitions, fallback, invokes; cpu_s: the part that runs on the CPU
        total, cpu_s = ct.stage_parts(np.where(used, a, 0), np.where(used, b, 1), procs)
        serial, slow = self._cpu_sharing(used, used & ((procs == cpu) | (cpu_s > 0)))
        compute = np.where(used, total + cpu_s * (slow[:, None] - 1.0), 0.0)
        energy = (ct.cum_energy_j[b, procs] - ct.cum_energy_j[a, procs]).sum(axis=1)

        prev = np.empty_like(procs)
        last = np.full(len(X), cpu)
        for k in range(K):
            prev[:, k] = last
            last = np.where(used[:, k], procs[:, k], last)
        nxt = np.empty_like(procs)
        following = np.full(len(X), cpu)
        for k in range(K - 1, -1, -1):
            nxt[:, k] = following
            following = np.where(used[:, k], procs[:, k], following)

        in_s, in_j = ct.handoff(a, prev, procs)
        out_s, _ = ct.handoff(b, procs, nxt)
        in_s, in_j, out_s = (np.where(used, v, 0.0) for v in (in_s, in_j, out_s))
        # the last used stage's output goes to the CPU post-processing stage
        _, final_j = ct.handoff(np.full(len(X), prep.L), last, np.full(len(X), cpu))
        final_s = np.take_along_axis(out_s, (K - 1 - np.argmax(used[:, ::-1], axis=1))[:, None], 1)[:, 0]

        stage_time = np.where(used, in_s + compute + out_s, 0.0)
        pre = prep.pre * slow
        post = prep.post * slow
        bottleneck = np.where(serial, stage_time.sum(axis=1) + pre + post,
                              np.maximum(stage_time.max(axis=1), np.maximum(pre, post)))
        with np.errstate(divide="ignore"):
            throughput = np.where(bottleneck > 0, 1.0 / bottleneck, np.inf)
        latency = pre + post + compute.sum(axis=1) + in_s.sum(axis=1) + final_s
        host_j = ct.active_power_w[cpu] * (prep.pre + prep.post) * self.host_threads / self.cpu_threads
        energy = energy + in_j.sum(axis=1) + final_j + host_j

        weights = ct.cum_weight_bytes[b] - ct.cum_weight_bytes[a]
        mem = np.where(used, weights + range_max(prep.live_sparse, a, b), 0.0)
        violation = np.where(used, np.maximum(0.0, mem - prep.caps[procs]), 0.0).sum(axis=1)

        out: dict[str, np.ndarray] = {
            "throughput_fps": throughput, "latency_s": latency, "energy_j": energy,
            "memory_bytes": mem.max(axis=1), "bottleneck_s": bottleneck, "stage_time_s": stage_time,
            "stage_compute_s": compute, "stage_memory_bytes": mem, "pre_s": pre, "post_s": post,
            "cpu_slowdown": slow,
        }
        F = np.empty((len(X), len(prep.objectives)))
        for m, (_, key, sense, hook) in enumerate(prep.objectives):
            if hook is not None:
                out[key] = np.asarray(hook.fn(self, X, out), dtype=np.float64)
            F[:, m] = -out[key] if sense == "max" else out[key]
        return Evaluation(F, violation[:, None], out)

    def _cpu_sharing(self, used: np.ndarray, cpu_users: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(serial [N], CPU slowdown [N]) from the used stages and those running on the CPU [N, K]."""
        n_cpu = cpu_users.sum(axis=1)
        serial = used.sum(axis=1) == 1 if self.serial_single else np.zeros(len(used), bool)
        threads = np.where(serial, np.maximum(self.host_threads, self.cpu_threads * np.minimum(n_cpu, 1)),
                           2 * self.host_threads + self.cpu_threads * n_cpu)
        return serial, np.maximum(1.0, threads / self.prepare().cores)

    # ------------------------------------------------------------- decoding
    def canonical(self, X: np.ndarray) -> np.ndarray:
        """Canonical chromosomes: used stages first, unused stages ``(0, -1)``.

        Two chromosomes describe the same mapping exactly when their canonical rows are equal
        (unused stages' processor genes and their positions do not matter).
        """
        prep = self.prepare()
        X = np.asarray(X, dtype=np.int64)
        counts, procs = X[:, :prep.K], X[:, prep.K:]
        order = np.argsort(counts == 0, axis=1, kind="stable")
        c = np.take_along_axis(counts, order, 1)
        p = np.where(c > 0, np.take_along_axis(procs, order, 1), -1)
        return np.hstack([c, p])

    def key(self, x: Sequence[int]) -> tuple[int, ...]:
        """Hashable canonical key of one chromosome (for fitness caches)."""
        K = self.prepare().K
        used = [(int(n), int(p)) for n, p in zip(x[:K], x[K:2 * K]) if n > 0]
        pad = K - len(used)
        return tuple([n for n, _ in used] + [0] * pad + [p for _, p in used] + [-1] * pad)

    def decode(self, x: Sequence[int]) -> dict[str, Any]:
        """JSON-ready decision of one chromosome: counts, processor names, used stages."""
        prep = self.prepare()
        row = self.canonical(np.asarray([x]))[0]
        names = self.cost_table.processors
        counts = [int(v) for v in row[:prep.K]]
        procs = [names[int(p)] if p >= 0 else None for p in row[prep.K:]]
        stages, start = [], 0
        for n, p in zip(counts, procs):
            if n > 0:
                stages.append({"processor": p, "first_layer": start, "last_layer": start + n - 1})
                start += n
        return {"counts": counts, "processors": procs, "stages": stages}

    def encode(self, counts: Sequence[int], processors: Sequence[str | int]) -> np.ndarray:
        """Chromosome from counts and processor names (or indices); unused processors filled in."""
        prep = self.prepare()
        idx = [p if isinstance(p, (int, np.integer)) else self.cost_table.processor_index(p)
               for p in processors if p is not None]
        spare = [int(p) for p in prep.allowed if p not in idx]
        idx = idx + spare[:prep.K - len(idx)]
        counts = list(counts) + [0] * (prep.K - len(counts))
        return np.asarray([*counts, *idx], dtype=np.int64)

    def candidates(self, X: np.ndarray, out: Evaluation | None = None) -> list[Candidate]:
        """Evaluated :class:`Candidate` objects for the rows of ``X``."""
        prep = self.prepare()
        if out is None:
            out = self.evaluate(X)
        extra = [o[1] for o in prep.objectives if o[3] is not None]
        result = []
        for i, x in enumerate(np.asarray(X)):
            objectives = {k: float(out[k][i]) for k in ("throughput_fps", "latency_s", "energy_j",
                                                          "memory_bytes", *extra)}
            used = np.asarray(x[:prep.K]) > 0
            metrics = {"stage_time_s": [float(v) for v, u in zip(out["stage_time_s"][i], used) if u],
                       "stage_compute_s": [float(v) for v, u in zip(out["stage_compute_s"][i], used) if u],
                       "stage_memory_bytes": [float(v) for v, u in zip(out["stage_memory_bytes"][i], used) if u],
                       "bottleneck_s": float(out["bottleneck_s"][i]), "pre_s": float(out["pre_s"][i]),
                       "post_s": float(out["post_s"][i]), "cpu_slowdown": float(out["cpu_slowdown"][i]),
                       "chromosome": [int(v) for v in x]}
            result.append(Candidate(decision=self.decode(x), objectives=objectives,
                                    feasible=bool(out.feasible[i]), violation=float(out.violation[i]),
                                    metrics=metrics))
        return result

    # ----------------------------------------------------------- enumeration
    def enumerate_mappings(self, chunk: int = 1 << 18) -> Iterator[np.ndarray]:
        """Every distinct mapping once, as canonical populations of at most ~``chunk`` rows."""
        prep = self.prepare()
        K, L = prep.K, prep.L
        for k in range(1, K + 1):
            inner = _combinations(L - 1, k - 1) + 1  # [C, k-1] sorted inner boundaries in 1..L-1
            bounds = np.hstack([np.zeros((len(inner), 1), np.int64), inner, np.full((len(inner), 1), L)])
            counts = np.diff(bounds, axis=1)
            counts = np.hstack([counts, np.zeros((len(inner), K - k), np.int64)])
            orders = np.array(list(itertools.permutations(prep.allowed.tolist(), k)), dtype=np.int64)
            orders = np.hstack([orders, np.full((len(orders), K - k), -1, np.int64)])
            step = max(1, chunk // max(1, len(inner)))
            for s in range(0, len(orders), step):
                o = orders[s:s + step]
                X = np.hstack([np.tile(counts, (len(o), 1)), np.repeat(o, len(counts), axis=0)])
                yield X

    def _fill_unused(self, X: np.ndarray) -> np.ndarray:
        """Replace the ``-1`` processor genes of canonical rows by valid spare processors."""
        prep = self.prepare()
        X = X.copy()
        procs = X[:, prep.K:]
        for k in range(prep.K):
            missing = procs[:, k] < 0
            if not missing.any():
                continue
            for p in prep.allowed:
                free = missing & ~(procs == p).any(axis=1)
                procs[free, k] = p
                missing &= ~free
        return X

    def pareto_front(self, objectives: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The true Pareto front by exhaustive enumeration (pymoo's ``_calc_pareto_front``).

        Parameters
        ----------
        objectives
            Two objective names (default: the problem's own, which must then be two).

        Returns
        -------
        (F, X)
            ``F`` [m, 2] front values in minimisation form (sorted by the first objective) and
            the chromosomes ``X`` [m, 2K] reaching them; only feasible mappings count.
        """
        prob = self if objectives is None else replace(self, objectives=tuple(objectives))
        if len(prob.objective_names) != 2:
            raise ConfigError(f"pareto_front: needs exactly 2 objectives, got {list(prob.objective_names)}")
        best_F, best_X = np.empty((0, 2)), np.empty((0, 2 * prob.prepare().K), np.int64)
        for X in prob.enumerate_mappings():
            X = prob._fill_unused(X)
            out = prob.evaluate(X)
            ok = out.feasible
            F = np.vstack([best_F, out.F[ok]])
            XX = np.vstack([best_X, X[ok]])
            keep = nondominated(F)
            best_X, best_F = unique_rows(XX[keep], F[keep])
        order = np.lexsort(best_F.T[::-1])
        return best_F[order], best_X[order]

    def check_memory_feasible(self) -> None:
        """Raise :class:`ConstraintError` when no mapping satisfies the memory constraint.

        Enumerates every mapping (vectorised) only when some processor's limit is finite; the
        message names the constraint and the smallest per-stage peak memory reachable.
        """
        prep = self.prepare()
        if np.all(np.isinf(prep.caps[prep.allowed])):
            return
        best_ratio, best_mem = np.inf, np.inf
        for X in self.enumerate_mappings():
            X = self._fill_unused(X)
            out = self.evaluate(X)
            if out.feasible.any():
                return
            used = X[:, :prep.K] > 0
            ratio = np.where(used, out["stage_memory_bytes"] / prep.caps[X[:, prep.K:].clip(0)], 0).max(axis=1)
            i = int(np.argmin(ratio))
            if ratio[i] < best_ratio:
                best_ratio, best_mem = float(ratio[i]), float(out["memory_bytes"][i])
        src = (f"--memory-limit {self.memory_limit / 1e6:.3f} MB" if self.memory_limit is not None
               else "the processors' memory capacities")
        raise ConstraintError(f"memory constraint ({src}): no mapping of {self.cost_table.model!r} into "
                              f"<= {prep.K} stages fits; the best reachable needs {best_mem / 1e6:.3f} MB on "
                              f"its largest stage ({best_ratio:.2f}x the limit)")


# ---------------------------------------------------------------------- helpers
def _sparse_max_table(values: np.ndarray) -> np.ndarray:
    """Sparse table for O(1) range maxima: ``T[j, i] = max(values[i : i + 2**j])``."""
    n = len(values)
    levels = max(1, int(np.floor(np.log2(max(n, 1)))) + 1)
    table = np.full((levels, max(n, 1)), -np.inf)
    table[0, :n] = values
    for j in range(1, levels):
        span = 1 << (j - 1)
        table[j, :n - (1 << j) + 1] = np.maximum(table[j - 1, :n - (1 << j) + 1],
                                                  table[j - 1, span:n - span + 1])
    return table


def range_max(table: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``max(values[a:b])`` elementwise (0 where the range is empty)."""
    length = np.maximum(b - a, 1)
    j = np.floor(np.log2(length)).astype(np.int64)
    lo = np.minimum(a, table.shape[1] - 1)
    hi = np.clip(b - (1 << j), 0, table.shape[1] - 1)
    return np.where(b > a, np.maximum(table[j, lo], table[j, hi]), 0.0)


def _combinations(n: int, r: int) -> np.ndarray:
    """All r-subsets of range(n) in lexicographic order, int64 [C(n, r), r]."""
    if r == 0:
        return np.zeros((1, 0), np.int64)
    if r == 1:
        return np.arange(n, dtype=np.int64)[:, None]
    if r == 2:
        i, j = np.triu_indices(n, k=1)
        return np.stack([i, j], axis=1).astype(np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), r)),
                       dtype=np.int64, count=math.comb(n, r) * r)
    return flat.reshape(-1, r)
