"""Discover → model → check: one run of ``libdoctor check``, returned as a value."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from libdoctor.checks.files import Digests, check_files, hash_jobs
from libdoctor.disk import Disk, RealDisk
from libdoctor.findings import CODES, Finding, Severity
from libdoctor.model import Environment, build_environment
from libdoctor.paths import is_bytecode
from libdoctor.target import Target

if TYPE_CHECKING:
    from libdoctor.libraries import LoaderContext


@dataclass(frozen=True, slots=True)
class CheckOptions:
    deep: bool = False
    cache_dir: str | None = None  # None: no hash cache
    workers: int | None = None
    libraries: LoaderContext | None = None  # None: skip the loader checks


@dataclass(frozen=True, slots=True)
class Report:
    target: Target
    distributions: int
    files: int
    findings: tuple[Finding, ...]
    hashing: dict[str, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# Called once with the total bytes to hash, then with each chunk of bytes done.
ProgressFactory = Callable[[int, int], Callable[[int], None]]


def run_checks(
    env: Environment,
    disk: Disk,
    digests: Digests | None = None,
    libraries: LoaderContext | None = None,
) -> list[Finding]:
    """Every check on a model and a disk view: the real one, or a what-if (``WithoutPaths``).

    A plan (``libdoctor plan``) runs this twice, before and after, and reports the difference.
    """
    from libdoctor.checks.stack import check_stack

    findings = check_files(env, disk, digests)
    analysis = None
    if libraries is not None:
        from libdoctor.checks.libraries import check_libraries
        from libdoctor.libraries import analyse

        analysis = analyse(env, disk, libraries)
        findings += check_libraries(analysis, disk)
    findings += check_stack(env, disk, digests, analysis)
    return findings


def loader_context(environ: Mapping[str, str], cwd: str) -> LoaderContext:
    """The loader's inputs as the user's next ``python`` would get them."""
    from libdoctor.libraries import LoaderContext
    from libdoctor.loadersystem import probe_loader_system

    return LoaderContext(probe_loader_system(), environ.get("LD_LIBRARY_PATH") or None, cwd)


def run_check(
    target: Target,
    options: CheckOptions,
    *,
    progress: ProgressFactory | None = None,
    disk: Disk | None = None,
) -> Report:
    env = build_environment(target)
    if disk is None:
        disk = RealDisk()
        disk.prefetch(path for path in env.claims if not is_bytecode(path))
    hashing: dict[str, int] | None = None
    digests = None
    if options.deep:
        from libdoctor.hashing import HashCache, HashStats, hash_many

        jobs = hash_jobs(env, disk)
        cache = HashCache.load(options.cache_dir, target.prefix)
        stats = HashStats()
        tick = progress(len(jobs), sum(j.state.size for j in jobs)) if progress else None
        digests = hash_many(jobs, cache, stats, workers=options.workers, progress=tick)
        cache.save(target.prefix)
        hashing = stats.as_dict()
    findings = run_checks(env, disk, digests, options.libraries)
    return Report(
        target=target,
        distributions=len(env.distributions),
        files=len(env.claims),
        findings=tuple(findings),
        hashing=hashing,
    )


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
