"""Which prefixes a repair may write to: never the system's own trees, only an environment.

``fix``, ``uninstall`` and ``restore`` change files; pointed at ``/`` or ``/usr`` (a typo,
a ``..`` too many) they could delete or overwrite what the system runs on, and a directory
without distributions is not an environment anyone installed into. Both are refused before
anything is listed, backed up or run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from libdoctor.errors import LibdoctorError

if TYPE_CHECKING:
    from libdoctor.environment.target import Target

__all__ = ["SYSTEM_ROOTS", "refuse_unwritable", "write_refusal"]

SYSTEM_ROOTS = frozenset({"/", "/usr"})


def write_refusal(prefix: str, site_dirs: Iterable[str] | None) -> str | None:
    """Why a repair must not write to PREFIX, or None. SITE_DIRS (its own, not inherited)
    must hold a distribution; None when the prefix's contents cannot decide (a restore puts
    back an environment its repair may have emptied)."""
    real = os.path.realpath(prefix)
    if real in SYSTEM_ROOTS:
        return f"refused: {prefix} is the system's {real}, not an environment libdoctor changes"
    if site_dirs is not None and not any(_holds_distributions(d) for d in site_dirs):
        return (
            f"refused: {prefix} is not a Python environment (no site-packages directory "
            "with installed distributions): nothing to change there"
        )
    return None


def refuse_unwritable(target: Target) -> None:
    """A one-line error for a target no change may write to (``write_refusal``)."""
    why = write_refusal(target.prefix, [s.path for s in target.site_dirs if not s.inherited])
    if why is not None:
        raise LibdoctorError(why)


def _holds_distributions(site_dir: str) -> bool:
    try:
        with os.scandir(site_dir) as entries:
            return any(e.name.endswith((".dist-info", ".egg-info")) for e in entries)
    except OSError:
        return False
