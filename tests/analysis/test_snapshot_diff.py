"""``analysis.diff``: what two snapshots differ in, each change told once where it belongs,
and which node of a fleet is the reference. Snapshot values built in memory
(``support.snapshots``), the decisions checked one by one.

(Named for the snapshot diff: ``tests/cli/test_diff.py`` checks the command on real venvs.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from libdoctor.analysis.diff import compare_fleet, diff
from libdoctor.analysis.snapshot import FileRow, FindingRecord, LibraryRecord, Snapshot
from libdoctor.errors import LibdoctorError
from support.snapshots import made_snapshot, without_dist

BASE = made_snapshot(3, 4)


def with_dist(snap: Snapshot, index: int, **changes: Any) -> Snapshot:
    dists = list(snap.distributions)
    dists[index] = dataclasses.replace(dists[index], **changes)
    return dataclasses.replace(snap, distributions=tuple(dists))


def with_row(snap: Snapshot, index: int, row: int, **changes: Any) -> Snapshot:
    files = list(snap.distributions[index].files)
    files[row] = files[row]._replace(**changes)
    return with_dist(snap, index, files=tuple(files))


def test_the_same_snapshot_elsewhere_is_no_change() -> None:
    """The node's name and where the environment was are never compared."""
    moved = dataclasses.replace(BASE, node="other", prefix="/elsewhere")
    assert diff(BASE, moved).empty and diff(BASE, moved).count() == 0


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("1.0", "1.1", "upgraded"),
        ("1.10", "1.9", "downgraded"),  # versions compared as versions, not strings
        ("1.0", "not a version", "changed"),
    ],
)
def test_a_new_version_is_one_change_and_its_files_are_not_listed(
    before: str, after: str, kind: str
) -> None:
    old = with_dist(BASE, 1, version=before)
    new = with_row(with_dist(BASE, 1, version=after), 1, 0, size=1)
    found = diff(old, new)
    (change,) = found.versions
    assert (change.key, change.kind, change.before, change.after) == (
        "pkg-001",
        kind,
        (before,),
        (after,),
    )
    assert found.files == () and found.fields == ()


def test_added_removed_and_two_copies() -> None:
    assert [(v.kind, v.before) for v in diff(without_dist(BASE, 2), BASE).versions] == [
        ("added", ())
    ]
    assert [(v.kind, v.after) for v in diff(BASE, without_dist(BASE, 2)).versions] == [
        ("removed", ())
    ]
    second = dataclasses.replace(BASE.distributions[0], version="2.0", site="lib/other")
    two = dataclasses.replace(BASE, distributions=(*BASE.distributions, second))
    (change,) = diff(BASE, two).versions
    assert (change.kind, change.after) == ("changed", ("1.0", "2.0"))


# --------------------------------------------------------------------------- files


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({"size": None}, "missing"),
        ({"size": 7, "hash": "sha256=other"}, "changed"),
        ({"digest": "sha256=bytes-b"}, "changed"),
    ],
)
def test_a_file_at_the_same_version(changes: dict[str, Any], kind: str) -> None:
    before = with_row(BASE, 0, 2, digest="sha256=bytes-a")
    after = with_row(before, 0, 2, **changes)
    (change,) = diff(before, after).files
    assert (change.key, change.dist, change.kind) == ("pkg-000", "pkg-000 1.0", kind)
    assert change.path == BASE.distributions[0].files[2].path
    assert diff(before, after).versions == ()


def test_a_missing_file_that_returns_is_back() -> None:
    gone = with_row(BASE, 0, 1, size=None)
    (change,) = diff(gone, BASE).files
    assert change.kind == "back"


def test_a_digest_on_one_side_only_is_no_change() -> None:
    """A plain snapshot against a --deep one: the bytes are not known on both sides."""
    deep = with_row(BASE, 0, 0, digest="sha256=whatever")
    assert diff(BASE, deep).files == ()


def test_rows_added_and_removed() -> None:
    extra = FileRow("pkg_000/new.py", 3, "sha256=new")
    grown = with_dist(BASE, 0, files=(*BASE.distributions[0].files, extra))
    assert [(c.kind, c.path) for c in diff(BASE, grown).files] == [("added", extra.path)]
    assert [(c.kind, c.path) for c in diff(grown, BASE).files] == [("removed", extra.path)]


# --------------------------------------------------------------------------- fields and facts


def test_metadata_at_the_same_version_is_a_field_change_spelled_as_text() -> None:
    after = with_dist(BASE, 1, installer="uv", requested=True, extras=("cuda", "dev"))
    found = diff(BASE, after)
    assert [(f.key, f.subject, f.field, f.before, f.after) for f in found.fields] == [
        ("pkg-001", "pkg-001 1.0", "installer", "pip", "uv"),
        ("pkg-001", "pkg-001 1.0", "requested", "false", "true"),
        ("pkg-001", "pkg-001 1.0", "extras", "", "cuda, dev"),
    ]


