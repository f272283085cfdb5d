"""Putting a prefix back byte for byte, from a backup's listing and copies.

Rollback (on failure, or ``libdoctor restore``) runs four steps: entries created since the
listing are removed, directories that disappeared are re-created, every copied file is put
back with its mode and mtime, and directory modes and mtimes are restored last (every step
before touched some of them). Then the result is verified against the listing and the copies'
hashes. Nothing outside the prefix and the backup directory is ever written: every path is
checked against the prefix through its real parent directory (``Guard``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from libdoctor.environment.model import is_inside
from libdoctor.environment.process import still_running
from libdoctor.errors import LibdoctorError
from libdoctor.repair.journal import (
    CHUNK,
    JOURNAL,
    BackupInfo,
    BackupState,
    Entry,
    SavedFile,
    file_sha256,
    info_to_json,
    list_tree,
    load_listing,
    now,
    write_json,
)
from libdoctor.repair.lock import locked
from libdoctor.repair.scope import write_refusal

__all__ = ["Guard", "RestoreResult", "restore", "rollback"]


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


class Guard:
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


def refuse_running_installer(info: BackupInfo) -> None:
    """A one-line error while an installer a step of INFO started still runs: putting files
    back under it would race it (a libdoctor killed without its child left it behind)."""
    for step in info.steps:
        if step.state == "running" and step.pid is not None and still_running(step.pid, step.argv):
            raise LibdoctorError(
                f"an installer of backup {info.id} is still running in {info.prefix} "
                f"(pid {step.pid}): wait for it to end, or stop it, then restore"
            )


def restore(info: BackupInfo, *, dry_run: bool = False) -> RestoreResult:
    """Put the prefix back as it was when INFO's listing was taken."""
    refused = write_refusal(info.prefix, None)
    if refused is not None:
        raise LibdoctorError(refused)
    listing = load_listing(info.path)
    if not os.path.isdir(info.prefix):
        raise LibdoctorError(f"the backed-up prefix {info.prefix} no longer exists")
    if dry_run:
        return rollback(info, listing, dry_run=True)
    with locked(info.prefix):
        refuse_running_installer(info)
        result = rollback(info, listing, dry_run=False)
        event = {"at": now(), "event": "restored", "ok": result.ok}
        state: BackupState = "restored" if result.ok else info.state
        updated = replace(info, state=state, history=(*info.history, event))
        write_json(os.path.join(info.path, JOURNAL), info_to_json(updated))
    return replace(result, backup=updated)


@dataclass
class _Progress:
    """What a rollback did so far, step by step (RestoreResult's fields, growing)."""

    removed: list[str] = field(default_factory=list)
    gone: set[str] = field(default_factory=set)
    recreated: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def result(self, info: BackupInfo, *, dry_run: bool) -> RestoreResult:
        """A dry run reports what it would change, not problems: nothing was verified."""
        return RestoreResult(
            info,
            tuple(self.removed),
            tuple(self.restored),
            tuple(self.recreated),
            tuple(self.unchanged),
            () if dry_run else tuple(self.problems),
            dry_run,
        )


def rollback(info: BackupInfo, listing: Mapping[str, Entry], *, dry_run: bool) -> RestoreResult:
    prefix = info.prefix
    guard = Guard(prefix)
    skip = os.path.dirname(info.path)
    current = list_tree(prefix, skip=skip)
    saved = {f.path: f for f in info.files}
    done = _Progress()
    _remove_new_entries(current, listing, guard, done, dry_run)
    guard.forget()
    _recreate_directories(current, listing, guard, done, dry_run)
    guard.forget()
    _put_copies_back(info.path, saved, guard, done, dry_run)
    if dry_run:
        return done.result(info, dry_run=True)
    _restore_directory_times(prefix, listing, guard)
    reported = {path for path, _ in done.problems}
    done.problems += [p for p in _verify(prefix, skip, listing, saved) if p[0] not in reported]
    return done.result(info, dry_run=False)


