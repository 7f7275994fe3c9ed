"""Synthetic inputs for the split-search tests: a small DAG, CostTables and a link."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optimizer.cost import CostTable
from optimizer.graph.layergraph import LayerSpec, build_graph
from optimizer.search.split import split_costs_from_tables


def small_graph():
    """conv -> conv -> conv(+skip from the first) -> add -> pool -> dense x2 (7 layers)."""
    s = [
        LayerSpec("c1", "conv", "Conv2D", ("in",), ("t1",), ((32, 32, 16),), macs=4_000_000, params=448),
        LayerSpec("c2", "conv", "Conv2D", ("t1",), ("t2",), ((16, 16, 32),), macs=1_200_000, params=4640),
        LayerSpec("c3", "conv", "Conv2D", ("t2",), ("t3",), ((16, 16, 32),), macs=2_400_000, params=9248),
        LayerSpec("sk", "conv", "Conv2D", ("t1",), ("t4",), ((16, 16, 32),), macs=130_000, params=544),
        LayerSpec("add", "add", "Add", ("t3", "t4"), ("t5",), ((16, 16, 32),)),
        LayerSpec("pool", "pool", "GlobalAveragePooling2D", ("t5",), ("t6",), ((32,),)),
        LayerSpec("fc", "dense", "Dense", ("t6",), ("out",), ((10,),), macs=320, params=330),
    ]
    return build_graph("tiny", s, [("in", (64, 64, 3))], ["out"])


def table(graph, scale: float, power_w: float, name: str = "phone",
          processors=("cpu", "gpu"), kinds=("cpu", "gpu")) -> CostTable:
    n, p = len(graph), len(processors)
    macs = graph.macs_array + 1e4
    lat = np.outer(macs, np.linspace(1.0, 0.5, p)) * scale
    return CostTable(
        model=graph.name, device=name, dtype="int8", backend="analytic", granularity="op",
        processors=tuple(processors), processor_kinds=tuple(kinds),
        layer_names=tuple(la.name for la in graph.layers),
        latency_s=lat, energy_j=lat * power_w * np.linspace(1.0, 1.5, p), supported=np.ones((n, p), bool),
        cut_bytes=graph.cut_bytes_array("int8"), weight_bytes=graph.params_array,
        live_bytes=graph.live_bytes_array("int8"), macs=graph.macs_array,
        handoff_latency_s=np.zeros((p, p)), handoff_s_per_byte=np.zeros((p, p)),
        handoff_j_per_byte=np.zeros((p, p)), memory_capacity_bytes=np.full(p, np.inf),
        active_power_w=np.full(p, power_w),
    )


@dataclass
class ToyLink:
    """Huang et al. radio model at a fixed throughput (what optimizer.hardware.Link computes)."""

    name: str = "toy"
    uplink_bps: float = 10e6
    downlink_bps: float = 10e6
    rtt_s: float = 0.005
    alpha_u: float = 283.17e-3 / 1e6
    alpha_d: float = 137.01e-3 / 1e6
    beta: float = 132.86e-3

    def upload_s(self, n):
        return np.asarray(n) * 8.0 / self.uplink_bps

    def download_s(self, n):
        return np.asarray(n) * 8.0 / self.downlink_bps

    def upload_j(self, n):
        return (self.alpha_u * self.uplink_bps + self.beta) * self.upload_s(n)

    def download_j(self, n):
        return (self.alpha_d * self.downlink_bps + self.beta) * self.download_s(n)


def small_costs(link=None, **kwargs):
    g = small_graph()
    clocks = {0: 1.0e9, 1: 2.0e9}
    heads = {}
    for proc in ("cpu", "gpu"):
        for f in clocks.values():
            # faster at the higher clock, and more power (f^3)
            heads[(proc, f)] = table(g, scale=2e-9 * 2.0e9 / f, power_w=1.0 * (f / 2e9) ** 3 + 0.2)
    server = table(g, scale=1e-10, power_w=0.0, name="server", processors=("cloud",), kinds=("cloud",))
    return g, split_costs_from_tables(g, heads, server, link or ToyLink(), device="toyphone",
                                      server="toyserver", **kwargs)
