"""Lock files read into values: PEP 751 ``pylock.toml``, uv's ``uv.lock``, and a
``requirements.txt`` of ``name==version`` pins, and which of their packages apply to a target.

``read_lock`` turns a file into a ``Lock`` (or raises ``LockfileError``, one line naming the
cause: not TOML, an unknown ``lock-version``, a ``--hash`` with no requirement, a line that
pins nothing). ``select`` evaluates it for the target's marker environment
(``requirements.marker_environment``) and says which packages the environment must hold:

- ``pylock.toml`` and ``requirements.txt``: each package's own ``marker`` (and
  ``requires-python``); PEP 751 markers see no extras and the lock's ``default-groups``.
  A lock whose ``requires-python`` or ``environments`` exclude the target cannot be verified.
- ``uv.lock`` is a universal lock of a project, not a list for one environment. What
  ``uv sync`` would install is followed as ``uv export`` does: from the project's own
  package(s) (``source = { editable = "." }`` or ``{ virtual = "." }``, else the
  workspace ``members``), its dependencies and its ``dev`` group (uv's default group),
  then every dependency edge whose marker holds for the target, with the extras the
  edge asks for; where a name has several versions (a forked resolution), the edge's
  ``version`` and the package's ``resolution-markers`` pick one. The project itself is
  optional (``uv sync`` installs it editable; ``uv pip install -r`` an export does not).
  A lock without a root package is taken whole, every package required.

An edge or package marker that cannot be evaluated (one packaging cannot parse) counts as
holding: the package is expected rather than silently left out. uv's conflict markers
(``extra == 'extra-4-demo-cpu'``) see no extra here, so they do not hold.

``installed_from`` reads the other side: what a dist-info keeps of the file it was installed
from (``direct_url.json``, WHEEL's tags).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from libdoctor.environment.distributions import canonicalize_name
from libdoctor.errors import LibdoctorError

__all__ = [
    "Artifact",
    "Edge",
    "Exclusion",
    "InstalledFrom",
    "Lock",
    "LockedPackage",
    "LockfileError",
    "Selection",
    "holds",
    "installed_from",
    "read_lock",
    "select",
    "wheel_tags",
]

# Projects installed as themselves (uv's own package of a project): optional in the env.
_ROOT_SOURCES = ("editable", "virtual")


class LockfileError(LibdoctorError):
    """The lock file cannot be read or does not apply to the target: nothing to verify."""


@dataclass(frozen=True, slots=True)
class Artifact:
    """One file or checkout the lock allows for a package."""

    kind: str  # "wheel" | "sdist" | "archive" | "vcs" | "directory"
    location: str  # URL or path as the lock writes it ("" when it names the file only)
    hashes: frozenset[str] = frozenset()  # "sha256:<hex>", lower case
    commit: str | None = None  # vcs only
    name: str = ""  # the file name, when the lock gives it apart from the location

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
    default_groups: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # lines of a requirements file left aside, and why

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


# --------------------------------------------------------------------------- reading


def read_lock(path: str) -> Lock:
    """PATH read as the lock format its name and contents say."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise LockfileError(f"cannot read {path}: {exc.strerror or exc}") from None
    name = os.path.basename(path)
    if name.endswith(".lock") and name != "uv.lock" and not _looks_like_toml(data):
        return _requirements_lock(path, data)  # pip-tools' requirements.lock, say
    if name.endswith((".toml", ".lock")):
        document = _toml(path, data)
        if "lock-version" in document or name.startswith("pylock."):
            return _pylock(path, document)
        if "package" in document or name == "uv.lock":
            return _uv_lock(path, document)
        raise LockfileError(
            f"{path} is neither a pylock.toml (no lock-version) nor a uv.lock (no [[package]])"
        )
    return _requirements_lock(path, data)


def _looks_like_toml(data: bytes) -> bool:
    """A table header or a ``key = value`` line (``six==1.0`` and ``--hash=`` are neither)."""
    return re.search(rb"^\s*(\[|[A-Za-z0-9_][A-Za-z0-9_-]*\s*=(?!=))", data, re.M) is not None


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