def _remove_new_entries(
    current: Mapping[str, Entry],
    listing: Mapping[str, Entry],
    guard: Guard,
    done: _Progress,
    dry_run: bool,
) -> None:
    """Entries created since the listing (or replaced by another kind): top-most first."""
    for path in sorted(current, key=lambda p: (p.count(os.sep), p)):
        entry = current[path]
        before = listing.get(path)
        if before is not None and before.kind == entry.kind:
            continue
        if _under(path, done.gone):
            continue
        if not guard.allows(path):
            done.problems.append((path, "outside the prefix: left alone"))
            continue
        if not dry_run:
            try:
                _remove(path, entry)
            except OSError as exc:
                done.problems.append((path, f"cannot remove: {exc.strerror}"))
                continue
        done.removed.append(path)
        done.gone.add(path)


def _recreate_directories(
    current: Mapping[str, Entry],
    listing: Mapping[str, Entry],
    guard: Guard,
    done: _Progress,
    dry_run: bool,
) -> None:
    """Directories that disappeared, parents first."""
    for path in sorted(
        (p for p, e in listing.items() if e.kind == "dir"), key=lambda p: p.count(os.sep)
    ):
        if path in current and current[path].kind == "dir" and path not in done.gone:
            continue
        if not guard.allows(path):
            continue
        if not dry_run:
            try:
                os.mkdir(path, listing[path].mode | stat.S_IRWXU)
            except FileExistsError:
                pass
            except OSError as exc:
                done.problems.append((path, f"cannot re-create: {exc.strerror}"))
                continue
        done.recreated.append(path)


def _put_copies_back(
    backup_dir: str,
    saved: Mapping[str, SavedFile],
    guard: Guard,
    done: _Progress,
    dry_run: bool,
) -> None:
    """The copies, where the file differs from them."""
    for path, item in saved.items():
        if not guard.allows(path):
            done.problems.append((path, "outside the prefix: not restored"))
            continue
        if _matches(path, item):
            done.unchanged.append(path)
            continue
        if not dry_run:
            try:
                _put_back(backup_dir, item)
            except DamagedCopy as exc:
                done.problems.append((path, f"not restored, left as it is: {exc}"))
                continue
            except OSError as exc:
                done.problems.append((path, f"cannot restore: {exc.strerror or exc}"))
                continue
        done.restored.append(path)


def _restore_directory_times(prefix: str, listing: Mapping[str, Entry], guard: Guard) -> None:
    """Directory modes and mtimes, last: every change before touched some of them."""
    for path, entry in listing.items():
        if entry.kind != "dir" or not (path == prefix or guard.allows(path)):
            continue
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_IMODE(st.st_mode) != entry.mode:
                os.chmod(path, entry.mode)
            if st.st_mtime_ns != entry.mtime_ns:
                os.utime(path, ns=(entry.mtime_ns, entry.mtime_ns), follow_symlinks=False)


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
        return file_sha256(path) == item.sha256
    except OSError:
        return False


class DamagedCopy(Exception):
    """A backup copy whose bytes are not the ones its journal recorded (truncated, edited)."""


def _put_back(backup_dir: str, item: SavedFile) -> None:
    """Write the copy next to its place, check it against the journal's size and sha256,
    then rename over it: never a half-written file, never a damaged copy."""
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
        digest = hashlib.sha256()
        size = 0
        with open(os.path.join(backup_dir, item.copy), "rb") as reader, open(tmp, "xb") as writer:
            while chunk := reader.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
                writer.write(chunk)
            writer.flush()
            os.fsync(writer.fileno())
        if (size, digest.hexdigest()) != (item.size, item.sha256):
            # Checked on the bytes written, before the rename: a damaged copy never
            # replaces the file that is there now.
            raise DamagedCopy(
                f"the backup copy {item.copy} is damaged ({size} bytes, sha256 "
                f"{digest.hexdigest()[:12]}...; the journal says {item.size} bytes, "
                f"{(item.sha256 or '')[:12]}...)"
            )
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
