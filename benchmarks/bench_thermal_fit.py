"""Thermal model fitting: the real Odroid-XU3 trace and a multi-recording 1 Hz phone log.

1. Odroid-XU3 (real, search_spaces/thermal/traces, 0.1 s): fit on t >= 600 s, evaluate on the
   first 10 minutes (the heating transient, ~12 °C of rise) at 1 step, 600 steps (60 s) and
   open loop: default fits, the older 0.1 s least squares and open-loop RC, the authors'
   published A/B model (Bhat et al.) and persistence.
2. Phone log (synthetic, optimizer/thermal/phone_log.py: no real public log is used):
   3 concatenated recordings, 13 sensors x 19 inputs, ~3,000 rows at a jittered 1.02-1.04 s;
   fit on them, evaluate on another recording (another seed and step) at 1, 10 and 60 steps
   and open loop against persistence; RC fit wall time (target: under 60 s).

Run: .venv/bin/python benchmarks/bench_thermal_fit.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.shipped import shipped_root  # noqa: E402
from optimizer.thermal.fit import evaluate, fit_model, fit_rc_open_loop, fixed_model  # noqa: E402
from optimizer.thermal.phone_log import make_phone_log  # noqa: E402
from optimizer.thermal.trace import read_trace  # noqa: E402

TRACE = shipped_root() / "thermal" / "traces" / "odroid_xu3_rise.csv.gz"

# Bhat, Gumussoy, Ogras (ACM TECS 2017), their published model of the Odroid-XU3:
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


def _table(models: dict, test, horizons: list[int], head: str) -> None:
    rows = []
    for label, m in models.items():
        scores = evaluate(m, test, horizons)
        rows.append((label, [sc.rmse_c["overall"] for sc in scores]))
    rows.append(("persistence", [sc.persistence_rmse_c["overall"] for sc in scores]))
    print(f"\n{'model':34s} " + " ".join(f"{h:>12s}" for h in head.split(",")) + "   RMSE °C")
    for label, r in rows:
        print(f"{label:34s} " + " ".join(f"{v:12.3f}" for v in r))


def _timed(label: str, fn):
    t0 = time.perf_counter()
    m = fn()
    taus = ", ".join(f"{t:.3g}" for t in m.time_constants_s()[:4])
    print(f"fitted {label} in {time.perf_counter() - t0:.1f} s (fit step {m.info.get('fit_step_s', m.dt_s):.3g} s); "
          f"time constants {taus} s")
    for row in m.info.get("hidden_validation") or []:
        print(f"   held-out open-loop RMSE with {row['hidden_nodes']} hidden node(s): "
              f"{row['held_out_open_loop_rmse_c']:.3f} °C" + (" <- kept" if row["hidden_nodes"] == m.n_hidden else ""))
    return m


def odroid() -> None:
    trace = read_trace(TRACE, "t_s", "t_a15_core*_c,t_gpu_c", "p_a7_w,p_a15_w,p_mem_w,p_gpu_w")
    train, test = trace.window(600.0, None), trace.window(None, 600.0)
    print(f"== Odroid-XU3: {trace.n_rows} rows, step {trace.dt_s:g} s; train t >= 600 s ({train.n_rows} rows), "
          f"test t < 600 s ({test.n_rows} rows)")
    models = {"published A/B (Bhat et al.)": fixed_model(PUBLISHED_A, PUBLISHED_B, 0.1, trace.temp_names,
                                                         trace.input_names, source="data README")}
    models["linear, default (validated step)"] = _timed("linear", lambda: fit_model(train, "linear"))
    models["linear, 0.1 s lstsq (before)"] = _timed("linear 0.1 s", lambda: fit_model(train, "linear", fit_step_s=0.1))
    models["rc, default (validated step)"] = _timed("rc", lambda: fit_model(train, "rc"))
    models["rc, open loop (before)"] = _timed("rc open loop", lambda: fit_rc_open_loop(train))
    _table(models, test, [1, 600], "1 step,60 s,open loop")


def phone_log() -> None:
    with tempfile.TemporaryDirectory() as d:
        fit_path, other_path = Path(d) / "log.csv", Path(d) / "other.csv"
        make_phone_log(seed=0, recordings=3).to_csv(fit_path, index=False)
        make_phone_log(seed=1, recordings=1).to_csv(other_path, index=False)
        cols = ("time_s", "t_*_c", "util_*,freq_*,p_battery_w")
        train, other = read_trace(fit_path, *cols), read_trace(other_path, *cols)
    print(f"\n== phone log (synthetic): fit on {train.describe()}; {len(train.temp_names)} sensors x "
          f"{len(train.input_names)} inputs\n   evaluate on another recording: {other.describe()}")
    models = {"linear, default": _timed("linear", lambda: fit_model(train, "linear")),
              "rc, default": _timed("rc (3,000 x 13 x 19)", lambda: fit_model(train, "rc"))}
    _table(models, other, [1, 10, 60], "1 step,10 steps,60 steps,open loop")


def main() -> None:
    odroid()
    phone_log()


if __name__ == "__main__":
    main()