def _expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise LockfileError(f"{where} is {type(value).__name__}, expected {names}")
    return value


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
        environments=tuple(_expect(doc.get("environments", []), list, f"{path}: environments")),
        default_groups=tuple(
            _expect(doc.get("default-groups", []), list, f"{path}: default-groups")
        ),
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
        source = "url"
    if "vcs" in table:
        vcs = _expect(table["vcs"], dict, f"{where}.vcs")
        location = str(vcs.get("url") or vcs.get("path") or "")
        artifacts.append(Artifact("vcs", location, commit=vcs.get("commit-id")))
        source = "vcs"
    if "directory" in table:
        directory = _expect(table["directory"], dict, f"{where}.directory")
        artifacts.append(Artifact("directory", str(directory.get("path", ""))))
        source = "editable" if directory.get("editable") else "directory"
    return LockedPackage(
        name=name,
        key=canonicalize_name(name),
        version=_optional_str(table, "version", where),
        source=source,
        artifacts=tuple(artifacts),
        marker=_optional_str(table, "marker", where),
        requires_python=_optional_str(table, "requires-python", where),
    )


def _pylock_file(kind: str, raw: Any, where: str) -> Artifact:
    table = _expect(raw, dict, where)
    location = table.get("url") or table.get("path") or ""
    hashes = _hashes(table.get("hashes"), f"{where}.hashes")
    return Artifact(kind, str(location), hashes, name=str(table.get("name") or ""))


# --------------------------------------------------------------------------- uv.lock


def _uv_lock(path: str, doc: dict[str, Any]) -> Lock:
    version = doc.get("version")
    if version != 1:
        raise LockfileError(
            f"{path}: unknown uv.lock version {version!r} (libdoctor reads version = 1)"
        )
    packages = _expect(doc.get("package", []), list, f"{path}: package")
    members = (
        doc.get("manifest", {}).get("members", []) if isinstance(doc.get("manifest"), dict) else []
    )
    read = [_uv_package(path, i, p) for i, p in enumerate(packages)]
    if not any(p.root for p in read) and members:
        wanted = {canonicalize_name(str(m)) for m in members}
        read = [_as_root(p) if p.key in wanted else p for p in read]
    return Lock(
        path=path,
        format="uv.lock",
        packages=tuple(read),
        created_by="uv",
        requires_python=_optional_str(doc, "requires-python", path),
    )


def _as_root(package: LockedPackage) -> LockedPackage:
    from dataclasses import replace

    return replace(package, root=True)


def _uv_package(path: str, index: int, raw: Any) -> LockedPackage:
    where = f"{path}: package[{index}]"
    table = _expect(raw, dict, where)
    name = _expect(table.get("name"), str, f"{where}.name")
    source_table = _expect(table.get("source", {}), dict, f"{where}.source")
    kind = next(iter(source_table), "registry")
    artifacts: list[Artifact] = []
    for i, wheel in enumerate(_expect(table.get("wheels", []), list, f"{where}.wheels")):
        artifacts.append(_uv_file("wheel", wheel, f"{where}.wheels[{i}]"))
    if "sdist" in table:
        artifacts.append(_uv_file("sdist", table["sdist"], f"{where}.sdist"))
    if kind == "git":
        url, _, commit = str(source_table["git"]).partition("#")
        artifacts.append(Artifact("vcs", url, commit=commit or None))
    if kind in ("directory", "editable", "virtual"):
        artifacts.append(Artifact("directory", str(source_table[kind])))
    return LockedPackage(
        name=name,
        key=canonicalize_name(name),
        version=_optional_str(table, "version", where),
        source={"git": "vcs"}.get(kind, kind),
        artifacts=tuple(artifacts),
        dependencies=_edges(table.get("dependencies", []), f"{where}.dependencies"),
        optional=_edge_groups(table.get("optional-dependencies", {}), where),
        groups=_edge_groups(table.get("dev-dependencies", {}), where),
        resolution_markers=tuple(table.get("resolution-markers", ())),
        root=kind in _ROOT_SOURCES and source_table[kind] == ".",
    )


