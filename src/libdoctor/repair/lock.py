"""One repair or restore per prefix at a time: an flock in the backup root."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from collections.abc import Iterator

from libdoctor.errors import LibdoctorError


class Lock:
    """Held from construction to ``release``; a second holder fails at once, never waits."""

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
def locked(root: str, prefix: str) -> Iterator[None]:
    lock = Lock(root, prefix)
    try:
        yield
    finally:
        lock.release()
