"""Bad-input sweep: every case of ``tests/_bad_inputs.py`` (corrupt files, unknown names,
out-of-range numbers, unwritable outputs, write-time failures, interrupts) over every command.

Run: .venv/bin/python benchmarks/bench_bad_inputs.py [--fast] [-k SUBSTRING]
Prints one row per case that is not clean and the share clean: one line on stderr, exit 2
(130 on an interrupt), input and output folders unchanged. ``--fast`` skips the TensorFlow
cases. Cases whose fix is on another branch are counted apart ("fixed on hN").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _bad_inputs import cases, make_fixtures, run_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="skip the cases that load TensorFlow")
    ap.add_argument("-k", default="", help="only cases whose id contains this")
    args = ap.parse_args()
    selected = [c for c in cases() if args.k in c.id and not (args.fast and c.tf)]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dnnplan-bad-") as tmp:
        paths = make_fixtures(Path(tmp), heavy=any(c.how == "signal" for c in selected),
                              tf=any(c.how == "signal" and c.tf for c in selected))
        outcomes = []
        for case in selected:
            o = run_case(case, paths)
            outcomes.append(o)
            if not o.clean:
                print(f"NOT CLEAN    {case.id:34s} {o.why()}", flush=True)
    clean = sum(o.clean for o in outcomes)
    by_how = {h: sum(1 for c in selected if c.how == h) for h in ("inprocess", "ulimit", "signal")}
    print(f"{len(outcomes)} cases ({by_how['inprocess']} in-process, {by_how['ulimit']} write-time failures, "
          f"{by_how['signal']} interrupts) in {time.perf_counter() - t0:.0f} s")
    print(f"clean: {clean}/{len(outcomes)} = {clean / len(outcomes):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
