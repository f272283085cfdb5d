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


MISSING = FileState(exists=False, error="no such file")


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
    writes. Results are memoised for one run, by the path as the model names it."""

    def __init__(self, root: str = "/") -> None:
        self._stats: dict[str, FileState] = {}
        self._listings: dict[str, tuple[str, ...]] = {}
        rooted = Rooted(root)
        self._host = None if rooted.is_host else rooted.host

    def stat(self, path: str) -> FileState:
        cached = self._stats.get(path)
        if cached is not None:
            return cached
        try:
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
            state = FileState(
                True, S_ISREG(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev
            )
        self._stats[path] = state
        return state

    @property
    def removed(self) -> frozenset[str]:
        return frozenset()

    def prefetch(self, paths: Iterable[str]) -> list[FileState]:
        """stat() every path now, in one tight loop (22k files: the hot path of ``check``);
        the states, in the order of PATHS.

        Each file is stat'ed by name in its directory, opened once for the run of paths in
        it (``O_PATH``: no read permission needed, symlinks followed as a path's walk
        follows them): the kernel walks one name instead of the whole path, a quarter of
        the time on a torch env. A directory that cannot be opened, and any file that
        cannot be stat'ed, is stat'ed by its whole path, as ``stat()`` does."""
        if self._host is not None or not _AT_DIR:  # inside a root: each path resolved first
            return [self.stat(path) for path in paths]
        cache = self._stats
        stat = os.stat
        new = tuple.__new__  # FileState(...) without the Python-level __new__ frame
        states: list[FileState] = []
        append = states.append
        here, fd = None, -1  # the directory open now
        try:
            for path in paths:
                state = cache.get(path)
                if state is None:
                    head, _, name = path.rpartition("/")
                    if head != here:
                        if fd >= 0:
                            os.close(fd)
                        here, fd = head, _open_dir(head)
                    try:
                        st = stat(name, dir_fd=fd) if fd >= 0 and name else stat(path)
                    except (OSError, ValueError):
                        state = self.stat(path)  # the rare failure: let stat() classify it
                    else:
                        regular = S_ISREG(st.st_mode)
                        state = cache[path] = new(
                            FileState,
                            (True, regular, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, None),
                        )
                append(state)
        finally:
            if fd >= 0:
                os.close(fd)
        return states

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
