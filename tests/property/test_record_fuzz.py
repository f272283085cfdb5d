from __future__ import annotations

import csv
import io

from hypothesis import event, given, settings
from hypothesis import strategies as st

from libdoctor.environment.record import parse_record
from support.readers import record_from_csv


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_any_bytes_parse_without_exception(data: bytes) -> None:
    record = parse_record(data)
    for entry in record.entries:
        assert entry.path
        assert entry.size is None or entry.size >= 0


_paths = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\n\r\x00"),
    min_size=1,
    max_size=40,
) | st.sampled_from(["a\u2028b.py", "x\x85y.so", "dir/with space/f.py", 'q"uote.py'])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_paths, st.none() | st.integers(0, 10**12)), max_size=20))
def test_csv_written_rows_round_trip(rows: list[tuple[str, int | None]]) -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for path, size in rows:
        writer.writerow([path, "", "" if size is None else str(size)])
    record = parse_record(out.getvalue().encode("utf-8", "surrogateescape"))
    assert record.problems == ()
    assert [(e.path, e.size) for e in record.entries] == rows


# The fast path (one regex over the file) against the general row-by-row parser, on text
# mixing the rows pip writes with every kind of unusual one.
_HASH = "sha256=" + "A" * 42 + "-"
_fields = st.sampled_from(
    [
        "a",
        "b/c.py",
        "../../../bin/x",
        "./x",
        "/abs",
        "a//b",
        "a/./b",
        "a/.hidden",
        "dir/",
        "back\\slash",
        "nul\x00",
        "sp ace",
        "caf\udce9.so",
        "a\u2028b",
        "x.so.1",
        "\r",
        ".",
        "",
    ]
)
_paths_mixed = st.lists(_fields, min_size=1, max_size=3).map("/".join)
_hashes = st.sampled_from(["", _HASH, "sha256=short", "md5=" + "A" * 22, "SHA256=" + "a" * 64])
_sizes = st.sampled_from(["", "0", "123", "-1", "1.5", "\uff11"])  # fullwidth 1
_common = st.tuples(_paths_mixed, st.sampled_from(["", _HASH]), st.sampled_from(["", "0", "9"]))
_unusual = st.tuples(_paths_mixed, _hashes, _sizes).map(",".join) | st.sampled_from(["", "a,b"])
_rows = st.one_of(*[_common.map(",".join)] * 6, _unusual)


@settings(max_examples=400, deadline=None)
@given(st.lists(_rows, max_size=12), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_fast_path_agrees_with_the_general_parser(
    rows: list[str], newline: str, trailing: bool
) -> None:
    from libdoctor.environment.model import is_plain
    from libdoctor.environment.record import _parse_common, _parse_rows

    text = newline.join(rows) + (newline if trailing and rows else "")
    fast = _parse_common(text)
    event("fast path" if fast is not None else "general parser")
    if fast is None:
        return  # an unusual row: the general parser alone decides
    general = _parse_rows(text, None)
    assert fast.entries == general.entries and general.problems == ()
    assert fast.unplain == frozenset(e.path for e in general.entries if not is_plain(e.path))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a.so", "b.py", ".so", "", "x.so.1,y", "\r", "z"]), max_size=12),
    st.sampled_from([".so", "a", ","]),
)
def test_lines_containing_is_the_filtered_split(parts: list[str], needle: str) -> None:
    from libdoctor.environment.record import _lines_containing

    text = "\n".join(parts)
    expected = [(n, line) for n, line in enumerate(text.split("\n"), 1) if needle in line]
    assert list(_lines_containing(text, needle)) == expected


# The differential: every RECORD text, valid CSV or not, split into rows as the csv module
# splits it (support.readers.csv_rows, the file opened with newline=""): quotes, commas and
# line ends inside quotes, CR LF, bare CR, and the characters str.splitlines() breaks on.
_RECORD_CHARS = ["a", "b", ",", '"', "\r", "\n", " ", "\u2028", "\x85", "\x0c", "/", "1", "="]
_record_texts = st.lists(st.sampled_from([*_RECORD_CHARS, _HASH]), max_size=60).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_record_texts)
def test_rows_are_the_csv_modules(text: str) -> None:
    record = parse_record(text.encode("utf-8"))
    assert (list(record.entries), len(record.problems)) == record_from_csv(text)


_written_fields = st.text(alphabet=st.sampled_from(_RECORD_CHARS), min_size=1, max_size=8)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.tuples(_written_fields, st.sampled_from(["", _HASH]), st.sampled_from(["", "7"]))),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_what_csv_writes_reads_back(rows: list[tuple[str, str, str]], end: str) -> None:
    out = io.StringIO()
    csv.writer(out, lineterminator=end).writerows(rows)
    record = parse_record(out.getvalue().encode("utf-8"))
    assert (list(record.entries), len(record.problems)) == record_from_csv(out.getvalue())
