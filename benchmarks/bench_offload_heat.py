"""Thermal cost of offloading: radio heat per phone and SPLASH's HEFT with and without the cloud.

Prints, from one run:
* the skin rise after 10 minutes of the radio alone sending over Wi-Fi 249 Mbps at the phone's
  send power (``Link.radio_state``: measured where the link lists the phone, e.g. the Pixel 4's
  power_profile.xml; else Huang et al.'s model under the link's cap) (SPLASH: the thermal cost of
  offloading is much larger on the Pixel 4 than on the Galaxy S20);
* the hottest radio node under full offload over LTE (the old 0.05 W/K coupling and an uncapped
  3.8 W radio drove it to 110-130 °C);
* SPLASH person finder over wifi_249 at 25 °C: time to thermal status "severe" of latency-greedy
  HEFT over the phone's processors vs HEFT that may also offload (heft-cloud) and Min-Heat, at
  the camera rate (30 FPS) and at 60 FPS, above both HEFTs' capacity, where every worker is busy.

Run: .venv/bin/python benchmarks/bench_offload_heat.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.hardware import load_link  # noqa: E402
from optimizer.hardware.thermal_spec import load_thermal_spec  # noqa: E402
from optimizer.thermal.policies.splash import capacity_fps, run_schedule  # noqa: E402
from optimizer.thermal.policies.workload import load_workload, worker_profiles  # noqa: E402
from optimizer.thermal.simulate import ScaledWorkload, simulate  # noqa: E402

PHONES = ("pixel4", "galaxy_s20", "galaxy_s22", "pixel6")


def radio_only(device: str, link: str) -> tuple[float, float]:
    """(skin rise K, peak modem °C) after 10 minutes of the radio alone at the link's send power."""
    spec = load_thermal_spec(device)
    wl = ScaledWorkload(full_w={"modem": load_link(link).radio_state(device).up_w}, fps_at_max={"modem": 1.0},
                        combine="parallel")
    r = simulate(spec, wl)
    return r.peak_skin_c - spec.ambient_c, float(r.temps_c[:, spec.node_index("modem")].max())


def main() -> None:
    print("radio alone, 10 min at 25 °C: skin rise over wifi_249 | peak modem over lte")
    for d in PHONES:
        rise, _ = radio_only(d, "wifi_249")
        _, modem = radio_only(d, "lte")
        print(f"  {d:11s} {rise:5.1f} K | {modem:5.1f} °C")
    wl = load_workload("person_finder")
    for d in ("pixel4", "galaxy_s20"):
        spec = load_thermal_spec(d)
        prof = worker_profiles(wl, d, "wifi_249")
        cap_p = capacity_fps(prof, list(range(prof.n_processors)))
        print(f"\nSPLASH person finder on {d}, wifi_249 (capacity: heft {cap_p:.1f} FPS, heft-cloud "
              f"{capacity_fps(prof):.1f} FPS)")
        for fps in (30.0, 60.0):
            row = []
            for pol in ("heft", "heft-cloud", "minheat"):
                t0 = time.perf_counter()
                r = run_schedule(prof, spec, pol, fps)
                sev = "none" if r.time_to_severe_s is None else f"{r.time_to_severe_s:.0f} s"
                row.append(f"{pol} severe {sev} (cloud {100 * r.share.get('cloud', 0.0):.0f} %, skin peak "
                           f"{r.peak_temp_c[spec.skin]:.1f} °C, {time.perf_counter() - t0:.1f} s wall)")
            print(f"  @{fps:g} FPS: " + "; ".join(row))


if __name__ == "__main__":
    main()
