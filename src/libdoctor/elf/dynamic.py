"""What library resolution needs from one ELF file, read without reading the whole file.

Only these byte ranges are read: the ELF header, the program header table, PT_INTERP,
the PT_DYNAMIC segment, and the string-table blocks that hold the wanted strings
(torch's libraries reach 1 GB; their dynamic string tables alone are megabytes).
Every offset and size is checked against the file size before it is used, and any
malformation becomes ``ElfFormatError("one-line reason")``; nothing else escapes for
bad bytes. What the loader itself would trip over is checked too, at constant cost per
dynamic tag: PT_DYNAMIC and every address tag must lie inside a PT_LOAD segment (else
``import`` dies with SIGSEGV before Python can say anything).

The parser is pure: it sees the file only through ``read_at(offset, size) -> bytes``.
``read_elf`` feeds it ``os.pread`` on a file descriptor, ``parse_elf`` feeds it bytes.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass

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
    "read_elf",
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

DT_NULL = 0
DT_NEEDED = 1
DT_STRTAB = 5
DT_STRSZ = 10
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
DT_FLAGS_1 = 0x6FFFFFFB

# Tags whose value is an address the loader dereferences once the object is mapped (glibc's
# elf_get_dynamic_info and what follows it). One outside every PT_LOAD segment makes
# `import` die with SIGSEGV, before Python can report anything.
_ADDRESS_TAGS = {
    3: "DT_PLTGOT",
    4: "DT_HASH",
    DT_STRTAB: "DT_STRTAB",
    6: "DT_SYMTAB",
    7: "DT_RELA",
    12: "DT_INIT",
    13: "DT_FINI",
    17: "DT_REL",
    23: "DT_JMPREL",
    25: "DT_INIT_ARRAY",
    26: "DT_FINI_ARRAY",
    32: "DT_PREINIT_ARRAY",
    36: "DT_RELR",
    0x6FFFFEF5: "DT_GNU_HASH",
    0x6FFFFFF0: "DT_VERSYM",
    0x6FFFFFFC: "DT_VERDEF",
    0x6FFFFFFE: "DT_VERNEED",
}
# The tags read from the dynamic section besides DT_NEEDED; for each the last one wins.
_SINGLE_TAGS = frozenset({DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1, *_ADDRESS_TAGS})

_PN_XNUM = 0xFFFF
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

    Symlinks are followed, as the loader does. A directory, FIFO or device is
    ``ElfFormatError("not a regular file")``; O_NONBLOCK keeps a FIFO from hanging us.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ElfFormatError("not a regular file")
        return _parse(lambda offset, size: os.pread(fd, size, offset), st.st_size)
    finally:
        os.close(fd)


def parse_elf(data: bytes) -> ElfInfo:
    """Parse an ELF image held in memory (tests, fuzzing, small files)."""
    view = bytes(data)
    return _parse(lambda offset, size: view[offset : offset + size], len(view))


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
        soname, needed, rpath, runpath, flags_1 = _read_dynamic(
            read_at, file_size, lay, dyn_seg, loads
        )

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
    table = read_exact(read_at, file_size, phoff, phnum * phentsize, "program header table")
    segments = []
    for fields in lay.phdr.iter_unpack(table):
        if lay.is64:
            p_type, _pflags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz = fields[:7]
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz, p_memsz = fields[:6]
        if p_type in (PT_LOAD, PT_DYNAMIC, PT_INTERP) and p_offset + p_filesz > file_size:
            # A truncated download looks exactly like this; the loader would map
            # pages past the end of file and die with SIGBUS on first touch.
            raise ElfFormatError(
                f"segment {_PT_NAMES[p_type]} at offset {p_offset:#x} extends beyond end of file"
            )
        segments.append(Segment(p_type, p_offset, p_vaddr, p_filesz, p_memsz))
    return segments


_PT_NAMES = {PT_LOAD: "PT_LOAD", PT_DYNAMIC: "PT_DYNAMIC", PT_INTERP: "PT_INTERP"}


def _read_dynamic(
    read_at: ReadAt, file_size: int, lay: Layout, dyn: Segment, loads: list[Segment]
) -> tuple[str | None, tuple[str, ...], str | None, str | None, int]:
    if dyn.filesz > _MAX_DYNAMIC:
        raise ElfFormatError(f"dynamic segment too large ({dyn.filesz} bytes)")
    check_dynamic_mapped(dyn, loads)
    usable = dyn.filesz - dyn.filesz % lay.dyn.size
    raw = read_exact(read_at, file_size, dyn.offset, usable, "dynamic segment")

    needed_offs: list[int] = []
    # Single-valued tags: the last one wins, as in glibc's elf_get_dynamic_info.
    single: dict[int, int] = {}
    for tag, val in lay.dyn.iter_unpack(raw):
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            needed_offs.append(val)
        elif tag in _SINGLE_TAGS:
            single[tag] = val
    check_addresses_mapped(single, loads)

    flags_1 = single.get(DT_FLAGS_1, 0)
    wanted = (DT_SONAME, DT_RPATH, DT_RUNPATH)
    if not needed_offs and not any(t in single for t in wanted):
        return None, (), None, None, flags_1
    if DT_STRTAB not in single:
        raise ElfFormatError("dynamic section has strings but no DT_STRTAB")

    strings = string_table(read_at, single[DT_STRTAB], single.get(DT_STRSZ), loads)
    needed = tuple(strings.get(off) for off in needed_offs)
    soname, rpath, runpath = (strings.get(single[t]) if t in single else None for t in wanted)
    return soname, needed, rpath, runpath, flags_1


def check_dynamic_mapped(dyn: Segment, loads: list[Segment]) -> None:
    """The loader finds the dynamic section at its address (p_vaddr), in the mapped image;
    we read it at its offset. Both must name the same bytes, inside one PT_LOAD segment."""
    for seg in loads:
        if seg.vaddr <= dyn.vaddr and dyn.vaddr + dyn.filesz <= seg.vaddr + seg.filesz:
            if seg.offset + (dyn.vaddr - seg.vaddr) != dyn.offset:
                raise ElfFormatError(
                    f"PT_DYNAMIC address {dyn.vaddr:#x} and offset {dyn.offset:#x} disagree"
                )
            return
    raise ElfFormatError(f"PT_DYNAMIC address {dyn.vaddr:#x} is not in any PT_LOAD segment")


def check_addresses_mapped(single: dict[int, int], loads: list[Segment]) -> None:
    """Each address tag's value lies in the memory image of a PT_LOAD segment (its end
    included: an empty array may start there). A handful of segments per tag."""
    spans = [(seg.vaddr, seg.vaddr + seg.memsz) for seg in loads]
    for tag, address in single.items():
        if tag not in _ADDRESS_TAGS:
            continue
        for low, high in spans:
            if low <= address <= high:
                break
        else:
            raise ElfFormatError(
                f"{_ADDRESS_TAGS[tag]} address {address:#x} is not in any PT_LOAD segment"
            )


def string_table(
    read_at: ReadAt, strtab: int, strsz: int | None, loads: list[Segment]
) -> _StringTable:
    """Map DT_STRTAB (a virtual address) to a file range through the PT_LOAD segments."""
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
