"""TADF frequency selection and HSWD CPU/GPU layer splitting (Zhang et al., 2023; docs/METHODS.md section 4).

TADF
    Steady state ``T_inf = a1·T_env + a2·fC³ + a3·fG³ + a0`` per die node. The coefficients are
    **derived** (not fitted) from the device's RC network and power model: with steady gains
    ``K = G⁻¹S`` of :class:`~optimizer.thermal.rc.RCNetwork` and ``P_X = s_X + Υ_X f_X³``
    (``Processor.power``), ``a1 = 1``, ``a2 = K[n, cpu]·Υ_C``, ``a3 = K[n, gpu]·Υ_G``,
    ``a0 = K[n, cpu]·s_C + K[n, gpu]·s_G``. (TADF's leakage term ``V·β1·T_env`` would make
    ``a1 > 1``; the device files carry no temperature-dependent leakage, so ``a1 = 1``.) If
    ``a2 fCmax³ + a3 fGmax³ <= F = T_max - a1 T_env - a0`` on every die node, run at the maximum;
    otherwise bisect the speed of the processor with the higher heat per unit of throughput
    (then the other, if needed) until the left side lies in ``[F - θ, F]``, snap down to the
    device's clock levels and step back up any clock that still fits. The chosen clocks are
    then run in the sustained-run simulator (RC + governor) to check the steady temperature.

HSWD
    Per layer at the chosen clocks, split the output channels (conv/dense: filters, pooling and
    depthwise: channels) in proportion to the two processors' speeds on that layer,
    ``W^G = W·s_G/(s_C + s_G)``, ``t_P = max(t_C(W^C), t_G(W^G)) + t_merge``, and keep
    ``min(t_P, t_CPU, t_GPU)``. Part times come from the cost model's roofline (dispatch
    overhead paid by both parts, weights and outputs split, inputs read in full); ``t_merge``
    scatters the input and gathers the smaller part through the device's hand-off model.
    Baselines: CPU only, GPU only, and CGP (every splittable layer split at one fixed ratio, the
    processors' peak MAC/s at the chosen clocks — clock × ops/cycle — other layers on the GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConfigError, ConstraintError
from ..rc import RCNetwork

SPLITTABLE = ("conv", "dwconv", "dense", "pool")


@dataclass
class TadfResult:
    """Chosen clocks, TADF coefficients and the temperatures they give."""

    device: str
    ambient_c: float
    tmax_c: float
    theta_c: float
    clock_hz: dict[str, float]
    max_clock_hz: dict[str, float]
    coefficients: dict[str, float]          # a0..a3 of the binding node, and its name
    predicted_steady_c: dict[str, float]    # derived model, per node
    simulated_steady_c: dict[str, float]    # simulator (RC + governor) after settle_s
    simulated_peak_die_c: float
    throttled: bool
    at_max: bool
    iterations: int
    #: governor rules that tripped in the simulator (``"skin >= 45 °C"``), first trip first
    throttle_rules: list[str] = field(default_factory=list)
    time_to_throttle_s: float | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _levels(dev, name: str) -> np.ndarray:
    return np.asarray(dev.processor(name).clock_levels_hz, float)


def _fit_clocks(slack: Callable[[float, float], float], lc: np.ndarray, lg: np.ndarray,
                order: tuple[str, str], theta_c: float) -> tuple[float, float, int]:
    """TADF's clock choice below the maximum (module docstring): lower the processors in ``order``
    (``"c"``/``"g"``), bisecting the first one whose floor fits, snap down to the clock levels
    ``lc``/``lg`` (fractions of max), then step any clock back up while it still fits.
    Returns ``(x_cpu, x_gpu, bisection iterations)``."""
    x = {"c": 1.0, "g": 1.0}
    lo_lvl = {"c": lc[0], "g": lg[0]}
    iterations = 0
    for who in order:
        x[who] = lo_lvl[who]
        if slack(x["c"], x["g"]) > 0:
            continue                          # this one at its floor is not enough: next
        lo, hi = lo_lvl[who], 1.0
        while True:
            iterations += 1
            mid = 0.5 * (lo + hi)
            x[who] = mid
            s = slack(x["c"], x["g"])
            if -theta_c <= s <= 0 or hi - lo < 1e-6:
                if s > 0:
                    x[who] = lo
                break
            if s > 0:
                hi = mid
            else:
                lo = mid
        break
    xc = float(lc[lc <= x["c"] + 1e-12].max())
    xg = float(lg[lg <= x["g"] + 1e-12].max())
    for who in reversed(order):
        levels = lc if who == "c" else lg
        for lv in levels[::-1]:
            cand = (float(lv), xg) if who == "c" else (xc, float(lv))
            if lv > (xc if who == "c" else xg) and slack(*cand) <= 0:
                xc, xg = cand
                break
    return xc, xg, iterations


def _tadf_device(device: str, ambient_c: float, tmax_c: float, theta_c: float, cpu: str, gpu: str):
    """The device and its thermal spec, after checking TADF's settings (one-line errors)."""
    from ...hardware import load_device
    from ...hardware.thermal_spec import thermal_spec_of

    if ambient_c >= tmax_c:
        raise ConstraintError(f"ambient {ambient_c:g} °C is not below T_max {tmax_c:g} °C: no clock "
                              "setting can keep the device under T_max (the steady state is never "
                              "below ambient)")
    if not theta_c > 0:
        raise ConfigError(f"theta must be > 0 °C, got {theta_c!r}")
    dev = load_device(device)
    spec = thermal_spec_of(dev)
    for name in (cpu, gpu):
        if name not in spec.processor_names:
            raise ConfigError(f"device {device!r}: thermal spec has no processor {name!r} "
                              f"(has {', '.join(spec.processor_names)}); TADF needs a CPU and a GPU")
    return dev, spec


