"""Build real, installable wheels inside a test: a zip with METADATA, WHEEL and a correct RECORD.

Only ``zipfile`` and ``hashlib``: the tests must not depend on ``wheel`` or ``setuptools``, and a
hand-built wheel lets a test say exactly which bytes each distribution claims for each path.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
import stat
import sys
import sysconfig
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

__all__ = [
    "WheelFactory",
    "build_wheel",
    "dist_info_dirname",
    "escape_name",
    "extension_suffix",
    "native_tag",
    "offline",
    "record_hash",
    "record_line",
    "sample_elf",
    "wheel_filename",
]

# Fixed zip timestamps: the same inputs give the same wheel bytes, run after run.
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)
_MODE_FILE = 0o644
_MODE_EXEC = 0o755


def escape_name(name: str) -> str:
    """The name as it appears in a wheel file name (PEP 427/491): runs of ``-_.`` become ``_``."""
    return re.sub(r"[-_.]+", "_", name)


def wheel_filename(name: str, version: str, tag: str = "py3-none-any") -> str:
    return f"{escape_name(name)}-{version}-{tag}.whl"


def dist_info_dirname(name: str, version: str) -> str:
    return f"{escape_name(name)}-{version}.dist-info"


def record_hash(data: bytes) -> str:
    """The RECORD hash field: ``sha256=`` and the urlsafe base64 digest without padding."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def record_line(path: str, data: bytes) -> str:
    """One RECORD row for PATH holding DATA (no newline). Paths with ``,`` or ``"`` are quoted."""
    field = f'"{path.replace(chr(34), chr(34) * 2)}"' if ("," in path or '"' in path) else path
    return f"{field},{record_hash(data)},{len(data)}"


