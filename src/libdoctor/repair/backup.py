"""Backups with a journal, taken before each step of a repair.

Before the first step of a repair, the whole prefix is listed (type, mode, size, mtime of every
entry; symlinks are never followed). Before each step, every existing file the step may delete
or overwrite is copied into ``<cache>/backups/<id>/files/`` and the journal
(``journal.json``, written atomically and fsync'd) records it, *before* the step runs; after the
step the journal is updated. A killed run leaves the journal ``in-progress``.

The values, reading and finding backups, and the rollback itself (``restore``) are
``rollback.py``; they are re-exported here.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace

from libdoctor.environment.model import is_inside
from libdoctor.errors import LibdoctorError
from libdoctor.external.installers import Notify
from libdoctor.external.process import checkpoint
from libdoctor.repair.attribution import records_written
from libdoctor.repair.flock import Lock
from libdoctor.repair.journal import (
    AFTER,
    CHUNK,
    COPIES,
    JOURNAL,
    LISTING,
    BackupInfo,
    BackupState,
    SavedFile,
    StepRecord,
    entry_kind,
    entry_to_json,
    file_sha256,
    fsync_dir,
    info_to_json,
    list_tree,
    now,
    scan_backups,
    skipped_note,
    write_json,
)
from libdoctor.repair.rollback import Guard, RestoreResult, rollback
from libdoctor.repair.scope import write_refusal

__all__ = ["BackupSession", "backup_root"]


# --------------------------------------------------------------------------- small helpers


def backup_root(cache_dir: str) -> str:
    return os.path.join(cache_dir, "backups")


def _new_id() -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def _copy_out(src: str, dest: str) -> str:
    """Keep SRC's bytes at DEST; returns their sha256.

    A hard link where the backup shares SRC's file system: pip and uv never write an
    installed file in place (they unlink or rename it first), so the old inode keeps the
    old bytes at no cost; the recorded hash lets a restore notice if anything did. A copy,
    fsync'd, where a link cannot be made (another file system, a link limit)."""
    try:
        os.link(src, dest, follow_symlinks=False)
    except OSError:
        return _copy_bytes(src, dest)
    return file_sha256(dest)


def _copy_bytes(src: str, dest: str) -> str:
    digest = hashlib.sha256()
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)  # a file a moment ago
    with os.fdopen(fd, "rb") as reader, open(dest, "xb") as writer:
        while chunk := reader.read(CHUNK):
            digest.update(chunk)
            writer.write(chunk)
        writer.flush()
        os.fsync(writer.fileno())
    return digest.hexdigest()


def room_needed(paths: Iterable[str], backup_dir: str) -> int:
    """Bytes a backup of PATHS takes: those on another file system than BACKUP_DIR are
    copied; the others are linked."""
    device = os.stat(backup_dir).st_dev
    total = 0
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_dev != device:
            total += st.st_size
    return total


def check_room(paths: Iterable[str], backup_dir: str) -> None:
    """Refuse before anything changes when the backup area is too small for the copies."""
    needed = room_needed(paths, backup_dir)
    if not needed:
        return
    fs = os.statvfs(backup_dir)
    free = fs.f_bavail * fs.f_frsize
    if needed > free:
        raise LibdoctorError(
            f"the backup needs {needed / 1e6:.1f} MB in {backup_dir}, which has "
            f"{free / 1e6:.1f} MB free: nothing was changed"
        )


# --------------------------------------------------------------------------- journal I/O


# --------------------------------------------------------------------------- the session


