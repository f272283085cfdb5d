"""A child process and the most memory it held: its peak resident set, as the kernel counts
it (``wait4``'s ``ru_maxrss``), never sampled. For the hostile-input tests' bounds."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from support.venvs import REPO_ROOT, libdoctor_env

__all__ = ["Measured", "run_measured", "run_python"]


class Measured(NamedTuple):
    rc: int
    stdout: str
    stderr: str
    peak_mb: float  # the child's peak resident set
    killed: bool  # it ran past the timeout

    def describe(self) -> str:
        return (
            f"rc={self.rc} peak={self.peak_mb:.0f} MB killed={self.killed}\n--- stdout\n"
            f"{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"
        )


def run_measured(
    argv: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str | None] | None = None,
    cache_home: Path | None = None,
    timeout: float = 120,
) -> Measured:
    """ARGV run to its end (killed after TIMEOUT), with libdoctor's test environment."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [os.fspath(a) for a in argv],
            stdout=out,
            stderr=err,
            env=libdoctor_env(env, cache_home),
            cwd=REPO_ROOT,
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killed = not timer.is_alive()
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Measured(
            proc.returncode,
            out.read().decode("utf-8", "surrogateescape"),
            err.read().decode("utf-8", "surrogateescape"),
            usage.ru_maxrss / 1024,  # KiB on Linux
            killed,
        )


def run_python(
    code: str, *args: str, cache_home: Path | None = None, timeout: float = 120
) -> Measured:
    """``python -c CODE ARGS`` with src/ on the path."""
    return run_measured([sys.executable, "-c", code, *args], cache_home=cache_home, timeout=timeout)
