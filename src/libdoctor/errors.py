"""The one exception tree: raised only when libdoctor itself cannot go on.

Problems found in the *environment* are findings, never exceptions.
"""

from __future__ import annotations


class LibdoctorError(Exception):
    """libdoctor cannot go on (bad arguments, unreadable target, ...). Exit code 2."""


class TargetError(LibdoctorError):
    """The target does not exist or holds no Python environment."""
