"""libdoctor: the truth about a Python environment's files and native libraries.

The Python API (``check``, ``plan_uninstall``, ``snapshot``; the changes ``fix``,
``uninstall``, ``install``, ``restore``; and the values they take and return) is loaded on
first use (PEP 562 ``__getattr__``), so ``import libdoctor`` stays cheap: the
analysis stack is imported by the first call, never by the import.
"""

from __future__ import annotations

from libdoctor.version import __version__

TYPE_CHECKING = False  # as typing's, without importing typing (~3 ms) at every start

__all__ = [
    "Backups",
    "ChangeOptions",
    "Finding",
    "FixResult",
    "GuardedResult",
    "LibdoctorError",
    "Outcome",
    "Plan",
    "Progress",
    "Report",
    "Severity",
    "Snapshot",
    "__version__",
    "backups",
    "check",
    "fix",
    "install",
    "plan_uninstall",
    "restore",
    "snapshot",
    "uninstall",
]

if TYPE_CHECKING:
    from libdoctor.analysis.snapshot import Snapshot
    from libdoctor.api import (
        Backups,
        Report,
        backups,
        check,
        fix,
        install,
        plan_uninstall,
        restore,
        snapshot,
        uninstall,
    )
    from libdoctor.errors import LibdoctorError
    from libdoctor.findings import Finding, Severity
    from libdoctor.repair.apply import ChangeOptions, FixResult, GuardedResult, Outcome, Progress
    from libdoctor.whatif.plan import Plan

# Each public name -> the module that defines it.
_HOMES = {
    "check": "libdoctor.api",
    "plan_uninstall": "libdoctor.api",
    "snapshot": "libdoctor.api",
    "Report": "libdoctor.api",
    "fix": "libdoctor.api",
    "uninstall": "libdoctor.api",
    "install": "libdoctor.api",
    "restore": "libdoctor.api",
    "backups": "libdoctor.api",
    "Backups": "libdoctor.api",
    "ChangeOptions": "libdoctor.repair.apply",
    "Progress": "libdoctor.repair.apply",
    "Outcome": "libdoctor.repair.apply",
    "FixResult": "libdoctor.repair.apply",
    "GuardedResult": "libdoctor.repair.apply",
    "Finding": "libdoctor.findings",
    "Severity": "libdoctor.findings",
    "LibdoctorError": "libdoctor.errors",
    "Plan": "libdoctor.whatif.plan",
    "Snapshot": "libdoctor.analysis.snapshot",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'libdoctor' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
