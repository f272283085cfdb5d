"""Discover → model → check: one run of ``libdoctor check``, returned as a value."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from libdoctor.analysis.fork import Later, started_in_child
from libdoctor.checks.files import check_files, hash_jobs, record_differences
from libdoctor.checks.verdict import Digests, RecordDigests
from libdoctor.disk.stat import Disk, FileState, RealDisk
from libdoctor.environment.model import Environment, build_environment
from libdoctor.environment.target import Target
from libdoctor.findings import CODES, Finding, Severity

if TYPE_CHECKING:
    from libdoctor.disk.hashing import HashStats, ProgressFactory
    from libdoctor.loader.extensions import LoaderContext


@dataclass(frozen=True, slots=True)
class CheckOptions:
    deep: bool = False
    cache_dir: str | None = None  # None: no hash cache
    workers: int | None = None
    # None: skip the loader checks. A callable is called where the checks run (possibly a
    # forked child), so the parent never pays for probing the loader or importing it.
    libraries: LoaderContext | Callable[[], LoaderContext] | None = None


@dataclass(frozen=True, slots=True)
class Report:
    target: Target
    distributions: int
    files: int
    findings: tuple[Finding, ...]
    hashing: dict[str, int] | None = None
    # What the checks read, for a caller that wants more than findings (not part of the
    # report's value: no comparing or printing 22k claims).
    environment: Environment | None = field(default=None, compare=False, repr=False)
    disk: Disk | None = field(default=None, compare=False, repr=False)
    digests: Digests | None = field(default=None, compare=False, repr=False)


def run_checks(
    env: Environment,
    disk: Disk,
    digests: Digests | None = None,
    libraries: LoaderContext | Callable[[], LoaderContext] | None = None,
) -> list[Finding]:
    """Every check on a model and a disk view: the real one, or a what-if (``WithoutPaths``).

    A plan (``libdoctor plan``) runs this twice, before and after, and reports the difference.
    """
    return check_files(env, disk, digests) + native_checks(env, disk, digests, libraries)


def native_checks(
    env: Environment,
    disk: Disk,
    digests: Digests | Callable[[], Digests | None] | None = None,
    libraries: LoaderContext | Callable[[], LoaderContext] | None = None,
) -> list[Finding]:
    """The loader and stack checks: ELF files and frameworks, independent of the file checks.

    DIGESTS may be a function: called only when the stack checks need them, after the loader
    work, so a forked child can start before the hashing that produces them is done.
    """
    from libdoctor.checks.stack import check_stack

    findings: list[Finding] = []
    analysis = None
    if callable(libraries):
        libraries = libraries()
    if libraries is not None:
        from libdoctor.checks.libraries import check_libraries
        from libdoctor.loader.extensions import analyse

        analysis = analyse(env, disk, libraries)
        findings += check_libraries(analysis, disk)
    findings += check_stack(env, disk, digests, analysis)
    return findings


NATIVE_ROWS = ".so"  # every path native_claims() and is_native() accept on Linux has it
NATIVE_PART = "native"  # the hash cache's part for those paths, read by the forked child


def native_model(target: Target) -> Environment:
    """The model the loader and stack checks need: every distribution, but of each file list
    only the rows naming a shared object, about a tenth of a torch env's rows."""
    from libdoctor.environment.distributions import scan_target

    return build_environment(target, scan_target(target, only_containing=NATIVE_ROWS))


class _CacheFirst(Mapping[tuple[str, str], "str | None"]):
    """A forked child's digests: from the hash cache while the file is still the one that
    was hashed (no waiting), else the parent's, sent once its hashing is done."""

    def __init__(self, cache_dir: str | None, prefix: str, sent: Later[Digests]) -> None:
        from libdoctor.disk.hashing import HashCache

        self._cache = HashCache.load(cache_dir, prefix, NATIVE_PART)
        self._disk = RealDisk()
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


def loader_context(environ: Mapping[str, str], cwd: str) -> LoaderContext:
    """The loader's inputs as the user's next ``python`` would get them."""
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.loader.system import probe_loader_system

    return LoaderContext(probe_loader_system(), environ.get("LD_LIBRARY_PATH") or None, cwd)


def _start_native(
    target: Target, options: CheckOptions
) -> tuple[Callable[[], list[Finding]], Later[Digests] | None]:
    """Start the loader and stack checks in a child at once, on their own small model
    (native_model), while the caller parses every file list and stats every file. With
    --deep the child also gets digests: from the cache, or sent by the caller once it has
    them (see _CacheFirst). Returns the wait for the findings, and where to send digests."""
    libraries = options.libraries
    later: Later[Digests] | None = None
    digests: Callable[[], Digests | None] | None = None
    if options.deep:
        import libdoctor.disk.hashing  # noqa: F401  (before the fork: both processes use it)

        sent: Later[Digests] = Later()
        later = sent

        def digests() -> Digests | None:
            return sent.get() if sent.here else _CacheFirst(options.cache_dir, target.prefix, sent)

    def work() -> list[Finding]:  # in the child: nothing is read before the fork
        return native_checks(native_model(target), RealDisk(), digests, libraries)

    return started_in_child(work, later), later


