"""Library names an ELF object holds as read-only strings: what it may ``dlopen`` by name.

cuDNN 9's ``libcudnn.so.9`` loads its sublibraries with ``dlopen("libcudnn_graph.so.9")``
(the name built from a string ``libcudnn_graph.so`` and its major); NCCL loads
``libnccl-net.so``; nvrtc ``libnvrtc-builtins.so.13.0``. Such a name is a whole
NUL-terminated string in ``.rodata``: ``lib<name>.so`` with an optional numeric version.
Names inside longer strings (messages, paths) are not taken: a path is loaded by its path,
and a message is not a load.

Bounded: only the section header table, the section name table and ``.rodata`` itself are
read, and ``.rodata`` only when it is at most ``limit`` bytes (the libraries that load
others by name are small dispatchers; the large ones are covered by ``loader.dlopened``'s
table). Malformed input raises ``ElfFormatError``, like the rest of ``libdoctor.elf``.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

from libdoctor.elf.dynamic import (
    LAYOUTS,
    ElfFormatError,
    ReadAt,
    is_elf_magic,
    read_exact,
    read_file_at,
)

__all__ = ["SCAN_LIMIT", "library_strings", "read_library_strings"]

SCAN_LIMIT = 1 << 20
"""The largest ``.rodata`` scanned for library names (the torch env's dispatchers: < 1 MiB)."""

_SONAME = re.compile(rb"lib[A-Za-z0-9_+-][A-Za-z0-9_+.-]*?\.so(?:\.[0-9]+)*\0")
_SHDR = {True: struct.Struct("IIQQQQIIQQ"), False: struct.Struct("IIIIIIIIII")}
_SHT_PROGBITS = 1
_MAX_SECTIONS = 1 << 16


def read_library_strings(path: str, limit: int = SCAN_LIMIT) -> tuple[str, ...] | None:
    """``library_strings`` of the file at PATH (None: no ``.rodata``, or one over LIMIT)."""
    return read_file_at(path, lambda read_at, size: library_strings(read_at, size, limit))


def library_strings(read_at: ReadAt, file_size: int, limit: int) -> tuple[str, ...] | None:
    """The whole strings of ``.rodata`` that are library names, sorted, without repeats."""
    found = _rodata(read_at, file_size)
    if found is None:
        return None
    offset, size = found
    if size > limit:
        return None
    data = read_exact(read_at, file_size, offset, size, ".rodata")
    names: set[str] = set()
    for at in _string_starts(data):
        match = _SONAME.match(data, at)  # up to the NUL that ends the string
        if match is not None:
            names.add(data[at : match.end() - 1].decode("ascii"))
    return tuple(sorted(names))


def _string_starts(data: bytes) -> Iterator[int]:
    """Offsets of the strings that start with ``lib`` (after a NUL, or the section's first):
    ``bytes.find`` runs at memchr speed where a regular expression tried everywhere would not."""
    if data.startswith(b"lib"):
        yield 0
    at = data.find(b"\0lib")
    while at >= 0:
        yield at + 1
        at = data.find(b"\0lib", at + 1)


def _rodata(read_at: ReadAt, file_size: int) -> tuple[int, int] | None:
    """(offset, size) of the ``.rodata`` section, None when there is none."""
    ident = read_exact(read_at, file_size, 0, 16, "ELF header")
    if not is_elf_magic(ident) or ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise ElfFormatError("not an ELF file")
    lay = LAYOUTS[(ident[4], ident[5])]
    fields = lay.ehdr.unpack(read_exact(read_at, file_size, 16, lay.ehdr.size, "ELF header"))
    shoff, shentsize, shnum, shstrndx = fields[5], fields[10], fields[11], fields[12]
    order = "<" if ident[5] == 1 else ">"
    shdr = struct.Struct(order + _SHDR[lay.is64].format)
    if shoff == 0 or shnum == 0:
        return None
    if shentsize != shdr.size or shnum > _MAX_SECTIONS or shstrndx >= shnum:
        raise ElfFormatError("section header table is malformed")
    table = read_exact(read_at, file_size, shoff, shnum * shdr.size, "section header table")
    sections = [shdr.unpack_from(table, i * shdr.size) for i in range(shnum)]
    names = sections[shstrndx]
    name_table = read_exact(read_at, file_size, names[4], names[5], "section name table")
    for sh_name, sh_type, _flags, _addr, sh_offset, sh_size, *_ in sections:
        if sh_type == _SHT_PROGBITS and name_table[sh_name : sh_name + 8] == b".rodata\0":
            return sh_offset, sh_size
    return None