class BackupSession:
    """The backup of one repair run: ``save`` before each step, ``begin``/``end`` around it.

    Not a value: it owns the journal on disk and keeps it in step with every change.
    """

    def __init__(self, root: str, prefix: str, command: str, notify: Notify | None = None) -> None:
        prefix = os.path.abspath(prefix)
        root = os.path.abspath(root)
        refused = write_refusal(prefix, None)
        if refused is not None:
            raise LibdoctorError(refused)
        if is_inside(root, prefix) or is_inside(os.path.realpath(root), os.path.realpath(prefix)):
            raise LibdoctorError(f"the backup directory {root} must not be inside {prefix}")
        self._lock = Lock(prefix)
        try:
            found, damaged = scan_backups(root)
            if damaged and notify is not None:
                notify(skipped_note(damaged))  # it may be PREFIX's: nobody can restore it
            pending = [b for b in found if b.prefix == prefix and b.needs_restore]
            if pending:
                raise LibdoctorError(
                    f"an interrupted repair left backup {pending[-1].id} of {prefix} "
                    f"unrestored: run `libdoctor restore {pending[-1].id}` first"
                )
            self._guard = Guard(prefix)
            backup_id = _new_id()
            self.path = os.path.join(root, backup_id)
            os.makedirs(os.path.join(self.path, COPIES))
            os.makedirs(os.path.join(self.path, "tmp"))
            self.listing = list_tree(prefix, skip=root)
            write_json(
                os.path.join(self.path, LISTING),
                {
                    "prefix": prefix,
                    "entries": {p: entry_to_json(e) for p, e in self.listing.items()},
                },
            )
            self.info = BackupInfo(
                backup_id, self.path, prefix, now(), command, "in-progress", (), ()
            )
            self._saved: dict[str, SavedFile] = {}
            self._write()
        except BaseException:
            self._lock.release()
            raise

    @property
    def tmpdir(self) -> str:
        """A scratch directory for the installer (TMPDIR), inside the backup."""
        return os.path.join(self.path, "tmp")

    def _write(self) -> None:
        write_json(os.path.join(self.path, JOURNAL), info_to_json(self.info))

    def save(self, paths: Iterable[str]) -> int:
        """Copy each path that existed at the listing and is not yet saved; returns how many."""
        count = 0
        files = list(self.info.files)
        paths = list(paths)
        check_room(paths, self.path)
        checkpoint("before-backup")
        for number, path in enumerate(paths):
            if number == len(paths) // 2:
                checkpoint("mid-backup")
            before = self.listing.get(path)
            if path in self._saved or before is None or before.kind not in ("file", "symlink"):
                continue
            if not self._guard.allows(path):
                continue
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # gone already: rollback reports it if it was in the listing
            kind = entry_kind(st.st_mode)
            original = (kind, st.st_size, st.st_mtime_ns) == (
                before.kind,
                before.size,
                before.mtime_ns,
            )
            if kind == "symlink":
                saved = SavedFile(
                    path, "symlink", None, os.readlink(path), 0, st.st_mtime_ns, 0, None, original
                )
            elif kind == "file":
                copy = f"{COPIES}/{len(files):06d}"
                digest = _copy_out(path, os.path.join(self.path, copy))
                saved = SavedFile(
                    path,
                    "file",
                    copy,
                    None,
                    stat.S_IMODE(st.st_mode),
                    st.st_mtime_ns,
                    st.st_size,
                    digest,
                    original,
                    st.st_uid,
                    st.st_gid,
                )
            else:
                continue
            self._saved[path] = saved
            files.append(saved)
            count += 1
        if count:
            fsync_dir(os.path.join(self.path, COPIES))
        self.info = replace(self.info, files=tuple(files))
        return count

    def _inside(self, path: str) -> bool:
        """A path the journal may name as the run's: below the prefix (a RECORD may name
        ``../../../../etc/x``; a restore never goes there)."""
        return path != self.info.prefix and is_inside(path, self.info.prefix)

    def begin(self, argv: Sequence[str], saved: int) -> None:
        """Journal the step as running, with the time it starts: written and fsync'd before
        it starts (what it creates from now on may be its own)."""
        step = StepRecord(tuple(argv), "running", None, saved, started_ns=time.time_ns())
        self.info = replace(self.info, steps=(*self.info.steps, step))
        self._write()
        checkpoint("after-journal")

    def started(self, pid: int) -> None:
        """Journal the running step's installer pid: ``restore`` refuses while it runs."""
        *done, last = self.info.steps
        self.info = replace(self.info, steps=(*done, replace(last, pid=pid)))
        self._write()

    def end(self, returncode: int, message: str = "", own: Iterable[str] = ()) -> None:
        """Journal the step's end, and the paths the RECORDs it left name (its own); OWN:
        more paths the step itself removed or wrote (a cache clear's directories)."""
        *done, last = self.info.steps
        last = replace(
            last,
            state="done" if returncode == 0 else "failed",
            returncode=returncode,
            message=message,
            ended_ns=time.time_ns(),
            wrote=tuple(p for p in (*records_written(self.listing), *own) if self._inside(p)),
        )
        self.info = replace(self.info, steps=(*done, last))
        self._write()

    def finish(self, state: BackupState) -> BackupInfo:
        """The run ended: how the prefix it leaves differs from the listing (what a later
        restore tells later changes by), then the journal's final state."""
        after = list_tree(self.info.prefix, skip=os.path.dirname(self.path))
        changed = {p: entry_to_json(e) for p, e in after.items() if self.listing.get(p) != e}
        removed = [p for p in self.listing if p not in after]
        document = {"prefix": self.info.prefix, "changed": changed, "removed": removed}
        write_json(os.path.join(self.path, AFTER), document)
        self.info = replace(self.info, state=state)
        self._write()
        self.close()
        return self.info

    def rollback(self) -> RestoreResult:
        """Undo every step so far; the journal says whether that worked."""
        result = rollback(self.info, self.listing, dry_run=False)
        state: BackupState = "rolled-back" if result.ok else "failed"
        event = {"at": now(), "event": "rolled back", "ok": result.ok}
        self.info = replace(self.info, state=state, history=(*self.info.history, event))
        self._write()
        self.close()
        return replace(result, backup=self.info)

    def close(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        self._lock.release()
