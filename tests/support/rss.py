"""A child process and the most memory it held: its peak resident set, as the kernel counts
it (``wait4``'s ``ru_maxrss``, of a child forked by a small launcher), never sampled. For the
hostile-input tests' bounds."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
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


# Forks ARGV and waits for it: a child forked from the test process would start out with the
# test's own resident pages (hundreds of MB into a session) and report them as its peak.
_LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run_measured(
    argv: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str | None] | None = None,
    cache_home: Path | None = None,
    timeout: float = 120,
) -> Measured:
    """ARGV run to its end (killed after TIMEOUT), with libdoctor's test environment."""
    with tempfile.TemporaryDirectory() as work:
        peak = Path(work) / "peak"
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _LAUNCH, peak, *(os.fspath(a) for a in argv)],
                capture_output=True,
                env=libdoctor_env(env, cache_home),
                cwd=REPO_ROOT,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out, err, rc, killed = exc.stdout or b"", exc.stderr or b"", -9, True
        else:
            out, err, rc, killed = proc.stdout, proc.stderr, proc.returncode, False
        kib = int(peak.read_text()) if peak.exists() else 0
    return Measured(
        rc,
        out.decode("utf-8", "surrogateescape"),
        err.decode("utf-8", "surrogateescape"),
        kib / 1024,  # KiB on Linux
        killed,
    )


def run_python(
    code: str, *args: str, cache_home: Path | None = None, timeout: float = 120
) -> Measured:
    """``python -c CODE ARGS`` with src/ on the path."""
    return run_measured([sys.executable, "-c", code, *args], cache_home=cache_home, timeout=timeout)
