"""An object's dynamic symbols: the ones it imports, and whether it exports a name.

What ``ldd -r`` learns by running the loader, read instead: a torch extension built against
another torch imports ``_ZN3c10...`` symbols that no library of the installed torch
defines, and its import dies with ``undefined symbol``. Only ``.dynsym``, its string table
and ``.gnu.hash`` (or ``.hash``) are read, through ``mmap``: an 850 MB extension costs its
few-hundred-KB symbol table, not its size. Found through the section header table (what
``readelf`` and ``nm -D`` use); an object without one answers ``None``: unknown, never a
finding. Symbol versions are not compared: torch's libraries version none of theirs.
Malformed input raises ``ElfFormatError``.
"""

from __future__ import annotations

import functools
import mmap
import os
import stat
import struct

from libdoctor.elf.dynamic import LAYOUTS, ElfFormatError, is_elf_magic
from libdoctor.elf.symbols import gnu_walk, sysv_walk

__all__ = ["MAX_TABLE", "DynamicSymbols", "open_symbols"]

MAX_TABLE = 256 << 20
"""A ``.dynsym`` or ``.dynstr`` larger than this is not read (the biggest torch's: 5 MB)."""

_SHT_DYNSYM = 11
_SHT_HASH = 5
_SHT_GNU_HASH = 0x6FFFFFF6
_STB_GLOBAL = 1


class DynamicSymbols:
    """The dynamic symbol table of one mapped ELF object."""

    def __init__(
        self, data: mmap.mmap | bytes, is64: bool, order: str, sections: list[tuple[int, ...]]
    ) -> None:
        self._data = data
        self._is64 = is64
        self._sym = struct.Struct(order + ("IBBHQQ" if is64 else "IIIBBH"))
        self._word = struct.Struct(order + "I")
        self._words = order + "{}I"
        dynsym = next((s for s in sections if s[1] == _SHT_DYNSYM), None)
        if dynsym is None:
            raise _NoTable
        self._symoff, self._count = dynsym[4], dynsym[5] // self._sym.size
        strtab = sections[dynsym[6]] if dynsym[6] < len(sections) else None
        if strtab is None or max(dynsym[5], strtab[5]) > MAX_TABLE:
            raise _NoTable
        self._stroff, self._strend = strtab[4], strtab[4] + strtab[5]
        for offset, size in ((self._symoff, dynsym[5]), (self._stroff, strtab[5])):
            if offset < 0 or offset + size > len(data):
                raise ElfFormatError("symbol table outside the file")
        self._gnu = next((s for s in sections if s[1] == _SHT_GNU_HASH), None)
        self._sysv = next((s for s in sections if s[1] == _SHT_HASH), None)

    def _entry(self, index: int) -> tuple[int, int, int]:
        """(st_name, binding, st_shndx) of symbol INDEX."""
        fields = self._sym.unpack_from(self._data, self._symoff + index * self._sym.size)
        if self._is64:
            return fields[0], fields[1] >> 4, fields[3]
        return fields[0], fields[3] >> 4, fields[5]

    def _name(self, offset: int) -> bytes:
        start = self._stroff + offset
        if start >= self._strend:
            raise ElfFormatError("symbol name outside its string table")
        end = self._data.find(b"\0", start, self._strend)
        return self._data[start : end if end >= 0 else self._strend]

    def imported(self) -> tuple[str, ...]:
        """Names this object needs from others: undefined, global (weak ones may stay
        unresolved without failing the load)."""
        names = []
        for index in range(1, self._count):
            st_name, binding, shndx = self._entry(index)
            if shndx == 0 and binding == _STB_GLOBAL and st_name:
                names.append(self._name(st_name).decode("utf-8", "surrogateescape"))
        return tuple(names)

    def defines(self, name: str) -> bool:
        """Whether this object exports NAME (a defined symbol of that name)."""
        raw = os.fsencode(name)
        defines = functools.partial(self._is_definition, raw=raw)
        if self._gnu is not None:
            return gnu_walk(self._u32, defines, self._gnu[4], raw, self._is64)
        if self._sysv is not None:
            return sysv_walk(self._u32, defines, self._sysv[4], raw)
        return any(self._is_definition(i, raw) for i in range(1, self._count))

    def _is_definition(self, index: int, raw: bytes) -> bool:
        if not 0 < index < self._count:
            raise ElfFormatError("hash table names a symbol outside .dynsym")
        st_name, _, shndx = self._entry(index)
        return shndx != 0 and self._name(st_name) == raw

    def _u32(self, offset: int) -> int:
        if offset + 4 > len(self._data):
            raise ElfFormatError("hash table outside the file")
        value: int = self._word.unpack_from(self._data, offset)[0]
        return value


class _NoTable(Exception):
    """No section header table, or no .dynsym in it: the answer is unknown."""


def open_symbols(path: str) -> DynamicSymbols | None:
    """PATH's dynamic symbols (mapped read-only), or None when it has no section table
    or ``.dynsym`` to read them from. Raises ElfFormatError, OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ElfFormatError("not a regular file")
        if st.st_size < 64:
            raise ElfFormatError("truncated ELF header")
        data = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    return symbols_of(data)


def symbols_of(data: mmap.mmap | bytes) -> DynamicSymbols | None:
    """``open_symbols`` over bytes already in memory (the tests' corrupt copies)."""
    ident = bytes(data[:16])
    if not is_elf_magic(ident) or (ident[4], ident[5]) not in LAYOUTS:
        raise ElfFormatError("not an ELF file")
    lay = LAYOUTS[(ident[4], ident[5])]
    order = "<" if ident[5] == 1 else ">"
    header = lay.ehdr.unpack_from(data, 16)
    shoff, shentsize, shnum = header[5], header[10], header[11]
    shdr = struct.Struct(order + ("IIQQQQIIQQ" if lay.is64 else "IIIIIIIIII"))
    if shoff == 0 or shnum == 0:
        return None
    if shentsize != shdr.size or shnum > 1 << 16 or shoff + shnum * shdr.size > len(data):
        raise ElfFormatError("section header table is malformed")
    sections = [shdr.unpack_from(data, shoff + i * shdr.size) for i in range(shnum)]
    try:
        return DynamicSymbols(data, lay.is64, order, sections)
    except _NoTable:
        return None
