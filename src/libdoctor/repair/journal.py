"""A backup as its journal records it: the values, written and read back, and found again.

A backup directory (``<cache>/backups/<id>/``) holds ``listing.json`` (type, mode, size, mtime
of every entry of the prefix before the first step), ``journal.json`` (the steps and the saved
files, written atomically and fsync'd) and ``files/`` (the copies). Taking one is
``backup.BackupSession``; putting a prefix back is ``rollback``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from libdoctor import __version__
from libdoctor.environment.model import is_inside
from libdoctor.errors import LibdoctorError

__all__ = [
    "BackupInfo",
    "Entry",
    "SavedFile",
    "StepRecord",
    "interrupted",
    "list_backups",
    "list_tree",
    "load",
    "locate",
]


SCHEMA_VERSION = 1
BackupState = Literal["in-progress", "done", "failed", "rolled-back", "restored"]
StepState = Literal["running", "done", "failed"]
EntryKind = Literal["file", "dir", "symlink", "other"]
CHUNK = 1 << 20
JOURNAL = "journal.json"
LISTING = "listing.json"


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the prefix listing (lstat: a symlink is itself, never its target)."""

    kind: EntryKind
    mode: int
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class SavedFile:
    path: str  # absolute, inside the prefix
    kind: Literal["file", "symlink"]
    copy: str | None  # the copy's name inside the backup dir ("files/000001")
    link: str | None  # the symlink's target
    mode: int
    mtime_ns: int
    size: int
    sha256: str | None
    original: bool  # False: it had already changed since the listing when it was copied


@dataclass(frozen=True, slots=True)
class StepRecord:
    argv: tuple[str, ...]
    state: StepState
    returncode: int | None = None
    saved: int = 0  # files copied before this step
    message: str = ""
    pid: int | None = None  # the installer's, journaled as it starts


@dataclass(frozen=True, slots=True)
class BackupInfo:
    id: str
    path: str  # the backup directory
    prefix: str
    created: str  # ISO 8601, UTC
    command: str
    state: BackupState
    steps: tuple[StepRecord, ...]
    files: tuple[SavedFile, ...]
    history: tuple[Mapping[str, Any], ...] = ()

    @property
    def needs_restore(self) -> bool:
        """Left by a run that was killed, or whose failure could not be rolled back."""
        return self.state in ("in-progress", "failed")


# --------------------------------------------------------------------------- small helpers


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: str, document: Any) -> None:
    """Atomically: a temporary file, fsync, rename, fsync of the directory."""
    tmp = f"{path}.tmp"
    data = json.dumps(document, indent=1).encode("ascii")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def entry_kind(mode: int) -> EntryKind:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def list_tree(root: str, skip: str | None = None) -> dict[str, Entry]:
    """Every entry under ROOT (ROOT included) by absolute path; symlinks are not followed."""
    out: dict[str, Entry] = {}
    st = os.lstat(root)
    out[root] = Entry(entry_kind(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns)
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for item in entries:
            path = item.path
            if skip is not None and is_inside(path, skip):
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = entry_kind(st.st_mode)
            out[path] = Entry(kind, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns)
            if kind == "dir":
                stack.append(path)
    return out


# --------------------------------------------------------------------------- journal I/O


def info_to_json(info: BackupInfo) -> dict[str, Any]:
    document = asdict(info)
    del document["path"]  # where the journal is, not what it says
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "libdoctor", "version": __version__},
        **document,
    }


def load(path: str) -> BackupInfo:
    """Read one backup's journal; a one-line LibdoctorError when it is not a backup."""
    try:
        with open(os.path.join(path, JOURNAL), encoding="ascii") as handle:
            doc = json.load(handle)
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise LibdoctorError(f"{path}: journal schema {doc.get('schema_version')!r} unknown")
        steps = tuple(StepRecord(**{**s, "argv": tuple(s["argv"])}) for s in doc["steps"])
        return BackupInfo(
            id=str(doc["id"]),
            path=path,
            prefix=str(doc["prefix"]),
            created=str(doc["created"]),
            command=str(doc["command"]),
            state=doc["state"],
            steps=steps,
            files=tuple(SavedFile(**f) for f in doc["files"]),
            history=tuple(doc.get("history", ())),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LibdoctorError(f"{path} is not a readable libdoctor backup: {exc}") from None


def load_listing(path: str) -> dict[str, Entry]:
    try:
        with open(os.path.join(path, LISTING), encoding="ascii") as handle:
            raw = json.load(handle)
        return {p: Entry(k, m, s, t) for p, (k, m, s, t) in raw["entries"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LibdoctorError(f"{path}: the prefix listing is unreadable: {exc}") from None


def list_backups(root: str) -> list[BackupInfo]:
    """Every backup under ROOT, oldest first; unreadable ones are skipped."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise LibdoctorError(f"cannot list backups in {root}: {exc.strerror}") from None
    found = []
    for name in names:
        path = os.path.join(root, name)
        if os.path.isfile(os.path.join(path, JOURNAL)):
            with contextlib.suppress(LibdoctorError):
                found.append(load(path))
    return sorted(found, key=lambda b: b.created)


def interrupted(root: str, prefix: str) -> list[BackupInfo]:
    """Backups of PREFIX a killed or failed run left to be restored."""
    return [b for b in list_backups(root) if b.prefix == prefix and b.needs_restore]


def locate(root: str, name: str | None) -> BackupInfo:
    """A backup by id or directory; without one, the latest that needs restoring."""
    if name is None:
        pending = [b for b in list_backups(root) if b.needs_restore]
        if not pending:
            raise LibdoctorError(
                f"no interrupted repair to restore in {root}; name a backup "
                "(libdoctor restore --list)"
            )
        return pending[-1]
    path = name if os.sep in name else os.path.join(root, name)
    if not os.path.isfile(os.path.join(path, JOURNAL)):
        raise LibdoctorError(f"no backup {name!r} in {root} (libdoctor restore --list)")
    return load(os.path.abspath(path))
