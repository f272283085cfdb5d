"""Issue 26: a fleet's snapshots read by digest (``analysis.fleet``). The streamed reader
gives the comparison the plain one (``decode`` each, ``compare_fleet``) gives; alike nodes
share one Snapshot, a differing node only its differing distributions; a Ray node's digests
bring its full snapshot only when they are new, and a node whose snapshot belies them fails."""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from libdoctor.analysis.diff import compare_fleet
from libdoctor.analysis.fleet import FleetReader, decode_digests, digests_of
from libdoctor.analysis.snapshot import Snapshot, SnapshotError, decode, encode, frame, frames
from support.hostile import DEEP, gzip_bomb
from support.snapshots import changed_row, made_snapshot, without_dist


def _fleet() -> list[tuple[str, bytes]]:
    """Ten nodes: n3 with a file changed, n6 without a distribution, n8 the base written
    by hand (indented, keys unsorted), n9 the base but for a library's soname (a field no
    diff compares), n5 gzip'd; the rest the base under their own names."""
    base = made_snapshot(4, 30)
    libc = dataclasses.replace(base.libraries[0], soname="libc.so.7")
    odd = {
        "n3": changed_row(base, 2, 7),
        "n6": without_dist(base, 1),
        "n9": dataclasses.replace(base, libraries=(libc, *base.libraries[1:])),
    }
    nodes = []
    for i in range(10):
        name = f"n{i}"
        snap = dataclasses.replace(odd.get(name, base), node=name, prefix=f"/envs/{name}")
        data = encode(snap, gzipped=name == "n5")
        if name == "n8":
            doc = json.loads(data)
            data = json.dumps(dict(reversed(doc.items())), indent=2).encode()
        nodes.append((name, data))
    return nodes


def _streamed(nodes: list[tuple[str, bytes]]) -> list[tuple[str, Snapshot]]:
    reader = FleetReader()
    return [(label, reader.read(data, label)[1]) for label, data in nodes]


@pytest.mark.parametrize("reference", [None, "n9", "n3"])
def test_the_streamed_reader_compares_as_the_plain_one(reference: str | None) -> None:
    nodes = _fleet()
    plain = compare_fleet([(label, decode(data, label)) for label, data in nodes], reference)
    streamed = compare_fleet(_streamed(nodes), reference)
    assert streamed == plain
    differing = sorted(n for g in streamed.differing for n in g.nodes)
    assert differing == (["n3", "n6"] if reference != "n3" else sorted(set(dict(nodes)) - {"n3"}))


def test_alike_nodes_share_one_snapshot_and_a_differing_one_its_differences() -> None:
    snaps = dict(_streamed(_fleet()))
    base = snaps["n0"]
    assert all(snaps[n] is base for n in ("n1", "n2", "n4", "n5", "n7", "n8"))
    assert len({id(s) for s in snaps.values()}) == 4  # the base, n3, n6, n9
    changed, missing = snaps["n3"], snaps["n6"]
    assert [a is b for a, b in zip(changed.distributions, base.distributions, strict=True)] == [
        True,
        True,
        False,
        True,
    ]
    assert all(any(d is b for b in base.distributions) for d in missing.distributions)
    assert snaps["n9"].distributions is base.distributions or all(
        a is b for a, b in zip(snaps["n9"].distributions, base.distributions, strict=True)
    )


def test_a_node_is_fetched_only_for_digests_not_seen() -> None:
    nodes = _fleet()
    answers = {label: digests_of(data, label).encode() for label, data in nodes}
    fetched: list[str] = []

    def fetch(label: str) -> bytes:
        fetched.append(label)
        return dict(nodes)[label]

    reader = FleetReader()
    pairs = [
        (label, reader.answer(decode_digests(answers[label], label), partial(fetch, label), label))
        for label, _ in nodes
    ]
    # n5 gzip'd: the digests are of its text; n8 by hand: other text, fetched, found alike
    assert fetched == ["n0", "n3", "n6", "n8", "n9"]
    assert compare_fleet(pairs) == compare_fleet(_streamed(nodes))


def test_a_node_whose_snapshot_belies_its_digests_fails() -> None:
    nodes = dict(_fleet())
    reader = FleetReader()
    claimed = decode_digests(digests_of(nodes["n0"], "n0").encode(), "liar")
    with pytest.raises(SnapshotError, match="liar: its snapshot does not match the digests"):
        reader.answer(claimed, lambda: nodes["n3"], "liar")


@pytest.mark.parametrize(
    "answer",
    [
        b"[]",
        b'{"schema": "libdoctor-snapshot-digests"}',
        b"[" * 100_000,
        json.dumps(
            {
                "schema": "libdoctor-snapshot-digests",
                "node": "a",
                "prefix": "/",
                "parts": dict.fromkeys(
                    ("deep", "interpreter", "platform", "libraries", "stack", "findings"), "0" * 64
                ),
                "distributions": ["../../etc/passwd"],
            }
        ).encode(),
    ],
    ids=["a list", "no fields", "nested deep", "a digest not hex"],
)
def test_a_bad_answer_is_a_snapshot_error(answer: bytes) -> None:
    with pytest.raises(SnapshotError, match=r"^node x: "):
        decode_digests(answer, "node x")


def test_frames_are_given_as_they_complete_and_only_those_under_way_held() -> None:
    one, two = gzip.compress(b"one" * 1000), gzip.compress(b"two" * 1000)
    first, second = frame("0", "a", one).splitlines(), frame("1", "b", two).splitlines()
    done = []
    for got in frames([first[0], second[0], *second[1:], *first[1:]]):
        done.append(got)
        if len(done) == 1:
            assert got == ("1", "b", two)  # before a's frame has ended
    assert done == [("1", "b", two), ("0", "a", one)]


