"""What is on disk, behind one narrow interface so a what-if can replace it.

Checks ask ``Disk.stat`` and ``Disk.listdir``; the real implementation memoises, and a
simulated one (``WithoutPaths``) answers for the environment as it would be after a change.
The real disk of a system mounted at ``--root`` resolves each path inside it first
(``environment.rooted``): a link in the image to a host file is not the host file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from stat import S_ISREG
from typing import NamedTuple, Protocol

from libdoctor.environment.rooted import Rooted


class FileState(NamedTuple):
    """The facts a check needs about one path; ``error`` is set when it cannot be used.

    A NamedTuple: one is made per file on every run (hot path).
    """

    exists: bool
    is_file: bool = False
    size: int = 0
    mtime_ns: int = 0
    inode: int = 0
    device: int = 0
    error: str | None = None  # "no such file", "symlink loop", "permission denied", ...
    # The inode's change time: what a rewrite with its size and mtime put back (``touch
    # -r``, ``cp -p`` into the file) still moves, so a cached digest is not the bytes'.
    ctime_ns: int = 0


MISSING = FileState(exists=False, error="no such file")

# How RealDisk packs a regular file's state into one int: the size in the low bits, the
# inode above it, mtime_ns above both, ctime_ns above all.
_SIZE_BITS = 48
_SIZE_MASK = (1 << _SIZE_BITS) - 1
_INODE_MASK = (1 << 64) - 1
_MTIME_SHIFT = _SIZE_BITS + 64
_TIME_MASK = (1 << 64) - 1
_CTIME_SHIFT = _MTIME_SHIFT + 64


def _describe(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file"
    if exc.errno == errno.EACCES:
        return "permission denied"
    return exc.strerror or str(exc)


class Disk(Protocol):
    def stat(self, path: str) -> FileState: ...

    def listdir(self, path: str) -> tuple[str, ...]: ...

    @property
    def removed(self) -> frozenset[str]:
        """Paths this view pretends are gone (empty for the real disk)."""
        ...


class RealDisk:
    """Reads the file system (of the system at ROOT: every path resolved inside it); never
    writes. Results are memoised for one run, by the path as the model names it; with
    REMEMBER_FILES false, a regular file's state is not: a run that reads each file's state
    once (a plain ``check``) keeps 90 bytes less per file, 90 MB in a million."""

    def __init__(self, root: str = "/", remember_files: bool = True) -> None:
        self.remember_files = remember_files
        # A regular file on the device most are on is kept packed into one int (_packed),
        # any other state as it is: a million FileStates with their ints hold 200 MB,
        # packed 50.
        self._stats: dict[str, FileState | int] = {}
        self._device = -1  # the device packed states are on: the first regular file's
        self._listings: dict[str, tuple[str, ...]] = {}
        rooted = Rooted(root)
        self._host = None if rooted.is_host else rooted.host
        # Not remembering, stat() itself asks by name in the directory open last (as
        # prefetch does): a plain check stats each file there, in RECORD order.
        self._in_dir = InDir() if not remember_files and self._host is None and _AT_DIR else None

    def stat(self, path: str) -> FileState:
        cached = self._stats.get(path)
        if cached is not None:
            if not isinstance(cached, int):
                return cached
            return tuple.__new__(  # FileState(...) without the Python-level __new__ frame
                FileState,
                (
                    True,
                    True,
                    cached & _SIZE_MASK,
                    (cached >> _MTIME_SHIFT) & _TIME_MASK,
                    (cached >> _SIZE_BITS) & _INODE_MASK,
                    self._device,
                    None,
                    cached >> _CTIME_SHIFT,
                ),
            )
        try:
            if self._in_dir is not None:
                try:
                    st = self._in_dir.stat(path)
                except (OSError, ValueError):
                    st = os.stat(path)  # the rare failure: classified by the whole path
            else:
                st = os.stat(path if self._host is None else self._host(path))
        except OSError as exc:
            state = (
                MISSING
                if exc.errno in (errno.ENOENT, errno.ENOTDIR)
                else FileState(exists=True, error=_describe(exc))
            )
        except ValueError:  # embedded NUL in a RECORD path
            state = FileState(exists=False, error="invalid path")
        else:
            regular = S_ISREG(st.st_mode)
            state = tuple.__new__(  # FileState(...) without the Python-level __new__ frame
                FileState,
                (
                    True,
                    regular,
                    st.st_size,
                    st.st_mtime_ns,
                    st.st_ino,
                    st.st_dev,
                    None,
                    st.st_ctime_ns,
                ),
            )
            if regular:
                if self.remember_files:
                    self._stats[path] = self._packed(st)
                return state
        self._stats[path] = state
        return state

    def regular_size(self, path: str) -> int | None:
        """PATH's size when it is a regular file that could be stat'ed, else None: what
        ``stat`` says, without making a FileState of a packed one (a snapshot's rows)."""
        cached = self._stats.get(path)
        if isinstance(cached, int):
            return cached & _SIZE_MASK
        state = self.stat(path) if cached is None else cached
        return state.size if state.is_file and not state.error else None

    def _packed(self, st: os.stat_result) -> FileState | int:
        """ST, a regular file's, as one int (size, inode, mtime_ns, then ctime_ns above
        them) when it is on the device of the others and its fields fit; else as a FileState."""
        if self._device < 0:
            self._device = st.st_dev
        size, inode, mtime, ctime = st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns
        if (
            st.st_dev != self._device
            or size > _SIZE_MASK
            or inode > _INODE_MASK
            or not 0 <= mtime <= _TIME_MASK
            or ctime < 0
        ):
            return FileState(True, True, size, mtime, inode, st.st_dev, None, ctime)
        return size | inode << _SIZE_BITS | mtime << _MTIME_SHIFT | ctime << _CTIME_SHIFT

    @property
    def removed(self) -> frozenset[str]:
        return frozenset()

    def prefetch(self, paths: Iterable[str], states: bool = True) -> list[FileState]:
        """stat() every path now, in one tight loop (22k files: the hot path of ``check``);
        the states, in the order of PATHS (STATES false: none, only the memo filled).

        Each file is stat'ed by name in its directory, opened once for the run of paths in
        it (``InDir``): the kernel walks one name instead of the whole path, a quarter of
        the time on a torch env. A directory that cannot be opened, and any file that
        cannot be stat'ed, is stat'ed by its whole path, as ``stat()`` does."""
        if self._host is not None or not self.remember_files or not _AT_DIR:
            found = [self.stat(path) for path in paths]  # each path as stat() does
            return found if states else []
        cache = self._stats
        device = self._device
        new = tuple.__new__  # FileState(...) without the Python-level __new__ frame
        kept: list[FileState] = []
        in_dir = InDir()
        stat = in_dir.stat
        try:
            for path in paths:
                if path in cache:
                    if states:
                        kept.append(self.stat(path))
                    continue
                try:
                    st = stat(path)
                except (OSError, ValueError):
                    state = self.stat(path)  # the rare failure: let stat() classify it
                else:
                    size, inode, mtime = st.st_size, st.st_ino, st.st_mtime_ns
                    ctime = st.st_ctime_ns
                    if (  # _packed(), inlined: the common case
                        st.st_dev == device
                        and S_ISREG(st.st_mode)
                        and size <= _SIZE_MASK
                        and inode <= _INODE_MASK
                        and 0 <= mtime <= _TIME_MASK
                        and ctime >= 0
                    ):
                        cache[path] = (
                            size | inode << _SIZE_BITS | mtime << _MTIME_SHIFT
                            | ctime << _CTIME_SHIFT
                        )  # fmt: skip
                        if not states:
                            continue
                        state = new(
                            FileState, (True, True, size, mtime, inode, device, None, ctime)
                        )
                    else:
                        regular = S_ISREG(st.st_mode)
                        state = new(
                            FileState, (True, regular, size, mtime, inode, st.st_dev, None, ctime)
                        )
                        cache[path] = self._packed(st) if regular else state
                        device = self._device
                if states:
                    kept.append(state)
        finally:
            in_dir.close()
        return kept

    def listdir(self, path: str) -> tuple[str, ...]:
        cached = self._listings.get(path)
        if cached is not None:
            return cached
        try:
            names = tuple(os.listdir(path if self._host is None else self._host(path)))
        except (OSError, ValueError):
            names = ()
        self._listings[path] = names
        return names


# Stat'ing by name in a directory opened with O_PATH: Linux (elsewhere, by whole path).
_AT_DIR = hasattr(os, "O_PATH") and os.stat in os.supports_dir_fd and os.sep == "/"


class InDir:
    """``os.stat`` of an absolute path by its name in its directory, the directory opened
    once for a run of paths in it (``O_PATH``: no read permission needed, symlinks followed
    as a path's walk follows them). One directory open at a time; closed by ``close`` or
    when dropped. Not a value: it holds a descriptor."""

    __slots__ = ("_fd", "_here")

    def __init__(self) -> None:
        self._here: str | None = None
        self._fd = -1

    def stat(self, path: str) -> os.stat_result:
        head, _, name = path.rpartition("/")
        if head != self._here:
            self.close()
            self._here, self._fd = head, _open_dir(head)
        return os.stat(name, dir_fd=self._fd) if self._fd >= 0 and name else os.stat(path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._here, self._fd = None, -1

    def __del__(self) -> None:
        self.close()


def _open_dir(path: str) -> int:
    """PATH (absolute) opened as a directory to stat names in, or -1."""
    if not path.startswith("/"):
        return -1
    try:
        return os.open(path or "/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return -1


class WithoutPaths:
    """``base`` as it would be once ``removed`` paths are deleted (a what-if view)."""

    def __init__(self, base: Disk, removed: Iterable[str]) -> None:
        self._base = base
        self._removed = frozenset(removed)

    @property
    def removed(self) -> frozenset[str]:
        return self._removed | self._base.removed

    def stat(self, path: str) -> FileState:
        return MISSING if path in self._removed else self._base.stat(path)

    def listdir(self, path: str) -> tuple[str, ...]:
        return tuple(
            name
            for name in self._base.listdir(path)
            if os.path.join(path, name) not in self._removed
        )
