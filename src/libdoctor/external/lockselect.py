"""Which of a lock's packages an environment must hold, chosen as its tool would install them.

``select(lock, markers, options)`` evaluates a ``Lock`` for the target's marker environment
(``requirements.marker_environment``) and the ``SyncOptions`` the user synced with:

- ``pylock.toml`` and ``requirements.txt``: each package's own ``marker`` (and
  ``requires-python``). PEP 751 markers see the chosen ``extras`` and
  ``dependency_groups`` (the lock's ``default-groups`` unless told otherwise). A lock whose
  ``requires-python`` or ``environments`` exclude the target cannot be verified.
- ``uv.lock`` is a universal lock of a project, not a list for one environment. What
  ``uv sync`` installs is followed as uv's own ``to_resolution`` does: from the roots (the
  project, or the ``--package`` members, or every member with ``--all-packages`` or when
  the workspace root is no project), their dependencies and chosen extras (unless an
  ``--only-*`` flag), and their chosen dependency groups; then every edge whose marker
  holds for the target, with the extras the edge asks for. The groups are uv's rule
  (``DependencyGroups::from_history``): ``--group``, ``--only-group``, and the default
  groups unless ``--no-default-groups`` or an ``--only-*`` flag, all of them with
  ``--all-groups`` or ``default-groups = "all"``; ``--no-group`` always wins; ``--no-dev``,
  ``--only-dev`` and ``--dev`` are ``--no-group dev``, ``--only-group dev``, ``--group dev``.
  uv's conflict markers (``extra == 'extra-3-pkg-cpu'``, ``'group-3-pkg-dev'``) hold where
  that extra or group is active. Where a name has several versions (a forked resolution),
  the edge's ``version`` and the package's ``resolution-markers`` pick one. The roots that
  ``uv sync`` installs are required (a project removed from its own venv is drift: ``import``
  of it fails, ``uv sync`` puts it back); a virtual root is optional, and so is what
  ``--no-install-*`` left out (``--no-install-project`` for an env made from an export), and
  an ``--only-group`` sync's project. A uv.lock without a root is taken whole.

The ``Selection`` also says which extras each package is installed with (``extras``): those
the uv.lock edges that reach it ask for (``{ name = "a", extra = ["x"] }``) and a root's chosen
extras, or a requirements line's ``a[x]==1``. A pylock.toml records none (PEP 751 installs what
the markers select and resolves nothing; its ``dependencies`` are informational and carry no
extras), so its packages count as installed without extras.

An edge or package marker that cannot be evaluated (one packaging cannot parse) counts as
holding: the package is expected rather than silently left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from libdoctor.environment.distributions import canonicalize_name
from libdoctor.external.lockfile import (
    DefaultGroups,
    Edge,
    Exclusion,
    Lock,
    LockedPackage,
    LockfileError,
    Selection,
)

__all__ = ["SyncOptions", "holds", "python_fits", "select"]


@dataclass(frozen=True, slots=True)
class SyncOptions:
    """What the environment was synced with, as ``uv sync``'s flags say it."""

    extras: tuple[str, ...] = ()
    all_extras: bool = False
    no_extras: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    no_groups: tuple[str, ...] = ()
    only_groups: tuple[str, ...] = ()
    all_groups: bool = False
    no_default_groups: bool = False
    dev: Literal["include", "exclude", "only"] | None = None
    packages: tuple[str, ...] = ()
    all_packages: bool = False
    no_install_project: bool = False
    no_install_workspace: bool = False
    no_install_local: bool = False
    no_install_packages: tuple[str, ...] = ()

    def chooses_extras_or_groups(self) -> bool:
        return bool(
            self.extras or self.all_extras or self.no_extras or self.groups or self.no_groups
        ) or bool(self.only_groups or self.all_groups or self.no_default_groups or self.dev)

    def chooses_packages(self) -> bool:
        return bool(self.packages or self.all_packages or self.no_install_project) or bool(
            self.no_install_workspace or self.no_install_local
        )


@dataclass(frozen=True, slots=True)
class _Groups:
    """uv's ``DependencyGroupsInner``: which groups are in, and whether only they are."""

    everything: bool
    include: frozenset[str]
    exclude: frozenset[str]
    only: bool

    def contains(self, group: str) -> bool:
        return group not in self.exclude and (self.everything or group in self.include)


