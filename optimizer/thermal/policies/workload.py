"""Multi-DNN workloads (``search_spaces/workloads/*.yaml``) and their per-worker cost profiles.

A workload lists the inference requests one camera frame issues (SPLASH, Jeong 2023;
docs/METHODS.md section 5): each entry names a zoo network, its input size and variant, and how many
requests of it a frame makes. The SLO of every request is the frame period.

:func:`worker_profiles` turns a workload into what the scheduler and the simulated phone need
per request type and worker (the device's processors plus the cloud): latency and energy at
the maximum clock from the cost model (CPU fallback split out, because fallback heats the CPU),
input/output bytes, and the cloud's server compute, link time and radio energy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...hardware.loader import ShippedYaml


#: the name of the offloading worker
CLOUD = "cloud"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RequestSpec(_Model):
    """``count`` requests of zoo network ``model`` (at ``input_size``, with ``variant``) per frame."""

    model: str
    input_size: Annotated[int, Field(gt=0)] | None = None
    variant: dict[str, Any] = Field(default_factory=dict)
    count: Annotated[int, Field(gt=0)]

    @field_validator("model")
    @classmethod
    def _known(cls, v: str) -> str:
        from ...graph.zoo import zoo_names

        names = zoo_names()
        if v not in names:
            raise ValueError(f"unknown zoo network {v!r}; valid: {', '.join(names)}")
        return v

    @property
    def label(self) -> str:
        return self.model + (f"@{self.input_size}" if self.input_size else "") + "".join(
            f",{k}={v}" for k, v in sorted(self.variant.items()))


class WorkloadSpec(_Model):
    """A multi-DNN workload: the requests of one frame and the default camera rate."""

    name: str
    description: str = ""
    fps: Annotated[float, Field(gt=0)] = 30.0
    requests: list[RequestSpec] = Field(min_length=1)
    source: str

    @property
    def requests_per_frame(self) -> int:
        return sum(r.count for r in self.requests)


#: workloads shipped in ``search_spaces/workloads/`` (e.g. ``person_finder``); a request naming
#: a network the zoo lacks is a SchemaError naming file, line and field
WORKLOADS = ShippedYaml("workloads", "workload", WorkloadSpec)
workload_names, load_workload = WORKLOADS.names, WORKLOADS.load


@dataclass(frozen=True)
class WorkerProfiles:
    """Per request type r and worker w (processors first, then the cloud if a link is given).

    All times are at the processors' maximum clocks. ``native_s``/``fallback_s`` split a
    request's on-device time into the part on its worker and the CPU-fallback part;
    ``native_w`` is the worker's active power split ``static_w + dynamic_w`` (clock-scaled as
    ``static + dynamic·c³``). Cloud columns: ``native_s`` holds the whole round trip; the radio
    draws ``radio_up_w``/``radio_down_w`` while it sends/receives and ``radio_tail_w`` for up to
    ``radio_tail_s`` after each transfer (its tail state, :class:`~optimizer.hardware.schema.RadioState`).
    """

    workload: str
    device: str
    link: str | None
    workers: tuple[str, ...]
    labels: tuple[str, ...]               # R request types
    counts: np.ndarray                    # [R] requests per frame
    native_s: np.ndarray                  # [R, W]
    fallback_s: np.ndarray                # [R, W]
    static_w: np.ndarray                  # [W] (cloud: 0)
    dynamic_w: np.ndarray                 # [W]
    in_bytes: np.ndarray                  # [R]
    out_bytes: np.ndarray                 # [R]
    server_s: np.ndarray                  # [R] server compute per request
    upload_s: np.ndarray                  # [R]
    download_s: np.ndarray                # [R]
    rtt_s: float = 0.0
    radio_up_w: float = 0.0
    radio_down_w: float = 0.0
    radio_tail_w: float = 0.0
    radio_tail_s: float = 0.0
    rssi_proxy_db: float = 0.0
    meta: dict = field(default_factory=dict)

    @property
    def latency_s(self) -> np.ndarray:
        """[R, W] latency of one request on each idle worker at maximum clocks."""
        return self.native_s + self.fallback_s

    @property
    def n_processors(self) -> int:
        return len(self.workers) - (1 if self.link else 0)


def worker_profiles(workload: WorkloadSpec, device: str, link: str | None = None,
                    server: str = "gpu_server", dtype: str = "int8",
                    max_radio_w: float = 1.2, max_result_bytes: float = 4096.0) -> WorkerProfiles:
    """Cost profiles of every request type of ``workload`` on ``device``'s processors (+ cloud).

    Parameters
    ----------
    workload
        The workload.
    device
        Phone name (``search_spaces/devices``); its processors become workers.
    link
        Network link name for the cloud worker (None: no cloud).
    server
        Server that runs offloaded requests (its ``cloud`` processor).
    dtype
        Precision of on-device inference (int8: DSP and NPU run int8 only).
    max_radio_w
        Ceiling on the generic Wi-Fi/cellular radio power (phones the link does not list in
        ``radio.phones``). Huang et al.'s ``alpha·tau + beta`` was measured at a few Mbps; at
        249 Mbps it would give ~70 W, which no phone radio draws. 1.2 W is an assumed order of a
        phone Wi-Fi/LTE front end at full transmit duty. A listed phone's measured powers
        (:meth:`~optimizer.hardware.schema.Link.radio_state`) are used as they are.
    max_result_bytes
        Ceiling on what the server sends back. The size itself follows the split's rule
        (:func:`optimizer.cost.hostproc.result_bytes` with ``result="auto"``): an SSD head's
        100 best anchors (2,800 B), else the network's float32 outputs; a server decodes other
        large outputs into at most this many bytes (SPLASH's offloading returns results, not
        megabytes of scores).
    """
    from ...cost import build_cost_table
    from ...cost.hostproc import resolve_result, result_bytes
    from ...hardware import load_device, load_link, load_server
    from ...hardware.schema import RadioState

    dev = load_device(device)
    lk = load_link(link) if link else None
    srv = load_server(server) if lk else None
    procs = dev.processor_names
    cpu = dev.fallback_index
    workers = procs + ((CLOUD,) if lk else ())
    R, W = len(workload.requests), len(workers)
    native = np.zeros((R, W))
    fallback = np.zeros((R, W))
    in_b, out_b, server_s = np.zeros(R), np.zeros(R), np.zeros(R)
    for r, req in enumerate(workload.requests):
        graph = _graph(req.model, req.input_size, tuple(sorted(req.variant.items())))
        ct = build_cost_table(graph, dev, dtype)
        sup = ct.supported
        for j in range(len(procs)):
            native[r, j] = ct.latency_s[sup[:, j], j].sum()
            fallback[r, j] = ct.latency_s[~sup[:, j], j].sum()
        in_b[r] = float(graph.cut_bytes_array("int8")[0])      # camera image, 1 B per pixel value
        out_b[r] = min(result_bytes(graph, resolve_result(graph, "auto")), max_result_bytes)
        if lk and srv is not None:
            st = build_cost_table(graph, srv, "fp16")
            server_s[r] = st.latency_s[:, st.processor_index(CLOUD)].sum()
    static = np.array([p.power.static_w for p in dev.processors] + ([0.0] if lk else []))
    active = np.array([p.power_w() for p in dev.processors] + ([0.0] if lk else []))
    up = np.asarray(lk.upload_s(in_b), float) if lk else np.zeros(R)
    down = np.asarray(lk.download_s(out_b), float) if lk else np.zeros(R)
    rtt = lk.rtt_s if lk else 0.0
    radio = lk.radio_state(dev.name) if lk else RadioState(0.0, 0.0, 0.0, 0.0, "no link")
    measured = lk is not None and dev.name in lk.radio.phones
    if lk:
        native[:, -1] = rtt + up + server_s + down
    return WorkerProfiles(
        workload=workload.name, device=dev.name, link=lk.name if lk else None, workers=workers,
        labels=tuple(r.label for r in workload.requests),
        counts=np.array([r.count for r in workload.requests], dtype=int),
        native_s=native, fallback_s=fallback, static_w=static, dynamic_w=active - static,
        in_bytes=in_b, out_bytes=out_b, server_s=server_s, upload_s=up, download_s=down, rtt_s=rtt,
        radio_up_w=radio.up_w if measured else min(radio.up_w, max_radio_w),
        radio_down_w=radio.down_w if measured else min(radio.down_w, max_radio_w),
        radio_tail_w=radio.tail_w, radio_tail_s=radio.tail_s,
        rssi_proxy_db=10.0 * np.log10(lk.uplink_bps / 1e6) if lk else 0.0,
        meta={"dtype": dtype, "server": server if lk else None, "cpu_index": cpu,
              "max_radio_w": max_radio_w, "max_result_bytes": max_result_bytes, "radio_source": radio.source})


@lru_cache(maxsize=32)
def _graph(model: str, input_size: int | None, variant: tuple) -> Any:
    """LayerGraph of a request's network (cached: importing a zoo network builds it in Keras)."""
    from ...graph import load_graph

    kw: dict[str, Any] = dict(variant)
    if input_size:
        kw["input_size"] = input_size
    return load_graph(model, **kw)