def tadf(device: str, ambient_c: float, tmax_c: float = 85.0, theta_c: float = 0.5,
         cpu: str = "cpu", gpu: str = "gpu", settle_s: float = 3600.0) -> TadfResult:
    """Pick CPU/GPU clocks keeping the steady temperature of every die node within ``tmax_c``.

    Parameters
    ----------
    device
        Device name (needs a thermal spec and processors ``cpu`` and ``gpu``).
    ambient_c, tmax_c
        Environment temperature and the limit T_max (TADF: 85 °C).
    theta_c
        Bisection tolerance θ: stop when the left side lies in ``[F - θ, F]``.
    settle_s
        Simulated time used to check the steady state in the simulator.

    Raises
    ------
    ConstraintError
        ``ambient_c >= tmax_c``, or even the lowest clocks exceed T_max (says what is reachable).
    """
    from ..simulate import ScaledWorkload, simulate

    dev, spec = _tadf_device(device, ambient_c, tmax_c, theta_c, cpu, gpu)
    net = RCNetwork.from_spec(spec)
    K = net.steady_gain()                                           # [N, M]
    inputs = spec.processor_names
    pc, pg = dev.processor(cpu), dev.processor(gpu)
    fcm, fgm = pc.max_clock_hz, pg.max_clock_hz
    ups_c = pc.power.power_w(fcm, fcm) - pc.power.static_w
    ups_g = pg.power.power_w(fgm, fgm) - pg.power.static_w
    dies = [spec.node_index(n) for n in spec.die_nodes] or list(range(len(spec.node_names)))
    ic, ig = inputs.index(cpu), inputs.index(gpu)
    a1 = 1.0
    a2 = K[dies, ic] * ups_c                                          # per unit of (f/fmax)³
    a3 = K[dies, ig] * ups_g
    a0 = K[dies, ic] * pc.power.static_w + K[dies, ig] * pg.power.static_w
    F = tmax_c - a1 * ambient_c - a0                                  # [D]

    def slack(xc: float, xg: float) -> float:
        """max over die nodes of LHS - F (<= 0: within T_max); x = f/fmax."""
        return float(np.max(a2 * xc ** 3 + a3 * xg ** 3 - F))

    lc, lg = _levels(dev, cpu) / fcm, _levels(dev, gpu) / fgm
    xc, xg, iterations = 1.0, 1.0, 0
    at_max = slack(1.0, 1.0) <= 0
    if not at_max:
        if slack(lc[0], lg[0]) > 0:
            p_min = np.zeros(len(inputs))
            p_min[ic], p_min[ig] = pc.power_w(lc[0] * fcm), pg.power_w(lg[0] * fgm)
            t_min = float(net.steady_state(p_min, ambient_c)[dies].max())
            raise ConstraintError(f"even the lowest clocks ({cpu} {lc[0] * fcm / 1e6:.0f} MHz, {gpu} "
                                  f"{lg[0] * fgm / 1e6:.0f} MHz) settle at {t_min:.1f} °C > T_max "
                                  f"{tmax_c:g} °C at {ambient_c:g} °C ambient; reachable T_max >= {t_min:.1f} °C")
        # reduce first the processor with more heat per unit of peak throughput
        heat_c = float(np.max(a2)) / pc.peak_at("fp32")
        heat_g = float(np.max(a3)) / pg.peak_at("fp32")
        order = ("c", "g") if heat_c >= heat_g else ("g", "c")
        xc, xg, iterations = _fit_clocks(slack, lc, lg, order, theta_c)
    fc, fg = xc * fcm, xg * fgm
    power = np.zeros(len(inputs))
    power[ic], power[ig] = pc.power_w(fc), pg.power_w(fg)
    pred = net.steady_state(power, ambient_c)
    binding = int(np.argmax(pred[dies]))
    # check in the simulator: constant load at these clocks under the governor
    wl = ScaledWorkload(full_w={cpu: float(power[ic]), gpu: float(power[ig])},
                        fps_at_max={cpu: 1.0, gpu: 1.0}, idle_w={cpu: pc.power.static_w, gpu: pg.power.static_w})
    sim = simulate(spec, wl, duration_s=settle_s, ambient_c=ambient_c)
    return TadfResult(
        device=dev.name, ambient_c=float(ambient_c), tmax_c=float(tmax_c), theta_c=float(theta_c),
        clock_hz={cpu: fc, gpu: fg}, max_clock_hz={cpu: fcm, gpu: fgm},
        coefficients={"node": spec.die_nodes[binding] if spec.die_nodes else spec.node_names[binding],
                      "a0": float(a0[binding]), "a1": a1,
                      "a2_per_hz3": float(a2[binding] / fcm ** 3), "a3_per_hz3": float(a3[binding] / fgm ** 3),
                      "a2_at_max_c": float(a2[binding]), "a3_at_max_c": float(a3[binding]),
                      "F_c": float(F[binding])},
        predicted_steady_c={n: float(v) for n, v in zip(spec.node_names, pred)},
        simulated_steady_c={n: float(v) for n, v in zip(spec.node_names, sim.temps_c[-1])},
        simulated_peak_die_c=sim.peak_die_c, throttled=sim.time_to_first_throttle_s is not None,
        at_max=at_max, iterations=iterations, throttle_rules=_tripped(sim.events),
        time_to_throttle_s=sim.time_to_first_throttle_s)


