"""Truncated and byte-patched copies of real ELF files give an ElfInfo or ElfFormatError,
never another exception, and read_elf agrees with parse_elf on them."""

from __future__ import annotations

import functools
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libdoctor.elf.dynamic import ElfFormatError, ElfInfo, is_elf_magic, parse_elf, read_elf

FUZZ = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes
    hot: tuple[tuple[int, int], ...]  # [start, end) ranges where the parser looks


def _hot_ranges(data: bytes) -> tuple[tuple[int, int], ...]:
    """Header, program headers, PT_INTERP, PT_DYNAMIC and the start of the string table."""
    ranges = [(16, min(len(data), 64))]  # e_ident has its own tests in elf/test_dynamic.py
    is64 = data[4] == 2
    o = "<" if data[5] == 1 else ">"
    if is64:
        phoff, phentsize, phnum = (struct.unpack_from(o + f, data, at)[0] for f, at in
                                   (("Q", 32), ("H", 54), ("H", 56)))  # fmt: skip
    else:
        phoff, phentsize, phnum = (struct.unpack_from(o + f, data, at)[0] for f, at in
                                   (("I", 28), ("H", 42), ("H", 44)))  # fmt: skip
    ranges.append((phoff, phoff + phentsize * phnum))
    loads = []
    for i in range(phnum):
        at = phoff + i * phentsize
        if is64:
            p_type, _f, off, vaddr, _p, filesz = struct.unpack_from(o + "IIQQQQ", data, at)
        else:
            p_type, off, vaddr, _p, filesz = struct.unpack_from(o + "IIIII", data, at)
        if p_type in (2, 3):
            ranges.append((off, off + filesz))
        if p_type == 1:
            loads.append((off, vaddr, filesz))
        if p_type == 2:
            fmt = o + ("qQ" if is64 else "iI")
            for tag, val in struct.iter_unpack(fmt, data[off : off + filesz]):
                if tag == 5:
                    for l_off, l_vaddr, l_size in loads:
                        if l_vaddr <= val < l_vaddr + l_size:
                            start = l_off + val - l_vaddr
                            ranges.append((start, start + 512))
    return tuple((a, min(b, len(data))) for a, b in ranges if a < min(b, len(data)))


def _gcc_seeds(tmp: Path) -> Iterator[tuple[str, Path]]:
    gcc = shutil.which("gcc")
    if gcc is None:
        return
    src = tmp / "f.c"
    src.write_text("int f(void) { return 1; }\n")
    builds = {
        "gcc64": ["-Wl,-soname,libfuzz.so.1", "-Wl,-rpath,$ORIGIN/a:/b", "-Wl,-z,nodefaultlib"],
        "gcc32": ["-m32", "-nostdlib", "-Wl,-soname,libfuzz32.so", "-Wl,--disable-new-dtags",
                  "-Wl,-rpath,$ORIGIN"],
    }  # fmt: skip
    for name, args in builds.items():
        out = tmp / f"{name}.so"
        cmd = [gcc, "-shared", "-fPIC", *args, "-o", str(out), str(src)]
        if subprocess.run(cmd, capture_output=True).returncode == 0:
            yield name, out


@functools.cache
def seeds() -> tuple[Seed, ...]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = list(_gcc_seeds(Path(tmp)))
        for candidate in ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib64/libz.so.1"):
            if os.path.exists(candidate):
                paths.append(("libz", Path(os.path.realpath(candidate))))
                break
        paths.append(("python", Path(os.path.realpath(sys.executable))))
        found = []
        for name, path in paths:
            data = path.read_bytes()
            if is_elf_magic(data) and len(data) < 64 * 1024 * 1024:
                parse_elf(data)  # a seed must itself be good
                found.append(Seed(name, data, _hot_ranges(data)))
    return tuple(found)


def _seed(index: int) -> Seed:
    all_seeds = seeds()
    if not all_seeds:
        pytest.skip("no ELF seed files (no gcc, no libz, python not ELF)")
    return all_seeds[index % len(all_seeds)]


