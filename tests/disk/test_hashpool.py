"""The hashing pool against its reference: the same digests as one file after the other."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from libdoctor.digests import spell_hash
from libdoctor.disk.hashing import HashCache, HashJob, HashStats, hash_many
from libdoctor.disk.hashpool import (
    CHUNK,
    Tickets,
    available_cores,
    batches_of,
    cgroup_cpus,
    digest_in_pool,
    digest_one_by_one,
    largest_first,
)
from libdoctor.disk.stat import FileState, RealDisk

# Around every boundary the readers have: empty, hashlib's GIL release (2 KiB), the chunk.
SIZES = (0, 1, 2047, 2048, 2049, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 7)
ALGORITHMS = ("sha256", "sha512", "md5", "blake2b")  # the last: through hashlib.new
SMALL = 300  # files of a few bytes: enough that the pool forks its child for them


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> list[HashJob]:
    """Files of every boundary size (the big ones in two algorithms, the others in all),
    SMALL small files, and three jobs that cannot be read; largest first."""
    tmp_path = tmp_path_factory.mktemp("pool")
    disk = RealDisk()
    jobs = []
    for number in range(SMALL):
        path = tmp_path / f"small{number}"
        path.write_bytes(os.urandom(number * 7))
        jobs.append(HashJob(str(path), "sha256", disk.stat(str(path))))
    for number, size in enumerate(SIZES):
        path = tmp_path / f"f{number}"
        path.write_bytes(os.urandom(size))
        for algorithm in ALGORITHMS if size < CHUNK else ("sha256", "blake2b"):
            jobs.append(HashJob(str(path), algorithm, disk.stat(str(path))))
    gone = tmp_path / "gone"
    gone.write_bytes(b"x")
    state = disk.stat(str(gone))
    gone.unlink()  # stat'ed, then gone before it is read
    jobs.append(HashJob(str(gone), "sha256", state))
    jobs.append(HashJob(str(tmp_path), "sha256", disk.stat(str(tmp_path))))  # a directory
    fifo = tmp_path / "fifo"  # swapped in after a stat: fails, never blocks
    os.mkfifo(fifo)
    jobs.append(HashJob(str(fifo), "sha256", state))
    largest_first(jobs)
    return jobs


@pytest.fixture(scope="module")
def reference(jobs: list[HashJob]) -> list[str | None]:
    """One file after the other, checked against hashlib on the whole file once."""
    values = digest_one_by_one(jobs)
    assert values == [_expected(job) for job in jobs]
    assert values.count(None) == 3
    return values


def _expected(job: HashJob) -> str | None:
    path = Path(job.path)
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return spell_hash(job.algorithm, hashlib.new(job.algorithm, data).digest())


@pytest.mark.parametrize("fork", [True, False], ids=["threads+child", "threads"])
@pytest.mark.parametrize("workers", [2, 5])
def test_the_pool_gives_the_reference_digests(
    jobs: list[HashJob], reference: list[str | None], workers: int, fork: bool
) -> None:
    done: list[int] = []
    assert digest_in_pool(jobs, workers, lambda: done.append, fork=fork) == reference
    assert sum(done) == sum(job.state.size for job in jobs)  # the progress bar saw it all


def test_a_child_that_dies_leaves_its_part_to_the_parent(
    jobs: list[HashJob], reference: list[str | None], tmp_path: Path
) -> None:
    """The forked child exits on its first file (a real death, not a mock): every digest
    is still there, done by the parent."""
    parent = os.getpid()
    died = tmp_path / "died"

    def host(path: str) -> str:
        if os.getpid() != parent:
            died.touch()
            os._exit(3)
        return path

    assert digest_in_pool(jobs, 2, None, host) == reference
    assert died.exists()  # there was a child, and it did die


_ORPHANED = """
import os, signal, sys
from libdoctor.disk.hashing import HashJob
from libdoctor.disk.hashpool import digest_in_pool
from libdoctor.disk.stat import RealDisk

folder, log = sys.argv[1], sys.argv[2]
disk = RealDisk()
jobs = [HashJob(p, "sha256", disk.stat(p))
        for p in sorted(os.path.join(folder, n) for n in os.listdir(folder))]
parent = os.getpid()

def host(path):
    if os.getpid() != parent:  # the child: say which file it reads
        with open(log, "a") as out:
            out.write(path + "\\n")
    return path

