"""Reading and digesting many files: on a pool of workers, or one after the other.

The pool is the speed; ``digest_one_by_one`` beside it is the reference it is tested
against (the same digests, file for file).

Big files go to threads: hashlib releases the GIL while it digests a buffer (over 2 KiB)
and the kernel copies a file's pages without it, so a thread hashing a 500 MB library
holds the GIL for microseconds per MiB. Small files do not: a 4 KiB file is ~8 us of
opening, reading and spelling under the GIL for 2 us of hashing, so threads on the 16k
small files of a torch env take turns on the GIL and run on one core, however many there
are. Those go to one forked child, which has its own GIL: the threads take files largest
first from the front of the list, the child smallest first from its back, and they meet
in the middle, each taking the next file itself, so both end within a file of each other.
The child is forked before any thread starts (and only when no other thread runs), gets
its files by inheritance and sends back only its digests, marshalled: it costs ~1 ms.

Where they meet is published in a shared page: each side writes only its own index and
reads the other's. A stale read can make both sides hash one file (the same digest, so
harmless); a file neither side has done (the child killed, or failing) is hashed by the
parent at the end. The result never depends on the child.

The main thread only waits (or moves the progress bar): Python work beside the threads
would take the GIL from them between their chunks, each of which then waits up to the
switch interval (5 ms) for its 0.5 ms of hashing.
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
    "digest_in_pool",
    "digest_one_by_one",
    "largest_first",
]

CHUNK = 1 << 20  # read and digested at a time (256 KiB measured the same: the copy is the cost)
# Opened so that a path swapped for a FIFO after its stat fails instead of blocking.
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_SIZE = attrgetter("state.size")
KEY = itemgetter(0, 1)  # a HashJob's (path, algorithm): how digests are keyed

Progress = Callable[[int], None]  # called with the bytes done since the last call
# Starts the progress bar: only once the child is forked (a bar's thread must not be).
StartProgress = Callable[[], Progress]
_FORK_MIN = 256  # fewer files than this: not worth a child
_PENDING: Any = object()  # a value slot no worker has filled yet


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


class _Reader:
    """One worker's reading kit: a buffer allocated once, hashlib's constructors looked up
    once, and where a path is opened (HOST: ``Rooted.host``; None: as it is)."""

    __slots__ = ("buffer", "constructors", "host", "view")

    def __init__(self, host: Callable[[str], str] | None) -> None:
        self.buffer = bytearray(CHUNK)
        self.view = memoryview(self.buffer)
        self.constructors = _constructors()
        self.host = host

    def spelled(self, job: HashJob) -> str | None:
        """JOB's digest as RECORD spells it; None: it could not be read."""
        from libdoctor.environment.record import spell_hash

        path, algorithm, _ = job
        try:
            if self.host is not None:
                path = self.host(path)
            digest = digest_file(path, algorithm, self.buffer, self.view, self.constructors)
        except (OSError, ValueError):
            return None
        return spell_hash(algorithm, digest)


def digest_one_by_one(
    todo: Sequence[HashJob],
    progress: StartProgress | None = None,
    host: Callable[[str], str] | None = None,
) -> list[str | None]:
    """Every job's digest, spelled as RECORD spells it (None: unreadable), in the order of
    TODO, one file after the other in this thread: the reference for digest_in_pool.
    HOST: where a path is opened (``Rooted.host``; None: as it is)."""
    tick = progress() if progress else None
    reader = _Reader(host)
    values: list[str | None] = []
    for job in todo:
        values.append(reader.spelled(job))
        if tick:
            tick(job.state.size)
    return values


def digest_in_pool(
    todo: Sequence[HashJob],
    workers: int,
    progress: StartProgress | None = None,
    host: Callable[[str], str] | None = None,
    *,
    fork: bool = True,
) -> list[str | None]:
    """What digest_one_by_one returns, on WORKERS workers: WORKERS - 1 threads from the
    front of TODO (best largest_first) and a forked child from its back; without FORK, a
    fork, or with another thread running, WORKERS threads."""
    import threading

    values: list[Any] = [_PENDING] * len(todo)
    child = None
    if fork and workers > 1 and len(todo) >= _FORK_MIN and _may_fork(threading):
        child = _SmallFiles.fork(todo, host)
    tick = progress() if progress else None
    meeting = child.meeting if child else None
    reported = _in_threads(todo, values, workers - 1 if child else workers, meeting, host, tick)
    if child:
        child.collect(values)
    missing = [i for i, value in enumerate(values) if value is _PENDING]
    if missing:  # the child failed, or was killed: its part is done here
        redo = digest_in_pool([todo[i] for i in missing], workers, None, host, fork=False)
        for i, value in zip(missing, redo, strict=True):
            values[i] = value
    if tick:
        tick(sum(job.state.size for job in todo) - reported)
    return values


