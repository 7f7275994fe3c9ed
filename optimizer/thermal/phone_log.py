"""A seeded synthetic phone log as Android loggers write it, for tests and benchmarks.

No public multi-recording 1 Hz phone log with these columns and a clear licence was found
(what was searched: search_spaces/thermal/traces/README.md), so this generator stands in for
one: it is the format, not the physics, that it exercises.
A 14-node RC network (:class:`~optimizer.thermal.rc.RCNetwork`: 8 CPU cores, GPU, battery,
skin, board, modem, PMIC, plus one unlogged case node) is driven by a random sequence of
workload phases and sampled like a logger: several recordings concatenated in one CSV (time
restarts at 0 in each), a sample interval of 1.02–1.04 s with per-sample jitter, a pause
(gap) inside one recording, temperatures quantised to 0.1 °C. Its 19 inputs are the logged
per-core utilisations (8, %) and clocks (8, MHz), GPU utilisation and clock, and the battery
power in W, **negative while discharging** (Android's sign convention). Heat is
``util·(f/fmax)²`` per core (dynamic power ∝ f·V², V ∝ f), so it is not linear in any single
logged column, as on a real phone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .rc import RCNetwork

SENSORS = (*(f"t_cpu{i}_c" for i in range(8)), "t_gpu_c", "t_battery_c", "t_skin_c", "t_board_c", "t_modem_c")
INPUTS = (*(f"util_cpu{i}_pct" for i in range(8)), *(f"freq_cpu{i}_mhz" for i in range(8)),
          "util_gpu_pct", "freq_gpu_mhz", "p_battery_w")
_FMAX = np.array([1800.0] * 4 + [2800.0] * 4 + [850.0])
_PMAX = np.array([0.35] * 4 + [1.6] * 4 + [2.2])                 # W at full load and top clock


def _network() -> RCNetwork:
    """Nodes: cpu0-7, gpu, battery, skin, board, modem, case (unlogged); heat: 8 cores, gpu, battery."""
    n = 14
    g = np.zeros((n, n))
    die = list(range(9))
    for i in die:
        for j in die:
            if i != j:
                g[i, j] = 0.05 if (i < 4) == (j < 4) else 0.02
        g[i, 11] = g[11, i] = 0.12                       # die -> board
    for a, b, v in ((11, 13, 0.6), (11, 9, 0.25), (11, 12, 0.15), (13, 10, 0.5), (9, 13, 0.2), (12, 13, 0.1)):
        g[a, b] = g[b, a] = v
    ga = np.zeros(n)
    ga[10], ga[13] = 0.35, 0.25
    cap = np.array([0.4] * 8 + [0.6, 40.0, 25.0, 30.0, 4.0, 60.0])
    s = np.zeros((n, 10))
    s[np.arange(9), np.arange(9)] = 1.0
    s[9, 9] = 1.0
    names = (*(sensor[2:-2] for sensor in SENSORS), "case")
    return RCNetwork(names, (*(f"p_cpu{i}" for i in range(8)), "p_gpu", "p_battery_heat"), cap, g, ga, s)


def _workload(rng: np.random.Generator, seconds: float, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-fine-step utilisation [K, 9] (0-1) and clock [K, 9] (MHz) in random phases of 15-240 s."""
    K = int(seconds / dt)
    util, freq = np.empty((K, 9)), np.empty((K, 9))
    k = 0
    while k < K:
        n = int(rng.uniform(15, 240) / dt)
        level = rng.choice([0.05, 0.3, 0.6, 0.95])
        u = np.clip(level + rng.normal(0, 0.15, 9), 0, 1)
        f = _FMAX * np.clip(0.3 + 0.7 * u + rng.normal(0, 0.05, 9), 0.25, 1.0)
        util[k:k + n], freq[k:k + n] = u, np.round(f / 50) * 50
        k += n
    return util, freq


def make_phone_log(seed: int = 0, recordings: int = 3, minutes: float = 17.0, nominal_step_s=(1.02, 1.04),
                   ambient_c: float = 25.0) -> pd.DataFrame:
    """The concatenated log: ``time_s`` restarts at 0 for each recording; columns SENSORS + INPUTS.

    Parameters
    ----------
    seed
        Seed of everything random (workload, steps, jitter, noise).
    recordings
        How many recordings are concatenated.
    minutes
        Length of each recording.
    nominal_step_s
        Each recording's mean sample interval is drawn uniformly from this range.
    """
    rng = np.random.default_rng(seed)
    net, fine = _network(), 0.1
    disc = net.discretise(fine)
    x = np.full(14, ambient_c)
    frames = []
    for r in range(recordings):
        util, freq = _workload(rng, 300 + 60 * minutes, fine)
        heat = util * (freq / _FMAX) ** 2 * _PMAX                          # [K, 9]
        drain = heat.sum(axis=1) + 0.9                                      # W drawn from the battery
        P = np.column_stack([heat, 0.08 * drain])
        X = disc.simulate(x, P[:-1], ambient_c)
        x = X[-1] - 0.3 * (X[-1] - ambient_c)                              # cools a little between recordings
        step = rng.uniform(*nominal_step_s)
        t = np.cumsum(np.concatenate([[0.0], step + rng.uniform(-0.01, 0.01, int(60 * minutes / step))]))
        if r == 1:
            t[len(t) // 2:] += 45.0                                         # the logger paused
        idx = np.minimum(((t + 300.0) / fine).astype(int), len(X) - 1)    # logging starts after 5 min
        temps = np.round(X[idx, :13] + rng.normal(0, 0.03, (len(idx), 13)), 1)
        cols = {"time_s": np.round(t, 3)}
        cols.update(zip(SENSORS, temps.T, strict=True))
        cols.update(zip(INPUTS[:8], np.round(100 * util[idx, :8], 1).T, strict=True))
        cols.update(zip(INPUTS[8:16], freq[idx, :8].T, strict=True))
        cols.update({"util_gpu_pct": np.round(100 * util[idx, 8], 1), "freq_gpu_mhz": freq[idx, 8],
                     "p_battery_w": np.round(-drain[idx] + rng.normal(0, 0.05, len(idx)), 3)})
        frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True)
