"""Peak memory of one command, for the hostile-input tests' bounds.

``measured(out)`` is a command prefix (``Cli(...)(..., prefix=measured(out))``): it runs the
command under an address-space cap, so a regression fails the test instead of taking the
machine (a gzip bomb once needed 6 GB), and writes the command's peak RSS in bytes to OUT;
``peak_rss(out)`` reads it back.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["ADDRESS_SPACE", "RSS_BOUND", "measured", "peak_rss"]

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
