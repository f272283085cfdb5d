"""The environment model: distributions, and every RECORD path joined to its owners."""

from __future__ import annotations

import os
from collections.abc import ItemsView, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar, overload

from libdoctor.environment.distributions import Distribution, scan_target
from libdoctor.environment.record import RecordEntry
from libdoctor.environment.rooted import HOST, Rooted
from libdoctor.environment.target import Target

_T = TypeVar("_T")


class Claim(NamedTuple):
    """A distribution's RECORD says it installed ``path`` (absolute, normalised).

    A NamedTuple for the same reason as RecordEntry: one per file, built on every run.
    """

    dist: Distribution
    entry: RecordEntry
    path: str


class Claims(Mapping[str, tuple[Claim, ...]]):
    """Every claimed path -> its claims, in distribution scan order.

    A path only one distribution claims (nearly every path) is kept as its Claim alone, not
    in a tuple of one: 48 bytes a file, 48 MB in a million. What it answers is a tuple all
    the same.
    """

    __slots__ = ("_paths", "_shared")

    def __init__(self, paths: dict[str, Claim | tuple[Claim, ...]]) -> None:
        self._paths = paths
        self._shared: dict[str, tuple[Claim, ...]] | None = None

    def __getitem__(self, path: str) -> tuple[Claim, ...]:
        found = self._paths[path]
        return (found,) if type(found) is Claim else found  # type: ignore[return-value]

    @overload
    def get(self, path: str, /) -> tuple[Claim, ...] | None: ...

    @overload
    def get(self, path: str, default: tuple[Claim, ...] | _T, /) -> tuple[Claim, ...] | _T: ...

    def get(self, path: str, default: object = None, /) -> object:
        found = self._paths.get(path)
        if found is None:
            return default
        return (found,) if type(found) is Claim else found

    def __contains__(self, path: object) -> bool:
        return path in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def items(self) -> ItemsView[str, tuple[Claim, ...]]:
        return _ClaimItems(self)

    def shared(self) -> Mapping[str, tuple[Claim, ...]]:
        """The paths more than one claim names, in the same order: what the checks of
        shared paths look at, without a step per path of the others."""
        if self._shared is None:
            self._shared = {p: c for p, c in self._paths.items() if type(c) is not Claim}  # type: ignore[misc]
        return self._shared


class _ClaimItems(ItemsView[str, tuple[Claim, ...]]):
    _mapping: Claims

    def __iter__(self) -> Iterator[tuple[str, tuple[Claim, ...]]]:
        for path, found in self._mapping._paths.items():
            yield path, ((found,) if type(found) is Claim else found)  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class EscapingPath:
    """A RECORD path that leaves the prefix: reported, never stat'ed, read or deleted.

    It leaves either as written (``../../../etc/x``) or through LINK, a symlinked directory
    inside the prefix whose real location is outside it (``evil_link/victim``).
    """

    dist: Distribution
    entry: RecordEntry
    path: str
    link: str | None = None


@dataclass(frozen=True, slots=True)
class Environment:
    target: Target
    distributions: tuple[Distribution, ...]
    claims: Mapping[str, tuple[Claim, ...]]  # path -> claims, in distribution scan order
    escaping: tuple[EscapingPath, ...]
    by_dist: Mapping[str, tuple[Claim, ...]]  # metadata_dir -> that distribution's claims
    # a script libdoctor's guard wrapped -> the original it keeps: judged in its stead
    stand_ins: Mapping[str, str] = field(default_factory=dict)

    def claims_of(self, dist: Distribution) -> tuple[Claim, ...]:
        return self.by_dist.get(dist.metadata_dir, ())

    def owners(self, path: str) -> tuple[Distribution, ...]:
        return tuple(c.dist for c in self.claims.get(path, ()))

    def shared_claims(self) -> Mapping[str, tuple[Claim, ...]]:
        """``claims`` of the paths more than one claim names, in the same order."""
        if isinstance(self.claims, Claims):
            return self.claims.shared()
        return {path: claims for path, claims in self.claims.items() if len(claims) > 1}


