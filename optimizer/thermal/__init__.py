"""Thermal modelling: RC networks, throttling governor, sustained-run simulation, trace fitting.

* :mod:`.rc` — N-node RC network, exact zero-order-hold discretisation, closed forms.
* :mod:`.governor` — hysteresis throttling governor replaying a device's trip table.
* :mod:`.plant` — the simulated device: RC network + governor stepping object and the shared
  metrics (first throttle, throttled fraction, severe, peaks, energy) every simulation uses.
* :mod:`.simulate` — sustained-run engine (RC + governor + workload) and vectorised
  steady-state objectives for searches.
* :mod:`.trace`, :mod:`.fit`, :mod:`.reference` — CSV traces; SPLASH linear and constrained RC
  models fitted from them (one module per job in the :mod:`.fit` package); evaluation at
  horizons against persistence and a ridge reference.
* :mod:`.policies` — SPLASH scheduling, TADF + HSWD, Play It Cool shifting.
"""

from .fit import ThermalModel, evaluate, fit_model, fixed_model, load_model, save_model
from .governor import Governor, GovernorEvent, GovernorTrace, replay
from .plant import PlantLog, ThermalPlant
from .rc import DiscreteThermalModel, RCNetwork, zoh
from .simulate import (
    ScaledWorkload,
    SimulationResult,
    SteadyStateObjective,
    WorkloadPoint,
    reference_workload,
    simulate,
)
from .trace import Segment, Trace, read_trace

__all__ = [
    "DiscreteThermalModel", "Governor", "GovernorEvent", "GovernorTrace", "PlantLog", "RCNetwork",
    "ScaledWorkload", "Segment", "SimulationResult", "SteadyStateObjective", "ThermalModel", "ThermalPlant",
    "Trace", "WorkloadPoint",
    "evaluate", "fit_model", "fixed_model", "load_model", "read_trace", "reference_workload", "replay",
    "save_model", "simulate", "zoh",
]
