"""Bandwidth-robust splits: the CVaR-0.95 split vs the split chosen at the mean bandwidth.

For each shipped real uplink trace (``search_spaces/bandwidth/mahimahi``: AT&T, T-Mobile and Verizon
LTE, T-Mobile UMTS and Verizon EV-DO, recorded with Saturator by Winstein et al., NSDI 2013),
every zoo network (block granularity) and each phone of the SmartSplit job (galaxy_j6, redmi_note8) in
the paper's setting (FP32 network on the phone CPU, every clock level; wire dtypes int8/fp16/fp32;
all-on-phone and all-on-server included) over the ``lte`` link (its RTT, downlink and radio) to
the ``smartsplit_i5`` server:

* the trace is cut in two halves; decisions see only the first, figures come from the second
  (held out);
* **mean split**: least modeled latency with the uplink set to the first half's mean rate
  (what every single-number split tool does: SmartSplit's LBO at the mean bandwidth);
* **CVaR split**: least CVaR-0.95 of latency over upload start times every 0.1 s of the first
  half (:class:`optimizer.search.split_risk.RiskObjective`, Rockafellar & Uryasev 2000);
* **guarded CVaR split**: the same, among splits whose expected latency over the first half is at
  most 5 % above the least (:class:`optimizer.search.split_risk.MeanLatencyGuard`; Krokhmal,
  Palmquist & Uryasev 2002), summarised in one line;
* both are replayed on the held-out half: one request per start time every 0.1 s, the crossing
  bytes drained through the trace's delivery opportunities (Mahimahi's rule, one 1500-byte
  packet per opportunity, :meth:`BandwidthTrace.transfer_s`), plus the modeled head, server,
  download and RTT times. This is a simulated replay through the latency model: the upload term
  is exact for the trace, the compute terms are the cost model's. ``--socket-probes N`` replays
  the upload of both rules at N held-out start times on a loopback TCP socket paced by the
  runtime's ``TracePacer`` (what ``dnnplan run --bandwidth-trace`` uses), for every case that
  meets both floors, and prints the p95 cut measured that way next to the model's.

On a constant trace at the first half's mean rate the CVaR split must be the mean split (floor);
that is checked for every case too.

Other settings: ``--devices raspberry_pi4,jetson_nano`` runs the two edge boards the project models
(Play It Cool's Raspberry Pi 4B, TFLite XNNPACK; Zhang et al.'s Jetson Nano, whose CPU is calibrated
to their PyTorch CPU-only latencies) over the same LTE link; ``--processors cpu,gpu`` lets the head
also run on the GPU (Zhang et al.'s GPU-only setting on the Jetson). The floors are printed per device
and over all devices, so no setting's figures hide another's.

Printed per (trace, network): the two decisions, held-out p95 and mean latency of each, the p95
cut and the mean change. Floors: p95 cut >= 20 %, mean change <= +5 %.

Run: ``.venv/bin/python benchmarks/bench_robust_split.py``
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.graph import load_graph  # noqa: E402
from optimizer.graph.zoo import zoo_names  # noqa: E402
from optimizer.hardware import load_link  # noqa: E402
from optimizer.hardware.bandwidth import PACKET_BYTES, constant_trace, load_trace, trace_names  # noqa: E402
from optimizer.runtime.client import CHUNK, TracePacer  # noqa: E402
from optimizer.search.split import SplitProblem, build_split_costs  # noqa: E402
from optimizer.search.split_risk import (  # noqa: E402
    MeanLatencyGuard,
    RiskObjective,
    costs_at_uplink,
    fixed_seconds,
    latency_samples,
    risk_best,
)

STEP_S = 0.1
GUARD = 0.05  # the guarded CVaR rule: expected latency over the first half at most +5 % of the least
DTYPE = "fp32"  # the SmartSplit setting: FP32 networks on the phone CPU
PROCESSORS = ["cpu"]


def label(problem: SplitProblem, x: np.ndarray) -> str:
    d = problem.decode(x)
    n = problem.costs.n_layers
    where = "server" if d["split"] == 0 else f"{d['processor']}@{d['clock_hz'] / 1e9:.2f}G"
    return f"{d['split']}/{n} {where} {d['wire_dtype'] if d['split'] < n else '-'}"


def one(graph, trace_name: str, device: str, network: str, processors: list[str]) -> dict[str, object]:
    train, test = load_trace(trace_name).halves()
    base = build_split_costs(graph, device, network, dtype=DTYPE, processors=processors)
    link = load_link(network)
    at_mean = SplitProblem(costs_at_uplink(base, link, train.mean_bps), include_extremes=True)
    X = at_mean.enumerate()
    ev = at_mean.evaluate(X)
    F, G = ev.F, ev.G
    mean_x = X[np.lexsort((F[:, 1], np.where(G[:, 0] <= 0, F[:, 0], np.inf)))[0]]
    cvar_x, _ = risk_best(at_mean, RiskObjective(train, "cvar95", STEP_S))
    guarded = SplitProblem(at_mean.costs, include_extremes=True,
                           extra_constraints=(MeanLatencyGuard(train, GUARD, STEP_S),))
    guard_x, _ = risk_best(guarded, RiskObjective(train, "cvar95", STEP_S))
    # the three decisions replayed on the held-out half: a request every STEP_S seconds
    chosen = at_mean.breakdown(np.asarray([mean_x, cvar_x, guard_x]))
    a, b, c = latency_samples(chosen, test, test.start_times(STEP_S))
    flat = constant_trace(train.mean_bps / 1e6, train.period_s)
    flat_x, _ = risk_best(at_mean, RiskObjective(flat, "cvar95", STEP_S))
    fluid = at_mean.evaluate(np.asarray([mean_x, flat_x])).F[:, 0]
    return {"constant_same": bool(np.array_equal(flat_x, mean_x)), "constant_split": label(at_mean, flat_x),
            # the mean and CVaR decisions' upload bytes and uplink-independent seconds (socket check)
            "trace_name": trace_name, "bytes": chosen["crossing_bytes"][:2].tolist(),
            "fixed_s": fixed_seconds(chosen)[:2].tolist(),
            # modeled (fluid) latency given up by the constant-trace choice, and one packet's delivery time
            "constant_gap_s": float(fluid[1] - fluid[0]), "packet_s": PACKET_BYTES * 8 / train.mean_bps,
            "trace": Path(trace_name).stem, "model": graph.name,
            "mean_split": label(at_mean, mean_x),
            "cvar_split": label(at_mean, cvar_x), "train_mbps": train.mean_bps / 1e6,
            "p95_mean": float(np.quantile(a, 0.95)), "p95_cvar": float(np.quantile(b, 0.95)),
            "avg_mean": float(a.mean()), "avg_cvar": float(b.mean()),
            "p95_guard": float(np.quantile(c, 0.95)), "avg_guard": float(c.mean())}


def socket_uploads(trace, nbytes: int, starts_s: np.ndarray) -> np.ndarray:
    """Upload time (s) of ``nbytes`` queued at each of ``starts_s`` on ``trace``, measured on a
    loopback TCP socket paced by the runtime's :class:`~optimizer.runtime.client.TracePacer`
    (``dnnplan run --bandwidth-trace``'s pacer, in its chunks): each probe starts on an idle link
    at that trace time, as the simulated replay assumes, and ends when the receiver acknowledges
    the last byte."""
    server = socket.create_server(("127.0.0.1", 0))

    def receive() -> None:
        conn, _ = server.accept()
        with conn:
            for _ in starts_s:
                left = nbytes
                while left:
                    got = conn.recv(min(left, 1 << 20))
                    if not got:
                        return
                    left -= len(got)
                conn.sendall(b"\x01")

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    payload, pacer, out = memoryview(bytes(nbytes)), TracePacer(trace), []
    with socket.create_connection(server.getsockname()) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for t in starts_s:
            pacer.restart(at_s=float(t))
            t0 = time.perf_counter()
            for i in range(0, nbytes, CHUNK):
                chunk = payload[i:i + CHUNK]
                pacer.consume(len(chunk))
                sock.sendall(chunk)
            sock.recv(1)
            out.append(time.perf_counter() - t0)
    thread.join()
    server.close()
    return np.asarray(out)


def socket_check(r: dict[str, Any], probes: int) -> str:
    """The held-out p95 of both rules with the upload measured on the socket (``probes`` start
    times spread over the held-out half) next to the same starts through the trace model."""
    test = load_trace(r["trace_name"]).halves()[1]
    starts = test.start_times(STEP_S)
    starts = starts[np.linspace(0, len(starts) - 1, probes).round().astype(int)]
    lat = {}
    for k, (nbytes, fixed) in enumerate(zip(r["bytes"], r["fixed_s"])):
        model = test.transfer_s(np.asarray([nbytes]), starts)[0]
        sock = socket_uploads(test, int(nbytes), starts) if nbytes > 0 else np.zeros(len(starts))
        lat[k] = (fixed + model, fixed + sock)
    cut = [1 - np.quantile(lat[1][i], 0.95) / np.quantile(lat[0][i], 0.95) for i in (0, 1)]
    err = max(abs(np.quantile(lat[k][1], q) / np.quantile(lat[k][0], q) - 1) for k in (0, 1) for q in (0.5, 0.95))
    return (f"  socket: {r['device']} {r['trace']} {r['model']}: p95 mean rule {np.quantile(lat[0][1], 0.95) * 1e3:.1f} "
            f"ms (model {np.quantile(lat[0][0], 0.95) * 1e3:.1f}), CVaR rule {np.quantile(lat[1][1], 0.95) * 1e3:.1f} ms "
            f"(model {np.quantile(lat[1][0], 0.95) * 1e3:.1f}); p95 cut {cut[1]:.1%} on the socket, {cut[0]:.1%} in the "
            f"model; largest p50/p95 gap socket vs model {err:.1%} ({probes} probes)")


def meets_floors(r: dict[str, Any], rule: str = "cvar") -> bool:
    """The floors of a risk-averse split for one case: held-out p95 cut >= 20 % with mean up by <= 5 %."""
    return 1 - r[f"p95_{rule}"] / r["p95_mean"] >= 0.20 and r[f"avg_{rule}"] / r["avg_mean"] - 1 <= 0.05


def summary(group: list[dict[str, Any]], rule: str) -> str:
    """p95 cut and mean change of ``rule`` ("cvar" or "guard") against the mean split over
    ``group``, and the cases meeting both floors."""
    cuts = [1 - r[f"p95_{rule}"] / r["p95_mean"] for r in group]
    chgs = [r[f"avg_{rule}"] / r["avg_mean"] - 1 for r in group]
    meets = [r for r in group if meets_floors(r, rule)]
    return (f"p95 cut min {min(cuts):.1%} median {np.median(cuts):.1%} max {max(cuts):.1%}; "
            f"mean change min {min(chgs):+.1%} median {np.median(chgs):+.1%} max {max(chgs):+.1%}; "
            f"{len(meets)} meet both floors ({len({r['trace'] for r in meets})} traces, "
            f"{len({r['model'] for r in meets})} networks)")


def floors_by_network(group: list[dict[str, Any]], where: str, rule: str) -> str:
    """The traces on which each network meets both floors with ``rule`` in ``group``, and how many
    networks meet them on two traces or more (the issue's "≥ 2 traces, ≥ 3 networks", read per
    network)."""
    networks: dict[str, set[str]] = {}
    for r in group:
        if meets_floors(r, rule):
            networks.setdefault(str(r["model"]), set()).add(str(r["trace"]))
    return (f"{where}, {'guarded CVaR' if rule == 'guard' else 'CVaR'}: traces on which each network meets both floors: "
            + ("; ".join(f"{m}: {', '.join(sorted(t))}" for m, t in sorted(networks.items())) or "none")
            + f"; networks meeting them on >= 2 traces: {sum(len(t) >= 2 for t in networks.values())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="galaxy_j6,redmi_note8")
    ap.add_argument("--network", default="lte")
    ap.add_argument("--traces", default=",".join(trace_names()), help="Comma-separated trace names or files (default: every shipped trace).")
    ap.add_argument("--processors", default=",".join(PROCESSORS),
                    help="Comma-separated processors the head may run on (default: the CPU, as in SmartSplit).")
    ap.add_argument("--socket-probes", type=int, default=0,
                    help="For every case meeting both floors, replay this many held-out upload starts of each "
                         "rule on a paced loopback socket (default 0: off).")
    ap.add_argument("--models", default=",".join(zoo_names()), help="Comma-separated (default: the whole zoo).")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    for device in args.devices.split(","):
        for model in args.models.split(","):
            graph = load_graph(model, "block")
            rows += [{"device": device, **one(graph, t, device, args.network, args.processors.split(","))} for t in args.traces.split(",")]
    print(f"{'device':12s} {'trace':22s} {'model':13s} {'mean-bw split':26s} {'CVaR split':26s} "
          f"{'p95 mean':>9s} {'p95 CVaR':>9s} {'p95 cut':>8s} {'avg mean':>9s} {'avg CVaR':>9s} {'avg chg':>8s}")
    for r in rows:
        cut = 1 - r["p95_cvar"] / r["p95_mean"]
        chg = r["avg_cvar"] / r["avg_mean"] - 1
        print(f"{r['device']:12s} {r['trace']:22s} {r['model']:13s} {r['mean_split']:26s} {r['cvar_split']:26s} "
              f"{r['p95_mean'] * 1e3:8.1f}ms {r['p95_cvar'] * 1e3:8.1f}ms {cut:8.1%} "
              f"{r['avg_mean'] * 1e3:8.1f}ms {r['avg_cvar'] * 1e3:8.1f}ms {chg:+8.1%}")
    differ = [r for r in rows if r["mean_split"] != r["cvar_split"]]
    for name, group in (("all cases", rows), ("cases where the two splits differ", differ)):
        if group:
            print(f"{name} ({len(group)}): {summary(group, 'cvar')}")
    print(f"guarded CVaR (in-sample mean <= +{GUARD:.0%} of the least) vs mean split, all cases: "
          f"{sum(r['p95_guard'] != r['p95_mean'] or r['avg_guard'] != r['avg_mean'] for r in rows)} differ; "
          f"{summary(rows, 'guard')}; held-out mean up > 5 % in "
          f"{sum(r['avg_guard'] / r['avg_mean'] - 1 > 0.05 for r in rows)} cases "
          f"(unguarded CVaR: {sum(r['avg_cvar'] / r['avg_mean'] - 1 > 0.05 for r in rows)})")
    for rule in ("cvar", "guard"):
        for device in [*args.devices.split(","), None]:
            print(floors_by_network([r for r in rows if device in (None, r["device"])], device or "all devices", rule))
    if args.socket_probes > 0:
        print(f"socket replay of the cases meeting both floors (TracePacer on loopback, {args.socket_probes} "
              "held-out upload starts per rule, compute terms from the cost model):")
        for r in rows:
            if meets_floors(r):
                print(socket_check(r, args.socket_probes), flush=True)
    same = sum(r["constant_same"] for r in rows)
    print(f"constant trace at the first half's mean rate: both rules choose the same split in {same}/{len(rows)} cases")
    for r in rows:
        if not r["constant_same"]:
            print(f"  differs: {r['device']} {r['trace']} {r['model']}: {r['mean_split']} vs {r['constant_split']}, "
                  f"{r['constant_gap_s'] * 1e3:.1f} ms apart in the fluid model, one 1500-B packet every "
                  f"{r['packet_s'] * 1e3:.1f} ms at {r['train_mbps']:.2f} Mbps")
    print(f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
