"""What an uninstall, an install or a repair would do, predicted from the files alone.

Nothing here writes anything. A plan is the same checks as ``libdoctor check`` (``run_checks``)
run twice: on the environment as it is, and on the environment as it *would be* — the model
without the removed distributions (or with the new ones) over a disk view (``Overlay``) in which
the removed paths are gone and the written ones hold the bytes their RECORD describes. The
findings the second run has and the first has not are what the change breaks.

The removal set is pip's own (``pip/_internal/req/req_uninstall.py``): every RECORD path that
exists, the ``.pyc``/``.pyo`` beside each listed ``.py`` and its ``__pycache__`` bytecode for the
target's interpreter, console scripts named in ``entry_points.txt``, and every directory whose
whole content is in the set (pip removes those as a unit). RECORD paths outside the prefix are
reported and never followed.
"""

from __future__ import annotations

import base64
import binascii
import configparser
import os
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from libdoctor.analysis import run_checks
from libdoctor.disk import MISSING, Disk, FileState
from libdoctor.distributions import Distribution, canonicalize_name, parse_metadata
from libdoctor.errors import LibdoctorError
from libdoctor.findings import Finding, Severity
from libdoctor.fixes import reinstall_argv, uninstall_argv
from libdoctor.model import Environment, build_environment, is_inside
from libdoctor.record import RecordEntry, parse_record
from libdoctor.target import SiteDir, Target

if TYPE_CHECKING:
    from libdoctor.libraries import LoaderContext

__all__ = [
    "CoOwned",
    "FindingDiff",
    "Overlay",
    "Overwrite",
    "Plan",
    "Removal",
    "Simulation",
    "Step",
    "WheelFile",
    "diff_findings",
    "find_distribution",
    "finding_key",
    "plan_install",
    "plan_uninstall",
    "read_wheel",
    "reinstall_step",
    "removal_set",
    "uninstall_step",
    "wheel_distribution",
]

StepAction = Literal["uninstall", "reinstall", "install"]
# Evidence keys that name *what* a finding is about beyond its paths (a soname, a library).
_SUBJECT_KEYS = ("soname", "needed", "library", "name")
_DIR = FileState(exists=True, is_file=False)
# Installers whose steps libdoctor can back up and roll back (conda also rewrites conda-meta).
RUNNABLE_INSTALLERS = frozenset({"pip", "uv"})


# --------------------------------------------------------------------------- the what-if view


class Overlay:
    """``base`` after ``removed`` paths are deleted and ``written`` paths (re)created.

    Written paths win over removed ones (a reinstall deletes, then writes); the directories
    above a written path exist. Stack overlays to apply steps one after the other.
    """

    def __init__(
        self,
        base: Disk,
        removed: Iterable[str] = (),
        written: Mapping[str, FileState] | None = None,
    ) -> None:
        self._base = base
        self._written = dict(written or {})
        self._removed = frozenset(removed) - self._written.keys()
        self._children: dict[str, set[str]] = {}
        for path in self._written:
            child, parent = path, os.path.dirname(path)
            while parent != child:
                names = self._children.setdefault(parent, set())
                name = os.path.basename(child)
                if name in names:
                    break
                names.add(name)
                child, parent = parent, os.path.dirname(parent)

    @property
    def removed(self) -> frozenset[str]:
        """Paths that are gone in this view (the loader emulation hides them)."""
        return (self._removed | self._base.removed) - self._written.keys()

    def stat(self, path: str) -> FileState:
        state = self._written.get(path)
        if state is not None:
            return state
        if path in self._children:
            base = MISSING if path in self._removed else self._base.stat(path)
            return base if base.exists and not base.is_file and not base.error else _DIR
        if path in self._removed:
            return MISSING
        return self._base.stat(path)

    def listdir(self, path: str) -> tuple[str, ...]:
        names: list[str] = []
        if path not in self._removed:
            removed = self._removed
            names = [n for n in self._base.listdir(path) if os.path.join(path, n) not in removed]
        extra = self._children.get(path)
        if extra:
            present = set(names)
            names += sorted(n for n in extra if n not in present)
        return tuple(names)


# --------------------------------------------------------------------------- pip's removal set


