"""``check`` with its loader work overlapped: the speed trick, in one place.

The loader and stack checks (ELF reading, the search, torch's preload: ~110 ms on a torch
env) need only the RECORD rows naming a shared object. A child forked at the start builds
that small model (``native_model``) and runs them while the parent parses every RECORD, stats
every file and hashes; with --deep the child reads its digests from the hash cache's native
part, or waits for the parent's (``CacheFirst``). ``analysis.run.run_check`` is the same run
one step after the other: the reference this one is tested against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from libdoctor.analysis.fork import Later, started_in_child
from libdoctor.analysis.recording import Reads, child_reads, merge_reads
from libdoctor.analysis.run import (
    CheckOptions,
    NativeFacts,
    Report,
    cache_findings,
    compute_digests,
    model_and_states,
    native_checks,
    remembers,
    report_of,
)
from libdoctor.checks.files import check_files
from libdoctor.checks.verdict import Digests, RecordDigests
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import Environment, build_environment
from libdoctor.environment.paths import NATIVE_ROWS
from libdoctor.environment.target import Target
from libdoctor.findings import Finding

if TYPE_CHECKING:
    from libdoctor.disk.hashing import ProgressFactory


def run_check(
    target: Target, options: CheckOptions, *, progress: ProgressFactory | None = None
) -> Report:
    """Every check on TARGET, the loader and stack checks in a forked child from the start."""
    native, later = _start_native(target, options)
    disk = RealDisk(target.root, remembers(options))
    env, states = model_and_states(target, disk, options.cache_dir, options.deep)
    hashing: dict[str, int] | None = None
    digests = None
    if options.deep:
        digests, stats = compute_digests(env, disk, options, progress, states)
        if later is not None:  # the child's stack checks may wait for these
            _send_digests(later, digests)
        hashing = stats.as_dict()
    # While the child may still be at the loader work: the file checks, and what the
    # caller asked to be done with the model meanwhile (a snapshot's file rows).
    files = check_files(env, disk, digests)
    if options.meanwhile is not None:
        options.meanwhile(env, disk, digests)
    caches = cache_findings(env, options.caches)
    native_findings, facts = native()
    findings = files + native_findings + caches
    return report_of(target, env, disk, findings, hashing, digests, facts)


def _send_digests(later: Later[Digests], digests: Digests) -> None:
    """Only the shared objects' digests cross the pipe; none for an unchanged env, where
    the child finds every digest it needs in the cache's native part."""
    fresh = not isinstance(digests, RecordDigests)
    wire = {k: v for k, v in digests.items() if NATIVE_ROWS in k[0]} if fresh else {}
    later.set(digests, wire)


def native_model(target: Target) -> Environment:
    """The model the loader and stack checks need: every distribution, but of each file list
    only the rows naming a shared object, about a tenth of a torch env's rows."""
    from libdoctor.environment.distributions import scan_target

    return build_environment(target, scan_target(target, only_containing=NATIVE_ROWS))


class CacheFirst(Mapping[tuple[str, str], "str | None"]):
    """A forked child's digests: from the hash cache while the file is still the one that
    was hashed (no waiting), else the parent's, sent once its hashing is done."""

    def __init__(self, cache_dir: str | None, target: Target, sent: Later[Digests]) -> None:
        from libdoctor.disk.hashing import NATIVE_PART, HashCache

        self._cache = HashCache.load(cache_dir, target.prefix, NATIVE_PART)
        self._disk = RealDisk(target.root)
        self._later = sent
        self._sent: Digests | None = None

    def _from_parent(self) -> Digests:
        if self._sent is None:
            self._sent = self._later.get() or {}
        return self._sent

    def __getitem__(self, key: tuple[str, str]) -> str | None:
        from libdoctor.disk.hashing import HashJob

        state = self._disk.stat(key[0])
        if state.is_file and not state.error:
            cached = self._cache.get(HashJob(key[0], key[1], state))
            if cached is not None:
                return cached
        return self._from_parent()[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._from_parent())

    def __len__(self) -> int:
        return len(self._from_parent())


def _start_native(
    target: Target, options: CheckOptions
) -> tuple[Callable[[], tuple[list[Finding], NativeFacts | None]], Later[Digests] | None]:
    """Start the loader and stack checks in a child at once, on their own small model
    (native_model), while the caller parses every file list and stats every file. With
    --deep the child also gets digests: from the cache, or sent by the caller once it has
    them (see CacheFirst). Returns the wait for the findings, and where to send digests."""
    libraries = options.libraries
    later: Later[Digests] | None = None
    digests: Callable[[], Digests | None] | None = None
    if options.deep:
        import libdoctor.disk.hashing  # noqa: F401  (before the fork: both processes use it)

        sent: Later[Digests] = Later()
        later = sent

        def digests() -> Digests | None:
            return sent.get() if sent.here else CacheFirst(options.cache_dir, target, sent)

    def work() -> tuple[tuple[list[Finding], NativeFacts | None], Reads | None]:
        model = native_model(target)  # in the child: nothing is read before the fork
        disk = RealDisk(target.root)
        found = native_checks(model, disk, digests, libraries, options.facts, options.cache_dir)
        return found, child_reads()  # what it read, for a recording run (analysis.reuse)

    wait = started_in_child(work, later)

    def native() -> tuple[list[Finding], NativeFacts | None]:
        found, reads = wait()
        merge_reads(reads)
        return found

    return native, later
