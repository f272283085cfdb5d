"""Reading untrusted bytes within limits: a whole file, gzip's output, a JSON document.

Every file libdoctor reads whole may have been written by an attacker (a journal, a listing, a
snapshot, a fleet node's answer, a cache's metadata). Read here, none of them can exhaust
memory, hang on a device or a FIFO, or recurse the JSON parser to death: each limit is one
constant below, and going past it is one ``InputRefused`` line naming that constant.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zlib
from collections.abc import Iterator
from typing import IO, Any

from libdoctor.errors import LibdoctorError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_INFLATE_RATIO",
    "MAX_JSON_DEPTH",
    "MAX_SMALL_FILE_BYTES",
    "InputRefused",
    "gunzip",
    "lines",
    "loads_json",
    "nesting",
    "read_file",
    "read_json",
]

# A file read whole: a snapshot (a 1M-file environment with --deep: ~160 MB), a backup's
# listing (~150 bytes an entry), a journal.
MAX_FILE_BYTES = 512 << 20
# A file that is a few lines when it is what it claims: direct_url.json, WHEEL, a cache's
# metadata JSON, an --env-file.
MAX_SMALL_FILE_BYTES = 16 << 20
# gzip output per input byte. A snapshot compresses about 2.5 times; a "bomb" a thousand.
# Below INFLATE_FLOOR any output is allowed (a tiny file may compress well).
MAX_INFLATE_RATIO = 32
INFLATE_FLOOR = 1 << 20
# Containers inside containers. A journal is 4 deep, a snapshot 6; a direct_url.json 3.
MAX_JSON_DEPTH = 64

_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


class InputRefused(LibdoctorError, ValueError):
    """Input past a limit, or not a regular file: one line naming the limit (the caller adds
    which file). A ValueError too, so a reader's ``except ValueError`` says "unreadable"."""


def _size(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n} bytes"


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_file(
    path: str, limit: int = MAX_FILE_BYTES, *, stream_ok: bool = False, own: bool = False
) -> bytes:
    """PATH's bytes, at most LIMIT of them; symlinks are followed (reading is harmless).
    A device, FIFO or socket is refused (it may never end, or block on open) unless
    STREAM_OK (the command reads stdin, or what the user named as a stream): then it is
    read up to LIMIT. OWN: refused unless this user owns it and no one else may write it
    (a cache, whose word is taken), and once it grows past its size (someone writes it).
    OSError as ``open`` raises it."""
    # Not waiting for a FIFO's writer unless a stream is wanted: then as ``cat`` would.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | (0 if stream_ok else os.O_NONBLOCK))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            if not stream_ok or stat.S_ISDIR(st.st_mode):
                raise InputRefused(f"{_kind(st.st_mode)}, not read (only regular files are)")
        elif st.st_size > limit:
            raise InputRefused(f"{_size(st.st_size)}, over {_size(limit)} ({_name(limit)})")
        if own:
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                raise InputRefused("another user could have written it, not read")
            limit = st.st_size
        return _read_fd(fd, limit, st.st_size)
    finally:
        os.close(fd)


def _name(limit: int) -> str:
    """The constant LIMIT is, for the error line (a caller's own limit is just a size)."""
    if limit == MAX_FILE_BYTES:
        return "MAX_FILE_BYTES"
    return "MAX_SMALL_FILE_BYTES" if limit == MAX_SMALL_FILE_BYTES else "a size limit"


def _read_fd(fd: int, limit: int, expected: int) -> bytes:
    """Up to LIMIT bytes: the first read asks for what fstat said (one allocation for the
    common case), then chunks, so a growing file or a stream is cut at LIMIT + 1."""
    parts: list[bytes] = []
    total = 0
    want = min(expected, limit) + 1 if expected else _CHUNK
    while True:
        part = os.read(fd, min(want, limit + 1 - total))
        if not part:
            return b"".join(parts)
        parts.append(part)
        total += len(part)
        if total > limit:
            raise InputRefused(f"more than {_size(limit)} ({_name(limit)}), not read")
        want = _CHUNK


