"""Learned cost backend fidelity on host measurements, leave-one-network-out.

Run: .venv/bin/python benchmarks/bench_cost_learned.py [--refresh] [--repeats 20] [--rounds 3]

Measures (or reads from results/cache/measure/) the per-layer onnxruntime tables of the zoo
networks below on this host (1 intra-op thread, ``--rounds`` sessions of ``--warmup`` + ``--repeats``
runs, per-layer medians on the thread-CPU-time basis, the least contended round kept), then for
each network fits the learned Pipeline on the *other* networks only and predicts it. Prints,
per network, measured vs predicted whole-network latency and, across networks, the MAPE and
Spearman rank correlation for
* learned (optimizer.cost.learned, leave-one-network-out),
* analytic with the host CPU re-fitted on the other networks (leave-one-network-out),
* analytic with the shipped search_spaces/devices/host.yaml (fitted on earlier measurements of
  some of these networks: not a held-out figure),
and the measurement conditions (load average, threads, repeats, rounds, time) of every table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from optimizer.cost import build_cost_table  # noqa: E402
from optimizer.cost.learned import (  # noqa: E402
    NOMINAL_BYTES_PER_S, NOMINAL_MACS_PER_S, coefficients, fit_learned_model)
from optimizer.graph import load_graph  # noqa: E402
from optimizer.hardware import load_device  # noqa: E402
from optimizer.measure.host import (  # noqa: E402
    fit_host, host_copy_bandwidth, host_device, host_peak_macs, measure_model)

#: (label, zoo name, builder variant): twelve zoo networks (the VGGs are left out: their tf2onnx
#: export alone needs > 7 GB); detectors at the FPNLite zoo's 320x320 size
NETWORKS: tuple[tuple[str, str, dict], ...] = (
    ("alexnet", "alexnet", {}),
    ("mobilenet_v1", "mobilenet_v1", {}),
    ("mobilenet_v2", "mobilenet_v2", {}),
    ("resnet50", "resnet50", {}),
    ("slimmable_resnet50_0.25x", "slimmable_resnet50", {"width": 0.25}),
    ("efficientnet_b0", "efficientnet_b0", {}),
    ("retinaface_mobilenet", "retinaface_mobilenet", {}),
    ("arcface_mobilenet", "arcface_mobilenet", {}),
    ("efficientdet_lite0", "efficientdet_lite0", {}),
    ("ssd_mobilenet_v2_fpnlite_320", "ssd_mobilenet_v2_fpnlite", {"input_size": 320}),
    ("ssd_mobilenet_v1_fpn_320", "ssd_mobilenet_v1_fpn", {"input_size": 320}),
    ("bert_small", "bert_small", {}),
)


def metrics(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float]:
    """(MAPE in %, Spearman rank correlation) of predicted vs measured whole-network latencies."""
    mape = float(np.mean(np.abs(pred - meas) / meas) * 100)
    rho = float(spearmanr(pred, meas).statistic)
    return mape, rho


def refit_host(train):
    """This host's CPU fitted on ``train`` from the nominal host, as ``dnnplan measure
    --calibrate-host`` does (optimizer.measure.host.fit_host)."""
    return fit_host(host_device([g.name for g, _ in train]), train).device


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--refresh", action="store_true", help="measure again instead of using the cache")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    load_now = os.getloadavg()[0]
    pairs = []
    for _, name, variant in NETWORKS:
        g = load_graph(name, **variant)
        pairs.append((g, measure_model(name, g, threads=1, repeats=args.repeats, warmup=args.warmup,
                                       rounds=args.rounds, refresh=args.refresh, **variant)))
    t_measure = time.perf_counter() - t0
    meas = np.array([t.rows["latency_s"].sum() for _, t in pairs])
    host = load_device("host")
    cores, _, peak = host_peak_macs()
    bandwidth = host_copy_bandwidth()  # reported only: too load-dependent here to feed the model
    learned, analytic_lono, analytic_host = [], [], []
    for k, (g, _) in enumerate(pairs):
        train = pairs[:k] + pairs[k + 1:]  # the held-out network is never in its own training set
        model = fit_learned_model(train, dtype="fp32")  # nominal 39 GMAC/s, 15 GB/s
        learned.append(build_cost_table(g, host, "fp32", "learned", model=model).whole_network_latency()[0])
        analytic_lono.append(build_cost_table(g, refit_host(train), "fp32")
                             .whole_network_latency()[0])
        analytic_host.append(build_cost_table(g, host, "fp32").whole_network_latency()[0])
    learned, analytic_lono, analytic_host = map(np.array, (learned, analytic_lono, analytic_host))

    print(f"host: {cores} cores ({peak / cores / 1e9:.1f} GMAC/s fp32 peak per core, single-thread copy "
          f"bandwidth now {bandwidth / 1e9:.1f} GB/s; learned terms at nominal {NOMINAL_MACS_PER_S / 1e9:.0f} GMAC/s, "
          f"{NOMINAL_BYTES_PER_S / 1e9:.0f} GB/s), onnxruntime, "
          f"{len(NETWORKS)} networks, leave-one-network-out; load average now {load_now:.2f}")
    print("measurement conditions (per table: threads, warm-up + repeats x rounds, 1-min load average "
          "before/after, UTC time, totals of the rounds in ms):")
    for (label, _, _), (_, t) in zip(NETWORKS, pairs, strict=True):
        m = t.meta
        rounds = ", ".join(f"{v * 1e3:.1f}" for v in m.get("round_totals_s", [])) or "n/a"
        print(f"  {label:28s} t{m.get('threads')} w{m.get('warmup')}+r{m.get('repeats')} x{m.get('rounds', 1)}  "
              f"load {m.get('load_avg_1m_before', 'n/a')}/{m.get('load_avg_1m_after', 'n/a')}  "
              f"{m.get('measured_at_utc', 'n/a')}  basis {m.get('time_basis')}  rounds [{rounds}]")
    print(f"\n{'network':28s} {'layers':>6s} {'GMAC':>6s} {'measured ms':>11s} {'learned ms':>10s} {'err':>6s} "
          f"{'analytic-LONO':>13s} {'err':>6s} {'analytic-host':>13s} {'err':>6s}")
    for (label, _, _), (g, _), m, a, b, c in zip(NETWORKS, pairs, meas, learned, analytic_lono, analytic_host,
                                                 strict=True):
        print(f"{label:28s} {len(g):6d} {g.macs_array.sum() / 1e9:6.2f} {m * 1e3:11.2f} {a * 1e3:10.2f} "
              f"{(a / m - 1) * 100:+5.0f}% {b * 1e3:13.2f} {(b / m - 1) * 100:+5.0f}% {c * 1e3:13.2f} "
              f"{(c / m - 1) * 100:+5.0f}%")
    cnn = np.array([name != "bert_small" for _, name, _ in NETWORKS])
    print(f"\n{'':32s} {'all ' + str(len(NETWORKS)) + ' networks':>40s}   {'CNNs only (bert_small left out)':>40s}")
    for label, pred in (("learned (LONO)", learned), ("analytic, host re-fitted LONO", analytic_lono),
                        ("analytic, shipped host.yaml", analytic_host)):
        mape, rho = metrics(pred, meas)
        worst = float(np.max(np.abs(pred / meas - 1)) * 100)
        mape_c, rho_c = metrics(pred[cnn], meas[cnn])
        print(f"{label:32s} MAPE {mape:5.1f} %  max {worst:5.0f} %  Spearman {rho:5.3f}   "
              f"MAPE {mape_c:5.1f} %  Spearman {rho_c:5.3f}")
    full = coefficients(fit_learned_model(pairs, dtype="fp32"))
    print("\nlearned coefficients (measured / nominal) fitted on all networks: "
          + ", ".join(f"{k.split(':', 1)[1]} {v:.3g}" for k, v in full.items() if v > 0))
    print(f"wall time {time.perf_counter() - t0:.1f} s (measuring/loading {t_measure:.1f} s)")


if __name__ == "__main__":
    main()