def _tripped(events: list) -> list[str]:
    """The governor rules (``"skin >= 45 °C"``) that tripped, in order of their first trip."""
    return list(dict.fromkeys(e.detail for e in events if e.kind in ("trip", "shutdown")))


@dataclass
class HswdResult:
    """Per-layer decisions and whole-network latencies of HSWD and its baselines."""

    model: str
    device: str
    clock_hz: dict[str, float]
    layers: list[dict] = field(default_factory=list)    # name, op, choice, t_cpu/t_gpu/t_split (s), gpu_share
    latency_s: dict[str, float] = field(default_factory=dict)   # hswd, cpu_only, gpu_only, cgp
    cgp_gpu_share: float = 0.0

    def speedups(self) -> dict[str, float]:
        """HSWD's speed-up over each baseline (baseline latency / HSWD latency)."""
        h = self.latency_s["hswd"]
        return {k: v / h for k, v in self.latency_s.items() if k != "hswd"}

    def to_dict(self) -> dict:
        return {"model": self.model, "device": self.device, "clock_hz": self.clock_hz,
                "latency_s": self.latency_s, "speedup": self.speedups(), "cgp_gpu_share": self.cgp_gpu_share,
                "decisions": {c: sum(la["choice"] == c for la in self.layers) for c in ("split", "cpu", "gpu")},
                "layers": self.layers}


