"""Every path a run asks the operating system about: what ``check`` read, for its reuse.

While ``recording()`` is on, os's file queries (``stat``, ``lstat``, ``listdir``, ``scandir``,
``readlink``, ``access``, ``open``) and the built-in ``open`` are wrapped: ``os.path`` and
``pathlib`` reach the disk through these, so the record is complete by construction, without
asking the check's code what it read. The import system's own reads are not seen (it holds
its own references): ``own_modules`` adds every imported module's file instead. A child forked while
recording records on (it inherits the wrappers) and hands its paths back (``child_reads``,
``merge_reads``: ``analysis.overlap`` does). ``analysis.reuse`` is the one user.

Paths are kept as asked for (absolute: a relative one joined to the working directory, a
name relative to a directory fd joined to the path that fd was opened with), never
normalised: ``a/../b`` is what the kernel resolves, not what ``normpath`` says.
"""

from __future__ import annotations

import builtins
import io
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from libdoctor.environment.parsed import Identity, identity

__all__ = [
    "LINK",
    "MAX_PATHS",
    "UNKNOWN",
    "Identity",
    "Reads",
    "child_reads",
    "merge_reads",
    "own_modules",
    "recording",
]

# Past this many paths a recording holds only UNKNOWN (its run is not stored): a reused check
# of a huge env would cost about what it saves, and the record its memory (~150 B a path).
MAX_PATHS = 250_000

_reads: set[str] | None = None  # the paths of the recording under way, if any
# path -> (size, mtime_ns, inode, ctime_ns, device) or (-errno, 0, 0, 0, 0), from the run's
# own stat() of it, for the recording under way that asked for them
_seen: dict[str, Identity] | None = None
_fds: dict[int, str] = {}  # fds os.open returned while recording: for dir_fd= calls
_owner: int | None = None  # the thread whose recording is under way
_lock = threading.Lock()  # held while the wrappers go in or out


LINK = "\0"  # a read's mark for a path whose own entry was asked about (lstat, readlink)
UNKNOWN = "\0?"  # a path not known (relative to an fd not opened while recording), or too many


def _note(path: Any, dir_fd: int | None = None, link: bool = False) -> str | None:
    """Record PATH; the absolute path recorded (without the LINK mark), or None."""
    reads = _reads
    if reads is None:
        return None
    if len(reads) > MAX_PATHS:
        reads.clear()
        reads.add(UNKNOWN)
    if type(path) is str and not link:  # the common cases: a whole path, a name in a dir
        if dir_fd is None and path.startswith("/"):
            reads.add(path)
            return path
        if dir_fd is not None and (base := _fds.get(dir_fd)) is not None and "/" not in path:
            name = f"{base}/{path}"
            reads.add(name)
            return name
    if isinstance(path, int):  # an fd: its file was noted where it was opened
        return None
    try:
        name = os.fsdecode(os.fspath(path))
    except (TypeError, ValueError):
        return None
    if dir_fd is not None and not name.startswith("/"):
        base = _fds.get(dir_fd)
        if base is None:
            reads.add(UNKNOWN)
            return None
        name = f"{base}/{name}"
    elif not name.startswith("/"):
        name = f"{os.getcwd()}/{name}" if name else os.getcwd()
    reads.add(LINK + name if link else name)
    return name


def _wrap_path_call(original: Callable[..., Any], link: bool) -> Callable[..., Any]:
    def call(path: Any = None, *args: Any, **kwargs: Any) -> Any:
        entry = link or kwargs.get("follow_symlinks") is False
        _note("." if path is None else path, kwargs.get("dir_fd"), entry)
        return original(*(() if path is None else (path,)), *args, **kwargs)

    return call


def _wrap_stat(original: Callable[..., Any]) -> Callable[..., Any]:
    """``os.stat`` recorded, and what it returned kept as the path's identity (the first
    answer during the run: a later change of the file makes the next run's differ)."""

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        entry = kwargs.get("follow_symlinks") is False
        name = _note(path, kwargs.get("dir_fd"), entry)
        seen = _seen
        try:
            st = original(path, *args, **kwargs)
        except OSError as exc:
            if name is not None and not entry and seen is not None and name not in seen:
                seen[name] = (-(exc.errno or 1), 0, 0, 0, 0)
            raise
        if name is not None and not entry and seen is not None and name not in seen:
            seen[name] = identity(st)
        return st

    return stat


_WRAPPED = ("stat", "lstat", "listdir", "scandir", "readlink", "access")


@contextmanager
def recording(identities: dict[str, Identity] | None = None) -> Iterator[set[str]]:
    """Every path asked about while inside (in this process, and in children forked inside,
    see ``child_reads``): os's file queries and ``open`` are wrapped for the while.
    IDENTITIES, if given, gets what the run's own ``stat`` of a path said, first (saving
    the caller a ``stat`` of its own)."""
    global _reads, _seen, _owner
    with _lock:
        outer, mine = _reads, _owner == threading.get_ident()
        if outer is None:
            originals = {name: getattr(os, name) for name in _WRAPPED}
            os_open, builtin_open = os.open, builtins.open
            reads: set[str] = set()
            _reads, _seen, _owner = reads, identities, threading.get_ident()
            _install(originals, os_open, builtin_open)
    if outer is not None:
        # nested: the outer recording holds it all. Another thread's recording (two API
        # calls at once) may end, taking the wrappers with it, while this run reads on:
        # this one is then never stored.
        yield outer if mine else {UNKNOWN}
        return
    try:
        yield reads
    finally:
        with _lock:
            for name, original in originals.items():
                setattr(os, name, original)
            os.open = os_open
            builtins.open = io.open = builtin_open
            _reads, _seen, _owner = None, None, None
            _fds.clear()


def _install(
    originals: dict[str, Callable[..., Any]],
    os_open: Callable[..., int],
    builtin_open: Callable[..., Any],
) -> None:
    def opened(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        _note(path, dir_fd)
        fd = os_open(path, flags, mode, dir_fd=dir_fd)
        if _reads is not None and not isinstance(path, int):
            name = os.fsdecode(os.fspath(path))
            if dir_fd is None and name.startswith("/"):
                _fds[fd] = name
        return fd

    def open_file(file: Any, *args: Any, **kwargs: Any) -> Any:
        _note(file)
        return builtin_open(file, *args, **kwargs)

    for name, original in originals.items():
        wrapped = _wrap_stat(original) if name == "stat" else None
        setattr(os, name, wrapped or _wrap_path_call(original, name in ("lstat", "readlink")))
    os.open = opened
    builtins.open = io.open = open_file


Reads = tuple[frozenset[str], dict[str, Identity]]


def child_reads() -> Reads | None:
    """In a forked child: what the recording under way saw (None if none is)."""
    if _reads is None:
        return None
    return frozenset(_reads | own_modules()), {} if _seen is None else _seen


def merge_reads(reads: Reads | None) -> None:
    """In the parent: add what a child's recording saw."""
    if _reads is None or not reads:
        return
    paths, identities = reads
    _reads.update(paths)
    if len(_reads) > MAX_PATHS:
        _reads.clear()
        _reads.add(UNKNOWN)
    if _seen is not None:
        for path, identity in identities.items():
            _seen.setdefault(path, identity)


def own_modules() -> set[str]:
    """The files of every module imported here, libdoctor's and those it uses (packaging
    decides requirement markers), as absolute paths: the import system's reads are not seen
    by the recording, and a changed module decides again."""
    return {
        file
        for module in list(sys.modules.values())
        if type(file := getattr(module, "__file__", None)) is str and file.startswith("/")
    }
