"""METADATA headers by property: libdoctor's reader against email.parser and importlib.metadata
(support.readers) on generated text, every line end and every odd character."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from libdoctor.environment.metadata import parse_metadata, read_header_lines, read_headers
from support.readers import email_headers, email_headers_of_bytes, importlib_metadata, pip_requires

# What makes a header reader go wrong: blanks, colons, "From ", and every character
# str.splitlines() treats as a line break although email does not.
_ODD = " \t:\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00\ufeffFrom"
_values = st.text(alphabet=st.sampled_from([*_ODD, "a", "b", "=", ";", ">", "1", "é"]), max_size=12)
_names = st.sampled_from(
    ["Name", "Version", "Requires-Dist", "requires-dist", "License", "X-!~", "", "Näme", "A B"]
)
_lines = st.one_of(
    st.tuples(_names, _values).map(lambda nv: f"{nv[0]}:{nv[1]}"),
    st.tuples(st.sampled_from([" ", "\t", "  ", " \t"]), _values).map("".join),
    st.sampled_from(["", " ", "\t", "From x", "From ", ": x", "garbage", "\x0c"]),
    _values,
)
_ends = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def _texts(draw: st.DrawFn, ends_from: st.SearchStrategy[str] = _ends) -> str:
    lines = draw(st.lists(_lines, max_size=14))
    ends = draw(st.lists(ends_from, min_size=len(lines), max_size=len(lines)))
    text = "".join(line + end for line, end in zip(lines, ends, strict=True))
    return text if draw(st.booleans()) else text.rstrip("\r\n")


@settings(max_examples=1500, deadline=None)
@given(_texts())
def test_headers_are_emails(text: str) -> None:
    assert read_headers(text) == email_headers(text)


@settings(max_examples=1500, deadline=None)
@given(_texts(st.just("\n")))
def test_the_fast_path_is_the_line_reader(text: str) -> None:
    """Text without CR takes the regex fast path: the same fields as line by line."""
    assert read_headers(text) == read_header_lines(text) == email_headers(text)


@settings(max_examples=600, deadline=None)
@given(_texts())
def test_name_version_requires_are_pips(text: str) -> None:
    meta = parse_metadata(text.encode("utf-8", "surrogatepass"))
    name, version, _ = importlib_metadata(text)
    assert (meta.name, meta.version) == ((name or "").strip(), (version or "").strip())
    assert list(meta.requires_dist) == pip_requires(text)


_byte_lines = st.lists(
    st.binary(max_size=10).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b""))
    | st.sampled_from([b"Requires-Dist: a\xe9", b" \xff", b"Name: x", b"", b"\xe9: v"]),
    max_size=10,
)


@settings(max_examples=600, deadline=None)
@given(_byte_lines, _ends)
def test_any_bytes_read_as_bytes_parser_reads_them(lines: list[bytes], end: str) -> None:
    data = end.encode().join(lines)
    text = data.decode("utf-8", "surrogateescape")
    ours = [
        (k.encode("utf-8", "surrogateescape"), v.encode("utf-8", "surrogateescape"))
        for k, v in read_headers(text)
    ]
    assert ours == email_headers_of_bytes(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000))
def test_any_metadata_bytes_parse(data: bytes) -> None:
    meta = parse_metadata(data)
    assert isinstance(meta.name, str) and isinstance(meta.version, str)
    assert all(isinstance(r, str) for r in meta.requires_dist)