def _groups(options: SyncOptions, defaults: DefaultGroups) -> _Groups:
    groups = [canonicalize_name(g) for g in options.groups]
    only = [canonicalize_name(g) for g in options.only_groups]
    exclude = [canonicalize_name(g) for g in options.no_groups]
    {"include": groups, "only": only, "exclude": exclude}.get(options.dev or "", []).append("dev")
    uses_defaults = not options.no_default_groups and not only
    everything = options.all_groups or (uses_defaults and defaults == "all")
    include = set(groups) | set(only)
    if uses_defaults and defaults != "all":
        include |= set(defaults)
    return _Groups(everything, frozenset(include), frozenset(exclude), bool(only))


def _check(options: SyncOptions) -> None:
    if options.all_groups and (options.only_groups or options.dev == "only"):
        raise LockfileError("--all-groups and --only-group/--only-dev cannot be used together")
    if options.packages and options.all_packages:
        raise LockfileError("--package and --all-packages cannot be used together")
    if options.no_extras and not options.all_extras:
        raise LockfileError("--no-extra applies with --all-extras only")


# --------------------------------------------------------------------------- markers


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


# uv writes an active extra or group of a conflict set as ``extra == 'extra-3-pkg-cpu'``.
_EXTRA_IS = re.compile(
    r"""\bextra\s*(==|!=)\s*(['"])([^'"]*)\2|(['"])([^'"]*)\4\s*(==|!=)\s*extra\b"""
)


def _holds_uv(marker: str | None, context: Mapping[str, Any], active: frozenset[str]) -> bool:
    """A uv.lock marker, its ``extra`` comparisons read as membership of ACTIVE (the
    encoded extras and groups in force: uv's ``complexified_marker.evaluate``)."""
    if not marker or "extra" not in marker:
        return holds(marker, context)

    def as_membership(found: re.Match[str]) -> str:
        operator, value = (found[1], found[3]) if found[1] else (found[6], found[5])
        return f"'{value}' {'in' if operator == '==' else 'not in'} extras"

    rewritten = _EXTRA_IS.sub(as_membership, marker)
    env = {k: v for k, v in context.items() if k not in ("extra", "extras")}
    return holds(
        rewritten, {**env, "extras": active, "dependency_groups": frozenset()}, lock_file=True
    )


def _encoded(kind: str, package: str, name: str) -> str:
    return f"{kind}-{len(package)}-{package}-{name}"


def python_fits(specifier: str | None, markers: Mapping[str, Any]) -> bool:
    if not specifier:
        return True
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(specifier).contains(str(markers["python_full_version"]), True)
    except (InvalidSpecifier, KeyError):
        return True


# --------------------------------------------------------------------------- select


def select(lock: Lock, markers: Mapping[str, str], options: SyncOptions | None = None) -> Selection:
    """Which of LOCK's packages the environment with MARKERS, synced with OPTIONS, must
    hold; a ``LockfileError`` when the lock excludes that environment as a whole or the
    options do not fit the lock."""
    options = options or SyncOptions()
    _check(options)
    if lock.format == "requirements.txt" and options.chooses_extras_or_groups():
        raise LockfileError(
            f"{lock.path} is a requirements file: it has no extras or groups to choose"
        )
    if lock.format != "uv.lock" and options.chooses_packages():
        raise LockfileError(
            "--package, --all-packages and --no-install-project/-workspace/-local apply to a "
            "uv.lock only"
        )
    context: dict[str, Any] = {**markers, "extra": ""}
    _applies_at_all(lock, context)
    if lock.format == "uv.lock" and any(p.root for p in lock.packages):
        return _walk_uv(lock, context, options)
    if lock.format == "uv.lock" and options.packages:
        raise LockfileError(f"--package: {lock.path} has no workspace members")
    chosen, extras, groups = "", frozenset[str](), frozenset[str]()
    if lock.format == "pylock.toml":
        extras, groups = _pylock_choice(lock, options)
        chosen = _said(sorted(extras), sorted(groups))
    context |= {"extras": extras, "dependency_groups": groups}
    return _listed(lock, context, options, chosen)


