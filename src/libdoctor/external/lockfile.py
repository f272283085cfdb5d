"""Lock files read into values: PEP 751 ``pylock.toml``, uv's ``uv.lock``, and a
``requirements.txt`` of pins, each package with the source it is locked to.

``read_lock`` turns a file into a ``Lock`` (or raises ``LockfileError``, one line naming the
cause: not TOML, an unknown ``lock-version``, a ``--hash`` with no requirement, a line that
pins nothing). Which of its packages an environment must hold is ``lockselect.select``'s.

Every byte read here is untrusted and bounded: a lock, an include and a ``pyproject.toml``
must be regular files (no device, FIFO or directory; ``-`` reads standard input) of at most
``MAX_LOCK_BYTES``, together; ``-r`` includes nest at most ``MAX_INCLUDE_DEPTH`` deep, at most
``MAX_INCLUDED_FILES`` of them, and stay inside the lock's directory tree or a directory the
caller allows (``--allow-include``). A line of a file outside the lock's tree that does not
parse is named by file and line, never quoted.

A package's source is what its tool would install it from: an index (``registry``), a
``vcs`` checkout at a commit, a ``url`` archive, a local ``path`` archive, a ``directory``
(``editable`` when installed so). For uv.lock, the ``default-groups`` that ``uv sync`` uses
are read as uv reads them: ``[tool.uv] default-groups`` of the ``pyproject.toml`` beside the
lock (and beside each workspace member), else the lock's own copy (revision 5 writes it on
the project), else uv's default, ``dev``.

``installed_from`` reads the other side: what a dist-info keeps of the file it was installed
from (``direct_url.json``, WHEEL's tags).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from libdoctor.environment.distributions import canonicalize_name
from libdoctor.environment.metadata import parse_wheel_tags
from libdoctor.errors import LibdoctorError

__all__ = [
    "MAX_INCLUDED_FILES",
    "MAX_INCLUDE_DEPTH",
    "MAX_LOCK_BYTES",
    "Artifact",
    "DefaultGroups",
    "Edge",
    "Exclusion",
    "InstalledFrom",
    "Lock",
    "LockedPackage",
    "LockfileError",
    "Selection",
    "installed_from",
    "package_lines",
    "read_lock",
    "source_requirement",
    "wheel_tags",
]

MAX_LOCK_BYTES = 32 * 1024 * 1024
"""The bytes one lock may span, its includes and pyproject.toml files together (the largest
real uv.lock seen, a 400-package workspace, is under 2 MiB)."""
MAX_INCLUDE_DEPTH = 32
"""How deep ``-r`` includes may nest (pip-compile writes one level)."""
MAX_INCLUDED_FILES = 256
"""How many files ``-r`` may bring in, all levels together."""

# Projects installed as themselves (uv's own package of a project): optional in the env.
_ROOT_SOURCES = ("editable", "virtual")
# A lock's default groups: the names, or "all" (uv's ``default-groups = "all"``).
DefaultGroups = tuple[str, ...] | Literal["all"]


class LockfileError(LibdoctorError):
    """The lock file cannot be read or does not apply to the target: nothing to verify."""


@dataclass(frozen=True, slots=True)
class Artifact:
    """One file or checkout the lock allows for a package."""

    kind: str  # "wheel" | "sdist" | "archive" | "vcs" | "directory"
    location: str  # URL or path as the lock writes it ("" when it names the file only)
    hashes: frozenset[str] = frozenset()  # "sha256:<hex>", lower case
    commit: str | None = None  # vcs only: the locked commit
    revision: str | None = None  # vcs only: the branch or tag asked for, when no commit is
    name: str = ""  # the file name, when the lock gives it apart from the location
    vcs: str = "git"  # vcs only: git, hg, svn, bzr
    subdirectory: str | None = None  # vcs and archives: the project inside
    editable: bool = False  # directory and vcs: installed editable

    @property
    def filename(self) -> str:
        return self.name or self.location.rstrip("/").rsplit("/", 1)[-1].split("#", 1)[0]


@dataclass(frozen=True, slots=True)
class Edge:
    """A uv.lock dependency edge: the package it names, under which marker, with which extras."""

    key: str
    marker: str | None = None
    extras: tuple[str, ...] = ()
    version: str | None = None


@dataclass(frozen=True, slots=True)
class LockedPackage:
    name: str
    key: str
    version: str | None  # None: the lock names no version (a directory, a URL requirement)
    source: str  # "registry", "url", "path", "directory", "editable", "virtual", "vcs"
    artifacts: tuple[Artifact, ...] = ()
    marker: str | None = None
    requires_python: str | None = None
    # uv.lock's graph
    dependencies: tuple[Edge, ...] = ()
    optional: Mapping[str, tuple[Edge, ...]] = field(default_factory=dict)
    groups: Mapping[str, tuple[Edge, ...]] = field(default_factory=dict)
    resolution_markers: tuple[str, ...] = ()
    root: bool = False  # the locked project itself
    member: bool = False  # a uv workspace member (the project is one)
    default_groups: DefaultGroups | None = None  # uv: what ``uv sync`` of this member takes
    # The index a registry package comes from, when the lock names one (uv.lock's
    # ``source = { registry = URL }``, pylock's ``index``): torch's +cpu build is only there.
    index: str | None = None
    extras: tuple[str, ...] = ()  # a requirements line's ``name[x]``: installed with extra x

    @property
    def hashes(self) -> frozenset[str]:
        return frozenset(h for a in self.artifacts for h in a.hashes)

    @property
    def display(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name

    @property
    def local(self) -> bool:
        """Built from a local directory: no file to hash, no registry version to hold."""
        return self.source in ("directory", "editable", "virtual")


@dataclass(frozen=True, slots=True)
class Lock:
    path: str
    format: str  # "pylock.toml" | "uv.lock" | "requirements.txt"
    packages: tuple[LockedPackage, ...]
    created_by: str | None = None
    requires_python: str | None = None
    environments: tuple[str, ...] = ()
    default_groups: DefaultGroups = ()  # pylock's; a uv workspace root's without a project
    notes: tuple[str, ...] = ()  # lines of a requirements file left aside, and why
    base: str = ""  # the directory relative paths in the lock are relative to
    extras: tuple[str, ...] = ()  # pylock: the extras it was locked with
    dependency_groups: tuple[str, ...] = ()  # pylock: the groups it was locked with
    # uv.lock's [manifest] of a workspace whose root is no project
    requirements: tuple[Edge, ...] = ()
    manifest_groups: Mapping[str, tuple[Edge, ...]] = field(default_factory=dict)
    conflicts: bool = False  # uv.lock declares conflicting extras or groups

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(p.key for p in self.packages)


@dataclass(frozen=True, slots=True)
class Exclusion:
    package: LockedPackage
    why: str  # "python_version < '3.10'" does not hold here


@dataclass(frozen=True, slots=True)
class Selection:
    """What the lock asks of this environment."""

    required: tuple[LockedPackage, ...]
    excluded: tuple[Exclusion, ...]
    optional: tuple[LockedPackage, ...] = ()  # the project itself: fine either way
    notes: tuple[str, ...] = ()
    chosen: str = ""  # the extras and groups taken, said once ("groups dev, docs")
    # key -> the extras a package is installed with (uv.lock's edges ``A[x]``, a requirements
    # line's ``A[x]``, the project's --extra); none listed: only its base requirements
    extras: Mapping[str, frozenset[str]] = field(default_factory=dict)


# --------------------------------------------------------------------------- bounded input


@dataclass(slots=True)
class _Budget:
    """What one lock may still read: bytes and included files, all files together."""

    left: int = MAX_LOCK_BYTES
    files: int = MAX_INCLUDED_FILES


def _read_input(path: str, budget: _Budget, shown: str | None = None) -> bytes:
    """PATH's bytes, or ``-``'s (standard input), within BUDGET; a device, FIFO or directory
    is refused before a byte is read (``O_NONBLOCK``: a FIFO without a writer does not hang)."""
    if path == "-":
        return _within(sys.stdin.buffer.read(budget.left + 1), "standard input", budget)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise LockfileError(f"{shown or 'cannot read ' + path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LockfileError(
                f"{path} is {_kind(st.st_mode)}, not a regular file: libdoctor reads lock "
                "files, not devices or pipes (--lock - reads standard input)"
            )
        if st.st_size > budget.left:
            _over(path)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        return _within(handle.read(budget.left + 1), path, budget)


def _within(data: bytes, where: str, budget: _Budget) -> bytes:
    if len(data) > budget.left:
        _over(where)
    budget.left -= len(data)
    return data


def _over(where: str) -> None:
    raise LockfileError(
        f"{where}: the lock and its includes exceed MAX_LOCK_BYTES "
        f"({MAX_LOCK_BYTES // (1024 * 1024)} MiB)"
    )


def _kind(mode: int) -> str:
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a device"}
    kinds |= {stat.S_ISBLK: "a device", stat.S_ISSOCK: "a socket"}
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def _inside(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


# --------------------------------------------------------------------------- reading


def read_lock(path: str, allow_includes: Sequence[str] = ()) -> Lock:
    """PATH read as the lock format its name and contents say; a requirements file's ``-r``
    includes may come from the lock's directory tree and the ALLOW_INCLUDES directories."""
    budget = _Budget()
    data = _read_input(path, budget)
    name = os.path.basename(path) if path != "-" else ""
    base = os.path.dirname(os.path.abspath(path)) if path != "-" else os.getcwd()
    if not name:
        name = _name_by_content(data)
    if name.endswith(".lock") and name != "uv.lock" and not _looks_like_toml(data):
        return _requirements_lock(path, data, base, allow_includes, budget)
    if name.endswith((".toml", ".lock")):
        document = _toml(path, data)
        if "lock-version" in document or name.startswith("pylock."):
            return replace(_pylock(path, document), base=base)
        if "package" in document or name == "uv.lock":
            return _uv_lock(path, document, base, budget)
        raise LockfileError(
            f"{path} is neither a pylock.toml (no lock-version) nor a uv.lock (no [[package]])"
        )
    return _requirements_lock(path, data, base, allow_includes, budget)


