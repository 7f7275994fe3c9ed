"""A plan on its device over time: the plan's thermal workload, its simulation, and the plan's
thermal figures (``predicted.peak_temp_c``, ``time_to_throttle_s``, ``sustained_fps``).

:func:`plan_workload` turns a Plan v1 into the ``caps -> WorkloadPoint`` callable of
:func:`optimizer.thermal.simulate.simulate` (see :mod:`optimizer.thermal.plan_workload` for the
model): a pipeline plan becomes a :class:`~optimizer.search.thermal_workload.PipelineWorkload`,
a split plan a :class:`~optimizer.thermal.plan_workload.SplitWorkload`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..hardware import load_link
from ..hardware.thermal_spec import thermal_spec_of
from ..plan.schema import Plan
from ..search.thermal_workload import PipelineWorkload
from ..thermal.plan_workload import MODEM, CappedTables, SplitWorkload, spec_columns


def plan_graph(plan: Plan) -> Any:
    """The LayerGraph a plan was made for (zoo name + variant, or its model file)."""
    from ..graph import load_graph
    from ..plan.schema import plan_input_shapes

    src = plan.model.source or plan.model.name
    ref = src.removeprefix("zoo:")
    graph = load_graph(ref, plan.model.granularity, input_shapes=plan_input_shapes(plan),
                       **(plan.model.variant if src.startswith("zoo:") or ref == plan.model.name else {}))
    if len(graph) != plan.model.layers:
        raise ConfigError(f"plan: field model.layers is {plan.model.layers} but {src!r} has {len(graph)} "
                          f"{plan.model.granularity} layers; the plan was made for another model")
    return graph


def plan_workload(plan: Plan, *, graph: Any = None, device: Any = None, spec: Any = None) -> Any:
    """The simulator workload of ``plan`` (a :class:`~optimizer.plan.schema.Plan`).

    Parameters
    ----------
    plan
        Pipeline or split plan (schema v1).
    graph
        The plan's LayerGraph if already loaded (default: :func:`plan_graph`).
    device
        Its Device (default: ``load_device(plan.device)``).
    spec
        The device's thermal spec (checked against the processors the plan uses).

    Returns
    -------
    PipelineWorkload or SplitWorkload
        Callable ``caps -> WorkloadPoint``.
    """
    from ..hardware import load_device

    dev = device if device is not None else load_device(plan.device)
    graph = graph if graph is not None else plan_graph(plan)
    if spec is not None:
        spec_columns(spec, dev.processor_names, dev.name)
    tables = CappedTables(graph, dev, plan.model.dtype)
    if plan.kind == "pipeline":
        s = dict((plan.search.settings or {}).get("problem") or {})
        cpu_name = dev.processor_names[dev.fallback_index]
        K = max(int(s.get("stages") or 0), len(plan.stages))
        threads = next((st.threads for st in plan.stages if st.processor == cpu_name and st.threads), None)
        settings = {"stages": K, "processors": None,
                    "cpu_threads": int(s.get("cpu_threads") or threads or 4),
                    "host_threads": int(s.get("host_threads") or (plan.preprocess.threads if plan.preprocess else 2)),
                    "cpu_cores": s.get("cpu_cores"), "pre_s": _seconds_or_none(s.get("pre_s")),
                    "post_s": _seconds_or_none(s.get("post_s"))}
        counts = [st.last_layer - st.first_layer + 1 for st in plan.stages]
        for st in plan.stages:
            dev.processor(st.processor)
        idx = [dev.processor_names.index(st.processor) for st in plan.stages]
        spare = [j for j in range(len(dev.processors)) if j not in idx]
        chrom = np.array(counts + [0] * (K - len(counts)) + idx + spare[:K - len(idx)], dtype=np.int64)
        return PipelineWorkload(tables, settings, chrom)
    if plan.kind == "split":
        sp = plan.split
        extra = plan.predicted.extra
        keys = ("upload_s", "server_s", "download_s", "rtt_s", "upload_j", "download_j")
        if all(k in extra for k in keys):
            remote = sum(extra[k] for k in keys[:4])
            radio = extra["upload_j"] + extra["download_j"]
            transfer = extra["upload_s"] + extra["download_s"]
        else:
            remote, radio, transfer = _remote_from_files(plan, graph)
        if sp.head_processor is not None:
            dev.processor(sp.head_processor)
        host_s, share = _split_host(plan, graph, dev)
        state = None if plan.network is None or sp.layer >= len(graph) else \
            load_link(plan.network).radio_state(dev.name)
        return SplitWorkload(tables, sp.layer, sp.head_processor if sp.layer > 0 else None,
                             sp.head_clock_hz, float(remote), float(radio), float(transfer), host_s, share, state)
    raise ConfigError(f"plan: kind {plan.kind!r} cannot be simulated; expected 'pipeline' or 'split'")


def _split_host(plan: Plan, graph: Any, device: Any) -> tuple[float, float]:
    """Host seconds per frame of a split plan of a detector, and the host threads' CPU share
    (:func:`optimizer.cost.hostproc.split_host_seconds`, with what the plan's server sends back)."""
    from ..cost.hostproc import host_costs, resolve_result, split_host_seconds

    host = host_costs(graph, device)
    if not host["share"] > 0:
        return 0.0, 0.0
    mode = resolve_result(graph, plan.split.result or "raw")
    return float(split_host_seconds(host, np.asarray([plan.split.layer]), len(graph), mode)[0]), host["share"]


def _remote_from_files(plan: Plan, graph: Any) -> tuple[float, float, float]:
    """Upload + server + download + RTT seconds, radio joules and upload + download seconds of a
    split plan, from its files."""
    from ..cost import build_cost_table
    from ..cost.hostproc import resolve_result, result_bytes
    from ..hardware import load_server

    sp = plan.split
    if sp.layer >= len(graph):
        return 0.0, 0.0, 0.0
    if plan.network is None:
        raise ConfigError("plan: field network is empty; a split plan needs its link to be simulated")
    link = load_link(plan.network)
    srv = load_server(sp.server or "smartsplit_i5")
    st = build_cost_table(graph, srv, dtype="fp32")
    kinds = list(st.processor_kinds)
    q = kinds.index("cloud") if "cloud" in kinds else 0
    server_s = float(st.cum_latency_s[-1, q] - st.cum_latency_s[sp.layer, q])
    out_bytes = result_bytes(graph, resolve_result(graph, sp.result or "raw"))
    up_s, dn_s = float(link.upload_s(sp.bytes)), float(link.download_s(out_bytes))
    return (up_s + server_s + dn_s + float(link.rtt_s),
            float(link.upload_j(sp.bytes)) + float(link.download_j(out_bytes)), up_s + dn_s)


def simulate_plan(plan: Plan, *, graph: Any = None, device: Any = None, duration_s: float = 600.0,
                  ambient_c: float | None = None) -> Any:
    """Run :func:`optimizer.thermal.simulate.simulate` on ``plan`` on its device.

    A split plan's radio heats the spec's ``modem`` processor (a phone's modem die; on the boards
    the board node its Wi-Fi/Ethernet chip sits on). A spec without one leaves the radio's heat
    out, and the result's ``notes`` say so and how much it was: the plan is still judged.

    Raises
    ------
    ConfigError
        The plan's device has no thermal section (the message lists devices that have one).
    """
    from ..hardware import load_device
    from ..thermal.simulate import simulate

    dev = device if device is not None else load_device(plan.device)
    spec = thermal_spec_of(dev)
    wl = plan_workload(plan, graph=graph, device=dev, spec=spec)
    notes = []
    if isinstance(wl, SplitWorkload) and wl.radio_j > 0 and MODEM not in spec.processor_names:
        radio_w = float(wl({}).power_w.get(MODEM, 0.0))
        wl = replace(wl, radio_j=0.0)
        notes.append(f"the radio's heat ({radio_w:.2f} W at full clocks) is not modelled: thermal spec "
                     f"{spec.device!r} has no {MODEM!r} processor; add one whose 'heats' names the node the "
                     "radio sits on (search_spaces/thermal/raspberry_pi4.yaml heats its board)")
    res = simulate(spec, wl, duration_s=duration_s, ambient_c=ambient_c)
    res.notes = notes
    return res


def no_thermal_note(device: str) -> str:
    """The note every command prints for a plan whose device has no thermal section."""
    return (f"device {device!r} has no thermal section: temperatures and throttling are not modelled "
            "(search_spaces/thermal holds the devices that have one)")


def full_clock_point(plan: Plan, *, graph: Any = None, device: Any = None) -> dict[str, Any]:
    """What can be judged of ``plan`` without a thermal model: FPS and power per processor
    (and the radio) at full clocks, from the plan's own workload (no throttling modelled)."""
    from ..hardware import load_device

    dev = device if device is not None else load_device(plan.device)
    point = plan_workload(plan, graph=graph, device=dev)({})
    return {"fps": float(point.fps), "power_w": {k: float(v) for k, v in point.power_w.items() if v > 0}}


def annotate_plan(plan: Plan, *, graph: Any = None, device: Any = None, duration_s: float = 600.0,
                  ambient_c: float | None = None) -> Any:
    """Fill ``plan.predicted`` ``peak_temp_c`` (hottest die), ``time_to_throttle_s`` and
    ``sustained_fps`` from one simulation of the plan when its device has a thermal spec.

    Returns the plan (modified in place); a device without a thermal section leaves it as is.
    ``predicted.extra`` records the horizon, the ambient, the peak skin temperature, the time
    to "severe" when reached, and the search's estimates (``<name>_objective``) it replaces.
    """
    from ..hardware import load_device

    dev = device if device is not None else load_device(plan.device)
    if dev.thermal is None:
        return plan
    res = simulate_plan(plan, graph=graph, device=dev, duration_s=duration_s, ambient_c=ambient_c)
    pred = plan.predicted
    searched = {f"{k}_objective": float(v) for k, v in (("sustained_fps", pred.sustained_fps),
                                                         ("peak_temp_c", pred.peak_temp_c),
                                                         ("time_to_throttle_s", pred.time_to_throttle_s))
                if v is not None}
    pred.peak_temp_c = res.peak_die_c
    pred.time_to_throttle_s = res.time_to_first_throttle_s
    pred.sustained_fps = res.sustained_fps
    extra = {"thermal_horizon_s": float(duration_s), "thermal_ambient_c": res.ambient_c,
             "peak_skin_c": res.peak_skin_c, **searched}
    if res.time_to_severe_s is not None:
        extra["time_to_severe_s"] = res.time_to_severe_s
    pred.extra = {**pred.extra, **extra}
    return plan


def _seconds_or_none(value: Any) -> float | None:
    """A plan's recorded pre/post seconds; None (the cost table's default) when not recorded."""
    return None if value is None else float(value)
