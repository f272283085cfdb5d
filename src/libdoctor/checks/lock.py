"""Is the environment still its lock? Each package the lock asks for, against the disk.

Codes: lock-missing, lock-version, lock-extra, lock-artifact, lock-files.

- *missing*: the lock asks for a package that is not installed.
- *version*: it is installed at another version.
- *extra*: installed, but not asked for here (not in the lock, or only under markers that
  do not hold here). The installers themselves are excepted when the lock does not list
  them (``INSTALLER_TOOLS``: pip, setuptools, wheel, uv: ``python -m venv`` seeds the
  first ones), and so is the locked project itself.
- *artifact*: installed from another file than the lock's. The evidence is what the
  dist-info keeps: ``direct_url.json`` (its archive sha256 against every hash the lock
  lists, any match counts; a local directory or a VCS checkout where the lock names
  registry files; another commit), else WHEEL's tags against the tags of the lock's
  wheel file names. Without evidence (an index install: pip and uv keep no hash) the
  artifact is "not verifiable": one info, never an error. A package the lock pins to a
  source of its own (a git commit, an archive URL or path, a directory) must have been
  installed from that source, as ``direct_url.json`` says; from an index, a plain wheel
  or another source it is an error whose fix installs the locked source
  (``NAME @ git+URL@COMMIT``, the URL, the path; ``--editable DIR``).
- *files*: the right version, but its files are no longer what it installed: the RECORD
  truth of ``checks.files`` (sizes; hashes with ``--deep``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from libdoctor.checks.files import check_files
from libdoctor.checks.verdict import Digests
from libdoctor.checks.wording import plural, ref
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment
from libdoctor.external.installers import install, uninstall
from libdoctor.external.lockfile import (
    Artifact,
    InstalledFrom,
    Lock,
    LockedPackage,
    Selection,
    installed_from,
    source_requirement,
    wheel_tags,
)
from libdoctor.findings import Code, DistRef, Finding, Fix, Severity
from libdoctor.remedy import Install

__all__ = ["INSTALLER_TOOLS", "LockCheck", "check_lock"]

INSTALLER_TOOLS = ("pip", "setuptools", "wheel", "uv")
"""Never extra unless the lock lists them: the tools that install, seeded by ``venv``."""

# The file findings that mean "these are no longer the installed artifact's bytes".
_FILE_CODES = ("missing-files", "altered-files", "record-invalid")


@dataclass(frozen=True, slots=True)
class LockCheck:
    findings: tuple[Finding, ...]
    matched: tuple[str, ...]  # "six 1.16.0": installed at the locked version
    verified: tuple[str, ...]  # ... and its artifact's hash is among the lock's
    excepted: tuple[str, ...]  # installed, not locked, not counted as extra


def check_lock(
    env: Environment,
    disk: Disk,
    lock: Lock,
    selection: Selection,
    digests: Digests | None = None,
    evidence: Callable[[str], InstalledFrom] = installed_from,
) -> LockCheck:
    """The environment ENV against SELECTION (``lockfile.select`` of LOCK for its target).
    EVIDENCE reads what a dist-info says of its artifact (a function: tests give their own)."""
    installed: dict[str, list[Distribution]] = {}
    for dist in env.distributions:
        installed.setdefault(dist.key, []).append(dist)
    files = _file_findings(env, disk, digests)
    findings: list[Finding] = []
    matched: list[str] = []
    verified: list[str] = []
    unverifiable: list[tuple[LockedPackage, str]] = []
    for package in selection.required:
        dists = installed.get(package.key, [])
        if not dists:
            findings.append(_missing(env, lock, package))
            continue
        dist = _visible(env, dists)
        if package.version is not None and not _same_version(dist.version, package.version):
            findings.append(_version(env, lock, package, dist))
            continue
        matched.append(dist.display)
        found = _artifact(env, lock, package, dist, evidence(dist.metadata_dir))
        if isinstance(found, Finding):
            findings.append(found)
        elif found == "verified":
            verified.append(dist.display)
        else:
            unverifiable.append((package, found))
        findings += [_files(lock, dist, f) for f in files.get(dist.metadata_dir, ())]
    if unverifiable:
        findings.append(_not_verifiable(lock, unverifiable))
    extra, excepted = _extras(env, lock, selection)
    findings += extra
    return LockCheck(tuple(findings), tuple(matched), tuple(verified), tuple(excepted))


def _same_version(installed: str, locked: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(installed) == Version(locked)
    except InvalidVersion:
        return installed == locked


def _visible(env: Environment, dists: Sequence[Distribution]) -> Distribution:
    """The copy an import finds: the first site dir's (the target's order)."""
    for site in env.target.site_dirs:
        for dist in dists:
            if dist.site.path == site.path:
                return dist
    return dists[0]


def _file_findings(
    env: Environment, disk: Disk, digests: Digests | None
) -> dict[str, list[Finding]]:
    """The file checks' missing, altered and unreadable-RECORD findings, by metadata dir."""
    by_dir: dict[str, list[Finding]] = {}
    dirs = {(d.name, d.version): d.metadata_dir for d in env.distributions}
    for finding in check_files(env, disk, digests):
        if finding.code in _FILE_CODES and finding.distribution is not None:
            key = (finding.distribution.name, finding.distribution.version)
            if key in dirs:
                by_dir.setdefault(dirs[key], []).append(finding)
    return by_dir


