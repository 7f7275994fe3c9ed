"""Sustained-run simulation of real plans and the thermal objectives of the searches.

Prints, from one run (MobileNetV2, int8, 25 °C ambient, 10 simulated minutes):

1. the highest-throughput pipeline on Pixel 4 (exact solver): time to first throttle / severe,
   sustained FPS, peaks, and the simulator's wall time;
2. a split plan (Pixel 4 over wifi_13) simulated the same way;
3. on Pixel 6 (and Pixel 4): the GA plan for ``throughput`` against the GA plan for
   ``sustained-fps`` — instantaneous and simulated sustained FPS of both;
4. GA wall time with and without a thermal objective (op granularity, as ``dnnplan map``);
5. accuracy of the vectorised objectives against the full simulator on 20 random mappings.

Run: ``.venv/bin/python benchmarks/bench_thermal_objectives.py``
"""

from __future__ import annotations

import time

import numpy as np

from optimizer.graph import load_graph
from optimizer.hardware import load_device
from optimizer.hardware.thermal_spec import thermal_spec_of
from optimizer.search.split import build_split_costs
from optimizer.workflow import make_pipeline_plan, make_split_plan, pipeline_problem
from optimizer.search import solve
from optimizer.search.thermal_objectives import pipeline_thermal_objectives
from optimizer.search.thermal_workload import mapping_workload
from optimizer.workflow.simulate import simulate_plan
from optimizer.thermal.simulate import simulate


def _fmt(v: float | None) -> str:
    return "never" if v is None else f"{v:.0f} s"


def main() -> None:
    block = load_graph("mobilenet_v2", "block")
    op = load_graph("mobilenet_v2", "op")

    print("== 1. full-load pipeline on pixel4 (exact, block granularity), 25 °C ambient")
    plan = make_pipeline_plan(block, "pixel4", solver="exact", cpu_cores=8).plan
    t = time.perf_counter()
    res = simulate_plan(plan, graph=block, ambient_c=25)
    wall = time.perf_counter() - t
    stages = ", ".join(f"{s.processor}[{s.first_layer}-{s.last_layer}]" for s in plan.stages)
    print(f"plan {stages}: {res.fps[0]:.1f} fps at t=0; power W "
          + ", ".join(f"{p} {w:.2f}" for p, w in zip(res.processor_names, res.power_w[0]) if w > 0))
    print(f"first throttle {_fmt(res.time_to_first_throttle_s)}, severe {_fmt(res.time_to_severe_s)}, "
          f"sustained {res.sustained_fps:.1f} fps ({res.sustained_fps / res.fps[0]:.0%}), peak skin "
          f"{res.peak_skin_c:.1f} °C, peak die {res.peak_die_c:.1f} °C; 600 simulated s in {wall * 1e3:.0f} ms")

    print("\n== 2. split plan on pixel4 over wifi_13 (exact + TOPSIS)")
    sp = make_split_plan(block, build_split_costs(block, "pixel4", "wifi_13"), solver="exact").plan
    t = time.perf_counter()
    r = simulate_plan(sp, graph=block, ambient_c=25)
    wall = time.perf_counter() - t
    print(f"split at {sp.split.layer}/{sp.model.layers} on {sp.split.head_processor}: {r.fps[0]:.1f} fps, "
          f"first throttle {_fmt(r.time_to_first_throttle_s)}, sustained {r.sustained_fps:.1f} fps, peak skin "
          f"{r.peak_skin_c:.1f} °C, peak die {r.peak_die_c:.1f} °C; {wall * 1e3:.0f} ms")

    print("\n== 3. GA for throughput vs GA for sustained-fps (block granularity, seed 0)")
    for device in ("pixel6", "pixel4"):
        dev = load_device(device)
        fast = make_pipeline_plan(block, dev, solver="ga", seed=0, cpu_cores=8).plan
        cool = make_pipeline_plan(block, dev, solver="ga", seed=0, cpu_cores=8, objectives=("sustained_fps",),
                                  extra_objectives=pipeline_thermal_objectives(["sustained-fps"], block, dev)).plan
        for label, p in (("throughput", fast), ("sustained-fps", cool)):
            st = ", ".join(f"{s.processor}[{s.first_layer}-{s.last_layer}]" for s in p.stages)
            print(f"{device} {label:>13}: {st}; t=0 {p.predicted.throughput_fps:.1f} fps, sustained (simulated) "
                  f"{p.predicted.sustained_fps:.1f} fps, first throttle {_fmt(p.predicted.time_to_throttle_s)}, "
                  f"peak die {p.predicted.peak_temp_c:.1f} °C")
        print(f"{device}: sustained-fps plan / throughput plan after 10 min = "
              f"x{cool.predicted.sustained_fps / fast.predicted.sustained_fps:.3f}")

    print("\n== 4. GA wall time (op granularity, 156 layers, population 32, seed 0; median of 3; "
          "2 objectives use NSGA-II selection and run longer than 1)")
    for device in ("pixel4", "pixel6"):
        dev = load_device(device)
        base = pipeline_problem(op, dev, cpu_cores=8)
        rows = [("throughput", base), ("throughput,energy", pipeline_problem(
            op, dev, cpu_cores=8, objectives=("throughput", "energy"), table=base.cost_table))]
        for objs in (("sustained_fps",), ("throughput", "peak_temp_c")):
            thermal = [o for o in objs if o != "throughput"]
            rows.append((",".join(objs), pipeline_problem(
                op, dev, cpu_cores=8, objectives=objs, table=base.cost_table,
                extra_objectives=pipeline_thermal_objectives(thermal, op, dev))))
        for label, prob in rows:
            times, res = [], None
            for _ in range(3):
                t = time.perf_counter()
                res = solve(prob, "ga", seed=0)
                times.append(time.perf_counter() - t)
            med = float(np.median(times))
            print(f"{device} --objectives {label:<24} {med:6.2f} s, {res.evaluations} evaluations, "
                  f"{med / res.evaluations * 1e3:.2f} ms per evaluation")

    print("\n== 5. objective vs full simulator, 20 random mappings (block granularity)")
    for device in ("pixel4", "pixel6", "galaxy_s20"):
        dev = load_device(device)
        prob = pipeline_problem(block, dev, cpu_cores=8, objectives=("sustained_fps", "time_to_throttle_s"),
                                extra_objectives=pipeline_thermal_objectives(["sustained-fps", "time-to-throttle"],
                                                                             block, dev))
        X = np.vstack([prob._fill_unused(x) for x in prob.enumerate_mappings()])
        X = X[np.random.default_rng(0).choice(len(X), 20, replace=False)]
        t = time.perf_counter()
        out = prob.evaluate(X)
        t_obj = time.perf_counter() - t
        t = time.perf_counter()
        sims = [simulate(thermal_spec_of(dev), mapping_workload(prob, x, block, dev)) for x in X]
        t_sim = time.perf_counter() - t
        err = np.array([out["sustained_fps"][i] / s.sustained_fps - 1 for i, s in enumerate(sims)])
        ttt = np.array([min(s.time_to_first_throttle_s or 600.0, 600.0) for s in sims])
        print(f"{device}: sustained_fps error mean {np.mean(np.abs(err)):.1%}, max {np.max(np.abs(err)):.1%}; "
              f"time to throttle exact in {np.sum(ttt == out['time_to_throttle_s'])}/20; "
              f"{sum(s.time_to_first_throttle_s is not None for s in sims)}/20 throttle; objectives "
              f"{t_obj * 1e3:.1f} ms for 20 vs simulator {t_sim:.2f} s")


if __name__ == "__main__":
    main()
