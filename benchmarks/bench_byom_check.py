"""Bring-your-own-model figures: the third-party fixture models (tests/third_party) imported,
cut into a 3-stage pipeline and a 2-part split at evenly spaced boundaries, exported in their own
format and run with the single-file check (``dnnplan run --check``) on 5 seeded frames.

Run: ``python benchmarks/bench_byom_check.py`` (prints one Markdown row per model).
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _byom import NO_KERNEL_MODEL, even_cuts, export_and_check, third_party_models  # noqa: E402

from optimizer.errors import DnnplanError  # noqa: E402
from optimizer.graph import load_graph  # noqa: E402


def main() -> None:
    print("| model | ops | MACs | custom ops | import | pipeline (3 parts) | split (2 parts) |")
    print("|---|---:|---:|---|---|---|---|")
    for name, path in third_party_models().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = load_graph(path)
        custom = sorted({la.op_type for la in g.layers if la.op == "custom"})
        cells = []
        for kind in ("pipeline", "split"):
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    c = export_and_check(path, Path(tmp), kind=kind, frames=5,
                                         cuts=even_cuts(path, 3 if kind == "pipeline" else 2)).check
                    diff = max(o.max_abs_diff for o in c.outputs)
                    cells.append(f"top-1 {c.agreement:.0%}, max abs diff {diff:.1e}")
                except DnnplanError as exc:
                    cells.append("exported; no LiteRT kernel" if name == NO_KERNEL_MODEL else f"error: {exc}")
        print(f"| {name} | {len(g)} | {g.total_macs / 1e6:.1f} M | {', '.join(custom) or '-'} | ok | "
              f"{cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
