"""Truncated and byte-flipped copies of a real ld.so.cache: a value or LdCacheError, never more."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libdoctor.loader.ldcache import LdCache, LdCacheError, parse_ld_cache

SYSTEM_CACHE = Path("/etc/ld.so.cache")


@pytest.fixture(scope="module")
def cache_bytes() -> bytes:
    if not SYSTEM_CACHE.is_file():
        pytest.skip("no /etc/ld.so.cache on this machine")
    return SYSTEM_CACHE.read_bytes()


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damaged_cache_parses_or_raises_ldcacheerror(
    cache_bytes: bytes, data: st.DataObject
) -> None:
    blob = bytearray(cache_bytes)
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, len(blob) - 1), st.integers(0, 255)), max_size=6)
    )
    for offset, value in flips:
        blob[offset] = value
    cut = data.draw(st.integers(0, len(blob)))
    try:
        parsed = parse_ld_cache(bytes(blob[:cut]))
    except LdCacheError:
        return
    assert isinstance(parsed, LdCache)
    for entry in parsed.entries[:50]:
        assert isinstance(entry.soname, str) and isinstance(entry.path, str)
        parsed.lookup(entry.soname, ("x86-64-v3", "x86-64-v2"))