def _check(data: bytes) -> ElfInfo | None:
    try:
        return parse_elf(data)
    except ElfFormatError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None


INTERESTING = st.sampled_from(
    [0, 1, 2, 3, 0x7F, 0x80, 0xFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1]
)


@st.composite
def patches(draw: st.DrawFn) -> tuple[Seed, bytes]:
    seed = _seed(draw(st.integers(0, 100)))
    data = bytearray(seed.data)
    for _ in range(draw(st.integers(1, 6))):
        start, end = draw(st.sampled_from(seed.hot))
        pos = draw(st.integers(start, end - 1))
        if draw(st.booleans()):
            data[pos] = draw(st.integers(0, 255))
        else:
            width = draw(st.sampled_from([2, 4, 8]))
            value = draw(st.one_of(INTERESTING, st.integers(0, 2**64 - 1)))
            value &= (1 << (8 * width)) - 1
            chunk = value.to_bytes(width, "little" if data[5] == 1 else "big")
            data[pos : pos + width] = chunk[: len(data) - pos]
    return seed, bytes(data)


@FUZZ
@given(st.integers(0, 100), st.integers(0, 2**32))
def test_truncated_copies(which: int, cut: int) -> None:
    seed = _seed(which)
    # Half the cuts land in the structures the parser reads, half anywhere.
    start, end = seed.hot[cut % len(seed.hot)]
    n = start + cut % (end - start + 1) if cut % 2 else cut % (len(seed.data) + 1)
    _check(seed.data[:n])


@FUZZ
@given(patches())
def test_patched_copies(case: tuple[Seed, bytes]) -> None:
    _check(case[1])


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(FUZZ, max_examples=100)
@given(patches())
def test_read_elf_agrees_with_parse_elf(scratch: Path, case: tuple[Seed, bytes]) -> None:
    path = scratch / "case.so"
    path.write_bytes(case[1])
    expected = _check(case[1])
    try:
        got: ElfInfo | None = read_elf(str(path))
    except ElfFormatError:
        got = None
    assert got == expected


# Address tags the loader dereferences (elf.dynamic._ADDRESS_TAGS), spelled out here again.
ADDRESS_TAGS = {3, 4, 5, 6, 7, 12, 13, 17, 23, 25, 26, 32, 36, 0x6FFFFEF5, 0x6FFFFFF0,
                0x6FFFFFFC, 0x6FFFFFFE}  # fmt: skip


def _layout(data: bytes) -> tuple[str, bool, list[tuple[int, int, int, int, int]]]:
    """(struct byte order, is64, program headers as (type, offset, vaddr, filesz, memsz))."""
    is64 = data[4] == 2
    o = "<" if data[5] == 1 else ">"
    if is64:
        phoff, phnum = (
            struct.unpack_from(o + "Q", data, 32)[0],
            struct.unpack_from(o + "H", data, 56)[0],
        )
        rows = [struct.unpack_from(o + "IIQQQQQ", data, phoff + 56 * i) for i in range(phnum)]
        return o, is64, [(t, off, va, fs, ms) for t, _f, off, va, _p, fs, ms in rows]
    phoff, phnum = (
        struct.unpack_from(o + "I", data, 28)[0],
        struct.unpack_from(o + "H", data, 44)[0],
    )
    rows = [struct.unpack_from(o + "IIIIII", data, phoff + 32 * i) for i in range(phnum)]
    return o, is64, [(t, off, va, fs, ms) for t, off, va, _p, fs, ms in rows]


