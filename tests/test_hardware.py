"""Hardware files: every shipped device/link/server loads, units parse, bad files fail clearly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from optimizer.errors import InputFileError, SchemaError, UnknownNameError
from optimizer.shipped import shipped_root
from optimizer.hardware import (
    device_names,
    link_names,
    load_device,
    load_link,
    load_server,
    parse_quantity,
    server_names,
)

DEVICES = ["pixel4", "galaxy_s20", "pixel6", "galaxy_s22", "galaxy_j6", "redmi_note8", "jetson_nano",
           "raspberry_pi4", "host"]
THERMAL = {"pixel4", "galaxy_s20", "pixel6", "galaxy_s22", "jetson_nano", "raspberry_pi4"}


def test_shipped_names():
    assert set(DEVICES) <= set(device_names())
    assert {"wifi_249", "wifi_128", "wifi_13", "wifi_10", "lte"} <= set(link_names())
    assert {"smartsplit_i5", "gpu_server"} <= set(server_names())


@pytest.mark.parametrize("name", DEVICES)
def test_devices_load_with_sources(name):
    dev = load_device(name)
    assert dev.name == name
    assert dev.processors[dev.fallback_index].kind == "cpu"
    assert (dev.thermal == name) == (name in THERMAL)
    assert dev.source and dev.handoff.source
    for p in dev.processors:
        assert p.name.startswith(p.kind)
        assert p.source and p.power.source
        assert p.clock_levels_hz == sorted(p.clock_levels_hz)
        assert p.supports("conv", "int8") or p.kind in ("cloud",)
        assert p.power_w() > p.power_w(p.clock_levels_hz[0]) or len(p.clock_levels_hz) == 1
    lat, spb, jpb = dev.handoff_matrices()
    assert np.allclose(np.diag(lat), 0) and np.allclose(lat, lat.T) and np.allclose(spb, spb.T)


def test_processor_sets_match_the_papers():
    assert load_device("pixel6").processor_names == ("cpu", "gpu", "tpu")
    assert load_device("galaxy_s22").processor_names == ("cpu", "gpu", "dsp")
    assert load_device("pixel4").processor_names == ("cpu", "gpu", "dsp", "npu")
    nano = load_device("jetson_nano")
    assert nano.processor("cpu").max_clock_hz == pytest.approx(1.479e9)
    assert nano.processor("gpu").max_clock_hz == pytest.approx(921.6e6)
    i5 = load_server("smartsplit_i5")
    assert i5.processors[0].kind == "cloud" and i5.processors[0].cores == 4
    assert i5.processors[0].max_clock_hz == pytest.approx(1.6e9) and i5.memory_bytes == 8e9


def test_units():
    assert parse_quantity("2.84 GHz", "frequency") == pytest.approx(2.84e9)
    assert parse_quantity("10 Mbps", "bitrate") == 1e7
    assert parse_quantity("4 GB", "bytes") == 4e9
    assert parse_quantity("4 GiB", "bytes") == 4 * 2**30
    assert parse_quantity("283.17 mW/Mbps", "power_per_bitrate") == pytest.approx(283.17e-3 / 1e6)
    assert parse_quantity("5 ms", "time") == pytest.approx(5e-3)
    assert parse_quantity("4 TOPS", "macrate") == 2e12
    assert parse_quantity(0.25, "time") == 0.25
    with pytest.raises(ValueError, match="unknown frequency unit 'GZ'"):
        parse_quantity("2 GZ", "frequency")
    with pytest.raises(ValueError, match="cannot parse"):
        parse_quantity("fast", "frequency")


def test_huang_radio_model_and_link_times():
    link = load_link("wifi_10")
    nbytes = 1_000_000
    t = nbytes * 8 / 10e6
    assert link.upload_s(nbytes) == pytest.approx(t)
    # (alpha_u * tau_u + beta) * I / B with tau = 10 Mbps (docs/METHODS.md section 3)
    assert link.upload_j(nbytes) == pytest.approx((283.17e-3 * 10 + 132.86e-3) * t)
    assert link.download_j(nbytes) == pytest.approx((137.01e-3 * 10 + 132.86e-3) * t)
    assert link.round_trip_s(nbytes, 0) == pytest.approx(link.rtt_s + t)
    lte = load_link("lte")
    assert lte.uplink_bps < lte.downlink_bps
    arr = link.upload_s(np.array([0.0, 1e6]))
    assert arr.shape == (2,) and arr[1] == pytest.approx(t)


def test_power_model_forms():
    cpu = load_device("pixel4").processor("cpu")
    fmax = cpu.max_clock_hz
    assert cpu.power_w(fmax) == pytest.approx(0.25 + 4.2)
    assert cpu.power_w(fmax / 2) == pytest.approx(0.25 + 4.2 / 8)


# --------------------------------------------------------------------------- bad input
def _write(tmp_path: Path, name: str, mutate) -> Path:
    src = shipped_root() / "devices" / "pixel4.yaml"
    doc = yaml.safe_load(src.read_text())
    mutate(doc)
    out = tmp_path / name
    out.write_text(yaml.safe_dump(doc))
    return out


def test_missing_field_names_file_and_field(tmp_path):
    path = _write(tmp_path, "nocores.yaml", lambda d: d["processors"][1].pop("cores"))
    with pytest.raises(SchemaError) as exc:
        load_device(path)
    assert str(path) in str(exc.value) and "processors[1].cores" in str(exc.value) and "missing" in str(exc.value)


def test_negative_field_names_file_and_field(tmp_path):
    path = _write(tmp_path, "neg.yaml", lambda d: d.__setitem__("idle_power", "-0.5 W"))
    with pytest.raises(SchemaError, match=r"neg.yaml line \d+: field 'idle_power': .*greater than or equal to 0"):
        load_device(path)


def test_unparsable_unit_names_field(tmp_path):
    path = _write(tmp_path, "unit.yaml", lambda d: d["processors"][0].__setitem__("clock_levels", ["2.8 GZ"]))
    with pytest.raises(SchemaError, match=r"field 'processors\[0\].clock_levels\[0\]': unknown frequency unit 'GZ'"):
        load_device(path)


def test_unknown_key_and_bad_processor_name(tmp_path):
    path = _write(tmp_path, "extra.yaml", lambda d: d["processors"][0].__setitem__("turbo", True))
    with pytest.raises(SchemaError, match=r"'processors\[0\].turbo' is not allowed"):
        load_device(path)
    path = _write(tmp_path, "kind.yaml", lambda d: d["processors"][1].__setitem__("name", "graphics"))
    with pytest.raises(SchemaError, match="must equal or start with its kind 'gpu'"):
        load_device(path)
    path = _write(tmp_path, "pair.yaml", lambda d: d["handoff"]["pairs"][0].__setitem__("between", ["cpu", "tpu"]))
    with pytest.raises(SchemaError, match="unknown processor 'tpu'"):
        load_device(path)


def test_unknown_names_list_valid_ones(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown device 'pixel5'.*pixel4"):
        load_device("pixel5")
    with pytest.raises(UnknownNameError, match="unknown network 'wifi_11'.*wifi_10"):
        load_link("wifi_11")
    with pytest.raises(UnknownNameError, match="unknown processor 'tpu'.*npu"):
        load_device("pixel4").processor("tpu")
    with pytest.raises(InputFileError):
        load_device(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SchemaError, match=r"bad.yaml line \d+ column \d+: malformed YAML"):
        load_device(bad)
