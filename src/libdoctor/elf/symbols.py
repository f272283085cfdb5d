"""Does an ELF object define a dynamic symbol? Answered through its hash table.

Used to tell a Python extension module named plainly ``x.so`` (it defines ``PyInit_x``)
from a shared library that merely ends in ``.so``. Reads only the dynamic section, the
hash table buckets, one chain and the matching symbol entries: a few small reads, however
large the file. Bounds-checked like ``libdoctor.elf.dynamic``: malformed input raises
``ElfFormatError``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from libdoctor.elf.dynamic import (
    DT_STRTAB,
    DT_SYMTAB,
    LAYOUTS,
    PT_DYNAMIC,
    PT_LOAD,
    ElfFormatError,
    Layout,
    ReadAt,
    Segment,
    dynamic_entries,
    is_elf_magic,
    read_exact,
    read_file_at,
    read_segments,
    string_table,
)

DT_HASH = 4
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
    return read_file_at(path, lambda read_at, size: _defines(read_at, size, name))


def _defines(read_at: ReadAt, file_size: int, name: str) -> bool:
    """``defines_symbol`` over any byte source (the tests feed it corrupt copies in memory)."""
    lay, segments = _layout_and_segments(read_at, file_size)
    dyn = next((s for s in segments if s.p_type == PT_DYNAMIC), None)
    if dyn is None:
        return False
    loads = [s for s in segments if s.p_type == PT_LOAD]
    tags = _dynamic_tags(read_at, lay, dyn, loads)
    if DT_SYMTAB not in tags or DT_STRTAB not in tags:
        return False
    table = _SymbolTable(read_at, file_size, lay, tags, loads)
    if DT_GNU_HASH in tags:
        return _gnu_lookup(table, _offset(tags[DT_GNU_HASH], loads, "DT_GNU_HASH"), name)
    if DT_HASH in tags:
        return _sysv_lookup(table, _offset(tags[DT_HASH], loads, "DT_HASH"), name)
    return False


def _layout_and_segments(read_at: ReadAt, file_size: int) -> tuple[Layout, list[Segment]]:
    """The struct layout the ELF header asks for, and the program headers read with it."""
    ident = read_at(0, 16) if file_size >= 16 else b""
    if not is_elf_magic(ident):
        raise ElfFormatError("not an ELF file")
    lay = LAYOUTS.get((ident[4], ident[5]))
    if lay is None:
        raise ElfFormatError("invalid ELF class or data encoding")
    header = lay.ehdr.unpack(read_exact(read_at, file_size, 16, lay.ehdr.size, "ELF header"))
    phoff, phentsize, phnum = header[4], header[8], header[9]
    return lay, read_segments(read_at, file_size, lay, phoff, phentsize, phnum)


def _dynamic_tags(
    read_at: ReadAt, lay: Layout, dyn: Segment, loads: list[Segment]
) -> dict[int, int]:
    """The dynamic section's string table, symbol table and hash table addresses."""
    wanted = (DT_STRTAB, DT_SYMTAB, DT_HASH, DT_GNU_HASH)
    return {tag: value for tag, value in dynamic_entries(read_at, lay, dyn, loads) if tag in wanted}


class _SymbolTable:
    """The dynamic symbol table, its strings and hash words, read entry by entry on demand."""

    __slots__ = ("_file_size", "_read_at", "_strings", "_sym", "_symtab", "_word", "is64")

    def __init__(
        self,
        read_at: ReadAt,
        file_size: int,
        lay: Layout,
        tags: dict[int, int],
        loads: list[Segment],
    ) -> None:
        order = "<" if lay.dyn.format[0] == "<" else ">"
        self._read_at = read_at
        self._file_size = file_size
        self.is64 = lay.is64
        self._sym = struct.Struct(order + ("IBBHQQ" if lay.is64 else "IIIBBH"))
        self._word = struct.Struct(order + "I")
        self._strings = string_table(read_at, tags[DT_STRTAB], None, loads)
        self._symtab = _offset(tags[DT_SYMTAB], loads, "DT_SYMTAB")

    def u32(self, offset: int) -> int:
        """One 32-bit word of a hash table."""
        raw = read_exact(self._read_at, self._file_size, offset, 4, "hash table")
        value: int = self._word.unpack(raw)[0]
        return value

    def defines(self, index: int, name: str) -> bool:
        """Is symbol INDEX a definition (not an undefined reference) of NAME?"""
        sym = self._sym
        offset = self._symtab + index * sym.size
        fields = sym.unpack(
            read_exact(self._read_at, self._file_size, offset, sym.size, "symbol table")
        )
        st_name, st_shndx = fields[0], (fields[3] if self.is64 else fields[5])
        return st_shndx != SHN_UNDEF and self._strings.get(st_name) == name


def _gnu_lookup(table: _SymbolTable, base: int, name: str) -> bool:
    """Look NAME up through the DT_GNU_HASH table at file offset BASE."""
    return gnu_walk(
        table.u32, lambda i: table.defines(i, name), base, os.fsencode(name), table.is64
    )


def _sysv_lookup(table: _SymbolTable, base: int, name: str) -> bool:
    """Look NAME up through the DT_HASH table at file offset BASE."""
    return sysv_walk(table.u32, lambda i: table.defines(i, name), base, os.fsencode(name))


def gnu_walk(
    u32: Callable[[int], int], defines: Callable[[int], bool], base: int, raw: bytes, is64: bool
) -> bool:
    """The GNU hash lookup of RAW in a table at BASE: U32 reads a word at a file offset,
    DEFINES(index) says whether symbol INDEX is a definition of that name."""
    nbuckets, symoffset, bloom_size = u32(base), u32(base + 4), u32(base + 8)
    if nbuckets == 0:
        return False
    buckets = base + 16 + bloom_size * (8 if is64 else 4)
    h = gnu_hash(raw)
    index = u32(buckets + 4 * (h % nbuckets))
    if index == 0 or index < symoffset:
        return False
    chain = buckets + 4 * nbuckets
    for _ in range(_MAX_CHAIN):
        link = u32(chain + 4 * (index - symoffset))
        if (link | 1) == (h | 1) and defines(index):
            return True
        if link & 1:
            return False
        index += 1
    raise ElfFormatError("GNU hash chain does not end")


def sysv_walk(
    u32: Callable[[int], int], defines: Callable[[int], bool], base: int, raw: bytes
) -> bool:
    """The SysV (DT_HASH) lookup of RAW in a table at BASE, as ``gnu_walk``."""
    nbucket, nchain = u32(base), u32(base + 4)
    if nbucket == 0:
        return False
    index = u32(base + 8 + 4 * (sysv_hash(raw) % nbucket))
    for _ in range(min(nchain, _MAX_CHAIN) + 1):
        if index == 0:
            return False
        if index >= nchain:
            raise ElfFormatError("SysV hash chain index out of range")
        if defines(index):
            return True
        index = u32(base + 8 + 4 * nbucket + 4 * index)
    raise ElfFormatError("SysV hash chain does not end")


def _offset(vaddr: int, loads: list[Segment], what: str) -> int:
    for seg in loads:
        if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            return seg.offset + (vaddr - seg.vaddr)
    raise ElfFormatError(f"{what} address {vaddr:#x} is not in any PT_LOAD segment")
