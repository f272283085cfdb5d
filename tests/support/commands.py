"""Run a command line as the tests do: real processes, output captured as text, no stdin.

``run_command`` never raises on the exit status (the test asserts on it); ``run_checked``
is for the steps a test only needs done, and fails it with the command's output otherwise.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["run_checked", "run_command"]


def run_command(
    argv: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str],
    cwd: Path | str | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """ARGV run with exactly ENV; undecodable output bytes kept (surrogateescape)."""
    return subprocess.run(
        [os.fspath(a) for a in argv],
        env=dict(env),
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def run_checked(
    argv: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str],
    cwd: Path | None = None,
    timeout: float = 300,
) -> str:
    """ARGV's stdout; the test fails, showing both streams, unless it exits 0."""
    proc = run_command(argv, env, cwd, timeout)
    assert proc.returncode == 0, f"{argv}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout
