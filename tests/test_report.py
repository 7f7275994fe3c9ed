"""optimizer.report: DataFrames of plans/fronts/runs, figures, and ``dnnplan report`` end to end.

Inputs are real: ``dnnplan split`` and ``dnnplan map`` run once per module on a small ONNX network
(no TensorFlow) with the shipped galaxy_j6 / wifi_10 / pixel6 files; the batch run folder is
written through :class:`optimizer.batch.ResultStore`; the thermal run is a real simulation.
"""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
from _byom import write_residual_onnx

from optimizer.errors import ConfigError, InputFileError, SchemaError
from optimizer.report import (
    figure_png,
    load_input,
    load_run,
    plot_convergence,
    plot_front,
    plot_pipeline,
    plot_thermal,
    result_frame,
)

OBJ = ["latency_s", "energy_j", "memory_bytes"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A split plan + its front CSV and a pipeline plan, written by the real CLI."""
    from optimizer.cli import main

    d = tmp_path_factory.mktemp("report_inputs")
    model = write_residual_onnx(d / "tinynet.onnx")
    assert main(["--quiet", "split", str(model), "--device", "galaxy_j6", "--network", "wifi_10",
                 "--granularity", "op", "--solver", "exact", "--out", str(d / "split.json"),
                 "--front", str(d / "front.csv")]) == 0
    assert main(["--quiet", "map", str(model), "--device", "pixel6", "--solver", "exact",
                 "--out", str(d / "map.json")]) == 0
    return d


@pytest.fixture(scope="module")
def batch_run(runs, tmp_path_factory):
    """A batch run folder (ResultStore layout): 12 tasks, 10 done (real plans), 2 failed."""
    from optimizer.batch import ResultStore, TaskOutcome, TaskSpec
    from optimizer.batch.jobspec import JobSpec

    root = tmp_path_factory.mktemp("batch") / "run"
    split_plan = json.loads((runs / "split.json").read_text())
    map_plan = json.loads((runs / "map.json").read_text())
    tasks = ([TaskSpec(kind="map", model="tinynet", device=dev, seed=s) for dev in ("pixel6", "galaxy_s22")
              for s in range(3)]
             + [TaskSpec(kind="split", model="tinynet", device="galaxy_j6", network="wifi_10", seed=s)
                for s in range(6)])
    job = JobSpec(name="reporttest", tasks=[t.canonical() for t in tasks])
    store = ResultStore(root)
    store.initialise(job, tasks)
    rng = np.random.default_rng(1)
    for i, t in enumerate(tasks):
        if i in (2, 9):
            store.record(t, TaskOutcome(t.task_id, "failed", 0.01, error=f"synthetic failure {i}"))
            continue
        plan = json.loads(json.dumps(map_plan if t.kind == "map" else split_plan))
        for k, v in plan["predicted"].items():
            if isinstance(v, float):
                plan["predicted"][k] = v * float(rng.uniform(0.9, 1.1))
        metrics = {k: v for k, v in plan["predicted"].items() if isinstance(v, (int, float))}
        store.record(t, TaskOutcome(t.task_id, "done", 0.1, metrics=metrics, plan=plan,
                                    search={"evaluations": 100 + i, "space_size": 1000.0,
                                            "explored_fraction": (100 + i) / 1000, "wall_time_s": 0.05}))
    return root


# ------------------------------------------------------------------------------------ loading
def test_front_csv_frame(runs):
    df = load_run(runs / "front.csv")
    assert df.attrs["kind"] == "front" and len(df) >= 3
    assert df["on_front"].all() and df["chosen"].sum() == 1 and (df["baseline"] == "").all()
    for c in OBJ:
        assert df[c].dtype == float and np.isfinite(df[c]).all()
    # no row of the front dominates another
    F = df[OBJ].to_numpy()
    dominated = ((F[:, None, :] <= F[None, :, :]).all(-1) & (F[:, None, :] < F[None, :, :]).any(-1))
    assert not dominated.any()


def test_split_plan_frame_matches_plan(runs):
    from optimizer.plan import read_plan

    plan = read_plan(runs / "split.json")
    df = load_run(runs / "split.json")
    chosen = df[df["chosen"]]
    assert len(chosen) == 1
    assert chosen["latency_s"].iloc[0] == pytest.approx(plan.predicted.latency_s)
    assert int(chosen["split"].iloc[0]) == plan.split.layer
    assert set(df.loc[df["baseline"] != "", "baseline"]) == {"lbo", "ebo", "cos", "coc", "rs"}
    lbo = df[df["baseline"] == "lbo"].iloc[0]
    assert lbo["latency_s"] == pytest.approx(plan.search.baselines["lbo"]["objectives"]["latency_s"])


def test_pipeline_plan_frame(runs):
    df = load_run(runs / "map.json")
    chosen = df[df["chosen"]].iloc[0]
    singles = df[df["baseline"].str.startswith("single:")]
    assert len(singles) == 3
    # the exact mapping is at least as fast as every single-processor mapping
    assert chosen["throughput_fps"] >= singles["throughput_fps"].max() - 1e-9
    assert "|" in chosen["stages"] or chosen["stages"].count("-") == 1


def test_batch_frame(batch_run):
    df = load_run(batch_run)
    assert df.attrs["kind"] == "batch" and len(df) == 12
    assert (df["status"] == "done").sum() == 10 and (df["status"] == "failed").sum() == 2
    done_map = df[(df["status"] == "done") & (df["kind"] == "map")]
    assert done_map["metric_throughput_fps"].notna().all()


def test_result_frame_of_a_search():
    from _split_fixtures import small_costs

    from optimizer.search import solve
    from optimizer.search.split import SplitProblem

    _, costs = small_costs()
    res = solve(SplitProblem(costs), "exact", seed=0)
    df = result_frame(res, costs.layer_names)
    assert df["on_front"].sum() == len(res.front)
    row = df[df["chosen"]].iloc[0]
    assert [row[k] for k in OBJ] == pytest.approx([res.best.objectives[k] for k in OBJ])
    assert set(df.loc[df["baseline"] != "", "baseline"]) == set(res.baselines)


# ------------------------------------------------------------------------------------ figures
def _scatter_points(ax, label):
    for coll in ax.collections:
        if coll.get_label() == label:
            return np.asarray(coll.get_offsets())
    raise AssertionError(f"no scatter labelled {label!r}; have {[c.get_label() for c in ax.collections]}")


def test_plot_front_marks_choice_and_every_baseline(runs):
    import pandas as pd

    front = load_run(runs / "front.csv")
    plan = load_run(runs / "split.json")
    df = pd.concat([front, plan[plan["baseline"] != ""]], ignore_index=True)
    fig = plot_front(df, "latency_s", "energy_j")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "latency (ms)" and ax.get_ylabel() == "energy per frame (mJ)"
    star = _scatter_points(ax, "TOPSIS choice")
    ch = front[front["chosen"]].iloc[0]
    assert star[0] == pytest.approx([ch["latency_s"] * 1e3, ch["energy_j"] * 1e3])
    assert len(_scatter_points(ax, f"Pareto front ({len(front)} solutions)")) == len(front)
    texts = {t.get_text() for t in ax.texts}
    for name in ("LBO", "EBO", "COS", "COC", "RS"):
        assert f"baseline {name}" in [c.get_label() for c in ax.collections]
        assert name in texts  # labelled next to its marker, not only in the legend
    assert "TOPSIS choice" in texts
    assert figure_png(fig).startswith(PNG_MAGIC)


def test_plot_front_scatter_matrix(runs):
    df = load_run(runs / "front.csv")
    fig = plot_front(df, "latency_s", "energy_j", z="memory_bytes")
    panels = [ax for ax in fig.axes if ax.collections]
    assert len(panels) == 3
    labels = {ax.get_xlabel() for ax in panels} | {ax.get_ylabel() for ax in panels}
    assert {"latency (ms)", "energy per frame (mJ)", "memory (MB)"} <= labels
    with pytest.raises(ConfigError, match="no column 'fps'"):
        plot_front(df, "latency_s", "fps")


def test_plot_convergence_against_the_optimum():
    history = [{"generation": g, "evaluations": 32 * (g + 1), "best": v}
               for g, v in enumerate([100.0, 120.0, 120.0, 131.0, 132.0])]
    fig = plot_convergence(history, optimum=133.0)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "best throughput (FPS)"
    assert ax.get_xlabel().startswith("evaluations")
    line = [ln for ln in ax.lines if ln.get_label().startswith("exact optimum")][0]
    assert line.get_ydata()[0] == pytest.approx(133.0)
    curve = [ln for ln in ax.lines if ln.get_label().startswith("GA")][0]
    assert list(curve.get_xdata()) == [32, 64, 96, 128, 160]
    assert any("99.2% of optimum" in t.get_text() for t in ax.texts)
    with pytest.raises(ConfigError, match="history"):
        plot_convergence([{"generation": 0}])


def test_plot_pipeline_gantt_highlights_the_bottleneck(runs):
    from optimizer.plan import read_plan

    plan = read_plan(runs / "map.json")
    fig = plot_pipeline(plan, frames=3)
    ax = fig.axes[0]
    bars = ax.patches
    n = len(plan.stages) + sum((s is not None and (s.predicted_time_s or 0) > 0)
                               for s in (plan.preprocess, plan.postprocess))
    assert len(bars) == 3 * n
    assert ax.get_xlabel() == "time (ms)"
    times = [s.predicted_time_s * 1e3 for s in plan.stages]
    red = [b for b in bars if b.get_hatch() == "//"]
    assert len(red) == 3 and all(b.get_width() == pytest.approx(max(times)) for b in red)
    # steady state: frame 3 leaves the bottleneck stage one period after frame 2
    ends = sorted(b.get_x() + b.get_width() for b in red)
    assert ends[2] - ends[1] == pytest.approx(max(times))
    assert any("BOTTLENECK" in t.get_text() for t in ax.get_yticklabels())


def test_plot_pipeline_split_timeline_adds_up_to_latency(runs):
    from optimizer.plan import read_plan

    plan = read_plan(runs / "split.json")
    ax = plot_pipeline(plan).axes[0]
    total = sum(b.get_width() for b in ax.patches)
    assert total == pytest.approx(plan.predicted.latency_s * 1e3, rel=1e-6)
    assert "ms" in ax.get_xlabel()


def test_plot_thermal_real_simulation():
    from optimizer.hardware.thermal_spec import load_thermal_spec
    from optimizer.thermal.simulate import reference_workload, simulate

    spec = load_thermal_spec("pixel6")
    sim = simulate(spec, reference_workload(spec, combine="pipeline"), duration_s=300)
    fig = plot_thermal(sim)
    ax_t, ax_c, ax_f = fig.axes
    assert ax_t.get_ylabel() == "temperature (°C)" and ax_f.get_ylabel() == "throughput (FPS)"
    assert "%" in ax_c.get_ylabel() and ax_f.get_xlabel() == "time (s)"
    trips = [e for e in sim.events if e.kind == "trip"]
    assert trips, "the reference load should throttle pixel6 within 5 minutes"
    dashed = [ln for ln in ax_t.lines if ln.get_linestyle() == "--"]
    assert sorted(ln.get_xdata()[0] for ln in dashed) == sorted(e.time_s for e in trips)
    assert any(f"first throttle at {sim.time_to_first_throttle_s:.0f} s" in t.get_text() for t in ax_t.texts)
    # the same figure from the JSON form
    fig2 = plot_thermal(json.loads(json.dumps(sim.to_dict())))
    assert len(fig2.axes[0].lines) == len(ax_t.lines)


# ------------------------------------------------------------------------------------ the report
def test_report_cli_writes_self_contained_html_and_markdown(run_cli, runs, batch_run, tmp_path):
    out = tmp_path / "rep"
    res = run_cli("report", runs / "split.json", runs / "front.csv", runs / "map.json", batch_run, "--out", out)
    assert res.exit_code == 0, res.stderr
    html_path = out / "report.html"
    assert res.stdout.strip().splitlines()[-1] == str(html_path)
    page = html_path.read_text()
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) >= 6
    # every figure embedded; nothing fetched from elsewhere
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(embedded) == len(pngs)
    assert all(base64.b64decode(b).startswith(PNG_MAGIC) for b in embedded)
    assert not re.search(r"https?://|<script|<link|src=\"(?!data:)", page)
    # the front was paired with its split plan: baselines appear in its table and figure
    assert "Pareto front from front.csv" in page and "LBO" in page and "bottleneck" in page
    assert "12 tasks: 10 done, 2 failed" in page and "synthetic failure 9" in page
    md = (out / "report.md").read_text()
    for png in pngs:
        assert f"]({png.name})" in md
    assert "| candidate | split |" in md
    assert not list(out.glob(".*.tmp"))


def test_report_of_a_thermal_simulation(run_cli, tmp_path):
    from optimizer.hardware.thermal_spec import load_thermal_spec
    from optimizer.thermal.simulate import reference_workload, simulate

    spec = load_thermal_spec("pixel6")
    sim = simulate(spec, reference_workload(spec), duration_s=200)
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(sim.to_dict()))
    assert load_input(path).kind == "thermal"
    res = run_cli("report", path, "--out", tmp_path / "rep")
    assert res.exit_code == 0, res.stderr
    assert "Governor events" in (tmp_path / "rep" / "report.md").read_text()


# ------------------------------------------------------------------------------------ bad input
def _bad(run_cli, tmp_path, path, *message):
    out = tmp_path / "rep"
    res = run_cli("report", path, "--out", out)
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    for m in message:
        assert m in lines[0], lines[0]
    assert not out.exists()
    return lines[0]


def test_not_a_run(run_cli, tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    _bad(run_cli, tmp_path, tmp_path / "notes.txt", "notes.txt", "not a run, plan or front")
    (tmp_path / "folder").mkdir()
    _bad(run_cli, tmp_path, tmp_path / "folder", "not a batch run folder (no run.json)")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    _bad(run_cli, tmp_path, tmp_path / "other.json", "other.json", "not a plan")
    _bad(run_cli, tmp_path, tmp_path / "missing.json", "no such file or folder")


def test_front_missing_objective_columns_names_them(run_cli, runs, tmp_path):
    import pandas as pd

    df = pd.read_csv(runs / "front.csv").drop(columns=["energy_j", "memory_bytes"])
    path = tmp_path / "front.csv"
    df.to_csv(path, index=False)
    line = _bad(run_cli, tmp_path, path, "missing objective column(s) energy_j, memory_bytes")
    assert "latency_s" not in line.split("needs")[0]
    with pytest.raises(SchemaError, match="energy_j, memory_bytes"):
        load_run(path)


def test_empty_front(run_cli, runs, tmp_path):
    header = (runs / "front.csv").read_text().splitlines()[0]
    path = tmp_path / "front.csv"
    path.write_text(header + "\n")
    _bad(run_cli, tmp_path, path, "front is empty")
    path.write_text("")
    _bad(run_cli, tmp_path, path, "front is empty")
    with pytest.raises(InputFileError):
        load_run(path)


def test_front_with_a_non_number(runs, tmp_path):
    lines = (runs / "front.csv").read_text().splitlines()
    cols = lines[0].split(",")
    cells = lines[1].split(",")
    cells[cols.index("energy_j")] = "fast"
    path = tmp_path / "front.csv"
    path.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    with pytest.raises(SchemaError, match="line 2, column energy_j: 'fast' is not a finite number"):
        load_run(path)


def test_one_bad_input_among_good_ones_writes_nothing(run_cli, runs, tmp_path):
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    out = tmp_path / "rep"
    res = run_cli("report", runs / "split.json", tmp_path / "bad.csv", "--out", out)
    assert res.exit_code == 2 and "bad.csv" in res.stderr
    assert not out.exists()


def test_batch_report_files(batch_run, tmp_path):
    """The time target (< 10 s for >= 100 tasks) is measured by benchmarks/bench_report.py."""
    from optimizer.report.document import write_report

    files = write_report([batch_run], tmp_path / "rep")
    assert files.html.is_file() and len(files.figures) == 2


def test_damaged_run_folder(run_cli, batch_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(batch_run, run)
    task = sorted((run / "tasks").glob("*/task.json"))[0]
    task.write_text("{not json")
    _bad(run_cli, tmp_path, run, str(run), "not valid", "damaged")


def test_rewriting_a_report_removes_its_stale_figures(runs, tmp_path):
    from optimizer.report.document import write_report

    out = tmp_path / "rep"
    first = write_report([runs / "split.json", runs / "front.csv", runs / "map.json"], out)
    (out / "notes.png").write_bytes(b"mine")
    second = write_report([runs / "map.json"], out)
    assert len(second.figures) < len(first.figures)
    assert sorted(out.glob("fig*.png")) == sorted(second.figures)
    assert (out / "notes.png").read_bytes() == b"mine"


def test_collected_batch_table_csv(batch_run, tmp_path):
    from optimizer.batch import ResultStore, write_table

    path = tmp_path / "table.csv"
    write_table(ResultStore.open_existing(batch_run).table(), path)
    df = load_run(path)
    assert df.attrs["kind"] == "batch" and len(df) == 12 and (df["status"] == "failed").sum() == 2
