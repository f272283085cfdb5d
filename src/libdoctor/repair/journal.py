"""A backup as its journal records it: the values, written and read back, and found again.

A backup directory (``<cache>/backups/<id>/``) holds ``listing.json`` (type, mode, size, mtime
of every entry of the prefix before the first step), ``journal.json`` (the steps and the saved
files, written atomically and fsync'd) and ``files/`` (the copies). Taking one is
``backup.BackupSession``; putting a prefix back is ``rollback``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from libdoctor.bounded import read_json
from libdoctor.environment.model import is_inside
from libdoctor.errors import LibdoctorError
from libdoctor.version import __version__

__all__ = [
    "AFTER",
    "BackupInfo",
    "Entry",
    "SavedFile",
    "StepRecord",
    "entry_of",
    "entry_to_json",
    "interrupted",
    "list_backups",
    "list_tree",
    "load",
    "load_after",
    "load_listing",
    "locate",
    "scan_backups",
    "skipped_note",
]


SCHEMA_VERSION = 1
BackupState = Literal["in-progress", "done", "failed", "rolled-back", "restored"]
StepState = Literal["running", "done", "failed"]
EntryKind = Literal["file", "dir", "symlink", "other"]
BACKUP_STATES: tuple[BackupState, ...] = get_args(BackupState)
STEP_STATES: tuple[StepState, ...] = get_args(StepState)
ENTRY_KINDS: tuple[EntryKind, ...] = get_args(EntryKind)
CHUNK = 1 << 20
JOURNAL = "journal.json"
LISTING = "listing.json"
AFTER = "after.json"  # the prefix as a finished run left it: what a later restore compares


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the prefix listing (lstat: a symlink is itself, never its target)."""

    kind: EntryKind
    mode: int
    size: int
    mtime_ns: int
    uid: int | None = None  # None: a listing written before owners were kept
    gid: int | None = None

    def same(self, other: Entry | None) -> bool:
        """The same kind, mode, size and mtime (owners compared where both know them)."""
        if other is None or (self.kind, self.mode, self.size, self.mtime_ns) != (
            other.kind,
            other.mode,
            other.size,
            other.mtime_ns,
        ):
            return False
        return None in (self.uid, other.uid) or (self.uid, self.gid) == (other.uid, other.gid)


def entry_of(st: os.stat_result) -> Entry:
    return Entry(
        entry_kind(st.st_mode),
        stat.S_IMODE(st.st_mode),
        st.st_size,
        st.st_mtime_ns,
        st.st_uid,
        st.st_gid,
    )


def entry_to_json(entry: Entry) -> list[Any]:
    return [entry.kind, entry.mode, entry.size, entry.mtime_ns, entry.uid, entry.gid]


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
    uid: int | None = None  # the owner, put back with the bytes (None: an older journal)
    gid: int | None = None


@dataclass(frozen=True, slots=True)
class StepRecord:
    argv: tuple[str, ...]
    state: StepState
    returncode: int | None = None
    saved: int = 0  # files copied before this step
    message: str = ""
    pid: int | None = None  # the installer's, journaled as it starts
    started_ns: int | None = None  # wall clock (time_ns) as the installer started
    ended_ns: int | None = None  # and as it ended; None while it runs (or was killed)
    wrote: tuple[str, ...] = ()  # paths the RECORDs written by this step name, dist-infos too


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
    out[root] = entry_of(st)
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
            entry = out[path] = entry_of(st)
            if entry.kind == "dir":
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
    """Read one backup's journal; a one-line LibdoctorError when it is not a backup, naming
    the field when a value is of the wrong type or out of range (a hand-edited journal)."""
    try:
        doc = read_json(os.path.join(path, JOURNAL))
    except (OSError, ValueError) as exc:
        raise LibdoctorError(f"{path} is not a readable libdoctor backup: {_why(exc)}") from None
    if not isinstance(doc, dict):
        raise LibdoctorError(f"{path} is not a readable libdoctor backup: not a JSON object")
    version = doc.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:  # true == 1 in Python
        raise LibdoctorError(f"{path}: journal schema {_shown(version)} unknown")
    try:
        return _info(path, Fields(doc, ""))
    except DamagedField as exc:
        raise LibdoctorError(f"{path}: damaged backup journal: {exc}") from None


