"""Die-level thermal limits: peak die temperature of every shipped device.

Prints, per device: the peak die of its calibration load (bench_thermal_sim's), of the
calibration load raised to the device's maximum processor powers plus the radio at full offload
(the walk of tests/test_thermal_die_limits.py), and of the GA pipeline plan of MobileNetV2 INT8
(what ``dnnplan map mobilenet_v2 --device D`` simulates), each 10 minutes under the device's own
governor, with the first die trip. Re-run after the cost model changes (plans change with it).

Run: .venv/bin/python benchmarks/bench_die_limits.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.graph import load_graph  # noqa: E402
from optimizer.hardware import load_device, load_link  # noqa: E402
from optimizer.hardware.thermal_spec import available_thermal_specs, load_thermal_spec  # noqa: E402
from optimizer.workflow import make_pipeline_plan  # noqa: E402
from optimizer.workflow.simulate import simulate_plan  # noqa: E402
from optimizer.thermal.simulate import reference_workload, simulate, stress_workload  # noqa: E402

AMBIENT = {"jetson_nano": 40.0}
#: the hottest radio power of the shipped links (Huang et al.'s LTE uplink)
FULL_OFFLOAD_W = max(load_link(n).upload_power_w for n in ("lte", "wifi_10", "wifi_13", "wifi_128", "wifi_249"))


def first_die_trip(spec, r) -> str:
    hits = [e for e in r.events if e.kind == "trip" and e.detail.split(" ")[0] in spec.die_nodes]
    return f"{hits[0].detail} at {hits[0].time_s:.0f} s" if hits else "-"


def main() -> None:
    graph = load_graph("mobilenet_v2")
    print(f"{'device':14s} {'calib load':>10s} {'max + radio':>11s} {'map plan':>9s}  first die trip (map plan)")
    for name in available_thermal_specs():
        spec = load_thermal_spec(name)
        amb = AMBIENT.get(name, 25.0)
        calib = simulate(spec, reference_workload(spec), ambient_c=amb).peak_die_c
        dev = load_device(name)
        at_least = {p.name: p.power_w() for p in dev.processors if p.name in spec.processors}
        if "modem" in spec.processors:
            at_least["modem"] = FULL_OFFLOAD_W
        worst = simulate(spec, stress_workload(spec, at_least), ambient_c=amb).peak_die_c
        plan = make_pipeline_plan(graph, dev, solver="ga", seed=0, stages=min(3, len(dev.processors))).plan
        r = simulate_plan(plan, graph=graph, device=dev, ambient_c=amb)
        plan_peak, trip = r.peak_die_c, first_die_trip(spec, r)
        print(f"{name:14s} {calib:8.1f} °C {worst:8.1f} °C {plan_peak:6.1f} °C  {trip}")


if __name__ == "__main__":
    main()
