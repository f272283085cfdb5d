"""Reading and digesting many files: on a pool of threads, or one after the other.

The pool is the speed; ``digest_one_by_one`` beside it is the reference it is tested
against (the same digests, file for file). Threads, not processes: hashlib releases the GIL
while it digests a buffer (over 2 KiB) and the kernel copies a file's pages without it, so
every core hashes, and nothing is forked, pickled or sent back. The main thread only waits
(or moves the progress bar): Python work beside the pool would take the GIL from the
hashers between their chunks, each of which then waits up to the switch interval (5 ms)
for its 0.5 ms of hashing.

Fed largest first (longest-processing-time order), each thread taking the next file
itself: the last files to go are the smallest, so the threads finish within a small
file of each other instead of one of them ending alone on a 1 GB library.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from libdoctor.disk.hashing import HashJob

__all__ = [
    "available_cores",
    "digest_file",
    "digest_in_threads",
    "digest_one_by_one",
    "largest_first",
]

CHUNK = 1 << 20  # read and digested at a time (256 KiB measured the same: the copy is the cost)
# Opened so that a path swapped for a FIFO after its stat fails instead of blocking.
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_SIZE = attrgetter("state.size")
KEY = itemgetter(0, 1)  # a HashJob's (path, algorithm): how digests are keyed

Progress = Callable[[int], None]  # called with the bytes done since the last call


def available_cores() -> int:
    """The cores this process may run on (its affinity mask), not the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def largest_first(jobs: list[HashJob]) -> None:
    """Sort JOBS biggest file first, in place: the order the pool takes them in."""
    jobs.sort(key=_SIZE, reverse=True)


def _constructors() -> dict[str, Callable[[], Any]]:
    import hashlib

    # hashlib.new(name) goes through a Python-level lookup on every call (16k files).
    return {name: getattr(hashlib, name) for name in ("sha256", "sha384", "sha512", "sha1", "md5")}


def digest_file(
    path: str,
    algorithm: str,
    buffer: bytearray,
    view: memoryview,
    constructors: dict[str, Callable[[], Any]] | None = None,
) -> bytes:
    """The digest of PATH, read in chunks into BUFFER (VIEW: a memoryview of it). A thread
    hashing many files passes one it allocated once: a fresh 1 MiB bytearray per file would
    zero-fill 16 GB for the 16k files of a torch env, more work than hashing them. Only a
    regular file is read (never blocked on, never read without end). OSError, ValueError:
    not readable, or an algorithm hashlib does not have."""
    new = constructors.get(algorithm) if constructors else None
    if new is None:
        import hashlib

        digest = hashlib.new(algorithm)
    else:
        digest = new()
    fd = os.open(path, _FLAGS)
    try:
        if not S_ISREG(os.fstat(fd).st_mode):  # swapped since its stat: a FIFO, /dev/zero
            raise OSError(errno.EINVAL, "not a regular file", path)
        readv = os.readv
        buffers = (buffer,)
        while count := readv(fd, buffers):
            digest.update(view[:count])
    finally:
        os.close(fd)
    result: bytes = digest.digest()
    return result


def _spelled(
    job: HashJob,
    host: Callable[[str], str] | None,
    buffer: bytearray,
    view: memoryview,
    constructors: dict[str, Callable[[], Any]],
) -> str | None:
    """JOB's digest as RECORD spells it; None: it could not be read."""
    from libdoctor.environment.record import spell_hash

    path, algorithm, _ = job
    try:
        if host is not None:
            path = host(path)
        digest = digest_file(path, algorithm, buffer, view, constructors)
    except (OSError, ValueError):
        return None
    return spell_hash(algorithm, digest)


def digest_one_by_one(
    todo: Sequence[HashJob],
    progress: Progress | None = None,
    host: Callable[[str], str] | None = None,
) -> list[str | None]:
    """Every job's digest, spelled as RECORD spells it (None: unreadable), in the order of
    TODO, one file after the other in this thread: the reference for digest_in_threads.
    HOST: where a path is opened (``Rooted.host``; None: as it is)."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    constructors = _constructors()
    values: list[str | None] = []
    for job in todo:
        values.append(_spelled(job, host, buffer, view, constructors))
        if progress:
            progress(job.state.size)
    return values


def digest_in_threads(
    todo: Sequence[HashJob],
    workers: int,
    progress: Progress | None = None,
    host: Callable[[str], str] | None = None,
) -> list[str | None]:
    """What digest_one_by_one returns, on WORKERS threads that each take the next job
    themselves (TODO is best largest_first): no future per file, and the main thread only
    wakes to move the progress bar."""
    import threading
    from collections import deque

    values: list[str | None] = [None] * len(todo)
    queue = deque(range(len(todo)))
    finished = [0] * workers  # bytes each thread has done, for the progress bar
    constructors = _constructors()

    def work(me: int) -> None:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        take = queue.popleft
        while True:
            try:
                index = take()
            except IndexError:
                return
            job = todo[index]
            values[index] = _spelled(job, host, buffer, view, constructors)
            finished[me] += job.state.size

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    reported = 0
    for thread in threads:
        while thread.is_alive():
            thread.join(0.1 if progress else None)
            if progress:
                total = sum(finished)
                progress(total - reported)
                reported = total
    if progress:
        progress(sum(finished) - reported)
    return values