def _may_fork(threading: Any) -> bool:
    """Forking is safe: no other thread may hold a lock the child would wait on forever."""
    return hasattr(os, "fork") and threading.active_count() == 1


def _in_threads(
    todo: Sequence[HashJob],
    values: list[Any],
    workers: int,
    meeting: _Meeting | None,
    host: Callable[[str], str] | None,
    tick: Progress | None,
) -> int:
    """Fill VALUES from the front of TODO on WORKERS threads, each taking the next index
    itself, until they meet the child coming from the back (MEETING; without it, to the
    end). Returns the bytes reported to TICK."""
    import itertools
    import threading

    take = itertools.count().__next__  # one C call: atomic under the GIL
    end = len(todo)
    finished = [0] * workers  # bytes each thread has done, for the progress bar

    def work(me: int) -> None:
        reader = _Reader(host)
        while True:
            index = take()
            if meeting is not None:
                meeting.front = index + 1
                if index >= meeting.back:
                    return
            if index >= end:
                return
            job = todo[index]
            values[index] = reader.spelled(job)
            finished[me] += job.state.size

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    reported = 0
    for thread in threads:
        while thread.is_alive():
            thread.join(0.1 if tick else None)
            if tick:
                total = sum(finished) + (meeting.child_bytes if meeting else 0)
                tick(total - reported)
                reported = total
    return reported


class _Meeting:
    """Where the threads (from the front) and the child (from the back) have come, in a page
    shared across the fork: each side writes only its own index. Also the bytes the child
    has done, for the progress bar."""

    def __init__(self, end: int) -> None:
        import mmap
        import struct

        self._page = mmap.mmap(-1, 24)  # anonymous and shared: the child's writes are seen
        self._slot = struct.Struct("q")
        self.front, self.back, self.child_bytes = 0, end, 0

    def _get(self, offset: int) -> int:
        value: int = self._slot.unpack_from(self._page, offset)[0]
        return value

    @property
    def front(self) -> int:
        """The threads' next index: they have taken every one below it."""
        return self._get(0)

    @front.setter
    def front(self, value: int) -> None:
        self._slot.pack_into(self._page, 0, value)

    @property
    def back(self) -> int:
        """The child's last index: it has taken it and every one above."""
        return self._get(8)

    @back.setter
    def back(self, value: int) -> None:
        self._slot.pack_into(self._page, 8, value)

    @property
    def child_bytes(self) -> int:
        return self._get(16)

    @child_bytes.setter
    def child_bytes(self, value: int) -> None:
        self._slot.pack_into(self._page, 16, value)


class _SmallFiles:
    """The forked child that digests files from the back of the list, smallest first."""

    def __init__(self, pid: int, read_fd: int, meeting: _Meeting) -> None:
        self._pid = pid
        self._read = read_fd
        self.meeting = meeting

    @classmethod
    def fork(cls, todo: Sequence[HashJob], host: Callable[[str], str] | None) -> _SmallFiles | None:
        """The child started on TODO (None: it could not be forked)."""
        meeting = _Meeting(len(todo))
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return None
        if pid == 0:  # the child: digest, send, leave without running the parent's exit
            code = 1
            try:
                os.close(read_fd)
                _from_the_back(todo, host, meeting, write_fd)
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        return cls(pid, read_fd, meeting)

    def collect(self, values: list[Any]) -> None:
        """Wait for the child; fill the slots of VALUES it did that are still pending. A
        child that failed or sent something else fills nothing."""
        import marshal

        with os.fdopen(self._read, "rb") as handle:
            data = handle.read()
        try:
            _, status = os.waitpid(self._pid, 0)
        except ChildProcessError:  # reaped already (SIGCHLD ignored): the data must do
            status = 0
        try:
            lowest, done = marshal.loads(data) if status == 0 else (0, [])
        except Exception:  # damaged: the parent does it all
            return
        if not (isinstance(lowest, int) and isinstance(done, list)):
            return
        if lowest < 0 or lowest + len(done) != len(values):
            return
        for index, value in enumerate(done, lowest):
            if values[index] is _PENDING and (value is None or isinstance(value, str)):
                values[index] = value


def _from_the_back(
    todo: Sequence[HashJob], host: Callable[[str], str] | None, meeting: _Meeting, fd: int
) -> None:
    """In the child: digest TODO from its last job down until the threads' front, then send
    (the lowest index done, the digests from there on) down FD."""
    import gc
    import marshal

    gc.disable()  # a collection would walk (and copy) every page inherited from the parent
    reader = _Reader(host)
    done: list[str | None] = []
    index = len(todo) - 1
    bytes_done = 0
    while index >= 0 and index >= meeting.front:
        meeting.back = index
        job = todo[index]
        done.append(reader.spelled(job))
        bytes_done += job.state.size
        meeting.child_bytes = bytes_done
        index -= 1
    done.reverse()
    with os.fdopen(fd, "wb") as out:
        out.write(marshal.dumps((len(todo) - len(done), done)))
