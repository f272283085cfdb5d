"""Issue 11: a fix or an uninstall touches its target and nothing else.

Every run here has a second venv first on PATH and in $VIRTUAL_ENV (the "bystander") and the
dev venv's bin next on PATH: a command that reached for a ``python`` from PATH would install
into one of them. Their trees (the bystander's hashed, the dev venv's site-packages by mtime
and size) are the same after the run as before. The targets are a venv repaired with pip, a
venv repaired with uv, and folders made with ``pip install --target`` and ``uv pip install
--target``; pyenv shims are built as pyenv writes them, and a plain wrapper script stands in
for any other shim.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.repairs import Cli, diff_states, tree_state
from support.venvs import (
    Venv,
    VenvFactory,
    clone_venv,
    pip_env,
    pip_install,
    uv_install,
    uv_path,
)
from support.wheels import WheelFactory, offline

Doc = dict[str, Any]
DEV_SITE = Path(sysconfig.get_paths()["purelib"])


class Bystanders:
    """The environments a run must not touch, and the variables that point at them."""

    def __init__(self, venv: Venv, extra_path: tuple[Path, ...] = ()) -> None:
        self.venv = venv
        dirs = [*map(str, extra_path), str(venv.bin), str(uv_path().parent)]
        self.env = {
            "PATH": os.pathsep.join([*dirs, os.environ.get("PATH", "")]),
            "VIRTUAL_ENV": str(venv.path),
        }
        self.before = self._state()

    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        return tree_state(self.venv.path), tree_state(DEV_SITE, hashed=False)

    def changes(self) -> list[str]:
        venv, dev = self._state()
        return diff_states(self.before[0], venv) + diff_states(self.before[1], dev)


@pytest.fixture
def bystander(new_venv: VenvFactory) -> Iterator[Venv]:
    yield new_venv("bystander")


def sole(make_wheel: WheelFactory, name: str = "ldt-a") -> Path:
    pkg = name.replace("-", "_")
    return make_wheel(name, "1.0", {f"{pkg}/__init__.py": b"A = 1\n", f"{pkg}/x.py": b"x\n"})


def results_argv(run_doc: Doc) -> list[list[str]]:
    return [r["argv"] for r in run_doc["fix"]["results"]]


# =============================================================================== venvs


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_fix_of_a_venv_touches_nothing_else(
    new_venv: VenvFactory,
    bystander: Venv,
    make_wheel: WheelFactory,
    cli: Cli,
    tmp_path: Path,
    installer: str,
) -> None:
    wheel = sole(make_wheel)
    venv = new_venv("target")
    if installer == "uv":
        uv_install(venv.python, wheel, cache=tmp_path / "uv-cache")
    else:
        pip_install(venv, wheel)
    (venv.site_packages / "ldt_a/x.py").unlink()
    watch = Bystanders(bystander)
    run = cli("fix", venv.path, "--yes", *offline(make_wheel.dest), "--json", env=watch.env)
    assert run.rc == 0, run.describe()
    (argv,) = results_argv(run.json())
    if installer == "uv":
        assert argv[:8] == [
            "uv", "pip", "install", "--reinstall", "--no-deps", "--python", str(venv.python),
            "ldt-a==1.0",
        ]  # fmt: skip
    else:
        assert argv[:7] == [
            str(venv.python), "-m", "pip", "install", "--force-reinstall", "--no-deps",
            "ldt-a==1.0",
        ]  # fmt: skip
    assert (venv.site_packages / "ldt_a/x.py").read_bytes() == b"x\n"
    assert watch.changes() == []


def test_uninstall_of_a_venv_touches_nothing_else(
    new_venv: VenvFactory, bystander: Venv, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv = new_venv("target")
    pip_install(venv, sole(make_wheel))
    pip_install(bystander, sole(make_wheel))  # the same name there: the wrong one to remove
    watch = Bystanders(bystander)
    run = cli("uninstall", "ldt-a", venv.path, "--json", env=watch.env)
    assert run.rc == 0, run.describe()
    (result,) = run.json()["run"]["results"]
    assert result["argv"] == [str(venv.python), "-m", "pip", "uninstall", "--yes", "ldt-a"]
    assert not (venv.site_packages / "ldt_a").exists()
    assert watch.changes() == []


# =============================================================================== --target folders


@pytest.fixture
def builder(new_venv: VenvFactory) -> Venv:
    """The interpreter that made the folders and serves them (--python)."""
    return new_venv("builder")


def pip_target(builder: Venv, folder: Path, *wheels: Path) -> Path:
    done = subprocess.run(
        [str(builder.python), "-m", "pip", "install", "--no-deps", "--target", str(folder)]
        + [str(w) for w in wheels],
        env=pip_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def test_fix_of_a_target_folder_without_python_refuses_and_changes_nothing(
    builder: Venv, bystander: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    folder = pip_target(builder, tmp_path / "folder", sole(make_wheel))
    (folder / "ldt_a/x.py").unlink()
    before = tree_state(folder)
    watch = Bystanders(bystander)
    for dry in ([], ["--dry-run"]):
        run = cli("fix", folder, "--yes", *dry, *offline(make_wheel.dest), env=watch.env)
        assert run.rc == 2, run.describe()
        (line,) = run.stderr.splitlines()
        assert "`pip install --target`" in line and "--python PATH" in line, line
        assert "never takes one from PATH" in line
    assert diff_states(before, tree_state(folder)) == []
    assert watch.changes() == []


def test_check_of_a_target_folder_names_no_bare_python(
    builder: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    folder = pip_target(builder, tmp_path / "folder", sole(make_wheel))
    (folder / "ldt_a/x.py").unlink()
    run = cli("check", folder, "--json")
    assert run.rc == 1, run.describe()
    (finding,) = [f for f in run.json()["findings"] if f["code"] == "missing-files"]
    argv = finding["fix"]["argv"]
    assert argv == [
        "<python>", "-m", "pip", "install", "--target", str(folder), "--upgrade", "--no-deps",
        "ldt-a==1.0",
    ]  # fmt: skip
    assert "--python" in finding["fix"]["note"]
    served = cli("check", folder, "--python", builder.python, "--json")
    assert served.rc == 1, served.describe()
    (finding,) = [f for f in served.json()["findings"] if f["code"] == "missing-files"]
    assert finding["fix"]["argv"][0] == str(builder.python)
    assert served.json()["target"]["python"] == str(builder.python)


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_fix_of_a_target_folder_reinstalls_into_it_with_its_python(
    builder: Venv,
    bystander: Venv,
    make_wheel: WheelFactory,
    cli: Cli,
    tmp_path: Path,
    installer: str,
) -> None:
    folder = tmp_path / "folder"
    if installer == "uv":
        uv_install(builder.python, sole(make_wheel), cache=tmp_path / "uv-cache", target=folder)
    else:
        pip_target(builder, folder, sole(make_wheel))
    (folder / "ldt_a/x.py").unlink()
    builder_before = tree_state(builder.path)
    watch = Bystanders(bystander)
    run = cli(
        "fix", folder, "--python", builder.python, "--yes", *offline(make_wheel.dest), "--json",
        env=watch.env,
    )  # fmt: skip
    assert run.rc == 0, run.describe()
    (argv,) = results_argv(run.json())
    if installer == "uv":
        assert argv[:10] == [
            "uv", "pip", "install", "--target", str(folder), "--reinstall", "--no-deps",
            "--python", str(builder.python), "ldt-a==1.0",
        ]  # fmt: skip
    else:
        assert argv[:9] == [
            str(builder.python), "-m", "pip", "install", "--target", str(folder), "--upgrade",
            "--no-deps", "ldt-a==1.0",
        ]  # fmt: skip
    assert (folder / "ldt_a/x.py").read_bytes() == b"x\n"
    assert watch.changes() == []
    assert diff_states(builder_before, tree_state(builder.path)) == [], "the --python's own env"
    assert cli("check", folder).rc == 0


def test_a_shared_top_level_dir_is_reinstalled_with_all_its_owners(
    builder: Venv, bystander: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    """pip --target --upgrade deletes nv/ whole: ldt-b's files there must come back too."""
    a = make_wheel("ldt-a", "1.0", {"nv/__init__.py": b"", "nv/a/x.py": b"A = 1\n"})
    b = make_wheel("ldt-b", "1.0", {"nv/__init__.py": b"", "nv/b/y.py": b"B = 1\n"})
    c = make_wheel("ldt-c", "1.0", {"cc/__init__.py": b"C = 1\n"})
    folder = pip_target(builder, tmp_path / "folder", a, b, c)
    (folder / "nv/a/x.py").unlink()
    check = cli("check", folder, "--python", builder.python, "--json")
    (finding,) = [f for f in check.json()["findings"] if f["code"] == "missing-files"]
    assert finding["fix"]["argv"][-2:] == ["ldt-a==1.0", "ldt-b==1.0"], "safe on its own"
    assert "ldt-b 1.0 is reinstalled too" in finding["fix"]["note"]
    untouched = tree_state(folder / "cc")
    watch = Bystanders(bystander)
    run = cli(
        "fix", folder, "--python", builder.python, "--yes", *offline(make_wheel.dest), "--json",
        env=watch.env,
    )  # fmt: skip
    assert run.rc == 0, run.describe()
    fix = run.json()["fix"]
    (step,) = fix["steps"]
    assert step["argv"][8:10] == ["ldt-a==1.0", "ldt-b==1.0"]
    assert "pip replaces" in step["reason"]
    assert (folder / "nv/b/y.py").read_bytes() == b"B = 1\n"
    assert (folder / "nv/a/x.py").read_bytes() == b"A = 1\n"
    assert diff_states(untouched, tree_state(folder / "cc")) == []
    assert watch.changes() == []


