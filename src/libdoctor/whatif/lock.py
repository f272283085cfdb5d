"""One ``libdoctor plan lock`` run: a lock file judged before any environment exists.

Read the lock and select what applies to the planned interpreter and platform (as ``verify
--lock`` selects, ``uv sync``'s flags included); for each package choose the wheel the
installer would choose for that platform's tags (a pinned requirement's wheels are found on
the index; only an sdist: "cannot tell"); read each wheel's file list and RECORD by range
(``external.remote``, its cache keyed by sha256), the lock's hash checked first against
the index's; place them all in a model of the environment-to-be and run the co-install
checks (``checks.coinstall``). Wheels are read on a few threads (``whatif.threads``).
"""

from __future__ import annotations

import functools
import os
import re
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from libdoctor.checks.coinstall import LockFix, cuda_majors, path_conflicts, unmet_requirements
from libdoctor.checks.linkage import unread_extensions, unresolved_libraries
from libdoctor.environment.distributions import canonicalize_name
from libdoctor.environment.model import Environment, build_environment
from libdoctor.environment.tags import PlannedPlatform, choose_wheel
from libdoctor.environment.target import SiteDir, Target
from libdoctor.environment.wheel import read_wheel, wheel_distribution
from libdoctor.errors import LibdoctorError
from libdoctor.external.index import PYPI, project_files, release_files
from libdoctor.external.lockfile import Lock, LockedPackage, Selection, read_lock
from libdoctor.external.lockselect import SyncOptions, select
from libdoctor.external.remote import RemoteRead, cached_wheel, read_remote_wheel
from libdoctor.findings import DistRef, Finding, Severity
from libdoctor.stack.frameworks import FrameworkBuild, detect_frameworks
from libdoctor.whatif.linkage import Linkage, WheelSource, read_linkage
from libdoctor.whatif.threads import WORKERS, each

__all__ = ["LockPlan", "LockPlanOptions", "ReadWheel", "Unplanned", "plan_lock"]

# Where a framework says which CUDA it was built for, read by range with the dist-info.
BUILD_FILES: Mapping[str, str] = {"torch": "torch/version.py"}
_PREFIX = "/nonexistent/libdoctor-plan-lock/env"  # the environment-to-be's place in the model
_CU_LABEL = re.compile(r"\+cu(\d+)(\d)\b")
_NO_LINKAGE = Linkage((), (), 0, 0)


@dataclass(frozen=True, slots=True)
class LockPlanOptions:
    cache_dir: str
    index_url: str = PYPI  # where a requirements lock's pins are looked up
    offline: bool = False  # the wheel-index cache only
    workers: int = WORKERS
    credentials: tuple[str, ...] = ()  # index URLs whose userinfo goes to their host


@dataclass(frozen=True, slots=True)
class ReadWheel:
    package: LockedPackage
    filename: str
    read: RemoteRead
    url: str = ""  # a URL, or a local path
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Unplanned:
    """A package whose files cannot be told: only an sdist, no wheel fits, not cached."""

    package: LockedPackage
    why: str
    severity: Severity


@dataclass(frozen=True, slots=True)
class LockPlan:
    lock: Lock
    selection: Selection
    platform: PlannedPlatform
    wheels: tuple[ReadWheel, ...]
    unplanned: tuple[Unplanned, ...]
    findings: tuple[Finding, ...]
    env: Environment
    linkage: Linkage | None = None  # the extension modules' dynamic sections

    @property
    def fetched(self) -> int:
        return sum(w.read.fetched for w in self.wheels) + (self.linkage or _NO_LINKAGE).fetched

    @property
    def size(self) -> int:
        return sum(w.read.size for w in self.wheels)

    @property
    def requests(self) -> int:
        return sum(w.read.requests for w in self.wheels) + (self.linkage or _NO_LINKAGE).requests

    @property
    def cached(self) -> int:
        return sum(1 for w in self.wheels if w.read.how == "cache")


def plan_lock(
    path: str,
    platform: PlannedPlatform,
    options: LockPlanOptions,
    sync: SyncOptions | None = None,
    allow_includes: Sequence[str] = (),
) -> LockPlan:
    """The lock at PATH planned for PLATFORM; ``LibdoctorError`` (one line) when it cannot
    be: a bad lock, an index or wheel server that answers 404, refuses ranges, or whose
    sha256 for a file is not the lock's."""
    lock = read_lock(path, allow_includes)
    selection = select(lock, platform.markers, sync)
    wanted = [p for p in selection.required if not p.local]
    read = functools.partial(_read_package, base=lock.base, platform=platform, options=options)
    results = each(wanted, read, options.workers, first=lambda p: bool(_members(p)))
    wheels = tuple(r for r in results if isinstance(r, ReadWheel))
    unplanned = tuple(r for r in results if isinstance(r, Unplanned))
    env = _env_to_be(wheels, platform)
    linkage = read_linkage(
        [_source(w) for w in wheels], env, cache_dir=options.cache_dir,
        credentials=options.credentials, offline=options.offline, workers=options.workers,
    )  # fmt: skip
    findings = _findings(lock, selection, env, wheels, unplanned, platform)
    findings += unresolved_libraries(env, linkage.extensions)
    findings += unread_extensions(env, linkage.unread)
    return LockPlan(lock, selection, platform, wheels, unplanned, tuple(findings), env, linkage)


