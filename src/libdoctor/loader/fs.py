"""The file-system edge of the loader emulation (``libdoctor.loader.search``).

The emulation sees the disk only through ``LoaderFS``: directory listings, and per path an
``Inspection`` of what the loader's open() and header check would find there (the ELF parsed
by ``libdoctor.elf.dynamic.read_elf``, or the first bytes the loader decides on when that fails).
``RealFS`` is the real disk; it lists each directory and parses each file (by inode) once,
and with a ``ParsedFiles`` (``environment.parsed``) keeps what it parsed for the next run.
"""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass
from typing import Literal, Protocol

from libdoctor.elf.dynamic import ElfFormatError, ElfInfo, parse_elf_at, read_elf
from libdoctor.elf.rodata import SCAN_LIMIT, library_strings, read_library_strings
from libdoctor.environment.parsed import ParsedFiles
from libdoctor.environment.rooted import Rooted

__all__ = [
    "EHDR64_SIZE",
    "ELF",
    "FileId",
    "Inspection",
    "InspectionKind",
    "LoaderFS",
    "RealFS",
    "RootedFS",
    "elf_of",
    "elf_value",
]

ELF = "elf"  # the part of the parsed-file cache the loader's files are kept in
_STRINGS = "\0rodata"  # a cache key's suffix for a file's library strings (no path holds NUL)

InspectionKind = Literal["missing", "denied", "directory", "file", "unreadable"]

EHDR64_SIZE = 64  # glibc reads sizeof(ElfW(Ehdr)) before any check


@dataclass(frozen=True, slots=True)
class FileId:
    dev: int
    ino: int


@dataclass(frozen=True, slots=True)
class Inspection:
    """What the loader's open() + header check would see at one path."""

    kind: InspectionKind
    file_id: FileId | None = None
    elf: ElfInfo | None = None  # None for kind "file" when read_elf rejected it
    error: str | None = None  # read_elf's reason, or the OS error text
    head: bytes = b""  # first 64 bytes when read_elf failed: the loader decides on these


class LoaderFS(Protocol):
    """The only file-system access of the emulation. Paths are absolute and never normalised."""

    def entries(self, directory: str) -> frozenset[str] | None:
        """Names in DIRECTORY; empty if it does not exist; None if it cannot be listed."""
        ...

    def inspect(self, path: str) -> Inspection: ...

    def realpath(self, path: str) -> str: ...

    def library_strings(self, path: str) -> tuple[str, ...] | None:
        """Library names PATH holds as whole read-only strings (``elf.rodata``); None when
        it has no small ``.rodata`` or cannot be read."""
        ...


_EMPTY: frozenset[str] = frozenset()


