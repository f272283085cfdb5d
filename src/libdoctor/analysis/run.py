"""Discover → model → check: one run of ``libdoctor check``, returned as a value.

Plain and sequential: every step after the other, in this process. ``analysis.overlap`` runs
the same steps with the loader work in a forked child; this module is its reference, and what
a what-if (``plan``) or a repair runs on a modified model (``run_checks``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from libdoctor.findings import CODES, Finding, Severity

if TYPE_CHECKING:  # the steps import what they run: a reused check (analysis.reuse) runs none
    from libdoctor.checks.verdict import Digests
    from libdoctor.disk.hashing import HashStats, ProgressFactory
    from libdoctor.disk.stat import Disk, FileState
    from libdoctor.environment.model import Environment
    from libdoctor.environment.requirements import RequirementIndex
    from libdoctor.environment.target import Target
    from libdoctor.loader.extensions import LibraryUse, LoaderContext


@dataclass(frozen=True, slots=True)
class CheckOptions:
    deep: bool = False
    # None: no cache (neither the hash cache nor the parsed files, ``environment.parsed``)
    cache_dir: str | None = None
    workers: int | None = None
    # None: skip the loader checks. A callable is called where the checks run (possibly a
    # forked child), so the parent never pays for probing the loader or importing it.
    libraries: LoaderContext | Callable[[], LoaderContext] | None = None
    # Keep what a snapshot records besides findings (``Report.facts``), gathered where the
    # loader and requirement work already runs.
    facts: bool = False
    # The variables the target's tools run with, to find their compile caches (one bounded
    # look, ``stack.caches.quick_stale``); None: caches are not looked at.
    caches: Mapping[str, str] | None = None
    # Called with the model, the disk and the digests once the file checks are done, in the
    # process that made them, while a forked child may still run the loader checks (a
    # snapshot builds its file rows there).
    meanwhile: Callable[[Environment, Disk, Digests | None], None] | None = None


@dataclass(frozen=True, slots=True)
class NativeFacts:
    """What the loader and requirement work knows that a snapshot keeps."""

    libraries: tuple[LibraryUse, ...]  # () without the loader checks
    extras: Mapping[str, tuple[str, ...]]  # metadata dir -> the extras it is installed with


@dataclass(frozen=True, slots=True)
class Report:
    target: Target
    distributions: int
    files: int
    findings: tuple[Finding, ...]
    hashing: dict[str, int] | None = None
    facts: NativeFacts | None = None  # with CheckOptions.facts
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
    from libdoctor.checks.files import check_files

    return check_files(env, disk, digests) + native_checks(env, disk, digests, libraries)[0]


def native_checks(
    env: Environment,
    disk: Disk,
    digests: Digests | Callable[[], Digests | None] | None = None,
    libraries: LoaderContext | Callable[[], LoaderContext] | None = None,
    facts: bool = False,
    cache_dir: str | None = None,
) -> tuple[list[Finding], NativeFacts | None]:
    """The loader, stack and requirement checks: ELF files, frameworks and Requires-Dist,
    independent of the file checks, needing no RECORD row but those of shared objects (so a
    forked child runs them on ``overlap.native_model``, packaging imported there only).

    DIGESTS may be a function: called only when the stack checks need them, after the loader
    work, so a forked child can start before the hashing that produces them is done. With
    FACTS, also the facts a snapshot keeps (else None). CACHE_DIR: where the ELF files
    parsed are kept between runs (``environment.parsed``; None: every file parsed).
    """
    from libdoctor.checks.requirements import check_requirements
    from libdoctor.checks.stack import analyse_stack, check_stack
    from libdoctor.environment.requirements import RequirementIndex

    findings: list[Finding] = []
    requirements = RequirementIndex(env)  # parses nothing until asked
    analysis = None
    stack = None
    uses: tuple[LibraryUse, ...] = ()
    if callable(libraries):
        libraries = libraries()
    if libraries is not None:
        from libdoctor.checks.extensions import check_extensions, fold_cuda_gaps
        from libdoctor.checks.libraries import check_libraries
        from libdoctor.checks.runtime import check_runtime_loads
        from libdoctor.environment.parsed import ParsedFiles
        from libdoctor.loader.extensions import analyse, library_uses
        from libdoctor.loader.fs import ELF

        parsed = ParsedFiles.load(cache_dir, env.target.prefix, ELF)
        analysis = analyse(env, disk, libraries, parsed)
        parsed.save()
        stack = analyse_stack(env, disk, analysis, requirements=requirements)  # once a run
        findings += check_libraries(analysis, disk, stack)
        findings += check_runtime_loads(analysis, disk)
        findings = fold_cuda_gaps(findings + check_extensions(analysis, disk, stack))
        uses = library_uses(analysis) if facts else ()
    findings += check_stack(env, disk, digests, analysis, requirements=requirements, stack=stack)
    findings += check_requirements(env, disk, requirements)
    return findings, (NativeFacts(uses, installed_extras(env, requirements)) if facts else None)


def installed_extras(
    env: Environment, requirements: RequirementIndex
) -> dict[str, tuple[str, ...]]:
    """Every distribution's extras, requested or inferred, by metadata dir."""
    return {
        dist.metadata_dir: tuple(sorted({e.name for e in requirements.extras(dist)}))
        for dist in env.distributions
    }