def _source(wheel: ReadWheel) -> WheelSource:
    """WHEEL as ``read_linkage`` takes it. A local file's sha256 is only what the lock says
    (nothing hashes the file), so it keys no cache note: its modules are read from the file
    each run, and a wheel rebuilt under an old lock is judged by its own bytes."""
    read = wheel.read
    local = read.how == "file"
    return WheelSource(
        read.wheel.key, wheel.filename, wheel.url, None if local else wheel.sha256, read.size,
        read.wheel.members, local,
    )  # fmt: skip


# --------------------------------------------------------------------------- choosing


def _sha256(hashes: frozenset[str]) -> str | None:
    return next((h.partition(":")[2] for h in sorted(hashes) if h.startswith("sha256:")), None)


def _filename(package: LockedPackage, location: str, name: str) -> str:
    try:  # checked even with a name given: the URL is read next
        path = urllib.parse.urlsplit(location).path
    except ValueError:
        shown = location if len(location) <= 80 else f"{location[:80]}..."
        raise LibdoctorError(
            f"{package.display}: the lock's URL {shown!r} does not parse"
        ) from None
    return name or urllib.parse.unquote(path.rpartition("/")[2])


def _locate(
    package: LockedPackage, base: str, platform: PlannedPlatform, options: LockPlanOptions
) -> tuple[str, str, str | None, bool] | Unplanned:
    """(file name, URL or path, sha256, whether the index gave it) of the wheel the
    installer would take for PACKAGE on PLATFORM; else why none can be told."""
    located = {
        _filename(package, a.location, a.name): a
        for a in package.artifacts
        if a.kind == "wheel" and a.location
    }
    if not located:
        if package.source != "registry" or not package.version:
            return Unplanned(package, f"locked as a {package.source} source: its files are "
                             "unknown until it is built", Severity.INFO)  # fmt: skip
        if any(a.location for a in package.artifacts):  # the lock's own files: no wheel
            return _nothing_fits(
                package, platform, any(a.kind == "sdist" for a in package.artifacts)
            )
        return _from_index(package, platform, options)
    chosen = choose_wheel(located, platform.tags)
    if chosen is None:
        return _nothing_fits(package, platform, any(a.kind == "sdist" for a in package.artifacts))
    artifact = located[chosen]
    location = artifact.location
    if "://" not in location:
        location = os.path.join(base, location)
    return chosen, location, _sha256(artifact.hashes), False


def _nothing_fits(package: LockedPackage, platform: PlannedPlatform, sdist: bool) -> Unplanned:
    if sdist:
        why = (
            f"no locked wheel fits {platform.display}, only an sdist: the installer would "
            "build it, and its files are unknown until then (cannot tell)"
        )
        return Unplanned(package, why, Severity.INFO)
    why = f"no locked file fits {platform.display}: an install of the lock fails here"
    return Unplanned(package, why, Severity.WARNING)


def _from_index(
    package: LockedPackage, platform: PlannedPlatform, options: LockPlanOptions
) -> tuple[str, str, str | None, bool] | Unplanned:
    """A pinned requirement's wheel for PLATFORM from the index (with the lock's hashes,
    only a file whose sha256 is one of them)."""
    mine = release_files(
        options.index_url, package.name, package.version or "", cache_dir=options.cache_dir,
        credentials=options.credentials, offline=options.offline,
    )  # fmt: skip
    if mine is None:
        why = "a pin without a locked URL, and its release is not in the cache (--offline)"
        return Unplanned(package, why, Severity.WARNING)
    if not mine:
        why = "the index lists no file of this release: an install of the lock fails here"
        return Unplanned(package, why, Severity.WARNING)
    hashes = {h.partition(":")[2] for h in package.hashes if h.startswith("sha256:")}
    if hashes:
        mine = tuple(f for f in mine if f.sha256 is None or f.sha256 in hashes)
        if not mine:
            raise LibdoctorError(
                f"{package.display}: none of the lock's sha256 hashes is one the index lists "
                "for this release"
            )
    wheels = {f.filename: f for f in mine if f.filename.endswith(".whl")}
    chosen = choose_wheel(wheels, platform.tags)
    if chosen is None:
        return _nothing_fits(package, platform, any(not f.filename.endswith(".whl") for f in mine))
    return chosen, wheels[chosen].url, wheels[chosen].sha256, True


