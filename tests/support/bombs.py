"""Hostile wheels, written with ``zipfile`` as an attacker would: a RECORD that inflates to
hundreds of MB from a few, one whose central directory lies about its size, a central
directory of too many members, members named outside the wheel (``../../x``, ``/abs/x``).
Each is otherwise a valid wheel (METADATA, WHEEL, RECORD), so only the attack stops a reader.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path

from support.wheels import dist_info_dirname, record_line, wheel_filename

__all__ = ["bomb_wheel", "hostile_wheel", "lie_about_size", "many_members_wheel"]

_METADATA = "Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"
_WHEEL = b"Wheel-Version: 1.0\nGenerator: bombs\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def hostile_wheel(
    dest: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes],
    *,
    record: bytes | None = None,
) -> Path:
    """A wheel whose members are FILES as named (no name checked), METADATA and WHEEL, and a
    RECORD listing them all (or RECORD as given)."""
    info = dist_info_dirname(name, version)
    entries = {
        **files,
        f"{info}/METADATA": _METADATA.format(name=name, version=version).encode(),
        f"{info}/WHEEL": _WHEEL,
    }
    if record is None:
        rows = [record_line(arc, data) for arc, data in entries.items()] + [f"{info}/RECORD,,"]
        record = ("\n".join(rows) + "\n").encode()
    path = dest / wheel_filename(name, version)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for arcname, data in {**entries, f"{info}/RECORD": record}.items():
            member = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            member.filename = arcname  # as written: ZipInfo would not keep a leading "/"
            member.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(member, data)
    return path


def bomb_wheel(dest: Path, inflated: int, name: str = "bomb", version: str = "1.0") -> Path:
    """A wheel whose RECORD inflates to INFLATED bytes of valid rows (streamed in: the test
    never holds it), compressed at level 9 to about a thousandth of that."""
    info = dist_info_dirname(name, version)
    path = dest / wheel_filename(name, version)
    row = record_line(f"{name}/__init__.py", b"").encode() + b"\n"
    chunk = row * ((1 << 20) // len(row))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr(f"{name}/__init__.py", b"")
        archive.writestr(f"{info}/METADATA", _METADATA.format(name=name, version=version))
        archive.writestr(f"{info}/WHEEL", _WHEEL)
        with archive.open(f"{info}/RECORD", "w", force_zip64=inflated >= 1 << 31) as out:
            for start in range(0, inflated, len(chunk)):
                out.write(chunk[: inflated - start])
    return path


def lie_about_size(wheel: Path, member: str, size: int) -> None:
    """Rewrite MEMBER's uncompressed size in WHEEL's local header and central directory to
    SIZE (the bytes stay as they are: they inflate to more than it says)."""
    data = bytearray(wheel.read_bytes())
    name = member.encode()
    with zipfile.ZipFile(wheel) as archive:
        offset = archive.getinfo(member).header_offset
    struct.pack_into("<L", data, offset + 22, size)  # local header: uncompressed size
    at = data.find(b"PK\x01\x02", 0)
    while at >= 0:
        (length,) = struct.unpack_from("<H", data, at + 28)
        if data[at + 46 : at + 46 + length] == name:
            struct.pack_into("<L", data, at + 24, size)  # central directory: the same
        at = data.find(b"PK\x01\x02", at + 46)
    wheel.write_bytes(bytes(data))


def many_members_wheel(dest: Path, count: int, name: str = "many", version: str = "1.0") -> Path:
    """A valid wheel of COUNT empty members beside its dist-info (RECORD lists them all)."""
    return hostile_wheel(dest, name, version, {f"{name}/m{i}": b"" for i in range(count)})