@dataclass(frozen=True, slots=True)
class Removal:
    """What ``pip uninstall`` of one distribution deletes, on the disk view it was planned on."""

    dist: Distribution
    files: tuple[str, ...]  # files and symlinks deleted (bytecode included)
    dirs: tuple[str, ...]  # directories removed whole, their content being all in ``files``
    absent: tuple[str, ...]  # RECORD paths not on disk: nothing to delete
    outside: tuple[str, ...]  # RECORD paths outside the prefix: reported, never followed

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self.files) | frozenset(self.dirs)


def _exists(disk: Disk, path: str) -> bool:
    """``os.path.exists`` as pip calls it: false for dangling links and unreadable paths."""
    state = disk.stat(path)
    return state.exists and state.error is None


def _pyc_tag(target: Target) -> str | None:
    version = target.python_version
    return f"cpython-{version[0]}{version[1]}" if version else None


def _script_paths(dist: Distribution, target: Target) -> list[str]:
    """Console and GUI scripts from entry_points.txt (pip removes them even without RECORD)."""
    try:
        with open(os.path.join(dist.metadata_dir, "entry_points.txt"), encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return []
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    bindir = os.path.join(dist.site.prefix, "bin")
    names = [
        name
        for section in ("console_scripts", "gui_scripts")
        if parser.has_section(section)
        for name in parser.options(section)
    ]
    return [os.path.join(bindir, name) for name in names if os.sep not in name]


def _candidates(dist: Distribution, env: Environment) -> tuple[list[str], list[str]]:
    """(paths pip would try to remove, RECORD paths outside the prefix)."""
    tag = _pyc_tag(env.target)
    paths: list[str] = []
    for claim in env.claims_of(dist):
        path = claim.path
        paths.append(path)
        if path.endswith(".py"):
            head, tail = os.path.split(path)
            stem = tail[:-3]
            paths += [os.path.join(head, stem + ".pyc"), os.path.join(head, stem + ".pyo")]
            if tag:
                paths.append(os.path.join(head, "__pycache__", f"{stem}.{tag}.pyc"))
    if dist.kind == "egg-info":
        paths.append(dist.metadata_dir)
    paths += _script_paths(dist, env.target)
    outside = [e.path for e in env.escaping if e.dist.metadata_dir == dist.metadata_dir]
    return paths, outside


def _tree(disk: Disk, root: str) -> Iterator[tuple[str, str]]:
    """(path, kind) below ROOT, depth first: kind is "dir", "file" (anything not a
    directory), or "loop" for a directory already seen (a symlink back up the tree)."""
    stack = [root]
    seen: set[tuple[int, int]] = set()
    while stack:
        directory = stack.pop()
        for name in disk.listdir(directory):
            path = os.path.join(directory, name)
            state = disk.stat(path)
            if state.exists and not state.is_file and state.error is None:
                key = (state.device, state.inode)
                if state.inode and key in seen:
                    yield path, "loop"
                    continue
                seen.add(key)
                stack.append(path)
                yield path, "dir"
            else:
                yield path, "file"


def _walk_covered(disk: Disk, root: str, removing: frozenset[str]) -> list[str] | None:
    """Every subdirectory of ROOT if every file below it is in REMOVING, else None.

    pip's ``compress_for_rename``: a directory whose files are all being removed is removed
    as a unit, empty subdirectories included. Stops at the first file that stays.
    """
    dirs: list[str] = []
    for path, kind in _tree(disk, root):
        if kind == "loop" or (kind == "file" and path not in removing):
            return None
        if kind == "dir":
            dirs.append(path)
    return dirs


def _walk_all(disk: Disk, root: str) -> tuple[list[str], list[str]]:
    """(files, subdirectories) below ROOT; a directory seen twice (a link loop) is skipped."""
    files: list[str] = []
    dirs: list[str] = []
    for path, kind in _tree(disk, root):
        if kind == "dir":
            dirs.append(path)
        elif kind == "file":
            files.append(path)
    return files, dirs


def removal_set(dist: Distribution, env: Environment, disk: Disk) -> Removal:
    """The paths ``pip uninstall`` of DIST deletes, as seen through DISK."""
    if dist.record is None and dist.kind == "dist-info":
        raise LibdoctorError(
            f"{dist.display} has {dist.record_error or 'no RECORD'}: pip cannot uninstall it"
        )
    candidates, outside = _candidates(dist, env)
    files: list[str] = []
    absent: list[str] = []
    seen: set[str] = set()
    claimed = {c.path for c in env.claims_of(dist)}
    whole: list[str] = []  # directories named as paths (an egg-info): moved away as a unit
    for path in candidates:
        if path in seen:
            continue
        seen.add(path)
        state = disk.stat(path)
        if state.exists and state.error is None and not state.is_file:
            whole.append(path)
        elif state.exists and state.error is None:
            files.append(path)
        elif path in claimed:
            absent.append(path)
    dirs: list[str] = []
    for directory in whole:
        below_files, below_dirs = _walk_all(disk, directory)
        files += below_files
        dirs += [directory, *below_dirs]
    files = list(dict.fromkeys(files))
    removing = frozenset(files)
    wildcards: list[str] = list(whole)
    for root in sorted({os.path.dirname(p) for p in files}, key=len):
        if any(is_inside(root, w) for w in wildcards):
            continue
        covered = _walk_covered(disk, root, removing)
        if covered is not None:
            wildcards.append(root)
            dirs += [root, *covered]
    return Removal(dist, tuple(files), tuple(dirs), tuple(absent), tuple(outside))


def find_distribution(env: Environment, name: str) -> Distribution:
    """The distribution ``pip uninstall NAME`` would act on, or a one-line error."""
    key = canonicalize_name(name)
    found = [d for d in env.distributions if d.key == key]
    local = [d for d in found if not d.site.inherited]
    if local:
        return local[0]
    if found:
        raise LibdoctorError(
            f"{found[0].display} is installed in the base interpreter's site-packages "
            f"({found[0].site.path}), outside {env.target.prefix}: pip will not uninstall it here"
        )
    raise LibdoctorError(f"{name} is not installed in {env.target.prefix}")


# --------------------------------------------------------------------------- comparing findings


def finding_key(finding: Finding) -> tuple[Any, ...]:
    """What makes two findings the same problem: code, distribution, paths, subject."""
    dist = (
        (canonicalize_name(finding.distribution.name), finding.distribution.version)
        if finding.distribution
        else None
    )
    subject = tuple(
        (k, finding.evidence[k]) for k in _SUBJECT_KEYS if isinstance(finding.evidence.get(k), str)
    )
    return (finding.code, dist, tuple(sorted(finding.paths)), subject)


@dataclass(frozen=True, slots=True)
class FindingDiff:
    new: tuple[Finding, ...]  # in after, not in before (or changed: more paths)
    resolved: tuple[Finding, ...]  # in before, not in after
    kept: tuple[Finding, ...]  # in both (as after has them)


def diff_findings(before: Sequence[Finding], after: Sequence[Finding]) -> FindingDiff:
    old = {finding_key(f) for f in before}
    now = {finding_key(f) for f in after}
    return FindingDiff(
        new=tuple(f for f in after if finding_key(f) not in old),
        resolved=tuple(f for f in before if finding_key(f) not in now),
        kept=tuple(f for f in after if finding_key(f) in old),
    )


# --------------------------------------------------------------------------- wheels


@dataclass(frozen=True, slots=True)
class WheelFile:
    """A wheel's identity and file list, read from the zip (never extracted)."""

    path: str
    name: str
    version: str
    key: str
    requires_dist: tuple[str, ...]
    dist_info: str  # "<name>-<version>.dist-info" as spelled in the archive
    members: tuple[RecordEntry, ...]  # archive name, RECORD hash, size in the archive

    @property
    def display(self) -> str:
        return f"{self.name} {self.version}"


def read_wheel(path: str) -> WheelFile:
    try:
        with zipfile.ZipFile(path) as archive:
            infos = [i for i in archive.infolist() if not i.is_dir()]
            names = {i.filename for i in infos}
            dist_infos = sorted(
                {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
            )
            if len(dist_infos) != 1:
                raise LibdoctorError(f"{path} is not a wheel: {len(dist_infos)} .dist-info dirs")
            info_dir = dist_infos[0]
            meta = parse_metadata(archive.read(f"{info_dir}/METADATA"))
            record = (
                parse_record(archive.read(f"{info_dir}/RECORD"))
                if f"{info_dir}/RECORD" in names
                else None
            )
    except (OSError, zipfile.BadZipFile, KeyError) as exc:
        raise LibdoctorError(f"cannot read wheel {path}: {exc}") from None
    if record is None:
        raise LibdoctorError(f"{path} is not a wheel: no {info_dir}/RECORD")
    hashes = {e.path: e.hash for e in record.entries}
    members = tuple(RecordEntry(i.filename, hashes.get(i.filename), i.file_size) for i in infos)
    if not meta.name or not meta.version:
        raise LibdoctorError(f"{path} is not a wheel: METADATA has no Name or Version")
    return WheelFile(
        path=path,
        name=meta.name,
        version=meta.version,
        key=canonicalize_name(meta.name),
        requires_dist=meta.requires_dist,
        dist_info=info_dir,
        members=members,
    )


def _install_site(target: Target) -> SiteDir:
    for site in target.site_dirs:
        if not site.inherited:
            return site
    raise LibdoctorError(f"{target.prefix} has no site-packages of its own to install into")


def _wheel_destination(wheel: WheelFile, arcname: str, site: SiteDir, target: Target) -> str:
    """Where pip puts an archive member (the ``.data/<scheme>/`` dirs of the venv scheme)."""
    data_dir = wheel.dist_info[: -len(".dist-info")] + ".data/"
    if not arcname.startswith(data_dir):
        return os.path.normpath(os.path.join(site.path, arcname))
    scheme, _, rest = arcname[len(data_dir) :].partition("/")
    prefix = site.prefix
    version = target.python_version or (3, 0)
    roots = {
        "purelib": site.path,
        "platlib": site.path,
        "scripts": os.path.join(prefix, "bin"),
        "data": prefix,
        "headers": os.path.join(
            prefix, "include", "site", f"python{version[0]}.{version[1]}", wheel.name
        ),
    }
    return os.path.normpath(os.path.join(roots.get(scheme, prefix), rest))


def wheel_distribution(
    wheel: WheelFile, target: Target, installer: str = "pip"
) -> tuple[Distribution, dict[str, RecordEntry]]:
    """The distribution a wheel becomes once installed, and its files by absolute path."""
    from libdoctor.record import ParsedRecord

    site = _install_site(target)
    files: dict[str, RecordEntry] = {}
    entries: list[RecordEntry] = []
    for member in wheel.members:
        dest = _wheel_destination(wheel, member.path, site, target)
        if not is_inside(dest, site.prefix):
            continue
        rel = os.path.relpath(dest, site.path)
        entry = RecordEntry(rel, member.hash, member.size)
        files[dest] = entry
        entries.append(entry)
    metadata_dir = os.path.join(site.path, wheel.dist_info)
    # pip adds these to the installed RECORD; it also compiles bytecode (not checked).
    for name, data in (("INSTALLER", installer + "\n"), ("REQUESTED", "")):
        entry = RecordEntry(f"{wheel.dist_info}/{name}", None, len(data))
        files[os.path.join(metadata_dir, name)] = entry
        entries.append(entry)
    dist = Distribution(
        name=wheel.name,
        version=wheel.version,
        key=wheel.key,
        metadata_dir=metadata_dir,
        kind="dist-info",
        site=site,
        base_dir=site.path,
        installer=installer,
        requires_dist=wheel.requires_dist,
        record=ParsedRecord(tuple(entries), ()),
        record_error=None,
    )
    return dist, files


def _digest(entry: RecordEntry) -> tuple[str, bytes] | None:
    if not entry.hash:
        return None
    algorithm, _, encoded = entry.hash.partition("=")
    try:
        return algorithm, base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        return None


def _written_state(entry: RecordEntry) -> FileState:
    return FileState(exists=True, is_file=True, size=entry.size or 0)


# --------------------------------------------------------------------------- simulation


class Simulation:
    """The environment after a sequence of steps: a model and a disk view, built up in order."""

    def __init__(
        self, env: Environment, disk: Disk, libraries: LoaderContext | None = None
    ) -> None:
        self.libraries = libraries
        self.target = env.target
        self.dists: list[Distribution] = list(env.distributions)
        self.env = env
        self.disk: Disk = disk
        self.digests: dict[tuple[str, str], bytes | str] = {}
        self.written: set[str] = set()

    def _rebuild(self) -> None:
        self.env = build_environment(self.target, self.dists)

    def _forget(self, paths: Iterable[str]) -> None:
        gone = set(paths)
        self.written -= gone
        if gone and self.digests:
            self.digests = {k: v for k, v in self.digests.items() if k[0] not in gone}

    def uninstall(self, dist: Distribution) -> Removal:
        removal = removal_set(dist, self.env, self.disk)
        self.disk = Overlay(self.disk, removal.paths)
        self._forget(removal.paths)
        self.dists = [d for d in self.dists if d.metadata_dir != dist.metadata_dir]
        self._rebuild()
        return removal

    def write(self, dist: Distribution, files: Mapping[str, RecordEntry]) -> None:
        self.disk = Overlay(self.disk, (), {p: _written_state(e) for p, e in files.items()})
        self._forget(files)
        self.written.update(files)
        for path, entry in files.items():
            digest = _digest(entry)
            if digest is not None:
                self.digests[(path, digest[0])] = digest[1]
        self.dists = [d for d in self.dists if d.metadata_dir != dist.metadata_dir] + [dist]
        self._rebuild()

    def reinstall(self, dist: Distribution) -> Removal:
        """``pip install --force-reinstall --no-deps NAME==VERSION``: uninstall, then write the
        files its RECORD lists (assumes the index serves the same wheel)."""
        claims = self.env.claims_of(dist)
        removal = self.uninstall(dist)
        self.write(dist, {c.path: c.entry for c in claims})
        return removal

    def findings(self) -> list[Finding]:
        found = run_checks(self.env, self.disk, self.digests or None, self.libraries)
        return [f for f in found if not _found_in_writes(f, self.written)]


def _found_in_writes(finding: Finding, written: set[str]) -> bool:
    """An ``unresolved-library`` that a simulated write puts back on the search path.

    The loader emulation reads real files only, so a library a reinstall would write back is
    invisible to it; when a file by that name is written into a directory the failed search
    tried, the library is predicted found (its own dependencies are the reinstalled ones).
    """
    if finding.code != "unresolved-library" or not written:
        return False
    evidence = finding.evidence
    tried = {
        os.path.normpath(str(d.get("directory", "")))
        for request in evidence.get("requests", ())
        for d in request.get("searched", ())
    }
    return any(
        candidate.get("path") in written
        and os.path.normpath(os.path.dirname(str(candidate.get("path")))) in tried
        for candidate in evidence.get("shipped_by", ())
    )


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True, slots=True)
class Step:
    """One installer command. ``dist`` names the distribution it acts on (by metadata dir);
    ``wheel`` the wheel file it installs."""

    action: StepAction
    argv: tuple[str, ...]
    name: str
    version: str
    dist: Distribution | None = None
    wheel: str | None = None
    reason: str = ""

    @property
    def installer(self) -> str:
        return (self.dist.installer if self.dist and self.dist.installer else "pip").lower()


@dataclass(frozen=True, slots=True)
class CoOwned:
    """A path in the removal set that another distribution, which stays, also claims."""

    path: str
    removed_with: Distribution
    owners: tuple[Distribution, ...]
    identical: bool  # every claim records the same bytes


@dataclass(frozen=True, slots=True)
class Overwrite:
    """A path a wheel would write over: another distribution's file, or an unowned one."""

    path: str
    wheel: str  # "name version"
    owners: tuple[Distribution, ...]  # () for a file no RECORD claims
    identical: bool


@dataclass(frozen=True, slots=True)
class Plan:
    action: Literal["uninstall", "install"]
    target: Target
    subjects: tuple[str, ...]  # "cudnn-b 9.24.0"
    steps: tuple[Step, ...]
    removals: tuple[Removal, ...] = ()
    co_owned: tuple[CoOwned, ...] = ()
    overwrites: tuple[Overwrite, ...] = ()
    new: tuple[Finding, ...] = ()
    resolved: tuple[Finding, ...] = ()
    repair: tuple[Step, ...] = ()  # after ``steps``, reinstalls that undo the damage
    after_repair: tuple[Finding, ...] | None = None  # new findings left after the repair
    notes: tuple[str, ...] = ()
    distributions: int = 0
    files: int = 0
    before: tuple[Finding, ...] = ()  # every finding of the environment as it is

    @property
    def breaks(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.new if f.severity >= Severity.ERROR)

    @property
    def verdict(self) -> Literal["safe", "breaks"]:
        return "breaks" if self.breaks else "safe"

    @property
    def repair_is_safe(self) -> bool:
        return bool(self.repair) and not any(
            f.severity >= Severity.ERROR for f in (self.after_repair or ())
        )


def _co_owned(removal: Removal, env: Environment, leaving: set[str]) -> list[CoOwned]:
    out = []
    for path in removal.files:
        claims = env.claims.get(path, ())
        others = [c for c in claims if c.dist.metadata_dir not in leaving]
        if not others:
            continue
        hashes = {(c.entry.hash, c.entry.size) for c in claims}
        owners = tuple({c.dist.metadata_dir: c.dist for c in others}.values())
        out.append(CoOwned(path, removal.dist, owners, identical=len(hashes) == 1))
    return out


def _choose_repairs(co_owned: Sequence[CoOwned], env: Environment) -> list[Distribution]:
    """The fewest co-owners whose reinstall puts every co-owned path back.

    A path with identical claims is restored by any one of them (the empty ``nvidia/__init__.py``
    that every nvidia wheel ships needs one reinstall, not fifteen); a path with differing
    claims needs each of its owners. Greedy set cover, largest first, names breaking ties.
    """
    chosen: dict[str, Distribution] = {}
    uncovered: list[CoOwned] = []
    for item in co_owned:
        if item.identical:
            uncovered.append(item)
        else:
            for owner in item.owners:
                chosen[owner.metadata_dir] = owner
    while True:
        uncovered = [i for i in uncovered if not any(o.metadata_dir in chosen for o in i.owners)]
        if not uncovered:
            break
        counts: dict[str, int] = {}
        by_dir: dict[str, Distribution] = {}
        for item in uncovered:
            for owner in item.owners:
                counts[owner.metadata_dir] = counts.get(owner.metadata_dir, 0) + 1
                by_dir[owner.metadata_dir] = owner
        best = max(counts, key=lambda k: (counts[k], -len(by_dir[k].key), by_dir[k].key))
        chosen[best] = by_dir[best]
    return sorted(
        (d for d in chosen.values() if not d.external and not d.site.inherited),
        key=lambda d: d.key,
    )


def uninstall_step(dist: Distribution, target: Target, reason: str = "") -> Step:
    return Step(
        "uninstall", uninstall_argv(dist, target), dist.name, dist.version, dist, None, reason
    )


def reinstall_step(dist: Distribution, target: Target, reason: str = "") -> Step:
    return Step(
        "reinstall", reinstall_argv(dist, target), dist.name, dist.version, dist, None, reason
    )


def plan_uninstall(
    env: Environment,
    disk: Disk,
    names: Sequence[str],
    libraries: LoaderContext | None = None,
) -> Plan:
    """``pip uninstall NAME...`` predicted: removal set, co-owned files, new findings, repair."""
    dists: list[Distribution] = []
    for name in names:
        dist = find_distribution(env, name)
        if all(d.metadata_dir != dist.metadata_dir for d in dists):
            dists.append(dist)
    leaving = {d.metadata_dir for d in dists}
    before = run_checks(env, disk, None, libraries)
    sim = Simulation(env, disk, libraries)
    removals = [sim.uninstall(d) for d in dists]
    co_owned = [c for r in removals for c in _co_owned(r, env, leaving)]
    diff = diff_findings(before, sim.findings())
    notes = _uninstall_notes(env, removals)
    repair: list[Step] = []
    after_repair: tuple[Finding, ...] | None = None
    if any(f.severity >= Severity.ERROR for f in diff.new):
        owners = _choose_repairs(co_owned, env)
        if owners:
            for owner in owners:
                sim.reinstall(owner)
                paths = sum(1 for c in co_owned if owner in c.owners)
                repair.append(
                    reinstall_step(
                        owner,
                        env.target,
                        f"puts back {paths} co-owned file{'s' if paths != 1 else ''}",
                    )
                )
            after_repair = diff_findings(before, sim.findings()).new
    return Plan(
        action="uninstall",
        target=env.target,
        subjects=tuple(d.display for d in dists),
        steps=tuple(uninstall_step(d, env.target) for d in dists),
        removals=tuple(removals),
        co_owned=tuple(co_owned),
        new=diff.new,
        resolved=diff.resolved,
        repair=tuple(repair),
        after_repair=after_repair,
        notes=tuple(notes),
        distributions=len(env.distributions),
        files=len(env.claims),
        before=tuple(before),
    )


def _is_venv(target: Target) -> bool:
    return os.path.isfile(os.path.join(target.prefix, "pyvenv.cfg"))


def _uninstall_notes(env: Environment, removals: Sequence[Removal]) -> list[str]:
    notes = []
    for removal in removals:
        if removal.outside:
            where = (
                "pip refuses to touch them inside a virtual environment"
                if _is_venv(env.target)
                else "outside a virtual environment pip deletes them"
            )
            notes.append(
                f"{removal.dist.display}: RECORD names {len(removal.outside)} path(s) outside "
                f"the prefix (first: {removal.outside[0]}); {where}. libdoctor never follows them."
            )
        if removal.absent:
            notes.append(
                f"{removal.dist.display}: {len(removal.absent)} RECORD path(s) already gone "
                "from disk: nothing to delete there."
            )
        dupes = [
            d
            for d in env.distributions
            if d.key == removal.dist.key and d.metadata_dir != removal.dist.metadata_dir
        ]
        if dupes:
            notes.append(
                f"{removal.dist.name} has {len(dupes) + 1} metadata directories; pip uninstalls "
                f"one per run (planned: {removal.dist.metadata_dir})."
            )
    return notes


def plan_install(
    env: Environment,
    disk: Disk,
    wheels: Sequence[WheelFile],
    libraries: LoaderContext | None = None,
) -> Plan:
    """``pip install WHEEL...`` predicted: overwrites of other distributions' files, and the
    new findings of the environment with the wheels installed."""
    before = run_checks(env, disk, None, libraries)
    sim = Simulation(env, disk, libraries)
    removals: list[Removal] = []
    overwrites: list[Overwrite] = []
    notes: list[str] = []
    installer = _target_installer(env)
    for wheel in wheels:
        replaced = [d for d in sim.env.distributions if d.key == wheel.key and not d.site.inherited]
        if any(d.version == wheel.version for d in replaced):
            notes.append(
                f"{wheel.display} is already installed: pip would do nothing "
                "(--force-reinstall would rewrite its files)"
            )
            continue
        for old in replaced:
            removals.append(sim.uninstall(old))
            notes.append(
                f"{wheel.display} replaces the installed {old.display} (pip uninstalls it first)"
            )
        dist, files = wheel_distribution(wheel, env.target, installer)
        for path, entry in files.items():
            claims = sim.env.claims.get(path, ())
            if claims:
                identical = all(c.entry.hash == entry.hash for c in claims) and bool(entry.hash)
                owners = tuple({c.dist.metadata_dir: c.dist for c in claims}.values())
                overwrites.append(Overwrite(path, wheel.display, owners, identical))
            elif _exists(sim.disk, path) and os.path.dirname(path) != dist.metadata_dir:
                overwrites.append(Overwrite(path, wheel.display, (), False))
        sim.write(dist, files)
    diff = diff_findings(before, sim.findings())
    return Plan(
        action="install",
        target=env.target,
        subjects=tuple(w.display for w in wheels),
        steps=(),
        removals=tuple(removals),
        overwrites=tuple(overwrites),
        new=diff.new,
        resolved=diff.resolved,
        notes=tuple(notes),
        distributions=len(env.distributions),
        files=len(env.claims),
        before=tuple(before),
    )


def _target_installer(env: Environment) -> str:
    installers = [d.installer.lower() for d in env.distributions if d.installer]
    return "uv" if installers and installers.count("uv") > len(installers) // 2 else "pip"
