"""Hostile inputs, made cheaply, for the issue 23 tests: JSON nested past any parser, a file
past any size limit that costs no disk, and a small gzip file that inflates to gigabytes; and
``one_error``, what a run refusing one must look like."""

from __future__ import annotations

import struct
import zlib
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["BIG", "DEEP", "gzip_bomb", "one_error", "sparse"]

DEEP = b"[" * 100_000  # a RecursionError in every json.loads once
BIG = 600 << 20  # past MAX_FILE_BYTES


def sparse(path: Path, size: int = BIG) -> None:
    """A file of SIZE bytes (zeros) that takes no room on disk."""
    with open(path, "wb") as handle:
        handle.truncate(size)


@cache
def gzip_bomb(
    inflated_mib: int = 2048, head: bytes = b'{"schema":"libdoctor-snapshot","x":"'
) -> bytes:
    """A valid gzip file of ~1 KB per MiB it inflates to (2 GiB: 2 MB), HEAD then "A"s.
    Made without compressing gigabytes: after a full flush deflate starts afresh, so one
    MiB's compressed block is repeated."""
    chunk = b"A" * (1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
    tail = deflate.compress(b'"}') + deflate.flush()
    crc = zlib.crc32(head)
    for _ in range(inflated_mib):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(b'"}', crc)
    size = (len(head) + inflated_mib * len(chunk) + 2) & 0xFFFFFFFF
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # no name, mtime 0
    return header + first + block * inflated_mib + tail + struct.pack("<II", crc, size)


def one_error(run: Any, *, no_stdout: bool = False) -> str:
    """The single stderr line of a run that could not go on (exit 2), never a traceback;
    with NO_STDOUT, it wrote nothing to stdout either."""
    lines = run.stderr.splitlines()
    assert run.rc == 2 and len(lines) == 1 and (not no_stdout or run.stdout == ""), run.describe()
    assert lines[0].startswith("libdoctor: error: "), run.describe()
    return str(lines[0])
