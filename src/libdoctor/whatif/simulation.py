"""The environment as it *would be*: a disk view, pip's removal set, and a step-by-step simulation.

Nothing here writes anything. ``Overlay`` is a disk view in which the removed paths are gone
and the written ones hold the bytes their RECORD describes; ``Simulation`` applies uninstalls,
reinstalls and wheel writes one after the other to the model and such a view, and runs the same
checks as ``libdoctor check`` (``run_checks``) on the result.

The removal set is pip's own (``pip/_internal/req/req_uninstall.py``): every RECORD path that
exists, the ``.pyc``/``.pyo`` beside each listed ``.py`` and its ``__pycache__`` bytecode for the
target's interpreter, console scripts named in ``entry_points.txt``, and every directory whose
whole content is in the set (pip removes those as a unit). RECORD paths outside the prefix are
reported and never followed.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.analysis.run import run_checks
from libdoctor.disk.stat import MISSING, Disk, FileState
from libdoctor.environment.distributions import EMPTY_RECORD, Distribution
from libdoctor.environment.metadata import script_names
from libdoctor.environment.model import Environment, build_environment, is_inside
from libdoctor.environment.record import RecordEntry
from libdoctor.environment.target import Target
from libdoctor.errors import LibdoctorError
from libdoctor.external.installers import reinstall
from libdoctor.findings import Finding
from libdoctor.remedy import argv

if TYPE_CHECKING:
    from libdoctor.loader.extensions import LoaderContext

__all__ = ["Overlay", "Removal", "Simulation", "removal_set"]


_DIR = FileState(exists=True, is_file=False)


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


def _pyc_tag(target: Target) -> str | None:
    version = target.python_version
    return f"cpython-{version[0]}{version[1]}" if version else None


def _script_paths(dist: Distribution, target: Target) -> list[str]:
    """Console and GUI scripts from entry_points.txt, read as importlib.metadata reads it
    (pip removes them even without RECORD)."""
    try:
        with open(os.path.join(dist.metadata_dir, "entry_points.txt"), "rb") as f:
            text = f.read(_MAX_ENTRY_POINTS).decode("utf-8", "surrogateescape")
    except OSError:
        return []
    bindir = os.path.join(dist.site.prefix, "bin")
    return [os.path.join(bindir, name) for name in script_names(text) if os.sep not in name]


_MAX_ENTRY_POINTS = 16 << 20  # far beyond any real one (a few kB)


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
        if dist.record_error == EMPTY_RECORD:
            raise LibdoctorError(
                f"{dist.display} has {EMPTY_RECORD}: pip would remove none of its files "
                "(it lists none) and leave it installed; give it a RECORD first with "
                f"`{shlex.join(argv(reinstall(dist, env.target)))}`"
            )
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
        self.digests: dict[tuple[str, str], str | None] = {}
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
            if entry.hash:  # a written file holds the bytes its RECORD row describes
                self.digests[(path, entry.hash.partition("=")[0])] = entry.hash
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
