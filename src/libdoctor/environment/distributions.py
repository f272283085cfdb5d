"""Installed distributions (dist-info, egg-info and conda-meta records) read into frozen values.

A conda package is a distribution like a pip one: its ``conda-meta/<name>-<version>-<build>.json``
lists every path it installed, relative to the prefix, with its sha256 and size
(``paths_data``). A file with a ``prefix_placeholder`` was rewritten at install (the build
prefix replaced by this one): its recorded sha256 and, for a text file, its size are the
package's, not the installed file's; newer conda records the installed file's
``sha256_in_prefix`` (and rattler ``sha256_in_prefix`` too), which is what is checked then.
Without it such a file is checked for presence only, as conda itself can do no more. A
softlink, and what conda writes at install (``pyc_file``, entry point scripts), is checked
for presence, a directory entry not at all. The package's Python
metadata (its own ``.dist-info``, INSTALLER ``conda``) gives the distribution its Python
name, version and requirements; that dist-info is then part of the conda package, not a
second distribution.

Each file is read as its reference reads it (``metadata``, ``record``; a conda-meta record as
conda does: UTF-8 JSON). A file that is absent is a fact about the environment, which a
finding reports. A site dir, metadata file or conda-meta record that is there but cannot be
read (permission denied, an I/O error, over 256 MiB, a record conda would call corrupt) is the
one-line error (exit 2): a check that skipped it would call clean an environment it never saw.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace

from libdoctor.environment.metadata import Metadata, parse_installer, parse_metadata
from libdoctor.environment.parsed import ParsedFiles, record_of, record_value
from libdoctor.environment.record import (
    ParsedRecord,
    RecordEntry,
    RecordProblem,
    parse_installed_files,
    parse_record,
)
from libdoctor.environment.rooted import HOST, Rooted
from libdoctor.environment.target import SiteDir, Target
from libdoctor.errors import TargetError

EMPTY_RECORD = "an empty RECORD"
"""``Distribution.record_error`` for a RECORD with no rows: pip would uninstall nothing."""


@dataclass(frozen=True, slots=True)
class Distribution:
    name: str
    version: str
    key: str  # canonical (PEP 503) name
    metadata_dir: str  # absolute path of the *.dist-info / *.egg-info
    kind: str  # "dist-info" | "egg-info"
    site: SiteDir
    base_dir: str  # RECORD paths are relative to this directory
    installer: str | None  # INSTALLER contents ("pip", "uv", ...)
    requires_dist: tuple[str, ...]
    record: ParsedRecord | None  # None: no file list at all
    record_error: str | None  # why the file list is unusable (missing, empty)
    conda_spec: str | None = None  # a conda package: its ``name=version=build``
    metadata_problem: str | None = None  # why pip cannot read its METADATA (not UTF-8)

    @property
    def display(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def external(self) -> bool:
        """Not installed by a PEP 376 installer (pip, uv, conda all write INSTALLER).

        Typically a distro package (Debian's dist-packages): its files may be patched or
        stripped by the distro on purpose, and only the distro's package manager repairs it.
        """
        return self.installer is None


_SEPARATORS = re.compile(r"[-_.]+")


def canonicalize_name(name: str) -> str:
    """PEP 503 normalised name (what packaging.utils.canonicalize_name returns)."""
    return _SEPARATORS.sub("-", name).lower()


# Far beyond any real file (a torch RECORD is 2 MB, the longest METADATA a few MB): what a
# hostile one may make libdoctor read.
_MAX_FILE = 256 << 20


def _read(path: str, files: Rooted = HOST) -> bytes | None:
    """PATH's bytes; None when it does not exist. A file that exists but cannot be read is
    the one-line error: libdoctor cannot tell the truth about an environment it cannot see
    (a finding's fix could not repair a permission or a disk error either). Bounded: a
    regular file of at most ``_MAX_FILE`` bytes (a FIFO or a device is opened without
    waiting and refused). FILES: the system it is read in (``--root``: every symlink
    resolved inside the image)."""
    opened = _open_regular(path, files)
    if opened is None:
        return None
    fd, st = opened
    try:
        return _read_opened(path, fd, st)
    finally:
        os.close(fd)


def _open_regular(path: str, files: Rooted = HOST) -> tuple[int, os.stat_result] | None:
    """PATH opened for reading, and its stat; None when it does not exist (or is a
    directory). Anything else that is not a regular file of at most ``_MAX_FILE`` bytes, or
    cannot be opened, is the one-line error."""
    try:
        fd = os.open(files.host(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise TargetError(_cannot_read(path, exc)) from None
    try:
        kind = os.fstat(fd)
        if stat.S_ISDIR(kind.st_mode):
            os.close(fd)
            return None  # a directory of that name is no file either
        if not stat.S_ISREG(kind.st_mode) or kind.st_size > _MAX_FILE:
            why = "too large" if stat.S_ISREG(kind.st_mode) else "not a regular file"
            raise TargetError(f"{path} is {why} (at most {_MAX_FILE >> 20} MiB): not read")
    except OSError as exc:
        os.close(fd)
        raise TargetError(_cannot_read(path, exc)) from None
    except TargetError:
        os.close(fd)
        raise
    return fd, kind


def _read_opened(path: str, fd: int, kind: os.stat_result) -> bytes:
    try:
        data = _read_fd(fd, kind.st_size + 1)  # +1: one that grew while read is refused
    except OSError as exc:
        raise TargetError(_cannot_read(path, exc)) from None
    if len(data) > _MAX_FILE:
        raise TargetError(f"{path} is too large (at most {_MAX_FILE >> 20} MiB): not read")
    return data


def _read_fd(fd: int, limit: int) -> bytes:
    chunks = []
    while limit > 0 and (chunk := os.read(fd, min(limit, 1 << 24))):
        chunks.append(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def _cannot_read(path: str, exc: OSError) -> str:
    denied = exc.errno in (errno.EACCES, errno.EPERM)
    hint = " (run as a user who may read the environment)" if denied else ""
    return f"cannot read {path}: {exc.strerror or exc}{hint}"


def parse_requires_txt(data: bytes) -> tuple[str, ...]:
    """An egg-info's ``requires.txt`` as Requires-Dist lines, the way pip reads it.

    ``[extra:marker]`` sections become markers; the extra name is normalised, as dist-info
    metadata has it, so that markers compare alike.
    """
    out: list[str] = []
    extra = marker = ""
    for raw in data.decode("utf-8", "surrogateescape").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            extra, _, marker = line.strip("[]").partition(":")
            extra = canonicalize_name(extra) if extra else ""
            continue
        if extra and marker:
            out.append(f'{line} ; ({marker}) and extra == "{extra}"')
        elif extra:
            out.append(f'{line} ; extra == "{extra}"')
        elif marker:
            out.append(f"{line} ; {marker}")
        else:
            out.append(line)
    return tuple(out)


def _name_from_dirname(dirname: str) -> tuple[str, str]:
    stem = dirname.rsplit(".", 1)[0]
    name, _, version = stem.partition("-")
    version = version.split("-py", 1)[0]
    return name, version


def _read_file_list(
    path: str,
    kind: str,
    site: SiteDir,
    only_containing: str | None,
    files: Rooted = HOST,
    records: ParsedFiles | None = None,
) -> tuple[ParsedRecord | None, str | None, str]:
    """(file list, why it is unusable, the dir its paths are relative to). RECORDS: parsed
    RECORDs kept between runs (``environment.parsed``), for a whole file list only."""
    if kind == "dist-info" and only_containing is None:
        record, error = _read_record(os.path.join(path, "RECORD"), files, records)
        return record, error, site.path
    if kind == "dist-info":
        name, base_dir, parse = "RECORD", site.path, parse_record
    else:
        name, base_dir, parse = "installed-files.txt", path, parse_installed_files
    raw = _read(os.path.join(path, name), files)
    if raw is None:
        # pip always writes RECORD; an egg-info without a file list is merely old.
        return None, ("no RECORD" if kind == "dist-info" else None), base_dir
    if kind == "dist-info" and not raw.strip():
        return None, EMPTY_RECORD, base_dir
    return parse(raw, only_containing), None, base_dir


def _read_record(
    path: str, files: Rooted, records: ParsedFiles | None
) -> tuple[ParsedRecord | None, str | None]:
    """The RECORD at PATH parsed, or why it is unusable; from RECORDS while the file is
    still the one parsed (opened all the same: one that may not be read is the error)."""
    opened = _open_regular(path, files)
    if opened is None:
        return None, "no RECORD"
    fd, st = opened
    try:
        if records is not None and records.file is not None:
            known = record_of(records.get(path, st))
            if known is not None:
                return known, None
        raw = _read_opened(path, fd, st)
    finally:
        os.close(fd)
    if not raw.strip():
        # pip reads an empty RECORD as "no files": its uninstall removes nothing, says
        # "No files were found to uninstall" and succeeds. Treated as lost, not as empty.
        return None, EMPTY_RECORD
    parsed = parse_record(raw)
    if records is not None and records.file is not None:
        records.put(path, st, record_value(parsed))
    return parsed, None


def _read_dist(
    site: SiteDir,
    entry_name: str,
    only_containing: str | None = None,
    files: Rooted = HOST,
    records: ParsedFiles | None = None,
) -> Distribution | None:
    path = os.path.join(site.path, entry_name)
    kind = "dist-info" if entry_name.endswith(".dist-info") else "egg-info"
    if not files.isdir(path):
        if kind == "dist-info":
            return None
        # A distutils-era PKG-INFO file: metadata only, no file list.
        meta = _read_metadata(path, "PKG-INFO", files)
        return _make(site, path, kind, meta, entry_name, None, (None, None, site.path))
    metadata = os.path.join(path, "METADATA" if kind == "dist-info" else "PKG-INFO")
    meta = _read_metadata(metadata, None, files)
    if kind == "egg-info" and not meta.requires_dist:
        # pip's rule: requires.txt only when PKG-INFO has no Requires-Dist at all
        requires = _read(os.path.join(path, "requires.txt"), files)
        if requires:
            meta = replace(meta, requires_dist=parse_requires_txt(requires))
    installer = parse_installer(_read(os.path.join(path, "INSTALLER"), files) or b"")
    listed = _read_file_list(path, kind, site, only_containing, files, records)
    return _make(site, path, kind, meta, entry_name, installer or None, listed)


def _read_metadata(path: str, label: str | None = None, files: Rooted = HOST) -> Metadata:
    """The METADATA (or PKG-INFO) at PATH; an absent one is empty (the directory name
    then names the distribution)."""
    data = _read(path, files)
    if data is None:
        return Metadata("", "", ())
    meta = parse_metadata(data)
    if meta.problem is None:
        return meta
    return replace(meta, problem=f"its {label or os.path.basename(path)} is {meta.problem}")


def _make(
    site: SiteDir,
    path: str,
    kind: str,
    meta: Metadata,
    entry_name: str,
    installer: str | None,
    files: tuple[ParsedRecord | None, str | None, str],
) -> Distribution:
    record, record_error, base_dir = files
    name, version = meta.name, meta.version
    if not name or not version:
        dir_name, dir_version = _name_from_dirname(entry_name)
        name = name or dir_name
        version = version or dir_version
    return Distribution(
        name=name,
        version=version,
        key=canonicalize_name(name),
        metadata_dir=path,
        kind=kind,
        site=site,
        base_dir=base_dir,
        installer=installer,
        requires_dist=meta.requires_dist,
        record=record,
        record_error=record_error,
        metadata_problem=meta.problem,
    )


def required_names(dist: Distribution) -> list[str]:
    """Canonical names DIST requires unconditionally here (markers evaluated, extras off).

    Markers are evaluated for the running interpreter and platform, which are the target's
    in every case that matters (``platform_system == "Linux"``); unparsable lines are skipped.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    names = []
    for text in dist.requires_dist:
        try:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
        except (InvalidRequirement, ValueError, KeyError):
            continue
        names.append(canonicalize_name(req.name))
    return names


def scan_site(
    site: SiteDir,
    only_containing: str | None = None,
    files: Rooted = HOST,
    records: ParsedFiles | None = None,
) -> list[Distribution]:
    """SITE's distributions; FILES: read in the system they belong to (``--root``)."""
    return [
        dist
        for name in _listing(site.path, (".dist-info", ".egg-info"), files)
        if (dist := _read_dist(site, name, only_containing, files, records)) is not None
    ]


def _listing(folder: str, suffixes: tuple[str, ...], files: Rooted = HOST) -> list[str]:
    """The names in FOLDER ending in SUFFIXES, sorted; none when FOLDER does not exist. One
    that cannot be listed is the one-line error, never "0 distributions, no problems"."""
    try:
        with os.scandir(files.host(folder)) as entries:
            return sorted(e.name for e in entries if e.name.endswith(suffixes))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise TargetError(_cannot_read(folder, exc)) from None


def scan_target(
    target: Target, only_containing: str | None = None, records: ParsedFiles | None = None
) -> list[Distribution]:
    """Every distribution of TARGET; ONLY_CONTAINING restricts file lists (see parse_record).
    RECORDS: parsed RECORDs kept between runs (``environment.parsed``)."""
    dists: list[Distribution] = []
    files = Rooted(target.root)
    for site in target.site_dirs:
        dists.extend(scan_site(site, only_containing, files, records))
    conda = scan_conda(target, only_containing, files)
    if not conda:
        return dists
    owned = {d.metadata_dir for d in conda}
    return [d for d in dists if d.metadata_dir not in owned] + conda


def scan_conda(
    target: Target, only_containing: str | None = None, files: Rooted = HOST
) -> list[Distribution]:
    """The conda packages of TARGET's prefix (``conda-meta/*.json``), sorted by file name."""
    meta = os.path.join(target.prefix, "conda-meta")
    names = _listing(meta, (".json",), files)
    if not names:
        return []
    site = next(
        (s for s in target.site_dirs if s.prefix == target.prefix and not s.inherited),
        SiteDir(target.prefix, target.prefix, root=target.root),
    )
    dists = []
    for name in names:
        path = os.path.join(meta, name)
        record = _conda_record(path, files)
        if isinstance(record, dict) and record.get("name"):
            dists.append(_conda_dist(site, target.prefix, path, record, files))
    if only_containing is not None:
        dists = [_only(d, only_containing) for d in dists]
    return dists


def _conda_record(path: str, files: Rooted = HOST) -> object:
    """A conda-meta record as conda reads it (UTF-8 text, then JSON). conda refuses an
    environment with a record it cannot read (CorruptedEnvironmentError): so does libdoctor."""
    try:
        return json.loads((_read(path, files) or b"").decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both
        raise TargetError(
            f"{path} is not a conda record ({exc}); conda refuses this environment too "
            "(CorruptedEnvironmentError): restore the file, or remove it and reinstall its package"
        ) from None


def _conda_dist(
    site: SiteDir, prefix: str, path: str, record: dict[str, object], files: Rooted = HOST
) -> Distribution:
    entries = tuple(_conda_entries(record))
    python = _python_metadata_dir(prefix, entries)
    meta = Metadata(str(record["name"]), str(record.get("version", "")), ())
    if python is not None:
        found = _read_metadata(os.path.join(python, "METADATA"), None, files)
        meta = replace(found, name=found.name or meta.name, version=found.version or meta.version)
    return Distribution(
        name=meta.name,
        version=meta.version,
        key=canonicalize_name(meta.name),
        metadata_dir=python or path,
        kind="conda",
        site=site,
        base_dir=prefix,
        installer="conda",
        requires_dist=meta.requires_dist,
        record=ParsedRecord(entries, ()),
        record_error=None,
        conda_spec=f"{record['name']}={record.get('version', '')}={record.get('build', '')}",
        metadata_problem=meta.problem,
    )


def _conda_entries(record: dict[str, object]) -> Iterable[RecordEntry]:
    """Each installed path of a conda record, with what can be checked of its bytes."""
    paths_data = record.get("paths_data")
    rows = paths_data.get("paths") if isinstance(paths_data, dict) else None
    if not isinstance(rows, list):
        files = record.get("files")
        for name in files if isinstance(files, list) else ():
            yield RecordEntry(str(name), None, None)
        return
    for row in rows:
        if not isinstance(row, dict) or row.get("path_type") == "directory":
            continue
        path = str(row.get("_path", ""))
        if row.get("path_type", "hardlink") != "hardlink":
            # a softlink, or written by conda at install (pyc_file, an entry point script):
            # no bytes of the package to compare with
            yield RecordEntry(path, None, None)
        elif row.get("prefix_placeholder"):
            binary = row.get("file_mode") == "binary"  # padded in place: same size
            size = row.get("size_in_bytes") if binary else None
            yield RecordEntry(path, _conda_hash(row.get("sha256_in_prefix")), _int(size))
        else:
            yield RecordEntry(path, _conda_hash(row.get("sha256")), _int(row.get("size_in_bytes")))


def _conda_hash(digest: object) -> str | None:
    """conda's hex sha256 spelled as RECORD spells it."""
    if not isinstance(digest, str) or len(digest) != 64:
        return None
    try:
        raw = bytes.fromhex(digest)
    except ValueError:
        return None
    return "sha256=" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _python_metadata_dir(prefix: str, entries: tuple[RecordEntry, ...]) -> str | None:
    """The package's own ``.dist-info`` (its Python name, version and requirements)."""
    for entry in entries:
        head, _, name = entry.path.rpartition("/")
        if name == "METADATA" and head.endswith(".dist-info") and "site-packages/" in head:
            return os.path.join(prefix, head)
    return None


def _only(dist: Distribution, needle: str) -> Distribution:
    assert dist.record is not None
    entries = tuple(e for e in dist.record.entries if needle in e.path)
    return replace(dist, record=ParsedRecord(entries, ()))


def record_problems(dist: Distribution) -> Iterable[RecordProblem]:
    return dist.record.problems if dist.record else ()