def _installer_of(env: Environment) -> str:
    """The environment's own installer for a new package: pip when it has pip, else uv
    (what ``uv venv`` makes)."""
    own = [d for d in env.distributions if not d.site.inherited]
    return "pip" if any(d.key == "pip" for d in own) else "uv"


def _dist_installer(dist: Distribution, env: Environment) -> str:
    name = (dist.installer or "").strip().lower()
    return name if name in ("pip", "uv") else _installer_of(env)


def _lock_evidence(lock: Lock, package: LockedPackage) -> dict[str, Any]:
    out: dict[str, Any] = {"lock": lock.path, "locked_version": package.version}
    if package.marker:
        out["marker"] = package.marker
    return out


def _missing(env: Environment, lock: Lock, package: LockedPackage) -> Finding:
    return Finding(
        code="lock-missing",
        severity=Severity.ERROR,
        message=f"{package.display} is in the lock but not installed.",
        distribution=DistRef(package.name, package.version or ""),
        evidence=_lock_evidence(lock, package),
        fix=_install_fix(env, lock, package, _installer_of(env), reinstall=False),
    )


def _install_fix(
    env: Environment, lock: Lock, package: LockedPackage, installer: str, *, reinstall: bool
) -> Fix | None:
    """What installs PACKAGE as locked: from its own source (``NAME @ git+URL@COMMIT``, the
    URL, the path; ``--editable DIR`` for an editable directory), else ``NAME==VERSION``
    from the index; None when the lock says too little."""
    editable = next((a for a in package.artifacts if a.kind == "directory" and a.editable), None)
    if editable is not None:
        import os

        path = os.path.abspath(os.path.join(lock.base, editable.location))
        return Fix((install(env.target, path, installer, reinstall=reinstall, editable=True),))
    requirement = source_requirement(package, lock.base)
    if requirement is None and package.version is not None and package.source == "registry":
        pinned = f"{package.name}=={package.version}"
        remedy = install(env.target, pinned, installer, reinstall=reinstall)
        return Fix((from_locked_index(remedy, package),))
    if requirement is None:
        return None
    return Fix((install(env.target, requirement, installer, reinstall=reinstall),))


_PYPI = ("https://pypi.org/simple", "https://pypi.org/simple/")


def from_locked_index(remedy: Install, package: LockedPackage) -> Install:
    """REMEDY (an install of NAME==VERSION) from the index the lock
    names for PACKAGE when it is not PyPI: torch 2.9.1+cpu is only on PyTorch's index, and
    ``pip install torch==2.9.1+cpu`` from PyPI finds nothing. ``--no-deps`` makes it the
    only index needed."""
    if package.index is None or package.index in _PYPI:
        return remedy
    return replace(remedy, index_url=package.index)


