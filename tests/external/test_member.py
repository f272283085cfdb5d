"""``MemberView``: a zip member inflated only as far as its reader asks, within a budget."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

from libdoctor.elf.dynamic import parse_elf, parse_elf_at
from libdoctor.external.member import DEFLATED, STORED, MemberError, MemberView
from support.cc import compile_lib


def deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


class Counting:
    """A fetch over DATA that counts what it gave."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.given = 0

    def __call__(self, start: int, end: int) -> bytes:
        self.given += end - start
        return self.data[start:end]


@pytest.fixture(scope="module")
def elf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("member")
    library = compile_lib(out, "libx.so", needed=["libfoo.so.1"], runpath="$ORIGIN/../x.libs")
    # what follows the dynamic section (here: noise that does not compress) is never inflated
    return library.read_bytes() + random.Random(0).randbytes(1 << 20)


def test_the_dynamic_section_is_read_without_inflating_what_follows(elf: bytes) -> None:
    packed = deflate(elf)
    fetch = Counting(packed)
    view = MemberView(fetch, DEFLATED, len(packed), len(elf), budget=len(packed))
    info = parse_elf_at(view.read_at, len(elf))
    assert info == parse_elf(elf)
    assert (info.needed, info.runpath) == (("libfoo.so.1",), "$ORIGIN/../x.libs")
    assert fetch.given < len(packed) / 2


def test_a_stored_member_is_read_where_asked(elf: bytes) -> None:
    view = MemberView(Counting(elf), STORED, len(elf), len(elf), budget=len(elf))
    assert parse_elf_at(view.read_at, len(elf)) == parse_elf(elf)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("budget", "budget"),
        ("not deflate", "not a deflate stream"),
        ("cut short", "ends before"),
        ("method", "compression method 12"),
    ],
)
def test_what_cannot_be_read_is_one_member_error(elf: bytes, case: str, expected: str) -> None:
    packed = deflate(elf)
    method, budget = DEFLATED, len(packed)
    if case == "budget":
        budget = 1000
    elif case == "not deflate":
        packed = b"\xff" * len(packed)
    elif case == "cut short":
        packed = packed[:200]
    elif case == "method":
        method = 12
    with pytest.raises(MemberError, match=expected):
        view = MemberView(Counting(packed), method, len(packed), len(elf), budget)
        view.read_at(len(elf) - 100, 100)


def test_a_member_never_inflates_past_its_declared_size(tmp_path: Path) -> None:
    bomb = deflate(bytes(50 << 20))  # 50 MB of zeros, 50 kB packed
    view = MemberView(Counting(bomb), DEFLATED, len(bomb), 4096, budget=len(bomb))
    assert view.read_at(0, 1 << 30) == bytes(4096)
