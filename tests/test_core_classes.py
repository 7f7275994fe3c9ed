"""Efficiency per (core microarchitecture, runtime), shared across devices:
CPU clusters in the device schema, the shared core table, and the ``calibrate --report`` rows
that hold devices of one class and runtime to one rate per core*GHz."""

from __future__ import annotations

import pytest
import yaml

from optimizer.cost import build_cost_table
from optimizer.errors import SchemaError, UnknownNameError
from optimizer.hardware import device_names, load_device
from optimizer.hardware.cores import CoreTable, core_efficiency, core_rates, family_scales, load_core_table
from optimizer.graph.layergraph import OP_FAMILIES
from optimizer.hardware.schema import CORE_CLASSES
from optimizer.report import fidelity
from optimizer.shipped import shipped_root


def _j6_spec() -> dict:
    return yaml.safe_load((shipped_root() / "devices" / "galaxy_j6.yaml").read_text())


def _write(tmp_path, spec, name="dev.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(spec))
    return p


def test_unknown_core_class_is_one_line_naming_file_field_value_and_classes(tmp_path):
    spec = _j6_spec()
    spec["processors"][0]["clusters"] = [{"core": "A99", "count": 8, "clock": "1586 MHz"}]
    path = _write(tmp_path, spec)
    with pytest.raises(SchemaError) as err:
        load_device(path)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and "clusters" in msg and "'A99'" in msg
    assert all(c in msg for c in CORE_CLASSES)


@pytest.mark.parametrize("clusters, needle", [
    ([{"core": "A53", "count": 4, "clock": "1586 MHz"}], "clusters hold 4 cores but cores is 8"),
    ([{"core": "A53", "count": 0, "clock": "1586 MHz"}, {"core": "A53", "count": 8, "clock": "1 GHz"}], "count"),
    ([{"core": "A53", "count": 8, "clock": "2.2 GHz"}], "above the processor's highest clock level"),
])
def test_bad_cluster_counts_and_clocks_are_rejected(tmp_path, clusters, needle):
    spec = _j6_spec()
    spec["processors"][0]["clusters"] = clusters
    with pytest.raises(SchemaError, match=needle):
        load_device(_write(tmp_path, spec))


def test_kryo_names_map_to_arm_classes():
    cpu = load_device("redmi_note8").processor("cpu")
    assert [(c.core, c.count) for c in cpu.clusters] == [("A73", 4), ("A53", 4)]


def test_every_shipped_cpu_declares_clusters_and_the_table_rates_them():
    table = load_core_table()
    rated = 0
    for name in device_names():
        dev = load_device(name)
        for p in dev.processors:
            if p.kind != "cpu":
                continue
            assert p.clusters, f"{name}.{p.name} declares no clusters"
            for rt in table.runtimes:
                if rt not in dev.runtimes:
                    continue
                rates = core_rates(p, rt, "fp32", p.efficiency)
                assert rates is not None and all(v > 0 for v in rates.values())
                rated += 1
    assert rated >= 4  # the A53, A57, A72 and A73 devices under the PyTorch kernels
    for name, rt in (("galaxy_j6", "pytorch_mobile_fp32"), ("redmi_note8", "pytorch_mobile_fp32"),
                     ("jetson_nano", "pytorch"), ("raspberry_pi4", "pytorch")):
        assert rt in load_device(name).runtimes


def test_a_runtime_the_table_cannot_rate_is_refused_by_name():
    dev = load_device("pixel6")  # X1 + A76: no published PyTorch rate for them
    assert "pytorch_mobile_fp32" not in dev.runtimes
    with pytest.raises(UnknownNameError, match="pytorch_mobile_fp32"):
        dev.check_runtime("pytorch_mobile_fp32")


def test_class_rates_compose_with_the_device_efficiency_shape():
    table = load_core_table()
    a57, a53 = table.class_rates("pytorch", "A57")["fp32"], table.class_rates("pytorch_mobile_fp32", "A53")["fp32"]
    ratio = table.runtimes["pytorch"].classes["A53"].ratio
    assert ratio is not None and 0.49 <= ratio <= 0.85
    assert a53["conv"] == pytest.approx(ratio * a57["conv"]) and a53["dense"] == pytest.approx(ratio * a57["dense"])
    cpu = load_device("galaxy_j6").processor("cpu")
    eff = core_efficiency(cpu, "pytorch_mobile_fp32", "fp32", cpu.efficiency)
    cycles = 8 * 1.586e9 / cpu.peak_macs_per_s["fp32"]  # core*cycles per second over peak MAC/s
    assert eff["conv"] == pytest.approx(a53["conv"] * cycles)
    assert eff["dense"] == pytest.approx(a53["dense"] * cycles)
    # dwconv is not in the table: the device table's dwconv/default ratio (0.12/0.2) is kept
    assert eff["dwconv"] / eff["default"] == pytest.approx(cpu.efficiency["dwconv"] / cpu.efficiency["default"])
    # the cost backends apply it as a factor per op family on the device's efficiency
    scale = family_scales(cpu, "pytorch_mobile_fp32", "fp32")
    for i, f in enumerate(OP_FAMILIES):
        assert cpu.op_efficiency(f, "pytorch_mobile_fp32") * scale[i] == pytest.approx(eff[f])
    # the default runtime (tflite) is not in the table: the device's own efficiencies
    assert (family_scales(cpu, None, "fp32") == 1).all()


def test_override_keeps_a_devices_sourced_efficiency(tmp_path):
    spec = _j6_spec()
    spec["processors"][0]["runtimes"] = {"pytorch_mobile_fp32": {
        "efficiency": {"default": 0.1, "conv": 0.5}, "override": "measured on this phone", "source": "test"}}
    cpu = load_device(_write(tmp_path, spec)).processor("cpu")
    assert cpu.op_efficiency("conv", "pytorch_mobile_fp32") == 0.5
    assert (family_scales(cpu, "pytorch_mobile_fp32", "fp32") == 1).all()


def test_core_table_rejects_unknown_classes_and_broken_chains():
    ok = {"source": "t", "runtimes": {"r": {"source": "t", "classes": {
        "A57": {"rates": {"fp32": {"default": 1.0}}, "source": "t"},
        "A53": {"like": "A57", "ratio": 0.5, "source": "t"}}}}}
    assert CoreTable.model_validate(ok).class_rates("r", "A53") == {"fp32": {"default": 0.5}}
    bad = yaml.safe_load(yaml.safe_dump(ok))
    bad["runtimes"]["r"]["classes"]["A99"] = {"like": "A57", "ratio": 1.0, "source": "t"}
    with pytest.raises(ValueError, match="unknown core class 'A99'"):
        CoreTable.model_validate(bad)
    bad = yaml.safe_load(yaml.safe_dump(ok))
    bad["runtimes"]["r"]["classes"]["A72"] = {"like": "A73", "ratio": 1.0, "source": "t"}
    with pytest.raises(ValueError, match="does not rate"):
        CoreTable.model_validate(bad)


def test_a53_phone_is_slower_per_core_ghz_than_the_jetson_a57():
    """Core classes keep galaxy_j6's A53 slower per core·GHz than the Jetson's A57 (a per-device fit had made
    it 7x faster)."""
    def per_core_ghz_s(dev, rt, clock):
        from optimizer.graph import load_graph

        ct = build_cost_table(load_graph("alexnet", "op"), load_device(dev), "fp32",
                              clock_hz={"cpu": clock} if clock else None, runtime=rt)
        cpu = load_device(dev).processor("cpu")
        return ct.whole_network_latency()[ct.processor_index("cpu")] * cpu.cores * (clock or cpu.max_clock_hz) / 1e9

    j6 = per_core_ghz_s("galaxy_j6", "pytorch_mobile_fp32", None)
    nano = per_core_ghz_s("jetson_nano", None, 1.05e9)
    assert 1 / 0.85 <= j6 / nano <= 1 / 0.49  # an A53 needs more core*GHz than an A57, within the sourced ratio


@pytest.fixture
def user_spaces(tmp_path, monkeypatch):
    """A user search-spaces folder (``$DNNPLAN_SEARCH_SPACES``) and fresh fidelity caches."""
    (tmp_path / "devices").mkdir()
    monkeypatch.setenv("DNNPLAN_SEARCH_SPACES", str(tmp_path))
    fidelity._table.cache_clear()
    yield tmp_path
    fidelity._table.cache_clear()


def test_core_class_rows_pass_on_the_shipped_devices():
    rows = fidelity.core_class_facts(fidelity.read_published())
    labels = [r.fact for r in rows]
    assert any(lab.startswith("A53 under") for lab in labels) and any(lab.startswith("A53 / A57") for lab in labels)
    assert all(r.passed for r in rows), [(r.fact, r.detail) for r in rows if not r.passed]


def test_core_class_rows_fail_when_a_device_declares_the_wrong_class(user_spaces):
    spec = _j6_spec()
    spec["processors"][0]["clusters"] = [{"core": "A73", "count": 8, "clock": "1586 MHz"}]
    _write(user_spaces / "devices", spec, "galaxy_j6.yaml")
    rows = {r.fact.split(":")[0]: r for r in fidelity.core_class_facts(fidelity.read_published())}
    same = next(r for k, r in rows.items() if k.startswith("A53 under"))
    per_clock = next(r for k, r in rows.items() if k.startswith("A53 / A57"))
    assert not same.passed and not per_clock.passed
    rates = fidelity.core_class_rates(fidelity.read_published())
    assert rates["galaxy_j6"]["A53"]["alexnet"] > 1.3 * rates["redmi_note8"]["A53"]["alexnet"]


def test_core_class_rows_need_a_published_range_for_every_listed_core(tmp_path):
    data = fidelity.read_published()
    data["core_classes"]["devices"][1]["cores"] = [{"core": "X1", "count": 8, "clock": "1586 MHz"}]
    with pytest.raises(SchemaError, match="per_clock has no range for 'X1'"):
        fidelity.core_class_facts(data)


def test_core_table_ships_in_the_package_data():
    assert (shipped_root() / "calibration" / "cores.yaml").is_file()
