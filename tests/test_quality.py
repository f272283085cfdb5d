"""The project's own gates: ruff (lint + format) and mypy --strict, as part of the test run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    found = str(exe) if exe.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


@pytest.mark.parametrize(
    "argv",
    [["check", "src", "tests", "bench"], ["format", "--check", "src", "tests", "bench"]],
    ids=["lint", "format"],
)
def test_ruff(argv: list[str]) -> None:
    done = subprocess.run([_tool("ruff"), *argv], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    if "No module named mypy" in done.stderr:
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    assert done.returncode == 0, done.stdout + done.stderr