def _name_by_content(data: bytes) -> str:
    """The file name standard input stands for: TOML with a lock-version or [[package]] is
    a pylock.toml or uv.lock, anything else a requirements file."""
    if not _looks_like_toml(data):
        return "requirements.txt"
    return "pylock.toml" if re.search(rb"^lock-version\s*=", data, re.M) else "uv.lock"


def _looks_like_toml(data: bytes) -> bool:
    """A table header or a ``key = value`` line (``six==1.0`` and ``--hash=`` are neither)."""
    return re.search(rb"^[ \t]*(\[|[A-Za-z0-9_][A-Za-z0-9_-]*[ \t]*=(?!=))", data, re.M) is not None


def _toml(path: str, data: bytes) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        document: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
        return document
    except UnicodeDecodeError as exc:
        raise LockfileError(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LockfileError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise LockfileError(
            f"{path}: its arrays or tables nest deeper than the TOML reader goes "
            "(Python's recursion limit)"
        ) from None


def _expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise LockfileError(f"{where} is {type(value).__name__}, expected {names}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_expect(v, str, where) for v in _expect(value, list, where))


def _hashes(value: Any, where: str) -> frozenset[str]:
    """PEP 751's ``{sha256 = "hex"}`` or uv's ``"sha256:hex"``, as "algo:hex" strings."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        algo, sep, digest = value.partition(":")
        if not sep:
            raise LockfileError(f"{where} {value!r} is not ALGORITHM:DIGEST")
        return frozenset({f"{algo.lower()}:{digest.lower()}"})
    table = _expect(value, dict, where)
    return frozenset(f"{k.lower()}:{str(v).lower()}" for k, v in table.items())


# --------------------------------------------------------------------------- pylock.toml


def _pylock(path: str, doc: dict[str, Any]) -> Lock:
    version = doc.get("lock-version")
    if version is None:
        raise LockfileError(f"{path}: no lock-version (a PEP 751 lock must say which)")
    if not isinstance(version, str) or not re.fullmatch(r"1(\.\d+)?", version):
        raise LockfileError(
            f"{path}: unknown lock-version {version!r} (libdoctor reads PEP 751 lock-version 1.x)"
        )
    packages = _expect(doc.get("packages", []), list, f"{path}: packages")
    return Lock(
        path=path,
        format="pylock.toml",
        packages=tuple(_pylock_package(path, i, p) for i, p in enumerate(packages)),
        created_by=_optional_str(doc, "created-by", path),
        requires_python=_optional_str(doc, "requires-python", path),
        environments=_strings(doc.get("environments", []), f"{path}: environments"),
        default_groups=_strings(doc.get("default-groups", []), f"{path}: default-groups"),
        extras=_strings(doc.get("extras", []), f"{path}: extras"),
        dependency_groups=_strings(doc.get("dependency-groups", []), f"{path}: dependency-groups"),
    )


def _optional_str(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    return None if value is None else str(_expect(value, str, f"{where}: {key}"))


def _pylock_package(path: str, index: int, raw: Any) -> LockedPackage:
    where = f"{path}: packages[{index}]"
    table = _expect(raw, dict, where)
    name = _expect(table.get("name"), str, f"{where}.name")
    artifacts: list[Artifact] = []
    for i, wheel in enumerate(_expect(table.get("wheels", []), list, f"{where}.wheels")):
        artifacts.append(_pylock_file("wheel", wheel, f"{where}.wheels[{i}]"))
    for kind in ("sdist", "archive"):
        if kind in table:
            artifacts.append(_pylock_file(kind, table[kind], f"{where}.{kind}"))
    source = "registry" if artifacts else "unknown"
    if "archive" in table:
        archive = _expect(table["archive"], dict, f"{where}.archive")
        source = "url" if archive.get("url") else "path"
    if "vcs" in table:
        vcs = _expect(table["vcs"], dict, f"{where}.vcs")
        location = str(vcs.get("url") or vcs.get("path") or "")
        artifacts.append(
            Artifact(
                "vcs",
                location,
                commit=_optional_str(vcs, "commit-id", f"{where}.vcs"),
                vcs=str(vcs.get("type") or "git"),
                subdirectory=_optional_str(vcs, "subdirectory", f"{where}.vcs"),
            )
        )
        source = "vcs"
    if "directory" in table:
        directory = _expect(table["directory"], dict, f"{where}.directory")
        editable = bool(directory.get("editable"))
        artifacts.append(Artifact("directory", str(directory.get("path", "")), editable=editable))
        source = "editable" if editable else "directory"
    return LockedPackage(
        name=name,
        key=canonicalize_name(name),
        version=_optional_str(table, "version", where),
        source=source,
        artifacts=tuple(artifacts),
        marker=_optional_str(table, "marker", where),
        requires_python=_optional_str(table, "requires-python", where),
        index=_optional_str(table, "index", where) if source == "registry" else None,
    )


def _pylock_file(kind: str, raw: Any, where: str) -> Artifact:
    table = _expect(raw, dict, where)
    location = table.get("url") or table.get("path") or ""
    hashes = _hashes(table.get("hashes"), f"{where}.hashes")
    return Artifact(
        kind,
        str(location),
        hashes,
        name=str(table.get("name") or ""),
        subdirectory=_optional_str(table, "subdirectory", where),
    )


# --------------------------------------------------------------------------- uv.lock


def _uv_lock(path: str, doc: dict[str, Any], base: str, budget: _Budget) -> Lock:
    version = doc.get("version")
    if version != 1:
        raise LockfileError(
            f"{path}: unknown uv.lock version {version!r} (libdoctor reads version = 1)"
        )
    packages = _expect(doc.get("package", []), list, f"{path}: package")
    manifest = _expect(doc.get("manifest", {}), dict, f"{path}: manifest")
    members = {canonicalize_name(m) for m in _strings(manifest.get("members", []), path)}
    read = [_uv_package(path, i, p, members) for i, p in enumerate(packages)]
    if not any(p.root for p in read) and members:
        # a workspace whose root has no project: uv syncs every member
        read = [replace(p, root=True) if p.key in members else p for p in read]
    notes: list[str] = []
    read = [_member_defaults(p, base, budget, notes) for p in read]
    root_defaults = _pyproject_defaults(os.path.join(base, "pyproject.toml"), budget)
    return Lock(
        path=path,
        format="uv.lock",
        packages=tuple(read),
        created_by="uv",
        requires_python=_optional_str(doc, "requires-python", path),
        default_groups=("dev",) if root_defaults is None else root_defaults,
        notes=tuple(notes),
        base=base,
        requirements=_edges(manifest.get("requirements", []), f"{path}: manifest.requirements"),
        manifest_groups=_edge_groups(manifest.get("dependency-groups", {}), f"{path}: manifest"),
        conflicts=bool(doc.get("conflicts")),
    )


def _uv_package(path: str, index: int, raw: Any, members: set[str]) -> LockedPackage:
    where = f"{path}: package[{index}]"
    table = _expect(raw, dict, where)
    name = _expect(table.get("name"), str, f"{where}.name")
    source_table = _expect(table.get("source", {}), dict, f"{where}.source")
    kind = next(iter(source_table), "registry")
    artifacts = [
        _uv_file("wheel", wheel, f"{where}.wheels[{i}]")
        for i, wheel in enumerate(_expect(table.get("wheels", []), list, f"{where}.wheels"))
    ]
    if "sdist" in table:
        artifacts.append(_uv_file("sdist", table["sdist"], f"{where}.sdist"))
    artifacts += _uv_source(kind, source_table, where)
    key = canonicalize_name(name)
    root = kind in _ROOT_SOURCES and source_table[kind] == "."
    return LockedPackage(
        name=name,
        key=key,
        version=_optional_str(table, "version", where),
        source={"git": "vcs"}.get(kind, kind),
        artifacts=tuple(artifacts),
        dependencies=_edges(table.get("dependencies", []), f"{where}.dependencies"),
        optional=_edge_groups(table.get("optional-dependencies", {}), where),
        groups=_edge_groups(table.get("dev-dependencies", {}), where),
        resolution_markers=_strings(table.get("resolution-markers", []), where),
        root=root,
        member=root or key in members,
        default_groups=_defaults_value(table.get("default-groups"), f"{where}.default-groups"),
        index=_registry_url(source_table.get("registry")) if kind == "registry" else None,
    )


def _registry_url(value: Any) -> str | None:
    """A registry's URL as uv.lock writes it; a local index's path is left aside."""
    return value if isinstance(value, str) and "://" in value else None


def _uv_source(kind: str, table: Mapping[str, Any], where: str) -> list[Artifact]:
    """The artifact a uv.lock ``source`` names beyond its wheels and sdist: a git checkout
    (``URL?rev=...&subdirectory=...#COMMIT``), an archive URL or path, a directory."""
    value = table.get(kind)
    if kind == "registry" or not isinstance(value, str):
        return []
    if kind == "git":
        url, _, commit = value.partition("#")
        url, _, query = url.partition("?")
        subdirectory = next(
            (v for k, _, v in (p.partition("=") for p in query.split("&")) if k == "subdirectory"),
            None,
        )
        return [Artifact("vcs", url, commit=commit or None, subdirectory=subdirectory)]
    if kind in ("url", "path"):
        location, _, fragment = value.partition("#")
        subdirectory = fragment.partition("subdirectory=")[2] or None
        return [Artifact("archive", location, subdirectory=subdirectory)]
    return [Artifact("directory", value, editable=kind == "editable")]


def _uv_file(kind: str, raw: Any, where: str) -> Artifact:
    table = _expect(raw, dict, where)
    location = table.get("url") or table.get("path") or ""
    hashes = _hashes(table.get("hash"), f"{where}.hash")
    return Artifact(kind, str(location), hashes, name=str(table.get("filename") or ""))


def _defaults_value(value: Any, where: str) -> DefaultGroups | None:
    """``default-groups``: a list of group names or ``"all"``; None where it is not set."""
    if value is None:
        return None
    if value == "all":
        return "all"
    if isinstance(value, str):
        raise LockfileError(f'{where} is {value!r}: a list of groups or "all"')
    return tuple(canonicalize_name(g) for g in _strings(value, where))


def _pyproject_defaults(path: str, budget: _Budget) -> DefaultGroups | None:
    """``[tool.uv] default-groups`` of the pyproject.toml at PATH; None when it has none
    (or there is no such file)."""
    if not os.path.lexists(path):
        return None
    document = _toml(path, _read_input(path, budget))
    tool = document.get("tool", {})
    uv = tool.get("uv", {}) if isinstance(tool, dict) else {}
    if not isinstance(uv, dict) or "default-groups" not in uv:
        return ("dev",)  # uv's own default, whatever the lock kept
    found = _defaults_value(uv["default-groups"], f"{path}: [tool.uv] default-groups")
    return ("dev",) if found is None else found


def _member_defaults(
    package: LockedPackage, base: str, budget: _Budget, notes: list[str]
) -> LockedPackage:
    """A workspace member's default groups as ``uv sync`` reads them: its pyproject.toml
    (inside the lock's tree) first, else what the lock keeps."""
    directory = next((a.location for a in package.artifacts if a.kind == "directory"), None)
    if not package.member or directory is None:
        return package
    pyproject = os.path.join(base, directory, "pyproject.toml")
    if not _inside(pyproject, [os.path.realpath(base)]):
        return package
    found = _pyproject_defaults(pyproject, budget)
    if found is None:
        return package
    if found == ("dev",):
        return replace(package, default_groups=found)
    shown = found if found == "all" else ", ".join(found) or "none"
    notes.append(f"{package.name}: default-groups {shown} (from {pyproject})")
    return replace(package, default_groups=found)


def _edges(raw: Any, where: str) -> tuple[Edge, ...]:
    edges = []
    for i, item in enumerate(_expect(raw, list, where)):
        table = _expect(item, dict, f"{where}[{i}]")
        name = _expect(table.get("name"), str, f"{where}[{i}].name")
        edges.append(
            Edge(
                key=canonicalize_name(name),
                marker=_optional_str(table, "marker", f"{where}[{i}]"),
                extras=tuple(canonicalize_name(e) for e in _strings(table.get("extra", []), where)),
                version=_optional_str(table, "version", f"{where}[{i}]"),
            )
        )
    return tuple(edges)


def _edge_groups(raw: Any, where: str) -> dict[str, tuple[Edge, ...]]:
    table = _expect(raw, dict, where)
    return {canonicalize_name(k): _edges(v, f"{where}.{k}") for k, v in table.items()}


# --------------------------------------------------------------------------- requirements.txt

# pip's comment rule: '#' at the start or after whitespace; a URL's '#sha256=' stays. Written
# with a lookbehind: '(^|\s+)#' backtracks over a long run of spaces (quadratic).
_COMMENT = re.compile(r"(?<!\S)#.*$")
_HASH = re.compile(r"--hash(?:=|\s+)(\S+)")
_OPTION = re.compile(r"^(-r|--requirement|-c|--constraint|-e|--editable)(?:=|\s+|(?=\S))(.*)$")
_LINE_OPTION = re.compile(r"(?<!\S)--?[a-z]")  # where a line's per-requirement options start
_VCS = ("git", "hg", "svn", "bzr")
_ARCHIVE = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar")


@dataclass(slots=True)
class _Reading:
    """One requirements lock being read: where includes may come from, what was seen."""

    roots: list[str]  # real paths of the directories includes may come from
    tree: str  # the lock's own directory: lines of files outside it are never quoted
    budget: _Budget
    packages: list[LockedPackage] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, line) with ``\\`` continuations joined and comments removed."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        line = _COMMENT.sub("", raw).rstrip()
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(part.strip() for part in pending).strip()
        pending = []
        if joined:
            yield start, joined
    if pending and " ".join(pending).strip():
        yield start, " ".join(part.strip() for part in pending).strip()


def _requirements_lock(
    path: str, data: bytes, base: str, allow: Sequence[str], budget: _Budget
) -> Lock:
    tree = os.path.realpath(base)
    reading = _Reading([tree, *(os.path.realpath(a) for a in allow)], tree, budget)
    _read_requirements(path, data, reading, depth=0)
    if not reading.packages:
        raise LockfileError(f"{path}: no pinned requirement (name==version) in it")
    return Lock(
        path=path,
        format="requirements.txt",
        packages=tuple(reading.packages),
        notes=tuple(reading.notes),
        base=base,
    )


def _read_requirements(path: str, data: bytes, reading: _Reading, depth: int) -> None:
    real = os.path.realpath(path) if path != "-" else "-"
    if real in reading.seen:
        return
    reading.seen.add(real)
    quoted = path == "-" or _inside(path, [reading.tree])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LockfileError(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    here = os.path.dirname(os.path.abspath(path)) if path != "-" else os.getcwd()
    for number, line in _logical_lines(text):
        where = f"{path}:{number}"
        option = _OPTION.match(line)
        if option is not None:
            _requirement_option(here, where, option[1], option[2].strip(), reading, depth)
        elif line.startswith("-"):
            if _HASH.match(line):
                raise LockfileError(f"{where}: --hash without a requirement before it")
            flag = line.split()[0] if quoted else "an option"
            reading.notes.append(f"{where}: {flag} left aside")
        else:
            package = _pinned(where, line, here, quoted, reading)
            if package is not None:
                reading.packages.append(package)


def _requirement_option(
    here: str, where: str, flag: str, value: str, reading: _Reading, depth: int
) -> None:
    if flag in ("-c", "--constraint"):
        reading.notes.append(f"{where}: a constraints file left aside (constraints pin nothing)")
        return
    if flag in ("-e", "--editable"):
        package = _editable(where, value, here, reading)
        if package is not None:
            reading.packages.append(package)
        return
    _include(here, where, value, reading, depth + 1)


def _include(here: str, where: str, value: str, reading: _Reading, depth: int) -> None:
    """``-r VALUE`` (relative to the including file), read when it is a regular file inside
    the allowed directories, within the depth and file limits."""
    if depth > MAX_INCLUDE_DEPTH:
        raise LockfileError(
            f"{where}: -r includes nest deeper than MAX_INCLUDE_DEPTH ({MAX_INCLUDE_DEPTH})"
        )
    if "://" in value:
        raise LockfileError(f"{where}: -r of a URL: libdoctor reads local files only")
    included = os.path.join(here, value)
    if not _inside(included, reading.roots):
        raise LockfileError(
            f"{where}: -r {value} is outside the lock's directory {reading.tree}; name its "
            "directory with --allow-include to read it"
        )
    if os.path.realpath(included) in reading.seen:
        return
    reading.budget.files -= 1
    if reading.budget.files < 0:
        raise LockfileError(
            f"{where}: more than MAX_INCLUDED_FILES ({MAX_INCLUDED_FILES}) -r files"
        )
    data = _read_input(included, reading.budget, f"{where}: cannot read {value}")
    _read_requirements(included, data, reading, depth)


def _pinned(
    where: str, line: str, here: str, quoted: bool, reading: _Reading
) -> LockedPackage | None:
    from packaging.requirements import InvalidRequirement, Requirement

    hashes = frozenset(h for found in _HASH.findall(line) for h in _hashes(found, where))
    text = _HASH.sub("", line)
    start = _LINE_OPTION.search(text)
    text = (text[: start.start()] if start else text).strip()  # other per-line options
    if _looks_like_location(text):
        package = _unnamed(where, text, here, False, reading)
        if package is None:
            return None
        return replace(package, artifacts=_with_hashes(package.artifacts, hashes))
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        why = str(exc).splitlines()[0] if quoted else "not a requirement"
        shown = f"{_clipped(text)!r} " if quoted else ""
        raise LockfileError(f"{where}: {shown}does not parse: {why}") from None
    marker = str(req.marker) if req.marker is not None else None
    extras = tuple(sorted(canonicalize_name(e) for e in req.extras))
    if req.url:
        package = _located(req.name, req.url, here, editable=False)
        artifacts = _with_hashes(package.artifacts, hashes)
        return replace(package, marker=marker, artifacts=artifacts, extras=extras)
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        shown = _clipped(text) if quoted else "its requirement"
        raise LockfileError(f"{where}: {shown} pins no version (a lock needs name==version)")
    artifacts = (Artifact("wheel", "", hashes),) if hashes else ()
    key = canonicalize_name(req.name)
    return LockedPackage(
        req.name, key, specs[0].version, "registry", artifacts, marker, extras=extras
    )


def _clipped(text: str, width: int = 80) -> str:
    """TEXT as an error quotes it: one short line, however long the line in the file."""
    return text if len(text) <= width else f"{text[:width]}..."


def _with_hashes(artifacts: tuple[Artifact, ...], hashes: frozenset[str]) -> tuple[Artifact, ...]:
    """The --hash options (and a URL's ``#sha256=``) on the archive a line names."""
    out = []
    for artifact in artifacts:
        fragment = re.search(r"#sha256=([0-9a-fA-F]{64})", artifact.location)
        found = hashes | ({f"sha256:{fragment[1].lower()}"} if fragment else set())
        out.append(replace(artifact, hashes=artifact.hashes | found))
    return tuple(out)


def _looks_like_location(text: str) -> bool:
    """A requirement line that is a path or URL, not ``name ...`` (pip reads both)."""
    head = text.split(";", 1)[0].strip()
    if re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[|@|[<>=!~;]|$)", head):
        return False
    return "/" in head or head.startswith(".") or "://" in head


def _editable(where: str, value: str, here: str, reading: _Reading) -> LockedPackage | None:
    return _unnamed(where, value, here, True, reading)


def _unnamed(
    where: str, value: str, here: str, editable: bool, reading: _Reading
) -> LockedPackage | None:
    """A line that names a location (``-e .``, ``./pkg``, ``git+URL#egg=name``, a wheel URL):
    its name from ``#egg=``, the wheel's file name, or the directory's pyproject.toml; left
    aside with a note when none says."""
    location = value.split(";", 1)[0].strip()
    name = _egg(location) or _wheel_name(location) or _project_name(location, here, reading)
    if name is None:
        shown = "an editable" if editable else "a location"
        reading.notes.append(f"{where}: {shown} with no name (#egg=) left aside")
        return None
    return _located(name, location, here, editable=editable)


def _egg(location: str) -> str | None:
    found = re.search(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)", location)
    return found[1] if found else None


def _wheel_name(location: str) -> str | None:
    filename = location.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return filename.split("-", 1)[0] if filename.endswith(".whl") and "-" in filename else None


def _project_name(location: str, here: str, reading: _Reading) -> str | None:
    """``[project] name`` of a local directory's pyproject.toml, read only inside the
    allowed directories."""
    directory = _local_path(location, here)
    if directory is None:
        return None
    pyproject = os.path.join(directory, "pyproject.toml")
    if not os.path.isfile(pyproject) or not _inside(pyproject, reading.roots):
        return None
    project = _toml(pyproject, _read_input(pyproject, reading.budget)).get("project")
    name = project.get("name") if isinstance(project, dict) else None
    return name if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9._-]+", name) else None


def _local_path(location: str, here: str) -> str | None:
    """The absolute path a ``file:`` URL or a plain path names; None for other URLs."""
    from urllib.parse import unquote, urlsplit

    location = location.split("#", 1)[0]
    if location.startswith("file:"):
        return unquote(urlsplit(location).path)
    if "://" in location or location.startswith(tuple(f"{v}+" for v in _VCS)):
        return None
    return os.path.normpath(os.path.join(here, location))


def _located(name: str, url: str, here: str, *, editable: bool) -> LockedPackage:
    """A package locked to a location: a VCS checkout (``git+URL@REV#subdirectory=``), an
    archive (URL or file), or a directory."""
    key = canonicalize_name(name)
    vcs, sep, rest = url.partition("+")
    if sep and vcs in _VCS and "://" in rest:
        body, _, fragment = rest.partition("#")
        location, rev = body, None
        if "@" in body.rsplit("/", 1)[-1]:
            location, _, rev = body.rpartition("@")
        commit = rev if rev and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", rev) else None
        subdirectory = re.search(r"subdirectory=([^&]+)", fragment)
        artifact = Artifact(
            "vcs",
            location,
            commit=commit,
            revision=None if commit else rev,
            vcs=vcs,
            subdirectory=subdirectory[1] if subdirectory else None,
            editable=editable,
        )
        return LockedPackage(name, key, None, "vcs", (artifact,))
    path = _local_path(url, here)
    if path is not None and not path.endswith(_ARCHIVE):
        directory = Artifact("directory", path, editable=editable)
        return LockedPackage(name, key, None, "editable" if editable else "directory", (directory,))
    source = "path" if path is not None else "url"
    return LockedPackage(name, key, None, source, (Artifact("archive", path or url),))


# --------------------------------------------------------------------------- the locked source


def source_requirement(package: LockedPackage, base: str) -> str | None:
    """What installs PACKAGE from the source its lock names: ``NAME @ git+URL@COMMIT``,
    ``NAME @ URL``, ``NAME @ file:///PATH``; None for an index package (``NAME==VERSION``
    is the caller's) or when the lock says too little."""
    from urllib.parse import quote

    for artifact in package.artifacts:
        if artifact.kind == "vcs" and artifact.location:
            url = artifact.location
            if "://" not in url:
                url = "file://" + quote(os.path.abspath(os.path.join(base, url)))
            rev = artifact.commit or artifact.revision
            rev = f"@{rev}" if rev else ""
            sub = f"#subdirectory={artifact.subdirectory}" if artifact.subdirectory else ""
            return f"{package.name} @ {artifact.vcs}+{url}{rev}{sub}"
    for artifact in package.artifacts:
        if artifact.kind in ("archive", "directory") and artifact.location:
            if "://" in artifact.location:
                return f"{package.name} @ {artifact.location}"
            path = os.path.abspath(os.path.join(base, artifact.location))
            return f"{package.name} @ file://{quote(path)}"
    return None


# --------------------------------------------------------------------------- installed artifact


@dataclass(frozen=True, slots=True)
class InstalledFrom:
    """What a dist-info says about the artifact it was installed from."""

    url: str | None = None  # direct_url.json's url
    kind: str | None = None  # "archive" | "directory" | "vcs" | None (from an index)
    hashes: frozenset[str] = frozenset()  # archive_info hashes, "sha256:<hex>"
    commit: str | None = None  # vcs_info.commit_id
    editable: bool = False
    tags: tuple[str, ...] = ()  # WHEEL's Tag lines: the wheel that was installed


MAX_DIRECT_URL = 1 << 20
"""A ``direct_url.json`` larger than this is no evidence (pip's are a few hundred bytes)."""


def installed_from(metadata_dir: str) -> InstalledFrom:
    """Read ``direct_url.json`` (PEP 610; pip writes archive hashes for URL and file
    installs, uv writes none) and WHEEL's tags; unreadable or malformed: no evidence.

    As pip reads it (``DirectUrl.from_json``): UTF-8 text (a BOM or UTF-16 is malformed), a
    string ``url``, exactly one of ``archive_info``/``dir_info``/``vcs_info``, and for
    ``vcs_info`` string ``vcs`` and ``commit_id``; anything else, pip says "no direct URL".
    """
    import json

    tags = tuple(_wheel_tags(os.path.join(metadata_dir, "WHEEL")))
    try:
        with open(os.path.join(metadata_dir, "direct_url.json"), "rb") as handle:
            raw = handle.read(MAX_DIRECT_URL + 1)
        document = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_DIRECT_URL else None
    except (OSError, ValueError, RecursionError):
        return InstalledFrom(tags=tags)
    if not isinstance(document, dict) or not isinstance(document.get("url"), str):
        return InstalledFrom(tags=tags)
    url = document["url"]
    kinds = [k for k in ("archive_info", "dir_info", "vcs_info") if k in document]
    info = document.get(kinds[0]) if len(kinds) == 1 else None
    if not isinstance(info, dict):
        return InstalledFrom(tags=tags)
    if kinds[0] == "vcs_info" and not (
        isinstance(info.get("vcs"), str) and isinstance(info.get("commit_id"), str)
    ):
        return InstalledFrom(tags=tags)
    return _from_info(kinds[0], info, url, tags)


def _from_info(
    kind: str, info: dict[str, Any], url: str | None, tags: tuple[str, ...]
) -> InstalledFrom:
    if kind == "dir_info":
        return InstalledFrom(url, "directory", editable=bool(info.get("editable")), tags=tags)
    if kind == "vcs_info":
        commit = info.get("commit_id")
        return InstalledFrom(url, "vcs", commit=commit if isinstance(commit, str) else None)
    hashes: set[str] = set()
    if isinstance(info.get("hashes"), dict):
        hashes |= {f"{k.lower()}:{str(v).lower()}" for k, v in info["hashes"].items()}
    legacy = info.get("hash")
    if isinstance(legacy, str) and "=" in legacy:  # the deprecated "sha256=<hex>" form
        algo, _, digest = legacy.partition("=")
        hashes.add(f"{algo.lower()}:{digest.lower()}")
    return InstalledFrom(url, "archive", frozenset(hashes), tags=tags)


def _wheel_tags(path: str) -> Iterator[str]:
    """WHEEL's Tag headers, as email reads them (the body after a blank line is not)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_DIRECT_URL).decode("utf-8", "replace")
    except OSError:
        return
    yield from parse_wheel_tags(text)


def wheel_tags(filename: str) -> frozenset[str]:
    """The tags a wheel file name stands for (``py2.py3-none-any`` is two); none for a
    name that is not a wheel's."""
    if not filename.endswith(".whl"):
        return frozenset()
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return frozenset()
    pythons, abis, platforms = parts[-3:]
    return frozenset(
        f"{p}-{a}-{x}"
        for p in pythons.split(".")
        for a in abis.split(".")
        for x in platforms.split(".")
    )


_TABLE = re.compile(r"^\s*\[\[\s*packages?\s*\]\]\s*$")
_NAME_KEY = re.compile(r"^\s*name\s*=\s*[\"']([^\"']+)[\"']")
_PIN_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[|==|===|;|@|\s|$)")


def package_lines(lock: Lock) -> dict[str, int]:
    """The line (1-based) of LOCK's file where each package is declared, by canonical name:
    a ``[[package]]``/``[[packages]]`` table's ``name`` key, or a requirement's line. The
    first one wins; a file that cannot be read again (standard input) gives none."""
    if lock.path == "-":
        return {}
    try:
        text = _read_input(lock.path, _Budget()).decode("utf-8", "replace")
    except LibdoctorError:
        return {}
    found: dict[str, int] = {}
    in_table = lock.format == "requirements.txt"
    for number, line in enumerate(text.splitlines(), 1):
        if lock.format == "requirements.txt":
            match = _PIN_NAME.match(line)
        elif _TABLE.match(line):
            in_table = True
            continue
        else:
            match = _NAME_KEY.match(line) if in_table else None
        if match is not None:
            found.setdefault(canonicalize_name(match[1]), number)
            in_table = lock.format == "requirements.txt"
    return found
