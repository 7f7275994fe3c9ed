"""Bounded inputs: a small file that asks for huge work is refused in one line (exit 2) before the
allocation, or read in bounded memory; peak RSS is measured in a fresh process (``VmHWM``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _safety import export_tiny_pipeline, run_measured, write_npz_bomb, write_yaml_bomb

from optimizer.errors import ConfigError, SchemaError

GB = 1 << 30


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-2000:]
    return lines[0]


# ------------------------------------------------------------------------------- bandwidth traces
def test_three_rows_at_100_gbps_are_refused_in_bounded_memory(tmp_path, tiny_onnx):
    """Before: 2.5e11 delivery opportunities asked for (124 GiB, a traceback)."""
    trace = tmp_path / "fast.csv"
    trace.write_text("t_s,mbps\n0,100000\n10000,100000\n20000,100000\n")
    rc, err, peak = run_measured(tmp_path, "split", str(tiny_onnx), "--device", "galaxy_j6", "--network", "wifi_10",
                                 "--bandwidth-trace", str(trace), "--out", str(tmp_path / "p.json"))
    line = _one_line(err)
    assert rc == 2 and "fast.csv: the trace delivers 250,000,000,000 packets" in line and "at most" in line, line
    assert peak is not None and peak <= 1 * GB, peak
    assert not (tmp_path / "p.json").exists()


def test_long_traces_are_streamed_and_bounded(tmp_path, monkeypatch):
    from optimizer.hardware import bandwidth
    from optimizer.hardware.bandwidth import read_trace

    rows = tmp_path / "rows.csv"
    rows.write_text("t_s,mbps\n" + "".join(f"{i * 0.1:.1f},8\n" for i in range(60)))
    monkeypatch.setattr(bandwidth, "MAX_CSV_ROWS", 50)
    with pytest.raises(SchemaError, match=r"rows.csv: more than 50 rows"):
        read_trace(rows)
    stamps = tmp_path / "long.up"
    stamps.write_text("0\n1000\n900000000000\n")  # 28 years of milliseconds: a per-second table of 7 TB
    with pytest.raises(SchemaError, match=r"long.up:3: timestamp 900000000000 ms is past 604800 s"):
        read_trace(stamps)
    monkeypatch.setattr(bandwidth, "MAX_START_SAMPLES", 100)
    day = tmp_path / "day.csv"
    day.write_text("t_s,mbps\n0,0.1\n86000,0.1\n")  # two days at 100 kbps
    starts = read_trace(day).start_times(0.1)
    assert len(starts) == 100 and starts[1] == pytest.approx(1720.0)  # not 1,720,000 samples every 0.1 s


def test_thermal_traces_are_bounded_in_rows_and_columns(tmp_path, monkeypatch):
    """A gzip bomb of a thermal CSV is refused after the bound, not read whole."""
    import gzip

    from optimizer.errors import InputFileError
    from optimizer.thermal import trace

    bomb = tmp_path / "bomb.csv.gz"
    with gzip.open(bomb, "wt") as fh:  # 1 KB on disk, 20 MB of rows
        fh.write("t_s,temp_c,power_w\n" + "0,40,1\n" * 3_000_000)
    monkeypatch.setattr(trace, "MAX_TRACE_ROWS", 1000)
    with pytest.raises(InputFileError, match=r"bomb.csv.gz: more than 1,000 data rows"):
        trace.read_trace(bomb, "t_s", "temp_c", "power_w")
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(1001)) + "\n")
    with pytest.raises(InputFileError, match=r"wide.csv: 1,001 columns, more than the 1,000"):
        trace.read_trace(wide, "c0", "c1", "c2")
    ok = tmp_path / "ok.csv"
    ok.write_text("t_s,temp_c,power_w\n" + "".join(f"{i},{40 + i % 3},1\n" for i in range(1000)))
    assert len(trace.read_trace(ok, "t_s", "temp_c", "power_w").segments[0].times_s) == 1000


@pytest.mark.slow
def test_a_ten_million_row_mahimahi_trace_reads_in_bounded_memory(tmp_path):
    """Before: 9.5 GB for a 10^7-row trace read whole into Python lists."""
    trace = tmp_path / "long.up"
    with open(trace, "w") as fh:
        for start in range(0, 10_000_000, 100_000):
            fh.write("".join(f"{i // 10}\n" for i in range(start, start + 100_000)))
    code = ("from optimizer.hardware.bandwidth import read_trace\n"
            f"t = read_trace({str(trace)!r})\nassert len(t.opportunities_s) == 10_000_000")
    rc, err, peak = run_measured(tmp_path, code=code)
    assert rc == 0, err[-2000:]
    assert peak is not None and peak <= 1 * GB, peak


# ----------------------------------------------------------------------------------- npz members
@pytest.fixture(scope="module")
def npz_bomb(tmp_path_factory):
    """5 MB on disk declaring x [24414, 3, 64, 64] float32 (1.2 GB): the tiny network's input."""
    return write_npz_bomb(tmp_path_factory.mktemp("npz") / "bomb.npz", (24414, 3, 64, 64))


