"""Reading and digesting many files: on a pool of workers, or one after the other.

The pool is the speed; ``digest_one_by_one`` beside it is the reference it is tested
against (the same digests, file for file).

The files go largest first (longest-processing-time order), cut into batches: a big file
alone, small ones together (up to ~1/256 of the bytes, or of the files). Every worker
takes the next batch itself, a ticket read from one pipe (a 4-byte read(2), which the
kernel hands to one reader only): the last batches are the smallest, so the workers end
within a small batch of each other instead of one of them ending alone on a 500 MB
library, and a worker that dies holds no lock.

The workers are this thread and forked children, not threads: hashlib releases the GIL
while it digests a buffer, so threads would do for big files, but a 4 KiB file is ~8 us
of opening, reading and spelling under the GIL for 2 us of hashing, and threads on the
16k small files of a torch env take turns on the GIL, on one core however many there are.
A child is forked before any thread starts (and only when no other thread runs: it could
hold a lock the child would wait on), gets the list by inheritance, sends back only its
digests (marshalled), and costs ~1 ms to start. Where forking is not possible or safe,
the workers are threads. A batch no worker delivered (a child killed) is digested here at
the end: the result never depends on a child.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from stat import S_ISREG
from typing import Any, Protocol, TypeVar

from libdoctor.disk.stat import FileState

__all__ = [
    "Tickets",
    "available_cores",
    "batches_of",
    "cgroup_cpus",
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


class Job(Protocol):
    """One file to digest (``hashing.HashJob`` is one)."""

    @property
    def path(self) -> str: ...

    @property
    def algorithm(self) -> str: ...

    @property
    def state(self) -> FileState: ...


J = TypeVar("J", bound=Job)
Progress = Callable[[int], None]  # called with the bytes done since the last call
# Starts the progress bar: only once the child is forked (a bar's thread must not be).
StartProgress = Callable[[], Progress]
_FORK_MIN = 256  # fewer files than this: not worth a child
_PENDING: Any = object()  # a value slot no worker has filled yet


def available_cores() -> int:
    """The cores this process may run on, not the machine's: its affinity mask, and its
    cgroup's CPU quota (a container given 2 CPUs of a 64-core host: 2, not 63 children)."""
    try:
        cores = len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_cpus()
    return max(1, min(cores, quota)) if quota else cores