def _listed(lock: Lock, context: Mapping[str, Any], options: SyncOptions, chosen: str) -> Selection:
    """A lock that lists its packages for every environment: each one's marker decides."""
    required: list[LockedPackage] = []
    excluded: list[Exclusion] = []
    optional: list[LockedPackage] = []
    notes: list[str] = []
    taken: dict[str, LockedPackage] = {}
    extras: dict[str, frozenset[str]] = {}
    left_out = {canonicalize_name(n) for n in options.no_install_packages}
    for package in lock.packages:
        why = _excluded_why(package, context, lock.format == "pylock.toml")
        if why is not None:
            excluded.append(Exclusion(package, why))
            continue
        if package.extras:  # pip unites the extras of every line naming the package
            extras[package.key] = extras.get(package.key, frozenset()) | set(package.extras)
        if package.key in taken:
            notes.append(f"{package.display}: {taken[package.key].display} applies first")
        else:
            taken[package.key] = package
            (optional if package.key in left_out else required).append(package)
    if lock.format == "uv.lock":
        notes.append("no project package in the uv.lock: every package taken as required")
    return Selection(
        tuple(required), tuple(excluded), tuple(optional), tuple(notes), chosen, extras
    )


def _pylock_choice(lock: Lock, options: SyncOptions) -> tuple[frozenset[str], frozenset[str]]:
    """The extras and groups a PEP 751 installer would take: the named ones (all the lock
    has with --all-*), and the lock's default groups under uv's group rule."""
    extras = {canonicalize_name(e) for e in options.extras}
    if options.all_extras:
        extras |= {canonicalize_name(e) for e in lock.extras}
        extras -= {canonicalize_name(e) for e in options.no_extras}
    rule = _groups(options, lock.default_groups)
    known = {canonicalize_name(g) for g in (*lock.dependency_groups, *lock.default_groups)}
    names = known | rule.include
    return frozenset(extras), frozenset(g for g in names if rule.contains(g))


def _said(extras: Sequence[str], groups: Sequence[str]) -> str:
    return f"extras {', '.join(extras) or 'none'}; groups {', '.join(groups) or 'none'}"


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


# --------------------------------------------------------------------------- uv sync


@dataclass(frozen=True, slots=True)
class _Plan:
    """Where ``uv sync`` starts: the roots, what of them it follows, what is active."""

    roots: tuple[LockedPackage, ...]
    starts: tuple[tuple[LockedPackage, str], ...]  # (package, extra or "") to follow
    direct: tuple[Edge, ...]  # the chosen groups' edges (and the manifest's requirements)
    active: frozenset[str]  # encoded extras and groups for conflict markers
    unchosen: tuple[tuple[str, tuple[LockedPackage, str] | Edge], ...]  # (why, start)
    chosen: str


def _walk_uv(lock: Lock, context: Mapping[str, Any], options: SyncOptions) -> Selection:
    by_key: dict[str, list[LockedPackage]] = {}
    for package in lock.packages:
        by_key.setdefault(package.key, []).append(package)
    plan = _plan(lock, options)
    notes: list[str] = []
    skipped: dict[str, str] = {}
    active = plan.active
    if lock.conflicts:  # uv's first pass: the extras that edges switch on
        _, found = _reach(plan, by_key, context, active, [], {})
        active |= found
    extras: dict[str, set[str]] = {r.key: set() for r in plan.roots}
    for root, extra in plan.starts:
        extras[root.key] |= {extra} - {""}
    chosen, _ = _reach(plan, by_key, context, active, notes, skipped, extras=extras)
    reasons = _unchosen_reasons(plan, by_key, context, active, chosen)
    left_out = _left_out(lock, options, plan.roots)
    installed_roots = [r for r in plan.roots if _syncs_root(r, options, left_out)]
    required = [
        *installed_roots,
        *(p for p in chosen.values() if not p.root and p.key not in left_out),
    ]
    optional = [
        *(r for r in plan.roots if r not in installed_roots),
        *(p for p in chosen.values() if not p.root and p.key in left_out),
    ]
    picked = {id(p) for p in [*chosen.values(), *plan.roots]}
    excluded = [
        Exclusion(
            p,
            reasons.get(p.key)
            or skipped.get(p.key, "nothing installed here depends on this version"),
        )
        for p in lock.packages
        if id(p) not in picked
    ]
    with_extras = {key: frozenset(found) for key, found in extras.items() if found}
    return Selection(
        tuple(required), tuple(excluded), tuple(optional), tuple(notes), plan.chosen, with_extras
    )