def test_npz_calibration_reads_only_the_samples_needed(tmp_path, npz_bomb, tiny_onnx):
    """Before: ``export --calib F.npz`` read every array whole, then kept ``--samples`` rows."""
    code = ("from optimizer.graph import load_graph\nfrom optimizer.plan.export import calibration_inputs\n"
            f"data, info = calibration_inputs(load_graph({str(tiny_onnx)!r}), {str(npz_bomb)!r}, 8, 0)\n"
            "assert data['x'].shape == (8, 3, 64, 64) and info.samples == 8")
    rc, err, peak = run_measured(tmp_path, code=code)
    assert rc == 0, err[-2000:]
    assert peak is not None and peak <= 1 * GB, peak


def test_quantize_calibration_unpacks_only_the_drawn_samples(tmp_path, npz_bomb):
    """Before: every member was unpacked into the work folder (1.2 GB here) before ``--samples``
    trimmed it."""
    from optimizer.quantize.calibration import InputSpec, load_calibration

    work = tmp_path / "work"
    cal = load_calibration(npz_bomb, [InputSpec("x", (3, 64, 64), "float32")], None, samples=64, heldout=16,
                           seed=0, workdir=work)
    written = sum(f.stat().st_size for f in work.rglob("*") if f.is_file())
    assert written <= 80 * 3 * 64 * 64 * 4 + 4096, written
    batch = cal.batch("calib", 0, 64)["x"]
    assert batch.shape == (64, 3, 64, 64) and not batch.any()


