"""entry_points.txt by property: libdoctor's reader against importlib.metadata's own
(support.readers) on generated text, wherever importlib.metadata reads it at all."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from libdoctor.environment.metadata import parse_entry_points
from support.readers import importlib_entry_points

_pieces = st.sampled_from(
    [
        "[console_scripts]",
        "[gui_scripts]",
        " [ x ] ",
        "[[a]]",
        "[",
        "]",
        "tool = pkg:main",
        "  t2=p:m [e]  ",
        "a = b = c",
        "# comment",
        "; semi = colon",
        "",
        "   ",
        "\t",
        "x\x0cy = z",
        "u\u2028v = w",
        "=empty name",
        "name=",
    ]
)
_ends = st.sampled_from(["\n", "\r\n", "\r"])


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.tuples(_pieces, _ends), max_size=12))
def test_entry_points_are_importlib_metadatas(lines: list[tuple[str, str]]) -> None:
    text = "".join(piece + end for piece, end in lines)
    try:
        expected = importlib_entry_points(text)
    except (ValueError, TypeError):
        return  # a line without "=": importlib.metadata raises, libdoctor drops the line
    assert [tuple(e) for e in parse_entry_points(text)] == expected
