"""A wheel read from its zip (never extracted), and the distribution it becomes once installed.

``read_wheel`` takes a wheel's identity and file list from its ``.dist-info`` (METADATA and
RECORD); ``wheel_distribution`` places every member where pip would (the venv scheme, with the
``.data/<scheme>/`` directories) and models the installed result, INSTALLER and REQUESTED
included, so a plan can run the checks on an environment with the wheel in it.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from dataclasses import dataclass

from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.metadata import parse_metadata
from libdoctor.environment.model import is_inside
from libdoctor.environment.record import RecordEntry, parse_record
from libdoctor.environment.target import SiteDir, Target
from libdoctor.errors import LibdoctorError

__all__ = [
    "WheelFile",
    "dist_info_members",
    "read_wheel",
    "wheel_distribution",
    "wheel_from_archive",
]

# What zipfile raises for a damaged member (a bad CRC, a truncated stream, an odd method).
_DAMAGED = (OSError, zipfile.BadZipFile, KeyError, EOFError, zlib.error, NotImplementedError)


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
    try:
        with zipfile.ZipFile(path) as archive:
            return wheel_from_archive(archive, path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise LibdoctorError(f"cannot read wheel {path}: {exc}") from None


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
    return info_dir, [i for i in infos if i.filename in wanted]


def wheel_from_archive(archive: zipfile.ZipFile, where: str) -> WheelFile:
    """The wheel in an open ARCHIVE (a local file or any seekable reader), named WHERE.

    Reads the central directory and two members, METADATA and RECORD; a damaged archive is
    a one-line ``LibdoctorError``."""
    info_dir, _ = dist_info_members(archive, where)
    infos = [i for i in archive.infolist() if not i.is_dir()]
    names = {i.filename for i in infos}
    try:
        meta = parse_metadata(archive.read(f"{info_dir}/METADATA"))
        record = (
            parse_record(archive.read(f"{info_dir}/RECORD"))
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


def _wheel_destination(wheel: WheelFile, arcname: str, site: SiteDir, target: Target) -> str:
    """Where pip puts an archive member (the ``.data/<scheme>/`` dirs of the venv scheme)."""
    data_dir = wheel.dist_info[: -len(".dist-info")] + ".data/"
    if not arcname.startswith(data_dir):
        return os.path.normpath(os.path.join(site.path, arcname))
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
    return os.path.normpath(os.path.join(roots.get(scheme, prefix), rest))


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
        rel = os.path.relpath(dest, site.path)
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
