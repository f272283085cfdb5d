"""Issue 18: libdoctor installs as people install tools. A wheel built from this tree, run by
real ``uvx`` (``uv tool run --from WHEEL``) and installed by real ``pipx``, checks a venv made in
the test. Opt-in: ``pytest -m slow`` (building the wheel and the tool environments takes a while).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from support.commands import run_command
from support.venvs import SRC_DIR, VenvFactory, uv_path

pytestmark = pytest.mark.slow
REPO = SRC_DIR.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = run_command(
        [str(uv_path()), "build", "--wheel", "--out-dir", str(out), str(REPO)], env, "/", 600
    )
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("libdoctor-*.whl")
    return built


def _tool_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        {
            "UV_TOOL_DIR": str(home / "uv-tools"),
            "UV_TOOL_BIN_DIR": str(home / "uv-bin"),
            "UV_CACHE_DIR": str(home / "uv-cache"),
            "PIPX_HOME": str(home / "pipx"),
            "PIPX_BIN_DIR": str(home / "pipx-bin"),
            "XDG_CACHE_HOME": str(home / "cache"),
        }
    )
    return env


def test_uvx_runs_libdoctor_from_the_wheel(
    wheel: Path, new_venv: VenvFactory, tmp_path: Path
) -> None:
    venv = new_venv("uvx-target")
    env = _tool_env(tmp_path)
    argv = [str(uv_path()), "tool", "run", "--python", sys.executable, "--from", str(wheel)]
    done = run_command([*argv, "libdoctor", "check", str(venv.path), "--json"], env, "/", 600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"] == []


def test_pipx_installs_libdoctor_from_the_wheel(
    wheel: Path, new_venv: VenvFactory, tmp_path: Path
) -> None:
    venv = new_venv("pipx-target")
    env = _tool_env(tmp_path)
    pipx_venv = tmp_path / "pipx-venv"
    made = run_command(
        [str(uv_path()), "venv", "--python", sys.executable, str(pipx_venv)], env, "/", 600
    )
    assert made.returncode == 0, made.stderr
    got = run_command(
        [str(uv_path()), "pip", "install", "--python", str(pipx_venv), "pipx"], env, "/", 600
    )
    if got.returncode != 0:
        pytest.skip(f"pipx cannot be installed here: {got.stderr.strip().splitlines()[-1:]}")
    pipx = pipx_venv / "bin" / "pipx"
    installed = run_command(
        [str(pipx), "install", "--python", sys.executable, str(wheel)], env, "/", 600
    )
    assert installed.returncode == 0, installed.stderr + installed.stdout
    tool = tmp_path / "pipx-bin" / "libdoctor"
    done = run_command([str(tool), "check", str(venv.path), "--json"], env, "/", 600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["findings"] == []
    removed = run_command(
        [str(tool), "uninstall", "-y", "--dry-run", "pip", str(venv.path)], env, "/", 600
    )
    assert "unrecognized arguments" not in removed.stderr, removed.stderr
