"""Discover → model → check: one run of ``libdoctor check``, returned as a value."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.checks.files import Digests, check_files, hash_jobs
from libdoctor.disk import Disk, RealDisk
from libdoctor.findings import CODES, Finding, Severity
from libdoctor.model import Environment, build_environment
from libdoctor.target import Target

if TYPE_CHECKING:
    from libdoctor.libraries import LoaderContext


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


# Called once with the total bytes to hash, then with each chunk of bytes done.
ProgressFactory = Callable[[int, int], Callable[[int], None]]


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
    digests: Digests | None = None,
    libraries: LoaderContext | Callable[[], LoaderContext] | None = None,
) -> list[Finding]:
    """The loader and stack checks: ELF files and frameworks, independent of the file checks."""
    from libdoctor.checks.stack import check_stack

    findings: list[Finding] = []
    analysis = None
    if callable(libraries):
        libraries = libraries()
    if libraries is not None:
        from libdoctor.checks.libraries import check_libraries
        from libdoctor.libraries import analyse

        analysis = analyse(env, disk, libraries)
        findings += check_libraries(analysis, disk)
    findings += check_stack(env, disk, digests, analysis)
    return findings


def _started_in_child(work: Callable[[], list[Finding]]) -> Callable[[], list[Finding]]:
    """Run WORK in a forked child while the caller goes on; the result is a function that
    waits for it. On a second core this hides the loader work behind the file checks.

    Falls back to running WORK in the caller (at the wait) without fork, on one core, or
    when the child fails for any reason: the result never depends on the fork.
    """
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return work
    import pickle

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no threads exist yet, so forking is safe
        code = 1
        try:
            os.close(read_end)
            data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)

    def wait() -> list[Finding]:
        with os.fdopen(read_end, "rb") as handle:
            data = handle.read()
        _, status = os.waitpid(pid, 0)
        if status == 0 and data:
            try:
                result: list[Finding] = pickle.loads(data)
                return result
            except Exception:  # any damage: compute it here instead
                pass
        return work()

    return wait


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
    native: Callable[[], list[Finding]] | None = None
    libraries = options.libraries
    real = disk is None
    if disk is None:
        if not options.deep:
            native = _started_in_child(lambda: native_checks(env, RealDisk(), None, libraries))
        disk = RealDisk()
        pycache = f"{os.sep}__pycache__{os.sep}"  # is_bytecode(), inlined: 22k paths
        disk.prefetch(p for p in env.claims if not (p.endswith(".pyc") and pycache in p))
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
        if real:  # the stack checks need the digests: start them once those exist
            known = digests
            native = _started_in_child(lambda: native_checks(env, RealDisk(), known, libraries))
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
