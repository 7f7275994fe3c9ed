"""The cost-backend registry: every backend listed and built through one interface; measured and
learned tables are built without the analytic latency model; options are checked. The ``toy`` device
and each backend's ``options`` are fixtures of ``tests/conftest.py`` (the contract suite uses them too)."""

from __future__ import annotations

import numpy as np
import pytest
from test_cost import chain_graph

from optimizer.cost import backend_names, build_cost_table, register_backend
from optimizer.cost.backends import BackendCosts, backend_options, get_backend
from optimizer.errors import ConfigError, UnknownNameError


def test_registry_lists_every_backend_and_each_builds_a_table(toy, options):
    g, ref, opts = options
    assert backend_names() == ["analytic", "learned", "measured", "predicted"]
    assert backend_options("measured") == ["table"] and backend_options("learned") == ["model"]
    assert backend_options("analytic") == [] and backend_options("predicted") == []
    for name in backend_names():
        ct = build_cost_table(g, toy, "fp32", name, **opts[name])
        assert ct.backend == name and ct.latency_s.shape == ct.energy_j.shape == (len(g), 2)
        assert np.all(ct.latency_s >= 0) and np.all(ct.whole_network_latency() > 0) and np.all(np.isfinite(ct.energy_j))
        assert np.array_equal(ct.supported, ref.supported)
        assert np.array_equal(ct.active_power_w, ref.active_power_w) and ct.meta["clock_hz"] == ref.meta["clock_hz"]
    assert np.allclose(build_cost_table(g, toy, "fp32", "measured", **opts["measured"]).latency_s, ref.latency_s)


def test_measured_and_learned_do_not_run_the_analytic_model(toy, options, monkeypatch):
    g, _, opts = options
    from optimizer.cost import analytic

    def refuse(*args, **kwargs):
        raise AssertionError("the analytic latency model ran")

    monkeypatch.setattr(analytic, "native_latency", refuse)
    slow = {"gpu": 250e6}
    for name in ("measured", "learned"):
        ct = build_cost_table(g, toy, "fp32", name, clock_hz=slow, **opts[name])
        full = build_cost_table(g, toy, "fp32", name, **opts[name])
        assert np.allclose(ct.latency_s[:, 1], 2 * full.latency_s[:, 1])  # f_max / f scaling
        assert np.allclose(ct.latency_s[:, 0], full.latency_s[:, 0])
    with pytest.raises(AssertionError, match="analytic latency model ran"):
        build_cost_table(g, toy, "fp32")


def test_options_are_checked_and_unknown_backends_named(toy, options):
    g, _, opts = options
    with pytest.raises(ConfigError, match="cost backend 'analytic': unknown option 'table'; valid: \\(none\\)"):
        build_cost_table(g, toy, "fp32", "analytic", table=opts["measured"]["table"])
    with pytest.raises(ConfigError, match="cost backend 'learned': unknown option 'table'; valid: model"):
        build_cost_table(g, toy, "fp32", "learned", table=opts["measured"]["table"])
    with pytest.raises(ConfigError, match="measured backend needs a table"):
        build_cost_table(g, toy, "fp32", "measured")
    with pytest.raises(UnknownNameError, match="unknown cost backend 'magic'; valid: analytic, learned, measured"):
        build_cost_table(g, toy, "fp32", "magic")


def test_a_registered_backend_is_used_by_name(toy, monkeypatch):
    from optimizer.cost import backends

    monkeypatch.setattr(backends, "_REGISTRY", dict(backends._REGISTRY))
    analytic = get_backend("analytic")

    def doubled(inputs, *, factor=2.0):
        base = analytic(inputs)
        return BackendCosts(base.latency_s * factor, base.energy_j * factor, base.supported, meta={"factor": factor})

    register_backend("doubled", doubled)
    assert "doubled" in backend_names()
    g = chain_graph(5)
    ct = build_cost_table(g, toy, "int8", "doubled")
    assert ct.backend == "doubled" and ct.meta["factor"] == 2.0
    assert np.allclose(ct.latency_s, 2 * build_cost_table(g, toy, "int8").latency_s)
    with pytest.raises(ValueError, match="must look like 'package.module:function'"):
        register_backend("bad", "no_colon")
