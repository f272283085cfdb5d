"""A backup as its journal records it, and rollback byte for byte.

A backup directory (``<cache>/backups/<id>/``) holds ``listing.json`` (type, mode, size, mtime
of every entry of the prefix before the first step), ``journal.json`` (the steps and the saved
files, written atomically and fsync'd) and ``files/`` (the copies). Taking one is
``backup.py``'s ``BackupSession``; this module holds the values, reads and finds backups, and
puts a prefix back.

Rollback (on failure, or ``libdoctor restore``): entries created since the listing are removed,
directories that disappeared are re-created, and every copied file is put back with its mode
and mtime; directory modes and mtimes are restored last. Then the result is verified against
the listing and the copies' hashes. Nothing outside the prefix and the backup directory is
ever written: every path is checked against the prefix (through its real parent directory).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from libdoctor import __version__
from libdoctor.environment.model import is_inside
from libdoctor.errors import LibdoctorError

__all__ = [
    "BackupInfo",
    "Entry",
    "RestoreResult",
    "SavedFile",
    "StepRecord",
    "interrupted",
    "list_backups",
    "list_tree",
    "load",
    "locate",
    "restore",
]


SCHEMA_VERSION = 1
BackupState = Literal["in-progress", "done", "failed", "rolled-back", "restored"]
StepState = Literal["running", "done", "failed"]
EntryKind = Literal["file", "dir", "symlink", "other"]
_CHUNK = 1 << 20
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


@dataclass(frozen=True, slots=True)
class RestoreResult:
    backup: BackupInfo
    removed: tuple[str, ...]  # entries created after the listing, deleted
    restored: tuple[str, ...]  # files put back from the copies
    recreated: tuple[str, ...]  # directories re-created
    unchanged: tuple[str, ...]  # copies whose file was already identical
    problems: tuple[tuple[str, str], ...]  # (path, why it differs from the listing)
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems


# --------------------------------------------------------------------------- small helpers


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json(path: str, document: Any) -> None:
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
    _fsync_dir(os.path.dirname(path))


def _kind(mode: int) -> EntryKind:
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
    out[root] = Entry(_kind(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns)
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
            kind = _kind(st.st_mode)
            out[path] = Entry(kind, stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns)
            if kind == "dir":
                stack.append(path)
    return out


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class _Guard:
    """Refuses any write outside the prefix: the real parent directory must be inside it."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.real = os.path.realpath(prefix)
        self._parents: dict[str, bool] = {}

    def allows(self, path: str) -> bool:
        if not is_inside(os.path.normpath(path), self.prefix) or path == self.prefix:
            return False
        parent = os.path.dirname(path)
        known = self._parents.get(parent)
        if known is None:
            known = self._parents[parent] = is_inside(os.path.realpath(parent), self.real)
        return known

    def forget(self) -> None:
        """Directories were removed or re-created: resolve parents afresh."""
        self._parents.clear()


# --------------------------------------------------------------------------- journal I/O


def _info_to_json(info: BackupInfo) -> dict[str, Any]:
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


def _load_listing(path: str) -> dict[str, Entry]:
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


class _Lock:
    """One repair or restore per prefix at a time (an flock in the backup root)."""

    def __init__(self, root: str, prefix: str) -> None:
        os.makedirs(root, exist_ok=True)
        name = hashlib.sha256(os.fsencode(prefix)).hexdigest()[:16]
        self._fd: int | None = os.open(
            os.path.join(root, f".lock-{name}"), os.O_RDWR | os.O_CREAT, 0o600
        )
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self.release()
            if exc.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise LibdoctorError(
                    f"another libdoctor repair or restore is running on {prefix}"
                ) from None
            raise

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextlib.contextmanager
def _locked(root: str, prefix: str) -> Iterator[None]:
    lock = _Lock(root, prefix)
    try:
        yield
    finally:
        lock.release()


# --------------------------------------------------------------------------- rollback


def restore(info: BackupInfo, *, dry_run: bool = False) -> RestoreResult:
    """Put the prefix back as it was when INFO's listing was taken."""
    root = os.path.dirname(info.path)
    listing = _load_listing(info.path)
    if not os.path.isdir(info.prefix):
        raise LibdoctorError(f"the backed-up prefix {info.prefix} no longer exists")
    if dry_run:
        return _rollback(info, listing, dry_run=True)
    with _locked(root, info.prefix):
        result = _rollback(info, listing, dry_run=False)
        event = {"at": _now(), "event": "restored", "ok": result.ok}
        state: BackupState = "restored" if result.ok else info.state
        updated = replace(info, state=state, history=(*info.history, event))
        _write_json(os.path.join(info.path, JOURNAL), _info_to_json(updated))
    return replace(result, backup=updated)


