"""Inspecting results: DataFrames of plans, fronts and batch runs; figures; HTML/Markdown reports.

Notebook API::

    from optimizer.report import load_run, plot_front, plot_convergence, plot_pipeline, plot_thermal
    df = load_run("results/demo/front.csv")
    plot_front(df, x="latency_s", y="energy_j")
"""

from .figure_style import figure_png
from .figures import plot_batch, plot_convergence, plot_front
from .timelines import plot_pipeline, plot_thermal
from .frames import ReportInput, load_input, load_run, plan_frame, result_frame

__all__ = ["ReportInput", "figure_png", "load_input", "load_run", "plan_frame", "plot_batch",
           "plot_convergence", "plot_front", "plot_pipeline", "plot_thermal", "result_frame"]
