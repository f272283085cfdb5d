"""The program: ``python -m libdoctor``, and the ``libdoctor`` console script (``run``).

The cyclic garbage collector is off before anything else is imported: a run is a short
process that builds ~100k acyclic objects (one per RECORD row), and the collector would
only re-scan them, imports included (see cli.main). Importing this module is running
the program; the library is ``libdoctor`` and its modules.
"""

from __future__ import annotations

import gc

gc.disable()

from libdoctor.cli.main import console_main  # noqa: E402  (after gc.disable, on purpose)


def run() -> None:
    """The console script's entry point."""
    console_main()


if __name__ == "__main__":
    console_main()
