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
import errno
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import BinaryIO

from libdoctor.environment.model import is_inside
from libdoctor.errors import LibdoctorError
from libdoctor.external.process import checkpoint, still_running
from libdoctor.repair.attribution import RESTORE_TEMP, Undo, plan_undo
from libdoctor.repair.flock import locked
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
    load_after,
    load_listing,
    now,
    write_json,
)
from libdoctor.repair.scope import write_refusal

__all__ = ["Guard", "RestoreResult", "restore", "rollback"]

# The states of a backup whose prefix was put back to its listing, verified.
PUT_BACK: tuple[BackupState, ...] = ("restored", "rolled-back")


@dataclass(frozen=True, slots=True)
class RestoreResult:
    backup: BackupInfo
    removed: tuple[str, ...]  # entries the run created, deleted
    restored: tuple[str, ...]  # files put back from the copies
    recreated: tuple[str, ...]  # directories re-created
    unchanged: tuple[str, ...]  # copies whose file was already identical
    problems: tuple[tuple[str, str], ...]  # (path, why it differs from the listing)
    dry_run: bool = False
    left_alone: tuple[tuple[str, str], ...] = ()  # (path, why): changes that were not the run's
    changed_later: tuple[str, ...] = ()  # the run's paths someone changed after it ended
    refused: bool = False  # CHANGED_LATER is not empty and the restore was not confirmed
    displaced: str | None = None  # where the later versions it replaced were kept
    already: bool = False  # restored (or rolled back) before, and nothing changed since

    @property
    def nothing_to_do(self) -> bool:
        return not (self.removed or self.restored or self.recreated or self.changed_later)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.refused


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


def restore(info: BackupInfo, *, dry_run: bool = False, yes: bool = False) -> RestoreResult:
    """Put back what INFO's run changed, as it was when its listing was taken; what else
    changed is left alone. When someone changed the run's own paths after it ended, only
    with YES (those later versions are kept in the backup's ``displaced/``). A backup put
    back before (restored, rolled back) is judged against the listing it was put back to:
    untouched since, it is "already restored"; changed since, those changes need YES."""
    refused = write_refusal(info.prefix, None)
    if refused is not None:
        raise LibdoctorError(refused)
    listing = load_listing(info.path, info.prefix)
    after = listing if info.state in PUT_BACK else load_after(info.path, listing, info.prefix)
    if not os.path.isdir(info.prefix):
        raise LibdoctorError(f"the backed-up prefix {info.prefix} no longer exists")
    if dry_run:
        return _already(info, rollback(info, listing, after=after, dry_run=True))
    with locked(info.prefix):
        refuse_running_installer(info)
        preview = _already(info, rollback(info, listing, after=after, dry_run=True))
        if preview.already:
            return replace(preview, dry_run=False)
        if preview.changed_later and not yes:
            return replace(preview, refused=True)
        kept = _displace(info.path, preview.changed_later)
        result = replace(rollback(info, listing, after=after, dry_run=False), displaced=kept)
        event = {"at": now(), "event": "restored", "ok": result.ok}
        state: BackupState = "restored" if result.ok else info.state
        updated = replace(info, state=state, history=(*info.history, event))
        write_json(os.path.join(info.path, JOURNAL), info_to_json(updated))
    return replace(result, backup=updated)


def _already(info: BackupInfo, preview: RestoreResult) -> RestoreResult:
    """PREVIEW (a dry run) marked ``already`` when INFO was put back before and nothing of
    the run's own has changed since."""
    if info.state in PUT_BACK and preview.nothing_to_do:
        return replace(preview, already=True)
    return preview


