"""``dnnplan calibrate``'s typed requests: the mode chosen from the options, the options of another
mode refused, values checked before any work, errors in the caller's words."""

import pytest

from optimizer.cli.calibrate import OPTIONS
from optimizer.errors import ConfigError
from optimizer.workflow import (
    FidelityReportRequest,
    ProbeRequest,
    ProfileFitRequest,
    parse_calibrate_request,
)


def test_the_mode_follows_the_options_given():
    probe = parse_calibrate_request({"device": "host", "probes": 8, "families": "conv1x1, eltwise",
                                     "networks": "mobilenet_v2"})
    assert isinstance(probe, ProbeRequest)
    assert probe.families == ("conv1x1", "eltwise") and probe.networks == ("mobilenet_v2",)
    assert probe.settings.runner == "litert" and probe.settings.threads == 1
    fit = parse_calibrate_request({"device": "host", "profiles": ["a.json", "b.json"], "models": ["mobilenet_v2"],
                                   "input_shape": ["x:1,3,64,64"], "runner": "litert"})  # at its default: fine
    assert isinstance(fit, ProfileFitRequest)
    assert fit.model_of_each_profile == ["mobilenet_v2", "mobilenet_v2"] and fit.input_shape == {"x": (1, 3, 64, 64)}
    report = parse_calibrate_request({"report": True, "pipeline": False})
    assert isinstance(report, FidelityReportRequest) and not report.pipeline and not report.strict


@pytest.mark.parametrize("options, message", [
    ({"probes": 4, "profiles": ["p.json"]}, "calibrate: probes/networks cannot be combined with profiles or report"),
    ({"networks": "mobilenet_v2", "report": True}, "cannot be combined with profiles or report"),
    ({"device": "host"}, "calibrate device is only used with profiles FILE"),
    ({}, "calibrate: give report, or device D profiles FILE models M [out D.yaml]"),
    ({"profiles": ["p.json"], "models": ["m"]}, "profiles needs device D"),
    ({"device": "host", "profiles": ["p.json"]}, "profiles needs models M"),
    ({"device": "host", "profiles": ["a", "b", "c"], "models": ["m", "n"]},
     "give one models for all profiles or one per profiles (got 2 models for 3 profiles)"),
    ({"device": "host", "profiles": ["p"], "models": ["m"], "dtype": "int4"}, "dtype 'int4' is not valid"),
    ({"device": "host", "profiles": ["p"], "models": ["m"], "out": "d.txt"}, "out 'd.txt': the fitted device is a .yaml"),
    ({"probes": 4}, "probes/networks need device D"),
    ({"device": "host", "profiles": ["p"], "models": ["m"], "runner": "adb"},
     "calibrate: runner 'adb' goes with probes/networks, not with profiles; leave it out"),
    ({"device": "host", "probes": 4, "input_shape": ["x:1,3,8,8"]},
     "calibrate: input_shape ['x:1,3,8,8'] goes with profiles, not with probes/networks"),
    ({"report": True, "threads": 2}, "calibrate: threads 2 goes with probes/networks, not with report"),
    ({"device": "host", "probes": 4, "dtype": "fp16"}, "dtype 'fp16': probes and validation run at fp32 or int8"),
    ({"device": "host", "probes": 0}, "probes 0: give a positive number of probes"),
    ({"device": "host", "probes": 4, "families": "conv1x1,dwconv_s3"}, "'dwconv_s3' is not a kernel family"),
])
def test_a_bad_request_is_one_line_naming_the_field(options, message):
    with pytest.raises(ConfigError) as err:
        parse_calibrate_request(options)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_cli_labels_name_the_options():
    with pytest.raises(ConfigError, match="^calibrate: --probes/--validate cannot be combined with --from-profile or "
                                          "--report$"):
        parse_calibrate_request({"probes": 4, "report": True}, labels=OPTIONS)
    with pytest.raises(ConfigError, match="^calibrate --input-shape is only used with --from-profile FILE$"):
        parse_calibrate_request({"report": True, "input_shape": ["x:1,3,8,8"]}, labels=OPTIONS)
    with pytest.raises(ConfigError, match="^--from-profile needs --model M"):
        parse_calibrate_request({"device": "host", "profiles": ["p.json"]}, labels=OPTIONS)


def test_a_request_is_frozen_and_refuses_unknown_fields():
    with pytest.raises(ConfigError, match="unknown field 'runner'"):
        from optimizer.workflow import parse_request

        parse_request(ProfileFitRequest, {"device": "host", "profiles": ["p"], "models": ["m"], "runner": "adb"})
