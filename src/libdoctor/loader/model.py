"""The values of the loader emulation (``loader.search``): what it takes and what it returns.

``SearchConfig`` holds the process-level inputs; a request's outcome is a ``Resolution`` (with
the ``SearchDir``s tried and the files ``Rejected``), a loaded object a ``LoadedObject``, one
load a ``Closure``, and the process after the main program loaded a ``Process``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from libdoctor.elf.dynamic import ElfInfo
from libdoctor.loader.fs import FileId
from libdoctor.loader.system import LoaderSystem

__all__ = [
    "Closure",
    "LoadedObject",
    "NamespaceIndex",
    "Process",
    "Rejected",
    "RequestKind",
    "Resolution",
    "SearchConfig",
    "SearchDir",
    "Source",
    "Status",
    "Via",
]

Source = Literal["rpath", "ld_library_path", "runpath", "cache", "default"]
"""Where a searched directory came from (the cache "directory" is the entry's file)."""
Via = Literal["loaded", "path", "rpath", "ld_library_path", "runpath", "cache", "default"]
"""How a request was satisfied: an already-loaded object, a name with '/', or a search step."""
Status = Literal["found", "not_found", "error"]
"""``error`` is a hard error: the loader stops for this name (and ld.so for the whole load)."""
RequestKind = Literal["needed", "preload", "dlopen", "runtime"]
"""``runtime``: a library dlopen'ing a name itself (``loader.dlopened``), searched from it."""


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """The process-level inputs of a search; read from the environment by the caller, not here.

    LD_LIBRARY_PATH is taken as at process start (None or "" = unset). CWD must be absolute:
    empty and relative path elements are relative to it. PRELOAD holds LD_PRELOAD's names
    (see ``split_preload``). INHIBIT_CACHE skips /etc/ld.so.cache (``ld.so --inhibit-cache``).
    """

    system: LoaderSystem
    ld_library_path: str | None = None
    cwd: str = "/"
    preload: tuple[str, ...] = ()
    inhibit_cache: bool = False

    def __post_init__(self) -> None:
        if not self.cwd.startswith("/"):
            raise ValueError(f"SearchConfig.cwd must be absolute, got {self.cwd!r}")


@dataclass(frozen=True, slots=True)
class SearchDir:
    """One directory in the order tried (its glibc-hwcaps and legacy subdirs included).

    DIRECTORY is DST-expanded and textual ("" means the working directory; relative ones are
    relative to it). For source "cache" it is the path the cache returned. OWNER is the object
    whose DT_RPATH/DT_RUNPATH listed it; ELEMENT the list element before expansion.
    """

    source: Source
    directory: str
    owner: str | None = None
    element: str | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    """A file the search saw and passed over (or stopped at, for a hard error)."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """One request: a DT_NEEDED entry of REQUESTER, an LD_PRELOAD name, or a dlopen'ed path.

    PATH is the loaded object that satisfies it (None unless found); FOUND_PATH the file the
    search located (differs from PATH when that file was already loaded under another path,
    and names the offending file for a hard error). VIA_OWNER is the object whose RPATH or
    RUNPATH held the directory.
    """

    kind: RequestKind
    requester: str | None  # path of the requesting object; None for a dlopen'ed root
    name: str  # as written
    expanded: str  # after $ORIGIN/$LIB/$PLATFORM substitution
    status: Status
    path: str | None
    found_path: str | None
    via: Via | None
    via_owner: str | None
    searched: tuple[SearchDir, ...]
    rejected: tuple[Rejected, ...]
    reason: str | None  # why not found / the hard error; None when found


@dataclass(frozen=True, slots=True)
class LoadedObject:
    """One object in the emulated process."""

    path: str  # what the loader opened it by (textual; relative = relative to the cwd)
    request: str  # the name that first loaded it (first column of ld.so's trace)
    soname: str | None
    needed: tuple[str, ...]
    loader: str | None  # path of the object whose request loaded it; None: main, dlopen'ed root
    origin: str | None  # its $ORIGIN
    file_id: FileId | None
    elf: ElfInfo


@dataclass(frozen=True, slots=True)
class Closure:
    """The result of loading one root (the main program, or a dlopen'ed module).

    LOADED: objects this load added, in load order, root first. SEARCH_LIST: root, then every
    object reached breadth-first, including objects that were already loaded (the order ld.so's
    trace prints; dependencies of already-loaded objects are not walked again). RESOLUTIONS:
    every request in the order the loader makes it (preloads first).
    """

    root: str
    root_error: str | None  # the root itself could not be loaded
    loaded: tuple[LoadedObject, ...]
    search_list: tuple[LoadedObject, ...]
    resolutions: tuple[Resolution, ...]

    @property
    def missing(self) -> tuple[Resolution, ...]:
        return tuple(r for r in self.resolutions if r.status == "not_found")

    @property
    def errors(self) -> tuple[Resolution, ...]:
        return tuple(r for r in self.resolutions if r.status == "error")

    @property
    def ok(self) -> bool:
        return self.root_error is None and all(
            r.status == "found" for r in self.resolutions if r.kind != "preload"
        )


class NamespaceIndex:
    """Lookup tables of one namespace, layered over the process it extends (if any)."""

    __slots__ = ("by_id", "by_name", "by_path", "objects", "parent")

    def __init__(self, parent: NamespaceIndex | None = None) -> None:
        self.parent = parent
        self.objects: list[LoadedObject] = []
        self.by_name: dict[str, LoadedObject] = {}
        self.by_id: dict[FileId, LoadedObject] = {}
        self.by_path: dict[str, LoadedObject] = {}

    def find_name(self, name: str) -> LoadedObject | None:
        if self.parent is not None:
            hit = self.parent.find_name(name)
            if hit is not None:
                return hit
        return self.by_name.get(name)

    def find_id(self, file_id: FileId | None) -> LoadedObject | None:
        if file_id is None:
            return None
        if self.parent is not None:
            hit = self.parent.find_id(file_id)
            if hit is not None:
                return hit
        return self.by_id.get(file_id)

    def find_path(self, path: str) -> LoadedObject | None:
        hit = self.by_path.get(path)
        if hit is None and self.parent is not None:
            return self.parent.find_path(path)
        return hit

    def add_name(self, name: str, obj: LoadedObject) -> None:
        # First registration wins: names are registered in load order, as glibc walks them.
        if self.find_name(name) is None:
            self.by_name[name] = obj

    def add(self, obj: LoadedObject, names: Iterable[str], *, by_inode: bool = True) -> None:
        self.objects.append(obj)
        for name in names:
            self.add_name(name, obj)
        if by_inode and obj.file_id is not None:
            self.by_id.setdefault(obj.file_id, obj)
        self.by_path.setdefault(obj.path, obj)


@dataclass(frozen=True, slots=True)
class Process:
    """An emulated process after its main program loaded; extension imports start from it."""

    config: SearchConfig
    exe: LoadedObject | None  # None: the main program could not be loaded
    closure: Closure
    objects: tuple[LoadedObject, ...]  # everything loaded, load order
    index: NamespaceIndex = field(repr=False, compare=False)
