from __future__ import annotations

import csv
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from libdoctor.record import parse_record


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