def _respelled(data: bytes, how: str) -> bytes:
    doc = json.loads(data)
    if how == "spaced":
        return json.dumps(doc, separators=(", ", ": ")).encode()
    if how == "ascii escapes":
        return json.dumps(doc, ensure_ascii=True).encode()
    if how == "a BOM and whitespace around":
        return b"\xef\xbb\xbf \n" + data + b"\n\t "
    if how == "distributions twice, the last kept":
        head = json.dumps({"distributions": [1, 2]})[1:-1].encode()  # json.loads keeps the last
        return b"{" + head + b"," + data.lstrip()[1:]
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "spaced",
        "ascii escapes",
        "a BOM and whitespace around",
        "distributions twice, the last kept",
    ],
)
def test_a_document_spelled_otherwise_reads_as_the_plain_reader_reads_it(how: str) -> None:
    snap = made_snapshot(2, 5)
    dist = dataclasses.replace(snap.distributions[0], name="pkg-é", key="pkg-é")
    snap = dataclasses.replace(snap, distributions=(dist, *snap.distributions[1:]))
    data = _respelled(encode(snap), how)
    reader = FleetReader()
    reader.read(encode(snap), "canonical")
    node, read = reader.read(data, how)
    assert read == decode(data, how) and node == snap.node
    assert read is reader.read(encode(snap), "again")[1]  # alike in value: one Snapshot


def _edited(edit: Callable[[dict[str, Any]], object]) -> bytes:
    doc = json.loads(encode(made_snapshot(2, 3)))
    edit(doc)
    return json.dumps(doc).encode()


def _header(old: bytes, new: bytes) -> bytes:
    """The good snapshot's bytes with a header field changed, every part's text alike."""
    data = encode(made_snapshot(2, 3))
    assert data.count(old) == 1
    return data.replace(old, new)


def _named(node: bytes) -> bytes:
    """The good snapshot's bytes with NODE in place of its node name's JSON string."""
    data = encode(made_snapshot(2, 3))
    assert data.count(b'"node":"node"') == 1
    return data.replace(b'"node":"node"', b'"node":' + node)


BAD = {
    "a node with a control character": _named(b'"a\x01b"'),
    "a node with an unknown escape": _named(b'"a\\qb"'),
    "a node not UTF-8": _named(b'"a\xffb"'),
    "a node not closed": _named(b'"abc'),
    "a node a number": _named(b"7"),
    "empty": b"",
    "cut short": encode(made_snapshot(1, 2))[:-30],
    "a list": b"[1, 2]",
    "another schema": b'{"schema": "other"}',
    "schema_version true": _edited(lambda d: d.update(schema_version=True)),
    "another schema_version, the parts alike": _header(
        b'"schema_version":1', b'"schema_version":2'
    ),
    "another schema, the parts alike": _header(
        b'"schema":"libdoctor-snapshot"', b'"schema":"libdoctor-other"'
    ),
    "nested 100,000 deep": DEEP,
    "the same gzip'd": gzip.compress(DEEP),
    "a gzip bomb": gzip_bomb(64),
    "gzip cut short": gzip.compress(encode(made_snapshot(1, 2)))[:-12],
    "a row with a NUL": _edited(lambda d: d["distributions"][1]["files"][0].__setitem__(0, "\0")),
    "a size not a number": _edited(lambda d: d["distributions"][0]["files"][2].__setitem__(1, "x")),
    "no distributions": _edited(lambda d: d.pop("distributions")),
    "distributions an object": _edited(lambda d: d.update(distributions={})),
    "a node not a string": _edited(lambda d: d.update(node=7)),
    "no findings": _edited(lambda d: d.pop("findings")),
    "a bad stack": _edited(lambda d: d["stack"].update(frameworks=[1])),
}


@pytest.mark.parametrize("data", BAD.values(), ids=BAD.keys())
def test_a_bad_snapshot_is_refused_with_the_plain_readers_words(data: bytes) -> None:
    with pytest.raises(SnapshotError) as plain:
        decode(data, "node x")
    reader = FleetReader()
    reader.read(encode(made_snapshot(2, 3)), "a good one first")
    with pytest.raises(SnapshotError) as streamed:
        reader.read(data, "node x")
    assert str(streamed.value) == str(plain.value)


@pytest.mark.parametrize(
    "node", [b'"n\\u00e9\\"x"', '"ünï"'.encode(), b'"a\\/b\\nc"', b'""'], ids=repr
)
def test_a_node_named_otherwise_shares_the_snapshot_of_one_read_before(node: bytes) -> None:
    """Bytes alike but for the node's name: compared as bytes, never parsed (the template)."""
    reader = FleetReader()
    first = reader.read(encode(made_snapshot(2, 3)), "first")[1]
    data = _named(node)
    assert reader.read(data, "second") == (json.loads(node), first)
    assert dataclasses.replace(decode(data, "plain"), node="node") == first


def test_a_fleet_of_many_kinds_compares_as_the_plain_one() -> None:
    """Twelve kinds of node (more than the reader keeps bytes of), each twice, interleaved."""
    base = made_snapshot(3, 12)
    kinds = [changed_row(base, k % 3, k) for k in range(12)]
    nodes = [
        (f"n{i}", encode(dataclasses.replace(kinds[i % 12], node=f"n{i}", prefix=f"/p{i}")))
        for i in range(24)
    ]
    plain = compare_fleet([(label, decode(data, label)) for label, data in nodes])
    streamed = _streamed(nodes)
    assert compare_fleet(streamed) == plain and len(plain.groups) == 12
    assert len({id(snap) for _, snap in streamed}) == 12
