"""The file-system edge of the loader emulation (``libdoctor.loader.search``).

The emulation sees the disk only through ``LoaderFS``: directory listings, and per path an
``Inspection`` of what the loader's open() and header check would find there (the ELF parsed
by ``libdoctor.elf.dynamic.read_elf``, or the first bytes the loader decides on when that fails).
``RealFS`` is the real disk; it lists each directory and parses each file (by inode) once.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Literal, Protocol

from libdoctor.elf.dynamic import ElfFormatError, ElfInfo, read_elf
from libdoctor.elf.rodata import read_library_strings
from libdoctor.environment.rooted import Rooted

__all__ = [
    "EHDR64_SIZE",
    "FileId",
    "Inspection",
    "InspectionKind",
    "LoaderFS",
    "RealFS",
    "RootedFS",
]

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
    """LoaderFS on the real disk: each directory listed once, each file (by inode) parsed once."""

    def __init__(self) -> None:
        self._entries: dict[str, frozenset[str] | None] = {}
        self._paths: dict[str, Inspection] = {}
        self._files: dict[FileId, Inspection] = {}
        self._strings: dict[str, tuple[str, ...] | None] = {}

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
            result = Inspection("file", file_id, elf=read_elf(path))
        except ElfFormatError as exc:
            result = Inspection("file", file_id, error=str(exc), head=_read_head(path))
        except PermissionError:
            result = Inspection("denied", file_id)
        except OSError as exc:
            result = Inspection("unreadable", file_id, error=exc.strerror or str(exc))
        self._files[file_id] = result
        return result

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def library_strings(self, path: str) -> tuple[str, ...] | None:
        if path not in self._strings:
            try:
                self._strings[path] = read_library_strings(path)
            except (ElfFormatError, OSError):
                self._strings[path] = None
        return self._strings[path]


class RootedFS(RealFS):
    """RealFS for a system mounted at ROOT (an image, a chroot): each path is a path on this
    machine under ROOT, opened the way the loader inside ROOT would open it, every symlink
    (``/usr/lib/...`` absolute ones too) resolved with ROOT as ``/``, never into the host."""

    def __init__(self, root: str) -> None:
        super().__init__()
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


def _read_head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(EHDR64_SIZE)
    except OSError:
        return b""
