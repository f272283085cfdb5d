"""``bounded.nesting`` measures JSON depth without parsing: against the depth of the value
``json`` parses, for any value (strings full of brackets, quotes and backslashes), and
``gunzip`` against ``gzip.decompress`` for any bytes."""

from __future__ import annotations

import gzip
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from libdoctor.bounded import MAX_JSON_DEPTH, gunzip, nesting

_text = st.text(alphabet=st.sampled_from('[]{}"\\/ab\x00\u00e9\u2028:,'), max_size=8)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=40,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@settings(max_examples=500, deadline=None)
@given(_values, st.booleans())
def test_nesting_is_the_parsed_depth(value: Any, ascii_only: bool) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert nesting(data) == min(_depth(value), MAX_JSON_DEPTH + 1)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 200))
def test_deep_nesting_is_counted_to_the_limit(depth: int) -> None:
    data = ("[" * depth + "]" * depth).encode()
    assert nesting(data) == min(depth, MAX_JSON_DEPTH + 1)
    assert nesting(b"[" * depth) == min(depth, MAX_JSON_DEPTH + 1)  # never closed


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=5000), st.integers(1, 3))
def test_gunzip_is_gzip_decompress(data: bytes, members: int) -> None:
    packed = gzip.compress(data) * members
    assert gunzip(packed) == data * members
