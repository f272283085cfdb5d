"""What changed between two snapshots, and which machines of a fleet differ from the rest.

A ``Diff`` holds each change once, in the place it belongs: a distribution added, removed,
upgraded or downgraded (its files then are not listed: they changed with the version); at the
same version, files whose bytes changed (the contaminated case) and metadata that changed
(installer, REQUESTED, extras, direct URL, wheel tags); libraries a needed name now resolves
to another file or owner, or no longer resolves to anything; findings new or gone; the
interpreter or platform. The node name and prefix are never compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from libdoctor.analysis.snapshot import (
    DistRecord,
    FileRow,
    FindingRecord,
    LibraryRecord,
    Snapshot,
)
from libdoctor.errors import LibdoctorError

VersionKind = Literal["added", "removed", "upgraded", "downgraded", "changed"]
FileKind = Literal["added", "removed", "changed", "missing", "back"]


@dataclass(frozen=True, slots=True)
class VersionChange:
    key: str
    name: str
    kind: VersionKind
    before: tuple[str, ...]  # versions; () when absent
    after: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FileChange:
    key: str
    dist: str  # "name version"
    path: str
    kind: FileKind
    before: FileRow | None
    after: FileRow | None


@dataclass(frozen=True, slots=True)
class FieldChange:
    """A fact of a distribution at the same version (key set), or of the interpreter or the
    platform (key None), that differs."""

    key: str | None
    subject: str  # "name version", "interpreter", "platform"
    field: str
    before: str | None
    after: str | None


@dataclass(frozen=True, slots=True)
class LibraryChange:
    name: str
    before: tuple[LibraryRecord, ...]
    after: tuple[LibraryRecord, ...]  # () : nothing requests it any more

    @property
    def key(self) -> str | None:
        """The distribution this change is told under: the old owner, else the new one."""
        for lib in (*self.before, *self.after):
            if lib.owners:
                from libdoctor.environment.distributions import canonicalize_name

                return canonicalize_name(lib.owners[0][0])
        return None


@dataclass(frozen=True, slots=True)
class FindingChange:
    key: str | None
    new: bool  # False: gone
    finding: FindingRecord


@dataclass(frozen=True, slots=True)
class Diff:
    versions: tuple[VersionChange, ...]
    files: tuple[FileChange, ...]
    fields: tuple[FieldChange, ...]
    libraries: tuple[LibraryChange, ...]
    findings: tuple[FindingChange, ...]

    @property
    def empty(self) -> bool:
        return not (self.versions or self.files or self.fields or self.libraries or self.findings)

    def count(self) -> int:
        parts = (self.versions, self.files, self.fields, self.libraries, self.findings)
        return sum(len(p) for p in parts)


def diff(before: Snapshot, after: Snapshot) -> Diff:
    versions, files, fields = _distributions(before.distributions, after.distributions)
    fields = _facts(before, after) + fields
    return Diff(
        versions=tuple(versions),
        files=tuple(files),
        fields=tuple(fields),
        libraries=tuple(_libraries(before.libraries, after.libraries)),
        findings=tuple(_findings(before.findings, after.findings)),
    )


def _by_key(dists: Iterable[DistRecord]) -> dict[str, list[DistRecord]]:
    found: dict[str, list[DistRecord]] = {}
    for dist in dists:
        found.setdefault(dist.key, []).append(dist)
    return found


def _distributions(
    before: Sequence[DistRecord], after: Sequence[DistRecord]
) -> tuple[list[VersionChange], list[FileChange], list[FieldChange]]:
    old, new = _by_key(before), _by_key(after)
    versions: list[VersionChange] = []
    files: list[FileChange] = []
    fields: list[FieldChange] = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key, []), new.get(key, [])
        was_v = tuple(sorted(d.version for d in was))
        now_v = tuple(sorted(d.version for d in now))
        if was_v != now_v:
            name = (now or was)[0].name
            versions.append(VersionChange(key, name, _version_kind(was_v, now_v), was_v, now_v))
            continue
        for a, b in zip(sorted(was, key=_order), sorted(now, key=_order), strict=True):
            files += _files(a, b)
            fields += _dist_fields(a, b)
    return versions, files, fields


def _order(dist: DistRecord) -> tuple[str, str, str]:
    return (dist.version, dist.site, dist.metadata)


def _version_kind(before: tuple[str, ...], after: tuple[str, ...]) -> VersionKind:
    if not before:
        return "added"
    if not after:
        return "removed"
    if len(before) != 1 or len(after) != 1:
        return "changed"
    from packaging.version import InvalidVersion, Version

    try:
        older = Version(before[0]) < Version(after[0])
    except InvalidVersion:
        return "changed"
    return "upgraded" if older else "downgraded"


def _same_bytes(a: FileRow, b: FileRow) -> bool:
    if a.size != b.size or a.hash != b.hash:
        return False
    return a.digest is None or b.digest is None or a.digest == b.digest


def _files(a: DistRecord, b: DistRecord) -> list[FileChange]:
    if a is b or a.files == b.files:
        return []
    rows_a = {row.path: row for row in a.files}
    rows_b = {row.path: row for row in b.files}
    out = []
    for path in sorted(rows_a.keys() | rows_b.keys()):
        ra, rb = rows_a.get(path), rows_b.get(path)
        kind: FileKind
        if ra is None:
            kind = "added"
        elif rb is None:
            kind = "removed"
        elif _same_bytes(ra, rb):
            continue
        elif rb.size is None:
            kind = "missing"
        elif ra.size is None:
            kind = "back"
        else:
            kind = "changed"
        out.append(FileChange(b.key, b.display, path, kind, ra, rb))
    return out


_DIST_FIELDS = ("installer", "requested", "extras", "direct_url", "tags", "site", "record_error")


def _dist_fields(a: DistRecord, b: DistRecord) -> list[FieldChange]:
    out = []
    for name in _DIST_FIELDS:
        va, vb = getattr(a, name), getattr(b, name)
        if va != vb:
            out.append(FieldChange(b.key, b.display, name, _spell(va), _spell(vb)))
    return out


def _spell(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _facts(before: Snapshot, after: Snapshot) -> list[FieldChange]:
    out = []
    for subject in ("interpreter", "platform"):
        va: Mapping[str, str] = getattr(before, subject)
        vb: Mapping[str, str] = getattr(after, subject)
        for name in sorted(va.keys() | vb.keys()):
            if va.get(name) != vb.get(name):
                out.append(FieldChange(None, subject, name, va.get(name), vb.get(name)))
    if before.deep != after.deep:
        out.append(FieldChange(None, "snapshot", "deep", _spell(before.deep), _spell(after.deep)))
    return out


def _resolution(libs: Iterable[LibraryRecord]) -> set[tuple[str | None, tuple[str, ...]]]:
    return {(lib.path, tuple(sorted(n for n, _ in lib.owners))) for lib in libs}


def _libraries(
    before: Sequence[LibraryRecord], after: Sequence[LibraryRecord]
) -> list[LibraryChange]:
    """Names whose resolution changed. A name requested only on one side came or went with
    the extension modules that need it (their distribution's change says so), unless it is
    newly requested and not found."""
    old: dict[str, list[LibraryRecord]] = {}
    new: dict[str, list[LibraryRecord]] = {}
    for lib in before:
        old.setdefault(lib.name, []).append(lib)
    for lib in after:
        new.setdefault(lib.name, []).append(lib)
    out = []
    for name in sorted(old.keys() | new.keys()):
        was, now = old.get(name, []), new.get(name, [])
        if not was and all(lib.path is not None for lib in now):
            continue
        if not now:
            continue
        if _resolution(was) != _resolution(now):
            out.append(LibraryChange(name, tuple(was), tuple(now)))
    return out


def _finding_key(record: FindingRecord) -> str | None:
    if record.distribution is None:
        return None
    from libdoctor.environment.distributions import canonicalize_name

    return canonicalize_name(record.distribution.rsplit(" ", 1)[0])


def _findings(
    before: Sequence[FindingRecord], after: Sequence[FindingRecord]
) -> list[FindingChange]:
    old, new = set(before), set(after)
    gone = [FindingChange(_finding_key(f), False, f) for f in before if f not in new]
    added = [FindingChange(_finding_key(f), True, f) for f in after if f not in old]
    return added + gone


# --------------------------------------------------------------------------- fleets


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes whose snapshots are alike, and how they differ from the reference."""

    nodes: tuple[str, ...]
    diff: Diff  # empty for the reference's own group


@dataclass(frozen=True, slots=True)
class FleetComparison:
    reference: str  # the node compared against
    chosen_by: str  # "majority", "--reference"
    groups: tuple[NodeGroup, ...]  # the reference's group first

    @property
    def differing(self) -> tuple[NodeGroup, ...]:
        return tuple(g for g in self.groups if not g.diff.empty)


def compare_fleet(
    snapshots: Sequence[tuple[str, Snapshot]], reference: str | None = None
) -> FleetComparison:
    """Group alike nodes, pick the reference (REFERENCE: a node's name or a unique start of
    it; else the largest group, ties to the first node), and diff each group against it.
    Nodes may share one Snapshot object (``analysis.fleet``): it is compared once."""
    if not snapshots:
        raise LibdoctorError("no snapshots to compare")
    groups: dict[tuple[object, ...], list[tuple[str, Snapshot]]] = {}
    shared: dict[int, list[tuple[str, Snapshot]]] = {}  # one Snapshot of many nodes: keyed once
    for label, snap in snapshots:
        group = shared.get(id(snap))
        if group is None:
            group = shared[id(snap)] = groups.setdefault(snap.compared(), [])
        group.append((label, snap))
    members = list(groups.values())
    if reference is not None:
        ref_label = _find_node(reference, [label for label, _ in snapshots])
        ref_group = next(g for g in members if any(label == ref_label for label, _ in g))
        chosen_by = "--reference"
    else:
        ref_group = max(members, key=len)  # max keeps the first of equals
        ref_label, chosen_by = ref_group[0][0], "majority"
    ref_snap = next(snap for label, snap in ref_group if label == ref_label)
    out = [NodeGroup(tuple(label for label, _ in ref_group), diff(ref_snap, ref_snap))]
    for group in members:
        if group is not ref_group:
            out.append(NodeGroup(tuple(label for label, _ in group), diff(ref_snap, group[0][1])))
    return FleetComparison(ref_label, chosen_by, tuple(out))


def _find_node(text: str, labels: Sequence[str]) -> str:
    if text in labels:
        return text
    starts = [label for label in labels if label.startswith(text) or f" {text}" in label]
    if len(starts) == 1:
        return starts[0]
    if not starts:
        raise LibdoctorError(f"--reference {text}: no such node (nodes: {', '.join(labels)})")
    raise LibdoctorError(f"--reference {text} names {len(starts)} nodes: {', '.join(starts)}")
