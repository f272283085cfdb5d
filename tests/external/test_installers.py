"""The installers: no interpreter from PATH (a remedy without one is refused), an
environment that cannot send the installer elsewhere, uv found where users have it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from libdoctor.environment.model import build_environment
from libdoctor.environment.target import SiteDir, Target
from libdoctor.external.installers import installer_env, removal, unrunnable
from libdoctor.remedy import Install, Pin, Reinstall, Uninstall, Via
from support.dists import fake_dist
from support.repairs import Cli, check_errors
from support.venvs import SRC_DIR, VenvFactory, uv_install, uv_path
from support.wheels import WheelFactory

VENV = Target("/env", sys.executable, (SiteDir("/env/site", "/env"),), "test", (3, 11))
FOLDER = Target("/f", None, (SiteDir("/f", "/f"),), "test", (3, 11), "/f", "Python 3.11")


def _reinstall(python: str | None, installer: str = "pip", folder: str | None = None) -> Reinstall:
    return Reinstall((Pin("a", "1"),), Via(installer, python, (3, 11), folder))


def test_what_libdoctor_refuses_to_run(tmp_path: Path) -> None:
    assert unrunnable(_reinstall(sys.executable), VENV) is None
    assert unrunnable(_reinstall(sys.executable, "uv"), VENV) is None
    placeholder = unrunnable(_reinstall(None, folder="/f"), FOLDER) or ""
    assert "--python PATH" in placeholder and "(Python 3.11)" in placeholder
    assert "never takes one from PATH" in placeholder
    bare = unrunnable(_reinstall("python"), VENV) or ""
    assert "absolute, executable path" in bare
    uv_bare = unrunnable(Install(("a==1",), Via("uv", "python3")), VENV) or ""
    assert "absolute, executable path" in uv_bare
    folder = Uninstall("x", Via("pip", None, (3, 11), "/f"))
    assert "pip cannot uninstall x" in (unrunnable(folder, FOLDER) or "")
    conda = Reinstall((Pin("x", "1"),), Via("conda", prefix="/env", exe="conda"))
    assert unrunnable(conda, VENV) is None  # named, never run: the step check refuses it


def test_a_removal_reinstalls_what_the_uninstall_damages() -> None:
    """pip deletes every RECORD path, those another distribution claims too (bytecode
    aside): each such other distribution is reinstalled after, once, in path order."""
    pyc = "shared/__pycache__/x.cpython-311.pyc"
    dists = [
        fake_dist("one", "1.0", ["a.py", "shared/y.py", "shared/x.py", pyc], ["two"]),
        fake_dist("two", "2.0", ["shared/y.py", "c.py"]),
        fake_dist("three", "3.0", ["shared/x.py"]),
        fake_dist("four", "4.0", [pyc]),
    ]
    env = build_environment(VENV, dists)
    plan = removal([dists[0]], env)
    assert [d.name for d in plan.damaged] == ["three", "two"]  # shared/x.py, then shared/y.py
    via = Via("pip", sys.executable, (3, 11), recorded="pip")  # the target's interpreter
    assert plan.remedies == (
        Uninstall("one", via),
        Reinstall((Pin("three", "3.0"),), via),
        Reinstall((Pin("two", "2.0"),), via),
    )
    assert removal([dists[3]], env).damaged == ()


def test_the_installer_environment_cannot_redirect_the_install() -> None:
    environ = {
        "PATH": "/bin",
        "PIP_TARGET": "/elsewhere",
        "PIP_PREFIX": "/elsewhere",
        "PIP_USER": "1",
        "PIP_PYTHON": "/other/python",
        "PYTHONPATH": "/elsewhere",
        "PYTHONHOME": "/elsewhere",
        "VIRTUAL_ENV": "/other-venv",
        "UV_PYTHON": "/other/python",
        "PIP_INDEX_URL": "https://example.invalid/simple",
    }
    env = installer_env(environ, "/tmp/x")
    assert env == {
        "PATH": "/bin",
        "PIP_INDEX_URL": "https://example.invalid/simple",
        "PIP_NO_INPUT": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LIBDOCTOR_GUARD": "off",
        "TMPDIR": "/tmp/x",
    }


# --------------------------------------------------------------------- uv, found as users have it

_FIND_UV = """
import sys
from libdoctor.external.installers import find_uv, runnable_argv
from libdoctor.errors import LibdoctorError
import os
try:
    print(find_uv(os.environ))
    print(" ".join(runnable_argv(("uv", "pip", "list"), os.environ)))
except LibdoctorError as exc:
    print("ERROR", exc)
