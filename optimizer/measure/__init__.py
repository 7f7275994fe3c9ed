"""Real measurements on this host and through external commands (docs/ARCHITECTURE.md, ``measure/``).

* :func:`measure_ort`: onnxruntime per-node profiling mapped to LayerGraph layers.
* :func:`time_litert`: LiteRT whole-model timing.
* :mod:`.profile_formats` / :mod:`.profile_match` / :mod:`.profile_import` / :mod:`.profile_fit`:
  per-operator profiles taken elsewhere (TFLite benchmark_model, onnxruntime) read, matched to
  layers, imported as a measured table, and a device processor fitted to them.
* :class:`ExternalMeasurer`: the JSON-lines protocol of ``PROTOCOL.md`` (``--measure-cmd``);
  ``python -m optimizer.measure.reference_runner`` is its host reference implementation.

TensorFlow, onnxruntime and LiteRT are imported inside the functions.
"""

from __future__ import annotations

from .litert import TimingResult, time_litert
from .ort_profile import OrtMeasurement, measure_ort
from .protocol import ExternalMeasurer

__all__ = ["ExternalMeasurer", "OrtMeasurement", "TimingResult", "measure_ort", "time_litert"]