def _displace(backup_dir: str, paths: Sequence[str]) -> str | None:
    """Keep the later versions a confirmed restore replaces: linked (or copied) into the
    backup's ``displaced/``, with a list of where each came from."""
    files = [p for p in paths if os.path.isfile(p) and not os.path.islink(p)]
    if not files:
        return None
    where = os.path.join(backup_dir, "displaced")
    os.makedirs(where, exist_ok=True)
    kept: dict[str, str] = {}
    for number, path in enumerate(files):
        name = f"{number:06d}"
        dest = os.path.join(where, name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest)
        try:
            os.link(path, dest)
        except OSError:
            shutil.copy2(path, dest)
        kept[path] = name
    write_json(os.path.join(where, "displaced.json"), {"files": kept})
    return where


@dataclass
class _Progress:
    """What a rollback did so far, step by step (RestoreResult's fields, growing)."""

    removed: list[str] = field(default_factory=list)
    kept: set[str] = field(default_factory=set)  # the run's dirs still holding others' entries
    recreated: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def result(self, info: BackupInfo, undo: Undo, *, dry_run: bool) -> RestoreResult:
        """A dry run reports what it would change, not problems: nothing was verified."""
        why = "the run's directory, kept: it holds entries the run did not write"
        return RestoreResult(
            info,
            tuple(self.removed),
            tuple(self.restored),
            tuple(self.recreated),
            tuple(self.unchanged),
            () if dry_run else tuple(self.problems),
            dry_run,
            left_alone=(*undo.left_alone, *((p, why) for p in sorted(self.kept))),
            changed_later=undo.changed_later,
        )


def rollback(
    info: BackupInfo,
    listing: Mapping[str, Entry],
    *,
    dry_run: bool,
    after: Mapping[str, Entry] | None = None,
) -> RestoreResult:
    """Undo INFO's run: what it created is removed, what it removed or replaced is put back,
    the rest is left alone (``attribution``); then the prefix is verified against LISTING
    everywhere but where something else changed it."""
    prefix = info.prefix
    guard = Guard(prefix)
    skip = os.path.dirname(info.path)
    undo = plan_undo(info, listing, after, list_tree(prefix, skip=skip))
    saved = {f.path: f for f in info.files}
    done = _Progress()
    _remove_own_entries(undo.remove, guard, done, dry_run)
    if not dry_run:
        checkpoint("mid-rollback")
    guard.forget()
    _recreate_directories(undo.recreate, listing, guard, done, dry_run)
    guard.forget()
    _put_copies_back(info.path, saved, guard, done, dry_run)
    if dry_run:
        return done.result(info, undo, dry_run=True)
    _restore_directory_times(prefix, listing, guard)
    reported = {path for path, _ in done.problems}
    found = _verify(info, listing, after, saved, done.kept)
    done.problems += [p for p in found if p[0] not in reported]
    return done.result(info, undo, dry_run=False)


def _remove_own_entries(paths: Sequence[str], guard: Guard, done: _Progress, dry_run: bool) -> None:
    """The run's entries, deepest first: a directory goes only once it is empty (entries
    another process put in it keep it)."""
    for path in paths:
        if not guard.allows(path):
            done.problems.append((path, "outside the prefix: left alone"))
            continue
        if not dry_run:
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    os.rmdir(path)
                else:
                    os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    done.kept.add(path)
                else:
                    done.problems.append((path, f"cannot remove: {exc.strerror}"))
                continue
        done.removed.append(path)


def _recreate_directories(
    paths: Sequence[str],
    listing: Mapping[str, Entry],
    guard: Guard,
    done: _Progress,
    dry_run: bool,
) -> None:
    """Directories of the listing the run removed, parents first, with their owners."""
    for path in paths:
        if not guard.allows(path):
            continue
        if not dry_run:
            entry = listing[path]
            try:
                os.mkdir(path, entry.mode | stat.S_IRWXU)
            except FileExistsError:
                pass
            except OSError as exc:
                done.problems.append((path, f"cannot re-create: {exc.strerror}"))
                continue
            _chown(path, entry.uid, entry.gid)
        done.recreated.append(path)


