"""Whose change each difference is: the backed-up run's own, or something else's.

A rollback or a restore undoes what libdoctor and the installer it ran changed, and nothing
else: a log another process wrote into the environment meanwhile, or a later ``pip install``,
stays. What the run changed is known three ways, surest first:

- the files saved before each step (the paths the step was to delete or overwrite);
- the paths named by the RECORDs each step left (read as it ended), the dist-info dirs whole;
- entries created while a step ran (their ctime inside the step's window) in a directory the
  installer writes to: one that holds a path above, below the prefix itself; and the
  installer's own lock file at the prefix root. This is what a killed step leaves, whose
  RECORDs were never written;
- everything inside a new directory of the run's (pip's stash ``~orch`` holds a moved tree
  whose entries keep their old ctimes).

The limit: another process writing into a directory the installer writes to (site-packages,
a package's own directory) *while a step runs* cannot be told from the installer, and its
entries are undone with the run's. Anything written elsewhere, or at any other time, stays.

A finished run also wrote its own listing as it ended (``after.json``): an entry not in it
appeared later, from elsewhere, and a path of the run's own that differs from it was changed
later by someone else, so a restore says so and asks first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from libdoctor.bounded import read_file
from libdoctor.environment.record import parse_record
from libdoctor.external.installers import INSTALLER_DROPPINGS
from libdoctor.repair.journal import BackupInfo, Entry

__all__ = ["RESTORE_TEMP", "Undo", "plan_undo", "records_written"]

RESTORE_TEMP = ".libdoctor-restore-"  # a rollback's own temporary (a kill may leave one)

# File times come from the kernel's coarse clock, a tick behind time.time_ns(): a window is
# widened by this much at each end.
CLOCK_SLACK_NS = 50_000_000


@dataclass(frozen=True, slots=True)
class Undo:
    """What putting a prefix back involves, decided before anything changes."""

    remove: tuple[str, ...]  # entries the run created: deepest first
    recreate: tuple[str, ...]  # directories of the listing the run removed: parents first
    left_alone: tuple[tuple[str, str], ...]  # (path, why): differences that are not the run's
    changed_later: tuple[str, ...]  # the run's own paths that someone changed after it ended


def records_written(listing: Mapping[str, Entry]) -> tuple[str, ...]:
    """Every path named by a RECORD that is new or changed since LISTING, in the site dirs
    LISTING holds distributions in, and those dist-info directories themselves."""
    sites = {os.path.dirname(p) for p, e in listing.items() if _is_dist_info(p, e)}
    out: list[str] = []
    for site in sorted(sites):
        try:
            names = [n for n in os.listdir(site) if n.endswith(".dist-info")]
        except OSError:
            continue
        for name in names:
            dist_info = os.path.join(site, name)
            record = os.path.join(dist_info, "RECORD")
            try:
                st = os.lstat(record)
            except OSError:
                continue
            before = listing.get(record)
            if before is not None and (before.size, before.mtime_ns) == (
                st.st_size,
                st.st_mtime_ns,
            ):
                continue
            out.append(dist_info)
            out += _record_paths(record, site)
    return tuple(dict.fromkeys(out))


def _end(ended_ns: int | None) -> int | None:
    return None if ended_ns is None else ended_ns + CLOCK_SLACK_NS


def _is_dist_info(path: str, entry: Entry) -> bool:
    return entry.kind == "dir" and path.endswith(".dist-info")


def _record_paths(record: str, site: str) -> list[str]:
    try:  # bounded: a RECORD that is a link to /dev/zero, or gigabytes, names nothing
        entries = parse_record(read_file(record)).entries
    except (OSError, ValueError):
        return []
    return [os.path.normpath(os.path.join(site, e.path)) for e in entries if e.path]


def _ancestors(path: str, prefix: str) -> Iterable[str]:
    """PATH's parent directories strictly below PREFIX."""
    parent = os.path.dirname(path)
    while parent != prefix and parent.startswith(prefix + os.sep):
        yield parent
        parent = os.path.dirname(parent)


