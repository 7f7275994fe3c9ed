"""How fast `dnnplan --help` returns (it must not import TensorFlow).

Run: .venv/bin/python benchmarks/bench_cli_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

DNNPLAN = Path(sys.executable).with_name("dnnplan")


def main(repeats: int = 7) -> None:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([str(DNNPLAN), "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    print(f"dnnplan --help: median {statistics.median(times):.3f} s, "
          f"max {max(times):.3f} s over {repeats} runs")


if __name__ == "__main__":
    main()
