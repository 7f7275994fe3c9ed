"""Sustained-run simulation of every shipped thermal spec under its calibration load.

Prints, per device: time to first throttle, time to "severe", when the hottest die passes
80 °C, when the skin passes the governor's thresholds, sustained/initial throughput, peak skin
and die temperatures, and the wall time of a 10-minute simulation; then the throughput of the
vectorised steady-state objective used by searches.

Run: .venv/bin/python benchmarks/bench_thermal_sim.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.hardware.thermal_spec import available_thermal_specs, load_thermal_spec  # noqa: E402
from optimizer.thermal.simulate import SteadyStateObjective, reference_workload, simulate  # noqa: E402

#: TADF's Jetson Nano experiment ran at 40 °C ambient (docs/METHODS.md section 4); the phones at 25 °C (§2, §5)
AMBIENT = {"jetson_nano": 40.0}


def _first(times: np.ndarray, mask: np.ndarray) -> str:
    idx = np.flatnonzero(mask)
    return f"{times[idx[0]]:.0f}" if len(idx) else "-"


def main() -> None:
    print(f"{'device':14s} {'amb':>4s} {'throttle s':>10s} {'severe s':>9s} {'die>80 s':>9s} "
          f"{'skin49 s':>9s} {'skin51 s':>9s} {'fps sust/init':>14s} {'peak skin':>10s} {'peak die':>9s} {'10 min sim':>11s}")
    for name in available_thermal_specs():
        spec = load_thermal_spec(name)
        amb = AMBIENT.get(name, 25.0)
        wl = reference_workload(spec)
        t0 = time.perf_counter()
        r = simulate(spec, wl, duration_s=600.0, ambient_c=amb)
        wall = time.perf_counter() - t0
        dies = [spec.node_index(n) for n in spec.die_nodes]
        skin = r.temps_c[:, spec.node_index(spec.skin)]
        hot = r.temps_c[:, dies].max(axis=1)
        fmt = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
        print(f"{name:14s} {amb:4.0f} {fmt(r.time_to_first_throttle_s):>10s} {fmt(r.time_to_severe_s):>9s} "
              f"{_first(r.times_s, hot >= 80):>9s} {_first(r.times_s, skin >= 49):>9s} "
              f"{_first(r.times_s, skin >= 51):>9s} {r.sustained_fps / r.fps[0]:14.2f} "
              f"{r.peak_skin_c:10.1f} {r.peak_die_c:9.1f} {wall * 1000:9.0f} ms")
    spec = load_thermal_spec("pixel4")
    obj = SteadyStateObjective(spec)
    P = np.random.default_rng(0).uniform(0, 3, size=(100_000, len(spec.processor_names)))
    t0 = time.perf_counter()
    peak = obj.peak_die_c(P)
    wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    ttt = obj.time_to_first_trip_s(P[:1000])
    wall2 = time.perf_counter() - t0
    print(f"\nsteady-state objective (pixel4): {len(P):,} candidates in {wall * 1000:.1f} ms "
          f"({len(P) / wall / 1e6:.1f} M/s); mean peak die {peak.mean():.1f} °C")
    print(f"time to first governor trip (closed form, 1 s grid, 600 s): 1,000 candidates in {wall2 * 1000:.0f} ms; "
          f"{np.isfinite(ttt).mean() * 100:.0f} % trip within 10 min")


if __name__ == "__main__":
    main()
