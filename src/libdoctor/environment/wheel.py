"""A wheel read from its zip (never extracted), and the distribution it becomes once installed.

``read_wheel`` takes a wheel's identity and file list from its ``.dist-info`` (METADATA and
RECORD); ``wheel_distribution`` places every member where pip would (the venv scheme, with the
``.data/<scheme>/`` directories) and models the installed result, INSTALLER and REQUESTED
included, so a plan can run the checks on an environment with the wheel in it.
"""

from __future__ import annotations

import os
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import IO

from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.metadata import parse_metadata
from libdoctor.environment.model import is_inside
from libdoctor.environment.record import RecordEntry, parse_record
from libdoctor.environment.target import SiteDir, Target
from libdoctor.errors import LibdoctorError

__all__ = [
    "MAX_CENTRAL_DIRECTORY",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "WheelFile",
    "dist_info_members",
    "misplaced_members",
    "open_wheel",
    "read_member",
    "read_wheel",
    "wheel_distribution",
    "wheel_from_archive",
]

# What zipfile raises for a damaged member (a bad CRC, a truncated stream, an odd method).
_DAMAGED = (OSError, zipfile.BadZipFile, KeyError, EOFError, zlib.error, NotImplementedError)

# What a wheel's zip may make libdoctor hold, a few times the largest real wheels (torch:
# 15k members, a 2 MB central directory, a 1.5 MB RECORD). zipfile itself bounds none of it:
# it reads the whole central directory into one ZipInfo per entry (500 bytes each), and
# ``ZipFile.read`` inflates a member whole (a 1.8 MB RECORD became 940 MB, 9 GB resident).
MAX_MEMBERS = 100_000  # entries of the central directory
MAX_CENTRAL_DIRECTORY = 32 << 20  # its bytes
MAX_MEMBER_BYTES = 32 << 20  # one member read (METADATA, RECORD, WHEEL), inflated or not

_EOCD = struct.Struct("<4s4H2LH")  # end of central directory: counts, size, offset, comment
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # its zip64 form: 64-bit counts, size and offset
_EOCD64_LOCATOR = struct.Struct("<4sLQL")  # between the two
_ENTRY = b"PK\x01\x02"  # each central directory entry begins so
_TAIL = 65535 + _EOCD.size  # the EOCD lies in the last 22 bytes plus the longest comment


@dataclass(frozen=True, slots=True)
class WheelFile:
    """A wheel's identity and file list, read from the zip (never extracted)."""

    path: str  # the file, or the URL it was read from
    name: str
    version: str
    key: str
    requires_dist: tuple[str, ...]
    dist_info: str  # "<name>-<version>.dist-info" as spelled in the archive
    members: tuple[RecordEntry, ...]  # archive name, RECORD hash, size in the archive
    crc32: tuple[int, ...] = ()  # each member's CRC-32 from the central directory, in order

    @property
    def display(self) -> str:
        return f"{self.name} {self.version}"