def _uv_file(kind: str, raw: Any, where: str) -> Artifact:
    table = _expect(raw, dict, where)
    location = table.get("url") or table.get("path") or ""
    hashes = _hashes(table.get("hash"), f"{where}.hash")
    return Artifact(kind, str(location), hashes, name=str(table.get("filename") or ""))


def _edges(raw: Any, where: str) -> tuple[Edge, ...]:
    edges = []
    for i, item in enumerate(_expect(raw, list, where)):
        table = _expect(item, dict, f"{where}[{i}]")
        name = _expect(table.get("name"), str, f"{where}[{i}].name")
        edges.append(
            Edge(
                key=canonicalize_name(name),
                marker=table.get("marker"),
                extras=tuple(canonicalize_name(e) for e in table.get("extra", ())),
                version=table.get("version"),
            )
        )
    return tuple(edges)


def _edge_groups(raw: Any, where: str) -> dict[str, tuple[Edge, ...]]:
    table = _expect(raw, dict, where)
    return {canonicalize_name(k): _edges(v, f"{where}.{k}") for k, v in table.items()}


# --------------------------------------------------------------------------- requirements.txt

# pip's comment rule: '#' at the start or after whitespace; a URL's '#sha256=' stays.
_COMMENT = re.compile(r"(^|\s+)#.*$")
_HASH = re.compile(r"--hash(?:=|\s+)(\S+)")
_OPTION = re.compile(r"^(-r|--requirement|-c|--constraint|-e|--editable)(?:=|\s+|(?=\S))(.*)$")


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, line) with ``\\`` continuations joined and comments removed."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        line = _COMMENT.sub("", raw)
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


def _requirements_lock(path: str, data: bytes) -> Lock:
    packages: list[LockedPackage] = []
    notes: list[str] = []
    _read_requirements(path, data, packages, notes, seen=set())
    if not packages:
        raise LockfileError(f"{path}: no pinned requirement (name==version) in it")
    return Lock(path=path, format="requirements.txt", packages=tuple(packages), notes=tuple(notes))


