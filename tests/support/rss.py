"""Peak memory of a command, for the hostile-input tests' bounds, two ways.

``run_measured(argv)`` runs a child forked by a small launcher and reports its peak
resident set as the kernel counts it (``wait4``'s ``ru_maxrss``), never sampled.
``measured(out)`` is a command prefix (``Cli(...)(..., prefix=measured(out))``): it runs the
command under an address-space cap, so a regression fails the test instead of taking the
machine (a gzip bomb once needed 6 GB), and writes the command's peak RSS in bytes to OUT;
``peak_rss(out)`` reads it back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from support.venvs import REPO_ROOT, libdoctor_env

__all__ = [
    "ADDRESS_SPACE",
    "RSS_BOUND",
    "Measured",
    "launched",
    "measured",
    "peak_rss",
    "run_measured",
    "run_python",
]


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


def launched(peak: Path, argv: Sequence[str | os.PathLike[str]]) -> list[str]:
    """ARGV run by the small launcher, which writes ARGV's own peak RSS (KiB) to PEAK: for a
    test that drives the child's pipes itself."""
    return [sys.executable, "-c", _LAUNCH, os.fspath(peak), *(os.fspath(a) for a in argv)]


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
                launched(peak, argv),
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


RSS_BOUND = 200 << 20  # issue 23: what one bad input may cost at most
ADDRESS_SPACE = 2 << 30  # the cap a measured command runs under (Python needs ~0.5 GB of it)

_WRAPPER = """
import resource, subprocess, sys
out, limit, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
rc = subprocess.call(argv, preexec_fn=cap)
with open(out, "w") as handle:
    handle.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
sys.exit(rc if rc >= 0 else 128 - rc)
"""


def measured(out: Path) -> list[str]:
    return [sys.executable, "-c", _WRAPPER, str(out), str(ADDRESS_SPACE)]


def peak_rss(out: Path) -> int:
    return int(out.read_text())