def _version(env: Environment, lock: Lock, package: LockedPackage, dist: Distribution) -> Finding:
    return _installed_finding(
        "lock-version",
        Severity.ERROR,
        dist,
        f"{dist.name} is {dist.version} here; the lock pins {package.version}.",
        {**_lock_evidence(lock, package), "installed_version": dist.version},
        _install_fix(env, lock, package, _dist_installer(dist, env), reinstall=False),
    )


def _installed_finding(
    code: Code,
    severity: Severity,
    dist: Distribution,
    message: str,
    evidence: dict[str, Any],
    fix: Fix | None,
) -> Finding:
    """A finding about an installed distribution: named, and pointed at by its dist-info."""
    return Finding(
        code=code,
        severity=severity,
        message=message,
        distribution=ref(dist),
        paths=(dist.metadata_dir,),
        evidence=evidence,
        fix=fix,
    )


def _files(lock: Lock, dist: Distribution, finding: Finding) -> Finding:
    """A file finding of a locked distribution, said as drift from the lock."""
    return Finding(
        code="lock-files",
        severity=finding.severity,
        message=(
            f"{dist.display} is the locked version, but its files are no longer the ones it "
            f"installed: {finding.message.removeprefix(dist.display + ': ')}"
        ),
        distribution=finding.distribution,
        paths=finding.paths,
        evidence={"lock": lock.path, "check": finding.code, **finding.evidence},
        fix=finding.fix,
    )


# --------------------------------------------------------------------------- artifact


def _artifact(
    env: Environment,
    lock: Lock,
    package: LockedPackage,
    dist: Distribution,
    found: InstalledFrom,
) -> Finding | str:
    """A lock-artifact finding, "verified", or why the artifact cannot be verified."""
    if package.source != "registry":
        return _by_source(env, lock, package, dist, found)
    if found.kind == "archive" and found.hashes and package.hashes:
        if found.hashes & package.hashes:
            return "verified"
        why = (
            f"installed from {found.url}, whose {_shown(found.hashes)} is none of the "
            f"lock's {plural(len(package.hashes), 'hash', 'hashes')}"
        )
        return _artifact_finding(env, lock, package, dist, why, found)
    if found.kind in ("directory", "vcs"):
        return _local_or_vcs(env, lock, package, dist, found)
    return _by_tags(env, lock, package, dist, found)


def _by_source(
    env: Environment, lock: Lock, package: LockedPackage, dist: Distribution, found: InstalledFrom
) -> Finding | str:
    """A package locked to a source of its own, against the source ``direct_url.json``
    names: the same commit, archive or directory, else an error naming the locked one."""
    locked = next((a for a in package.artifacts if a.kind in ("vcs", "archive", "directory")), None)
    if locked is None:
        return f"the lock names a {package.source} source and no location"
    if locked.kind == "vcs" and found.kind == "vcs":
        if locked.commit is None or found.commit is None:
            return "a VCS checkout; the lock or the dist-info names no commit"
        if locked.commit == found.commit:
            return "verified"
    elif locked.kind == found.kind and _same_place(lock, locked, found.url):
        if locked.kind == "directory":
            return "a local directory, as the lock says: no file to compare"
        if found.hashes and package.hashes:
            return (
                "verified"
                if found.hashes & package.hashes
                else _artifact_finding(
                    env,
                    lock,
                    package,
                    dist,
                    f"its {_shown(found.hashes)} is none of the lock's",
                    found,
                )
            )
        return f"installed from the locked {package.source} {locked.location}; no hash kept"
    why = f"installed {_how(found)}; the lock names {_locked_source(lock, package, locked)}"
    installer = _dist_installer(dist, env)
    evidence = {
        **_lock_evidence(lock, package),
        "locked_source": source_requirement(package, lock.base),
        "installed_from": found.url,
        "installed_kind": found.kind or "index",
        "installed_commit": found.commit,
    }
    fix = _install_fix(env, lock, package, installer, reinstall=True)
    return _not_locked(dist, why, evidence, fix)


