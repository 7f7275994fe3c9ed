"""Speed of build_cost_table: a 1,000-layer graph x 5 processors (target < 50 ms).

Run: .venv/bin/python benchmarks/bench_cost_table.py
Builds a 1,000-layer chain (conv / dwconv / pool / act / add / dense mix) and a 5-processor
device (Pixel 4's cpu, gpu, dsp, npu plus a second gpu), then times the analytic backend
(median of 20 builds, after one warm-up) and the measured backend on the same layers.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from optimizer.cost import MeasuredTable, build_cost_table  # noqa: E402
from optimizer.graph import LayerSpec, build_graph  # noqa: E402
from optimizer.hardware import load_device  # noqa: E402


def chain(n: int):
    ops = ["conv", "dwconv", "act", "pool", "add", "dense"]
    specs, prev, c = [], "x", 32
    for i in range(n):
        op = ops[i % len(ops)]
        macs = 28 * 28 * c * c * 9 if op == "conv" else 28 * 28 * c * 9 if op == "dwconv" else c * c if op == "dense" else 0
        params = 9 * c * c if op == "conv" else 9 * c if op == "dwconv" else c * c if op == "dense" else 0
        specs.append(LayerSpec(f"l{i}", op, op, (prev,), (f"t{i}",), ((28, 28, c),), macs, params))
        prev = f"t{i}"
    return build_graph("chain1000", specs, [("x", (28, 28, c))], [prev])


def timed(fn, repeats: int = 20) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    g = chain(1000)
    p4 = load_device("pixel4")
    dev = p4.model_copy(update={"processors": list(p4.processors) + [p4.processor("gpu").model_copy(update={"name": "gpu2"})]})
    analytic = timed(lambda: build_cost_table(g, dev, "int8"))
    ct = build_cost_table(g, dev, "int8")
    rows = pd.DataFrame([{"processor": p, "index": i, "layer": f"l{i}", "op": "", "latency_s": ct.latency_s[i, j],
                          "latency_std_s": 0.0, "energy_j": np.nan}
                         for j, p in enumerate(dev.processor_names) for i in range(1000)])
    mt = MeasuredTable(rows, {}, "")
    measured = timed(lambda: build_cost_table(g, dev, "int8", "measured", table=mt))
    print(f"build_cost_table, 1000 layers x {len(dev.processors)} processors: analytic {analytic * 1e3:.1f} ms "
          f"(target < 50 ms, ratio {analytic / 0.05:.2f} of budget); measured {measured * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
