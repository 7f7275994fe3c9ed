"""notebooks/pareto_front.ipynb executes top to bottom (nbclient) and shows what it claims."""

from __future__ import annotations

import base64
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "pareto_front.ipynb"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook executed in a kernel running this very interpreter (the venv's)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    # a kernelspec pointing at sys.executable, found through JUPYTER_PATH: no install needed and
    # no chance of picking another Python's kernel
    jupyter = tmp_path_factory.mktemp("jupyter")
    spec = jupyter / "kernels" / "dnnplan-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "dnnplan test", "language": "python"}))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(jupyter))
    mp.setenv("MPLBACKEND", "Agg")
    try:
        nb = nbformat.read(NOTEBOOK, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="dnnplan-test",
                                         resources={"metadata": {"path": str(NOTEBOOK.parents[1])}})
        client.execute()
    finally:
        mp.undo()
    return nb


def _outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def _summary(nb) -> dict:
    for o in _outputs(nb):
        if o.output_type == "stream":
            for line in o.text.splitlines():
                if line.startswith("NOTEBOOK_SUMMARY "):
                    return json.loads(line.split(" ", 1)[1])
    raise AssertionError("the notebook printed no NOTEBOOK_SUMMARY line")


@pytest.mark.slow
def test_notebook_runs_without_errors(executed):
    errors = [o for o in _outputs(executed) if o.output_type == "error"]
    assert not errors, f"{errors[0].ename}: {errors[0].evalue}" if errors else ""
    assert all(c.execution_count for c in executed.cells if c.cell_type == "code")


@pytest.mark.slow
def test_front_non_empty_and_chosen_point_on_it(executed):
    s = _summary(executed)
    F = np.asarray(s["front"], dtype=float)
    assert F.ndim == 2 and F.shape[0] >= 2 and F.shape[1] == 3
    # a front: no row dominates another
    dom = (F[:, None, :] <= F[None, :, :]).all(-1) & (F[:, None, :] < F[None, :, :]).any(-1)
    assert not dom.any()
    chosen = np.asarray(s["chosen"])
    assert np.isclose(F, chosen, rtol=1e-12, atol=0).all(axis=1).sum() == 1
    assert s["baselines"] == ["coc", "cos", "ebo", "lbo", "rs"]


@pytest.mark.slow
def test_pipeline_part(executed):
    s = _summary(executed)
    assert 0.99 * s["exact_fps"] <= s["ga_fps"] <= s["exact_fps"] * (1 + 1e-9)
    assert 1 <= len(s["stages"]) <= 3 and len(set(s["stages"])) == len(s["stages"])


@pytest.mark.slow
def test_figures_and_explanation_produced(executed):
    pngs = [base64.b64decode(o.data["image/png"]) for o in _outputs(executed)
            if o.output_type in ("display_data", "execute_result") and "image/png" in o.get("data", {})]
    assert len(pngs) >= 4  # 2-D front, scatter matrix, GA convergence, pipeline Gantt
    for png in pngs:
        assert png.startswith(PNG_MAGIC)
        width, height = struct.unpack(">II", png[16:24])
        assert width >= 400 and height >= 250
    md = [o.data["text/markdown"] for o in _outputs(executed) if "text/markdown" in o.get("data", {})]
    assert md, "the TOPSIS explanation was not rendered"
    assert "TOPSIS picks **split" in md[0]
    for name in ("LBO", "EBO", "COS", "COC", "RS"):
        assert f"**{name}**" in md[0]
