from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from libdoctor.environment.target import discover, from_directory, from_python, prefix_of_site_dir
from libdoctor.errors import TargetError


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3.*/site-packages"))


def test_venv_directory(bare_venv: Path) -> None:
    target = from_directory(bare_venv, "argument")
    assert target.prefix == str(bare_venv)
    assert target.site_packages == (str(_site(bare_venv)),)
    assert target.python == str(bare_venv / "bin" / "python")
    assert target.python_version == sys.version_info[:2]


def test_site_packages_directory(bare_venv: Path) -> None:
    target = from_directory(_site(bare_venv), "argument")
    assert target.prefix == str(bare_venv)
    assert target.site_packages == (str(_site(bare_venv)),)
    assert target.python == str(bare_venv / "bin" / "python")


def test_python_option_runs_isolated_and_agrees(bare_venv: Path) -> None:
    target = from_python(str(bare_venv / "bin" / "python"))
    assert Path(target.prefix) == bare_venv
    assert [Path(p).resolve() for p in target.site_packages] == [_site(bare_venv).resolve()]


def test_include_system_site_packages(tmp_path: Path) -> None:
    root = tmp_path / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)],
        check=True,
    )
    target = from_directory(root, "argument")
    assert target.site_dirs[0].inherited is False
    inherited = [s for s in target.site_dirs if s.inherited]
    if not inherited:
        pytest.skip("the base interpreter has no site-packages of its own here")
    assert all(not s.path.startswith(str(root)) for s in inherited)


def test_defaults_follow_virtual_env_then_conda(bare_venv: Path) -> None:
    assert discover(None, None, {"VIRTUAL_ENV": str(bare_venv)}).chosen_by == "$VIRTUAL_ENV"
    assert discover(None, None, {"CONDA_PREFIX": str(bare_venv)}).chosen_by == "$CONDA_PREFIX"
    assert discover(None, None, {}).chosen_by == "the interpreter running libdoctor"


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_not_an_environment_is_one_clear_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x"
    if kind == "file":
        path.write_text("")
    elif kind == "empty":
        path.mkdir()
    with pytest.raises(TargetError) as excinfo:
        from_directory(path, "argument")
    assert "\n" not in str(excinfo.value)


def test_target_and_python_together_is_an_error(bare_venv: Path) -> None:
    with pytest.raises(TargetError):
        discover(str(bare_venv), sys.executable, {})


@pytest.mark.parametrize(
    ("site", "prefix"),
    [
        ("/p/lib/python3.11/site-packages", "/p"),
        ("/p/lib64/python3.12/site-packages", "/p"),
        ("/usr/lib/python3/dist-packages", "/usr"),
        ("/p/Lib/site-packages", "/p"),
        ("/opt/custom/target", "/opt/custom/target"),
    ],
)
def test_prefix_of_site_dir(site: str, prefix: str) -> None:
    assert prefix_of_site_dir(Path(site)) == Path(prefix)
