"""Thermal model fitting on the real Odroid-XU3 heating trace (issue 8 acceptance).

Fits on the data after the first 10 minutes, evaluates on the first 10 minutes (the heating
transient, ~12 °C of rise): RMSE at 1 step (0.1 s), 600 steps (60 s) and open loop, for the
fitted models, the authors' published A/B model (Bhat et al., data README) and persistence.

Run: .venv/bin/python benchmarks/bench_thermal_fit.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.thermal.fit import evaluate, fit_model, fixed_model  # noqa: E402
from optimizer.thermal.trace import read_trace  # noqa: E402

TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "thermal" / "odroid_xu3_rise.csv"

# Bhat, Gumussoy, Ogras (ACM TECS 2017), as given in shared/data/README.md:
# T = [a15 core0..3, gpu] (°C), P = [a7, a15, mem, gpu] (W), step 0.1 s, T[k+1] = A T[k] + B P[k]
PUBLISHED_A = [[0.9935, 0.0015, 0.0022, 0.0014, 0.0007],
               [0.0070, 0.9913, 0.0001, 0.0008, 0.0],
               [0.0017, 0.0022, 0.9911, 0.0019, 0.0030],
               [0.0074, 0.0, 0.0, 0.9904, 0.0003],
               [0.0020, 0.0019, 0.0022, 0.0015, 0.9896]]
PUBLISHED_B = [[0.1646, 0.0793, 0.0, 0.0228],
               [0.1143, 0.0730, 0.0178, 0.0],
               [0.1440, 0.0818, 0.0, 0.0],
               [0.1160, 0.0833, 0.1112, 0.0154],
               [0.1332, 0.0713, 0.0, 0.0991]]


def main() -> None:
    trace = read_trace(TRACE, "t_s", "t_a15_core*_c,t_gpu_c", "p_a7_w,p_a15_w,p_mem_w,p_gpu_w")
    train, test = trace.window(600.0, None), trace.window(None, 600.0)
    print(f"trace: {trace.n_rows} rows, step {trace.dt_s:g} s; train t >= 600 s ({train.n_rows} rows), "
          f"test t < 600 s ({test.n_rows} rows)")
    models = {"published A/B (Bhat et al.)": fixed_model(PUBLISHED_A, PUBLISHED_B, 0.1, trace.temp_names,
                                                         trace.input_names, source="data README")}
    for label, kind, kw in (("linear (SPLASH, lstsq)", "linear", {}),
                            ("linear, ridge 1e-2", "linear", {"ridge": 1e-2}),
                            ("rc, open loop", "rc", {}),
                            ("rc, open loop + 60 s shooting", "rc", {"shooting_s": 60.0})):
        t0 = time.perf_counter()
        models[label] = fit_model(train, kind, **kw)
        taus = ", ".join(f"{t:.3g}" for t in models[label].time_constants_s())
        print(f"fitted {label} in {time.perf_counter() - t0:.1f} s; time constants {taus} s")
    rows = []
    for label, m in models.items():
        scores = evaluate(m, test, [1, 600])
        rows.append((label, [s.rmse_c["overall"] for s in scores]))
    persistence = [s.persistence_rmse_c["overall"] for s in scores]
    print(f"\n{'model':32s} {'1 step (0.1 s)':>15s} {'600 steps (60 s)':>17s} {'open loop':>10s}   RMSE °C, first 10 min")
    for label, r in [*rows, ("persistence", persistence)]:
        print(f"{label:32s} {r[0]:15.3f} {r[1]:17.3f} {r[2]:10.3f}")
    pub = rows[0][1]
    for j, horizon in enumerate(("1 step", "60 s", "open loop")):
        label, r = min(rows[1:], key=lambda row: row[1][j])
        print(f"best fitted at {horizon:9s}: {label:30s} {r[j]:.3f} °C = {r[j] / pub[j]:.2f}x published "
              f"({pub[j]:.3f}), {r[j] / persistence[j]:.2f}x persistence ({persistence[j]:.3f})")

if __name__ == "__main__":
    main()