# --------------------------------------------------------------------------- reading


def _read_package(
    package: LockedPackage, *, base: str, platform: PlannedPlatform, options: LockPlanOptions
) -> ReadWheel | Unplanned:
    located = _locate(package, base, platform, options)
    if isinstance(located, Unplanned):
        return located
    filename, url, sha256, listed = located
    members = _members(package)
    if "://" not in url or url.startswith("file:"):
        local = (
            urllib.request.url2pathname(urllib.parse.urlsplit(url).path) if "://" in url else url
        )
        wheel = read_wheel(local)
        whole = RemoteRead(wheel, os.path.getsize(local), 0, 0, "file")
        return ReadWheel(package, filename, whole, local, sha256)
    read = cached_wheel(options.cache_dir, sha256, url, members)
    if read is None and options.offline:
        why = f"{filename} is not in the wheel-index cache (--offline)"
        return Unplanned(package, why, Severity.WARNING)
    if read is None:
        if package.index and not listed:
            _check_index(package, filename, sha256, options)
        read = read_remote_wheel(
            url, sha256=sha256, cache_dir=options.cache_dir, credentials=options.credentials,
            members=members, download=False,
        )  # fmt: skip
    return ReadWheel(package, filename, read, url, sha256)


def _members(package: LockedPackage) -> tuple[str, ...]:
    """What else to read of PACKAGE's wheel: its framework build file, unless the version's
    local label (``+cu128``) says the build."""
    file = BUILD_FILES.get(package.key)
    if file is None or _CU_LABEL.search(package.version or ""):
        return ()
    return (file,)


def _check_index(
    package: LockedPackage, filename: str, sha256: str | None, options: LockPlanOptions
) -> None:
    """The lock's sha256 for FILENAME is the one its index lists (one line if not)."""
    assert package.index is not None
    files = project_files(package.index, package.name, options.credentials)
    listed = next((f for f in files if f.filename == filename), None)
    if listed is None:
        raise LibdoctorError(f"{package.display}: {package.index} does not list {filename}")
    if sha256 is not None and listed.sha256 is not None and listed.sha256 != sha256.lower():
        raise LibdoctorError(
            f"{package.display}: the lock's sha256 for {filename} ({sha256[:16]}...) is not "
            f"the index's ({listed.sha256[:16]}...)"
        )


# --------------------------------------------------------------------------- judging


def _env_to_be(wheels: Sequence[ReadWheel], platform: PlannedPlatform) -> Environment:
    """Every wheel placed where the installer puts it in a venv of PLATFORM's Python."""
    major, minor = platform.python
    site = SiteDir(os.path.join(_PREFIX, "lib", f"python{major}.{minor}", "site-packages"), _PREFIX)
    target = Target(_PREFIX, None, (site,), "plan lock", python_version=platform.python)
    dists = [wheel_distribution(w.read.wheel, target, "uv")[0] for w in wheels]
    return build_environment(target, dists)


def _frameworks(env: Environment, wheels: Sequence[ReadWheel]) -> list[FrameworkBuild]:
    """The locked frameworks' CUDA builds: from the build files read by range, else from
    the version's local label."""
    site = env.target.site_dirs[0].path
    files = {
        os.path.join(site, *member.split("/")): data
        for w in wheels
        for member, data in w.read.extra
    }
    builds = []
    for build in detect_frameworks(env, files.get):
        label = _CU_LABEL.search(build.dist.version)
        if build.cuda is None and label is not None:
            build = replace(build, cuda=f"{label[1]}.{label[2]}", source="local version label",
                            problem=None)  # fmt: skip
        builds.append(build)
    return builds


def _findings(
    lock: Lock,
    selection: Selection,
    env: Environment,
    wheels: Sequence[ReadWheel],
    unplanned: Sequence[Unplanned],
    platform: PlannedPlatform,
) -> list[Finding]:
    required = frozenset(
        canonicalize_name(re.split(r"[\s\[;<>=!~(@]", line.strip(), maxsplit=1)[0])
        for w in wheels
        for line in w.read.wheel.requires_dist
    )
    fix = LockFix(lock.format, lock.path, required)
    found = path_conflicts(env, fix)
    found += cuda_majors(env, _frameworks(env, wheels), fix)
    held = [*selection.required, *selection.optional]
    found += unmet_requirements(env, held, platform.markers, selection.extras)
    found += [_cannot_tell(u) for u in unplanned]
    return found


def _cannot_tell(unplanned: Unplanned) -> Finding:
    package = unplanned.package
    return Finding(
        "lock-cannot-tell", unplanned.severity, f"{package.display}: {unplanned.why}.",
        DistRef(package.name, package.version or ""), evidence={"source": package.source},
    )  # fmt: skip