def read_wheel(path: str) -> WheelFile:
    """The wheel file at PATH; a device, FIFO or directory is refused before a byte is read
    (``O_NONBLOCK``: a FIFO without a writer does not hang; a lock may name any path)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LibdoctorError(f"cannot read wheel {path}: not a regular file")
        with os.fdopen(fd, "rb") as handle, open_wheel(handle, path) as archive:
            return wheel_from_archive(archive, path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise LibdoctorError(f"cannot read wheel {path}: {exc}") from None


def open_wheel(handle: IO[bytes], where: str) -> zipfile.ZipFile:
    """The zip in HANDLE (seekable), once its central directory is known to be within
    ``MAX_CENTRAL_DIRECTORY`` and ``MAX_MEMBERS``: checked before zipfile reads it."""
    size_cd, start = _central_directory(handle)
    if size_cd > MAX_CENTRAL_DIRECTORY:
        raise LibdoctorError(
            f"cannot read wheel {where}: its central directory of {size_cd:,} bytes is over "
            f"the {MAX_CENTRAL_DIRECTORY:,} a wheel may have (MAX_CENTRAL_DIRECTORY)"
        )
    if size_cd // 46 > MAX_MEMBERS:  # 46 bytes: an entry with an empty name
        handle.seek(start)
        _members_within(handle.read(size_cd).count(_ENTRY), where)  # >= 1 per entry
    handle.seek(0)
    archive = zipfile.ZipFile(handle)
    _members_within(len(archive.filelist), where)
    return archive


def _members_within(count: int, where: str) -> None:
    if count > MAX_MEMBERS:
        raise LibdoctorError(
            f"cannot read wheel {where}: {count:,} members, over the {MAX_MEMBERS:,} "
            "a wheel may have (MAX_MEMBERS)"
        )


def _central_directory(handle: IO[bytes]) -> tuple[int, int]:
    """(size, offset) of the central directory where zipfile finds it: the end record in
    the last 22 bytes, else the last one in the tail (after a comment), in its zip64 form
    when a locator precedes it. (0, 0) for none: zipfile then says what is wrong."""
    end = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, end - _TAIL))
    tail = handle.read()
    at = len(tail) - _EOCD.size
    if not (at >= 0 and tail.startswith(b"PK\x05\x06", at) and tail.endswith(b"\0\0")):
        at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        return 0, 0
    size_cd = _EOCD.unpack_from(tail, at)[5]
    located = end - len(tail) + at  # where zipfile's arithmetic starts from
    locator = located - _EOCD64_LOCATOR.size
    record = locator - _EOCD64.size  # zipfile reads it just before the locator
    if record >= 0:
        handle.seek(record)
        data = handle.read(_EOCD64.size + 4)
        if data[:4] == b"PK\x06\x06" and data[_EOCD64.size :] == b"PK\x06\x07":
            size_cd = _EOCD64.unpack_from(data)[8]
            located = record
    return size_cd, max(0, located - size_cd)


def read_member(archive: zipfile.ZipFile, name: str, where: str) -> bytes:
    """Member NAME of ARCHIVE, inflated as far as ``MAX_MEMBER_BYTES`` and no further; a
    damaged or larger one is a one-line ``LibdoctorError``, a missing one ``KeyError``."""
    info = archive.getinfo(name)
    _within_bounds(info, where)
    try:
        with archive.open(info) as member:
            data = member.read(MAX_MEMBER_BYTES + 1)
    except _DAMAGED as exc:
        raise LibdoctorError(f"cannot read wheel {where}: {exc}") from None
    if len(data) > MAX_MEMBER_BYTES:  # zipfile stops at file_size: a guard, not a path
        _within_bounds(info, where, len(data))
    return data


def _within_bounds(info: zipfile.ZipInfo, where: str, inflated: int = 0) -> None:
    size = max(info.file_size, info.compress_size, inflated)
    if size > MAX_MEMBER_BYTES:
        raise LibdoctorError(
            f"cannot read wheel {where}: {info.filename} is {size:,} bytes, over the "
            f"{MAX_MEMBER_BYTES:,} a member libdoctor reads may have (MAX_MEMBER_BYTES)"
        )


def dist_info_members(archive: zipfile.ZipFile, where: str) -> tuple[str, list[zipfile.ZipInfo]]:
    """The archive's one ``.dist-info`` directory and its METADATA and RECORD entries (the
    members a reader must fetch), from the central directory alone."""
    infos = [i for i in archive.infolist() if not i.is_dir()]
    dist_infos = sorted(
        {top for top in (i.filename.split("/", 1)[0] for i in infos) if top.endswith(".dist-info")}
    )
    if len(dist_infos) != 1:
        raise LibdoctorError(f"{where} is not a wheel: {len(dist_infos)} .dist-info dirs")
    info_dir = dist_infos[0]
    wanted = {f"{info_dir}/METADATA", f"{info_dir}/RECORD"}
    members = [i for i in infos if i.filename in wanted]
    for info in members:
        _within_bounds(info, where)
    return info_dir, members


def wheel_from_archive(archive: zipfile.ZipFile, where: str) -> WheelFile:
    """The wheel in an open ARCHIVE (a local file or any seekable reader), named WHERE.

    Reads the central directory and two members, METADATA and RECORD; a damaged archive is
    a one-line ``LibdoctorError``."""
    info_dir, _ = dist_info_members(archive, where)
    infos = [i for i in archive.infolist() if not i.is_dir()]
    names = {i.filename for i in infos}
    try:
        meta = parse_metadata(read_member(archive, f"{info_dir}/METADATA", where))
        record = (
            parse_record(read_member(archive, f"{info_dir}/RECORD", where))
            if f"{info_dir}/RECORD" in names
            else None
        )
    except _DAMAGED as exc:
        raise LibdoctorError(f"cannot read wheel {where}: {exc}") from None
    if record is None:
        raise LibdoctorError(f"{where} is not a wheel: no {info_dir}/RECORD")
    hashes = {e.path: e.hash for e in record.entries}
    members = tuple(RecordEntry(i.filename, hashes.get(i.filename), i.file_size) for i in infos)
    if not meta.name or not meta.version:
        raise LibdoctorError(f"{where} is not a wheel: METADATA has no Name or Version")
    return WheelFile(
        path=where,
        name=meta.name,
        version=meta.version,
        key=canonicalize_name(meta.name),
        requires_dist=meta.requires_dist,
        dist_info=info_dir,
        members=members,
        crc32=tuple(i.CRC for i in infos),
    )


def _install_site(target: Target) -> SiteDir:
    for site in target.site_dirs:
        if not site.inherited:
            return site
    raise LibdoctorError(f"{target.prefix} has no site-packages of its own to install into")


def _placement(
    wheel: WheelFile, arcname: str, site: SiteDir, target: Target
) -> tuple[str | None, str]:
    """(the directory pip installs ARCNAME under, ARCNAME below it): site-packages, or for
    the ``.data/<scheme>/`` dirs of the venv scheme that scheme's; None for a scheme pip
    does not know."""
    data_dir = wheel.dist_info[: -len(".dist-info")] + ".data/"
    if not arcname.startswith(data_dir):
        return site.path, arcname
    scheme, _, rest = arcname[len(data_dir) :].partition("/")
    prefix = site.prefix
    version = target.python_version or (3, 0)
    roots = {
        "purelib": site.path,
        "platlib": site.path,
        "scripts": os.path.join(prefix, "bin"),
        "data": prefix,
        "headers": os.path.join(
            prefix, "include", "site", f"python{version[0]}.{version[1]}", wheel.name
        ),
    }
    return roots.get(scheme), rest


def _wheel_destination(wheel: WheelFile, arcname: str, site: SiteDir, target: Target) -> str:
    """Where pip puts an archive member."""
    root, rest = _placement(wheel, arcname, site, target)
    return os.path.normpath(os.path.join(site.prefix if root is None else root, rest))


def misplaced_members(wheel: WheelFile, target: Target) -> tuple[tuple[str, str, str | None], ...]:
    """(member, where it would land, the directory it must stay in) for each member of WHEEL
    that pip refuses to install, as its ``assert_no_path_traversal`` does: one whose place,
    normalised, is not inside the directory its scheme installs into (``../../x``,
    ``/abs/x``: "trying to install outside the target directory"; uv leaves those out of the
    install). The directory is None for a ``.data`` scheme no installer knows (both refuse)."""
    site = _install_site(target)
    found = []
    for member in wheel.members:
        root, rest = _placement(wheel, member.path, site, target)
        dest = _wheel_destination(wheel, member.path, site, target)
        if root is None or not rest.strip("/") or dest == root or not is_inside(dest, root):
            found.append((member.path, dest, root))
    return tuple(found)


def wheel_distribution(
    wheel: WheelFile, target: Target, installer: str = "pip"
) -> tuple[Distribution, dict[str, RecordEntry]]:
    """The distribution a wheel becomes once installed, and its files by absolute path."""
    from libdoctor.environment.record import ParsedRecord

    site = _install_site(target)
    files: dict[str, RecordEntry] = {}
    entries: list[RecordEntry] = []
    for member in wheel.members:
        dest = _wheel_destination(wheel, member.path, site, target)
        if not is_inside(dest, site.prefix):
            continue
        inside = dest.startswith(site.path) and dest[len(site.path) : len(site.path) + 1] == os.sep
        rel = dest[len(site.path) + 1 :] if inside else os.path.relpath(dest, site.path)
        entry = RecordEntry(rel, member.hash, member.size)
        files[dest] = entry
        entries.append(entry)
    metadata_dir = os.path.join(site.path, wheel.dist_info)
    # pip adds these to the installed RECORD; it also compiles bytecode (not checked).
    for name, data in (("INSTALLER", installer + "\n"), ("REQUESTED", "")):
        entry = RecordEntry(f"{wheel.dist_info}/{name}", None, len(data))
        files[os.path.join(metadata_dir, name)] = entry
        entries.append(entry)
    dist = Distribution(
        name=wheel.name,
        version=wheel.version,
        key=wheel.key,
        metadata_dir=metadata_dir,
        kind="dist-info",
        site=site,
        base_dir=site.path,
        installer=installer,
        requires_dist=wheel.requires_dist,
        record=ParsedRecord(tuple(entries), ()),
        record_error=None,
    )
    return dist, files
