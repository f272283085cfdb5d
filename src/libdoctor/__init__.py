"""libdoctor: the truth about a Python environment's files and native libraries.

The Python API (``check``, ``plan_uninstall``, ``snapshot`` and the values they return) is
loaded on first use (PEP 562 ``__getattr__``), so ``import libdoctor`` stays cheap: the
analysis stack is imported by the first call, never by the import.
"""

from __future__ import annotations

from libdoctor.version import __version__

TYPE_CHECKING = False  # as typing's, without importing typing (~3 ms) at every start

__all__ = [
    "Finding",
    "LibdoctorError",
    "Plan",
    "Report",
    "Severity",
    "Snapshot",
    "__version__",
    "check",
    "plan_uninstall",
    "snapshot",
]

if TYPE_CHECKING:
    from libdoctor.analysis.snapshot import Snapshot
    from libdoctor.api import Report, check, plan_uninstall, snapshot
    from libdoctor.errors import LibdoctorError
    from libdoctor.findings import Finding, Severity
    from libdoctor.whatif.plan import Plan

# Each public name -> the module that defines it.
_HOMES = {
    "check": "libdoctor.api",
    "plan_uninstall": "libdoctor.api",
    "snapshot": "libdoctor.api",
    "Report": "libdoctor.api",
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