def _same_place(lock: Lock, locked: Artifact, url: str | None) -> bool:
    """Whether direct_url.json's URL is the locked archive or directory: the same URL (less
    its fragment), or for a path, the same file once resolved."""
    import os
    from urllib.parse import unquote, urlsplit

    if url is None:
        return False
    if "://" in locked.location:
        return url.split("#", 1)[0] == locked.location.split("#", 1)[0]
    if not url.startswith("file:"):
        return False
    installed = unquote(urlsplit(url).path)
    wanted = os.path.join(lock.base, locked.location)
    return os.path.realpath(installed) == os.path.realpath(wanted)


def _how(found: InstalledFrom) -> str:
    if found.kind == "vcs":
        return f"from commit {found.commit} of {found.url}"
    if found.kind == "directory":
        return f"from {'an editable checkout' if found.editable else 'a directory'} ({found.url})"
    if found.kind == "archive":
        return f"from the file {found.url}"
    if found.tags:
        return f"from an index or a plain wheel (tagged {found.tags[0]}; no direct_url.json)"
    return "from an index (no direct_url.json)"


def _locked_source(lock: Lock, package: LockedPackage, locked: Artifact) -> str:
    if locked.kind == "vcs":
        at = locked.commit or locked.revision
        return f"{locked.vcs} {locked.location}" + (f" at {at}" if at else "")
    what = {"archive": "the archive", "directory": "the directory"}[locked.kind]
    return f"{what} {locked.location}"


def _local_or_vcs(
    env: Environment, lock: Lock, package: LockedPackage, dist: Distribution, found: InstalledFrom
) -> Finding | str:
    """A registry package installed from a directory or VCS checkout: not the lock's."""
    what = "an editable checkout" if found.editable else f"a {found.kind}"
    why = f"installed from {what} ({found.url}); the lock names {package.source} artifacts"
    return _artifact_finding(env, lock, package, dist, why, found)


def _by_tags(
    env: Environment, lock: Lock, package: LockedPackage, dist: Distribution, found: InstalledFrom
) -> Finding | str:
    locked = {t for a in package.artifacts if a.kind == "wheel" for t in wheel_tags(a.filename)}
    where = f"installed from {found.url}" if found.url else "installed from an index"
    if not found.tags or not locked:
        return where
    if set(found.tags) & locked:
        return f"{where}; its wheel tags match a locked wheel's"
    if _renamed_to_platform(found.tags, locked):
        return (
            f"{where}; its WHEEL says {found.tags[0]}, as a locked wheel's file does once its "
            "name adds the platform (the name is not rewritten into WHEEL)"
        )
    if any(a.kind == "sdist" for a in package.artifacts):
        return f"a wheel tagged {found.tags[0]}, no locked wheel's: built from the locked sdist?"
    why = (
        f"installed from a wheel tagged {', '.join(found.tags)}; the lock lists only wheels "
        f"tagged {', '.join(sorted(locked)[:4])}{' ...' if len(locked) > 4 else ''}"
    )
    return _artifact_finding(env, lock, package, dist, why, found)


def _renamed_to_platform(tags: Sequence[str], locked: set[str]) -> bool:
    """A platform-less WHEEL tag (``py3-none-any``) whose interpreter and ABI a locked file
    name has with a platform (``py3-none-manylinux1_x86_64``): the wheels that bundle a
    binary into a pure build and rename the file (playwright) keep WHEEL as built, and pip
    and uv read a file's tags from its name only. Such a WHEEL is no evidence of another
    file; different interpreter or ABI tags still are."""
    pure = {t.rpartition("-")[0] for t in tags if t.endswith("-any")}
    return any(t.rpartition("-")[0] in pure for t in locked)


def _shown(hashes: frozenset[str]) -> str:
    first = sorted(hashes)[0]
    algo, _, digest = first.partition(":")
    return f"{algo} {digest[:16]}…"