def _dynamic_slots(data: bytes) -> list[int]:
    """The file offset of each dynamic entry's tag and value, and of PT_DYNAMIC's p_vaddr."""
    o, is64, phdrs = _layout(data)
    size = 16 if is64 else 8
    slots = []
    for i, (p_type, off, _va, filesz, _ms) in enumerate(phdrs):
        if p_type == 2:
            entries = range(0, filesz - size + 1, size)
            slots += [off + at + half for at in entries for half in (0, size // 2)]
            phoff = struct.unpack_from(o + ("Q" if is64 else "I"), data, 32 if is64 else 28)[0]
            slots.append(phoff + (56 * i + 16 if is64 else 32 * i + 8))
    return slots


# Tables the loader walks by (base, byte size); spelled out again from elf.dynamic._TABLES.
TABLES = {7: 8, 17: 18, 36: 35, 25: 27, 26: 28, 32: 33}


def _loader_tags(data: bytes) -> dict[int, int] | None:
    """The last value of each tag, read as the loader reads the array: from PT_DYNAMIC's
    address, through the PT_LOAD holding it, to the first DT_NULL. None: PT_DYNAMIC's
    address is in no PT_LOAD's file bytes."""
    o, is64, phdrs = _layout(data)
    loads = [(off, va, fs) for t, off, va, fs, _ms in phdrs if t == 1]
    last: dict[int, int] = {}
    for p_type, _off, va, _fs, _ms in phdrs:
        if p_type != 2:
            continue
        hit = next(((lo, lva, lfs) for lo, lva, lfs in loads if lva <= va < lva + lfs), None)
        if hit is None:
            return None
        start = hit[0] + va - hit[1]
        size = 16 if is64 else 8
        raw = data[start : hit[0] + hit[2]]
        for tag, val in struct.iter_unpack(
            o + ("qQ" if is64 else "iI"), raw[: len(raw) // size * size]
        ):
            if tag == 0:
                break
            last[tag] = val
    return last


def _addresses_mapped(data: bytes) -> bool:
    """What a parse that succeeded promises: PT_DYNAMIC and every address tag's last value
    lie inside a PT_LOAD segment, and each table the loader walks fits in one."""
    _o, _is64, phdrs = _layout(data)
    spans = [(va, va + ms) for t, _off, va, _fs, ms in phdrs if t == 1]
    last = _loader_tags(data)
    if last is None or 5 not in last or 6 not in last:  # relocation reads both, always
        return False
    tables = dict(TABLES)
    if 20 in last:  # DT_PLTREL: then DT_JMPREL is walked for DT_PLTRELSZ bytes
        tables[23] = 2
    for base, size in tables.items():
        if last.get(base, 0) == 0 and base in (7, 17):
            continue
        if base in last:
            end = last[base] + last.get(size, 2**64)
            if not any(lo <= last[base] and end <= hi for lo, hi in spans):
                return False
    return all(
        any(lo <= val <= hi for lo, hi in spans)
        for tag, val in last.items()
        if tag in ADDRESS_TAGS and not (val == 0 and tag in (7, 17))
    )


@st.composite
def dynamic_patches(draw: st.DrawFn) -> bytes:
    """One dynamic entry's tag or value (or PT_DYNAMIC's address) replaced: by an interesting value,
    any value, or one near the original (still mapped, or just past a segment)."""
    seed = _seed(draw(st.integers(0, 100)))
    data = bytearray(seed.data)
    is64 = data[4] == 2
    order: Literal["little", "big"] = "little" if data[5] == 1 else "big"
    width = 8 if is64 else 4
    pos = draw(st.sampled_from(_dynamic_slots(seed.data)))
    old = int.from_bytes(data[pos : pos + width], order)
    value = draw(
        st.one_of(INTERESTING, st.integers(0, 2**64 - 1), st.integers(old - 0x10000, old + 0x10000))
    )
    data[pos : pos + width] = (value % (1 << (8 * width))).to_bytes(width, order)
    return bytes(data)


@FUZZ
@given(dynamic_patches())
def test_patched_dynamic_values_are_checked(data: bytes) -> None:
    """A value or ElfFormatError, never more; and a value only when the addresses the loader
    will dereference are mapped and the tables it walks fit (else `import` would segfault on
    a file check called fine)."""
    if _check(data) is not None:
        assert _addresses_mapped(data)