class _Ownership:
    """The run's paths, dist-info dirs, territory and time windows, from its journal."""

    def __init__(self, info: BackupInfo) -> None:
        self.prefix = info.prefix
        self.saved = frozenset(f.path for f in info.files)
        wrote = {p for step in info.steps for p in step.wrote}
        self.own = self.saved | wrote
        self.record_dirs = frozenset(p for p in wrote if p.endswith(".dist-info"))
        self.territory = frozenset(a for p in self.own for a in _ancestors(p, self.prefix))
        self.droppings = frozenset(os.path.join(self.prefix, n) for n in INSTALLER_DROPPINGS)
        self.windows = tuple(
            (s.started_ns - CLOCK_SLACK_NS, _end(s.ended_ns))
            for s in info.steps
            if s.started_ns is not None
        )

    def named(self, path: str) -> bool:
        """Saved, named by a RECORD the run wrote, inside a dist-info dir it wrote, or a
        rollback's own temporary file."""
        if path in self.own or os.path.basename(path).startswith(RESTORE_TEMP):
            return True
        return any(a in self.record_dirs for a in _ancestors(path, self.prefix))

    def in_territory(self, path: str) -> bool:
        return path in self.territory or any(
            a in self.territory for a in _ancestors(path, self.prefix)
        )

    def created_by_run(self, path: str, listing: Mapping[str, Entry]) -> bool:
        """Created while a step ran, where the installer writes."""
        if not (path in self.droppings or self._nearest_listed(path, listing) in self.territory):
            return False
        try:
            ctime = os.lstat(path).st_ctime_ns
        except OSError:
            return False
        return any(start <= ctime and (end is None or ctime <= end) for start, end in self.windows)

    def _nearest_listed(self, path: str, listing: Mapping[str, Entry]) -> str:
        for parent in _ancestors(path, self.prefix):
            if parent in listing:
                return parent
        return self.prefix


def plan_undo(
    info: BackupInfo,
    listing: Mapping[str, Entry],
    after: Mapping[str, Entry] | None,
    current: Mapping[str, Entry],
) -> Undo:
    """Sort the differences between LISTING and CURRENT into the run's own (undone) and the
    rest (left alone); with AFTER, the run's own that were changed again after it ended."""
    owned = _Ownership(info)
    remove: list[str] = []
    left: list[tuple[str, str]] = []
    later: list[str] = []
    own_dirs: set[str] = set()  # new directories of the run's: what is inside is its too
    for path in sorted(current, key=lambda p: (p.count(os.sep), p)):
        now, before = current[path], listing.get(path)
        if before is not None and before.kind == now.kind:
            continue
        ended = None if after is None else after.get(path)
        if after is not None and (ended is None or ended.kind != now.kind):
            if owned.named(path):
                later.append(path)
                remove.append(path)
            else:
                left.append((path, "appeared after the run ended"))
            continue
        if not (
            os.path.dirname(path) in own_dirs
            or owned.named(path)
            or owned.created_by_run(path, listing)
        ):
            left.append((path, "not written by the run"))
            continue
        remove.append(path)
        if now.kind == "dir":
            own_dirs.add(path)
        if ended is not None and now.kind == "file" and not ended.same(now):
            later.append(path)
    later += _saved_changed_later(owned.saved, current, after)
    recreate = _dirs_to_recreate(owned, listing, after, current)
    left += _foreign_edits(owned, listing, current)
    remove.sort(key=lambda p: (-p.count(os.sep), p))
    return Undo(tuple(remove), tuple(recreate), tuple(sorted(left)), tuple(sorted(set(later))))


def _saved_changed_later(
    saved: frozenset[str], current: Mapping[str, Entry], after: Mapping[str, Entry] | None
) -> list[str]:
    """Saved paths whose state is not the one the run left: a restore would overwrite a
    later change."""
    if after is None:
        return []
    out = []
    for path in saved:
        ended, now = after.get(path), current.get(path)
        if (ended is None) != (now is None) or (ended is not None and not ended.same(now)):
            out.append(path)
    return out


def _dirs_to_recreate(
    owned: _Ownership,
    listing: Mapping[str, Entry],
    after: Mapping[str, Entry] | None,
    current: Mapping[str, Entry],
) -> list[str]:
    """Missing directories of the listing that the run removed (never one that outlived it),
    every parent a saved file is put back into, and those its journal names as its own."""
    needed = {a for p in owned.saved for a in _ancestors(p, owned.prefix)} | owned.own
    out = []
    for path, entry in listing.items():
        if entry.kind != "dir" or (path in current and current[path].kind == "dir"):
            continue
        removed_by_run = (after is None or path not in after) and owned.in_territory(path)
        if path in needed or removed_by_run:
            out.append(path)
    return sorted(out, key=lambda p: (p.count(os.sep), p))


def _foreign_edits(
    owned: _Ownership, listing: Mapping[str, Entry], current: Mapping[str, Entry]
) -> list[tuple[str, str]]:
    """Files of the listing changed or deleted, not by the run: left as they are."""
    out = []
    for path, before in listing.items():
        if before.kind == "dir" or path in owned.saved:
            continue
        now = current.get(path)
        if now is None:
            if not owned.named(path):
                out.append((path, "deleted, not by the run"))
        elif now.kind == before.kind and not _same_file(before, now) and not owned.named(path):
            out.append((path, "changed, not by the run"))
    return out


def _same_file(before: Entry, now: Entry) -> bool:
    return (before.mode, before.size, before.mtime_ns) == (now.mode, now.size, now.mtime_ns)
