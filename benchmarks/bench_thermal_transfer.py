"""Thermal models that transfer (issue 32): fit on some data, score on held-out data logged at
another step, next to persistence and a ridge reference fitted on the same training data.

No public smartphone log with per-sensor temperatures, utilisations, clocks and battery current
at ~1 Hz under a licence that allows redistribution was found (what was searched is in
search_spaces/thermal/traces/README.md), so the real log is the Odroid-XU3 board trace shipped
there (Exynos 5422, the SoC of the Galaxy S5):

1. Odroid-XU3 (real, 0.1 s, one 69.5-min heating recording): fit on t >= 600 s, score on the
   held-out first 600 s (the ~12 °C transient) at the logged 0.1 s step and resampled to 1 s
   (as a 1 Hz phone logger would write it; inputs averaged over each second).
2. Phone log (synthetic, optimizer/thermal/phone_log.py): fit on 3 concatenated recordings
   (seed 0), score on 2 other recordings logged at other steps (seeds 1, 2).

For each model type (linear = the default, rc), prints model / ridge / persistence RMSE (°C,
all sensors) at 1, 10 and 60 steps and open loop, persistence ÷ model and model ÷ ridge, and
the issue's acceptance: default model at 60 steps <= persistence ÷ 2.5 and <= ridge.

Run: .venv/bin/python benchmarks/bench_thermal_transfer.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.thermal.fit import evaluate, fit_model  # noqa: E402
from optimizer.thermal.phone_log import make_phone_log  # noqa: E402
from optimizer.thermal.trace import Trace, read_trace  # noqa: E402

TRACE = Path(__file__).resolve().parents[1] / "search_spaces" / "thermal" / "traces" / "odroid_xu3_rise.csv.gz"
KINDS = ("linear", "rc")
DEFAULT = "linear"


def _score(label: str, models: dict, test: Trace, train: Trace, horizons: list[int]) -> dict[str, dict]:
    """Print one table per test set and return the last horizon's row per model kind."""
    print(f"\n-- {label}: {test.n_rows} rows in {len(test.segments)} segment(s) at step {test.dt_s:.4g} s")
    print(f"{'model':8s} {'horizon':>16s} {'model':>8s} {'ridge':>8s} {'persist.':>8s} {'pers/model':>11s} "
          f"{'model/ridge':>12s}")
    last = {}
    for kind, m in models.items():
        for s in evaluate(m, test, horizons, train=train):
            mod, per = s.rmse_c["overall"], s.persistence_rmse_c["overall"]
            rid = s.ridge_rmse_c["overall"] if s.ridge_rmse_c else float("nan")
            h = s.label if s.seconds is None else f"{s.steps} ({s.seconds:.3g} s)"
            print(f"{kind:8s} {h:>16s} {mod:8.3f} {rid:8.3f} {per:8.3f} {per / mod:11.2f} {mod / rid:12.2f}")
            if s.steps == horizons[-1]:
                last[kind] = {"model": mod, "ridge": rid, "persistence": per}
    return last


def _fit_all(train: Trace) -> dict:
    models = {}
    for kind in KINDS:
        t0 = time.perf_counter()
        m = fit_model(train, kind)
        print(f"fitted {kind} in {time.perf_counter() - t0:.1f} s at a {m.info['fit_step_s']:.4g} s step; "
              f"{m.info['discretisation']}")
        models[kind] = m
    return models


def _verdict(label: str, row: dict) -> None:
    mod, rid, per = row["model"], row["ridge"], row["persistence"]
    print(f"   acceptance ({label}, default {DEFAULT}, 60 steps): model {mod:.3f} <= persistence/2.5 "
          f"{per / 2.5:.3f}: {'yes' if mod <= per / 2.5 else 'NO'}; model <= ridge {rid:.3f}: "
          f"{'yes' if mod <= rid else 'NO'}")


def odroid() -> None:
    trace = read_trace(TRACE, "t_s", "t_a15_core*_c,t_gpu_c", "p_a7_w,p_a15_w,p_mem_w,p_gpu_w")
    train, test = trace.window(600.0, None), trace.window(None, 600.0)
    print(f"== Odroid-XU3 (real): train t >= 600 s ({train.n_rows} rows), test t < 600 s; "
          f"{len(trace.temp_names)} sensors x {len(trace.input_names)} inputs")
    models = _fit_all(train)
    _score("held-out transient at the logged 0.1 s step (600 steps = 60 s)", models, test, train, [1, 10, 600])
    rows = _score("held-out transient resampled to 1 s", models, test.resample(1.0, hold_inputs=True), train,
                  [1, 10, 60])
    _verdict("Odroid-XU3, 1 s", rows[DEFAULT])


def phone_log() -> None:
    cols = ("time_s", "t_*_c", "util_*,freq_*,p_battery_w")
    with tempfile.TemporaryDirectory() as d:
        paths = [Path(d) / f"log{seed}.csv" for seed in (0, 1, 2)]
        make_phone_log(seed=0, recordings=3).to_csv(paths[0], index=False)
        for seed, p in ((1, paths[1]), (2, paths[2])):
            make_phone_log(seed=seed, recordings=1).to_csv(p, index=False)
        train, *others = (read_trace(p, *cols) for p in paths)
    print(f"\n== phone log (synthetic): train {train.describe()}; {len(train.temp_names)} sensors x "
          f"{len(train.input_names)} inputs")
    models = _fit_all(train)
    for i, other in enumerate(others, 1):
        rows = _score(f"another recording (seed {i})", models, other, train, [1, 10, 60])
        _verdict(f"synthetic seed {i}", rows[DEFAULT])


def main() -> None:
    odroid()
    phone_log()


if __name__ == "__main__":
    main()