GUARD_DIR = ".libdoctor-guard"  # where `libdoctor guard install` keeps a bin/ dir's originals
GUARD_MARKER = b"# libdoctor guard wrapper"  # on the second line of each wrapper it writes


def guard_stand_ins(prefixes: Iterable[str], files: Rooted = HOST) -> dict[str, str]:
    """``bin/pip`` -> ``bin/.libdoctor-guard/pip`` for each script the guard wrapped (and
    that is still its wrapper: a pip that rewrote its script is judged as it is). One
    ``stat`` per prefix when nothing is guarded. FILES: the system they are read in."""
    out: dict[str, str] = {}
    for prefix in prefixes:
        bin_dir = os.path.join(prefix, "bin")
        guard = os.path.join(bin_dir, GUARD_DIR)
        if not files.isdir(guard):
            continue
        for name in files.listdir(guard):
            wrapper = os.path.join(bin_dir, name)
            try:
                with files.open(wrapper, "rb") as handle:
                    head = handle.read(512)
            except OSError:
                continue
            if GUARD_MARKER in head and files.lexists(os.path.join(guard, name)):
                out[wrapper] = os.path.join(guard, name)
    return out


def is_inside(path: str, root: str) -> bool:
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root + os.sep) or root == os.sep


def resolve_entry(dist: Distribution, entry: RecordEntry) -> str:
    """Absolute path of a RECORD entry, normalised textually (like pip's uninstall does)."""
    path = entry.path
    if is_plain(path):
        return dist.base_dir + os.sep + path  # the common case, without normpath's cost
    return os.path.normpath(os.path.join(dist.base_dir, path))


def is_plain(path: str) -> bool:
    """True when ``base + "/" + path`` already equals ``normpath(join(base, path))``.

    Substring tests, not a regex: this runs once per RECORD row (22k in a torch env).
    """
    return not (
        os.sep != "/"
        or path.startswith(("/", "."))
        or "/." in path
        or "//" in path
        or path.endswith("/")
        or "\\" in path
        or "\0" in path
    )


def _moved_by_pip_target(dist: Distribution, path: str) -> str | None:
    """Where ``pip install --target DIR`` put a RECORD row that names ``../../X``.

    pip installs into a temporary home scheme (purelib ``<home>/lib/python``) and moves every
    item of ``<home>`` into DIR; RECORD keeps the rows as written for that scheme, so
    ``../../bin/tool`` is ``DIR/bin/tool``. Only for a bare directory target (its prefix
    is the site dir itself); the result must still lie inside DIR.
    """
    if dist.site.prefix != dist.site.path or not path.startswith("../../"):
        return None
    moved = os.path.normpath(os.path.join(dist.site.path, path[len("../../") :]))
    return moved if is_inside(moved, dist.site.prefix) else None


class RealParents:
    """Where each directory really is, one ``lstat`` per directory below a real prefix.

    A RECORD path is inside its prefix only when its parent's real location is: pip deletes
    through a symlinked directory, and so would a rollback write through one. Directories that
    do not exist (yet) are taken as written. Not a value: it caches what the disk said.
    """

    def __init__(self, files: Rooted = HOST) -> None:
        self._known: dict[str, tuple[str, str | None]] = {}
        self._real: dict[str, str] = {}
        self._files = files

    def escape(self, path: str, prefix: str) -> str | None:
        """The symlinked directory through which PATH (inside PREFIX as written) leaves the
        prefix's real location, or None."""
        real = self._real.get(prefix)
        if real is None:
            real = self._real[prefix] = self._files.realpath(prefix)
        return self._resolve(os.path.dirname(path), prefix, real)[1]

    def _resolve(self, directory: str, prefix: str, real: str) -> tuple[str, str | None]:
        """(real location of DIRECTORY, the link it leaves PREFIX through, if it does)."""
        known = self._known.get(directory)
        if known is not None:
            return known
        if directory == prefix or not is_inside(directory, prefix):
            found: tuple[str, str | None] = (self._files.realpath(directory), None)
        else:
            parent_real, link = self._resolve(os.path.dirname(directory), prefix, real)
            here = os.path.join(parent_real, os.path.basename(directory))
            if link is None and self._files.islink(here):
                here = self._files.realpath(here)
                if not is_inside(here, real):
                    link = directory
            found = (here, link)
        self._known[directory] = found
        return found


