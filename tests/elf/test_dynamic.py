"""libdoctor.elf.dynamic against readelf on real files, gcc-built libraries, synthetic big-endian
images, byte-patched corrupt copies, and (opt-in, ``-m realenv``) a real torch env."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from libdoctor.elf.dynamic import (
    DF_1_NODEFLIB,
    ELFCLASS32,
    ELFCLASS64,
    EM_386,
    EM_X86_64,
    ElfFormatError,
    ElfInfo,
    is_elf_magic,
    parse_elf,
    read_elf,
)
from support.cc import gcc, gcc_ok, need

TORCH_ENV = Path(os.environ.get("LIBDOCTOR_TORCH_ENV", "/work/envs/torchenv"))

# ---------------------------------------------------------------- readelf as the oracle

_TYPES = {"NONE": 0, "REL": 1, "EXEC": 2, "DYN": 3, "CORE": 4}
_MACHINES = {
    "Advanced Micro Devices X86-64": 62,
    "Intel 80386": 3,
    "AArch64": 183,
    "PowerPC": 20,
    "PowerPC64": 21,
    "IBM S/390": 22,
}
# readelf prints DT_FLAGS_1 as names (binutils readelf.c, print_dynamic_flags_1).
_FLAGS_1 = {
    "NOW": 0x1,
    "GLOBAL": 0x2,
    "GROUP": 0x4,
    "NODELETE": 0x8,
    "LOADFLTR": 0x10,
    "INITFIRST": 0x20,
    "NOOPEN": 0x40,
    "ORIGIN": 0x80,
    "DIRECT": 0x100,
    "TRANS": 0x200,
    "INTERPOSE": 0x400,
    "NODEFLIB": 0x800,
    "NODUMP": 0x1000,
    "CONFALT": 0x2000,
    "ENDFILTEE": 0x4000,
    "DISPRELDNE": 0x8000,
    "DISPRELPND": 0x10000,
    "NODIRECT": 0x20000,
    "IGNMULDEF": 0x40000,
    "NOKSYMS": 0x80000,
    "NOHDR": 0x100000,
    "EDITED": 0x200000,
    "NORELOC": 0x400000,
    "SYMINTPOSE": 0x800000,
    "GLOBAUDIT": 0x1000000,
    "SINGLETON": 0x2000000,
    "STUB": 0x4000000,
    "PIE": 0x8000000,
}
_DYN_LINE = re.compile(rb"^\s*0x[0-9a-f]+ \((\w+)\)\s+(.*)$")


def readelf_info(path: Path | str) -> ElfInfo:
    """What ``readelf -h -l -d`` says, in ElfInfo form (strings via surrogateescape)."""
    out = subprocess.run(
        [need("readelf"), "-h", "-l", "-d", "-W", os.fspath(path)],
        capture_output=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    ).stdout

    def header(name: bytes) -> str:
        m = re.search(rb"^\s*" + name + rb":\s+(.*)$", out, re.M)
        assert m, f"readelf printed no {name!r}"
        return m.group(1).decode()

    machine_text = header(b"Machine")
    machine = _MACHINES.get(machine_text)
    assert machine is not None, f"add {machine_text!r} to _MACHINES"
    interp = re.search(rb"\[Requesting program interpreter: (.*)\]$", out, re.M)
    needed: list[str] = []
    values: dict[str, str] = {}
    flags_1 = 0
    for line in out.splitlines():
        m = _DYN_LINE.match(line)
        if not m:
            continue
        tag, value = m.group(1).decode(), m.group(2)
        bracket = re.search(rb"\[(.*)\]$", value)
        text = os.fsdecode(bracket.group(1)) if bracket else ""
        if tag == "NEEDED":
            needed.append(text)
        elif tag in ("SONAME", "RPATH", "RUNPATH"):
            values[tag] = text
        elif tag == "FLAGS_1":
            for word in value.decode().removeprefix("Flags:").split():
                flags_1 |= _FLAGS_1[word] if word in _FLAGS_1 else int(word, 16)
    return ElfInfo(
        elf_class=ELFCLASS64 if header(b"Class") == "ELF64" else ELFCLASS32,
        byteorder="little" if "little endian" in header(b"Data") else "big",
        machine=machine,
        elf_type=_TYPES[header(b"Type").split()[0]],
        interpreter=os.fsdecode(interp.group(1)) if interp else None,
        soname=values.get("SONAME"),
        needed=tuple(needed),
        rpath=values.get("RPATH"),
        runpath=values.get("RUNPATH"),
        flags_1=flags_1,
        has_dynamic=re.search(rb"^\s+DYNAMIC\s", out, re.M) is not None,
    )


def assert_like_readelf(path: Path | str) -> ElfInfo:
    info = read_elf(os.fspath(path))
    assert info == readelf_info(path)
    assert parse_elf(Path(path).read_bytes()) == info
    return info


# ---------------------------------------------------------------- building real libraries


SHARED = ("-shared", "-fPIC")
INTERP = "<the interpreter of this python>"

# (id, extra gcc args, expected fields of the result)
GCC_CASES: list[tuple[str, tuple[str | bytes, ...], dict[str, object]]] = [
    ("no-soname", SHARED, {"soname": None, "rpath": None, "runpath": None}),
    ("soname", (*SHARED, "-Wl,-soname,libx.so.7"), {"soname": "libx.so.7"}),
    (
        "rpath-old-dtags",
        (*SHARED, "-Wl,--disable-new-dtags", "-Wl,-rpath,/opt/a:$ORIGIN/../lib"),
        {"rpath": "/opt/a:$ORIGIN/../lib", "runpath": None},
    ),
    (
        "runpath-new-dtags",
        (*SHARED, "-Wl,--enable-new-dtags", "-Wl,-rpath,${ORIGIN}:/opt/b"),
        {"rpath": None, "runpath": "${ORIGIN}:/opt/b"},
    ),
    (
        "two-rpath-options-joined",
        (*SHARED, "-Wl,--disable-new-dtags", "-Wl,-rpath,/p1", "-Wl,-rpath,/p2"),
        {"rpath": "/p1:/p2"},
    ),
    (
        "empty-rpath-element",
        (*SHARED, "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN:"),
        {"runpath": "$ORIGIN:"},
    ),
    # GNU ld spells DF_1_NODEFLIB "-z nodefaultlib". binutils 2.40 ignores "-z nodeflib"
    # (with a warning), so that case checks only agreement with readelf.
    ("nodefaultlib", (*SHARED, "-Wl,-z,nodefaultlib"), {"flags_1": DF_1_NODEFLIB}),
    ("nodeflib", (*SHARED, "-Wl,-z,nodeflib"), {}),
    (
        "now-origin-nodefaultlib",
        (*SHARED, "-Wl,-z,now", "-Wl,-z,origin", "-Wl,-z,nodefaultlib"),
        {"flags_1": 0x1 | 0x80 | DF_1_NODEFLIB},
    ),
    (
        "non-utf8-rpath",
        (*SHARED, "-Wl,--enable-new-dtags", b"-Wl,-rpath,/opt/\xff\xfe/lib"),
        {"runpath": "/opt/\udcff\udcfe/lib"},
    ),
    ("pie-exe", ("-pie", "-fPIE"), {"elf_type": 3, "interpreter": INTERP}),
    ("no-pie-exe", ("-no-pie",), {"elf_type": 2, "interpreter": INTERP}),
    ("static-exe", ("-static",), {"has_dynamic": False, "interpreter": None, "needed": ()}),
]


@pytest.mark.parametrize(
    ("args", "expected"), [c[1:] for c in GCC_CASES], ids=[c[0] for c in GCC_CASES]
)
def test_gcc_built_matches_readelf(
    tmp_path: Path, args: tuple[str | bytes, ...], expected: dict[str, object]
) -> None:
    is_exe = "-shared" not in args
    source = "int main(void) { return 0; }\n" if is_exe else "int f(void) { return 1; }\n"
    out = gcc(tmp_path / "obj", *args, source=source, may_fail="-static" in args)
    if out is None:
        pytest.skip("gcc cannot link a static executable here (no static libc)")
    info = assert_like_readelf(out)
    for name, value in expected.items():
        if value == INTERP:
            value = read_elf(os.path.realpath(sys.executable)).interpreter
            assert value is not None
        assert getattr(info, name) == value, name
    assert info.nodeflib == bool(info.flags_1 & DF_1_NODEFLIB)


def test_needed_order_is_kept(tmp_path: Path) -> None:
    for name in ("n1", "n2", "n3"):
        gcc_ok(tmp_path / f"lib{name}.so", *SHARED, f"-Wl,-soname,lib{name}.so.1")
    out = gcc_ok(
        tmp_path / "libtop.so",
        *SHARED,
        "-Wl,--no-as-needed",
        f"-L{tmp_path}",
        "-ln3",
        "-ln1",
        "-ln2",
    )
    info = assert_like_readelf(out)
    assert info.needed[:3] == ("libn3.so.1", "libn1.so.1", "libn2.so.1")


def test_32bit_library(tmp_path: Path) -> None:
    # -nostdlib: needs only gcc's 32-bit code generation, not a 32-bit libc.
    src = tmp_path / "f.c"
    src.write_text("int f(void) { return 1; }\n")
    base = [need("gcc"), "-m32", "-shared", "-fPIC", "-nostdlib"]
    dep = subprocess.run(
        [*base, "-Wl,-soname,libdep32.so.2", "-o", str(tmp_path / "libdep32.so"), str(src)],
        capture_output=True,
        text=True,
    )
    if dep.returncode != 0:
        pytest.skip(f"gcc -m32 cannot build a 32-bit shared library here: {dep.stderr[-200:]}")
    top = tmp_path / "lib32.so"
    subprocess.run(
        [
            *base,
            "-Wl,-soname,lib32.so.1",
            "-Wl,--disable-new-dtags",
            "-Wl,-rpath,$ORIGIN/r32",
            "-Wl,-z,nodefaultlib",
            "-Wl,--no-as-needed",
            f"-L{tmp_path}",
            "-ldep32",
            "-o",
            str(top),
            str(src),
        ],
        check=True,
    )
    info = assert_like_readelf(top)
    assert (info.elf_class, info.machine, info.byteorder) == (ELFCLASS32, EM_386, "little")
    assert info.needed == ("libdep32.so.2",)
    assert (info.soname, info.rpath, info.runpath) == ("lib32.so.1", "$ORIGIN/r32", None)
    assert info.nodeflib


def _system_elves() -> list[Path]:
    found: list[Path] = []
    candidates = [Path(os.path.realpath(sys.executable)), Path("/lib64/ld-linux-x86-64.so.2")]
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
        if os.path.isdir(d):
            named = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libz.so.1", "libpython3")
            libs = sorted(Path(d).glob("lib*.so*"))
            candidates += [p for p in libs if p.name.startswith(named)] + libs[:30]
    for p in candidates:
        try:
            with open(p, "rb") as f:
                if p.is_file() and is_elf_magic(f.read(4)):
                    found.append(p)
        except OSError:
            continue
    return found


def test_system_files_match_readelf() -> None:
    files = _system_elves()
    if not files:
        pytest.skip("no system ELF files found")
    for path in files:
        assert_like_readelf(path)


def _bytes_read(monkeypatch: pytest.MonkeyPatch, path: Path) -> int:
    """How many bytes read_elf(PATH) reads, counted at os.pread."""
    total = 0
    real_pread = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        nonlocal total
        data = real_pread(fd, n, offset)
        total += len(data)
        return data

    monkeypatch.setattr(os, "pread", counting)
    read_elf(str(path))
    return total


def test_reads_only_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = next((p for p in _system_elves() if p.name.startswith("libc.so")), None)
    if libc is None:
        pytest.skip("no libc.so.6 found")
    assert _bytes_read(monkeypatch, libc) < 64 * 1024 < libc.stat().st_size


# ---------------------------------------------------------------- synthetic images (big-endian)


def build_elf(
    elf_class: int,
    byteorder: str,
    machine: int,
    *,
    elf_type: int = 3,
    interp: bytes | None = None,
    needed: tuple[bytes, ...] = (),
    soname: bytes | None = None,
    rpath: bytes | None = None,
    runpath: bytes | None = None,
    flags_1: int | None = None,
    more_strings: tuple[tuple[int, bytes], ...] = (),
    after_null: tuple[tuple[int, int], ...] = (),
    terminate: bool = True,
    tail: tuple[tuple[int, int], ...] = (),
    zero_fill: int = 0,
) -> bytes:
    """A minimal ELF image without sections. The string table sits in a second PT_LOAD
    whose vaddr-offset delta differs from the first, so DT_STRTAB must be mapped.

    TERMINATE=False leaves out the DT_NULL; TAIL entries follow PT_DYNAMIC in the same
    segment (what the loader reads when the DT_NULL is missing); ZERO_FILL bytes of
    p_memsz beyond p_filesz end that segment."""
    o = "<" if byteorder == "little" else ">"
    is64 = elf_class == ELFCLASS64
    ehsize, phsize = (64, 56) if is64 else (52, 32)
    word = "Q" if is64 else "I"
    dyn_fmt = struct.Struct(o + ("qQ" if is64 else "iI"))

    strtab = bytearray(b"\0")

    def add(s: bytes) -> int:
        strtab.extend(s + b"\0")
        return len(strtab) - len(s) - 1

    tags = [(1, add(n)) for n in needed]
    for tag, value in ((14, soname), (15, rpath), (29, runpath)):
        if value is not None:
            tags.append((tag, add(value)))
    tags += [(tag, add(value)) for tag, value in more_strings]
    if flags_1 is not None:
        tags.append((0x6FFFFFFB, flags_1))

    nph = 3 + (interp is not None)
    interp_off = ehsize + nph * phsize
    interp_bytes = interp + b"\0" if interp is not None else b""
    seg2_off = (interp_off + len(interp_bytes) + 15) & ~15
    seg2_vaddr = 0x800000 + seg2_off
    dyn_off = seg2_off + ((len(strtab) + 15) & ~15)
    # DT_SYMTAB: every object the loader maps needs one (an empty table here).
    tags += [(5, seg2_vaddr), (6, seg2_vaddr), (10, len(strtab))]
    tags += [(0, 0), *after_null] if terminate else []
    dynamic = b"".join(dyn_fmt.pack(t, v) for t, v in tags)
    following = b"".join(dyn_fmt.pack(t, v) for t, v in tail)
    end = dyn_off + len(dynamic) + len(following)

    def phdr(p_type: int, off: int, vaddr: int, size: int, fill: int = 0) -> bytes:
        mem = size + fill
        if is64:
            return struct.pack(o + "IIQQQQQQ", p_type, 4, off, vaddr, vaddr, size, mem, 0x1000)
        return struct.pack(o + "IIIIIIII", p_type, off, vaddr, vaddr, size, mem, 4, 0x1000)

    phdrs = b""
    if interp is not None:
        phdrs += phdr(3, interp_off, 0x400000 + interp_off, len(interp_bytes))
    phdrs += phdr(1, 0, 0x400000, seg2_off)
    phdrs += phdr(1, seg2_off, seg2_vaddr, end - seg2_off, zero_fill)
    phdrs += phdr(2, dyn_off, seg2_vaddr + dyn_off - seg2_off, len(dynamic))

    ident = b"\x7fELF" + bytes([elf_class, 1 if byteorder == "little" else 2, 1]) + bytes(9)
    ehdr = ident + struct.pack(
        o + "HHI" + word * 3 + "IHHHHHH", elf_type, machine, 1, 0, ehsize, 0, 0, ehsize,
        phsize, nph, 0, 0, 0,
    )  # fmt: skip
    image = bytearray(end)
    image[0 : len(ehdr)] = ehdr
    image[ehsize : ehsize + len(phdrs)] = phdrs
    image[interp_off : interp_off + len(interp_bytes)] = interp_bytes
    image[seg2_off : seg2_off + len(strtab)] = strtab
    image[dyn_off : dyn_off + len(dynamic)] = dynamic
    image[dyn_off + len(dynamic) : end] = following
    return bytes(image)


SYNTHETIC = [
    (ELFCLASS64, "little", EM_X86_64),
    (ELFCLASS32, "little", EM_386),
    (ELFCLASS64, "big", 21),  # PowerPC64
    (ELFCLASS32, "big", 20),  # PowerPC
    (ELFCLASS64, "big", 22),  # s390x
]


@pytest.mark.parametrize(("elf_class", "byteorder", "machine"), SYNTHETIC)
def test_synthetic_images_match_readelf(
    tmp_path: Path, elf_class: int, byteorder: str, machine: int
) -> None:
    image = build_elf(
        elf_class,
        byteorder,
        machine,
        interp=b"/lib/ld-test.so.1",
        needed=(b"liba.so.1", b"libb.so.2", b"libc.so.6"),
        soname=b"libsynth.so.3",
        rpath=b"$ORIGIN/../lib",
        runpath=b"/opt/run\xff",
        flags_1=DF_1_NODEFLIB | 1,
    )
    path = tmp_path / "synth.so"
    path.write_bytes(image)
    info = assert_like_readelf(path)
    assert info == ElfInfo(
        elf_class=elf_class,
        byteorder=byteorder,
        machine=machine,
        elf_type=3,
        interpreter="/lib/ld-test.so.1",
        soname="libsynth.so.3",
        needed=("liba.so.1", "libb.so.2", "libc.so.6"),
        rpath="$ORIGIN/../lib",
        runpath="/opt/run\udcff",
        flags_1=DF_1_NODEFLIB | 1,
        has_dynamic=True,
    )


def test_dynamic_without_strings() -> None:
    image = build_elf(ELFCLASS64, "little", EM_X86_64, flags_1=DF_1_NODEFLIB)
    info = parse_elf(image)
    assert info.has_dynamic and info.nodeflib and info.needed == ()


# ---------------------------------------------------------------- corrupt copies of a good file


@dataclass
class Good:
    """A gcc-built x86-64 library and where its structures live."""

    data: bytes
    phoff: int
    phnum: int
    dyn_off: int
    dyn_entries: list[tuple[int, int]]  # (tag, value)
    dyn_vaddr: int = 0

    def phdr_at(self, p_type: int) -> int:
        for i in range(self.phnum):
            off = self.phoff + i * 56
            if struct.unpack_from("<I", self.data, off)[0] == p_type:
                return off
        raise AssertionError(f"no program header of type {p_type}")

    def dyn_value(self, tag: int) -> int:
        return next(v for t, v in self.dyn_entries if t == tag)

    def dyn_at(self, tag: int, nth: int = 0) -> int:
        hits = [i for i, (t, _) in enumerate(self.dyn_entries) if t == tag]
        return self.dyn_off + hits[nth] * 16


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Good:
    d = tmp_path_factory.mktemp("good")
    for name in ("d1", "d2"):
        gcc_ok(d / f"lib{name}.so", *SHARED, f"-Wl,-soname,lib{name}.so")
    lib = gcc_ok(
        d / "libgood.so",
        *SHARED,
        "-Wl,-soname,libgood.so.1",
        "-Wl,-rpath,$ORIGIN/x",
        "-Wl,--no-as-needed",
        f"-L{d}",
        "-ld1",
        "-ld2",
    )
    data = lib.read_bytes()
    (phoff,) = struct.unpack_from("<Q", data, 32)
    (phnum,) = struct.unpack_from("<H", data, 56)
    good = Good(data, phoff, phnum, 0, [])
    dyn_ph = good.phdr_at(2)
    dyn_off, dyn_vaddr, _paddr, dyn_size = struct.unpack_from("<QQQQ", data, dyn_ph + 8)
    good.dyn_off = dyn_off
    good.dyn_vaddr = dyn_vaddr
    for tag, val in struct.iter_unpack("<qQ", data[dyn_off : dyn_off + dyn_size]):
        good.dyn_entries.append((tag, val))
        if tag == 0:
            break
    return good


def patch(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def without_strings(good: Good) -> bytes:
    """GOOD with every string tag (NEEDED, SONAME, RPATH, RUNPATH) turned into DT_DEBUG."""
    out = good.data
    for i, (tag, _value) in enumerate(good.dyn_entries):
        if tag in (1, 14, 15, 29):
            out = patch(out, good.dyn_off + 16 * i, "<q", 21)
    return out


Corruption = Callable[[Good], bytes]
CORRUPTIONS: list[tuple[str, Corruption, str]] = [
    ("empty", lambda g: b"", "not an ELF file"),
    ("text", lambda g: b"#!/bin/sh\necho hi\n", "not an ELF file"),
    ("magic-only", lambda g: g.data[:4], "truncated ELF header"),
    ("cut-in-header", lambda g: g.data[:40], "truncated ELF header"),
    ("bad-class", lambda g: patch(g.data, 4, "B", 3), "invalid ELF class 3"),
    ("bad-data", lambda g: patch(g.data, 5, "B", 0), "invalid ELF data encoding 0"),
    ("phentsize", lambda g: patch(g.data, 54, "<H", 55), "unexpected program header size 55"),
    ("phoff-huge", lambda g: patch(g.data, 32, "<Q", 2**63), "program header table extends"),
    ("phoff-max", lambda g: patch(g.data, 32, "<Q", 2**64 - 1), "program header table extends"),
    ("pn-xnum", lambda g: patch(g.data, 56, "<H", 0xFFFF), "PN_XNUM"),
    ("cut-in-phdrs", lambda g: g.data[: g.phoff + 20], "program header table extends"),
    ("truncated-half", lambda g: g.data[: len(g.data) // 2], "extends beyond end of file"),
    # The loader finds PT_DYNAMIC by address and never reads p_offset; readelf reads p_offset.
    # Disagreeing, one is corrupt (test_loader_oracle: this copy still imports).
    (
        "dynamic-offset-huge",
        lambda g: patch(g.data, g.phdr_at(2) + 8, "<Q", 2**64 - 8),
        "disagree",
    ),
    (
        "strtab-unmapped",
        lambda g: patch(g.data, g.dyn_at(5) + 8, "<Q", 0x7FFF0000_00000000),
        "not in any PT_LOAD segment",
    ),
    (
        "needed-offset-outside",
        lambda g: patch(g.data, g.dyn_at(1) + 8, "<Q", 2**64 - 1),
        "outside the string table",
    ),
    (
        "strsz-too-small",
        lambda g: patch(g.data, g.dyn_at(10) + 8, "<Q", g.dyn_value(14) + 3),
        "not NUL-terminated",
    ),
    ("no-strtab", lambda g: patch(g.data, g.dyn_at(5), "<q", 21), "no DT_STRTAB"),
    # Relocation reads names through DT_STRTAB, strings in the dynamic section or not.
    (
        "no-strtab-without-strings",
        lambda g: patch(without_strings(g), g.dyn_at(5), "<q", 21),
        "no DT_STRTAB",
    ),
    # The loader reads the dynamic section at p_vaddr and follows the address tags: one that
    # points outside every PT_LOAD makes `import` segfault (checks/test_libraries has the proof).
    (
        "dynamic-address-unmapped",
        lambda g: patch(g.data, g.phdr_at(2) + 16, "<Q", 0x7FFF_0000_0000),
        "PT_DYNAMIC address 0x7fff00000000 is not in any PT_LOAD segment",
    ),
    (
        "dynamic-address-disagrees",
        lambda g: patch(g.data, g.phdr_at(2) + 16, "<Q", g.dyn_vaddr + 16),
        "disagree",
    ),
    (
        "symtab-unmapped",
        lambda g: patch(g.data, g.dyn_at(6) + 8, "<Q", 0x7FFF0000_00000000),
        "DT_SYMTAB address 0x7fff000000000000 is not in any PT_LOAD segment",
    ),
    (
        "gnu-hash-unmapped",
        lambda g: patch(g.data, g.dyn_at(0x6FFFFEF5) + 8, "<Q", 2**64 - 1),
        "DT_GNU_HASH address 0xffffffffffffffff is not in any PT_LOAD segment",
    ),
    (
        "strtab-unmapped-without-strings",
        lambda g: patch(without_strings(g), g.dyn_at(5) + 8, "<Q", 0x7FFF0000_00000000),
        "DT_STRTAB address",
    ),
]


@pytest.mark.parametrize(
    ("corrupt", "reason"), [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS]
)
def test_corrupt_copies(tmp_path: Path, good: Good, corrupt: Corruption, reason: str) -> None:
    data = corrupt(good)
    path = tmp_path / "bad.so"
    path.write_bytes(data)
    with pytest.raises(ElfFormatError, match=re.escape(reason)) as exc:
        read_elf(str(path))
    assert "\n" not in str(exc.value)
    with pytest.raises(ElfFormatError, match=re.escape(reason)):
        parse_elf(data)


def test_good_fixture_parses(good: Good) -> None:
    info = parse_elf(good.data)
    assert info.needed[:2] == ("libd1.so", "libd2.so")
    assert (info.soname, info.runpath) == ("libgood.so.1", "$ORIGIN/x")


def test_interp_too_long(tmp_path: Path) -> None:
    image = bytearray(build_elf(ELFCLASS64, "little", EM_X86_64, interp=b"/lib/ld.so"))
    struct.pack_into("<Q", image, 64 + 32, 5000)  # PT_INTERP is the first phdr; p_filesz
    image += bytes(6000)
    with pytest.raises(ElfFormatError, match="PT_INTERP too long"):
        parse_elf(bytes(image))


def test_last_single_tag_wins_and_dt_null_ends_the_array() -> None:
    image = build_elf(
        ELFCLASS64,
        "little",
        EM_X86_64,
        soname=b"first",
        more_strings=((14, b"second"),),
        after_null=((1, 1), (29, 1)),
    )
    info = parse_elf(image)
    # glibc's elf_get_dynamic_info keeps the last of a single-valued tag; DT_NULL ends the scan.
    assert (info.soname, info.needed, info.runpath) == ("second", (), None)


def test_a_missing_dt_null_is_read_past_as_the_loader_does() -> None:
    """glibc stops only at a DT_NULL, p_filesz or not (test_loader_oracle: such a gcc-built
    module imports). What follows in the segment is read as entries, up to a DT_NULL."""

    def image(**layout: Any) -> bytes:
        return build_elf(ELFCLASS64, "little", EM_X86_64, needed=(b"liba.so.1",), **layout)

    good = parse_elf(image())
    assert parse_elf(image(terminate=False, tail=((0, 0),))) == good
    # An entry after the end counts, as it does for the loader; here it names liba again.
    assert parse_elf(image(terminate=False, tail=((1, 1), (0, 0)))).needed == ("liba.so.1",) * 2
    # The segment's zero fill (p_memsz > p_filesz) is a DT_NULL too.
    assert parse_elf(image(terminate=False, zero_fill=64)) == good
    # Running off the segment, the loader reads bytes no segment holds.
    with pytest.raises(ElfFormatError, match="no DT_NULL before the end of its PT_LOAD"):
        parse_elf(image(terminate=False))


def test_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(ElfFormatError, match="not a regular file"):
        read_elf(str(tmp_path))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ElfFormatError, match="not a regular file"):
        read_elf(str(fifo))  # must not block waiting for a writer


def test_missing_file_is_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_elf(str(tmp_path / "nope.so"))


# ---------------------------------------------------------------- a real torch environment


def _torch_elves() -> Iterator[Path]:
    site = next(iter(sorted(TORCH_ENV.glob("lib/python3*/site-packages"))), None)
    if site is None:
        return
    for root, _dirs, files in os.walk(site):
        for name in sorted(files):
            p = Path(root, name)
            if p.is_symlink() or not p.is_file():
                continue
            with open(p, "rb") as f:
                if is_elf_magic(f.read(4)):
                    yield p


@pytest.mark.realenv
def test_torch_env_sample_matches_readelf() -> None:
    files = sorted(_torch_elves())
    if not files:
        pytest.skip(f"no torch environment at {TORCH_ENV} (set LIBDOCTOR_TORCH_ENV)")
    key = [p for p in files if p.name in ("libtorch_cuda.so", "libtorch_global_deps.so")]
    key += [p for p in files if p.name.startswith("_C.")]
    sample = sorted(set(key + files[::7]))
    for path in sample:
        info = read_elf(str(path))  # never parse_elf here: these reach 1 GB
        assert info == readelf_info(path), path
    # LOADER_SPEC §4: every torch/lib library carries DT_RPATH, not DT_RUNPATH.
    for path in files:
        if path.parent.name == "lib" and path.parent.parent.name == "torch":
            info = read_elf(str(path))
            assert info.rpath is not None and info.runpath is None, path


@pytest.mark.realenv
def test_torch_big_library_read_cheaply(monkeypatch: pytest.MonkeyPatch) -> None:
    big = max(_torch_elves(), key=lambda p: p.stat().st_size, default=None)
    if big is None:
        pytest.skip(f"no torch environment at {TORCH_ENV}")
    total = _bytes_read(monkeypatch, big)
    assert total < 256 * 1024, (big, big.stat().st_size, total)
