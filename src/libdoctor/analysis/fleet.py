"""A fleet's snapshots read by digest: alike nodes share one copy, in memory and in time.

A thousand nodes' snapshots of one torch environment are a thousand times 16k file rows;
read whole and kept (``snapshot.decode``), they did not fit in 4 GB. Here each snapshot is
parsed once by the C JSON scanner, its parts (``snapshot.PARTS``) and each distribution
digested from their own text, and nothing more is built for a node whose digests were seen
before: it shares the Snapshot of the first node that had them. A part or distribution not
seen before is read and checked as ``from_document`` reads it, then interned by value, so a
node that differs in one distribution holds only that one of its own, and two documents
alike in value but not in bytes (one written by hand) still share everything.

Cheaper still, and the common case: a node whose bytes are those of a document read before
but for its node and prefix strings is that document's Snapshot, found by comparing bytes
(``_Template``); 1,000 torch snapshots then cost what reading their files costs.

The digests are of the document's own text (the writer is deterministic: one environment,
one text), so a Ray node can send its digests alone (``Digests``, ``digests_of``) and the
full snapshot only when its group is new (``FleetReader.answer``). Equal digests mean equal
text, hence equal values; unequal digests only send the reader to compare values.

The plain path is ``snapshot.decode`` of each node and ``diff.compare_fleet``: the tests
compare the two. Nodes that share a Snapshot share its ``node`` and ``prefix`` fields too
(the first node's): a fleet labels its nodes itself, and a diff compares neither.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from libdoctor.analysis.snapshot import (
    PARTS,
    Snapshot,
    SnapshotError,
    assemble,
    canonical_json,
    decode,
    inflate,
    read_distribution,
    read_header,
    read_part,
)
from libdoctor.bounded import MAX_JSON_DEPTH, MAX_SMALL_FILE_BYTES, loads_json, nesting

__all__ = ["DIGESTS_SCHEMA", "Digests", "FleetReader", "decode_digests", "digests_of"]

DIGESTS_SCHEMA = "libdoctor-snapshot-digests"


@dataclass(frozen=True, slots=True)
class Digests:
    """What a node says of its snapshot without sending it: its name and prefix, and the
    SHA-256 of each part's text (PARTS order) and of each distribution's (document order)."""

    node: str
    prefix: str
    parts: tuple[str, ...]
    distributions: tuple[str, ...]

    @property
    def signature(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return self.parts, self.distributions

    def encode(self) -> bytes:
        """The answer's bytes (canonical JSON), as ``decode_digests`` reads them."""
        document = {
            "schema": DIGESTS_SCHEMA,
            "node": self.node,
            "prefix": self.prefix,
            "parts": dict(zip(PARTS, self.parts, strict=True)),
            "distributions": list(self.distributions),
        }
        return canonical_json(document).encode("utf-8")


_HEX = re.compile(r"[0-9a-f]{64}")


def decode_digests(data: bytes, source: str) -> Digests:
    """A node's answer (``Digests.encode``), checked: at most MAX_SMALL_FILE_BYTES, every
    digest 64 hex digits; SnapshotError naming SOURCE otherwise."""
    if len(data) > MAX_SMALL_FILE_BYTES:
        raise SnapshotError(f"{source}: digests larger than MAX_SMALL_FILE_BYTES, not read")
    try:
        doc = loads_json(data)
    except ValueError as exc:
        raise SnapshotError(f"{source}: not snapshot digests ({exc})") from None
    ok = isinstance(doc, dict) and doc.get("schema") == DIGESTS_SCHEMA
    parts = doc.get("parts") if ok else None
    dists = doc.get("distributions") if ok else None
    named = isinstance(parts, dict) and sorted(parts) == sorted(PARTS)
    texts = ok and isinstance(doc.get("node"), str) and isinstance(doc.get("prefix"), str)
    if not (named and texts and isinstance(dists, list)):
        raise SnapshotError(f"{source}: not snapshot digests ({DIGESTS_SCHEMA})")
    assert isinstance(parts, dict) and isinstance(dists, list)
    values = [parts[name] for name in PARTS] + dists
    if not all(isinstance(v, str) and _HEX.fullmatch(v) for v in values):
        raise SnapshotError(f"{source}: a digest that is not 64 hex digits")
    return Digests(doc["node"], doc["prefix"], tuple(values[: len(PARTS)]), tuple(dists))


