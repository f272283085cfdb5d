"""What library resolution needs from one ELF file, read without reading the whole file.

Only these byte ranges are read: the ELF header, the program header table, PT_INTERP,
the dynamic array, and the string-table blocks that hold the wanted strings
(torch's libraries reach 1 GB; their dynamic string tables alone are megabytes).
Every offset and size is checked against the file size before it is used, and any
malformation becomes ``ElfFormatError("one-line reason")``; nothing else escapes for
bad bytes.

What glibc's loader refuses, or trips over once the object is mapped, is an error too, at
constant cost per dynamic tag, because ``import`` of such a file fails or dies with SIGSEGV
before Python can say anything (glibc 2.36: ``_dl_map_object_from_fd`` in dl-load.c,
``elf_get_dynamic_info`` in get-dynamic-info.h, relocation in do-rel.h, ``call_init`` in
dl-init.c). The dynamic array is read where and as the loader reads it: from PT_DYNAMIC's
address to the first DT_NULL. Each rule below says which loader behaviour it stands for,
and the tests check each against the real loader and a real ``dlopen``.

The parser is pure: it sees the file only through ``read_at(offset, size) -> bytes``.
``read_elf`` feeds it ``os.pread`` on a file descriptor, ``parse_elf`` feeds it bytes.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "DF_1_NODEFLIB",
    "ELFCLASS32",
    "ELFCLASS64",
    "EM_386",
    "EM_AARCH64",
    "EM_X86_64",
    "ElfFormatError",
    "ElfInfo",
    "is_elf_magic",
    "parse_elf",
    "parse_elf_at",
    "read_elf",
    "read_file_at",
]

ELFCLASS32 = 1
ELFCLASS64 = 2
EM_X86_64 = 62
EM_386 = 3
EM_AARCH64 = 183
DF_1_NODEFLIB = 0x800

ELFDATA2LSB = 1
ELFDATA2MSB = 2

PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3

_ET_EXEC = 2
_ET_DYN = 3

DT_NULL = 0
DT_NEEDED = 1
DT_PLTRELSZ = 2
DT_STRTAB = 5
DT_SYMTAB = 6
DT_RELA = 7
DT_RELASZ = 8
DT_RELAENT = 9
DT_STRSZ = 10
DT_SONAME = 14
DT_RPATH = 15
DT_REL = 17
DT_RELSZ = 18
DT_RELENT = 19
DT_PLTREL = 20
DT_JMPREL = 23
DT_INIT_ARRAY = 25
DT_FINI_ARRAY = 26
DT_INIT_ARRAYSZ = 27
DT_FINI_ARRAYSZ = 28
DT_RUNPATH = 29
DT_PREINIT_ARRAY = 32
DT_PREINIT_ARRAYSZ = 33
DT_RELRSZ = 35
DT_RELR = 36
DT_RELRENT = 37
DT_RELACOUNT = 0x6FFFFFF9
DT_RELCOUNT = 0x6FFFFFFA
DT_FLAGS_1 = 0x6FFFFFFB

# Tags whose value is an address the loader dereferences once the object is mapped (glibc's
# elf_get_dynamic_info and what follows it). One outside every PT_LOAD segment makes
# `import` die with SIGSEGV, before Python can report anything.
_ADDRESS_TAGS = {
    3: "DT_PLTGOT",
    4: "DT_HASH",
    DT_STRTAB: "DT_STRTAB",
    DT_SYMTAB: "DT_SYMTAB",
    DT_RELA: "DT_RELA",
    12: "DT_INIT",
    13: "DT_FINI",
    DT_REL: "DT_REL",
    DT_JMPREL: "DT_JMPREL",
    DT_INIT_ARRAY: "DT_INIT_ARRAY",
    DT_FINI_ARRAY: "DT_FINI_ARRAY",
    DT_PREINIT_ARRAY: "DT_PREINIT_ARRAY",
    DT_RELR: "DT_RELR",
    0x6FFFFEF5: "DT_GNU_HASH",
    0x6FFFFFF0: "DT_VERSYM",
    0x6FFFFFFC: "DT_VERDEF",
    0x6FFFFFFE: "DT_VERNEED",
}
# DT_RELA and DT_REL may be 0 beside DT_RELR; glibc then skips them (get-dynamic-info.h).
_ZERO_MEANS_NONE = frozenset({DT_RELA, DT_REL})


@dataclass(frozen=True, slots=True)
class _Table:
    """A table the loader walks: at ADDRESS, SIZE bytes long, of ENTRY-sized entries."""

    address: int
    size: int
    entry: int | None  # the tag glibc asserts holds the entry size, if it asserts one
    count: int | None  # the tag that says how many leading entries are relative relocations


# Each table glibc walks from a base address and a byte size. With the base present, the
# loader reads the size (and the entry size) without looking: a missing one is a NULL
# dereference, a size running past the segment walks into unmapped memory or other bytes
# (SIGSEGV), a wrong entry size fails get-dynamic-info.h's assert ("Inconsistency detected
# by ld.so", exit 127), a DT_RELACOUNT past the table trips dl-machine.h's assert.
_TABLES = (
    _Table(DT_RELA, DT_RELASZ, DT_RELAENT, DT_RELACOUNT),
    _Table(DT_REL, DT_RELSZ, DT_RELENT, DT_RELCOUNT),
    _Table(DT_RELR, DT_RELRSZ, DT_RELRENT, None),
    _Table(DT_INIT_ARRAY, DT_INIT_ARRAYSZ, None, None),
    _Table(DT_FINI_ARRAY, DT_FINI_ARRAYSZ, None, None),
    _Table(DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ, None, None),
)
_TAG_NAMES = {
    **_ADDRESS_TAGS,
    DT_PLTRELSZ: "DT_PLTRELSZ",
    DT_RELASZ: "DT_RELASZ",
    DT_RELAENT: "DT_RELAENT",
    DT_RELSZ: "DT_RELSZ",
    DT_RELENT: "DT_RELENT",
    DT_PLTREL: "DT_PLTREL",
    DT_INIT_ARRAYSZ: "DT_INIT_ARRAYSZ",
    DT_FINI_ARRAYSZ: "DT_FINI_ARRAYSZ",
    DT_PREINIT_ARRAYSZ: "DT_PREINIT_ARRAYSZ",
    DT_RELRSZ: "DT_RELRSZ",
    DT_RELRENT: "DT_RELRENT",
    DT_RELACOUNT: "DT_RELACOUNT",
    DT_RELCOUNT: "DT_RELCOUNT",
}
# The tags read from the dynamic section besides DT_NEEDED; for each the last one wins.
_SINGLE_TAGS = frozenset({DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1, *_TAG_NAMES})

_PN_XNUM = 0xFFFF
# Linux pages are 4 KiB or a multiple of it: a PT_LOAD misaligned at 4 KiB is misaligned for
# every loader, so checking the smallest never rejects a file some system would map.
_MIN_PAGE = 4096
# Limits far above anything a linker writes; they keep a corrupt size field from
# turning into a huge read (MemoryError) while staying clear of real files.
_MAX_INTERP = 4096  # the kernel rejects a PT_INTERP longer than PATH_MAX
_MAX_DYNAMIC = 1 << 20  # 65536 entries; real libraries have under 100
_MAX_STRING = 1 << 20
_STRING_BLOCK = 4096


class ElfFormatError(ValueError):
    """A file is not a well-formed ELF object; carries a one-line reason.

    The checks turn it into an ``elf-invalid`` finding; it never escapes to the user.
    """


ReadAt = Callable[[int, int], bytes]
T = TypeVar("T")
"""``read_at(offset, size)``: up to ``size`` bytes at ``offset`` (fewer only at end of file)."""


@dataclass(frozen=True, slots=True)
class ElfInfo:
    """What library resolution needs from one ELF file."""

    elf_class: int  # ELFCLASS32 / ELFCLASS64
    byteorder: str  # "little" / "big"
    machine: int  # e_machine
    elf_type: int  # e_type (ET_EXEC=2, ET_DYN=3, ...)
    interpreter: str | None  # PT_INTERP, without the trailing NUL
    soname: str | None  # DT_SONAME
    needed: tuple[str, ...]  # DT_NEEDED in file order
    rpath: str | None  # DT_RPATH, raw (unsplit, DSTs unexpanded)
    runpath: str | None  # DT_RUNPATH, raw
    flags_1: int  # DT_FLAGS_1, 0 when absent
    has_dynamic: bool  # a PT_DYNAMIC segment exists

    @property
    def nodeflib(self) -> bool:
        return bool(self.flags_1 & DF_1_NODEFLIB)


@dataclass(frozen=True, slots=True)
class Layout:
    """struct formats for one (class, byte order) combination."""

    ehdr: struct.Struct  # e_type .. e_shstrndx (after e_ident)
    phdr: struct.Struct
    dyn: struct.Struct
    is64: bool


def layout(elf_class: int, order: str) -> Layout:
    if elf_class == ELFCLASS64:
        return Layout(
            ehdr=struct.Struct(order + "HHIQQQIHHHHHH"),
            phdr=struct.Struct(order + "IIQQQQQQ"),
            dyn=struct.Struct(order + "qQ"),
            is64=True,
        )
    return Layout(
        ehdr=struct.Struct(order + "HHIIIIIHHHHHH"),
        phdr=struct.Struct(order + "IIIIIIII"),
        dyn=struct.Struct(order + "iI"),
        is64=False,
    )


LAYOUTS = {
    (c, d): layout(c, "<" if d == ELFDATA2LSB else ">")
    for c in (ELFCLASS32, ELFCLASS64)
    for d in (ELFDATA2LSB, ELFDATA2MSB)
}


@dataclass(frozen=True, slots=True)
class Segment:
    p_type: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int


def is_elf_magic(head: bytes) -> bool:
    return head[:4] == b"\x7fELF"


def read_elf(path: str) -> ElfInfo:
    """Parse PATH. Raises ElfFormatError(reason) for malformed input, OSError for I/O problems.

    Symlinks are followed, as the loader does (``read_file_at``).
    """
    return read_file_at(path, _parse)


def read_file_at(path: str, parse: Callable[[ReadAt, int], T]) -> T:
    """PARSE given PATH's bytes by offset and its size: the file opened as the loader opens
    it, symlinks followed. A directory, FIFO or device is ``ElfFormatError("not a regular
    file")``; O_NONBLOCK keeps a FIFO from hanging us."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ElfFormatError("not a regular file")
        return parse(lambda offset, size: os.pread(fd, size, offset), st.st_size)
    finally:
        os.close(fd)


def parse_elf(data: bytes) -> ElfInfo:
    """Parse an ELF image held in memory (tests, fuzzing, small files)."""
    view = bytes(data)
    return _parse(lambda offset, size: view[offset : offset + size], len(view))


def parse_elf_at(read_at: ReadAt, file_size: int) -> ElfInfo:
    """Parse an ELF image of FILE_SIZE bytes seen only through READ_AT (a zip member
    inflated as far as the reads ask)."""
    return _parse(read_at, file_size)


def read_exact(read_at: ReadAt, file_size: int, offset: int, size: int, what: str) -> bytes:
    if offset < 0 or size < 0 or offset + size > file_size:
        raise ElfFormatError(f"{what} extends beyond end of file")
    data = read_at(offset, size)
    if len(data) != size:
        # The file shrank under us, or a short read: either way the bytes are not there.
        raise ElfFormatError(f"{what} truncated")
    return data


def _parse(read_at: ReadAt, file_size: int) -> ElfInfo:
    ident = read_at(0, 16) if file_size > 0 else b""
    if not is_elf_magic(ident):
        raise ElfFormatError("not an ELF file")
    if len(ident) < 16:
        raise ElfFormatError("truncated ELF header")
    elf_class, data_enc = ident[4], ident[5]
    if elf_class not in (ELFCLASS32, ELFCLASS64):
        raise ElfFormatError(f"invalid ELF class {elf_class}")
    if data_enc not in (ELFDATA2LSB, ELFDATA2MSB):
        raise ElfFormatError(f"invalid ELF data encoding {data_enc}")
    lay = LAYOUTS[(elf_class, data_enc)]

    if 16 + lay.ehdr.size > file_size:
        raise ElfFormatError("truncated ELF header")
    (e_type, e_machine, _ver, _entry, e_phoff, _shoff, _flags, _ehsize, e_phentsize, e_phnum) = (
        lay.ehdr.unpack(read_exact(read_at, file_size, 16, lay.ehdr.size, "ELF header"))[:10]
    )

    segments = read_segments(read_at, file_size, lay, e_phoff, e_phentsize, e_phnum)
    interp_seg = next((s for s in segments if s.p_type == PT_INTERP), None)
    dyn_seg = next((s for s in segments if s.p_type == PT_DYNAMIC), None)
    loads = [s for s in segments if s.p_type == PT_LOAD]
    if e_type in (_ET_EXEC, _ET_DYN):
        _check_loadable(e_type, loads, dyn_seg)

    interpreter = None
    if interp_seg is not None:
        if interp_seg.filesz > _MAX_INTERP:
            raise ElfFormatError(f"PT_INTERP too long ({interp_seg.filesz} bytes)")
        raw = read_exact(read_at, file_size, interp_seg.offset, interp_seg.filesz, "PT_INTERP")
        interpreter = os.fsdecode(raw.split(b"\0", 1)[0])

    soname = rpath = runpath = None
    needed: tuple[str, ...] = ()
    flags_1 = 0
    if dyn_seg is not None:
        soname, needed, rpath, runpath, flags_1 = _read_dynamic(read_at, lay, dyn_seg, loads)

    return ElfInfo(
        elf_class=elf_class,
        byteorder="little" if data_enc == ELFDATA2LSB else "big",
        machine=e_machine,
        elf_type=e_type,
        interpreter=interpreter,
        soname=soname,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
        flags_1=flags_1,
        has_dynamic=dyn_seg is not None,
    )


def read_segments(
    read_at: ReadAt, file_size: int, lay: Layout, phoff: int, phentsize: int, phnum: int
) -> list[Segment]:
    if phnum == 0:
        return []
    if phnum == _PN_XNUM:
        # glibc's loader reads e_phnum as is, so such a file is not loadable anyway.
        raise ElfFormatError("extended program header numbering (PN_XNUM) is not supported")
    if phentsize != lay.phdr.size:
        # The kernel and glibc both insist on the exact size.
        raise ElfFormatError(f"unexpected program header size {phentsize}")
    # glibc preads the table at e_phoff; a short read is "cannot read file data".
    table = read_exact(read_at, file_size, phoff, phnum * phentsize, "program header table")
    segments = []
    for fields in lay.phdr.iter_unpack(table):
        if lay.is64:
            p_type, _pflags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz = fields[:7]
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz, p_memsz = fields[:6]
        # PT_DYNAMIC is not here: the loader finds it by address, inside a PT_LOAD
        # (check_dynamic_mapped), and never reads its p_offset or the end of its p_filesz.
        if p_type in (PT_LOAD, PT_INTERP) and p_offset + p_filesz > file_size:
            # A truncated download looks exactly like this; the loader would map
            # pages past the end of file and die with SIGBUS on first touch.
            raise ElfFormatError(
                f"segment {_PT_NAMES[p_type]} at offset {p_offset:#x} extends beyond end of file"
            )
        segments.append(Segment(p_type, p_offset, p_vaddr, p_filesz, p_memsz))
    return segments


_PT_NAMES = {PT_LOAD: "PT_LOAD", PT_INTERP: "PT_INTERP"}


def _check_loadable(e_type: int, loads: list[Segment], dyn: Segment | None) -> None:
    """What _dl_map_object_from_fd refuses before it maps anything, in its words."""
    if not loads:
        raise ElfFormatError("no PT_LOAD segment (object file has no loadable segments)")
    for seg in loads:
        if (seg.vaddr - seg.offset) % _MIN_PAGE:
            raise ElfFormatError(
                f"PT_LOAD at offset {seg.offset:#x}: address {seg.vaddr:#x} is not page-aligned"
                " with it (ELF load command address/offset not page-aligned)"
            )
    # A PT_DYNAMIC of size 0 is what separate debug info files carry; glibc refuses both.
    if e_type == _ET_DYN and (dyn is None or dyn.filesz == 0):
        raise ElfFormatError("shared object without a dynamic section (p_filesz 0 or none)")


def _read_dynamic(
    read_at: ReadAt, lay: Layout, dyn: Segment, loads: list[Segment]
) -> tuple[str | None, tuple[str, ...], str | None, str | None, int]:
    needed_offs: list[int] = []
    # Single-valued tags: the last one wins, as in glibc's elf_get_dynamic_info.
    single: dict[int, int] = {}
    for tag, val in dynamic_entries(read_at, lay, dyn, loads):
        if tag == DT_NEEDED:
            needed_offs.append(val)
        elif tag in _SINGLE_TAGS:
            single[tag] = val
    check_addresses_mapped(single, loads)
    _check_tables(single, loads, lay)

    flags_1 = single.get(DT_FLAGS_1, 0)
    wanted = (DT_SONAME, DT_RPATH, DT_RUNPATH)
    if not needed_offs and not any(t in single for t in wanted):
        return None, (), None, None, flags_1

    strings = string_table(read_at, single[DT_STRTAB], single.get(DT_STRSZ), loads)
    needed = tuple(strings.get(off) for off in needed_offs)
    soname, rpath, runpath = (strings.get(single[t]) if t in single else None for t in wanted)
    return soname, needed, rpath, runpath, flags_1


def dynamic_entries(
    read_at: ReadAt, lay: Layout, dyn: Segment, loads: list[Segment]
) -> list[tuple[int, int]]:
    """The dynamic array as the loader walks it: (tag, value) pairs from PT_DYNAMIC's address
    up to, not including, the first DT_NULL.

    glibc stops only at DT_NULL; p_filesz bounds nothing. A linker always ends the array with
    DT_NULL inside PT_DYNAMIC, but when it is missing the loader reads on into what follows in
    memory (.got: its zero words end the walk, and such a file loads and works) - so we read
    on too, through the rest of the PT_LOAD segment that holds it, then its zero fill. Only an
    array that runs off its segment is refused: what the loader reads next belongs to no
    segment (the rest of the page, as the file has it, then another mapping or none), so
    whether it loads is chance.
    """
    seg = check_dynamic_mapped(dyn, loads)
    size = lay.dyn.size
    limit = min(seg.offset + seg.filesz, dyn.offset + _MAX_DYNAMIC)
    first = min(max(dyn.filesz - dyn.filesz % size, size), limit - dyn.offset)
    entries: list[tuple[int, int]] = []
    raw = read_exact(read_at, limit, dyn.offset, first - first % size, "dynamic segment")
    if _walk(lay, raw, entries):
        return entries
    at = dyn.offset + len(raw)
    rest = read_exact(read_at, limit, at, limit - at, "dynamic segment")
    if limit == seg.offset + seg.filesz and seg.memsz > seg.filesz:
        rest += bytes(min(seg.memsz - seg.filesz, 2 * size))  # the zero fill: a DT_NULL
    if _walk(lay, rest[: len(rest) - len(rest) % size], entries):
        return entries
    if limit < seg.offset + seg.filesz:
        raise ElfFormatError(f"dynamic section has no DT_NULL in its first {_MAX_DYNAMIC} bytes")
    raise ElfFormatError("dynamic section has no DT_NULL before the end of its PT_LOAD segment")


def _walk(lay: Layout, raw: bytes, entries: list[tuple[int, int]]) -> bool:
    """Append RAW's entries to ENTRIES up to a DT_NULL; True when one ended the array."""
    for tag, val in lay.dyn.iter_unpack(raw):
        if tag == DT_NULL:
            return True
        entries.append((tag, val))
    return False


def check_dynamic_mapped(dyn: Segment, loads: list[Segment]) -> Segment:
    """The PT_LOAD segment whose file bytes hold PT_DYNAMIC's address.

    The loader finds the dynamic section at its address (p_vaddr), in the mapped image;
    readelf and every other tool read it at p_offset. A linker makes both name the same
    bytes. When they disagree one of them is corrupt and we cannot tell which (the loader
    may work, or read a shifted or garbage array): the file is not what was built.
    """
    for seg in loads:
        if seg.vaddr <= dyn.vaddr < seg.vaddr + seg.filesz:
            if seg.offset + (dyn.vaddr - seg.vaddr) != dyn.offset:
                raise ElfFormatError(
                    f"PT_DYNAMIC address {dyn.vaddr:#x} and offset {dyn.offset:#x} disagree"
                )
            return seg
    raise ElfFormatError(f"PT_DYNAMIC address {dyn.vaddr:#x} is not in any PT_LOAD segment")


def check_addresses_mapped(single: dict[int, int], loads: list[Segment]) -> None:
    """Each address tag's value lies in the memory image of a PT_LOAD segment (its end
    included: an empty array may start there). A handful of segments per tag."""
    spans = [(seg.vaddr, seg.vaddr + seg.memsz) for seg in loads]
    for tag, address in single.items():
        if tag not in _ADDRESS_TAGS or (address == 0 and tag in _ZERO_MEANS_NONE):
            continue
        for low, high in spans:
            if low <= address <= high:
                break
        else:
            raise ElfFormatError(
                f"{_ADDRESS_TAGS[tag]} address {address:#x} is not in any PT_LOAD segment"
            )


def _check_tables(single: dict[int, int], loads: list[Segment], lay: Layout) -> None:
    """The tags the loader uses without looking, and the tables it walks, are there and fit.

    Every object the loader maps is relocated, and relocation (do-rel.h) reads DT_SYMTAB and,
    for each symbol reference, its name through DT_STRTAB, whether or not the tags exist: a
    file without them (a zeroed or garbage dynamic section) dies with SIGSEGV on import.
    Linkers always write both, even for an object that defines nothing.
    """
    for tag in (DT_SYMTAB, DT_STRTAB):
        if tag not in single:
            raise ElfFormatError(f"dynamic section has no {_TAG_NAMES[tag]}")
    sizes = _entry_sizes(lay)
    for table in _TABLES:
        if table.address in single:
            _check_table(single, loads, table, sizes)
    if DT_PLTREL in single:
        # The PLT relocations: glibc asserts their kind, then walks DT_JMPREL for DT_PLTRELSZ.
        if single[DT_PLTREL] not in (DT_REL, DT_RELA):
            raise ElfFormatError(f"DT_PLTREL is {single[DT_PLTREL]}, neither DT_REL nor DT_RELA")
        if DT_JMPREL not in single:
            raise ElfFormatError("DT_PLTREL without DT_JMPREL")
        _check_table(single, loads, _Table(DT_JMPREL, DT_PLTRELSZ, None, None), sizes)


def _entry_sizes(lay: Layout) -> dict[int, int]:
    """sizeof Rela, Rel and Relr for this ELF class."""
    word = 8 if lay.is64 else 4
    return {DT_RELAENT: 3 * word, DT_RELENT: 2 * word, DT_RELRENT: word}


def _check_table(
    single: dict[int, int], loads: list[Segment], table: _Table, sizes: dict[int, int]
) -> None:
    name = _TAG_NAMES[table.address]
    entry = sizes.get(table.entry) if table.entry is not None else None
    if table.entry is not None and single.get(table.entry) != entry:
        value = single.get(table.entry)
        raise ElfFormatError(
            f"{name} with {_TAG_NAMES[table.entry]} "
            + ("missing" if value is None else f"{value}, not {entry}")
        )
    address = single[table.address]
    if address == 0 and table.address in _ZERO_MEANS_NONE:
        return
    if table.size not in single:
        raise ElfFormatError(f"{name} without {_TAG_NAMES[table.size]}")
    size = single[table.size]
    if not any(s.vaddr <= address and address + size <= s.vaddr + s.memsz for s in loads):
        raise ElfFormatError(
            f"{name} table at {address:#x} ({_TAG_NAMES[table.size]} {size:#x})"
            " runs past its PT_LOAD segment"
        )
    if table.count is not None and entry and single.get(table.count, 0) * entry > size:
        raise ElfFormatError(
            f"{_TAG_NAMES[table.count]} {single[table.count]} is more than the {name} table holds"
        )


def string_table(
    read_at: ReadAt, strtab: int, strsz: int | None, loads: list[Segment]
) -> _StringTable:
    """Map DT_STRTAB (a virtual address) to a file range through the PT_LOAD segments.

    The table ends at DT_STRSZ, and here we are stricter than the loader, on purpose: glibc
    never reads DT_STRSZ (2.36 uses it only in dladdr) and takes a name at DT_STRTAB + offset,
    up to the next NUL, wherever that is. A linker always writes DT_STRSZ right, so an offset
    past it means the offset is corrupt (the loader then reads bytes that are no name and
    fails: "cannot open shared object file") or DT_STRSZ is (the file still loads). We cannot
    tell which, and neither file is what was built: both are elf-invalid.
    """
    for seg in loads:
        if seg.vaddr <= strtab < seg.vaddr + seg.filesz:
            start = seg.offset + (strtab - seg.vaddr)
            end = seg.offset + seg.filesz  # checked against the file size already
            if strsz is not None:
                end = min(end, start + strsz)
            return _StringTable(read_at, start, end)
    raise ElfFormatError(f"DT_STRTAB address {strtab:#x} is not in any PT_LOAD segment")


class _StringTable:
    """NUL-terminated strings in [start, end) of the file, read in cached 4 KiB blocks."""

    __slots__ = ("_blocks", "_end", "_read_at", "_start")

    def __init__(self, read_at: ReadAt, start: int, end: int) -> None:
        self._read_at = read_at
        self._start = start
        self._end = end
        self._blocks: dict[int, bytes] = {}

    def _block(self, number: int) -> bytes:
        block = self._blocks.get(number)
        if block is None:
            lo = number * _STRING_BLOCK
            hi = min(lo + _STRING_BLOCK, self._end)
            block = self._read_at(lo, hi - lo)
            if len(block) != hi - lo:
                raise ElfFormatError("string table truncated")
            self._blocks[number] = block
        return block

    def get(self, index: int) -> str:
        if index >= self._end - self._start:
            raise ElfFormatError(f"string offset {index:#x} is outside the string table")
        pos = self._start + index
        parts: list[bytes] = []
        length = 0
        while True:
            if pos >= self._end:
                raise ElfFormatError(f"string at offset {index:#x} is not NUL-terminated")
            number = pos // _STRING_BLOCK
            block = self._block(number)
            rel = pos - number * _STRING_BLOCK
            nul = block.find(b"\0", rel)
            if nul >= 0:
                parts.append(block[rel:nul])
                break
            parts.append(block[rel:])
            length += len(block) - rel
            if length > _MAX_STRING:
                raise ElfFormatError(f"string at offset {index:#x} is too long")
            pos = number * _STRING_BLOCK + len(block)
        return os.fsdecode(b"".join(parts))