def hswd(graph, device: str, clock_hz: dict[str, float], dtype: str = "fp32",
         cpu: str = "cpu", gpu: str = "gpu") -> HswdResult:
    """HSWD per-layer CPU/GPU split of ``graph`` on ``device`` at ``clock_hz`` (see module doc)."""
    from ...cost import build_cost_table
    from ...cost.analytic import layer_efficiency
    from ...cost.features import layer_arrays
    from ...hardware import load_device

    dev = load_device(device)
    ct = build_cost_table(graph, dev, dtype, clock_hz=clock_hz)
    ic, ig = ct.processor_index(cpu), ct.processor_index(gpu)
    arr = layer_arrays(graph, dtype)
    t_c, t_g = ct.latency_s[:, ic], ct.latency_s[:, ig]
    ops = np.array([la.op for la in graph.layers])
    split_ok = np.isin(ops, SPLITTABLE) & ct.supported[:, ic] & ct.supported[:, ig]

    def part_time(proc_i: int, share: np.ndarray) -> np.ndarray:
        """Roofline time of ``share`` of each layer's output channels on processor ``proc_i``."""
        p = dev.processors[proc_i]
        f = ct.meta["clock_hz"][p.name]
        compute = share * arr.macs / (p.peak_at(dtype, f) * layer_efficiency(p, arr, None, dtype))
        memory = (arr.in_bytes + share * (arr.out_bytes + arr.weight_bytes)) / p.memory_bandwidth_bytes_per_s
        return p.layer_overhead_s * arr.dispatched + np.maximum(compute, memory)

    ovh = np.array([dev.processors[i].layer_overhead_s for i in (ic, ig)])[:, None] * arr.dispatched[None, :]
    s_c = 1.0 / np.maximum(t_c - ovh[0], 1e-12)
    s_g = 1.0 / np.maximum(t_g - ovh[1], 1e-12)
    h_lat, h_spb = ct.handoff_latency_s[ic, ig], ct.handoff_s_per_byte[ic, ig]

    def split_time(share_g: np.ndarray) -> np.ndarray:
        minor = np.minimum(share_g, 1 - share_g)
        merge = 2 * h_lat + (arr.in_bytes + minor * arr.out_bytes) * h_spb
        return np.maximum(part_time(ic, 1 - share_g), part_time(ig, share_g)) + merge

    share_h = s_g / (s_c + s_g)
    t_split = split_time(share_h)
    cand = np.stack([np.where(split_ok, t_split, np.inf), t_c, t_g])       # [3, L]
    choice = np.argmin(cand, axis=0)                                        # 0 split, 1 cpu, 2 gpu
    names = ("split", "cpu", "gpu")
    # location of each layer's output: split layers merge on the processor with the larger part
    loc_h = np.where(choice == 1, 0, np.where(choice == 2, 1, (share_h >= 0.5).astype(int)))
    peak_c = dev.processors[ic].peak_at(dtype, ct.meta["clock_hz"][cpu])
    peak_g = dev.processors[ig].peak_at(dtype, ct.meta["clock_hz"][gpu])
    share_cgp = peak_g / (peak_c + peak_g)
    t_cgp = np.where(split_ok, split_time(np.full(len(t_c), share_cgp)), t_g)
    loc_cgp = np.where(split_ok, int(share_cgp >= 0.5), 1)

    def total(times: np.ndarray, loc: np.ndarray, split_mask: np.ndarray) -> float:
        # a single-processor layer whose input lives on the other processor pays one hand-off
        prev = np.concatenate([[loc[0]], loc[:-1]])
        moved = (prev != loc) & ~split_mask
        return float(times.sum() + np.sum(moved * (h_lat + arr.in_bytes * h_spb)))

    lat = {"hswd": total(cand[choice, np.arange(len(choice))], loc_h, choice == 0),
           "cpu_only": float(t_c.sum()), "gpu_only": float(t_g.sum()),
           "cgp": total(t_cgp, loc_cgp, split_ok)}
    layers = [{"name": la.name, "op": la.op, "choice": names[c], "t_cpu_ms": 1e3 * float(t_c[i]),
               "t_gpu_ms": 1e3 * float(t_g[i]),
               "t_split_ms": 1e3 * float(t_split[i]) if split_ok[i] else None,
               "gpu_share": float(share_h[i]) if c == 0 else (1.0 if c == 2 else 0.0)}
              for i, (la, c) in enumerate(zip(graph.layers, choice))]
    return HswdResult(model=graph.name, device=dev.name, clock_hz=dict(ct.meta["clock_hz"]),
                      layers=layers, latency_s=lat, cgp_gpu_share=float(share_cgp))