def digests_of(data: bytes, source: str) -> Digests:
    """The digests of a snapshot's bytes (what a Ray node sends of its own); its schema
    checked, its parts not (the reader checks what it has not seen)."""
    scanned = _scan(inflate(data, source))
    if scanned is None:  # not the shape a snapshot has: say why as a plain read does
        decode(data, source)
        raise SnapshotError(f"{source}: not a snapshot libdoctor can digest")
    read_header(scanned.document, source)
    return scanned.digests


# --------------------------------------------------------------------------- scanning


@dataclass(frozen=True, slots=True)
class _Scanned:
    document: dict[str, Any]  # as json.loads gives it
    digests: Digests
    text: str
    cuts: tuple[tuple[int, int], tuple[int, int]] | None  # the node's and prefix's spans (UTF-8)


class _NotScanned(Exception):
    """Not the shape the scanner follows: the plain reader says what is wrong."""


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's own whitespace


def _digest(text: str, span: tuple[int, int]) -> str:
    data = text[span[0] : span[1]].encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def _scan(data: bytes) -> _Scanned | None:
    """DATA parsed as ``json.loads`` parses it (the C scanner, value by value), with the
    text span of each top-level value and of each distribution digested. None: nested past
    MAX_JSON_DEPTH, not JSON, or not an object of the snapshot's shape (the plain reader
    then says which)."""
    if nesting(data) > MAX_JSON_DEPTH:
        return None  # refused by the plain reader, with its own words
    try:
        text = data.decode(json.detect_encoding(data), "surrogatepass")
        document, spans, dist_spans = _members(text)
    except (_NotScanned, ValueError, RecursionError):
        return None
    node, prefix = document.get("node"), document.get("prefix")
    rows = isinstance(document.get("distributions"), list)
    if not (isinstance(node, str) and isinstance(prefix, str)):
        return None
    if not (rows and set(PARTS) <= spans.keys()):
        return None
    parts = tuple(_digest(text, spans[name]) for name in PARTS)
    dists = tuple(_digest(text, span) for span in dist_spans)
    utf8 = json.detect_encoding(data).startswith("utf-8")
    cuts = (spans["node"], spans["prefix"]) if utf8 else None
    return _Scanned(document, Digests(node, prefix, parts, dists), text, cuts)


