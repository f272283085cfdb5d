"""Issue 14: the guarded ``libdoctor install`` — with real pip and real uv, wheels built here
(``support.conflicts``: ``ldt-a``/``ldt-b`` cannot both be whole; ``ldt-x`` 2.0 deletes a
file ``ldt-y`` shares, which a reinstall puts back).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.conflicts import ConflictWheels
from support.repairs import Cli, check_errors, diff_states, tree_state
from support.venvs import WITH_UV, VenvFactory, installed_names, pip_install, uv_install, uv_path
from support.wheels import offline


def test_install_over_another_distributions_file_is_refused_byte_identical(
    new_venv: VenvFactory, conflicts: ConflictWheels, cli: Cli
) -> None:
    venv = new_venv("overwrite")
    pip_install(venv, conflicts.a)
    before = tree_state(venv.path)
    run = cli("install", conflicts.b, venv.path)
    assert run.rc == 1, run.describe()
    assert "refused: the install breaks 1 thing(s)" in run.stderr
    assert "Overwrites 1 file with different bytes:" in run.stdout
    assert diff_states(before, tree_state(venv.path)) == []
    assert not cli.backups.exists(), "a refused install takes no backup"
    repair = cli("install", conflicts.b, venv.path, "--repair", *offline(conflicts))
    assert repair.rc == 1, repair.describe()
    assert "cannot both be whole: ldt-a 1.0 and ldt-b 1.0 own" in repair.stderr
    assert "shared/data.bin with different bytes" in repair.stderr
    assert diff_states(before, tree_state(venv.path)) == []
    forced = cli("install", conflicts.b, venv.path, "--force", "--json")
    assert forced.rc == 1, forced.describe()  # done, with the new error the plan named
    assert forced.json()["run"]["ok"] is True
    assert {"ldt_a", "ldt_b"} <= installed_names(venv.site_packages)


def test_install_repair_leaves_both_whole(
    new_venv: VenvFactory, conflicts: ConflictWheels, cli: Cli
) -> None:
    venv = new_venv("upgrade")
    pip_install(venv, conflicts.x1, conflicts.y)
    plan = cli("install", "ldt-x==2.0", venv.path, *offline(conflicts), "--dry-run", "--json")
    assert plan.rc == 1, plan.describe()
    assert "refused" not in plan.stderr or "--repair does it safely" in plan.stderr
    doc = plan.json()["plan"]
    assert [f["code"] for f in doc["new_findings"]] == ["missing-files"]
    assert doc["safe_sequence"]["verified"] is True
    run = cli("install", "ldt-x==2.0", venv.path, *offline(conflicts), "--repair", "--json")
    assert run.rc == 0, run.describe()
    steps = [r["argv"] for r in run.json()["run"]["results"]]
    assert [s[3] for s in steps] == ["install", "install"]
    assert "--force-reinstall" in steps[1] and "ldt-y==1.0" in steps[1]
    assert check_errors(cli, venv.path) == []
    assert (venv.site_packages / "common/same.txt").read_bytes() == b"same\n"
    assert "ldt_x-2.0.dist-info" in os.listdir(venv.site_packages)


def test_a_harmless_install_runs_with_requirement_and_constraint_files(
    new_venv: VenvFactory, conflicts: ConflictWheels, cli: Cli, tmp_path: Path
) -> None:
    venv = new_venv("harmless")
    reqs, cons = tmp_path / "reqs.txt", tmp_path / "cons.txt"
    reqs.write_text("ldt-alone\n")
    cons.write_text("ldt-alone==1.0\n")
    run = cli("install", "-r", reqs, "-c", cons, venv.path, *offline(conflicts), "-y", "--json")
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["plan"]["verdict"] == "safe"
    (result,) = doc["run"]["results"]
    assert result["argv"][:4] == [str(venv.python), "-m", "pip", "install"]
    assert ["-r", str(reqs), "-c", str(cons)] == result["argv"][4:8]
    assert (venv.site_packages / "alone/__init__.py").is_file()
    again = cli("install", "ldt-alone", venv.path, *offline(conflicts))
    assert again.rc == 0 and "already satisfied" in again.stdout, again.describe()


def test_install_into_a_uv_env_runs_uv_and_is_refused_alike(
    tmp_path: Path, conflicts: ConflictWheels, cli: Cli
) -> None:
    uv, env = uv_path(), tmp_path / "uv-env"
    offline_env = {**os.environ, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, env], check=True, env=offline_env)
    uv_install(env / "bin/python", conflicts.a, cache=tmp_path / "uv-cache")
    site = next((env / "lib").glob("python*/site-packages"))
    before = tree_state(env)
    refused = cli("install", conflicts.b, env, env=WITH_UV)
    assert refused.rc == 1, refused.describe()
    assert diff_states(before, tree_state(env)) == []
    run = cli("install", "ldt-alone", env, *offline(conflicts), "--json", env=WITH_UV)
    assert run.rc == 0, run.describe()
    (result,) = run.json()["run"]["results"]
    assert result["argv"][:3] == ["uv", "pip", "install"]
    assert (site / "ldt_alone-1.0.dist-info/INSTALLER").read_text().strip() == "uv"
