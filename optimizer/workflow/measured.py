"""Measured GA fitness for pipeline searches: an external command or this host's cores.

The GA's evaluator becomes a :class:`optimizer.search.evaluators.MeasuredEvaluator` (cached, so
no candidate is measured twice; persisted when a cache path is given, so a resumed search
re-measures nothing). Sources (Park & Ha, IEEE Access 2024, measure candidate mappings on the
phone itself):

* ``measure_cmd``: the external-command protocol of ``optimizer/measure/PROTOCOL.md`` (a phone
  runner), fed an ONNX export of the model; median of ``measure_repeats`` (default 10) runs;
* ``measure="host"``: :class:`optimizer.runtime.host_evaluator.HostPipelineMeasurer` runs each
  candidate as a real pipeline on this host's cores (median of ``measure_repeats``, default 5).
  ``runtime/`` sits above the workflow, so callers (CLI, batch) hand that class in as
  ``host_measurer``; the workflow only calls ``host_measurer.check_device(device)`` and
  ``host_measurer(model, graph, **options)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..hardware.schema import Device
    from .requests import PipelineRequest


@dataclass
class MeasuredFitness:
    """The GA evaluator of a measured search and the measurer to close after it."""

    evaluator: Any  # MeasuredEvaluator
    measurer: Any = None  # ExternalMeasurer (has close()) or None

    def close(self) -> None:
        """Stop the external measurement process, if any."""
        if self.measurer is not None and hasattr(self.measurer, "close"):
            self.measurer.close()


def check_host(request: PipelineRequest, device: Device, host_measurer: Any) -> None:
    """Fail before any work when ``request`` measures on this host and ``device`` is not its cores."""
    if request.measure != "host":
        return
    if host_measurer is None:
        from ..errors import ConfigError

        raise ConfigError("measure='host' needs this host's pipeline measurer (host_measurer="
                          "optimizer.runtime.host_evaluator.HostPipelineMeasurer)")
    host_measurer.check_device(device)


def measured_fitness(request: PipelineRequest, graph: Any, device: Device, problem: Any,
                     host_measurer: Any = None) -> MeasuredFitness | None:
    """The measured evaluator ``request`` asks for, or None for a modeled search."""
    from ..search.evaluators import MeasuredEvaluator

    if request.measure_cmd is not None:
        from ..measure import ExternalMeasurer
        from ..measure.artifacts import export_artifact
        from ..search.evaluators import external_measure

        ct = problem.cost_table
        measurer = ExternalMeasurer(request.measure_cmd)
        try:
            artifact = export_artifact(request.model, graph, "onnx")
        except BaseException:
            measurer.close()
            raise
        cpu = ct.processors[ct.processor_kinds.index("cpu")]
        measure = external_measure(measurer, artifact, dtype=request.compute_dtype, cpu_processor=cpu,
                                   cpu_threads=problem.cpu_threads,
                                   repeats=10 if request.measure_repeats is None else request.measure_repeats)
        return MeasuredFitness(MeasuredEvaluator(measure, cache_path=request.measure_cache), measurer)
    if request.measure == "host":
        check_host(request, device, host_measurer)
        host = host_measurer(request.model, graph, dtype=request.compute_dtype, variant=dict(request.variant),
                                    device=device.name, frames=request.measure_frames,
                                    repeats=5 if request.measure_repeats is None else request.measure_repeats,
                                    seed=request.seed, cache_limit_mb=request.measure_cache_mb)
        return MeasuredFitness(MeasuredEvaluator(host, cache_path=request.measure_cache))
    return None
