"""Bounds and out-of-order traces: size flags have documented upper bounds checked
before any work, and a trace whose time steps back without a clock reset is refused naming the row."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optimizer.cli.bounds import BOUNDS, check_bound
from optimizer.errors import ConfigError, InputFileError
from optimizer.thermal.trace import read_trace

HEADER = "t_s,temp_a_c,temp_b_c,p_w"


def _csv(tmp_path, times, name="t.csv"):
    rows = [f"{t},{30 + 0.01 * i},{31 + 0.005 * i},{1.0 + 0.1 * (i % 3)}" for i, t in enumerate(times)]
    p = tmp_path / name
    p.write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    return p


# -- out-of-order time ----------------------------------------------------------------------------
def test_reset_to_the_recordings_start_is_a_new_recording(tmp_path):
    """A step back to at most one step after the current recording's first time is a clock reset."""
    times = [0, 1, 2, 3, 4, 0.5, 1.5, 2.5, 3.5, 0, 1, 2]
    tr = read_trace(_csv(tmp_path, times), "t_s", "temp_*_c", "p_w")
    assert tr.breaks["resets"] == 2 and [len(s) for s in tr.segments] == [5, 4, 3]


@pytest.mark.parametrize("times, row, how", [
    ([0, 1, 2, 3, 4, 2.5, 6, 7], 6, "goes back from 4 to 2.5 s"),       # a swapped/merged row
    ([0, 1, 2, 3, 3, 4, 5], 5, "stands still at 3 s"),                    # a duplicated row
    ([0, 1, 2, 3, 0, 1, 2, 1.5, 3], 8, "goes back from 2 to 1.5 s"),      # out of order after a reset
])
def test_step_back_that_is_not_a_reset_is_refused_naming_the_row(tmp_path, times, row, how):
    with pytest.raises(InputFileError, match=rf"row {row} \(line {row + 1}\): time column 't_s' {how}: not a clock "
                                             r"reset .*sort the file by time"):
        read_trace(_csv(tmp_path, times), "t_s", "temp_*_c", "p_w")


def test_shuffled_trace_is_refused_by_fit_and_eval(run_cli, tmp_path):
    """Before: ``thermal fit`` crashed in ``_decimate`` (cannot reshape array of size 0) and
    ``thermal eval`` scored hundreds of 2-row segments at a nonsense step."""
    times = np.arange(2000) * 0.5
    good = _csv(tmp_path, times, "good.csv")
    shuffled = _csv(tmp_path, np.random.default_rng(0).permutation(times), "shuffled.csv")
    model = tmp_path / "m.json"
    r = run_cli("thermal", "fit", good, "--time", "t_s", "--temps", "temp_*_c", "--inputs", "p_w", "--out", model)
    assert r.exit_code == 0, r.stderr
    bad_out = tmp_path / "bad.json"
    for args in (("thermal", "fit", shuffled, "--time", "t_s", "--temps", "temp_*_c", "--inputs", "p_w",
                  "--out", bad_out),
                 ("thermal", "eval", model, shuffled)):
        r = run_cli(*args)
        assert r.exit_code == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "not a clock reset" in r.stderr
        assert "shuffled.csv: row " in r.stderr
    assert not bad_out.exists()


def test_eval_horizon_longer_than_any_segment_is_refused(run_cli, tmp_path):
    good = _csv(tmp_path, np.arange(300) * 1.0, "good.csv")
    model = tmp_path / "m.json"
    assert run_cli("thermal", "fit", good, "--time", "t_s", "--temps", "temp_*_c", "--inputs", "p_w",
                   "--out", model).exit_code == 0
    for h, what in (("1000", "1000 steps, longer than the trace's longest segment (299 steps"),
                    ("1e400s", "is not a step count")):
        r = run_cli("thermal", "eval", model, good, "--horizons", f"1,{h}")
        assert r.exit_code == 2 and what in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert run_cli("thermal", "eval", model, good, "--horizons", "1,299").exit_code == 0


# -- size flags -----------------------------------------------------------------------------------
def test_bound_table(tmp_path):
    for (cmd, flag), b in BOUNDS.items():
        assert b.low < b.high and math.isfinite(b.high), (cmd, flag)
        check_bound(cmd, flag, b.high)                           # the bound itself is accepted
        for bad in (b.high * 1.5 + 1, math.nan, math.inf, b.low - 1):
            with pytest.raises(ConfigError, match=rf"^{flag} .*: out of range; dnnplan {cmd} accepts {flag} in "):
                check_bound(cmd, flag, bad)
        if not b.low_inclusive:
            with pytest.raises(ConfigError):
                check_bound(cmd, flag, b.low)


def _args(cmd: str, tmp_path) -> list[str]:
    """The command's required arguments (the files need not exist: bounds are checked first)."""
    plan, out = str(tmp_path / "plan.json"), str(tmp_path / "out")
    return {"simulate": ["simulate", plan], "schedule": ["schedule", "person_finder"], "shift": ["shift"],
            "tadf": ["tadf", "alexnet"], "run": ["run", plan, "--artifacts", out],
            "quantize": ["quantize", "mobilenet_v2", "--out", out + ".tflite"],
            "export": ["export", plan, "--out", out], "map": ["map", "mobilenet_v2"],
            "split": ["split", "mobilenet_v2"], "measure": ["measure", "mobilenet_v2"]}[cmd]


@pytest.mark.parametrize("cmd, flag", sorted(BOUNDS))
def test_every_bounded_flag_is_refused_up_front(run_cli, tmp_path, cmd, flag):
    """Above its bound, every flag is one line naming the flag and the range, exit 2, before the
    command reads a file or profiles anything (the plan files here do not exist)."""
    too_big = int(BOUNDS[cmd, flag].high * 10 + 1)
    r = run_cli(*_args(cmd, tmp_path), flag, str(too_big))
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{flag} {too_big:g}: out of range; dnnplan {cmd} accepts {flag} in" in lines[0]
    assert not list(tmp_path.iterdir())


def test_simulate_huge_duration_and_schedule_zero_fps_are_refused_before_work(run_cli, tmp_path):
    r = run_cli("simulate", tmp_path / "missing.json", "--duration", "1e12")
    assert r.exit_code == 2 and "--duration 1e+12: out of range; dnnplan simulate accepts --duration in (0, 604800] s" \
        in r.stderr, r.stderr
    for fps in ("0", "-5", "nan"):
        r = run_cli("schedule", "person_finder", "--fps", fps)
        assert r.exit_code == 2 and f"--fps {float(fps):g}: out of range" in r.stderr, r.stderr
        assert "profiling" not in r.stderr       # refused before the ~7 s of profiling