def _chown(path: str, uid: int | None, gid: int | None) -> None:
    """Put an owner back where it differs (only root may give a file away)."""
    if uid is None or gid is None:
        return
    st = os.lstat(path)
    if (st.st_uid, st.st_gid) != (uid, gid):
        with contextlib.suppress(PermissionError):
            os.lchown(path, uid, gid)


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
            if not stat.S_ISDIR(st.st_mode):
                continue  # a symlink now (chmod would follow it out of the prefix), or a file
            _chown(path, entry.uid, entry.gid)
            if stat.S_IMODE(st.st_mode) != entry.mode:
                os.chmod(path, entry.mode)
            if st.st_mtime_ns != entry.mtime_ns:
                os.utime(path, ns=(entry.mtime_ns, entry.mtime_ns), follow_symlinks=False)


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
    """A backup copy whose bytes are not the ones its journal recorded (truncated, edited),
    or that is no file of the backup's (a symlink, a device)."""


def open_copy(backup_dir: str, copy: str) -> BinaryIO:
    """The copy COPY (``files/NNNNNN``, as the journal checked it) of BACKUP_DIR, opened
    without following a symlink at ``files`` or at the copy itself: a copy swapped for a
    link to another file is refused, never read. The hash is then checked on what is read
    from this very file."""
    directory, name = copy.split("/")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dir_fd = os.open(os.path.join(backup_dir, directory), flags | os.O_DIRECTORY)
    except OSError as exc:
        link = os.path.islink(os.path.join(backup_dir, directory))
        why = "a symlink, not followed" if link else exc.strerror
        raise DamagedCopy(f"the backup's {directory}/ is {why}") from None
    try:
        fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        why = "a symlink, not followed" if exc.errno == errno.ELOOP else exc.strerror
        raise DamagedCopy(f"the backup copy {copy} is {why}") from None
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DamagedCopy(f"the backup copy {copy} is not a regular file")
    return os.fdopen(fd, "rb")


def _put_back(backup_dir: str, item: SavedFile) -> None:
    """Write the copy next to its place, check it against the journal's size and sha256,
    then rename over it: never a half-written file, never a damaged copy."""
    path = item.path
    parent = os.path.dirname(path)
    tmp = os.path.join(parent, f"{RESTORE_TEMP}{secrets.token_hex(4)}")
    try:
        if item.kind == "symlink":
            assert item.link is not None
            os.symlink(item.link, tmp)
            _chown(tmp, item.uid, item.gid)
            _replace(tmp, path)
            with contextlib.suppress(OSError, NotImplementedError):
                os.utime(path, ns=(item.mtime_ns, item.mtime_ns), follow_symlinks=False)
            return
        assert item.copy is not None
        digest = hashlib.sha256()
        size = 0
        with open_copy(backup_dir, item.copy) as reader, open(tmp, "xb") as writer:
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
        _chown(tmp, item.uid, item.gid)
        os.chmod(tmp, item.mode)
        os.utime(tmp, ns=(item.mtime_ns, item.mtime_ns))
        _replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _replace(tmp: str, path: str) -> None:
    """TMP (checked) over PATH; a directory at PATH now (a file's place, taken since) goes
    first: only once the copy is known good."""
    with contextlib.suppress(FileNotFoundError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
    os.replace(tmp, path)


def _verify(
    info: BackupInfo,
    listing: Mapping[str, Entry],
    after: Mapping[str, Entry] | None,
    saved: Mapping[str, SavedFile],
    kept: set[str],
) -> list[tuple[str, str]]:
    """Where the run's own change is not undone: entries of its own still present, listing
    entries missing or different, copies not matching. What something else changed (even
    while the rollback ran) is judged the same way as before it, and left out."""
    current = list_tree(info.prefix, skip=os.path.dirname(info.path))
    again = plan_undo(info, listing, after, current)
    others = {path for path, _ in again.left_alone} | kept
    problems = [(p, "still present, was not there before") for p in again.remove if p not in kept]
    for path, entry in sorted(listing.items()):
        if path in others:
            continue
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
    return sorted(problems)
