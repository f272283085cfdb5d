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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "LINK",
    "MAX_PATHS",
    "UNKNOWN",
    "child_reads",
    "merge_reads",
    "own_modules",
    "recording",
]

# Past this many paths a recording holds only UNKNOWN (its run is not stored): a reused check
# of a huge env would cost about what it saves, and the record its memory (~150 B a path).
MAX_PATHS = 250_000

_reads: set[str] | None = None  # the paths of the recording under way, if any
_fds: dict[int, str] = {}  # fds os.open returned while recording: for dir_fd= calls


LINK = "\0"  # a read's mark for a path whose own entry was asked about (lstat, readlink)
UNKNOWN = "\0?"  # a path not known (relative to an fd not opened while recording), or too many


def _note(path: Any, dir_fd: int | None = None, link: bool = False) -> None:
    reads = _reads
    if reads is None:
        return
    if len(reads) > MAX_PATHS:
        reads.clear()
        reads.add(UNKNOWN)
    if type(path) is str and not link:  # the common cases: a whole path, a name in a dir
        if dir_fd is None and path.startswith("/"):
            reads.add(path)
            return
        if dir_fd is not None and (base := _fds.get(dir_fd)) is not None and "/" not in path:
            reads.add(f"{base}/{path}")
            return
    if isinstance(path, int):  # an fd: its file was noted where it was opened
        return
    try:
        name = os.fsdecode(os.fspath(path))
    except (TypeError, ValueError):
        return
    if dir_fd is not None and not name.startswith("/"):
        base = _fds.get(dir_fd)
        if base is None:
            reads.add(UNKNOWN)
            return
        name = f"{base}/{name}"
    elif not name.startswith("/"):
        name = f"{os.getcwd()}/{name}" if name else os.getcwd()
    reads.add(LINK + name if link else name)


def _wrap_path_call(original: Callable[..., Any], link: bool) -> Callable[..., Any]:
    def call(path: Any = None, *args: Any, **kwargs: Any) -> Any:
        entry = link or kwargs.get("follow_symlinks") is False
        _note("." if path is None else path, kwargs.get("dir_fd"), entry)
        return original(*(() if path is None else (path,)), *args, **kwargs)

    return call


_WRAPPED = ("stat", "lstat", "listdir", "scandir", "readlink", "access")


@contextmanager
def recording() -> Iterator[set[str]]:
    """Every path asked about while inside (in this process, and in children forked inside,
    see ``child_reads``): os's file queries and ``open`` are wrapped for the while."""
    global _reads
    if _reads is not None:  # nested: the outer recording holds it all
        yield _reads
        return
    originals = {name: getattr(os, name) for name in _WRAPPED}
    os_open, builtin_open = os.open, builtins.open

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

    _reads = set()
    try:
        for name, original in originals.items():
            setattr(os, name, _wrap_path_call(original, name in ("lstat", "readlink")))
        os.open = opened
        builtins.open = io.open = open_file
        yield _reads
    finally:
        for name, original in originals.items():
            setattr(os, name, original)
        os.open = os_open
        builtins.open = io.open = builtin_open
        _reads = None
        _fds.clear()


def child_reads() -> frozenset[str] | None:
    """In a forked child: what the recording under way saw (None if none is)."""
    return None if _reads is None else frozenset(_reads | own_modules())


def merge_reads(reads: frozenset[str] | None) -> None:
    """In the parent: add what a child's recording saw."""
    if _reads is not None and reads:
        _reads.update(reads)
        if len(_reads) > MAX_PATHS:
            _reads.clear()
            _reads.add(UNKNOWN)


def own_modules() -> set[str]:
    """The files of every module imported here, libdoctor's and those it uses (packaging
    decides requirement markers), as absolute paths: the import system's reads are not seen
    by the recording, and a changed module decides again."""
    return {
        file
        for module in list(sys.modules.values())
        if type(file := getattr(module, "__file__", None)) is str and file.startswith("/")
    }