def _under(path: str, tops: set[str]) -> bool:
    """PATH is one of TOPS or below one of them."""
    while True:
        if path in tops:
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def _remove(path: str, entry: Entry) -> None:
    if entry.kind == "dir":
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _rollback(info: BackupInfo, listing: Mapping[str, Entry], *, dry_run: bool) -> RestoreResult:
    prefix = info.prefix
    guard = _Guard(prefix)
    skip = os.path.dirname(info.path)
    current = list_tree(prefix, skip=skip)
    removed: list[str] = []
    gone: set[str] = set()
    recreated: list[str] = []
    restored: list[str] = []
    unchanged: list[str] = []
    problems: list[tuple[str, str]] = []
    saved = {f.path: f for f in info.files}

    # 1. Entries created since the listing (or replaced by another kind): top-most first.
    for path in sorted(current, key=lambda p: (p.count(os.sep), p)):
        now = current[path]
        before = listing.get(path)
        if before is not None and before.kind == now.kind:
            continue
        if _under(path, gone):
            continue
        if not guard.allows(path):
            problems.append((path, "outside the prefix: left alone"))
            continue
        if not dry_run:
            try:
                _remove(path, now)
            except OSError as exc:
                problems.append((path, f"cannot remove: {exc.strerror}"))
                continue
        removed.append(path)
        gone.add(path)
    guard.forget()

    # 2. Directories that disappeared, parents first.
    for path in sorted(
        (p for p, e in listing.items() if e.kind == "dir"), key=lambda p: p.count(os.sep)
    ):
        if path in current and current[path].kind == "dir" and path not in gone:
            continue
        if not guard.allows(path):
            continue
        if not dry_run:
            try:
                os.mkdir(path, listing[path].mode | stat.S_IRWXU)
            except FileExistsError:
                pass
            except OSError as exc:
                problems.append((path, f"cannot re-create: {exc.strerror}"))
                continue
        recreated.append(path)
    guard.forget()

    # 3. The copies, where the file differs from them.
    for path, item in saved.items():
        if not guard.allows(path):
            problems.append((path, "outside the prefix: not restored"))
            continue
        if _matches(path, item):
            unchanged.append(path)
            continue
        if not dry_run:
            try:
                _put_back(info.path, item)
            except OSError as exc:
                problems.append((path, f"cannot restore: {exc.strerror or exc}"))
                continue
        restored.append(path)

    if dry_run:
        return RestoreResult(
            info, tuple(removed), tuple(restored), tuple(recreated), tuple(unchanged), (), True
        )

    # 4. Directory modes and mtimes, last: every change above touched some of them.
    for path, entry in listing.items():
        if entry.kind != "dir" or not (path == prefix or guard.allows(path)):
            continue
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_IMODE(st.st_mode) != entry.mode:
                os.chmod(path, entry.mode)
            if st.st_mtime_ns != entry.mtime_ns:
                os.utime(path, ns=(entry.mtime_ns, entry.mtime_ns), follow_symlinks=False)

    problems += _verify(prefix, skip, listing, saved)
    return RestoreResult(
        info, tuple(removed), tuple(restored), tuple(recreated), tuple(unchanged), tuple(problems)
    )


def _matches(path: str, item: SavedFile) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if item.kind == "symlink":
        return stat.S_ISLNK(st.st_mode) and os.readlink(path) == item.link
    if not stat.S_ISREG(st.st_mode) or st.st_size != item.size:
        return False
    if stat.S_IMODE(st.st_mode) != item.mode or st.st_mtime_ns != item.mtime_ns:
        return False
    try:
        return _sha256(path) == item.sha256
    except OSError:
        return False


def _put_back(backup_dir: str, item: SavedFile) -> None:
    """Write the copy next to its place, then rename over it: never a half-written file."""
    path = item.path
    parent = os.path.dirname(path)
    with contextlib.suppress(FileNotFoundError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
    tmp = os.path.join(parent, f".libdoctor-restore-{secrets.token_hex(4)}")
    try:
        if item.kind == "symlink":
            assert item.link is not None
            os.symlink(item.link, tmp)
            os.replace(tmp, path)
            with contextlib.suppress(OSError, NotImplementedError):
                os.utime(path, ns=(item.mtime_ns, item.mtime_ns), follow_symlinks=False)
            return
        assert item.copy is not None
        with open(os.path.join(backup_dir, item.copy), "rb") as reader, open(tmp, "xb") as writer:
            shutil.copyfileobj(reader, writer, _CHUNK)
            writer.flush()
            os.fsync(writer.fileno())
        os.chmod(tmp, item.mode)
        os.utime(tmp, ns=(item.mtime_ns, item.mtime_ns))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _verify(
    prefix: str, skip: str, listing: Mapping[str, Entry], saved: Mapping[str, SavedFile]
) -> list[tuple[str, str]]:
    """Where the prefix still differs from the listing (and the copies)."""
    current = list_tree(prefix, skip=skip)
    problems: list[tuple[str, str]] = []
    for path in sorted(current.keys() - listing.keys()):
        problems.append((path, "still present, was not there before"))
    for path, entry in sorted(listing.items()):
        now = current.get(path)
        if now is None:
            problems.append((path, "missing, and no copy of it was taken"))
            continue
        if now.kind != entry.kind:
            problems.append((path, f"is a {now.kind}, was a {entry.kind}"))
            continue
        if entry.kind != "file":
            continue
        item = saved.get(path)
        if item is not None:
            if not item.original:
                problems.append((path, "had changed before it was copied"))
            elif not _matches(path, item):
                problems.append((path, "differs from its copy"))
        elif (now.size, now.mtime_ns, now.mode) != (entry.size, entry.mtime_ns, entry.mode):
            problems.append((path, "changed, and no copy of it was taken"))
    return problems