def test_npz_members_are_checked_by_their_headers(tmp_path):
    from optimizer.npyfile import npz_members, read_rows

    good = tmp_path / "good.npz"
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.savez_compressed(good, x=x)
    m = npz_members(good)["x"]
    assert m.shape == (6, 4) and np.array_equal(read_rows(good, m, [5, 0, 3]), x[[5, 0, 3]])
    objects = tmp_path / "objects.npz"
    np.savez(objects, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(Exception, match="holds Python objects"):
        npz_members(objects)


# ------------------------------------------------------------------------------------------- YAML
def test_a_yaml_alias_bomb_is_refused_in_bounded_memory(tmp_path):
    """Before: a 529-byte job of nested anchors expanded to 10^7 entries when validated (6 GB)."""
    job = write_yaml_bomb(tmp_path / "bomb.yaml", levels=7)
    assert job.stat().st_size < 600
    rc, err, peak = run_measured(tmp_path, "batch", "plan", str(job))
    line = _one_line(err)
    assert rc == 2 and "bomb.yaml: its aliases expand to" in line and "over the limit of 100,000" in line, line
    assert peak is not None and peak <= 1 * GB, peak


def test_yaml_with_a_few_aliases_still_reads(tmp_path):
    from optimizer.yamlio import read_yaml

    f = tmp_path / "ok.yaml"
    f.write_text("base: &b {a: 1, b: [1, 2, 3]}\nx: *b\ny: *b\n")
    data, _ = read_yaml(f)
    assert data["x"] == data["y"] == {"a": 1, "b": [1, 2, 3]}


# ------------------------------------------------------------------------------ shapes and frames
def test_a_huge_input_shape_is_warned_about_and_refused_where_it_would_be_held(run_cli, tmp_path, pipeline_plan):
    """Before: accepted silently; ``run`` then failed allocating 224 GiB (a traceback)."""
    from optimizer.graph.input_shapes import parse_input_shapes

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parse_input_shapes(["x:1,3,100000,100000"])
    assert any("30,000,000,000 elements per frame" in str(w.message) for w in caught)
    plan, art = pipeline_plan
    r = run_cli("export", plan, "--out", tmp_path / "art", "--input-shape", "x:1,3,100000,100000")
    error = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.exit_code == 2 and len(error) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "export: 1 frame(s) of x [1, 3, 100000, 100000] float32 (120.00 GB each) needs" in error[0], error
    assert "memory available on this host; give a smaller --input-shape" in error[0]
    assert not (tmp_path / "art").exists()


def test_run_frames_times_frame_bytes_must_fit(monkeypatch, pipeline_plan):
    from optimizer import memory
    from optimizer.plan.manifest import read_manifest
    from optimizer.runtime import input_frames

    plan, art = pipeline_plan
    monkeypatch.setattr(memory, "available_bytes", lambda: 10 * 3 * 64 * 64 * 4)
    manifest = read_manifest(art)
    assert input_frames(manifest, None, 10)["x"].shape == (10, 3, 64, 64)
    with pytest.raises(ConfigError, match=r"^--frames: 11 frame\(s\) of x \[1, 3, 64, 64\] float32 .* needs "
                                          r".*; give fewer --frames"):
        input_frames(manifest, None, 11)


@pytest.fixture(scope="module")
def pipeline_plan(tmp_path_factory, tiny_onnx):
    return export_tiny_pipeline(tmp_path_factory.mktemp("limits"), tiny_onnx)


# ------------------------------------------------------------------------------ batch job fields
@pytest.mark.parametrize("settings, message", [
    ("{solvers: [ga], settings: {population: 100000}}", "settings.population 100000: out of range; a map task "
                                                        "accepts it in [2, 10000], as 'dnnplan map --population'"),
    ("{solvers: [ga], settings: {max_generations: 10000000}}", "settings.max_generations 1e+07: out of range"),
])
def test_batch_solver_settings_are_bounded_like_the_flags(tmp_path, tiny_onnx, run_cli, settings, message):
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\ngrid:\n  models: [{tiny_onnx}]\n  devices: [pixel6]\n  map: {settings}\n")
    r = run_cli("batch", "plan", job)
    assert r.exit_code == 2 and message in _one_line(r.stderr), r.stderr


def test_a_job_of_too_many_tasks_is_refused_before_expanding(tmp_path, run_cli):
    """2 models x 2 devices x 4000 seeds x (6 map + 2 split searches): 128,000 tasks."""
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\ngrid:\n  models: [mobilenet_v2, alexnet]\n  devices: [pixel6, pixel4]\n"
                   f"  seeds: {list(range(4000))}\n"
                   "  map: {solvers: [ga, exact], objectives: [[throughput], [energy], [latency]]}\n"
                   "  split: {networks: [wifi_10], solvers: [nsga2, exact]}\n")
    r = run_cli("batch", "plan", job)
    assert r.exit_code == 2 and "expands to 128,000 tasks, over the 100,000 one job may hold" in _one_line(r.stderr)


@pytest.mark.parametrize("field, value, message", [
    ("processors", "[cpu, quantum]", "unknown processor 'quantum'"),
    ("accuracy_data", "/nonexistent/labels.npz", "no such labelled data file"),
])
def test_every_split_task_field_is_checked_at_plan_time(tmp_path, tiny_onnx, run_cli, field, value, message):
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\ndefaults: {{{field}: {value}}}\ngrid:\n  models: [{tiny_onnx}]\n  devices: [galaxy_j6]\n"
                   "  split: {networks: [wifi_10], solvers: [exact]}\n")
    r = run_cli("batch", "plan", job)
    assert r.exit_code == 2 and message in _one_line(r.stderr), r.stderr
