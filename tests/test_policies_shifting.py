"""Play It Cool dynamic model shifting."""

from __future__ import annotations

import json

import pytest

from optimizer.errors import UnknownNameError
from optimizer.thermal.policies.shifting import compare_shifting, run_shifting, shift_setup


@pytest.fixture(scope="module")
def phone():
    return shift_setup("pixel4", "slimmable_resnet50")


def test_shift_setup_takes_play_it_cools_published_limits(phone):
    assert (phone.t_lim_c, phone.g_lim) == (73.0, -0.07)
    assert phone.latency_s[0] > 3 * phone.latency_s[1]
    rpi = shift_setup("raspberry_pi4", "slimmable_resnet50", fps=1.0)
    assert (rpi.t_lim_c, rpi.g_lim) == (77.0, -0.02)


def test_shifting_avoids_throttling_for_an_hour(phone):
    res = compare_shifting(phone, duration_s=3600.0)
    sh, large, small = res["shift"], res["large"], res["small"]
    assert large.throttle_events > 0                       # the large model alone throttles
    assert sh.throttle_events == 0 and sh.time_to_first_throttle_s is None
    assert sh.mean_latency_s < large.mean_latency_s
    assert sh.switches >= 2
    assert 0.0 < sh.time_share["large"] < 1.0 and sh.time_share["small"] > 0.0
    assert small.accuracy_score < sh.accuracy_score < large.accuracy_score
    assert sh.peak_cpu_c < large.peak_cpu_c


def test_reload_cost_counts(phone):
    from dataclasses import replace

    free = run_shifting(replace(phone, reload_s=0.0), "shift", duration_s=1200.0)
    paid = run_shifting(phone, "shift", duration_s=1200.0)
    assert free.time_share["reload"] == 0.0 and paid.time_share["reload"] > 0.0


def test_unknown_model_or_mode_is_refused_by_name():
    with pytest.raises(UnknownNameError, match="slimmable_resnet50"):
        shift_setup("pixel4", "alexnet")
    with pytest.raises(UnknownNameError, match="shift"):
        run_shifting(shift_setup("pixel4", "slimmable_resnet50"), "medium")


def test_shift_command_compares_shifting_with_both_fixed_variants(run_cli):
    r = run_cli("shift", "slimmable_resnet50", "--device", "pixel4", "--duration", "600", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["runs"]) == {"shift", "large", "small"}
    assert out["setup"]["t_lim_c"] == 73.0