"""


@dataclass
class UvWorld:
    """A bare interpreter (no uv beside it, no uv package) and an empty home and PATH."""

    python: Path
    home: Path
    empty: Path
    pythonpath: list[str]
    env: dict[str, str]

    def place(self, where: Path) -> Path:
        """A real uv binary (the dev extra's, by symlink) at WHERE."""
        where.parent.mkdir(parents=True, exist_ok=True)
        where.symlink_to(uv_path())
        return where

    def uv_package(self, site: Path) -> None:
        """The uv package's own files in SITE, importable: what pip puts there."""
        installed = Path(importlib.util.find_spec("uv").origin).parent  # type: ignore[union-attr, arg-type]
        shutil.copytree(installed, site / "uv", ignore=shutil.ignore_patterns("__pycache__"))
        self.pythonpath.append(str(site))

    def find(self, **env: str) -> list[str]:
        done = subprocess.run(
            [str(self.python), "-c", _FIND_UV],
            env={**self.env, "PYTHONPATH": os.pathsep.join(self.pythonpath), **env},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.splitlines()


@pytest.fixture
def uv_world(new_venv: VenvFactory, tmp_path: Path) -> UvWorld:
    venv = new_venv("bare")
    assert not (venv.path / "bin" / "uv").exists()
    home, empty = tmp_path / "home", tmp_path / "empty-path"
    home.mkdir()
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
    return UvWorld(venv.python, home, empty, [str(SRC_DIR)], env)


def _runs(uv: str) -> bool:
    done = subprocess.run([uv, "--version"], capture_output=True, text=True, check=False)
    return done.returncode == 0 and done.stdout.startswith("uv ")


@pytest.mark.parametrize(
    "way", ["PATH", "$UV", "beside", "--target", "--prefix", "local", "cargo", "xdg", "cargo-home"]
)
def test_uv_is_found_where_users_have_it(uv_world: UvWorld, tmp_path: Path, way: str) -> None:
    """Each way, with PATH holding no uv: a real uv placed there is the one found, and runs.
    On PATH it stays ``uv`` in the argv; found elsewhere, the argv names it."""
    w = uv_world
    env: dict[str, str] = {}
    if way == "PATH":
        expected = w.place(w.empty / "uv")
    elif way == "$UV":
        expected = w.place(tmp_path / "opt" / "uv-0.13")
        env["UV"] = str(expected)
    elif way == "beside":
        expected = w.place(w.python.parent / "uv")
    elif way == "--target":  # pip install --target DIR uv: DIR/uv and DIR/bin/uv
        w.uv_package(tmp_path / "dir")
        expected = w.place(tmp_path / "dir" / "bin" / "uv")
    elif way == "--prefix":  # pip install --prefix P uv
        w.uv_package(tmp_path / "p" / "lib" / "python3.11" / "site-packages")
        expected = w.place(tmp_path / "p" / "bin" / "uv")
    elif way == "local":
        expected = w.place(w.home / ".local" / "bin" / "uv")
    elif way == "cargo":
        expected = w.place(w.home / ".cargo" / "bin" / "uv")
    elif way == "xdg":
        expected = w.place(tmp_path / "xdg-bin" / "uv")
        env["XDG_BIN_HOME"] = str(expected.parent)
    else:
        expected = w.place(tmp_path / "cargo-home" / "bin" / "uv")
        env["CARGO_HOME"] = str(expected.parent.parent)
    found, argv = w.find(**env)
    assert found == str(expected)
    assert argv == ("uv pip list" if way == "PATH" else f"{expected} pip list")
    assert _runs(found)


def test_uv_not_found_is_one_line_naming_where_it_looked(uv_world: UvWorld) -> None:
    w = uv_world
    not_executable = w.home / ".local" / "bin" / "uv"
    not_executable.parent.mkdir(parents=True)
    not_executable.write_bytes(b"")  # mode 644: not a uv anyone can run
    (w.home / "uv").mkdir()  # a folder named uv is not the uv package
    w.pythonpath.append(str(w.home))
    (line,) = w.find()
    assert line == (
        f"ERROR uv was not found (looked at: PATH, $UV (unset), {w.python.parent / 'uv'}, "
        f"the uv package (none importable), {not_executable}, {w.home / '.cargo/bin/uv'})"
    )


def test_path_comes_first_then_uv_then_the_rest(uv_world: UvWorld, tmp_path: Path) -> None:
    w = uv_world
    local = w.place(w.home / ".local" / "bin" / "uv")
    named = w.place(tmp_path / "named" / "uv")
    assert w.find(UV=str(named))[0] == str(named)
    assert w.find()[0] == str(local)
    on_path = w.place(w.empty / "uv")
    assert w.find(UV=str(named))[0] == str(on_path)


def test_a_fix_runs_the_uv_beside_libdoctor_when_path_has_none(
    new_venv: VenvFactory, make_wheel: WheelFactory, cli: Cli
) -> None:
    """A uv-made package with a file deleted; PATH without uv. The fix runs the uv beside the
    interpreter running libdoctor (the dev extra's), names it in the step, and repairs."""
    wheel = make_wheel("ldt-uvfix", "1.0", {"uvfix/__init__.py": b"X = 1\n"})
    venv = new_venv("uvfix")
    uv_install(venv.python, wheel, cache=venv.path.parent / "uv-cache")
    (venv.site_packages / "uvfix" / "__init__.py").unlink()
    bare_path = {"PATH": "/usr/bin:/bin", "UV": None}
    assert shutil.which("uv", path=bare_path["PATH"]) is None
    links = ("--no-index", "--find-links", wheel.parent)
    run = cli("fix", venv.path, "--yes", *links, "--json", env=bare_path)
    assert run.rc == 0, run.describe()
    (result,) = run.json()["fix"]["results"]
    assert result["argv"][:3] == [str(uv_path()), "pip", "install"]
    assert check_errors(cli, venv.path) == []
