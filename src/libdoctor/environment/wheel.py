"""A wheel read from its zip (never extracted), and the distribution it becomes once installed.

``read_wheel`` takes a wheel's identity and file list from its ``.dist-info`` (METADATA and
RECORD); ``wheel_distribution`` places every member where pip would (the venv scheme, with the
``.data/<scheme>/`` directories) and models the installed result, INSTALLER and REQUESTED
included, so a plan can run the checks on an environment with the wheel in it.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass

from libdoctor.environment.distributions import Distribution, canonicalize_name, parse_metadata
from libdoctor.environment.model import is_inside
from libdoctor.environment.record import RecordEntry, parse_record
from libdoctor.environment.target import SiteDir, Target
from libdoctor.errors import LibdoctorError

__all__ = ["WheelFile", "read_wheel", "wheel_distribution"]


@dataclass(frozen=True, slots=True)
class WheelFile:
    """A wheel's identity and file list, read from the zip (never extracted)."""

    path: str
    name: str
    version: str
    key: str
    requires_dist: tuple[str, ...]
    dist_info: str  # "<name>-<version>.dist-info" as spelled in the archive
    members: tuple[RecordEntry, ...]  # archive name, RECORD hash, size in the archive

    @property
    def display(self) -> str:
        return f"{self.name} {self.version}"


def read_wheel(path: str) -> WheelFile:
    try:
        with zipfile.ZipFile(path) as archive:
            infos = [i for i in archive.infolist() if not i.is_dir()]
            names = {i.filename for i in infos}
            dist_infos = sorted(
                {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
            )
            if len(dist_infos) != 1:
                raise LibdoctorError(f"{path} is not a wheel: {len(dist_infos)} .dist-info dirs")
            info_dir = dist_infos[0]
            meta = parse_metadata(archive.read(f"{info_dir}/METADATA"))
            record = (
                parse_record(archive.read(f"{info_dir}/RECORD"))
                if f"{info_dir}/RECORD" in names
                else None
            )
    except (OSError, zipfile.BadZipFile, KeyError) as exc:
        raise LibdoctorError(f"cannot read wheel {path}: {exc}") from None
    if record is None:
        raise LibdoctorError(f"{path} is not a wheel: no {info_dir}/RECORD")
    hashes = {e.path: e.hash for e in record.entries}
    members = tuple(RecordEntry(i.filename, hashes.get(i.filename), i.file_size) for i in infos)
    if not meta.name or not meta.version:
        raise LibdoctorError(f"{path} is not a wheel: METADATA has no Name or Version")
    return WheelFile(
        path=path,
        name=meta.name,
        version=meta.version,
        key=canonicalize_name(meta.name),
        requires_dist=meta.requires_dist,
        dist_info=info_dir,
        members=members,
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