def _space(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _members(
    text: str,
) -> tuple[dict[str, Any], dict[str, tuple[int, int]], list[tuple[int, int]]]:
    """The top-level object of TEXT: its members, each value's span, and the span of each
    element of its ``distributions`` array (its last, as json.loads keeps the last of a
    repeated key)."""
    document: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    dist_spans: list[tuple[int, int]] = []
    at = _expect(text, _space(text, 0), "{")
    if text.startswith("}", at):
        return document, spans, dist_spans
    while True:
        key, at = _DECODER.raw_decode(text, at)
        if not isinstance(key, str):
            raise _NotScanned
        at = _expect(text, _space(text, at), ":")
        if key == "distributions" and text.startswith("[", at):
            value, end, dist_spans = _elements(text, at)
        else:
            value, end = _DECODER.raw_decode(text, at)
            dist_spans = [] if key == "distributions" else dist_spans
        document[key], spans[key] = value, (at, end)
        at = _space(text, end)
        if text.startswith("}", at):
            break
        at = _expect(text, at, ",")
    if _space(text, at + 1) != len(text):
        raise _NotScanned  # extra data after the object
    return document, spans, dist_spans


def _elements(text: str, at: int) -> tuple[list[Any], int, list[tuple[int, int]]]:
    """The array at AT: its values, where it ends, and each element's span."""
    values: list[Any] = []
    spans: list[tuple[int, int]] = []
    at = _space(text, at + 1)
    if text.startswith("]", at):
        return values, at + 1, spans
    while True:
        value, end = _DECODER.raw_decode(text, at)
        values.append(value)
        spans.append((at, end))
        at = _space(text, end)
        if text.startswith("]", at):
            return values, at + 1, spans
        at = _expect(text, at, ",")


def _expect(text: str, at: int, char: str) -> int:
    """Past CHAR at AT, and the whitespace after it."""
    if not text.startswith(char, at):
        raise _NotScanned
    return _space(text, at + 1)


# --------------------------------------------------------------------------- templates

# A JSON string token, exactly as json.loads takes one (no control characters, no unknown
# escape): it ends at the first quote not escaped.
_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
# What a reader keeps of documents to compare bytes with: a node unlike them all is compared
# with each before it is parsed (a compare stops at the first byte that differs).
TEMPLATES, TEMPLATE_BYTES = 8, 64 << 20


@dataclass(frozen=True, slots=True)
class _Template:
    """A document read before, as its bytes with the node's and prefix's values cut out. A
    document that is these bytes with other JSON strings in those two places has the same
    value but for those two strings (the bytes before each cut are the same, so a JSON
    parser is in the same state at it; a string token leaves it in the same state after):
    found by comparing bytes, parsing nothing but the two strings."""

    head: bytes
    middle: bytes
    tail: bytes
    node_first: bool
    snapshot: Snapshot

    @classmethod
    def of(cls, data: bytes, scanned: _Scanned, snapshot: Snapshot) -> _Template | None:
        """The template of DATA (read as SCANNED into SNAPSHOT); None when not UTF-8."""
        if scanned.cuts is None:
            return None
        node, prefix = scanned.cuts
        (a, b), (c, d) = sorted((node, prefix))
        if len(scanned.text) != len(data):  # not ASCII (or a BOM): text offsets to bytes
            tails = (len(scanned.text[at:].encode("utf-8", "surrogatepass")) for at in (a, b, c, d))
            a, b, c, d = (len(data) - tail for tail in tails)
        return cls(data[:a], data[b:c], data[d:], node[0] < prefix[0], snapshot)

    @property
    def size(self) -> int:
        return len(self.head) + len(self.middle) + len(self.tail)

    def node(self, data: bytes) -> str | None:
        """The node name DATA gives if it is this document but for the two strings."""
        if not (data.startswith(self.head) and data.endswith(self.tail)):
            return None
        one = _STRING.match(data, len(self.head))
        if one is None or not data.startswith(self.middle, one.end()):
            return None
        two = _STRING.match(data, one.end() + len(self.middle))
        if two is None or two.end() != len(data) - len(self.tail):
            return None
        try:
            node = json.loads(one.group() if self.node_first else two.group())
            json.loads(two.group() if self.node_first else one.group())
        except ValueError:  # not UTF-8
            return None
        assert isinstance(node, str)
        return node


# --------------------------------------------------------------------------- the reader

_Held = tuple[int, Any]  # a value interned by the reader, and its serial number


class FleetReader:
    """Snapshots read one at a time, alike nodes sharing one Snapshot: per digest of a
    part or a distribution the value read once; per set of digests the Snapshot made once.
    Held: one Snapshot per distinct set of values, made of the distinct values."""

    def __init__(self) -> None:
        self._by_digests: dict[tuple[tuple[str, ...], tuple[str, ...]], Snapshot] = {}
        self._parts: dict[tuple[str, str], _Held] = {}  # (part, digest) -> value
        self._dists: dict[str, _Held] = {}  # digest -> value
        self._values: dict[Hashable, _Held] = {}  # a value (as a key) -> the one held
        self._snapshots: dict[tuple[int, ...], Snapshot] = {}  # serials -> Snapshot
        self._templates: list[_Template] = []  # the last one matched first
        self._template_bytes = 0

    def read(self, data: bytes, source: str) -> tuple[str, Snapshot]:
        """The node name DATA (a snapshot's bytes, gzip'd or not) gives, and its Snapshot:
        shared with every node read before whose parts and distributions were alike.
        Bounded and checked as ``snapshot.decode``; SnapshotError naming SOURCE. A node
        whose bytes are a document's read before but for its name and prefix is not
        parsed at all (``_Template``)."""
        text = inflate(data, source)
        for i, template in enumerate(self._templates):
            node = template.node(text)
            if node is not None:
                self._templates.insert(0, self._templates.pop(i))
                return node, template.snapshot
        scanned = _scan(text)
        if scanned is None:  # not what the scanner follows: the plain reader's verdict
            snap = decode(data, source)
            return snap.node, self._held(snap)
        snap = self._snapshot(scanned, source)
        self._remember(text, scanned, snap)
        return scanned.digests.node, snap

    def answer(self, digests: Digests, fetch: Callable[[], bytes], source: str) -> Snapshot:
        """The Snapshot of a node that sent only DIGESTS: shared when they were seen before,
        else FETCHed (the node's full snapshot) and read. A snapshot unlike the digests its
        node sent is a SnapshotError (a node vouches for its own answer only)."""
        known = self._by_digests.get(digests.signature)
        if known is not None:
            return known
        scanned = _scan(inflate(fetch(), source))
        if scanned is None or scanned.digests.signature != digests.signature:
            raise SnapshotError(f"{source}: its snapshot does not match the digests it sent")
        return self._snapshot(scanned, source)

    def _remember(self, data: bytes, scanned: _Scanned, snap: Snapshot) -> None:
        """DATA (read as SCANNED into SNAP) kept as a template, while there is room."""
        room = len(self._templates) < TEMPLATES
        template = _Template.of(data, scanned, snap) if room else None
        if template is not None and self._template_bytes + template.size <= TEMPLATE_BYTES:
            self._templates.append(template)
            self._template_bytes += template.size

    def _snapshot(self, scanned: _Scanned, source: str) -> Snapshot:
        # Every document's header, not only a new set of digests': they digest the parts
        # alone, and a snapshot of another schema or version is refused as decode refuses it.
        read_header(scanned.document, source)
        signature = scanned.digests.signature
        known = self._by_digests.get(signature)
        if known is None:
            known = self._by_digests[signature] = self._build(scanned, source)
        return known

    def _build(self, scanned: _Scanned, source: str) -> Snapshot:
        """The Snapshot of digests not seen together before: what was not seen at all read
        and checked, in ``from_document``'s order; the rest reused."""
        document, digests = scanned.document, scanned.digests
        got = dict(zip(PARTS, digests.parts, strict=True))
        parts = {name: self._part(document, name, got[name], source) for name in PARTS[:3]}
        rows = zip(document["distributions"], digests.distributions, strict=True)
        dists = [self._dist(raw, i, digest, source) for i, (raw, digest) in enumerate(rows)]
        parts.update((name, self._part(document, name, got[name], source)) for name in PARTS[3:])
        return self._assembled(digests.node, digests.prefix, parts, dists)

    def _part(self, document: dict[str, Any], name: str, digest: str, source: str) -> _Held:
        held = self._parts.get((name, digest))
        if held is None:
            value = read_part(document, name, source)
            held = self._parts[(name, digest)] = self._intern((name, _hashable(value)), value)
        return held

    def _dist(self, raw: object, index: int, digest: str, source: str) -> _Held:
        held = self._dists.get(digest)
        if held is None:
            dist = read_distribution(raw, index, source)
            held = self._dists[digest] = self._intern(dist, dist)
        return held

    def _intern(self, key: Hashable, value: Any) -> _Held:
        """The value equal to VALUE (KEY: VALUE as a dict key) first held, and its serial."""
        return self._values.setdefault(key, (len(self._values), value))

    def _held(self, snap: Snapshot) -> Snapshot:
        """SNAP (read the plain way) made of the values held, or the Snapshot held alike."""
        values = {
            "deep": snap.deep,
            "interpreter": snap.interpreter,
            "platform": snap.platform,
            "libraries": snap.libraries,
            "stack": (snap.frameworks, snap.cuda_packages),
            "findings": snap.findings,
        }
        parts = {name: self._intern((name, _hashable(v)), v) for name, v in values.items()}
        dists = [self._intern(dist, dist) for dist in snap.distributions]
        return self._assembled(snap.node, snap.prefix, parts, dists)

    def _assembled(
        self, node: str, prefix: str, parts: dict[str, _Held], dists: list[_Held]
    ) -> Snapshot:
        """The Snapshot of these held values: made once, by their serial numbers."""
        serials = tuple(parts[name][0] for name in PARTS) + tuple(s for s, _ in dists)
        snap = self._snapshots.get(serials)
        if snap is None:
            values = {name: value for name, (_, value) in parts.items()}
            snap = assemble(node, prefix, values, tuple(dist for _, dist in dists))
            self._snapshots[serials] = snap
        return snap


def _hashable(value: Any) -> Hashable:
    """A part's value as a dict key: a mapping (interpreter, platform) by its items."""
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    assert isinstance(value, Hashable)
    return value