def _info(path: str, doc: Fields) -> BackupInfo:
    prefix = doc.absolute("prefix")
    return BackupInfo(
        id=doc.text("id"),
        path=path,
        prefix=prefix,
        created=doc.text("created"),
        command=doc.text("command"),
        state=doc.choice("state", BACKUP_STATES),  # type: ignore[arg-type]
        steps=tuple(_step(step, prefix) for step in doc.items("steps")),
        files=tuple(_saved(item, prefix) for item in doc.items("files")),
        history=tuple(h.raw for h in doc.items("history", optional=True)),
    )


def _step(step: Fields, prefix: str) -> StepRecord:
    return StepRecord(
        argv=step.texts("argv"),
        state=step.choice("state", STEP_STATES),  # type: ignore[arg-type]
        returncode=step.integer("returncode", -(1 << 31), (1 << 31) - 1, optional=True),
        saved=step.integer("saved", 0, _MAX_INT, default=0),
        message=step.text("message", default=""),
        pid=step.integer("pid", 1, (1 << 31) - 1, optional=True),
        started_ns=step.integer("started_ns", 0, _MAX_INT, optional=True),
        ended_ns=step.integer("ended_ns", 0, _MAX_INT, optional=True),
        # What the RECORDs named outside the prefix is no path of the run's: dropped (an
        # older libdoctor journaled them; nothing of a restore goes there).
        wrote=tuple(p for p in step.absolutes("wrote") if is_inside(p, prefix) and p != prefix),
    )


def _saved(item: Fields, prefix: str) -> SavedFile:
    kind = item.choice("kind", ("file", "symlink"))
    return SavedFile(
        path=item.absolute("path", under=prefix),
        kind=kind,  # type: ignore[arg-type]
        copy=item.copy_name("copy", required=kind == "file"),
        link=item.text("link") if kind == "symlink" else item.optional_text("link"),
        mode=item.integer("mode", 0, 0o7777),
        mtime_ns=item.integer("mtime_ns", -_MAX_INT - 1, _MAX_INT),
        size=item.integer("size", 0, _MAX_INT),
        sha256=item.sha256("sha256", required=kind == "file"),
        original=item.boolean("original"),
        uid=item.integer("uid", 0, (1 << 32) - 1, optional=True),
        gid=item.integer("gid", 0, (1 << 32) - 1, optional=True),
    )


def load_listing(path: str, prefix: str) -> dict[str, Entry]:
    """Read one backup's listing of PREFIX; a one-line LibdoctorError naming a damaged field
    (an entry outside PREFIX among them)."""
    try:
        raw = read_json(os.path.join(path, LISTING))
    except (OSError, ValueError) as exc:
        raise LibdoctorError(f"{path}: the prefix listing is unreadable: {_why(exc)}") from None
    try:
        entries = Fields(raw if isinstance(raw, dict) else {}, "").mapping("entries")
        return {name: _entry(name, value, prefix) for name, value in entries.items()}
    except DamagedField as exc:
        raise LibdoctorError(f"{path}: damaged prefix listing: {exc}") from None


def _entry(name: str, value: object, prefix: str) -> Entry:
    where = f"entries[{_shown(name)}]"
    if not is_path(name, prefix):
        raise DamagedField(f"{where}: not a normalized absolute path inside {prefix}")
    if not isinstance(value, list) or len(value) not in (4, 6):
        raise DamagedField(
            f"{where} is {_shown(value)}, expected [kind, mode, size, mtime_ns, uid, gid]"
        )
    keys = ("kind", "mode", "size", "mtime_ns", "uid", "gid")
    fields = Fields(dict(zip(keys, value, strict=False)), where)
    return Entry(
        fields.choice("kind", ENTRY_KINDS),  # type: ignore[arg-type]
        fields.integer("mode", 0, 0o7777),
        fields.integer("size", 0, _MAX_INT),
        fields.integer("mtime_ns", -_MAX_INT - 1, _MAX_INT),
        fields.integer("uid", 0, (1 << 32) - 1, optional=True),
        fields.integer("gid", 0, (1 << 32) - 1, optional=True),
    )


