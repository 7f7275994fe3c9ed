"""Peak memory and time of the ONNX export of zoo networks (graph/convert.py ``keras_to_onnx``).

Each network is built (Keras seed 0) and exported in a fresh process; the peak is that process's
high-water mark (``peak_rss_bytes``, as the quantize report gives it), the SHA-256 prefix lets two runs (or two versions) compare their files. The
``bytes/weight`` column is (peak - 1 GB) / float weight bytes, the slope of the refusal estimate
(``TF2ONNX_BYTES_PER_WEIGHT_BYTE``).

Run: .venv/bin/python benchmarks/bench_tf2onnx_memory.py [--models alexnet,vgg16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import hashlib, json, sys, time
import keras
keras.utils.set_random_seed(0)
from optimizer.graph.convert import keras_to_onnx
from optimizer.graph.zoo import build_keras
from optimizer.quantize.parallel_calibration import peak_rss_bytes
model = build_keras(sys.argv[1])
weights = 4.0 * model.count_params()
t0 = time.perf_counter()
keras_to_onnx(model, sys.argv[2])
seconds = time.perf_counter() - t0
digest = hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest()[:16]
print(json.dumps({"weights": weights, "seconds": seconds, "peak": peak_rss_bytes(), "sha256": digest}))
"""


def measure(model: str, folder: str) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", CHILD, model, os.path.join(folder, f"{model}.onnx")],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet_v2,resnet50,alexnet,vgg16")
    args = ap.parse_args()
    print(f"{'model':<14}{'weights MB':>11}{'peak GB':>9}{'bytes/weight':>14}{'export s':>10}  sha256")
    with tempfile.TemporaryDirectory(prefix="bench-tf2onnx-") as folder:
        for model in args.models.split(","):
            r = measure(model, folder)
            slope = (r["peak"] - 1e9) / r["weights"]
            print(f"{model:<14}{r['weights'] / 1e6:>11.0f}{r['peak'] / 1e9:>9.2f}{slope:>14.1f}"
                  f"{r['seconds']:>10.1f}  {r['sha256']}", flush=True)


if __name__ == "__main__":
    main()