def _metadata(
    name: str,
    version: str,
    requires: Iterable[str],
    extra_metadata: Mapping[str, str] | Iterable[tuple[str, str]],
) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {req}" for req in requires]
    items = extra_metadata.items() if isinstance(extra_metadata, Mapping) else extra_metadata
    lines += [f"{key}: {value}" for key, value in items]
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def _wheel_file(tag: str) -> bytes:
    purelib = tag.endswith("-none-any")
    lines = [
        "Wheel-Version: 1.0",
        "Generator: libdoctor-tests",
        f"Root-Is-Purelib: {'true' if purelib else 'false'}",
    ]
    # A compressed tag set ("py2.py3-none-any") expands to one Tag line per combination.
    interpreters, abis, platforms = tag.split("-")
    for interp in interpreters.split("."):
        for abi in abis.split("."):
            for plat in platforms.split("."):
                lines.append(f"Tag: {interp}-{abi}-{plat}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _is_executable(arcname: str) -> bool:
    return ".data/scripts/" in arcname or arcname.endswith(".so") or ".so." in arcname


def build_wheel(
    dest_dir: Path,
    name: str,
    version: str,
    files: Mapping[str, bytes],
    *,
    requires: Iterable[str] = (),
    extra_metadata: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    tag: str = "py3-none-any",
    data: Mapping[str, bytes] | None = None,
    dist_info_name: str | None = None,
    metadata: bytes | None = None,
) -> Path:
    """Write ``NAME-VERSION-TAG.whl`` into DEST_DIR and return its path.

    FILES maps archive paths (``pkg/__init__.py``, ``pkg/lib/libx.so.1``) to their bytes; they land
    in site-packages. DATA maps ``scheme/relative/path`` (``scripts/tool``, ``data/share/x``,
    ``headers/x.h``) to bytes placed under ``NAME-VERSION.data/``; pip installs ``scripts`` into
    ``bin/`` and ``data`` relative to the prefix. DIST_INFO_NAME overrides the project part of the
    ``.dist-info`` directory name (``Foo_Bar`` gives ``Foo_Bar-1.0.dist-info``); pip accepts any
    spelling whose normalized form matches the wheel's name. METADATA: the METADATA file's
    bytes exactly (REQUIRES and EXTRA_METADATA unused), for a real project's shape.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)
    info_project = dist_info_name if dist_info_name is not None else escape_name(name)
    info_dir = f"{info_project}-{version}.dist-info"
    data_dir = f"{escape_name(name)}-{version}.data"

    entries: list[tuple[str, bytes]] = list(files.items())
    if data:
        entries += [(f"{data_dir}/{rel}", payload) for rel, payload in data.items()]
    if metadata is None:
        metadata = _metadata(name, version, requires, extra_metadata)
    entries.append((f"{info_dir}/METADATA", metadata))
    entries.append((f"{info_dir}/WHEEL", _wheel_file(tag)))

    seen: set[str] = set()
    for arcname, _ in entries:
        if arcname in seen:
            raise ValueError(f"duplicate archive path {arcname!r}")
        if arcname.startswith("/") or ".." in arcname.split("/"):
            raise ValueError(f"archive path must be relative and inside the wheel: {arcname!r}")
        seen.add(arcname)

    record_name = f"{info_dir}/RECORD"
    record_rows = [record_line(arcname, payload) for arcname, payload in entries]
    record_rows.append(f"{record_name},,")
    record = ("\n".join(record_rows) + "\n").encode("utf-8")

    wheel_path = dest_dir / wheel_filename(name, version, tag)
    with zipfile.ZipFile(wheel_path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for arcname, payload in [*entries, (record_name, record)]:
            info = zipfile.ZipInfo(arcname, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            mode = _MODE_EXEC if _is_executable(arcname) else _MODE_FILE
            info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, payload)
    return wheel_path


class WheelFactory:
    """``make_wheel(name, version, files, ...)``: ``build_wheel`` into one directory (``dest``),
    which is also the ``--find-links`` directory that can reinstall any of them."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest

    def __call__(
        self,
        name: str,
        version: str,
        files: Mapping[str, bytes],
        *,
        requires: Iterable[str] = (),
        extra_metadata: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        tag: str = "py3-none-any",
        data: Mapping[str, bytes] | None = None,
        dist_info_name: str | None = None,
        metadata: bytes | None = None,
    ) -> Path:
        return build_wheel(
            self.dest,
            name,
            version,
            files,
            requires=requires,
            extra_metadata=extra_metadata,
            tag=tag,
            data=data,
            dist_info_name=dist_info_name,
            metadata=metadata,
        )


class WheelSet(Protocol):
    """Test wheels built into one directory (``support.seed``, ``support.conflicts``)."""

    @property
    def find_links(self) -> Path: ...


def offline(links: Path | WheelSet) -> list[str]:
    """pip's and uv's arguments to install from LINKS alone (a directory, or a wheel set's)."""
    where = links if isinstance(links, Path) else links.find_links
    return ["--no-index", "--find-links", str(where)]


def native_tag() -> str:
    """The most specific wheel tag this interpreter installs (``cp311-cp311-linux_x86_64``)."""
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{platform}"


def extension_suffix() -> str:
    """This interpreter's extension module suffix (``.cpython-311-x86_64-linux-gnu.so``)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return suffix if isinstance(suffix, str) else ".so"


@functools.cache
def sample_elf() -> bytes:
    """The bytes of a small, real ELF shared object of this machine (a stdlib extension module).

    Test wheels ship it as their "native libraries" so checks that parse ELF see a valid file whose
    only needs are libc's. Bytes appended after the section headers keep it valid, which is how
    tests make same-size or different-size variants of one library.
    """
    candidates: list[Path] = []
    dynload = Path(
        sysconfig.get_config_var("DESTSHARED") or Path(os.__file__).parent / "lib-dynload"
    )
    if dynload.is_dir():
        candidates += sorted(dynload.glob("*.so"), key=lambda p: p.stat().st_size)
    for path in candidates:
        data = path.read_bytes()
        if data[:4] == b"\x7fELF":
            return data
    raise RuntimeError(f"no ELF extension module found in {dynload}")
