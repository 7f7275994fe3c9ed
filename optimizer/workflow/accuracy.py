"""Accuracy per partition in the split workflow: measure the table, constrain, record in the plan.

With ``SplitRequest.accuracy_data`` (a labelled ``.npz``; the model a ``.keras`` file) the top-1
accuracy of every (boundary, wire dtype) with the request's head dtype and an FP32 server tail is
measured once (:func:`optimizer.plan.accuracy.accuracy_table`: INT8 parts by full-integer PTQ,
Jacob et al. 2018), ``min_accuracy`` becomes a constraint of the search
(:class:`optimizer.search.split_accuracy.AccuracyConstrainedSplitProblem`), and the plan records
the chosen configuration's accuracy and the FP32 model's in ``predicted.extra`` (``accuracy``,
``accuracy_fp32``) and the data and floor in ``search.settings["accuracy"]``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .outcome import PlanOutcome
    from .requests import SplitRequest


def accuracy_setup(request: SplitRequest, costs: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """The accuracy table [W, L+1] of ``request`` on the split costs' boundaries and its record."""
    from ..fileio import sha256_file
    from ..graph.keras_import import load_keras_model
    from ..plan.accuracy import accuracy_table, load_labelled, predict_classes

    path = str(request.accuracy_data)
    data = load_labelled(path)
    model = load_keras_model(request.model)
    table = accuracy_table(model, data["x"], data["y"], calib=data["calib"], n_layers=costs.n_layers,
                           head_dtype=costs.dtype, wire_dtypes=tuple(costs.wire_dtypes),
                           granularity=request.granularity)
    fp32 = float(np.mean(predict_classes(model, data["x"]) == data["y"]))
    record = {"data": path, "data_sha256": sha256_file(path),
              "samples": int(len(data["y"])), "calibration_samples": int(len(data["calib"])),
              "head_dtype": costs.dtype, "tail_dtype": "fp32", "min_accuracy": request.min_accuracy,
              "fp32_accuracy": fp32}
    return table, record


def annotate_accuracy(outcome: PlanOutcome, request: SplitRequest, table: np.ndarray,
                      record: dict[str, Any]) -> PlanOutcome:
    """The outcome with the chosen configuration's accuracy recorded (module docstring)."""
    plan, problem = outcome.plan, outcome.problem
    d = outcome.result.best.decision
    w = problem.costs.wire_dtypes.index(d["wire_dtype"])
    acc = float(table[w, int(d["split"])])
    extra = {**plan.predicted.extra, "accuracy": acc, "accuracy_fp32": record["fp32_accuracy"]}
    settings = {**plan.search.settings, "accuracy": record}
    return replace(outcome, plan=plan.model_copy(update={
        "predicted": plan.predicted.model_copy(update={"extra": extra}),
        "search": plan.search.model_copy(update={"settings": settings})}))