def test_a_file_nobody_owns_in_a_replaced_dir_stops_the_reinstall(
    builder: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    folder = pip_target(builder, tmp_path / "folder", sole(make_wheel))
    (folder / "ldt_a/x.py").unlink()
    (folder / "ldt_a/notes.txt").write_text("mine\n")
    before = tree_state(folder)
    run = cli("fix", folder, "--python", builder.python, "--yes", "--json", "--no-index")
    assert run.rc == 1, run.describe()
    fix = run.json()["fix"]
    assert fix["steps"] == [] and fix["ran"] is False
    (left,) = fix["not_handled"]
    assert "belong to no distribution" in left["reason"] and "notes.txt" in left["reason"]
    assert diff_states(before, tree_state(folder)) == []


def test_python_must_fit_the_folder_tags(
    builder: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    folder = pip_target(builder, tmp_path / "folder", sole(make_wheel))
    (folder / "ldt_a-1.0.dist-info/WHEEL").write_text("Tag: cp27-cp27mu-linux_x86_64\n")
    before = tree_state(folder)
    run = cli("fix", folder, "--python", builder.python, "--yes", "--no-index")
    assert run.rc == 2, run.describe()
    assert "cannot use" in run.stderr and "cp27-cp27mu-linux_x86_64" in run.stderr
    assert diff_states(before, tree_state(folder)) == []


def test_uninstall_from_a_pip_target_folder_is_refused(
    builder: Venv, bystander: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    folder = pip_target(builder, tmp_path / "folder", sole(make_wheel))
    pip_install(bystander, sole(make_wheel))  # what the old code uninstalled instead
    before = tree_state(folder)
    watch = Bystanders(bystander)
    for python in ([], ["--python", str(builder.python)]):
        run = cli("uninstall", "ldt-a", folder, *python, env=watch.env)
        assert run.rc == 2, run.describe()
        assert "pip cannot uninstall ldt-a from it" in run.stderr
    assert diff_states(before, tree_state(folder)) == []
    assert watch.changes() == []


def test_uninstall_from_a_uv_target_folder_runs_uv_there(
    builder: Venv, bystander: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    folder = tmp_path / "folder"
    uv_install(
        builder.python, sole(make_wheel), sole(make_wheel, "ldt-b"),
        cache=tmp_path / "uv-cache", target=folder,
    )  # fmt: skip
    watch = Bystanders(bystander)
    run = cli("uninstall", "ldt-a", folder, "--python", builder.python, "--json", env=watch.env)
    assert run.rc == 0, run.describe()
    (result,) = run.json()["run"]["results"]
    assert result["argv"] == [
        "uv", "pip", "uninstall", "--target", str(folder), "--python", str(builder.python),
        "ldt-a",
    ]  # fmt: skip
    assert not (folder / "ldt_a").exists() and (folder / "ldt_b/x.py").is_file()
    assert watch.changes() == []


# =============================================================================== shims


def test_a_wrapper_shim_on_path_is_never_named(
    new_venv: VenvFactory, bystander: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    """A `python3` on PATH that execs the venv's interpreter: given as --python, the fix
    names and runs the interpreter itself."""
    venv = new_venv("target")
    pip_install(venv, sole(make_wheel))
    (venv.site_packages / "ldt_a/x.py").unlink()
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{venv.python}" "$@"\n')
    shim.chmod(0o755)
    watch = Bystanders(bystander, extra_path=(shims,))
    run = cli("fix", "--python", shim, "--yes", *offline(make_wheel.dest), "--json", env=watch.env)
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["target"]["python"] == str(venv.python)
    assert results_argv(doc)[0][0] == str(venv.python)
    assert str(shims) not in run.stdout + run.stderr
    assert watch.changes() == []


def test_a_pyenv_shim_is_resolved_without_running_it(
    new_venv: VenvFactory, bystander: Venv, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    """pyenv's layout says where its shim leads; the shim itself (whose pyenv is absent
    here, so running it fails) is never run, named or put in a fix."""
    root = tmp_path / "pyenv"
    version = clone_venv(new_venv.template, root / "versions" / "3.99.1")
    pip_install(version, sole(make_wheel))
    (version.site_packages / "ldt_a/x.py").unlink()
    shim = root / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text(
        '#!/usr/bin/env bash\nset -e\nprogram="${0##*/}"\n'
        f'export PYENV_ROOT="{root}"\nexec "{root}/libexec/pyenv" exec "$program" "$@"\n'
    )
    shim.chmod(0o755)
    watch = Bystanders(bystander, extra_path=(shim.parent,))
    env = {**watch.env, "PYENV_VERSION": "3.99.1"}
    run = cli("fix", "--python", shim, "--yes", *offline(make_wheel.dest), "--json", env=env)
    assert run.rc == 0, run.describe()
    doc = run.json()
    assert doc["target"]["python"] == str(version.bin / "python3")
    assert results_argv(doc)[0][0] == str(version.bin / "python3")
    assert str(shim) not in run.stdout + run.stderr
    assert (version.site_packages / "ldt_a/x.py").is_file()
    assert watch.changes() == []


# =============================================================================== plans


def test_one_call_per_installer_verified_against_the_wheels(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli, tmp_path: Path
) -> None:
    """Two damaged distributions, one pip call. ldt-b's wheel at hand lacks the file it lost:
    the plan says so instead of promising, and the run reports what is still wrong."""
    venv = new_venv("target")
    shipped = make_wheel("ldt-b", "1.0", {"ldt_b/__init__.py": b"", "ldt_b/gone.py": b"g\n"})
    pip_install(venv, sole(make_wheel), shipped)
    (venv.site_packages / "ldt_a/x.py").unlink()
    (venv.site_packages / "ldt_b/gone.py").unlink()
    shipped.unlink()
    rebuilt = WheelFactory(tmp_path / "links")
    rebuilt("ldt-b", "1.0", {"ldt_b/__init__.py": b""})  # same version, without gone.py
    sole(rebuilt)
    dry = cli("fix", venv.path, "--dry-run", "--json", *offline(rebuilt.dest))
    (step,) = dry.json()["fix"]["steps"]
    assert step["argv"][6:8] == ["ldt-a==1.0", "ldt-b==1.0"]
    checks = {v["distribution"]["name"]: v for v in step["verification"]}
    assert checks["ldt-a"]["status"] == "verified"
    assert checks["ldt-b"]["status"] == "incomplete"
    assert checks["ldt-b"]["not_in_wheel"] == [str(venv.site_packages / "ldt_b/gone.py")]
    text = cli("fix", venv.path, "--dry-run", *offline(rebuilt.dest))
    assert "✗ ldt-b 1.0: incomplete" in text.stdout and "✓ ldt-a 1.0: verified" in text.stdout
    unknown = cli("fix", venv.path, "--dry-run", "--json", "--no-index")
    (step,) = unknown.json()["fix"]["steps"]
    assert {v["status"] for v in step["verification"]} == {"not verified"}


def _one_damaged_one_shared(venv: Venv, make_wheel: WheelFactory) -> None:
    pip_install(venv, sole(make_wheel))
    pip_install(venv, make_wheel("ldt-p", "1.0", {"same/f.py": b"p\n"}))
    pip_install(venv, make_wheel("ldt-q", "1.0", {"same/f.py": b"qq\n"}))  # a shared path
    (venv.site_packages / "ldt_a/x.py").unlink()


def test_after_the_run_what_remains_is_listed_and_sets_the_exit_code(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    venv = new_venv("json")
    _one_damaged_one_shared(venv, make_wheel)
    run = cli("fix", venv.path, "--yes", *offline(make_wheel.dest), "--json")
    assert run.rc == 1, run.describe()
    fix = run.json()["fix"]
    assert [f["code"] for f in fix["resolved"]] == ["missing-files"]
    assert [f["code"] for f in fix["remaining"]] == ["shared-path"]
    assert fix["new"] == [] and fix["after"]["errors"] == 1
    venv = new_venv("text")
    _one_damaged_one_shared(venv, make_wheel)
    text = cli("fix", venv.path, "--yes", *offline(make_wheel.dest))
    assert text.rc == 1, text.describe()
    assert "✓ resolved missing-files  ldt-a 1.0" in text.stdout
    assert "Still there after the run:" in text.stdout
    assert "1 error remains after the run" in text.stdout
