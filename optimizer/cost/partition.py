"""Delegate partitions and CPU fallback inside one stage, in O(1) per stage from prefix sums.

A TFLite delegate (GPU, NNAPI, Hexagon) claims the graph's supported operators and groups each
maximal run of consecutive supported operators into one *delegate partition*; the operators in
between run on the CPU (TFLite delegate documentation, "Delegate partitioning"; Park & Ha, IEEE
Access 2024: unsupported operators fall back to the CPU, costing transfers; docs/METHODS.md sections 1,
2). For a stage running layers ``a..b-1`` on processor ``p`` this module charges:

* every layer at its native time on ``p`` when it belongs to a delegated partition, else at the
  CPU's native time (no per-layer transfer);
* one invoke overhead of ``p`` per delegated partition (``invoke_overhead_s``; a CPU stage is one
  partition);
* one tensor copy/sync between ``p`` and the CPU at every partition boundary inside the stage:
  ``handoff_latency_s[p, cpu] + cut_bytes[i] * handoff_s_per_byte[p, cpu]`` at boundary ``i``;
* at most ``max_delegated_partitions[p]`` partitions are delegated (0 = no limit), in execution
  order; later supported runs stay on the CPU. The TFLite GPU delegate's default is 1
  (``TfLiteGpuDelegateOptionsV2Default``, tensorflow/lite/delegates/gpu/delegate_options.cc),
  NNAPI's is 3 (``StatefulNnApiDelegate::Options::max_number_delegated_partitions``).

Everything is a difference of prefix sums or a table look-up, so the exact pipeline solver's
broadcast grids and the GA's population evaluation both stay vectorised. Energy stays the
per-layer ``energy_j`` of the table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Partitions:
    """Prefix-sum arrays of one CostTable for :func:`stage_seconds`."""

    cpu: int  # index of the fallback CPU
    cum_mixed: np.ndarray  # [L+1, P] layer time: native where supported, the CPU's otherwise
    cum_cpu: np.ndarray  # [L+1] the CPU's native time
    cum_fallback: np.ndarray  # [L+1, P] the CPU's native time of layers p does not support
    cum_switch: np.ndarray  # [L+1, P] transfers at boundaries where support changes (j < i)
    cum_runs: np.ndarray  # [L+1, P] supported runs starting before i
    xfer: np.ndarray  # [L+1, P] one copy/sync p <-> cpu at boundary i
    supported: np.ndarray  # [L+1, P] bool, a False row appended
    next_supported: np.ndarray  # [L+1, P] first supported layer >= i (L if none)
    run_end: np.ndarray  # [L+1, P] end (exclusive) of the supported run containing i
    invoke: np.ndarray  # [P]
    limit: np.ndarray  # [P] most delegated partitions (0 = no limit)


def build_partitions(latency_s: np.ndarray, supported: np.ndarray, cpu: int, cut_bytes: np.ndarray,
                     handoff_latency_s: np.ndarray, handoff_s_per_byte: np.ndarray,
                     invoke_overhead_s: np.ndarray, limit: np.ndarray,
                     fallback_cpu_s: np.ndarray | None = None) -> Partitions:
    """Arrays for :func:`stage_seconds` from a table's per-layer costs (see module doc).

    ``latency_s[:, cpu]`` is the CPU's own time of every layer (the CPU runs every op); a
    supported layer's ``latency_s`` is its native time. ``fallback_cpu_s`` [L]: the CPU's time of
    a layer another processor hands over (a fused activation the delegate cannot run is then a
    kernel of its own); default ``latency_s[:, cpu]``.
    """
    L, P = latency_s.shape
    handed = latency_s[:, cpu] if fallback_cpu_s is None else np.asarray(fallback_cpu_s, float)
    supported = _inherit_free_layers(supported.astype(bool), latency_s, cpu)
    sup = np.vstack([supported, np.zeros((1, P), bool)])
    sup[:, cpu] = True
    sup[L, cpu] = False
    mixed = np.where(supported, latency_s, handed[:, None])
    mixed[:, cpu] = latency_s[:, cpu]
    zero = np.zeros((1, P))
    cum_mixed = np.vstack([zero, np.cumsum(mixed, axis=0)])
    xfer = handoff_latency_s[:, cpu][None, :] + np.asarray(cut_bytes, float)[:, None] * handoff_s_per_byte[:, cpu][None, :]
    xfer[:, cpu] = 0.0
    change = np.zeros((L + 1, P), bool)
    change[1:L] = sup[1:L] != sup[:L - 1]
    cum_switch = np.vstack([zero, np.cumsum(np.where(change, xfer, 0.0), axis=0)[:-1]])
    starts = sup[:L] & np.vstack([np.ones((1, P), bool), ~sup[:L - 1]])
    cum_runs = np.vstack([zero, np.cumsum(starts, axis=0)])
    idx = np.arange(L + 1)[:, None]
    nxt = np.minimum.accumulate(np.where(sup, idx, L)[::-1], axis=0)[::-1]  # first supported >= i
    unsup = np.minimum.accumulate(np.where(~sup, idx, L)[::-1], axis=0)[::-1]  # first unsupported >= i
    end = np.where(sup, unsup, idx)
    fallback = np.where(sup[:L], 0.0, handed[:, None])
    return Partitions(cpu=cpu, cum_mixed=cum_mixed, cum_cpu=cum_mixed[:, cpu].copy(),
                      cum_fallback=np.vstack([zero, np.cumsum(fallback, axis=0)]), cum_switch=cum_switch,
                      cum_runs=cum_runs, xfer=xfer, supported=sup, next_supported=nxt, run_end=end,
                      invoke=np.asarray(invoke_overhead_s, float), limit=np.asarray(limit, np.int64))


def _inherit_free_layers(supported: np.ndarray, latency_s: np.ndarray, cpu: int) -> np.ndarray:
    """Layers that cost nothing on ``p`` and on the CPU (fused batch-norm/activation, dropped
    dropout) take the support of the layer before them: they run inside its kernel wherever it
    runs, so they neither split a CPU partition nor form a delegate partition of their own."""
    free = (latency_s == 0) & (latency_s[:, [cpu]] == 0)
    free[0] = False
    idx = np.where(free, 0, np.arange(len(supported))[:, None])
    src = np.maximum.accumulate(idx, axis=0)
    return np.take_along_axis(supported, src, axis=0)


def stage_seconds(part: Partitions, a: np.ndarray | int, b: np.ndarray | int,
                  p: np.ndarray | int) -> np.ndarray:
    """Time of layers ``a..b-1`` (b > a) as one stage on processor ``p``: compute, fallback,
    partition-boundary transfers and one invoke per delegated partition. Broadcasts."""
    return stage_parts(part, a, b, p)[0]


def stage_parts(part: Partitions, a: np.ndarray | int, b: np.ndarray | int,
                p: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """(stage seconds, of which CPU seconds): the CPU part is the native CPU time of the layers
    that are not delegated (the whole stage when ``p`` is the CPU). Broadcasts."""
    a, b, p = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(p, np.int64))
    inner = np.minimum(a + 1, b)
    free = (part.cum_mixed[b, p] - part.cum_mixed[a, p] + part.cum_switch[b, p] - part.cum_switch[inner, p]
            + part.invoke[p] * (part.cum_runs[b, p] - part.cum_runs[inner, p] + part.supported[a, p]))
    free_cpu = part.cum_fallback[b, p] - part.cum_fallback[a, p]
    lim = part.limit[p]
    if (lim > 0).any():
        total, cpu_s = _limited(part, a, b, p, lim)
        free, free_cpu = np.where(lim > 0, total, free), np.where(lim > 0, cpu_s, free_cpu)
    return free, np.where(p == part.cpu, free, free_cpu)


def _limited(part: Partitions, a: np.ndarray, b: np.ndarray, p: np.ndarray,
             lim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stage time and its CPU part when only the first ``lim`` supported runs are delegated."""
    total = part.cum_cpu[b] - part.cum_cpu[a]
    cpu_s = total.copy()
    pos = a.copy()
    for k in range(int(lim.max())):
        s = np.minimum(part.next_supported[np.minimum(pos, b), p], b)
        e = np.minimum(part.run_end[np.minimum(s, len(part.cum_cpu) - 1), p], b)
        take = (k < lim) & (s < b)
        gain = (part.cum_mixed[e, p] - part.cum_mixed[s, p]) - (part.cum_cpu[e] - part.cum_cpu[s])
        edges = np.where(s > a, part.xfer[s, p], 0.0) + np.where(e < b, part.xfer[e, p], 0.0)
        total = total + np.where(take, gain + edges + part.invoke[p], 0.0)
        cpu_s = cpu_s - np.where(take, part.cum_cpu[e] - part.cum_cpu[s], 0.0)
        pos = np.where(take, e, b)
    return total, cpu_s