def _read_requirements(
    path: str, data: bytes, out: list[LockedPackage], notes: list[str], seen: set[str]
) -> None:
    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LockfileError(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    for number, line in _logical_lines(text):
        where = f"{path}:{number}"
        option = _OPTION.match(line)
        if option is not None:
            _requirement_option(path, where, option[1], option[2].strip(), out, notes, seen)
        elif line.startswith("-"):
            if _HASH.match(line):
                raise LockfileError(f"{where}: {line.split()[0]} without a requirement before it")
            notes.append(f"{where}: option {line.split()[0]} left aside")
        else:
            out.append(_pinned(where, line))


def _requirement_option(
    path: str,
    where: str,
    flag: str,
    value: str,
    out: list[LockedPackage],
    notes: list[str],
    seen: set[str],
) -> None:
    if flag in ("-r", "--requirement"):
        included = os.path.join(os.path.dirname(path), value)
        try:
            with open(included, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise LockfileError(f"{where}: cannot read {value}: {exc.strerror or exc}") from None
        _read_requirements(included, data, out, notes, seen)
    elif flag in ("-c", "--constraint"):
        notes.append(f"{where}: constraints file {value} left aside (constraints pin nothing)")
    else:
        notes.append(f"{where}: editable {value} left aside (no version to hold it to)")


def _pinned(where: str, line: str) -> LockedPackage:
    from packaging.requirements import InvalidRequirement, Requirement

    hashes = frozenset(h for found in _HASH.findall(line) for h in _hashes(found, where))
    text = _HASH.sub("", line)
    text = re.split(r"\s+--?[a-z]", " " + text)[0].strip()  # other per-line options
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        why = str(exc).splitlines()[0]
        raise LockfileError(f"{where}: {text!r} does not parse: {why}") from None
    marker = str(req.marker) if req.marker is not None else None
    key = canonicalize_name(req.name)
    if req.url:
        fragment = re.search(r"#sha256=([0-9a-fA-F]+)", req.url)
        found = hashes | ({f"sha256:{fragment[1].lower()}"} if fragment else set())
        artifact = Artifact("archive", req.url, frozenset(found))
        return LockedPackage(req.name, key, None, "url", (artifact,), marker)
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
        raise LockfileError(f"{where}: {text} pins no version (a lock needs name==version)")
    artifacts = (Artifact("wheel", "", hashes),) if hashes else ()
    return LockedPackage(req.name, key, specs[0].version, "registry", artifacts, marker)


# --------------------------------------------------------------------------- selection


def holds(marker: str | None, markers: Mapping[str, Any], *, lock_file: bool = False) -> bool:
    """MARKER evaluated for MARKERS; with LOCK_FILE as PEP 751 says (``extras`` and
    ``dependency_groups`` are sets), else as metadata (``extra``). One that cannot be
    evaluated holds: the package is expected, never silently dropped."""
    if not marker:
        return True
    from packaging.markers import Marker

    try:
        parsed = Marker(marker)
        if lock_file:
            try:
                return bool(parsed.evaluate(dict(markers), "lock_file"))
            except TypeError:  # packaging < 25: no evaluation context
                pass
        plain = {k: v for k, v in markers.items() if isinstance(v, str)}
        return bool(parsed.evaluate(plain))
    except Exception:
        return True


def python_fits(specifier: str | None, markers: Mapping[str, Any]) -> bool:
    if not specifier:
        return True
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(specifier).contains(str(markers["python_full_version"]), True)
    except (InvalidSpecifier, KeyError):
        return True


def select(lock: Lock, markers: Mapping[str, str]) -> Selection:
    """Which of LOCK's packages the environment with MARKERS must hold; a ``LockfileError``
    when the lock excludes that environment as a whole."""
    context: dict[str, Any] = {
        **markers,
        "extra": "",
        "extras": frozenset(),
        "dependency_groups": frozenset(lock.default_groups),
    }
    _applies_at_all(lock, context)
    if lock.format == "uv.lock" and any(p.root for p in lock.packages):
        return _walk_uv(lock, context)
    required: list[LockedPackage] = []
    excluded: list[Exclusion] = []
    notes: list[str] = []
    taken: dict[str, LockedPackage] = {}
    for package in lock.packages:
        why = _excluded_why(package, context, lock.format == "pylock.toml")
        if why is not None:
            excluded.append(Exclusion(package, why))
        elif package.key in taken:
            notes.append(f"{package.display}: {taken[package.key].display} applies first")
        else:
            taken[package.key] = package
            required.append(package)
    if lock.format == "uv.lock":
        notes.append("no project package in the uv.lock: every package taken as required")
    return Selection(tuple(required), tuple(excluded), (), tuple(notes))


def _excluded_why(
    package: LockedPackage, context: Mapping[str, Any], lock_file: bool
) -> str | None:
    if not holds(package.marker, context, lock_file=lock_file):
        return f"marker {package.marker} does not hold here"
    if not python_fits(package.requires_python, context):
        return f"requires-python {package.requires_python} excludes Python here"
    return None


def _applies_at_all(lock: Lock, context: Mapping[str, Any]) -> None:
    python = context.get("python_full_version", "?")
    if not python_fits(lock.requires_python, context):
        raise LockfileError(
            f"{lock.path} is for requires-python {lock.requires_python}; the target's Python "
            f"is {python}"
        )
    if lock.environments and not any(holds(m, context, lock_file=True) for m in lock.environments):
        raise LockfileError(
            f"{lock.path} is for the environments {'; '.join(lock.environments)}; the target "
            f"(Python {python}, {context.get('sys_platform', '?')}) matches none"
        )


def _walk_uv(lock: Lock, context: Mapping[str, Any]) -> Selection:
    """uv export's walk: the project's dependencies and dev group, then every edge whose
    marker holds here, with the extras it asks for."""
    by_key: dict[str, list[LockedPackage]] = {}
    for package in lock.packages:
        by_key.setdefault(package.key, []).append(package)
    roots = [p for p in lock.packages if p.root]
    chosen: dict[tuple[str, str | None], LockedPackage] = {}
    notes: list[str] = []
    skipped: dict[str, str] = {}  # key -> an edge to it that does not hold here
    queue: list[tuple[LockedPackage, tuple[str, ...]]] = [(r, ()) for r in roots]
    done: set[tuple[str, str | None, str]] = {(r.key, r.version, "") for r in roots}
    while queue:
        package, extras = queue.pop()
        for edge, applies in _edges_of(package, extras, context):
            if not applies:
                skipped.setdefault(edge.key, f"{package.name} needs it only where {edge.marker}")
                continue
            target = _pick(by_key.get(edge.key, []), edge, context, notes)
            if target is None:
                notes.append(f"{package.display} depends on {edge.key}: not in the lock")
                continue
            chosen[(target.key, target.version)] = target
            for extra in ("", *edge.extras):
                if (target.key, target.version, extra) not in done:
                    done.add((target.key, target.version, extra))
                    queue.append((target, (extra,) if extra else ()))
    required = [p for p in chosen.values() if not p.root]
    picked = {id(p) for p in chosen.values()} | {id(r) for r in roots}
    excluded = [
        Exclusion(p, skipped.get(p.key, "nothing installed here depends on this version"))
        for p in lock.packages
        if id(p) not in picked
    ]
    return Selection(tuple(required), tuple(excluded), tuple(roots), tuple(notes))


def _edges_of(
    package: LockedPackage, extras: Sequence[str], context: Mapping[str, Any]
) -> list[tuple[Edge, bool]]:
    """PACKAGE's edges (those of EXTRAS, else its own and a root's dev group), each with
    whether its marker holds here."""
    if extras:
        edges = [e for extra in extras for e in package.optional.get(extra, ())]
    else:
        edges = list(package.dependencies)
        if package.root:
            edges += package.groups.get("dev", ())
    return [(e, holds(e.marker, context)) for e in edges]


def _pick(
    candidates: Sequence[LockedPackage],
    edge: Edge,
    context: Mapping[str, Any],
    notes: list[str],
) -> LockedPackage | None:
    if edge.version is not None:
        candidates = [c for c in candidates if c.version == edge.version] or candidates
    if len(candidates) > 1:
        forked = [
            c
            for c in candidates
            if not c.resolution_markers or any(holds(m, context) for m in c.resolution_markers)
        ]
        candidates = forked or candidates
    if len(candidates) > 1:
        notes.append(
            f"{edge.key}: {len(candidates)} versions could apply; {candidates[0].display} taken"
        )
    return candidates[0] if candidates else None


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


def installed_from(metadata_dir: str) -> InstalledFrom:
    """Read ``direct_url.json`` (PEP 610; pip writes archive hashes for URL and file
    installs, uv writes none) and WHEEL's tags; unreadable or malformed: no evidence."""
    import json

    tags = tuple(_wheel_tags(os.path.join(metadata_dir, "WHEEL")))
    try:
        with open(os.path.join(metadata_dir, "direct_url.json"), "rb") as handle:
            document = json.loads(handle.read())
    except (OSError, ValueError):
        return InstalledFrom(tags=tags)
    if not isinstance(document, dict):
        return InstalledFrom(tags=tags)
    url = document.get("url") if isinstance(document.get("url"), str) else None
    for kind in ("archive_info", "dir_info", "vcs_info"):
        info = document.get(kind)
        if isinstance(info, dict):
            return _from_info(kind, info, url, tags)
    return InstalledFrom(url=url, tags=tags)


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
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip().lower() == "tag":
            yield value.strip()


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