def _roots(lock: Lock, options: SyncOptions) -> tuple[LockedPackage, ...]:
    members = [p for p in lock.packages if p.member]
    if options.packages:
        wanted = [canonicalize_name(n) for n in options.packages]
        keys = {m.key for m in members}
        unknown = [n for n in options.packages if canonicalize_name(n) not in keys]
        if unknown:
            raise LockfileError(
                f"--package {unknown[0]}: no such workspace member in {lock.path} "
                f"(members: {', '.join(sorted(m.name for m in members)[:8])})"
            )
        return tuple(m for k in wanted for m in members if m.key == k)
    if options.all_packages:
        return tuple(members)
    return tuple(p for p in lock.packages if p.root)


def _defaults(lock: Lock, options: SyncOptions, roots: Sequence[LockedPackage]) -> DefaultGroups:
    """The default groups of what is synced: the ``--package`` member's, else the project's
    (the workspace root's pyproject.toml when it is no project)."""
    project = [p for p in roots if p.artifacts and p.artifacts[-1].location == "."]
    primary = roots[0] if options.packages else (project[0] if project else None)
    if primary is None:
        return lock.default_groups
    return primary.default_groups if primary.default_groups is not None else ("dev",)


def _plan(lock: Lock, options: SyncOptions) -> _Plan:
    roots = _roots(lock, options)
    rule = _groups(options, _defaults(lock, options, roots))
    starts: list[tuple[LockedPackage, str]] = []
    direct: list[Edge] = list(lock.requirements)
    active: set[str] = set()
    unchosen: list[tuple[str, tuple[LockedPackage, str] | Edge]] = []
    taken_extras: set[str] = set()
    taken_groups: set[str] = set()
    for root in roots:
        extras = _extras_of(root, options) if not rule.only else []
        if not rule.only:
            starts += [(root, ""), *((root, e) for e in extras)]
        active |= {_encoded("extra", root.key, e) for e in extras}
        taken_extras |= set(extras)
        unchosen += [
            (f"only in {root.name}'s extra {e}, not synced (--extra {e})", (root, e))
            for e in root.optional
            if e not in extras
        ]
        for group, edges in root.groups.items():
            if rule.contains(group):
                active.add(_encoded("group", root.key, group))
                direct += edges
                taken_groups.add(group)
            else:
                why = f"only in {root.name}'s group {group}, not synced (--group {group})"
                unchosen += [(why, e) for e in edges]
    for group, edges in lock.manifest_groups.items():
        if rule.contains(group):
            direct += edges
            taken_groups.add(group)
    _unknown_names(options, roots, lock, taken_extras)
    chosen = _said(sorted(taken_extras), sorted(taken_groups))
    return _Plan(roots, tuple(starts), tuple(direct), frozenset(active), tuple(unchosen), chosen)


def _extras_of(root: LockedPackage, options: SyncOptions) -> list[str]:
    if options.all_extras:
        no = {canonicalize_name(e) for e in options.no_extras}
        return [e for e in root.optional if e not in no]
    return [e for e in (canonicalize_name(x) for x in options.extras) if e in root.optional]


def _unknown_names(
    options: SyncOptions, roots: Sequence[LockedPackage], lock: Lock, extras: Iterable[str]
) -> None:
    """An ``--extra`` or ``--group`` none of the roots has: uv refuses it, and so do we."""
    known_extras = {e for r in roots for e in r.optional}
    for extra in options.extras:
        if canonicalize_name(extra) not in known_extras:
            raise LockfileError(
                f"--extra {extra}: {_names(roots)} has no such extra in {lock.path}"
            )
    known_groups = {g for r in roots for g in r.groups} | set(lock.manifest_groups)
    for group in (*options.groups, *options.only_groups, *options.no_groups):
        if canonicalize_name(group) not in known_groups:
            raise LockfileError(
                f"--group {group}: {_names(roots)} has no such dependency group with packages "
                f"in {lock.path}"
            )


def _names(roots: Sequence[LockedPackage]) -> str:
    return ", ".join(r.name for r in roots) or "the workspace"