def run_check(
    target: Target,
    options: CheckOptions,
    *,
    progress: ProgressFactory | None = None,
    disk: Disk | None = None,
) -> Report:
    native: Callable[[], list[Finding]] | None = None
    later: Later[Digests] | None = None
    if disk is None:
        native, later = _start_native(target, options)
        disk = RealDisk()
    env = build_environment(target)
    states = None
    if isinstance(disk, RealDisk):
        pycache = f"{os.sep}__pycache__{os.sep}"  # is_bytecode(), inlined: 22k paths
        states = disk.prefetch(p for p in env.claims if not (p.endswith(".pyc") and pycache in p))
    hashing: dict[str, int] | None = None
    digests = None
    if options.deep:
        digests, stats = _digests(env, disk, options, progress, states)
        if later is not None:  # the child's stack checks may wait for these
            # Unchanged env: the child finds every digest it needs in the cache's native part.
            fresh = not isinstance(digests, RecordDigests)
            wire = {k: v for k, v in digests.items() if NATIVE_ROWS in k[0]} if fresh else {}
            later.set(digests, wire)
        hashing = stats.as_dict()
    if native is None:
        findings = run_checks(env, disk, digests, options.libraries)
    else:
        findings = check_files(env, disk, digests) + native()
    return Report(
        target=target,
        distributions=len(env.distributions),
        files=len(env.claims),
        findings=tuple(findings),
        hashing=hashing,
        environment=env,
        disk=disk,
        digests=digests,
    )


def _digests(
    env: Environment,
    disk: Disk,
    options: CheckOptions,
    progress: ProgressFactory | None,
    states: list[FileState] | None,
) -> tuple[Digests, HashStats]:
    """Every --deep digest: all at once if the environment is unchanged since the last run
    (hashing.Unchanged), else per file from the hash cache, reading what is not there.

    STATES: every claimed file's, as prefetched (None: no shortcut)."""
    from libdoctor.disk.hashing import (
        HashCache,
        HashStats,
        Unchanged,
        fingerprint,
        hash_many,
        modified_since,
        racy_ns,
    )

    stats = HashStats()
    prefix = env.target.prefix
    unchanged = Unchanged.load(options.cache_dir if states is not None else None, prefix)
    now = b""
    if unchanged.file is not None and states is not None:
        records = [
            (d.metadata_dir, disk.stat(os.path.join(d.metadata_dir, "RECORD")))
            for d in env.distributions
            if d.kind == "dist-info"
        ]
        now = fingerprint(states, records)
        if unchanged.holds(now):
            stats.cache_hits = unchanged.files
            return RecordDigests(env, disk, unchanged.differing), stats
        racy = racy_ns()
        if modified_since(racy, states) or modified_since(racy, (s for _, s in records)):
            now = b""  # something changed moments ago: no shortcut next time
    cache = HashCache.load(options.cache_dir, prefix)
    jobs = hash_jobs(env, disk)
    digests = hash_many(jobs, cache, stats, workers=options.workers, progress=progress)
    if cache.dirty:
        cache.save(prefix)
        cache.part(jobs, NATIVE_PART, lambda path: NATIVE_ROWS in path).save(prefix)
    if unchanged.file is not None:
        found = record_differences(env, jobs, digests) if now else None
        if found is None:  # no shortcut next time
            now, found = b"", ({}, 0)
        unchanged.fingerprint = now
        unchanged.differing, unchanged.files = found
        unchanged.save(prefix)
    return digests, stats


def filter_findings(
    findings: Sequence[Finding],
    select: frozenset[str] | None,
    ignore: frozenset[str],
    show_all: bool,
) -> list[Finding]:
    """What the user sees: hidden-by-default codes only when asked for by name or --all."""
    shown = []
    for finding in findings:
        if finding.code in ignore:
            continue
        if select is not None and finding.code not in select:
            continue
        if (
            not show_all
            and not CODES[finding.code].shown_by_default
            and (select is None or finding.code not in select)
        ):
            continue
        shown.append(finding)
    order = {s: i for i, s in enumerate(sorted(Severity, reverse=True))}
    return sorted(shown, key=lambda f: (order[f.severity], f.code, f.message))
