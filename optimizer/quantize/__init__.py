"""TFLite post-training quantization and its report (Park & Ha, IEEE Access 2024; docs/METHODS.md section 1).

``quantize(model, out, calib=..., scheme=...)`` converts a zoo network, ``.keras`` file,
SavedModel directory or in-memory Keras model into a quantized ``.tflite`` and returns a
:class:`QuantizeReport` (sizes, conversion time, operators left in float, fidelity against
FP32 on held-out inputs, LiteRT host latency). TensorFlow is imported only when work starts.
"""

from __future__ import annotations

from .api import IO_TYPES, Prepared, check_options, prepare, quantize, quantize_prepared
from .calibration import CalibrationSet, InputSpec, load_calibration
from .convert import SCHEMES, ModelSource, convert_float, convert_quantized, open_model
from .evaluate import TfliteRunner, measure_latency, sqnr_db, top1_agreement
from .inspect import OpsAnalysis, analyse_tflite
from .report import QuantizeReport

__all__ = [
    "IO_TYPES", "SCHEMES", "CalibrationSet", "InputSpec", "ModelSource", "OpsAnalysis", "Prepared",
    "check_options", "prepare", "quantize_prepared",
    "QuantizeReport", "TfliteRunner", "analyse_tflite", "convert_float", "convert_quantized",
    "load_calibration", "measure_latency", "open_model", "quantize", "sqnr_db", "top1_agreement",
]
