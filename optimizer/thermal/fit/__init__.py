"""Thermal models fitted from logged traces, saved as JSON and scored at horizons.

Two model families, both ending as a discrete state-space model
``x[k+1] = Ad x[k] + Bd u[k] + c`` whose first ``S`` states are the measured sensors
(:mod:`.model`):

``linear`` (:mod:`.linear`)
    SPLASH's model (Jeong 2023; docs/METHODS.md section 5): next temperatures linear in all
    current temperatures, the inputs and an offset, fitted one step ahead by least squares at a
    step chosen by open-loop error on a held-out segment (:mod:`.steps`), made continuous-time by
    the matrix logarithm of its zero-order hold.

``rc`` (:mod:`.rc_equation_error`, :mod:`.rc_open_loop`)
    A physically constrained RC network (HotSpot-style, Skadron et al. 2003): one node per sensor
    plus optional hidden nodes, positive capacities and conductances, non-negative input gains;
    stable by construction. Fitted on one-step error by default, on open-loop error with 2+
    hidden nodes or multiple shooting.

:func:`~.api.fit_model` fits either by name; :func:`~.evaluate.evaluate` scores a model against
persistence and a ridge reference. docs/METHODS.md section 11 gives the methods.
"""

from .api import MODEL_FAMILIES, fit_model
from .evaluate import HorizonScore, evaluate
from .linear import continuous_from_discrete, fit_linear
from .model import APPROXIMATE, DISCRETE_ONLY, EXACT, ThermalModel, align_trace, fixed_model, load_model, save_model
from .rc_equation_error import fit_rc
from .rc_open_loop import fit_rc_open_loop
from .steps import FIT_STEP_FACTORS, ProgressFn, split_for_validation

__all__ = ["APPROXIMATE", "DISCRETE_ONLY", "EXACT", "FIT_STEP_FACTORS", "MODEL_FAMILIES", "HorizonScore",
           "ProgressFn", "ThermalModel", "align_trace", "continuous_from_discrete", "evaluate", "fit_linear",
           "fit_model", "fit_rc", "fit_rc_open_loop", "fixed_model", "load_model", "save_model",
           "split_for_validation"]
