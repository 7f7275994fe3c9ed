"""Run the benchmarks (``benchmarks/bench_*.py``) one after another, each in its own process with
its default settings, and print a summary; what each printed goes to ``results/bench/NAME.log``.

The figures in BENCHMARKS.md come from these scripts (each section names its command). Some take
long on two cores (``bench_scale`` quantizes the 640x640 detectors on 1000 samples): pick them
with ``--only`` or leave them out with ``--skip``.

Run: .venv/bin/python benchmarks/run_all.py [--only map_optimality,fidelity] [--skip scale] [--list]
     make bench [BENCH=map_optimality,fidelity]
Exit status: 0 when every chosen benchmark exited 0, 1 otherwise, 2 when no benchmark matches.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def benchmarks() -> list[str]:
    """Names (``bench_NAME.py`` without prefix and suffix) of every benchmark, sorted."""
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def choose(names: list[str], only: str | None, skip: str | None) -> list[str]:
    """``names`` filtered by comma-separated substrings: kept if one of ``only`` matches (all when
    None), dropped if one of ``skip`` does."""
    def parts(s: str | None) -> list[str]:
        return [p.strip() for p in (s or "").split(",") if p.strip()]

    keep, drop = parts(only), parts(skip)
    chosen = [n for n in names if (not keep or any(k in n for k in keep)) and not any(d in n for d in drop)]
    if (keep or drop) and not chosen:
        print(f"error: no benchmark matches --only {only!r} --skip {skip!r}; the benchmarks are: {', '.join(names)}",
              file=sys.stderr)
        sys.exit(2)
    return chosen


def run(name: str, logs: Path) -> tuple[int, float]:
    """Run ``bench_NAME.py``, its output to the terminal and to ``logs/NAME.log``; exit status and
    wall seconds."""
    log = logs / f"{name}.log"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3"))
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / f"bench_{name}.py")], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd=HERE.parent)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            fh.write(line)
        code = proc.wait()
    return code, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated substrings of the benchmarks to run (default: all)")
    ap.add_argument("--skip", help="comma-separated substrings of benchmarks to leave out")
    ap.add_argument("--list", action="store_true", help="print the benchmarks and exit")
    args = ap.parse_args()
    chosen = choose(benchmarks(), args.only, args.skip)
    if args.list:
        print("\n".join(chosen))
        return 0
    logs = HERE.parent / "results" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for i, name in enumerate(chosen, 1):
            print(f"== [{i}/{len(chosen)}] bench_{name}.py ==", flush=True)
            results.append((name, *run(name, logs)))
    except KeyboardInterrupt:
        print("interrupted; finished benchmarks below, their logs in results/bench/", file=sys.stderr)
    print(f"\n{'benchmark':<24}{'exit':>5}{'wall s':>9}")
    for name, code, wall in results:
        print(f"{name:<24}{code:>5}{wall:>9.1f}")
    failed = [n for n, c, _ in results if c != 0]
    print(f"{len(results) - len(failed)}/{len(chosen)} passed" + (f"; failed: {', '.join(failed)}" if failed else "")
          + f"; logs in {logs.relative_to(HERE.parent)}/")
    return 1 if failed or len(results) < len(chosen) else 0


if __name__ == "__main__":
    sys.exit(main())