def _has_symlinked_dir(claims: list[Claim], prefix: str, checked: set[str], files: Rooted) -> bool:
    """Whether any directory holding a claimed path, or one above it inside PREFIX, is a
    symlink: one ``lstat`` per directory, the common answer (no) without a per-path step.
    CHECKED holds the directories already found not to be links (shared by every
    distribution of one model: ``nvidia/`` is looked at once, not once per wheel)."""
    dirs = {c.path.rpartition(os.sep)[0] for c in claims} - checked
    todo = list(dirs)
    while todo:  # the directories between each one and the prefix, once each
        parent = todo.pop().rpartition(os.sep)[0]
        fresh = parent not in dirs and parent not in checked and parent != prefix
        if fresh and is_inside(parent, prefix):
            dirs.add(parent)
            todo.append(parent)
    islink = os.path.islink if files.is_host else files.islink
    if any(islink(d) for d in dirs if d != prefix):
        return True
    checked |= dirs
    return False


def _split_escaping(
    claims: list[Claim], prefix: str, parents: RealParents, left: dict[str, str | None]
) -> tuple[list[Claim], list[EscapingPath]]:
    """(claims whose real parent is inside PREFIX, those leaving it through a link)."""
    own: list[Claim] = []
    escaping: list[EscapingPath] = []
    for claim in claims:
        parent = claim.path[: claim.path.rfind(os.sep)]
        link = left.get(parent, "")  # "": not seen yet (a link is never "")
        if link == "":
            link = left[parent] = parents.escape(claim.path, prefix)
        if link is not None:
            escaping.append(EscapingPath(claim.dist, claim.entry, claim.path, link))
        else:
            own.append(claim)
    return own, escaping


def build_environment(
    target: Target, distributions: list[Distribution] | None = None
) -> Environment:
    dists = tuple(scan_target(target) if distributions is None else distributions)
    claims: dict[str, Claim | tuple[Claim, ...]] = {}
    by_dist: dict[str, tuple[Claim, ...]] = {}
    escaping: list[EscapingPath] = []
    files = Rooted(target.root)
    parents = RealParents(files)
    checked: dict[str, set[str]] = {}  # prefix -> its directories known not to be links
    left: dict[str, str | None] = {}  # parent directory -> the link it leaves through
    new = tuple.__new__  # Claim(...) without the Python-level __new__ frame: 22k calls
    plain = is_plain
    for dist in dists:
        if dist.record is None:
            continue
        prefix = dist.site.prefix
        base = dist.base_dir + os.sep
        own: list[Claim] = []
        unplain = dist.record.unplain
        for entry in dist.record.entries:
            if entry.path not in unplain if unplain is not None else plain(entry.path):
                path = base + entry.path  # inside base_dir, so textually inside the prefix
            else:
                path = resolve_entry(dist, entry)
                if not is_inside(path, prefix):
                    path = _moved_by_pip_target(dist, entry.path) or path
                if not is_inside(path, prefix):
                    escaping.append(EscapingPath(dist, entry, path))
                    continue
            own.append(new(Claim, (dist, entry, path)))
        if _has_symlinked_dir(
            own, prefix, checked.setdefault(prefix, set()), files
        ):  # rare: then every path is checked precisely
            own, through = _split_escaping(own, prefix, parents, left)
            escaping += through
        for claim in own:
            known = claims.get(claim.path)
            if known is None:
                claims[claim.path] = claim
            else:
                claims[claim.path] = (known, claim) if type(known) is Claim else (*known, claim)
        by_dist[dist.metadata_dir] = tuple(own)
    return Environment(
        target=target,
        distributions=dists,
        claims=Claims(claims),
        escaping=tuple(escaping),
        by_dist=by_dist,
        stand_ins=guard_stand_ins({d.site.prefix for d in dists}, files),
    )
