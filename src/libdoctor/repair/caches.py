"""Clearing compile caches: only entries the cache's layout recognises, never while in use,
each root's removal backed up and journaled first.

A cache lives outside the environment, so its backup is a ``BackupSession`` whose prefix is
the cache root itself (``/tmp/torchinductor_me``, ``~/.triton/cache``; for bytecode the site
dir): the root is listed, every file of the entries to go is kept (a hard link on the same
file system: the removal then costs nothing; a copy elsewhere), the removal is the session's
one step, and the directories it removed are journaled as its own, so ``libdoctor restore ID``
puts the entries back byte for byte and leaves what the tool wrote since alone.

Refused before anything changes: a root that is ``/``, ``/usr``, a home or temp directory
itself (a variable pointing a tool at ``$HOME`` must not make ``--all`` empty it); an entry
under a build lock the tool holds (torch extensions' ``lock``); an entry a running process
has open or mapped (``/proc/*/fd``, ``/proc/*/maps``, where readable).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from libdoctor.environment.model import is_inside
from libdoctor.errors import LibdoctorError
from libdoctor.external.installers import Notify
from libdoctor.external.process import checkpoint
from libdoctor.repair.backup import BackupSession
from libdoctor.stack.caches import CacheScan, Entry, kind_named

__all__ = ["Cleared", "clear", "refusals", "refuse", "select"]


@dataclass(frozen=True, slots=True)
class Cleared:
    kind: str
    root: str
    entries: tuple[str, ...]  # entry names
    files: int
    size: int
    backup: str | None  # the backup id (None: --no-backup)


Selection = list[tuple[CacheScan, list[Entry]]]


def select(scans: Sequence[CacheScan], *, stale_only: bool, kinds: Iterable[str] = ()) -> Selection:
    """The entries to remove: the stale ones, or every recognised one (``--all``). Unknown
    files are never selected."""
    wanted = set(kinds)
    out: Selection = []
    for scan in scans:
        if wanted and scan.kind not in wanted:
            continue
        entries = list(scan.stale if stale_only else scan.entries)
        if entries:
            out.append((scan, entries))
    return out


def _unsafe_roots(environ: Mapping[str, str]) -> set[str]:
    homes = {environ.get("HOME", ""), os.path.expanduser("~")}
    temps = {environ.get(n, "") for n in ("TMPDIR", "TEMP", "TMP")} | {"/tmp", "/var/tmp"}
    return {os.path.realpath(p) for p in homes | temps if p} | {"/", "/usr"}


def _open_paths() -> dict[str, int]:
    """Every path a process has open or mapped, and one pid holding it (what is readable)."""
    found: dict[str, int] = {}
    me = os.getpid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if pid == me:
            continue
        base = f"/proc/{pid}"
        try:
            for fd in os.listdir(f"{base}/fd"):
                target = os.readlink(f"{base}/fd/{fd}")
                if target.startswith("/"):
                    found.setdefault(target, pid)
        except OSError:
            pass
        try:
            with open(f"{base}/maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    path = line.split(None, 5)[5].strip() if line.count(" ") >= 5 else ""
                    if path.startswith("/"):
                        found.setdefault(path.removesuffix(" (deleted)"), pid)
        except (OSError, IndexError):
            pass
    return found


def refusals(selection: Selection, environ: Mapping[str, str]) -> list[str]:
    """Why the clear must not run, one line each: an unsafe root, a lock, an open file."""
    why = []
    unsafe = _unsafe_roots(environ)
    for scan, _ in selection:
        if os.path.realpath(scan.root) in unsafe:
            why.append(f"{scan.kind}: the root {scan.root} is not a cache directory")
    for scan, entries in selection:
        lock = getattr(kind_named(scan.kind), "lock", None)
        for entry in entries:
            if lock and os.path.lexists(os.path.join(entry.path, lock)):
                why.append(f"{scan.kind}: {entry.path} is being built ({lock} exists)")
    why += _in_use(selection)
    return why


def _in_use(selection: Selection) -> list[str]:
    places: dict[str, str] = {}
    for _, entries in selection:
        for entry in entries:
            for path in entry.members or (entry.path,):
                places[os.path.realpath(path)] = entry.path
    why = []
    for path, pid in _open_paths().items():
        probe = path
        while probe not in places and probe not in ("/", ""):
            probe = os.path.dirname(probe)
        if probe in places:
            why.append(f"{places[probe]} is in use: process {pid} has {path} open")
    return sorted(set(why))


def _contents(entry: Entry) -> tuple[list[str], list[str]]:
    """(files and symlinks to keep, directories the removal deletes) of one entry."""
    if entry.members:
        return list(entry.members), []
    if os.path.islink(entry.path) or not os.path.isdir(entry.path):
        return [entry.path], []
    files, dirs = [], [entry.path]
    for directory, subdirs, names in os.walk(entry.path):
        files += [os.path.join(directory, n) for n in names]
        for name in list(subdirs):
            path = os.path.join(directory, name)
            if os.path.islink(path):
                files.append(path)
                subdirs.remove(name)
            else:
                dirs.append(path)
    return files, dirs


def _remove(entry: Entry, root: str) -> None:
    """Delete one entry; every path's real parent must lie inside the root."""
    real_root = os.path.realpath(root)
    for path in entry.members or (entry.path,):
        if not is_inside(os.path.realpath(os.path.dirname(path)), real_root) or path == root:
            raise LibdoctorError(f"refused: {path} is not inside the cache root {root}")
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)


def _clear_root(
    scan: CacheScan, entries: list[Entry], backups: str | None, command: str, notify: Notify
) -> Cleared:
    kept: list[str] = []
    removed_dirs: list[str] = []
    for entry in entries:
        files, dirs = _contents(entry)
        kept += files
        removed_dirs += dirs
    cleared = Cleared(
        scan.kind,
        scan.root,
        tuple(e.name for e in entries),
        sum(e.files for e in entries),
        sum(e.size for e in entries),
        None,
    )
    if backups is None:
        for entry in entries:
            _remove(entry, scan.root)
        return cleared
    session = BackupSession(backups, scan.root, command, notify)
    try:
        saved = session.save(kept)
        session.begin(("libdoctor", "caches", "clear", scan.kind), saved)
        for number, entry in enumerate(entries):
            if number == len(entries) // 2:
                checkpoint("mid-clear")
            _remove(entry, scan.root)
        session.end(0, own=removed_dirs)
    except BaseException:
        session.rollback()
        raise
    info = session.finish("done")
    return Cleared(
        cleared.kind, cleared.root, cleared.entries, cleared.files, cleared.size, info.id
    )


def refuse(selection: Selection, environ: Mapping[str, str]) -> None:
    """The one-line error ``clear`` stops with before anything changes (a dry run too: it
    answers what the real run would)."""
    why = refusals(selection, environ)
    if why:
        raise LibdoctorError("refused, nothing was removed: " + "; ".join(why[:5]))


def clear(
    selection: Selection,
    *,
    backups: str | None,
    command: str,
    environ: Mapping[str, str],
    notify: Notify | None = None,
) -> list[Cleared]:
    """Remove the selected entries, root by root, each root's removal one backup (unless
    BACKUPS is None). Refused as a whole, before anything changes, by ``refusals``.
    NOTIFY: told of damaged backups skipped (one line)."""
    refuse(selection, environ)
    say = notify or (lambda _text: None)
    return [_clear_root(scan, entries, backups, command, say) for scan, entries in selection]