def _artifact_finding(
    env: Environment,
    lock: Lock,
    package: LockedPackage,
    dist: Distribution,
    why: str,
    found: InstalledFrom,
) -> Finding:
    url = _fitting_url(package, env)
    installer = _dist_installer(dist, env)
    requirement = url or f"{package.name}=={package.version}"
    note = "" if url else "a reinstall from the index; verify again to see which file came"
    remedy = install(env.target, requirement, installer, reinstall=True)
    remedy = remedy if url else from_locked_index(remedy, package)
    evidence = {
        **_lock_evidence(lock, package),
        "installed_from": found.url,
        "installed_hashes": sorted(found.hashes),
        "installed_tags": list(found.tags),
        "locked_hashes": sorted(package.hashes),
    }
    return _not_locked(dist, why, evidence, Fix((remedy,), note=note))


def _not_locked(dist: Distribution, why: str, evidence: dict[str, Any], fix: Fix | None) -> Finding:
    """The lock-artifact error: DIST is not the artifact the lock names (WHY)."""
    return _installed_finding(
        "lock-artifact",
        Severity.ERROR,
        dist,
        f"{dist.display} is not the locked artifact: {why}.",
        evidence,
        fix,
    )


def _fitting_url(package: LockedPackage, env: Environment) -> str | None:
    """The URL of a locked wheel the target's interpreter installs, if the lock has one; its
    tags are known when it is the Python running libdoctor (else: none)."""
    import sys

    from packaging.tags import sys_tags

    if env.target.python_version != sys.version_info[:2]:
        return None
    tags = {str(t) for t in sys_tags()}
    for artifact in package.artifacts:
        fits = wheel_tags(artifact.filename) & tags
        if artifact.kind == "wheel" and "://" in artifact.location and fits:
            return artifact.location
    return None


def _not_verifiable(lock: Lock, items: Sequence[tuple[LockedPackage, str]]) -> Finding:
    names = ", ".join(p.display for p, _ in items[:6])
    more = f" and {len(items) - 6} more" if len(items) > 6 else ""
    return Finding(
        code="lock-artifact",
        severity=Severity.INFO,
        message=(
            f"Which file {names}{more} {'was' if len(items) == 1 else 'were'} installed from is "
            f"not verifiable ({_most_common_why(items)}): pip and uv keep a file's sha256 only "
            "for a URL or file install. Versions and files are checked."
        ),
        evidence={
            "lock": lock.path,
            "not_verifiable": [{"name": p.name, "version": p.version, "why": w} for p, w in items],
        },
    )


def _most_common_why(items: Sequence[tuple[LockedPackage, str]]) -> str:
    """The reason most of ITEMS share (each one's own is in the evidence), with how many
    have it when they differ: the editable project first in the list is not the rule."""
    counts: dict[str, int] = {}
    for _, why in items:
        counts[why] = counts.get(why, 0) + 1
    why, count = max(counts.items(), key=lambda item: item[1])
    return why if count == len(items) else f"{count} of {len(items)}: {why}"


# --------------------------------------------------------------------------- extra


def _extras(env: Environment, lock: Lock, selection: Selection) -> tuple[list[Finding], list[str]]:
    wanted = {p.key for p in selection.required} | {p.key for p in selection.optional}
    excluded = {e.package.key: e.why for e in selection.excluded}
    listed = lock.keys
    findings: list[Finding] = []
    excepted: list[str] = []
    for dist in env.distributions:
        if dist.site.inherited or dist.key in wanted:
            continue
        if dist.key in INSTALLER_TOOLS and dist.key not in listed:
            excepted.append(dist.display)
            continue
        findings.append(_extra(env, lock, dist, excluded.get(dist.key)))
    return findings, excepted


def _extra(env: Environment, lock: Lock, dist: Distribution, excluded: str | None) -> Finding:
    why = (
        f"the lock lists {dist.name} but not for this environment ({excluded})"
        if excluded
        else "the lock does not list it"
    )
    return _installed_finding(
        "lock-extra",
        Severity.WARNING,
        dist,
        f"{dist.display} is installed but {why}.",
        {"lock": lock.path, **({"excluded": excluded} if excluded else {})},
        None if dist.external else Fix((uninstall(dist, env.target),)),
    )