def test_the_interpreter_platform_and_depth_come_first() -> None:
    after = dataclasses.replace(
        with_dist(BASE, 0, installer=None),
        interpreter={"version": "3.12.1", "tag": "cp311"},
        platform={"system": "Linux"},
        deep=True,
    )
    fields = [(f.key, f.subject, f.field, f.before, f.after) for f in diff(BASE, after).fields]
    assert fields == [
        (None, "interpreter", "version", "3.11.7", "3.12.1"),
        (None, "platform", "machine", "x86_64", None),
        (None, "snapshot", "deep", "false", "true"),
        ("pkg-000", "pkg-000 1.0", "installer", "pip", None),
    ]


# --------------------------------------------------------------------------- libraries


def lib(name: str, path: str | None, *owners: str) -> LibraryRecord:
    return LibraryRecord(name, path, None, tuple((o, "1.0") for o in owners), None, ("m.so",))


def with_libs(*libs: LibraryRecord) -> Snapshot:
    snap: Snapshot = dataclasses.replace(BASE, libraries=libs)
    return snap


def test_a_library_now_found_elsewhere_or_owned_by_another() -> None:
    before = with_libs(lib("libx.so.1", "a/libx.so.1", "pkg-a"))
    moved = with_libs(lib("libx.so.1", "b/libx.so.1", "pkg-a"))
    owner = with_libs(lib("libx.so.1", "a/libx.so.1", "pkg-b"))
    lost = with_libs(lib("libx.so.1", None))
    for after in (moved, owner, lost):
        (change,) = diff(before, after).libraries
        assert change.name == "libx.so.1" and change.key == "pkg-a"
    soname = with_libs(dataclasses.replace(before.libraries[0], soname="libx.so.9"))
    assert diff(before, soname).libraries == ()  # the resolution is path and owners


def test_a_library_requested_on_one_side_only() -> None:
    """It came or went with the modules that need it, which their distribution's change
    tells, unless it is newly requested and not found."""
    none = with_libs()
    assert diff(none, with_libs(lib("libnew.so", "a/libnew.so", "pkg-a"))).libraries == ()
    assert diff(with_libs(lib("libold.so", None)), none).libraries == ()
    (change,) = diff(none, with_libs(lib("libnew.so", None))).libraries
    assert (change.before, change.key) == ((), None)


# --------------------------------------------------------------------------- findings


def test_findings_new_then_gone_keyed_by_their_distribution() -> None:
    old = BASE.findings[0]
    new = FindingRecord("foreign-bytes", "warning", "Pkg_B 2.0", ("b.py",), "overwritten")
    machine = FindingRecord("loader-config", "info", None, (), "no cache")
    after = dataclasses.replace(BASE, findings=(new, machine))
    assert [(c.new, c.key, c.finding.code) for c in diff(BASE, after).findings] == [
        (True, "pkg-b", "foreign-bytes"),
        (True, None, "loader-config"),
        (False, "pkg-001", old.code),
    ]


# --------------------------------------------------------------------------- fleets


def fleet(*snaps: tuple[str, Snapshot]) -> list[tuple[str, Snapshot]]:
    return [(label, dataclasses.replace(s, node=label)) for label, s in snaps]


def test_the_reference_is_the_largest_group_ties_to_the_first_node() -> None:
    odd = without_dist(BASE, 0)
    nodes = fleet(("a", odd), ("b", BASE), ("c", BASE))
    found = compare_fleet(nodes)
    assert (found.reference, found.chosen_by) == ("b", "majority")
    assert [g.nodes for g in found.groups] == [("b", "c"), ("a",)]
    assert [g.nodes for g in found.differing] == [("a",)]
    (added,) = found.differing[0].diff.versions  # told from the reference's side
    assert (added.key, added.kind) == ("pkg-000", "removed")
    tie = compare_fleet(fleet(("a", odd), ("b", BASE)))
    assert tie.reference == "a"


def test_a_reference_by_a_unique_start_of_its_name() -> None:
    nodes = fleet(("gpu-01 rack1", BASE), ("gpu-02 rack2", without_dist(BASE, 1)))
    found = compare_fleet(nodes, "gpu-02")
    assert (found.reference, found.chosen_by) == ("gpu-02 rack2", "--reference")
    assert found.groups[0].nodes == ("gpu-02 rack2",) and found.groups[0].diff.empty
    assert compare_fleet(nodes, "rack1").reference == "gpu-01 rack1"  # a later word's start


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("cpu", "--reference cpu: no such node (nodes: gpu-01, gpu-02)"),
        ("gpu", "--reference gpu names 2 nodes: gpu-01, gpu-02"),
    ],
)
def test_a_reference_naming_no_node_or_several_is_refused(reference: str, message: str) -> None:
    with pytest.raises(LibdoctorError) as raised:
        compare_fleet(fleet(("gpu-01", BASE), ("gpu-02", BASE)), reference)
    assert str(raised.value) == message


def test_no_snapshots_is_refused() -> None:
    with pytest.raises(LibdoctorError, match="no snapshots to compare"):
        compare_fleet([])
