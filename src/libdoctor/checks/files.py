"""File truth: every RECORD claim checked against the disk.

Codes: missing-files, altered-files, duplicate-distribution, record-invalid, untracked-library;
``check_files`` also runs the shared-path checks of ``libdoctor.checks.shared`` (shared-path,
shared-path-identical).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.checks.shared import shared_paths
from libdoctor.checks.verdict import Digests, RecordDigests, Verdict, judge
from libdoctor.checks.wording import (
    about,
    are,
    file_list,
    plural,
    ref,
    repair_fix,
    severity_for,
)
from libdoctor.disk.stat import Disk, FileState
from libdoctor.environment.distributions import EMPTY_RECORD, Distribution
from libdoctor.environment.model import Claim, Environment, EscapingPath
from libdoctor.environment.paths import display, is_bytecode, is_native
from libdoctor.environment.record import RecordProblem
from libdoctor.external.installers import reinstall
from libdoctor.findings import Finding, Fix, Severity
from libdoctor.remedy import RemoveMetadata

if TYPE_CHECKING:
    from libdoctor.disk.hashing import HashJob

__all__ = [
    "check_duplicates",
    "check_files",
    "check_records",
    "check_untracked",
    "hash_jobs",
    "record_differences",
    "untracked_scan_dirs",
]

# How many paths a finding lists in its message-facing evidence before it summarises.
_SHOWN = 20


def hash_jobs(env: Environment, disk: Disk) -> list[HashJob]:
    """The files --deep must read: every present claim that carries a hash."""
    from libdoctor.disk.hashing import HashJob

    jobs: list[HashJob] = []
    seen: set[tuple[str, str]] = set()
    new = tuple.__new__  # HashJob(...) without the Python-level __new__ frame: 16k calls
    stand_ins = env.stand_ins
    for claimed, claims in env.claims.items():
        path = stand_ins.get(claimed, claimed) if stand_ins else claimed
        for claim in claims:
            digest = claim.entry.hash
            if digest is None:
                continue
            algorithm = digest[: digest.index("=")]
            key = (path, algorithm)
            if key in seen:
                continue
            state = disk.stat(path)
            if not state.is_file or state.error:
                break
            seen.add(key)
            jobs.append(new(HashJob, (path, algorithm, state)))
    return jobs


def record_differences(
    env: Environment, jobs: Sequence[HashJob], digests: Digests
) -> tuple[dict[tuple[str, str], str], int] | None:
    """Where the DIGESTS of the files JOBS named (hash_jobs) differ from what a RECORD
    says, and how many digests there are (what hashing.Unchanged keeps); None when some
    file could not be read."""
    differing: dict[tuple[str, str], str] = {}
    for path, algorithm, _ in jobs:
        actual = digests.get((path, algorithm))
        if actual is None:
            return None
        for claim in env.claims[path]:
            expected = claim.entry.hash
            if expected and expected.partition("=")[0] == algorithm and expected != actual:
                differing[(path, algorithm)] = actual
    return differing, len(jobs)


def check_files(env: Environment, disk: Disk, digests: Digests | None = None) -> list[Finding]:
    findings: list[Finding] = []
    findings += check_duplicates(env, disk)
    findings += check_records(env)
    shared, covered = shared_paths(env, disk, digests)
    findings += shared
    findings += _missing_and_altered(env, disk, digests, covered)
    findings += check_untracked(env, disk)
    return findings


# --- duplicate-distribution -------------------------------------------------------------


def check_duplicates(env: Environment, disk: Disk) -> list[Finding]:
    groups: dict[tuple[str, str], list[Distribution]] = defaultdict(list)
    for dist in env.distributions:
        groups[(dist.site.path, dist.key)].append(dist)
    findings = []
    for (site, _), dists in groups.items():
        if len(dists) < 2:
            continue
        versions = ", ".join(f"{d.version} ({os.path.basename(d.metadata_dir)})" for d in dists)
        newest = _current(dists, env, disk)
        stale = [d.metadata_dir for d in dists if d is not newest]
        findings.append(
            Finding(
                code="duplicate-distribution",
                severity=severity_for(dists, Severity.ERROR),
                message=about(
                    newest,
                    f"{newest.name} is installed {len(dists)} times in {display(site)}: "
                    f"{versions}. "
                    "An interrupted upgrade or a copy left two metadata directories; installers "
                    "and importlib.metadata will pick one of them arbitrarily.",
                ),
                distribution=ref(newest),
                paths=tuple(d.metadata_dir for d in dists),
                evidence={
                    "metadata_dirs": [
                        {"path": d.metadata_dir, "version": d.version, "installer": d.installer}
                        for d in dists
                    ]
                },
                fix=_duplicate_fix(newest, stale, env),
            )
        )
    return findings


def _current(dists: Sequence[Distribution], env: Environment, disk: Disk) -> Distribution:
    """The one whose RECORD the disk agrees with most (bytes over metadata), the newest
    version among equals: the stale directory is what an interrupted upgrade left behind."""
    from packaging.version import InvalidVersion, Version

    def key(dist: Distribution) -> tuple[int, int, Any]:
        agree = sum(
            1
            for claim in env.claims_of(dist)
            if claim.entry.size is not None and disk.stat(claim.path).size == claim.entry.size
        )
        try:
            return (agree, 1, Version(dist.version))
        except InvalidVersion:
            return (agree, 0, dist.version)

    return max(dists, key=key)


def _duplicate_fix(current: Distribution, stale: Sequence[str], env: Environment) -> Fix | None:
    """Delete the stale metadata directories (only them: the files are the current one's),
    then reinstall the current version so its files are whole."""
    if current.external:
        return None
    removals = tuple(RemoveMetadata(path) for path in stale)
    return Fix(
        (*removals, reinstall(current, env.target)),
        note="the stale metadata directories only; the files stay the current version's",
    )


# --- record-invalid ---------------------------------------------------------------------


def check_records(env: Environment) -> list[Finding]:
    findings = []
    escaping: dict[str, list[EscapingPath]] = defaultdict(list)
    for item in env.escaping:
        escaping[item.dist.metadata_dir].append(item)
    for dist in env.distributions:
        inherited_or_external = dist.site.inherited or dist.external
        severity = Severity.INFO if inherited_or_external else Severity.WARNING
        problems = dist.record.problems if dist.record else ()
        # an unreadable or malformed RECORD has one repair: the reinstall writes a new one
        fix = repair_fix(dist, env) if dist.record_error or problems else None
        if dist.record_error:
            findings.append(_unreadable_record(dist, severity, fix))
        if problems:
            findings.append(_malformed_rows(dist, severity, problems, fix))
        outside = escaping.get(dist.metadata_dir)
        if outside:
            findings.append(_paths_outside_prefix(dist, severity, outside))
    return findings


def _unreadable_record(dist: Distribution, severity: Severity, fix: Fix | None) -> Finding:
    return Finding(
        code="record-invalid",
        severity=severity,
        message=(
            f"{dist.display} has {dist.record_error}: its files cannot be checked, "
            + (
                "and `pip uninstall` would remove none of them (it reports success)."
                if dist.record_error == EMPTY_RECORD
                else "and an uninstall cannot know what to remove."
            )
        ),
        distribution=ref(dist),
        paths=(dist.metadata_dir,),
        evidence={"reason": dist.record_error},
        fix=fix,
    )


def _malformed_rows(
    dist: Distribution, severity: Severity, problems: Sequence[RecordProblem], fix: Fix | None
) -> Finding:
    return Finding(
        code="record-invalid",
        severity=severity,
        message=(
            f"{dist.display}: {plural(len(problems), 'malformed RECORD row')} "
            f"(first: line {problems[0].line}: {problems[0].reason})."
        ),
        distribution=ref(dist),
        paths=(os.path.join(dist.metadata_dir, "RECORD"),),
        evidence={
            "rows": [
                {"line": p.line, "text": display(p.text), "reason": p.reason} for p in problems
            ]
        },
        fix=fix,
    )


def _paths_outside_prefix(
    dist: Distribution, severity: Severity, escaping: list[EscapingPath]
) -> Finding:
    # A bare directory (``pip install --target``) has no known prefix: pip writes
    # its scripts' RECORD rows relative to a scheme that is not there ("../../bin/x"),
    # so such rows say nothing bad about this installation. A row that leaves through a
    # symlinked directory is never that.
    outside = [e.entry.path for e in escaping]
    links = list(dict.fromkeys(e.link for e in escaping if e.link is not None))
    bare = dist.site.prefix == dist.site.path and not links
    through = (
        f" The symlinked directory {display(links[0])} leads out of it"
        f"{f' ({len(links) - 1} more)' if len(links) > 1 else ''}."
        if links
        else ""
    )
    evidence: dict[str, Any] = {"outside_prefix": [display(p) for p in outside]}
    if links:
        evidence["through_links"] = [display(link) for link in links]
    return Finding(
        code="record-invalid",
        severity=Severity.INFO if bare else severity,
        message=(
            f"{dist.display}: {file_list(dist)} names {plural(len(outside), 'path')} outside "
            f"the prefix {display(dist.site.prefix)} (first: {display(outside[0])})."
            + through
            + " libdoctor reports them and never follows them; an uninstall by pip "
            "would try to delete them."
            + (
                " This directory has no known prefix (a `pip install --target` "
                "layout), where pip records scripts that way."
                if bare
                else ""
            )
        ),
        distribution=ref(dist),
        paths=(os.path.join(dist.metadata_dir, "RECORD"),),
        evidence=evidence,
    )


# --- missing-files and altered-files ----------------------------------------------------


def _missing_and_altered(
    env: Environment, disk: Disk, digests: Digests | None, covered: set[str]
) -> list[Finding]:
    findings: list[Finding] = []
    stat = disk.stat
    pycache = f"{os.sep}__pycache__{os.sep}"  # is_bytecode(), inlined: 22k calls
    pycache_dir = f"{os.sep}__pycache__"
    differing = digests.differing if isinstance(digests, RecordDigests) else None
    stand_ins = env.stand_ins  # the guard's wrappers: their originals are judged instead
    for dist in env.distributions:
        claims = env.claims_of(dist)
        missing: list[str] = []
        unusable: dict[str, str] = {}
        altered: list[tuple[Claim, Verdict]] = []
        for claim in claims:
            path = claim.path
            if stand_ins and path in stand_ins:
                path = stand_ins[path]
            if path.endswith(".pyc") and pycache in path:
                continue  # bytecode: pip may never have written it; RECORD gives no size/hash
            if claim.entry.hash is None and path.endswith((".pyc", pycache_dir)):
                continue  # bytecode promised, never compiled: virtualenv's seeder lists
                # `pkg/mod.cpython-311.pyc` and `pkg/__pycache__` rows without a hash
            state = stat(path)
            if not state.exists:
                missing.append(path)
                continue
            if state.error:
                unusable[path] = state.error
                continue
            if not state.is_file or path in covered:
                continue
            size = claim.entry.size
            if size is not None and size != state.size:
                altered.append((claim, Verdict(False, "size", state.size)))
                continue
            if digests is None:  # the hot path: sizes only, no Verdict objects
                continue
            expected = claim.entry.hash
            if expected is not None:
                # The common cases, decided without a call or a Verdict.
                if differing is not None:  # RecordDigests: all agree with RECORD but these
                    if not differing or (path, expected.partition("=")[0]) not in differing:
                        continue
                elif digests.get((path, expected[:6])) == expected:
                    continue  # [:6]: sha256/384/512; other rows miss here, judge() decides
            verdict = judge(claim, state, digests)
            if verdict.matches is False:
                altered.append((claim, verdict))
        if missing or unusable:
            findings.append(_missing_finding(env, dist, claims, missing, unusable))
        if altered:
            upstream, altered = _as_installed(dist, altered, stat)
            if upstream:
                findings.append(_upstream_finding(dist, upstream))
        if altered:
            findings += _altered_findings(env, dist, altered)
    return findings


def _as_installed(
    dist: Distribution, altered: list[tuple[Claim, Verdict]], stat: Callable[[str], FileState]
) -> tuple[list[tuple[Claim, Verdict]], list[tuple[Claim, Verdict]]]:
    """(unchanged since the install, changed after it): an installer writes RECORD after
    every file it installs, so a file last changed no later than RECORD has the bytes the
    wheel delivered, and a RECORD that disagrees with them came wrong in the wheel."""
    if dist.external or dist.kind != "dist-info":
        return [], altered
    record = stat(os.path.join(dist.metadata_dir, "RECORD"))
    if not record.is_file or record.error:
        return [], altered
    upstream = [(c, v) for c, v in altered if stat(c.path).mtime_ns <= record.mtime_ns]
    later = [(c, v) for c, v in altered if stat(c.path).mtime_ns > record.mtime_ns]
    return upstream, later


def _file_evidence(items: Sequence[tuple[Claim, Verdict]]) -> list[dict[str, Any]]:
    """What RECORD says of each file and what the disk holds (hashes when they decided)."""
    return [
        {
            "path": display(c.path),
            "expected_size": c.entry.size,
            "actual_size": v.actual_size,
            **(
                {"expected_hash": str(c.entry.hash), "actual_hash": v.actual_hash}
                if v.decided_by == "hash" and c.entry.hash
                else {}
            ),
        }
        for c, v in items
    ]


def _upstream_finding(dist: Distribution, items: list[tuple[Claim, Verdict]]) -> Finding:
    by = " and ".join(sorted({v.decided_by or "?" for _, v in items}))
    what = plural(len(items), "file")
    return Finding(
        code="record-mismatch-upstream",
        severity=Severity.INFO,
        message=(
            f"{dist.display}: {what} {'differs' if len(items) == 1 else 'differ'} from RECORD "
            f"(by {by}) but {are(len(items))} unchanged since the installer wrote RECORD: the "
            "bytes are the ones the wheel delivered, and the wheel's own RECORD is wrong (an "
            "upstream packaging bug). Reinstalling gives the same bytes; report it upstream."
        ),
        distribution=ref(dist),
        paths=tuple(sorted(c.path for c, _ in items)),
        evidence={
            "files": _file_evidence(items),
            "evidence": "each file's mtime is not later than the RECORD the installer wrote",
        },
    )


def _missing_finding(
    env: Environment,
    dist: Distribution,
    claims: Sequence[Claim],
    missing: list[str],
    unusable: dict[str, str],
) -> Finding:
    count = len(missing) + len(unusable)
    files = sum(1 for c in claims if not is_bytecode(c.path))
    natives = sum(1 for c in claims if is_native(c.path))
    natives_missing = sum(1 for p in [*missing, *unusable] if is_native(p))
    phantom = natives > 0 and natives_missing == natives
    message = (
        f"{dist.display} is installed but {count} of its {files} files "
        f"{'is' if count == 1 else 'are'} missing"
    )
    if unusable:
        message += f" or unusable ({len(unusable)}: {next(iter(unusable.values()))})"
    message += "."
    if phantom:
        message += (
            f" Every native library ({natives}) is gone: a phantom install that pip check, "
            'pip show and pip install ("already satisfied") all treat as healthy.'
        )
    others = sorted(
        {o.display for path in [*missing, *unusable] for o in env.owners(path) if o is not dist}
    )
    evidence: dict[str, Any] = {"missing": count, "files": files, "phantom": phantom}
    if unusable:
        evidence["unusable"] = {display(p): reason for p, reason in unusable.items()}
    if others:
        evidence["also_claimed_by"] = others
    note = ""
    if unusable and not missing and set(unusable.values()) == {"permission denied"}:
        # The files may be fine for the user who installed them: say so beside the fix.
        message += (
            " Every one of them exists but is not readable by this user: imports by this "
            "user fail the same way."
        )
        note = "or restore read permission, or run libdoctor as the environment's owner"
    return Finding(
        code="missing-files",
        severity=severity_for([dist], Severity.ERROR),
        message=about(dist, message),
        distribution=ref(dist),
        paths=tuple(sorted([*missing, *unusable])),
        evidence=evidence,
        fix=repair_fix(dist, env, note=note),
    )


def _altered_findings(
    env: Environment, dist: Distribution, altered: list[tuple[Claim, Verdict]]
) -> list[Finding]:
    findings = []
    native = [(c, v) for c, v in altered if is_native(c.path)]
    other = [(c, v) for c, v in altered if not is_native(c.path)]
    for items, severity, kind in (
        (native, severity_for([dist], Severity.ERROR), "native"),
        (other, severity_for([dist], Severity.WARNING), "other"),
    ):
        if not items:
            continue
        by = sorted({v.decided_by or "?" for _, v in items})
        n = len(items)
        what = (
            plural(n, "native library", "native libraries")
            if kind == "native"
            else plural(n, "file")
        )
        findings.append(
            Finding(
                code="altered-files",
                severity=severity,
                message=about(
                    dist,
                    f"{dist.display}: {what} "
                    f"{'differs' if n == 1 else 'differ'} from {file_list(dist)} "
                    f"(by {' and '.join(by)}): "
                    "the bytes on disk are not the ones that were installed.",
                ),
                distribution=ref(dist),
                paths=tuple(sorted(c.path for c, _ in items)),
                evidence={"files": _file_evidence(items)},
                fix=repair_fix(dist, env),
            )
        )
    return findings


# --- untracked-library ------------------------------------------------------------------


def untracked_scan_dirs(env: Environment) -> list[str]:
    """Where a stray library can do harm, and so where we look for one.

    Directories holding a claimed shared library (what RPATHs and the loader search:
    ``torch/lib``, ``nvidia/cudnn/lib``), and each top-level package directory (where a
    leftover extension module shadows the ``.py`` module beside it). Listing every one of
    a torch env's 2,000 package directories would cost a tenth of the whole check.
    """
    site_roots = {site.path for site in env.target.site_dirs}
    found: set[str] = set()
    directories: set[str] = set()
    for path in env.claims:
        directory, _, name = path.rpartition(os.sep)
        directories.add(directory)
        if ".so" in name and directory not in site_roots and is_native(name):
            found.add(directory)
    for directory in directories:
        for root in site_roots:
            if directory.startswith(root + os.sep):
                found.add(root + os.sep + directory[len(root) + 1 :].split(os.sep, 1)[0])
                break
    return sorted(
        d
        for d in found
        if not d.endswith((".dist-info", ".egg-info", ".data", f"{os.sep}__pycache__"))
    )


def check_untracked(env: Environment, disk: Disk) -> list[Finding]:
    candidates = untracked_scan_dirs(env)
    found: dict[str, list[str]] = {}
    for directory in candidates:
        for name in disk.listdir(directory):
            path = directory + os.sep + name
            if path in env.claims or not is_native(path):
                continue
            state = disk.stat(path)
            if state.is_file or state.error:
                found.setdefault(directory, []).append(path)
    if not found:
        return []
    dir_owners: dict[str, dict[str, Distribution]] = defaultdict(dict)
    for path, claims in env.claims.items():
        directory = path.rpartition(os.sep)[0]
        if directory in found:
            for claim in claims:
                dir_owners[directory][claim.dist.metadata_dir] = claim.dist
    findings = []
    for directory, untracked in found.items():
        owners = list(dir_owners[directory].values())
        sole = owners[0] if len(owners) == 1 else None
        lists = " or conda-meta record" if any(d.kind == "conda" for d in owners) else ""
        findings.append(
            Finding(
                code="untracked-library",
                severity=Severity.INFO,
                message=(
                    f"{plural(len(untracked), 'shared library', 'shared libraries')} in "
                    f"{display(directory)} {are(len(untracked))} claimed by no RECORD{lists} "
                    f"(directory owned by {', '.join(d.display for d in owners)}); "
                    "leftovers like these can shadow the installed libraries."
                ),
                distribution=ref(sole) if sole else None,
                paths=tuple(sorted(untracked)),
                evidence={"directory_owners": [d.name for d in owners]},
            )
        )
    return findings
