"""The thermal workload of a pipeline mapping: stage times under clock caps → power and throughput.

Under caps ``c_p`` the cost table is rebuilt at ``c_p f_max``
(:class:`optimizer.thermal.plan_workload.CappedTables`); the mapping's stage times come from
:meth:`optimizer.search.pipeline.PipelineProblem.evaluate` on that table with the mapping's own
settings (threads, cores, pre/post, pre/post stretched by the CPU cap), throughput = 1 / slowest
stage (Park & Ha, IEEE Access 2024), and power follows
:func:`optimizer.thermal.plan_workload.pipeline_power`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..thermal.plan_workload import CappedTables, pipeline_power
from ..thermal.simulate import WorkloadPoint
from .pipeline import PipelineProblem


@dataclass
class PipelineWorkload:
    """Simulator workload of one pipeline mapping (see the module docstring)."""

    tables: CappedTables
    settings: dict[str, Any]
    chromosome: np.ndarray
    last: dict[str, Any] | None = None

    def problem_at(self, caps: Mapping[str, float]) -> Any:
        """The plan's PipelineProblem on the cost table at ``caps``."""
        ct = self.tables.table(caps)
        cpu_frac = float(caps.get(self.tables.names[self.tables.cpu], 1.0)) or 1.0
        s = self.settings
        return PipelineProblem(ct, stages=s["stages"], objectives=("throughput",),
                               processors=s.get("processors"), cpu_threads=s["cpu_threads"],
                               host_threads=s["host_threads"], cpu_cores=s.get("cpu_cores"),
                               pre_s=None if s["pre_s"] is None else s["pre_s"] / cpu_frac,
                               post_s=None if s["post_s"] is None else s["post_s"] / cpu_frac)

    def __call__(self, caps: Mapping[str, float]) -> WorkloadPoint:
        if self.tables.cpu_off(caps):
            return WorkloadPoint({}, 0.0)
        prob = self.problem_at(caps)
        X = self.chromosome[None]
        out = prob.evaluate(X)
        power = pipeline_power(prob, X, out, self.tables.static_w, *prob.host_s())[0]
        self.last = {"stage_time_s": out["stage_time_s"][0].tolist()}
        return WorkloadPoint(dict(zip(self.tables.names, power.tolist(), strict=True)),
                             float(out["throughput_fps"][0]))


def mapping_workload(problem: Any, x: Sequence[int], graph: Any, device: Any) -> PipelineWorkload:
    """The simulator workload of chromosome ``x`` of a PipelineProblem (same settings, no plan)."""
    settings = {"stages": problem.stages, "processors": problem.processors, "cpu_threads": problem.cpu_threads,
                "host_threads": problem.host_threads, "cpu_cores": problem.cpu_cores,
                "pre_s": problem.host_s()[0], "post_s": problem.host_s()[1]}
    tables = CappedTables(graph, device, problem.cost_table.dtype, base=problem.cost_table)
    return PipelineWorkload(tables, settings, np.asarray(x, dtype=np.int64))