def gunzip(data: bytes, limit: int = MAX_FILE_BYTES) -> bytes:
    """DATA (one or more gzip members) inflated, stopped once the output passes LIMIT or
    MAX_INFLATE_RATIO times DATA's size (whichever is smaller, never below INFLATE_FLOOR):
    a small file that would inflate to gigabytes is refused having used little memory.
    A damaged or cut short stream is a ValueError."""
    bound = min(limit, max(INFLATE_FLOOR, MAX_INFLATE_RATIO * len(data)))
    why = "MAX_INFLATE_RATIO" if bound < limit else _name(limit)
    refusal = f"inflates past {_size(bound)} from {_size(len(data))} ({why}), not read"
    parts: list[bytes] = []
    rest = data
    while rest:
        if rest[:2] != _GZIP_MAGIC:
            raise ValueError("not gzip data" if not parts else "trailing garbage after gzip data")
        rest = _inflate_member(rest, parts, bound, refusal)
    return b"".join(parts)


def _inflate_member(data: bytes, parts: list[bytes], bound: int, refusal: str) -> bytes:
    """One gzip member at DATA's start, appended to PARTS; what follows it. A chunk in and
    a chunk out at a time: zlib copies a call's whole output once more as it returns it,
    and its unconsumed input too."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    view = memoryview(data)
    total = sum(map(len, parts))
    taken = 0
    pending: bytes | memoryview = b""
    while not inflater.eof:
        if not pending:
            if taken >= len(view):
                raise ValueError("gzip data cut short")
            pending, taken = view[taken : taken + _CHUNK], taken + _CHUNK
        try:
            part = inflater.decompress(pending, min(_CHUNK, bound + 1 - total))  # >= 1
        except zlib.error as exc:
            raise ValueError(f"damaged gzip data ({exc})") from None
        total += len(part)
        if total > bound:
            raise InputRefused(refusal)
        parts.append(part)
        pending = inflater.unconsumed_tail
    return inflater.unused_data + bytes(view[taken:])


# Only the bytes that make or hide nesting: quotes and brackets.
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'"[]{}')
_TO_PARENS = bytes.maketrans(b"[]{}", b"()()")
_STRING = re.compile(rb'"[^"]*"')


def nesting(data: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """How deep DATA's JSON nests, counted up to LIMIT + 1, at C speed, without parsing it
    (nor making an object per string): escaped backslashes and quotes go, then all but quotes
    and brackets; two quotes side by side go (an empty string, or the gap between two: either
    way no bracket changes sides), then what strings are left; then the innermost bracket
    pairs go, once per level. Brackets never closed count as levels too (the parser recurses
    into them before it finds the end)."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = data.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    skeleton = _STRING.sub(b"", skeleton).translate(_TO_PARENS)
    depth = 0
    while b"()" in skeleton and depth <= limit:
        skeleton = skeleton.replace(b"()", b"")
        depth += 1
    return min(depth + skeleton.count(b"("), limit + 1)


def loads_json(data: bytes) -> Any:
    """DATA as JSON, refused when it nests deeper than MAX_JSON_DEPTH (so no reader of the
    value, recursive or not, meets more). A ValueError when it is not JSON."""
    if nesting(data) > MAX_JSON_DEPTH:
        raise InputRefused(f"JSON nested deeper than {MAX_JSON_DEPTH} (MAX_JSON_DEPTH), not read")
    try:
        return json.loads(data)
    except RecursionError:  # past an estimate the parser disagrees with: refused all the same
        raise InputRefused(f"JSON nested too deep (MAX_JSON_DEPTH {MAX_JSON_DEPTH})") from None


def lines(stream: IO[bytes], longest: int) -> Iterator[bytes]:
    """STREAM's lines (a pipe from another program), each at most LONGEST bytes: a longer
    one is skipped whole, read in pieces and never held (a line without end costs nothing)."""
    while line := stream.readline(longest):
        if line.endswith(b"\n") or len(line) < longest:
            yield line
            continue
        while (rest := stream.readline(longest)) and not rest.endswith(b"\n"):
            pass


def read_json(path: str, limit: int = MAX_FILE_BYTES) -> Any:
    """``read_file`` then ``loads_json``: OSError, or ValueError (InputRefused among them)."""
    return loads_json(read_file(path, limit))