class RealFS:
    """LoaderFS on the real disk: each directory listed once, each file (by inode) parsed once.
    PARSED: what earlier runs parsed, served while each file is still the one parsed."""

    def __init__(self, parsed: ParsedFiles | None = None) -> None:
        self._entries: dict[str, frozenset[str] | None] = {}
        self._paths: dict[str, Inspection] = {}
        self._files: dict[FileId, Inspection] = {}
        self._strings: dict[str, tuple[str, ...] | None] = {}
        self._parsed = parsed if parsed is not None and parsed.file is not None else None

    def entries(self, directory: str) -> frozenset[str] | None:
        try:
            return self._entries[directory]
        except KeyError:
            pass
        listing: frozenset[str] | None
        try:
            listing = frozenset(os.listdir(directory))
        except (FileNotFoundError, NotADirectoryError):
            listing = _EMPTY
        except OSError:
            listing = None  # e.g. no read permission: probe files directly, as open() would
        self._entries[directory] = listing
        return listing

    def inspect(self, path: str) -> Inspection:
        try:
            return self._paths[path]
        except KeyError:
            pass
        result = self._inspect(path)
        self._paths[path] = result
        return result

    def _inspect(self, path: str) -> Inspection:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return Inspection("missing")
        except PermissionError:
            return Inspection("denied")
        except OSError as exc:
            return Inspection("unreadable", error=exc.strerror or str(exc))
        file_id = FileId(st.st_dev, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            return Inspection("directory", file_id)
        if not stat.S_ISREG(st.st_mode):
            return Inspection("unreadable", file_id, error="not a regular file")
        cached = self._files.get(file_id)
        if cached is not None:
            return cached
        try:
            result = Inspection("file", file_id, elf=self._read_elf(path))
        except ElfFormatError as exc:
            result = Inspection("file", file_id, error=str(exc), head=_read_head(path))
        except PermissionError:
            result = Inspection("denied", file_id)
        except OSError as exc:
            result = Inspection("unreadable", file_id, error=exc.strerror or str(exc))
        self._files[file_id] = result
        return result

    def _read_elf(self, path: str) -> ElfInfo:
        """read_elf(PATH), or what it returned for the file opened now (opened all the same:
        one that may not be read is what it is, whatever was parsed). Kept and looked up by
        the identity of the file opened, not by the stat ``_inspect`` took: the path may name
        another file since (a symlink repointed), whose value must never be kept as the
        first one's."""
        if self._parsed is None:
            return read_elf(path)
        fd, opened = _open_regular(path)
        try:
            known = elf_of(self._parsed.get(path, opened))
            if known is not None:
                return known
            info = parse_elf_at(functools.partial(_pread, fd), opened.st_size)
        finally:
            os.close(fd)
        self._parsed.put(path, opened, elf_value(info))
        return info

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def library_strings(self, path: str) -> tuple[str, ...] | None:
        if path not in self._strings:
            self._strings[path] = self._read_strings(path)
        return self._strings[path]

    def _read_strings(self, path: str) -> tuple[str, ...] | None:
        """read_library_strings(PATH), or what it gave for the file opened now (by that
        file's identity, as ``_read_elf``)."""
        try:
            if self._parsed is None:
                return read_library_strings(path)
            fd, opened = _open_regular(path)
            try:
                known = self._parsed.get(path + _STRINGS, opened)
                if type(known) is tuple and set(map(type, known)) <= {str}:
                    return known
                found = library_strings(functools.partial(_pread, fd), opened.st_size, SCAN_LIMIT)
            finally:
                os.close(fd)
        except (ElfFormatError, OSError):
            return None
        if found is not None:
            self._parsed.put(path + _STRINGS, opened, found)
        return found


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    """PATH opened as ``read_elf`` opens it, and the stat of the file opened; a directory,
    FIFO or device is ``ElfFormatError("not a regular file")``, as read_elf says."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        opened = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        raise ElfFormatError("not a regular file")
    return fd, opened


def _pread(fd: int, offset: int, size: int) -> bytes:
    return os.pread(fd, size, offset)


class RootedFS(RealFS):
    """RealFS for a system mounted at ROOT (an image, a chroot): each path is a path on this
    machine under ROOT, opened the way the loader inside ROOT would open it, every symlink
    (``/usr/lib/...`` absolute ones too) resolved with ROOT as ``/``, never into the host."""

    def __init__(self, root: str, parsed: ParsedFiles | None = None) -> None:
        super().__init__(parsed)
        self.root = os.path.normpath(root)
        self._rooted = Rooted(self.root)

    def inside(self, path: str) -> str:
        """PATH on this machine, resolved in ROOT (a path outside ROOT is taken as ROOT's)."""
        return self._rooted.host(path)

    def entries(self, directory: str) -> frozenset[str] | None:
        return super().entries(self.inside(directory))

    def inspect(self, path: str) -> Inspection:
        return super().inspect(self.inside(path))

    def realpath(self, path: str) -> str:
        return self.inside(path)

    def library_strings(self, path: str) -> tuple[str, ...] | None:
        return super().library_strings(self.inside(path))


def elf_value(info: ElfInfo) -> tuple[object, ...]:
    """INFO as the parsed-file cache keeps it: its fields, in order, plain values."""
    return (
        info.elf_class,
        info.byteorder,
        info.machine,
        info.elf_type,
        info.interpreter,
        info.soname,
        info.needed,
        info.rpath,
        info.runpath,
        info.flags_1,
        info.has_dynamic,
    )


_ELF_TYPES = (int, str, int, int, (str, None), (str, None), tuple, (str, None), (str, None), int)


def elf_of(value: object) -> ElfInfo | None:
    """The ElfInfo a cached VALUE holds; None unless every field has its type."""
    if type(value) is not tuple or len(value) != 11 or type(value[10]) is not bool:
        return None
    for field, kind in zip(value, _ELF_TYPES, strict=False):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not any(field is None if k is None else type(field) is k for k in kinds):
            return None
    if not set(map(type, value[6])) <= {str}:
        return None
    return ElfInfo(*value)


def _read_head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(EHDR64_SIZE)
    except OSError:
        return b""
