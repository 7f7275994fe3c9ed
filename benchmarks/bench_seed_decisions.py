"""Re-run the seed settings and print the decisions next to the seeds' published ones.

Three settings, each from the shipped search spaces:

* Park & Ha (docs/METHODS.md section 2): the three 640x640 SSD detectors on Pixel 6 and Galaxy S22,
  INT8, exact 3-stage pipeline: the stages (processor, layers, share of MACs), which processor
  takes the tail (post-processing side) and pipeline / best single INT8 processor against the
  published x3.3-4.4 (Pixel 6) and x2.9-4.1 (S22).
* SmartSplit (section 3): ``search_spaces/jobs/smartsplit.yaml``: split chosen by NSGA-II +
  TOPSIS, LBO and EBO per network and phone; whether upload dominates latency at the choice.
* SPLASH (section 5): Person Finder on Pixel 4 at 30 FPS, 400 s: time to "severe" under
  latency-greedy HEFT (phone only and with the cloud) and Min-Heat, and their cloud shares.

Run:  .venv/bin/python benchmarks/bench_seed_decisions.py   (about 2 minutes on 2 cores)
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

PUBLISHED_PIPELINE = {"pixel6": "x3.3-4.4", "galaxy_s22": "x2.9-4.1"}
DETECTORS = ("ssd_mobilenet_v1_fpn", "ssd_mobilenet_v2_fpnlite", "ssd_resnet50_fpn")


def park_ha() -> None:
    from optimizer.cost import build_cost_table
    from optimizer.graph import load_graph
    from optimizer.hardware import load_device
    from optimizer.search import solve
    from optimizer.workflow import pipeline_problem

    print("## Park & Ha: INT8 pipelines of the 640x640 detectors (exact solver)\n")
    print("| device | model | stages: processor layers (share of MACs) | tail | pipeline / best single | published |")
    print("|---|---|---|---|---|---|")
    for dev in PUBLISHED_PIPELINE:
        device = load_device(dev)
        for m in DETECTORS:
            g = load_graph(m, "kernel")  # dnnplan map's view: stages end between kernels
            table = build_cost_table(g, device, "int8")
            pb = pipeline_problem(g, device, stages=3, table=table)
            best = solve(pb, "exact").best
            single = solve(pb, "single").best
            macs = g.macs_array
            stages = best.decision["stages"]
            cells = [f"{s['processor']} {s['first_layer']}-{s['last_layer']} "
                     f"({macs[s['first_layer']:s['last_layer'] + 1].sum() / macs.sum():.0%})" for s in stages]
            ratio = best.objectives["throughput_fps"] / single.objectives["throughput_fps"]
            print(f"| {dev} | {m} | {'; '.join(cells)} | {stages[-1]['processor']} | x{ratio:.2f} "
                  f"(best single: {single.decision['stages'][0]['processor']}) | {PUBLISHED_PIPELINE[dev]} |")
    print()


def smartsplit_rows() -> None:
    from optimizer.search.split_job import SplitJob
    from optimizer.shipped import find
    from optimizer.workflow import run_split_job
    from optimizer.yamlio import load_model_yaml

    path = find("jobs", "smartsplit")
    assert path is not None
    job = load_model_yaml(path, SplitJob)
    rows = run_split_job(job)
    print("## SmartSplit job (search_spaces/jobs/smartsplit.yaml)\n")
    print("| model | phone | L | chosen split | LBO | EBO | upload / latency at the choice | client / upload energy |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        obj, b = r["objectives"], r["breakdown"]
        up = b["upload_s"] / obj["latency_s"]
        ce = b["client_j"] / b["upload_j"] if b["upload_j"] else float("inf")
        print(f"| {r['model']} | {r['device']} | {r['layers']} | {r['chosen']['split']} | "
              f"{r['lbo']['decision']['split']} | {r['ebo']['decision']['split']} | {up:.2f} | {ce:.2f} |")
    print("\nPublished (docs/METHODS.md section 3): upload dominates latency at 10 Mbps; upload energy dominates on "
          "the older J6 (802.11n), client energy on the newer Redmi Note 8 (802.11ac).\n")


def splash() -> None:
    from optimizer.hardware.thermal_spec import load_thermal_spec
    from optimizer.thermal.policies.splash import run_schedule
    from optimizer.thermal.policies.workload import load_workload, worker_profiles

    pf = worker_profiles(load_workload("person_finder"), "pixel4", "wifi_249")
    spec = load_thermal_spec("pixel4")
    print("## SPLASH: Person Finder on Pixel 4, 30 FPS, 400 s, Wi-Fi 249 Mbps\n")
    print("| policy | time to severe (s) | cloud share |")
    print("|---|---|---|")
    for policy in ("heft", "heft-cloud", "minheat"):
        res = run_schedule(pf, spec, policy, 30.0, duration_s=400)
        print(f"| {policy} | {res.time_to_severe_s} | {res.share.get('cloud', 0.0):.2f} |")
    print("\nPublished (docs/METHODS.md sections 5, 8): Min-Heat keeps the phone out of throttling longer than "
          "latency-greedy HEFT; offloading adds the modem's heat.\n")


def main() -> None:
    t0 = time.perf_counter()
    park_ha()
    smartsplit_rows()
    splash()
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
