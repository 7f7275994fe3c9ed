"""The wheel carries its data: build an sdist from the checkout, a wheel from
that sdist (as ``python -m build`` does), install the wheel (not editable) into a fresh virtual
environment, and run the smoke set of commands from a folder outside the checkout.

The fresh environment reuses the installed dependencies: it sees this interpreter's
site-packages through a ``.pth`` line (after its own, so the wheel's ``optimizer`` wins; the
editable install's finder in that folder is not activated by a ``.pth`` path), and the wheel is
installed with ``pip install --no-deps --no-index``: nothing is downloaded. ``PYTHONPATH`` is
cleared, so nothing of the checkout can be imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
# what the sdist is built from: the checkout without its environment, outputs and caches
IGNORE = shutil.ignore_patterns(".venv", ".git", "results", "build", "dist", "*.egg-info", "__pycache__",
                                ".pytest_cache", ".mypy_cache", ".ruff_cache", "shared", "*.pyc")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    """(the fresh environment's ``dnnplan`` script, its process environment, a work folder
    outside the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    shutil.copytree(REPO, src, ignore=IGNORE)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DNNPLAN_SEARCH_SPACES",
                                                             "DNNPLAN_MODELS_DIR", "DNNPLAN_CACHE")}
    env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONHASHSEED="0", XDG_CACHE_HOME=str(root / "cache"),
               PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    dist = root / "dist"
    sdist = _run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                  "print(b.build_sdist(sys.argv[1]))", str(dist)], src, env)
    assert sdist.returncode == 0, sdist.stderr[-3000:]
    tarball = dist / sdist.stdout.strip().splitlines()[-1]
    wheel = _run([sys.executable, "-m", "pip", "wheel", str(tarball), "--no-deps", "--no-build-isolation",
                  "--no-index", "-w", str(dist)], root, env)
    assert wheel.returncode == 0, wheel.stderr[-3000:]
    (whl,) = dist.glob("dnnplan-*.whl")

    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "_dnnplan_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    inst = _run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(whl)], root, env)
    assert inst.returncode == 0, inst.stderr[-3000:]
    shutil.rmtree(src)  # the checkout copy is gone: only the installed wheel is left
    work = root / "work"
    work.mkdir()
    return venv / "bin" / "dnnplan", env, work


def _dnnplan(wheel_env: tuple[Path, dict[str, str], Path], *args: str) -> subprocess.CompletedProcess[str]:
    exe, env, work = wheel_env
    r = _run([str(exe), *args], work, env)
    assert r.returncode == 0, f"dnnplan {' '.join(args)} exited {r.returncode}: {r.stderr[-2000:]}"
    return r


def test_installed_from_the_wheel_not_the_checkout(wheel_env):
    exe, env, work = wheel_env
    code = ("import optimizer, search_spaces, models; from optimizer.shipped import shipped_root; "
            "print(optimizer.__file__, search_spaces.__file__, models.__file__, shipped_root(), sep='\\n')")
    r = _run([str(exe.parent / "python"), "-c", code], work, env)
    assert r.returncode == 0, r.stderr
    paths = r.stdout.split()
    venv = str(exe.parents[1])
    assert all(p.startswith(venv) for p in paths), paths
    assert not any(p.startswith(str(REPO)) for p in paths)
    shipped = Path(paths[3])
    assert (shipped / "devices" / "pixel6.yaml").is_file()
    assert (shipped / "thermal" / "traces" / "odroid_xu3_rise.csv.gz").is_file()
    assert (shipped / "bandwidth" / "mahimahi" / "ATT-LTE-driving.up").is_file()


def test_profile_cost_map_simulate(wheel_env):
    work = wheel_env[2]
    _dnnplan(wheel_env, "--quiet", "profile", "mobilenet_v2", "-g", "block", "--out", "profile.json")
    assert len(json.loads((work / "profile.json").read_text())["layers"]) > 10
    r = _dnnplan(wheel_env, "cost", "mobilenet_v2", "--device", "pixel6", "--json")
    assert json.loads(r.stdout)["device"] == "pixel6"
    _dnnplan(wheel_env, "--quiet", "map", "mobilenet_v2", "--device", "pixel6", "--dtype", "int8",
             "--granularity", "block", "--generations", "20", "--out", "map.json")
    plan = json.loads((work / "map.json").read_text())
    assert plan["kind"] == "pipeline" and plan["device"] == "pixel6"
    r = _dnnplan(wheel_env, "simulate", "map.json", "--duration", "60", "--json")
    assert json.loads(r.stdout)["duration_s"] == pytest.approx(60)


def test_split_over_a_shipped_trace_and_the_smartsplit_job(wheel_env):
    work = wheel_env[2]
    _dnnplan(wheel_env, "--quiet", "split", "mobilenet_v2", "--device", "galaxy_j6", "--network", "lte",
             "--dtype", "fp32", "--bandwidth-trace", "ATT-LTE-driving", "--risk", "cvar95", "--solver", "exact",
             "--out", "split.json")
    plan = json.loads((work / "split.json").read_text())
    assert plan["kind"] == "split" and "ATT-LTE-driving" in json.dumps(plan)
    r = _dnnplan(wheel_env, "split", "--job", "smartsplit")
    assert "smartsplit" in r.stdout and "galaxy_j6" in r.stdout


def test_schedule_and_thermal_fit_on_the_shipped_odroid_trace(wheel_env):
    work = wheel_env[2]
    r = _dnnplan(wheel_env, "schedule", "person_finder", "--device", "pixel4", "--network", "wifi_249",
                 "--policy", "minheat", "--fps", "20", "--duration", "120")
    assert "minheat" in r.stdout
    _dnnplan(wheel_env, "--quiet", "thermal", "fit", "odroid_xu3_rise", "--time", "t_s", "--temps",
             "t_a15_core*_c,t_gpu_c", "--inputs", "p_*_w", "--train-from", "600", "--out", "thermal.json")
    model = json.loads((work / "thermal.json").read_text())
    assert model["kind"] == "linear" and "t_gpu_c" in model["temps"]


def test_user_folder_overlays_the_shipped_ones(wheel_env, tmp_path):
    """``--search-spaces DIR``: a user's device file wins over the shipped one of the same name,
    and names from both are valid."""
    exe, env, work = wheel_env
    user = tmp_path / "mine"
    (user / "devices").mkdir(parents=True)
    shipped = Path(_run([str(exe.parent / "python"), "-c", "from optimizer.shipped import shipped_root; "
                         "print(shipped_root())"], work, env).stdout.strip())
    text = (shipped / "devices" / "pixel6.yaml").read_text()
    (user / "devices" / "myphone.yaml").write_text(text.replace("name: pixel6", "name: myphone"))
    r = _dnnplan(wheel_env, "--search-spaces", str(user), "cost", "mobilenet_v2", "--device", "myphone", "--json")
    assert json.loads(r.stdout)["device"] == "myphone"
    bad = _run([str(exe), "--search-spaces", str(user), "cost", "mobilenet_v2", "--device", "nope"], work, env)
    assert bad.returncode == 2 and "myphone" in bad.stderr and "pixel6" in bad.stderr
