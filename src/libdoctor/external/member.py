"""A zip member's bytes, inflated only as far as a reader asks.

``MemberView.read_at(offset, size)`` is the ``read_at`` a parser of the member's content
takes (``elf.dynamic.parse_elf_at``): a stored member's bytes are fetched where asked, a
deflated member's compressed stream is fetched in pieces and inflated from its start up to
the last byte asked for (``zlib.decompressobj``), never past it. What it may cost is bounded:
at most ``budget`` compressed bytes fetched, and never more inflated than the member's size
says; past either, or for a stream that is not deflate, ``MemberError`` (one line).

FETCH gives the member's compressed bytes START..END (exclusive, counted from the start of its
data, after the local header); where they come from (range requests, a file) is the caller's.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable

__all__ = ["Fetch", "MemberError", "MemberView", "member_data"]

Fetch = Callable[[int, int], bytes]

STORED = 0
DEFLATED = 8
FIRST = 256 * 1024  # a member this small (compressed) is fetched in one piece
PIECE = 64 * 1024  # the least fetched at once after that


class MemberError(ValueError):
    """The member cannot be read as far as asked: over the budget, corrupt, or cut short."""


def member_data(read: Fetch, info: zipfile.ZipInfo) -> Fetch:
    """The FETCH of INFO's compressed data, given READ of the whole zip's bytes START..END:
    its data starts past its local header, whose name and extra field are measured there
    (the central directory's extra field may differ)."""
    header = read(info.header_offset, info.header_offset + 30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise MemberError(f"no local header at {info.header_offset}")
    data = info.header_offset + 30 + int.from_bytes(header[26:28], "little")
    data += int.from_bytes(header[28:30], "little")
    return lambda start, end: read(data + start, data + end)


class MemberView:
    """The uncompressed bytes of one member of SIZE bytes (COMPRESSED of them in the zip)."""

    def __init__(self, fetch: Fetch, method: int, compressed: int, size: int, budget: int) -> None:
        if method not in (STORED, DEFLATED):
            raise MemberError(f"compression method {method} (only stored and deflated are read)")
        self._fetch = fetch
        self._method = method
        self._compressed = compressed
        self.size = size
        self._budget = budget
        self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        self._out = bytearray()
        self._pending = b""
        self.fetched = 0  # compressed bytes taken from FETCH

    def read_at(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size)
        if offset < 0 or end <= offset:
            return b""
        if self._method == STORED:
            self._take(end - offset, offset)
            return self._fetch(offset, end)
        self._inflate_to(end)
        return bytes(self._out[offset:end])

    def _take(self, count: int, at: int) -> None:
        if at + count > self._compressed:
            raise MemberError(f"bytes up to {at + count} asked of {self._compressed} compressed")
        if self.fetched + count > self._budget:
            raise MemberError(f"reading on would pass the {self._budget:,}-byte budget")
        self.fetched += count

    def _inflate_to(self, end: int) -> None:
        while len(self._out) < end:
            if not self._pending:
                self._pending = self._next_piece(end)
            try:
                piece = self._inflater.decompress(self._pending, end - len(self._out))
            except zlib.error as exc:
                raise MemberError(f"not a deflate stream ({exc})") from None
            self._pending = self._inflater.unconsumed_tail
            self._out += piece
            if self._inflater.eof and len(self._out) < end:
                raise MemberError(f"the member inflates to {len(self._out)} bytes, not {end}")

    def _next_piece(self, end: int) -> bytes:
        """The next compressed bytes: enough, by the member's ratio so far, to reach END."""
        at = self.fetched
        if at >= self._compressed:
            raise MemberError(f"the compressed data ends before byte {end}")
        if self._compressed <= FIRST:
            count = self._compressed
        else:
            guess = end * self._compressed // max(self.size, 1)
            count = max(guess + guess // 8 + PIECE - at, PIECE)
        count = min(count, self._compressed - at)
        self._take(count, at)
        data = self._fetch(at, at + count)
        if len(data) != count:
            raise MemberError(f"asked for {count} compressed bytes, got {len(data)}")
        return data