def load_after(path: str, listing: Mapping[str, Entry], prefix: str) -> dict[str, Entry] | None:
    """The prefix as a finished run left it (LISTING with the differences it recorded as it
    ended), or None: a run that never finished."""
    where = os.path.join(path, AFTER)
    if not os.path.exists(where):
        return None
    try:
        raw = read_json(where)
        doc = Fields(raw if isinstance(raw, dict) else {}, "")
        removed = set(doc.absolutes("removed"))
        after = {p: e for p, e in listing.items() if p not in removed}
        after.update({n: _entry(n, v, prefix) for n, v in doc.mapping("changed").items()})
    except (OSError, ValueError) as exc:
        why = _why(exc)
        raise LibdoctorError(f"{path}: the run's closing listing is unreadable: {why}") from None
    return after


def _why(exc: OSError | ValueError) -> str:
    """An exception as the tail of one line: an OSError by its reason, not its repr."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} ({exc.filename})" if exc.filename else exc.strerror
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# --------------------------------------------------------------------------- field checks

_MAX_INT = (1 << 63) - 1  # what os.utime, os.chmod and st_size take without OverflowError
_SHA256 = re.compile(r"[0-9a-f]{64}")
COPIES = "files"  # the copies' directory in a backup: files/000000, files/000001, ...
_COPY = re.compile(rf"{COPIES}/[0-9]{{6,12}}")


def is_path(value: str, under: str | None = None) -> bool:
    """VALUE is a path a journal may name: absolute, normalized, no NUL; with UNDER, inside
    it (UNDER itself included)."""
    if "\0" in value or not os.path.isabs(value) or os.path.normpath(value) != value:
        return False
    return under is None or is_inside(value, under)


class DamagedField(ValueError):
    """A journal or listing field of the wrong type or out of range: its name and value."""


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Fields:
    """One JSON object of a journal, read field by field: each accessor checks the type and
    range of the value it returns, and names the field (``files[3].mtime_ns``) when it fails."""

    __slots__ = ("raw", "where")

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        self.raw = raw
        self.where = where

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str, expected: str, default: object = ...) -> object:
        if key in self.raw:
            return self.raw[key]
        if default is ...:
            raise DamagedField(f"{self._name(key)} is missing, expected {expected}")
        return default

    def _bad(self, key: str, value: object, expected: str) -> DamagedField:
        return DamagedField(f"{self._name(key)} is {_shown(value)}, expected {expected}")

    def text(self, key: str, default: object = ...) -> str:
        value = self._get(key, "a string", default)
        if not isinstance(value, str) or "\0" in value:
            raise self._bad(key, value, "a string")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self._get(key, "a string or null", None)
        if value is not None and (not isinstance(value, str) or "\0" in value):
            raise self._bad(key, value, "a string or null")
        return value

    def absolute(self, key: str, under: str | None = None) -> str:
        """A normalized absolute path (no ``..``, no ``//``); with UNDER, inside it."""
        value = self.text(key)
        if not is_path(value, under):
            where = f" inside {under}" if under else ""
            raise self._bad(key, value, f"a normalized absolute path{where}")
        return value

    def copy_name(self, key: str, *, required: bool) -> str | None:
        """A copy's name inside the backup directory: ``files/`` and its number, nothing
        else (no other directory, no climbing out)."""
        value = self.text(key) if required else self.optional_text(key)
        if value is not None and not _COPY.fullmatch(value):
            raise self._bad(key, value, "a copy inside the backup (files/NNNNNN)")
        return value

    def sha256(self, key: str, *, required: bool) -> str | None:
        value = self.text(key) if required else self.optional_text(key)
        if value is not None and not _SHA256.fullmatch(value):
            raise self._bad(key, value, "a sha256 hex digest")
        return value

    def integer(
        self, key: str, low: int, high: int, *, optional: bool = False, default: object = ...
    ) -> Any:
        expected = f"an integer in [{low}, {high}]" + (" or null" if optional else "")
        value = self._get(key, expected, None if optional else default)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self._bad(key, value, expected)
        return value

    def boolean(self, key: str) -> bool:
        value = self._get(key, "true or false")
        if not isinstance(value, bool):
            raise self._bad(key, value, "true or false")
        return value

    def choice(self, key: str, allowed: tuple[str, ...]) -> str:
        expected = "one of " + ", ".join(allowed)
        value = self._get(key, expected)
        if value not in allowed:
            raise self._bad(key, value, expected)
        assert isinstance(value, str)
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        value = self._get(key, "a list of strings")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._bad(key, value, "a list of strings")
        return tuple(value)

    def absolutes(self, key: str) -> tuple[str, ...]:
        """An optional list of absolute paths (empty when absent)."""
        value = self._get(key, "a list of absolute paths", [])
        if not isinstance(value, list) or not all(isinstance(v, str) and is_path(v) for v in value):
            raise self._bad(key, value, "a list of absolute paths")
        return tuple(value)

    def mapping(self, key: str) -> Mapping[str, Any]:
        value = self._get(key, "an object")
        if not isinstance(value, dict):
            raise self._bad(key, value, "an object")
        return value

    def items(self, key: str, *, optional: bool = False) -> list[Fields]:
        value = self._get(key, "a list of objects", [] if optional else ...)
        if not isinstance(value, list):
            raise self._bad(key, value, "a list of objects")
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self._bad(f"{key}[{i}]", item, "an object")
            out.append(Fields(item, f"{self._name(key)}[{i}]"))
        return out


def list_backups(root: str) -> list[BackupInfo]:
    """Every backup under ROOT, oldest first; unreadable ones are skipped."""
    return scan_backups(root)[0]


def scan_backups(root: str) -> tuple[list[BackupInfo], list[str]]:
    """(every readable backup under ROOT, oldest first; why each damaged one was skipped)."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        raise LibdoctorError(f"cannot list backups in {root}: {exc.strerror}") from None
    found = []
    damaged = []
    for name in names:
        path = os.path.join(root, name)
        if os.path.isfile(os.path.join(path, JOURNAL)):
            try:
                found.append(load(path))
            except LibdoctorError as exc:
                damaged.append(str(exc))
    return sorted(found, key=lambda b: b.created), damaged


def interrupted(root: str, prefix: str) -> list[BackupInfo]:
    """Backups of PREFIX a killed or failed run left to be restored."""
    return [b for b in list_backups(root) if b.prefix == prefix and b.needs_restore]


def skipped_note(damaged: Sequence[str]) -> str:
    """One line for the damaged backups a scan skipped (each reason is one line)."""
    more = f" (and {len(damaged) - 1} more: libdoctor restore --list)" if len(damaged) > 1 else ""
    return f"skipped a damaged backup, {damaged[0]}{more}"


def locate(root: str, name: str | None) -> BackupInfo:
    """A backup by id or directory; without one, the latest that needs restoring."""
    if name is None:
        found, damaged = scan_backups(root)
        pending = [b for b in found if b.needs_restore]
        if not pending:
            skipped = f" ({len(damaged)} damaged backup(s) skipped)" if damaged else ""
            raise LibdoctorError(
                f"no interrupted repair to restore in {root}{skipped}; name a backup "
                "(libdoctor restore --list)"
            )
        return pending[-1]
    path = name if os.sep in name else os.path.join(root, name)
    if not os.path.isfile(os.path.join(path, JOURNAL)):
        raise LibdoctorError(f"no backup {name!r} in {root} (libdoctor restore --list)")
    return load(os.path.abspath(path))


def file_sha256(path: str) -> str:
    """The hex sha256 a journal records for a saved file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