# killed (-9) once its child is forked, before it takes a batch itself
digest_in_pool(jobs, 2, lambda: os.kill(parent, signal.SIGKILL), host)
"""


def test_a_child_whose_parent_was_killed_takes_no_more_batches(tmp_path: Path) -> None:
    """The parent killed (-9) mid-run: its forked child stops at the next batch, instead of
    digesting everything left (minutes of a whole disk's reading) for no one."""
    import subprocess
    import sys

    folder = tmp_path / "files"
    folder.mkdir()
    for number in range(SMALL):
        (folder / f"f{number:03}").write_bytes(bytes(64 * 1024))
    log = tmp_path / "log"
    done, holder = os.pipe()  # the child inherits HOLDER: its end is EOF here
    try:
        process = subprocess.run(
            [sys.executable, "-c", _ORPHANED, str(folder), str(log)],
            pass_fds=(holder,),
            check=False,
        )
    finally:
        os.close(holder)
    with os.fdopen(done, "rb") as ended:
        ended.read()  # until the orphaned child has exited
    assert process.returncode == -9
    read = log.read_text().splitlines() if log.exists() else []
    assert len(read) < SMALL, "the child went on alone through every file"


@pytest.mark.parametrize("files", [0, 1, 5, 300, 50_000])
def test_batches_cover_every_file_once_and_their_tickets_fit_a_page(files: int) -> None:
    """Largest first, a big file alone, small ones together; never more tickets (4 bytes
    each) than the smallest pipe holds at once."""
    sizes = sorted(((n * 7919) % 5000) ** 3 // 1000 for n in range(files))[::-1]
    jobs = [
        HashJob(f"/f{n}", "sha256", FileState(True, True, size)) for n, size in enumerate(sizes)
    ]
    cut = batches_of(jobs)
    assert [index for start, stop in cut for index in range(start, stop)] == list(range(files))
    assert len(cut) * 4 <= 4096
    limit = max(CHUNK, sum(sizes) // 256)
    assert all(stop - start == 1 or sum(sizes[start:stop]) <= limit for start, stop in cut)


def test_hash_many_on_one_worker_equals_the_pool(
    jobs: list[HashJob], reference: list[str | None]
) -> None:
    """--workers 1 is the reference, in the calling thread: the same digests and counts."""
    runs = []
    for workers in (1, 2):
        stats = HashStats()
        runs.append((hash_many(jobs, HashCache(None), stats, workers=workers), stats))
    (one, one_stats), (pool, pool_stats) = runs
    assert one == pool and one_stats == pool_stats
    assert pool_stats.errors == 3 and pool_stats.files_hashed == len(jobs) - 3
    read = [job for job, value in zip(jobs, reference, strict=True) if value is not None]
    assert pool_stats.bytes_hashed == sum(job.state.size for job in read)


@pytest.mark.parametrize(
    ("cgroup", "files", "cpus"),
    [
        ("0::/ci/job\n", {"ci/job/cpu.max": "150000 100000\n"}, 2),  # v2: 1.5 CPUs
        ("0::/\n", {"cpu.max": "max 100000\n"}, None),  # v2, no quota
        (
            "4:cpu,cpuacct:/docker/x\n",
            {
                "cpu,cpuacct/docker/x/cpu.cfs_quota_us": "200000",
                "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000",
            },
            2,
        ),
        ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}, None),
        ("0::/gone\n", {}, None),  # nothing readable
        ("garbage without colons\n", {}, None),
    ],
)
def test_a_cgroup_cpu_quota_bounds_the_workers(
    tmp_path: Path, cgroup: str, files: dict[str, str], cpus: int | None
) -> None:
    """A container given 2 CPUs of a big host forks 1 child, not one per host core."""
    (tmp_path / "cgroup").write_text(cgroup)
    for name, text in files.items():
        (tmp_path / "fs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fs" / name).write_text(text)
    assert cgroup_cpus(str(tmp_path / "cgroup"), str(tmp_path / "fs")) == cpus
    assert 1 <= available_cores() <= (os.cpu_count() or 1)


@pytest.mark.parametrize("count", [0, 3, 700, 100_000])
def test_every_ticket_is_taken_once_even_when_the_pipe_cannot_hold_them(count: int) -> None:
    """100,000 tickets (400 kB) do not fit a pipe: the queue counts in this process instead
    (threads only), never blocking on the write."""
    tickets = Tickets(count)
    taken = []
    while (number := tickets.take()) is not None:
        taken.append(number)
    tickets.close()
    assert taken == list(range(count))
    assert tickets.broken == (count == 100_000)
