"""Issue 14: ``libdoctor guard`` — wrappers in a real venv's bin/, run as the user would run
pip and uv (real pip, real uv), in front of wheels that share paths (``support.conflicts``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from support.commands import run_command
from support.conflicts import ConflictWheels
from support.repairs import Cli, diff_states, tree_state
from support.venvs import VenvFactory, installed_names, pip_install, uv_path
from support.wheels import offline


def test_guard_install_then_remove_is_byte_identical(
    new_venv: VenvFactory, cli: Cli, tmp_path: Path
) -> None:
    venv = new_venv("guard-roundtrip")
    before = tree_state(venv.path)
    bin_mtime = venv.bin.stat().st_mtime_ns
    run = cli("guard", "install", venv.path)
    assert run.rc == 0, run.describe()
    assert (venv.bin / ".libdoctor-guard" / "manifest.json").is_file()
    assert "libdoctor guard" in (venv.bin / "pip").read_text()
    status = cli("guard", "status", venv.path, "--json")
    assert status.rc == 0, status.describe()
    states = {e["name"]: e["state"] for e in status.json()["entries"]}
    assert states["pip"] == states["uv"] == "wrapped"
    for deep in ([], ["--deep"]):  # a guarded env is clean: wrapped scripts judged by originals
        checked = cli("check", venv.path, "--json", *deep)
        assert checked.rc == 0 and checked.json()["findings"] == [], checked.describe()
    original = venv.bin / ".libdoctor-guard" / "pip"
    kept = original.stat()
    original.write_bytes(original.read_bytes() + b"# edited\n")  # a damaged original still shows
    damaged = cli("check", venv.path, "--json")
    assert [f["code"] for f in damaged.json()["findings"]] == ["altered-files"], damaged.describe()
    original.write_bytes(original.read_bytes()[: -len(b"# edited\n")])
    os.utime(original, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    removed = cli("guard", "remove", venv.path)
    assert removed.rc == 0, removed.describe()
    assert diff_states(before, tree_state(venv.path)) == []
    assert venv.bin.stat().st_mtime_ns == bin_mtime


def test_guarded_pip_stops_a_breaking_install_and_lets_the_rest_through(
    new_venv: VenvFactory, conflicts: ConflictWheels, cli: Cli
) -> None:
    venv = new_venv("guarded-pip")
    pip_install(venv, conflicts.a)
    assert cli("guard", "install", venv.path).rc == 0
    env = cli.env({"PATH": f"{venv.bin}{os.pathsep}{os.environ['PATH']}"})
    before = tree_state(venv.path)
    stopped = run_command([venv.bin / "pip", "install", conflicts.b], env)
    assert stopped.returncode == 1, stopped
    assert "refused: the install breaks 1 thing(s)" in stopped.stderr
    assert diff_states(before, tree_state(venv.path)) == []
    harmless = run_command([venv.bin / "pip", "install", "ldt-alone", *offline(conflicts)], env)
    assert harmless.returncode == 0, harmless
    assert "Successfully installed ldt-alone-1.0" in harmless.stdout
    listed = run_command([venv.bin / "pip", "list", "--format=freeze"], env)
    assert "ldt-alone==1.0" in listed.stdout, listed
    stopped = run_command([venv.bin / "pip", "uninstall", "-y", "pip"], env)
    assert stopped.returncode == 0, "uninstalling pip breaks nothing libdoctor checks"
    assert cli("guard", "status", venv.path).rc == 1, "pip's scripts are gone: not guarded"


def test_guard_off_and_force_go_straight_through(
    new_venv: VenvFactory, conflicts: ConflictWheels, cli: Cli
) -> None:
    venv = new_venv("guard-off")
    pip_install(venv, conflicts.a)
    assert cli("guard", "install", venv.path).rc == 0
    env = cli.env()
    off = run_command([venv.bin / "pip", "install", conflicts.b], {**env, "LIBDOCTOR_GUARD": "off"})
    assert off.returncode == 0, off
    assert {"ldt_a", "ldt_b"} <= installed_names(venv.site_packages)
    forced = run_command([venv.bin / "pip3", "uninstall", "--force", "-y", "ldt-b"], env)
    assert forced.returncode == 0, forced
    assert "ldt_b" not in installed_names(venv.site_packages)


def test_uv_wrapper_stops_uv_pip_install_aimed_at_the_env(
    new_venv: VenvFactory, conflicts: ConflictWheels, cli: Cli, tmp_path: Path
) -> None:
    venv = new_venv("guarded-uv")
    pip_install(venv, conflicts.a)
    assert cli("guard", "install", venv.path).rc == 0
    path = f"{venv.bin}{os.pathsep}{uv_path().parent}{os.pathsep}{os.environ['PATH']}"
    env = cli.env({"PATH": path, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_NO_CONFIG": "1"})
    before = tree_state(venv.path)
    argv: list[str | os.PathLike[str]] = ["uv", "pip", "install", "--python", venv.python]
    stopped = run_command([*argv, conflicts.b], env)
    assert stopped.returncode == 1, stopped
    assert "refused: the install breaks 1 thing(s)" in stopped.stderr
    assert diff_states(before, tree_state(venv.path)) == []
    version = run_command(["uv", "--version"], env)
    assert version.returncode == 0 and version.stdout.startswith("uv "), version
    harmless = run_command([*argv, "--no-index", "-f", conflicts.find_links, "ldt-alone"], env)
    assert harmless.returncode == 0, harmless
    assert "ldt_alone" in installed_names(venv.site_packages)


def test_guard_shell_functions_stop_a_breaking_install(
    new_venv: VenvFactory, conflicts: ConflictWheels, cli: Cli
) -> None:
    venv = new_venv("guard-eval")
    pip_install(venv, conflicts.a)
    before = tree_state(venv.path)
    shell = cli("guard", "install", "--eval", venv.path)
    assert shell.rc == 0, shell.describe()
    assert diff_states(before, tree_state(venv.path)) == [], "--eval writes nothing"
    env = cli.env({"PATH": f"{venv.bin}{os.pathsep}{os.environ['PATH']}"})
    script = f"{shell.stdout}\npip install {conflicts.b}\n"
    stopped = run_command(["sh", "-c", script], env)
    assert stopped.returncode == 1, stopped
    assert "refused" in stopped.stderr
    assert diff_states(before, tree_state(venv.path)) == []


def test_status_sees_a_replaced_wrapper_and_install_wraps_it_again(
    new_venv: VenvFactory, cli: Cli
) -> None:
    """What `pip install -U pip` does to bin/pip: a new file, renamed over the wrapper."""
    venv = new_venv("guard-replaced")
    assert cli("guard", "install", venv.path).rc == 0
    upgraded = b"#!/bin/sh\necho upgraded pip\n"
    tmp = venv.bin / "pip.new"
    tmp.write_bytes(upgraded)
    tmp.chmod(0o755)
    tmp.replace(venv.bin / "pip")
    status = cli("guard", "status", venv.path)
    assert status.rc == 1 and "pip: replaced since" in status.stdout, status.describe()
    assert cli("guard", "install", venv.path).rc == 0
    assert cli("guard", "status", venv.path).rc == 0
    assert b"libdoctor guard" in (venv.bin / "pip").read_bytes()
    assert cli("guard", "remove", venv.path).rc == 0
    assert (venv.bin / "pip").read_bytes() == upgraded, "the new pip's script is kept"
    assert not (venv.bin / ".libdoctor-guard").exists()


def test_a_wrapper_whose_libdoctor_is_gone_runs_the_real_tool(
    new_venv: VenvFactory, cli: Cli
) -> None:
    venv = new_venv("guard-orphan")
    assert cli("guard", "install", venv.path).rc == 0
    wrapper = (venv.bin / "pip").read_text()
    source = str(Path(__file__).resolve().parents[2] / "src")
    assert source in wrapper
    assert sys.executable in wrapper
    orphan = wrapper.replace(source, "/nonexistent").replace(sys.executable, str(venv.python))
    (venv.bin / "pip").write_text(orphan)  # an interpreter without libdoctor
    env = {k: v for k, v in cli.env().items() if k != "PYTHONPATH"}
    run = run_command([venv.bin / "pip", "uninstall", "-y", "no-such-dist"], env)
    assert "libdoctor guard:" in run.stderr and "unguarded" in run.stderr, run
    assert "Skipping no-such-dist as it is not installed" in run.stderr + run.stdout, run
