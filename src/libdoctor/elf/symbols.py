"""Does an ELF object define a dynamic symbol? Answered through its hash table.

Used to tell a Python extension module named plainly ``x.so`` (it defines ``PyInit_x``)
from a shared library that merely ends in ``.so``. Reads only the dynamic section, the
hash table buckets, one chain and the matching symbol entries: a few small reads, however
large the file. Bounds-checked like ``libdoctor.elf.dynamic``: malformed input raises
``ElfFormatError``.
"""

from __future__ import annotations

import os
import stat
import struct

from libdoctor.elf.dynamic import (
    DT_NULL,
    DT_STRTAB,
    ELFCLASS64,
    LAYOUTS,
    PT_DYNAMIC,
    PT_LOAD,
    ElfFormatError,
    ReadAt,
    Segment,
    is_elf_magic,
    read_exact,
    read_segments,
    string_table,
)

DT_HASH = 4
DT_SYMTAB = 6
DT_GNU_HASH = 0x6FFFFEF5
SHN_UNDEF = 0
_MAX_CHAIN = 1 << 20  # far beyond any real hash chain: stops a corrupt, cyclic one


def gnu_hash(name: bytes) -> int:
    h = 5381
    for byte in name:
        h = (h * 33 + byte) & 0xFFFFFFFF
    return h


def sysv_hash(name: bytes) -> int:
    h = 0
    for byte in name:
        h = ((h << 4) + byte) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def defines_symbol(path: str, name: str) -> bool:
    """True when PATH's dynamic symbol table defines NAME (raises ElfFormatError, OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ElfFormatError("not a regular file")
        return _defines(lambda offset, size: os.pread(fd, size, offset), st.st_size, name)
    finally:
        os.close(fd)


def _defines(read_at: ReadAt, file_size: int, name: str) -> bool:
    ident = read_at(0, 16) if file_size >= 16 else b""
    if not is_elf_magic(ident):
        raise ElfFormatError("not an ELF file")
    lay = LAYOUTS.get((ident[4], ident[5]))
    if lay is None:
        raise ElfFormatError("invalid ELF class or data encoding")
    header = lay.ehdr.unpack(read_exact(read_at, file_size, 16, lay.ehdr.size, "ELF header"))
    phoff, phentsize, phnum = header[4], header[8], header[9]
    segments = read_segments(read_at, file_size, lay, phoff, phentsize, phnum)
    dyn = next((s for s in segments if s.p_type == PT_DYNAMIC), None)
    if dyn is None:
        return False
    loads = [s for s in segments if s.p_type == PT_LOAD]
    usable = dyn.filesz - dyn.filesz % lay.dyn.size
    tags: dict[int, int] = {}
    for tag, value in lay.dyn.iter_unpack(
        read_exact(read_at, file_size, dyn.offset, usable, "dynamic segment")
    ):
        if tag == DT_NULL:
            break
        if tag in (DT_STRTAB, DT_SYMTAB, DT_HASH, DT_GNU_HASH):
            tags[tag] = value
    if DT_SYMTAB not in tags or DT_STRTAB not in tags:
        return False
    order = "<" if lay.dyn.format[0] == "<" else ">"
    is64 = ident[4] == ELFCLASS64
    sym = struct.Struct(order + ("IBBHQQ" if is64 else "IIIBBH"))
    word = struct.Struct(order + "I")
    strings = string_table(read_at, tags[DT_STRTAB], None, loads)
    symtab = _offset(tags[DT_SYMTAB], loads, "DT_SYMTAB")
    wanted = os.fsencode(name)

    def u32(offset: int) -> int:
        value: int = word.unpack(read_exact(read_at, file_size, offset, 4, "hash table"))[0]
        return value

    def matches(index: int) -> bool:
        raw = read_exact(read_at, file_size, symtab + index * sym.size, sym.size, "symbol table")
        fields = sym.unpack(raw)
        st_name, st_shndx = fields[0], (fields[3] if is64 else fields[5])
        return st_shndx != SHN_UNDEF and strings.get(st_name) == name

    if DT_GNU_HASH in tags:
        base = _offset(tags[DT_GNU_HASH], loads, "DT_GNU_HASH")
        nbuckets, symoffset, bloom_size = u32(base), u32(base + 4), u32(base + 8)
        if nbuckets == 0:
            return False
        buckets = base + 16 + bloom_size * (8 if is64 else 4)
        h = gnu_hash(wanted)
        index = u32(buckets + 4 * (h % nbuckets))
        if index == 0 or index < symoffset:
            return False
        chain = buckets + 4 * nbuckets
        for _ in range(_MAX_CHAIN):
            link = u32(chain + 4 * (index - symoffset))
            if (link | 1) == (h | 1) and matches(index):
                return True
            if link & 1:
                return False
            index += 1
        raise ElfFormatError("GNU hash chain does not end")
    if DT_HASH in tags:
        base = _offset(tags[DT_HASH], loads, "DT_HASH")
        nbucket, nchain = u32(base), u32(base + 4)
        if nbucket == 0:
            return False
        index = u32(base + 8 + 4 * (sysv_hash(wanted) % nbucket))
        for _ in range(min(nchain, _MAX_CHAIN) + 1):
            if index == 0:
                return False
            if index >= nchain:
                raise ElfFormatError("SysV hash chain index out of range")
            if matches(index):
                return True
            index = u32(base + 8 + 4 * nbucket + 4 * index)
        raise ElfFormatError("SysV hash chain does not end")
    return False


def _offset(vaddr: int, loads: list[Segment], what: str) -> int:
    for seg in loads:
        if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            return seg.offset + (vaddr - seg.vaddr)
    raise ElfFormatError(f"{what} address {vaddr:#x} is not in any PT_LOAD segment")