def cgroup_cpus(proc: str = "/proc/self/cgroup", mount: str = "/sys/fs/cgroup") -> int | None:
    """The CPU quota of this process's cgroup in whole CPUs (rounded up): cgroup v2's
    ``cpu.max``, else v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; None: no quota, or
    none readable."""
    try:
        with open(proc, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(65536).splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        if controllers == "":  # v2: "0::/path"
            numbers = _read_words(f"{mount}{path.rstrip('/')}/cpu.max")
        elif "cpu" in controllers.split(","):  # v1: "4:cpu,cpuacct:/path"
            base = f"{mount}/{controllers}{path.rstrip('/')}/cpu.cfs_"
            numbers = _read_words(base + "quota_us") + _read_words(base + "period_us")
        else:
            continue
        if len(numbers) >= 2 and numbers[0].isdigit() and numbers[1].isdigit():
            quota, period = int(numbers[0]), int(numbers[1])
            if quota > 0 and period > 0:
                return -(-quota // period)
    return None


def _read_words(path: str) -> list[str]:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read(256).split()
    except OSError:
        return []


def largest_first(jobs: list[J]) -> None:
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

    def spelled(self, job: Job) -> str | None:
        """JOB's digest as RECORD spells it; None: it could not be read."""
        from libdoctor.digests import spell_hash

        path, algorithm = job.path, job.algorithm
        try:
            if self.host is not None:
                path = self.host(path)
            digest = digest_file(path, algorithm, self.buffer, self.view, self.constructors)
        except (OSError, ValueError):
            return None
        return spell_hash(algorithm, digest)


def digest_one_by_one(
    todo: Sequence[Job],
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
    todo: Sequence[Job],
    workers: int,
    progress: StartProgress | None = None,
    host: Callable[[str], str] | None = None,
    *,
    fork: bool = True,
) -> list[str | None]:
    """What digest_one_by_one returns, on WORKERS workers taking batches of TODO (best
    largest_first) in turn: this thread and WORKERS - 1 forked children; without FORK, or
    where forking is not safe, WORKERS threads."""
    values: list[Any] = [_PENDING] * len(todo)
    batches = batches_of(todo)
    tickets = Tickets(len(batches))
    counters = _Counters(workers)
    children: list[_Child] = []
    try:
        if fork and len(todo) >= _FORK_MIN and not tickets.broken and _may_fork():
            for slot in range(1, workers):
                child = _Child.fork(todo, batches, tickets, host, counters, slot)
                if child is None:
                    break
                children.append(child)
        tick = progress() if progress else None
        if children:
            _work(todo, batches, tickets, values, _Reader(host), counters, 0, tick)
        else:
            _in_threads(todo, batches, tickets, values, workers, host, counters, tick)
    finally:
        for child in children:
            child.collect(values)
        tickets.close()
    missing = [i for i, value in enumerate(values) if value is _PENDING]
    redone = digest_one_by_one([todo[i] for i in missing], None, host) if missing else []
    for i, value in zip(missing, redone, strict=True):  # a child failed, or was killed
        values[i] = value
    if tick:
        tick(sum(job.state.size for job in todo) - counters.reported)
    return values


def _may_fork() -> bool:
    """Forking is safe: no other thread may hold a lock the child would wait on forever."""
    import threading

    return hasattr(os, "fork") and threading.active_count() == 1


def batches_of(todo: Sequence[Job]) -> list[tuple[int, int]]:
    """TODO (largest first) cut into (start, stop) ranges: a big file alone, smaller ones
    together up to 1/256 of all bytes (at least a chunk) and 1/256 of the files (at least
    64). At most ~770 batches: their tickets fit the smallest pipe (one page)."""
    sizes = [job.state.size for job in todo]
    most_bytes = max(CHUNK, sum(sizes) // 256)
    most_files = max(64, -(-len(sizes) // 256))
    batches = []
    start, held = 0, 0
    for index, size in enumerate(sizes):
        if index > start and (held + size > most_bytes or index - start >= most_files):
            batches.append((start, index))
            start, held = index, 0
        held += size
    if start < len(sizes):
        batches.append((start, len(sizes)))
    return batches


class Tickets:
    """The work queue: the numbers of the batches, all written at once into a pipe; each
    worker takes the next with one 4-byte read, which the kernel gives one reader alone.
    Empty: every batch is taken."""

    def __init__(self, count: int) -> None:
        data = b"".join(number.to_bytes(4, "little") for number in range(count))
        self._read, write = os.pipe()
        try:
            os.set_blocking(write, False)  # a pipe smaller than that fails, never hangs
            sent = os.write(write, data) if data else 0
        except OSError:
            sent = -1
        finally:
            os.close(write)  # no writer left: an empty pipe reads as the end
        # Could not hold them all (a user out of pipe pages gets one page): threads only,
        # counting in this process.
        self.broken = sent != len(data)
        self._next = iter(range(count)).__next__

    def take(self) -> int | None:
        """The next batch's number; None once none is left."""
        if self.broken:
            try:
                return self._next()
            except StopIteration:
                return None
        data = os.read(self._read, 4)
        return int.from_bytes(data, "little") if len(data) == 4 else None

    def close(self) -> None:
        os.close(self._read)


class _Counters:
    """Bytes done per worker, in a page shared across the fork (for the progress bar);
    ``reported``: how many the bar has been told of."""

    def __init__(self, workers: int) -> None:
        import mmap
        import struct

        self._page = mmap.mmap(-1, 8 * workers)  # anonymous and shared with the children
        self._slot = struct.Struct("q")
        self._workers = workers
        self.reported = 0

    def add(self, slot: int, amount: int) -> None:
        offset = 8 * slot
        self._slot.pack_into(
            self._page, offset, self._slot.unpack_from(self._page, offset)[0] + amount
        )

    def total(self) -> int:
        return sum(self._slot.unpack_from(self._page, 8 * i)[0] for i in range(self._workers))

    def report(self, tick: Progress | None) -> None:
        if tick:
            total = self.total()
            tick(total - self.reported)
            self.reported = total


def _work(
    todo: Sequence[Job],
    batches: list[tuple[int, int]],
    tickets: Tickets,
    values: list[Any],
    reader: _Reader,
    counters: _Counters,
    slot: int,
    tick: Progress | None = None,
    parent: int | None = None,
) -> list[int]:
    """Take batches until none is left, filling VALUES; count the bytes in SLOT (and move
    the bar, TICK, after each batch: this thread's). PARENT: a forked child's parent's pid;
    once it is not the parent any more (killed, the child given to another), no batch is
    taken: no one would read the digests. The numbers of the batches done."""
    taken = []
    while (parent is None or os.getppid() == parent) and (number := tickets.take()) is not None:
        start, stop = batches[number]
        done = 0
        for index in range(start, stop):
            job = todo[index]
            values[index] = reader.spelled(job)
            done += job.state.size
        counters.add(slot, done)
        counters.report(tick)
        taken.append(number)
    return taken


def _in_threads(
    todo: Sequence[Job],
    batches: list[tuple[int, int]],
    tickets: Tickets,
    values: list[Any],
    workers: int,
    host: Callable[[str], str] | None,
    counters: _Counters,
    tick: Progress | None,
) -> None:
    """WORKERS threads taking batches; this one only waits, or moves the bar."""
    import threading

    def work(slot: int) -> None:
        _work(todo, batches, tickets, values, _Reader(host), counters, slot)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.1 if tick else None)
            counters.report(tick)


class _Child:
    """A forked worker: takes batches like the parent, sends back their digests."""

    def __init__(self, pid: int, read_fd: int) -> None:
        self._pid = pid
        self._read = read_fd

    @classmethod
    def fork(
        cls,
        todo: Sequence[Job],
        batches: list[tuple[int, int]],
        tickets: Tickets,
        host: Callable[[str], str] | None,
        counters: _Counters,
        slot: int,
    ) -> _Child | None:
        """The child started (None: it could not be forked)."""
        read_fd, write_fd = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return None
        if pid == 0:  # the child: digest, send, leave without running the parent's exit
            code = 1
            try:
                import gc
                import marshal

                gc.disable()  # a collection would walk (and copy) every inherited page
                os.close(read_fd)
                values: list[Any] = [None] * len(todo)
                reader = _Reader(host)
                taken = _work(todo, batches, tickets, values, reader, counters, slot, None, parent)
                sent = [(batches[n][0], values[slice(*batches[n])]) for n in taken]
                with os.fdopen(write_fd, "wb") as out:
                    out.write(marshal.dumps(sent))
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        return cls(pid, read_fd)

    def collect(self, values: list[Any]) -> None:
        """Wait for the child; fill the slots of VALUES it did. A child that failed, or
        sent something else, fills nothing (its batches are done again)."""
        import marshal

        with os.fdopen(self._read, "rb") as handle:
            data = handle.read()
        try:
            _, status = os.waitpid(self._pid, 0)
        except ChildProcessError:  # reaped already (SIGCHLD ignored): the data must do
            status = 0
        try:
            sent = marshal.loads(data) if status == 0 else []
        except Exception:  # damaged: the parent does it all
            return
        for start, done in sent if isinstance(sent, list) else ():
            if not (isinstance(start, int) and isinstance(done, list)):
                continue
            if start >= 0 and start + len(done) <= len(values):
                for index, value in enumerate(done, start):
                    if value is None or isinstance(value, str):
                        values[index] = value
