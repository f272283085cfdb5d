"""How many backups are kept, what each costs, and removing them without losing one a
restore still needs.

Backups are kept per target: the newest ``keep`` (default 5; ``$LIBDOCTOR_KEEP_BACKUPS`` or
``--keep``) after every successful change, never one a killed or failed run left to be
restored (``needs_restore``). A backup's cost is split into its own bytes and bytes it
shares by hard link with other files (a copy made by linking costs no new space).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from libdoctor.errors import LibdoctorError
from libdoctor.repair.journal import BackupInfo, list_backups, scan_backups

__all__ = ["DEFAULT_KEEP", "Usage", "keep_count", "prune", "remove", "usage"]

DEFAULT_KEEP = 5


@dataclass(frozen=True, slots=True)
class Usage:
    """Bytes a backup holds: its own (only it has them) and shared by hard link."""

    own: int
    shared: int
    files: int


def keep_count(environ: Mapping[str, str], given: int | None = None) -> int:
    """--keep, else $LIBDOCTOR_KEEP_BACKUPS, else 5; a one-line error for nonsense."""
    text = str(given) if given is not None else environ.get("LIBDOCTOR_KEEP_BACKUPS")
    if text is None:
        return DEFAULT_KEEP
    try:
        value = int(text)
    except ValueError:
        raise LibdoctorError(f"backups to keep must be a whole number, not {text!r}") from None
    if value < 1:
        raise LibdoctorError(f"backups to keep must be at least 1, not {value}")
    return value


def usage(info: BackupInfo) -> Usage:
    own = shared = files = 0
    for directory, _, names in os.walk(info.path):
        for name in names:
            try:
                st = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            files += 1
            if st.st_nlink > 1:
                shared += st.st_size
            else:
                own += st.st_size
    return Usage(own, shared, files)


def prune(root: str, prefix: str | None, keep: int) -> list[BackupInfo]:
    """Remove all but the newest KEEP backups of PREFIX (every prefix when None); a backup
    a restore still needs is never removed. Returns what was removed, oldest first."""
    by_prefix: dict[str, list[BackupInfo]] = {}
    for info in list_backups(root):  # oldest first
        if prefix is None or info.prefix == prefix:
            by_prefix.setdefault(info.prefix, []).append(info)
    removed = []
    for infos in by_prefix.values():
        for info in _beyond(infos, keep):
            _delete(info)
            removed.append(info)
    return removed


def _beyond(infos: Sequence[BackupInfo], keep: int) -> list[BackupInfo]:
    """The backups past the newest KEEP, except those a restore needs."""
    finished = [i for i in infos if not i.needs_restore]
    return finished[: max(len(finished) - keep, 0)]


def remove(root: str, backup: str, *, force: bool = False) -> BackupInfo:
    """Remove one backup by id; one a restore still needs only with FORCE."""
    found, damaged = scan_backups(root)
    match = [i for i in found if i.id == backup]
    if not match:
        path = os.path.join(root, backup)
        mine = [why for why in damaged if why.startswith((f"{path} ", f"{path}:"))]
        if mine and os.sep not in backup:
            raise LibdoctorError(f"backup {backup} is damaged, not removed: {mine[0]}")
        raise LibdoctorError(f"no backup {backup!r} in {root} (libdoctor backups list)")
    (info,) = match
    if info.needs_restore and not force:
        raise LibdoctorError(
            f"backup {info.id} is {info.state}: a restore may still need it "
            "(libdoctor restore, or remove it with --force)"
        )
    _delete(info)
    return info


def _delete(info: BackupInfo) -> None:
    try:
        shutil.rmtree(info.path)
    except OSError as exc:
        raise LibdoctorError(f"cannot remove backup {info.id}: {exc.strerror or exc}") from None