def loader_context(
    environ: Mapping[str, str], cwd: str, target: Target | None = None
) -> LoaderContext:
    """The loader's inputs as the user's next ``python`` would get them; for a TARGET inside
    another system (``--root``), that system's loader configuration, read, and none of the
    caller's (no ``LD_LIBRARY_PATH``, the root as working directory)."""
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.loader.system import probe_loader_system, read_loader_system

    if target is not None and target.root != "/":
        system = read_loader_system(target.root, target.python)
        return LoaderContext(system, None, target.root, root=target.root)
    return LoaderContext(probe_loader_system(), environ.get("LD_LIBRARY_PATH") or None, cwd)


def run_check(
    target: Target,
    options: CheckOptions,
    *,
    progress: ProgressFactory | None = None,
    disk: Disk | None = None,
) -> Report:
    """Every check on TARGET, one step after the other: the reference that
    ``analysis.overlap.run_check`` (the same run, the loader work in a forked child) must
    equal, finding for finding."""
    from libdoctor.checks.files import check_files
    from libdoctor.disk.stat import RealDisk

    disk = RealDisk(target.root, remembers(options)) if disk is None else disk
    env, states = model_and_states(target, disk, options.cache_dir, options.deep)
    digests, hashing = None, None
    if options.deep:
        digests, stats = compute_digests(env, disk, options, progress, states)
        hashing = stats.as_dict()
    file_findings = check_files(env, disk, digests)
    if options.meanwhile is not None:
        options.meanwhile(env, disk, digests)
    native, facts = native_checks(
        env, disk, digests, options.libraries, options.facts, options.cache_dir
    )
    findings = file_findings + native
    findings += cache_findings(env, options.caches)
    return report_of(target, env, disk, findings, hashing, digests, facts)


def cache_findings(env: Environment, environ: Mapping[str, str] | None) -> list[Finding]:
    """At most one ``stale-caches`` line: the compile caches of the target's tools holding
    entries recorded for other versions than the target's (a bounded look)."""
    if environ is None:
        return []
    from libdoctor.checks.caches import stale_summary
    from libdoctor.stack.caches import Versions, quick_stale

    versions = Versions.of(env.target, env.distributions)
    return stale_summary(quick_stale(environ, env.target, versions), env.target.prefix)


def remembers(options: CheckOptions) -> bool:
    """Whether a run's disk keeps every file's state: for --deep (it states each file
    again, to hash it) and a snapshot (it writes each file's size), not for a plain check,
    which asks each file's once (a million recorded files: 90 MB)."""
    return options.deep or options.facts


def model_and_states(
    target: Target, disk: Disk, cache_dir: str | None = None, deep: bool = True
) -> tuple[Environment, list[FileState] | None]:
    """The full model, and every claimed file's state fetched at once on a real disk that
    remembers them (the checks find them in its memo); the states are returned for DEEP
    only (its shortcut fingerprints them), else None: a million of them are 200 MB.
    CACHE_DIR: where parsed RECORDs are kept between runs (None: every RECORD parsed)."""
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.distributions import scan_target
    from libdoctor.environment.model import build_environment
    from libdoctor.environment.parsed import RECORDS, ParsedFiles

    records = ParsedFiles.load(cache_dir, target.prefix, RECORDS)
    env = build_environment(target, scan_target(target, records=records))
    records.save()
    states = None
    if isinstance(disk, RealDisk) and disk.remember_files:
        pycache = f"{os.sep}__pycache__{os.sep}"  # is_bytecode(), inlined: 22k paths
        paths = (p for p in env.claims if not (p.endswith(".pyc") and pycache in p))
        states = disk.prefetch(paths, states=deep)
    return env, states if deep else None


def report_of(
    target: Target,
    env: Environment,
    disk: Disk,
    findings: Sequence[Finding],
    hashing: dict[str, int] | None,
    digests: Digests | None,
    facts: NativeFacts | None = None,
) -> Report:
    return Report(
        target=target,
        distributions=len(env.distributions),
        files=len(env.claims),
        findings=tuple(findings),
        hashing=hashing,
        facts=facts,
        environment=env,
        disk=disk,
        digests=digests,
    )


def compute_digests(
    env: Environment,
    disk: Disk,
    options: CheckOptions,
    progress: ProgressFactory | None,
    states: list[FileState] | None,
) -> tuple[Digests, HashStats]:
    """Every --deep digest: all at once if the environment is unchanged since the last run
    (hashing.Unchanged), else per file from the hash cache, reading what is not there.

    STATES: every claimed file's, as prefetched (None: no shortcut)."""
    from libdoctor.checks.files import hash_jobs, record_differences
    from libdoctor.checks.verdict import RecordDigests
    from libdoctor.disk.hashing import (
        NATIVE_PART,
        HashCache,
        HashStats,
        Unchanged,
        fingerprint,
        hash_many,
        modified_since,
        racy_ns,
    )
    from libdoctor.environment.paths import NATIVE_ROWS

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
    digests = hash_many(
        jobs, cache, stats, workers=options.workers, progress=progress, root=env.target.root
    )
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


def shown_by_default(findings: Sequence[Finding]) -> list[Finding]:
    """FINDINGS as ``check`` shows them without ``--select``, ``--ignore`` or ``--all``: what
    a report about a change compares (plan, fix, uninstall), so a code hidden by default never
    turns up as new or resolved when ``check`` would not have shown it."""
    return filter_findings(findings, None, frozenset(), False)
