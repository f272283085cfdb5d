"""An environment made by real ``virtualenv`` is clean: its seeder writes RECORD rows for
bytecode it never compiled (``pkg/mod.cpython-311.pyc`` next to the source, ``pkg/__pycache__``
directories, no hash, no size); an installer's promise of bytecode is not a missing file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.venvs import libdoctor_env, uv_path


@pytest.fixture(scope="module")
def virtualenv_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("virtualenv")
    uv = str(uv_path())
    tool = root / "tool"
    made = subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(tool)], check=False)
    got = subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(tool / "bin" / "python"), "virtualenv"],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode or got.returncode:
        pytest.skip(f"virtualenv cannot be installed here: {got.stderr.strip()[-200:]}")
    env = root / "env"
    subprocess.run([str(tool / "bin" / "virtualenv"), "-q", str(env)], check=True)
    return env


def test_a_fresh_virtualenv_is_clean(virtualenv_env: Path) -> None:
    record = next((virtualenv_env / "lib").glob("python*/site-packages/pip-*.dist-info/RECORD"))
    rows = record.read_text().splitlines()
    assert any(r.split(",")[0].endswith("__pycache__") for r in rows), "the seeder's rows"
    done = subprocess.run(
        [sys.executable, "-m", "libdoctor", "check", str(virtualenv_env), "--json"],
        env=libdoctor_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["findings"] == []
