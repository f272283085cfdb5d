"""Corrupt copies of a good ELF file, made by rewriting the fields the loader reads.

The packaging ``_elffile`` habit: build a real object with gcc, then byte-patch one field at a
time, so each copy differs from a loadable file in exactly the way under test. x86-64
(64-bit little-endian) only, which is what the loader oracle on this machine can run.
"""

from __future__ import annotations

import random
import struct

__all__ = ["ElfPatch"]

_PHDR = 56
_DYN = 16


class ElfPatch:
    """Where a 64-bit little-endian ELF file's program headers and dynamic entries live."""

    def __init__(self, data: bytes) -> None:
        if data[4:6] != b"\x02\x01":
            raise ValueError("ElfPatch reads 64-bit little-endian files only")
        self.data = data
        (phoff,) = struct.unpack_from("<Q", data, 32)
        (phnum,) = struct.unpack_from("<H", data, 56)
        self.phdrs = [phoff + _PHDR * i for i in range(phnum)]
        dyn = self.phdr(2)
        self.dyn_off, self.dyn_vaddr, _paddr, self.dyn_size = struct.unpack_from(
            "<QQQQ", data, dyn + 8
        )
        table = data[self.dyn_off : self.dyn_off + self.dyn_size]
        self.tags = [int(tag) for tag, _ in struct.iter_unpack("<qQ", table)]

    def phdr(self, p_type: int, nth: int = 0) -> int:
        """File offset of the NTH program header of P_TYPE (-1: the last)."""
        hits = [o for o in self.phdrs if struct.unpack_from("<I", self.data, o)[0] == p_type]
        return int(hits[nth])

    def entry(self, tag: int, nth: int = 0) -> int:
        """File offset of the NTH dynamic entry with TAG."""
        return int(self.dyn_off) + _DYN * [i for i, t in enumerate(self.tags) if t == tag][nth]

    def value(self, tag: int) -> int:
        (value,) = struct.unpack_from("<Q", self.data, self.entry(tag) + 8)
        return int(value)

    def put(self, offset: int, fmt: str, *values: int, data: bytes | None = None) -> bytes:
        """A copy of DATA (default: the good file) with VALUES packed at OFFSET."""
        out = bytearray(self.data if data is None else data)
        struct.pack_into(fmt, out, offset, *values)
        return bytes(out)

    def set_value(self, tag: int, value: int) -> bytes:
        return self.put(self.entry(tag) + 8, "<Q", value)

    def retag(self, old: int, new: int, data: bytes | None = None) -> bytes:
        """Every entry tagged OLD tagged NEW instead (DT_SYMENT, 11, is one glibc ignores)."""
        out = self.data if data is None else data
        for i, tag in enumerate(self.tags):
            if tag == old:
                out = self.put(self.dyn_off + _DYN * i, "<q", new, data=out)
        return out

    def dynamic_replaced(self, content: bytes) -> bytes:
        """The dynamic section's bytes replaced by CONTENT (padded or cut to its size)."""
        out = bytearray(self.data)
        size = self.dyn_size
        out[self.dyn_off : self.dyn_off + size] = content[:size].ljust(size, b"\0")
        return bytes(out)

    def garbage_dynamic(self, seed: int) -> bytes:
        """Same size, every byte changed: what a bad disk or a botched patch leaves."""
        return self.dynamic_replaced(random.Random(seed).randbytes(self.dyn_size))
