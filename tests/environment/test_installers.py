"""The installer argv: one call for several reinstalls, no interpreter from PATH, an
environment that cannot send the installer elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from libdoctor.environment.installers import (
    NO_PIP_UNINSTALL,
    installer_env,
    merge_reinstalls,
    steps_fix,
    unrunnable,
)
from libdoctor.environment.target import SiteDir, Target

PIP = (sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps")
UV = ("uv", "pip", "install", "--reinstall", "--no-deps", "--python", sys.executable)
VENV = Target("/env", sys.executable, (SiteDir("/env/site", "/env"),), "test", (3, 11))
FOLDER = Target("/f", None, (SiteDir("/f", "/f"),), "test", (3, 11), "/f", "Python 3.11")


@pytest.mark.parametrize(
    ("steps", "merged"),
    [
        ([(*PIP, "a==1"), (*PIP, "b==2"), (*PIP, "c==3")], [(*PIP, "a==1", "b==2", "c==3")]),
        ([(*PIP, "a==1"), (*UV, "b==2")], [(*PIP, "a==1"), (*UV, "b==2")]),
        (
            [(sys.executable, "-m", "pip", "uninstall", "--yes", "x"), (*PIP, "a==1")],
            [(sys.executable, "-m", "pip", "uninstall", "--yes", "x"), (*PIP, "a==1")],
        ),
        ([(*PIP, "a==1"), ("/other/python", *PIP[1:], "b==2")], None),  # two interpreters
        (
            [(*PIP[:4], "--ignore-installed", "--no-deps", "a==1"), (*PIP, "b==2")],
            None,  # another way to reinstall: another call
        ),
    ],
)
def test_adjacent_reinstalls_through_one_installer_merge(
    steps: list[tuple[str, ...]], merged: list[tuple[str, ...]] | None
) -> None:
    assert list(merge_reinstalls(steps)) == (steps if merged is None else merged)


def test_a_merged_fix_is_one_command() -> None:
    fix = steps_fix((*PIP, "a==1"), (*PIP, "b==2"))
    assert fix.argv == (*PIP, "a==1", "b==2") and fix.steps == (fix.argv,)


def test_what_libdoctor_refuses_to_run(tmp_path: Path) -> None:
    assert unrunnable((*PIP, "a==1"), VENV) is None
    assert unrunnable((*UV, "a==1"), VENV) is None
    placeholder = unrunnable(("<python3.11>", *PIP[1:], "a==1"), FOLDER) or ""
    assert "--python PATH" in placeholder and "(Python 3.11)" in placeholder
    assert "never takes one from PATH" in placeholder
    bare = unrunnable(("python", *PIP[1:], "a==1"), VENV) or ""
    assert "absolute, executable path" in bare
    uv_bare = unrunnable(("uv", "pip", "install", "--python", "python3", "a==1"), VENV) or ""
    assert "absolute, executable path" in uv_bare
    assert "pip cannot uninstall x" in (unrunnable((NO_PIP_UNINSTALL, "x"), FOLDER) or "")
    conda = ("conda", "install", "--yes", "--prefix", "/env", "x=1")
    assert unrunnable(conda, VENV) is None  # named, never run: the step check refuses it


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
