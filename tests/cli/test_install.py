"""Issue 14: the guarded ``libdoctor install`` — with real pip and real uv, wheels built here
(``support.conflicts``: ``ldt-a``/``ldt-b`` cannot both be whole; ``ldt-x`` 2.0 deletes a
file ``ldt-y`` shares, which a reinstall puts back).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.conflicts import ConflictWheels as Wheels
from support.conflicts import build_conflict_wheels
from support.repairs import Cli, diff_states, tree_state
from support.venvs import VenvFactory, pip_install, uv_install, uv_path
from support.wheels import WheelFactory

Doc = dict[str, Any]
WITH_UV = {"PATH": f"{uv_path().parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.fixture(scope="module")
def wheels(module_wheels: WheelFactory) -> Wheels:
    return build_conflict_wheels(module_wheels)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "cache-home")


def offline(wheels: Wheels) -> list[str]:
    return wheels.offline()


def errors(cli: Cli, venv: Path) -> list[Doc]:
    run = cli("check", venv, "--json")
    assert run.rc in (0, 1), run.describe()
    return [f for f in run.json()["findings"] if f["severity"] == "error"]


def installed(site: Path) -> set[str]:
    return {p.name.split("-")[0] for p in site.glob("*.dist-info")}


def test_install_over_another_distributions_file_is_refused_byte_identical(
    new_venv: VenvFactory, wheels: Wheels, cli: Cli
) -> None:
    venv = new_venv("overwrite")
    pip_install(venv, wheels.a)
    before = tree_state(venv.path)
    run = cli("install", wheels.b, venv.path)
    assert run.rc == 1, run.describe()
    assert "refused: the install breaks 1 thing(s)" in run.stderr
    assert "Overwrites 1 file with different bytes:" in run.stdout
    assert diff_states(before, tree_state(venv.path)) == []
    assert not cli.backups.exists(), "a refused install takes no backup"
    repair = cli("install", wheels.b, venv.path, "--repair", *offline(wheels))
    assert repair.rc == 1, repair.describe()
    assert "cannot both be whole: ldt-a 1.0 and ldt-b 1.0 own" in repair.stderr
    assert "shared/data.bin with different bytes" in repair.stderr
    assert diff_states(before, tree_state(venv.path)) == []
    forced = cli("install", wheels.b, venv.path, "--force", "--json")
    assert forced.rc == 1, forced.describe()  # done, with the new error the plan named
    assert forced.json()["run"]["ok"] is True
    assert {"ldt_a", "ldt_b"} <= installed(venv.site_packages)


def test_install_repair_leaves_both_whole(new_venv: VenvFactory, wheels: Wheels, cli: Cli) -> None:
    venv = new_venv("upgrade")
    pip_install(venv, wheels.x1, wheels.y)
    plan = cli("install", "ldt-x==2.0", venv.path, *offline(wheels), "--dry-run", "--json")
    assert plan.rc == 1, plan.describe()
    assert "refused" not in plan.stderr or "--repair does it safely" in plan.stderr
    doc = plan.json()["plan"]
    assert [f["code"] for f in doc["new_findings"]] == ["missing-files"]
    assert doc["safe_sequence"]["verified"] is True
    run = cli("install", "ldt-x==2.0", venv.path, *offline(wheels), "--repair", "--json")
    assert run.rc == 0, run.describe()
    steps = [r["argv"] for r in run.json()["run"]["results"]]
    assert [s[3] for s in steps] == ["install", "install"]
    assert "--force-reinstall" in steps[1] and "ldt-y==1.0" in steps[1]
    assert errors(cli, venv.path) == []
    assert (venv.site_packages / "common/same.txt").read_bytes() == b"same\n"
    assert "ldt_x-2.0.dist-info" in os.listdir(venv.site_packages)


def test_a_harmless_install_runs_with_requirement_and_constraint_files(
    new_venv: VenvFactory, wheels: Wheels, cli: Cli, tmp_path: Path
) -> None:
    venv = new_venv("harmless")
    reqs, cons = tmp_path / "reqs.txt", tmp_path / "cons.txt"
    reqs.write_text("ldt-alone\n")
    cons.write_text("ldt-alone==1.0\n")
    run = cli("install", "-r", reqs, "-c", cons, venv.path, *offline(wheels), "-y", "--json")
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["plan"]["verdict"] == "safe"
    (result,) = doc["run"]["results"]
    assert result["argv"][:4] == [str(venv.python), "-m", "pip", "install"]
    assert ["-r", str(reqs), "-c", str(cons)] == result["argv"][4:8]
    assert (venv.site_packages / "alone/__init__.py").is_file()
    again = cli("install", "ldt-alone", venv.path, *offline(wheels))
    assert again.rc == 0 and "already satisfied" in again.stdout, again.describe()


def test_install_into_a_uv_env_runs_uv_and_is_refused_alike(
    tmp_path: Path, wheels: Wheels, cli: Cli
) -> None:
    uv, env = uv_path(), tmp_path / "uv-env"
    offline_env = {**os.environ, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, env], check=True, env=offline_env)
    uv_install(env / "bin/python", wheels.a, cache=tmp_path / "uv-cache")
    site = next((env / "lib").glob("python*/site-packages"))
    before = tree_state(env)
    refused = cli("install", wheels.b, env, env=WITH_UV)
    assert refused.rc == 1, refused.describe()
    assert diff_states(before, tree_state(env)) == []
    run = cli("install", "ldt-alone", env, *offline(wheels), "--json", env=WITH_UV)
    assert run.rc == 0, run.describe()
    (result,) = run.json()["run"]["results"]
    assert result["argv"][:3] == ["uv", "pip", "install"]
    assert (site / "ldt_alone-1.0.dist-info/INSTALLER").read_text().strip() == "uv"
