"""What every figure of the reports shares: a headless matplotlib figure, PNG bytes, colours,
baseline names and log axes with plain-number ticks.

Figures are built on :class:`matplotlib.figure.Figure` directly (no ``pyplot``): no GUI backend
is touched, no global figure registry fills up, and PNG output goes through Agg.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

FRONT_COLOR = "#4C72B0"
CHOSEN_COLOR = "#D62728"
BOTTLENECK_COLOR = "#D62728"
BASELINE_STYLES = (("#2CA02C", "s"), ("#FF7F0E", "D"), ("#9467BD", "^"), ("#8C564B", "v"),
                   ("#E377C2", "P"), ("#17BECF", "X"), ("#7F7F7F", "h"), ("#BCBD22", "<"))


def new_figure(width: float, height: float) -> Any:
    """A constrained-layout figure of ``width`` × ``height`` inches on an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained", dpi=100)
    FigureCanvasAgg(fig)
    return fig


def figure_png(fig: Any, dpi: int = 110) -> bytes:
    """PNG bytes of ``fig`` (rendered with Agg)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def baseline_label(name: str) -> str:
    """Display name of a baseline: ``lbo`` → ``LBO``, ``single:cpu`` → ``cpu only``."""
    if name.startswith("single:"):
        return f"{name.split(':', 1)[1]} only"
    if name == "flops":
        return "FLOPs-proportional"
    return name.upper() if len(name) <= 4 else name


def auto_log(values: np.ndarray) -> bool:
    """Whether an axis over ``values`` reads better in log scale (all positive, spanning over ×10)."""
    v = values[np.isfinite(values)]
    return bool(len(v) and v.min() > 0 and v.max() / v.min() > 10)


def log_axis(ax: Any, axis: Any) -> None:
    """Log scale with plain-number ticks at 1, 2, 5 × 10^k (readable without exponents)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(NullLocator())