def _syncs_root(root: LockedPackage, options: SyncOptions, left_out: set[str]) -> bool:
    """``uv sync`` installs a root it syncs (the project, the ``--package`` members, every
    member with ``--all-packages``), editable, unless it is virtual (no build system, or
    ``package = false``), an ``--only-group``/``--only-dev`` sync (which omits the project) or
    a ``--no-install-*`` flag left it out (``--no-install-project``: the project, not the
    other members)."""
    if root.source == "virtual" or root.key in left_out:
        return False
    if options.only_groups or options.dev == "only":  # uv: the project is omitted then
        return False
    return not (options.no_install_project and root.root)


def _left_out(lock: Lock, options: SyncOptions, roots: Sequence[LockedPackage]) -> set[str]:
    """What ``--no-install-*`` kept ``uv sync`` from installing: fine either way here."""
    out = {canonicalize_name(n) for n in options.no_install_packages}
    if options.no_install_workspace:
        out |= {p.key for p in lock.packages if p.member}
    if options.no_install_local:
        out |= {p.key for p in lock.packages if p.local or p.source == "path"}
    return out


def _reach(
    plan: _Plan,
    by_key: Mapping[str, Sequence[LockedPackage]],
    context: Mapping[str, Any],
    active: frozenset[str],
    notes: list[str],
    skipped: dict[str, str],
    starts: Sequence[tuple[LockedPackage, str] | Edge] | None = None,
    extras: dict[str, set[str]] | None = None,
) -> tuple[dict[tuple[str, str | None], LockedPackage], frozenset[str]]:
    """Everything reached from PLAN's starts (or STARTS), and the extras edges switched on;
    into EXTRAS, if given, the extras each package is reached with."""
    chosen: dict[tuple[str, str | None], LockedPackage] = {}
    switched: set[str] = set()
    queue: list[tuple[LockedPackage, str]] = []
    edges: list[tuple[LockedPackage | None, Edge]] = []
    for start in plan.starts if starts is None else starts:
        if isinstance(start, Edge):
            edges.append((None, start))
        else:
            queue.append(start)
    if starts is None:
        edges += [(None, e) for e in plan.direct]
    done: set[tuple[str, str | None, str]] = {(p.key, p.version, x) for p, x in queue}
    while queue or edges:
        if not edges:
            package, extra = queue.pop()
            source = package.optional.get(extra, ()) if extra else package.dependencies
            edges = [(package, e) for e in source]
            continue
        parent, edge = edges.pop()
        if not _holds_uv(edge.marker, context, active):
            if parent is not None:
                skipped.setdefault(edge.key, f"{parent.name} needs it only where {edge.marker}")
            continue
        target = _pick(by_key.get(edge.key, []), edge, context, active, notes)
        if target is None:
            notes.append(
                f"{parent.display if parent else 'a group'} depends on {edge.key}: not in the lock"
            )
            continue
        chosen[(target.key, target.version)] = target
        switched |= {_encoded("extra", target.key, x) for x in edge.extras}
        if extras is not None:
            extras.setdefault(target.key, set()).update(edge.extras)
        for extra in ("", *edge.extras):
            if (target.key, target.version, extra) not in done:
                done.add((target.key, target.version, extra))
                queue.append((target, extra))
    return chosen, frozenset(switched)


def _unchosen_reasons(
    plan: _Plan,
    by_key: Mapping[str, Sequence[LockedPackage]],
    context: Mapping[str, Any],
    active: frozenset[str],
    chosen: Mapping[tuple[str, str | None], LockedPackage],
) -> dict[str, str]:
    """For packages not synced: the first unchosen extra or group of a root that has them."""
    reasons: dict[str, str] = {}
    taken = {key for key, _ in chosen}
    for why, start in plan.unchosen:
        reached, _ = _reach(plan, by_key, context, active, [], {}, [start])
        for key, _ in reached:
            if key not in taken:
                reasons.setdefault(key, why)
    return reasons


def _pick(
    candidates: Sequence[LockedPackage],
    edge: Edge,
    context: Mapping[str, Any],
    active: frozenset[str],
    notes: list[str],
) -> LockedPackage | None:
    if edge.version is not None:
        candidates = [c for c in candidates if c.version == edge.version] or candidates
    if len(candidates) > 1:
        forked = [
            c
            for c in candidates
            if not c.resolution_markers
            or any(_holds_uv(m, context, active) for m in c.resolution_markers)
        ]
        candidates = forked or candidates
    if len(candidates) > 1:
        notes.append(
            f"{edge.key}: {len(candidates)} versions could apply; {candidates[0].display} taken"
        )
    return candidates[0] if candidates else None
