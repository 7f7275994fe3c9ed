"""Fidelity report: modeled / published for every absolute point of docs/METHODS.md sections 1-8.

Run: .venv/bin/python benchmarks/bench_fidelity.py [--no-pipeline]
Prints the op-view and block-view ratios, op / block, and Park & Ha's qualitative facts as
PASS/FAIL rows (see optimizer/report/fidelity.py). Exit 0 when every row passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optimizer.report.fidelity import fidelity_report, format_report  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-pipeline", action="store_true", help="skip the exact pipeline rows (slowest part)")
    args = ap.parse_args()
    report = fidelity_report(pipeline=not args.no_pipeline)
    print("\n".join(format_report(report)))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
