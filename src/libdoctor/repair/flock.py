"""One repair or restore per environment at a time: an flock on its site directory itself.

The lock is taken on a file descriptor of the *resolved* site directory (opened read-only: it
needs no write there, nor any file beside it), so it holds whatever spelling names the
environment (a symlink, a relative path), whatever cache directory or user (sudo, another
``HOME``) runs libdoctor. It is released when the holder closes it or dies.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import os
from collections.abc import Iterator

from libdoctor.errors import LibdoctorError

__all__ = ["Lock", "lock_directory", "locked"]


def lock_directory(prefix: str) -> str:
    """The resolved directory that stands for PREFIX: its site-packages (the first, sorted,
    if there are several), or PREFIX itself (a ``pip install --target`` folder is its own)."""
    real = os.path.realpath(prefix)
    sites = {
        os.path.realpath(p)
        for pattern in ("lib/python3*/site-packages", "Lib/site-packages")
        for p in glob.glob(os.path.join(glob.escape(real), pattern))
        if os.path.isdir(p)
    }
    return min(sites) if sites else real


class Lock:
    """Held from construction to ``release``; a second holder fails at once, never waits."""

    def __init__(self, prefix: str) -> None:
        self.directory = lock_directory(prefix)
        try:
            self._fd: int | None = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise LibdoctorError(f"cannot lock {self.directory}: {exc.strerror}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self.release()
            if exc.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise LibdoctorError(
                    f"another libdoctor repair or restore is running on {prefix} "
                    f"(it holds {self.directory})"
                ) from None
            raise

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextlib.contextmanager
def locked(prefix: str) -> Iterator[None]:
    lock = Lock(prefix)
    try:
        yield
    finally:
        lock.release()
