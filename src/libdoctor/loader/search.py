"""A static emulation of how glibc's loader finds shared libraries (LOADER_SPEC.md §1, §3, §5).

Nothing here runs target code. The algorithm is pure: it sees the file system only through
``LoaderFS`` (directory listings and per-file inspections, each ELF parsed by
``libdoctor.elf.dynamic.read_elf``), and takes everything it would otherwise read from the process
(LD_LIBRARY_PATH, LD_PRELOAD, the working directory) from a ``SearchConfig`` value.
``RealFS`` is the default file system; it lists each directory and parses each file once.

Two entry points, both on ``Loader`` (which memoizes searches across calls):

- ``load_program(path)``: what ``LD_TRACE_LOADED_OBJECTS=1 ld.so PATH`` does. PATH is the
  main program: its DT_RPATH also serves as the "exe RPATH" and its $ORIGIN is textual.
- ``start_interpreter(python)`` then ``import_extension(process, module)``: Python's
  ``dlopen(abs_path)`` of an extension module in a process that already holds the
  interpreter's own closure. The module has no loader, so its dependencies search its RPATH
  (without RUNPATH), then the python executable's RPATH, LD_LIBRARY_PATH, its RUNPATH, the
  cache and the default dirs. Each module is resolved as if it were the only one imported.

Every request made is a ``Resolution`` (how it was found, every directory tried, why it failed);
problems in the environment never raise.

The values live in ``libdoctor.loader.model`` and the file-system edge in
``libdoctor.loader.fs``; every public name of both is re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from libdoctor.elf.dynamic import DF_1_NODEFLIB, ElfInfo
from libdoctor.loader.fs import Inspection, LoaderFS, RealFS
from libdoctor.loader.ldcache import DEFAULT_CACHE_FLAGS
from libdoctor.loader.model import (
    Closure,
    LoadedObject,
    NamespaceIndex,
    Process,
    Rejected,
    RequestKind,
    Resolution,
    SearchConfig,
    SearchDir,
    Source,
    Status,
    Via,
)
from libdoctor.loader.strings import (
    expand_dst,
    origin_of,
    path_list,
)
from libdoctor.loader.verify import ET_EXEC, Verdict, open_verify

__all__ = ["Loader"]

DF_1_PIE = 0x08000000
_NOT_FOUND = "cannot open shared object file: No such file or directory"


# --------------------------------------------------------------------------- helpers


def _effective_rpath(elf: ElfInfo) -> str | None:
    # glibc drops DT_RPATH when DT_RUNPATH is present, and an empty RPATH is no path at all.
    if elf.runpath is not None:
        return None
    return elf.rpath or None


def _join(directory: str, rest: str) -> str:
    return directory + rest if directory.endswith("/") else directory + "/" + rest


# --------------------------------------------------------------------------- the emulation


def _mapped(
    path: str, request: str, ins: Inspection, elf: ElfInfo, loader: str | None, origin: str
) -> LoadedObject:
    """The object mapped from PATH (INS: what opening it saw, ELF: its parsed headers) for
    REQUEST, by LOADER's request (None: the program, the loader, a dlopen'ed root)."""
    return LoadedObject(
        path=path,
        request=request,
        soname=elf.soname,
        needed=elf.needed,
        loader=loader,
        origin=origin,
        file_id=ins.file_id,
        elf=elf,
    )


@dataclass(frozen=True, slots=True)
class _Outcome:
    """A search's result before reuse by inode: depends only on the request and the disk."""

    status: Status
    textual: str | None
    inspection: Inspection | None
    via: Via | None
    via_owner: str | None
    searched: tuple[SearchDir, ...]
    rejected: tuple[Rejected, ...]
    reason: str | None


_DirPlan = tuple[tuple[str, str, "frozenset[str] | None"], ...]


class Loader:
    """The emulated loader for one SearchConfig and file system; memoizes across calls."""

    def __init__(self, config: SearchConfig, fs: LoaderFS | None = None) -> None:
        self._config = config
        self._fs: LoaderFS = fs if fs is not None else RealFS()
        system = config.system
        self._cwd = config.cwd
        self._caps = (
            *(f"glibc-hwcaps/{name}/" for name in system.hwcaps_subdirs),
            *(f"{sub.strip('/')}/" for sub in system.legacy_subdirs if sub.strip("/")),
            "",
        )
        self._cache_flags = system.cache_flags or DEFAULT_CACHE_FLAGS
        self._default_dirs = path_list(
            system, ":".join(system.default_dirs), "default", None, None, ":", expand=False
        )
        self._system_prefixes = tuple(_join(d, "") for d in system.default_dirs if d)
        self._rtld_inspection: Inspection | None = None
        self._plans: dict[str, _DirPlan] = {}
        self._lists: dict[tuple[str, str | None, Source], tuple[SearchDir, ...]] = {}
        self._searches: dict[tuple[object, ...], _Outcome] = {}

    @property
    def config(self) -> SearchConfig:
        return self._config

    @property
    def fs(self) -> LoaderFS:
        return self._fs

    # ----------------------------------------------------------------- entry points

    def load_program(
        self, path: str, *, origin: str | None = None, started_by_kernel: bool = False
    ) -> Process:
        """Load PATH as the main program, with the config's preloads, breadth-first.

        Default: as ``ld.so PATH`` does (the object is known by PATH; $ORIGIN is textual).
        STARTED_BY_KERNEL: as an exec'd program (known by no path; pass ORIGIN =
        dirname(realpath(/proc/self/exe)), see ``start_interpreter``).
        """
        index = NamespaceIndex()
        ins = self._fs.inspect(self._abs(path))
        verdict, reason = self._verify(ins)
        if verdict != "accept" or ins.elf is None:
            root_reason = reason if verdict in ("fatal", "skip") else _NOT_FOUND
            empty = Closure(path, root_reason or _NOT_FOUND, (), (), ())
            return Process(self._config, None, empty, (), index)
        origin = origin if origin is not None else origin_of(path, self._cwd)
        exe = _mapped(path, path, ins, ins.elf, None, origin)
        names = [ins.elf.soname] if started_by_kernel else [path, ins.elf.soname]
        index.add(exe, (n for n in names if n))
        self._add_rtld(index, ins.elf.interpreter)

        resolutions: list[Resolution] = []
        preloaded: list[LoadedObject] = []
        for name in self._config.preload:
            before = len(index.objects)
            resolutions.append(self._request(name, exe, "preload", index, exe))
            # Only a newly loaded object counts as a preload (glibc's do_preload).
            if len(index.objects) > before:
                preloaded.append(index.objects[-1])
        closure = self._walk(exe, [exe, *preloaded], index, exe, resolutions)
        return Process(self._config, exe, closure, tuple(index.objects), index)

    def start_interpreter(self, python: str) -> Process:
        """The process right after ``exec(PYTHON)``: the interpreter and its closure loaded.

        $ORIGIN of the executable is dirname(realpath(PYTHON)), as the kernel reports it.
        """
        real = self._fs.realpath(self._abs(python))
        return self.load_program(python, origin=origin_of(real, "/"), started_by_kernel=True)

    def import_extension(self, process: Process, module: str) -> Closure:
        """``dlopen(MODULE)`` in PROCESS, as Python's import does; PROCESS is left unchanged.

        MODULE is the path importlib passes (sys.path entry + file name, not resolved).
        """
        return self._dlopen(process, module)[0]

    def dlopen(self, process: Process, path: str) -> tuple[Process, Closure]:
        """``dlopen(PATH)`` (e.g. ``ctypes.CDLL(path)``) in PROCESS, keeping what it loads.

        Returns the process after it and the closure. A failed load leaves the process as it
        was: glibc unmaps whatever that dlopen had mapped.
        """
        closure, index = self._dlopen(process, path)
        if index is None or not closure.ok:
            return process, closure
        objects = (*process.objects, *index.objects)
        return Process(process.config, process.exe, process.closure, objects, index), closure

    def _dlopen(self, process: Process, path: str) -> tuple[Closure, NamespaceIndex | None]:
        index = NamespaceIndex(process.index)
        res = self._request(path, None, "dlopen", index, process.exe)
        root = index.find_path(res.path) if res.path is not None else None
        if root is None:
            return Closure(path, res.reason or _NOT_FOUND, (), (), (res,)), None
        if index.by_path.get(root.path) is not root:  # already in the process: nothing to load
            return Closure(path, None, (), (root,), (res,)), None
        return self._walk(root, [root], index, process.exe, [res]), index

    def runtime_loads(
        self,
        process: Process,
        module: str,
        wanted: Callable[[LoadedObject], Sequence[str]],
    ) -> list[Closure]:
        """After ``import MODULE`` in PROCESS, each ``dlopen(NAME)`` a loaded library makes
        of the names WANTED gives for it, and what each loads; libraries those bring are
        asked in turn (cuDNN's dispatcher loads ``libcudnn_graph``, which loads the
        engines). A load that works stays in the process for the next ones, as it does
        in a program that uses them; one that fails leaves nothing (glibc unmaps it).

        glibc's dlopen from inside a library searches as a DT_NEEDED of that library does
        (``_dl_map_object`` with the caller's link map): objects already loaded, by name;
        its DT_RPATH and its loaders' (unless it has DT_RUNPATH); LD_LIBRARY_PATH; its
        DT_RUNPATH; the cache; the default dirs. A NAME with a slash is opened as it is
        (a library that loads from its own directory passes the full path).
        """
        _, index = self._dlopen(process, module)
        if index is None:
            index = NamespaceIndex(process.index)  # already loaded, or failed: the base
        out: list[Closure] = []
        asked: set[str] = set()
        queue = list(index.objects)
        while queue:
            obj = queue.pop(0)
            if obj.path in asked:
                continue
            asked.add(obj.path)
            for name in wanted(obj):
                child = NamespaceIndex(index)
                res = self._request(name, obj, "runtime", child, process.exe)
                root = child.find_path(res.path) if res.path is not None else None
                if root is None or child.by_path.get(root.path) is not root:
                    found = (root,) if root is not None else ()
                    error = res.reason if root is None else None
                    out.append(Closure(name, error, (), found, (res,)))
                    continue
                closure = self._walk(root, [root], child, process.exe, [res])
                out.append(closure)
                if closure.ok:
                    index = child
                    queue += closure.loaded
        return out

    def import_extensions(self, process: Process, modules: Iterable[str]) -> Iterator[Closure]:
        """``import_extension`` for each of MODULES, each as if it were the only import."""
        for module in modules:
            yield self.import_extension(process, module)

    # ----------------------------------------------------------------- breadth-first walk

    def _walk(
        self,
        root: LoadedObject,
        start: Sequence[LoadedObject],
        index: NamespaceIndex,
        main: LoadedObject | None,
        resolutions: list[Resolution],
    ) -> Closure:
        search_list: list[LoadedObject] = []
        listed: set[int] = set()
        for obj in start:
            if id(obj) not in listed:
                listed.add(id(obj))
                search_list.append(obj)
        i = 0
        while i < len(search_list):
            obj = search_list[i]
            i += 1
            if index.by_path.get(obj.path) is not obj:
                continue  # loaded before this namespace layer: its dependencies are resolved
            for name in obj.needed:
                res = self._request(name, obj, "needed", index, main)
                resolutions.append(res)
                if res.path is None:
                    continue
                dep = index.find_path(res.path)
                if dep is not None and id(dep) not in listed:
                    listed.add(id(dep))
                    search_list.append(dep)
        return Closure(
            root=root.path,
            root_error=None,
            loaded=tuple(index.objects),
            search_list=tuple(search_list),
            resolutions=tuple(resolutions),
        )

    def _add_rtld(self, index: NamespaceIndex, interpreter: str | None) -> None:
        """The loader is mapped before anything else; it answers to its names and inode."""
        loader_path = self._config.system.loader_path
        if not loader_path:
            return
        if self._rtld_inspection is None:
            self._rtld_inspection = self._fs.inspect(loader_path)
        ins = self._rtld_inspection
        if ins.kind != "file" or ins.elf is None:
            return
        request = interpreter or loader_path
        rtld = _mapped(loader_path, request, ins, ins.elf, None, origin_of(loader_path, "/"))
        # glibc 2.36 records no file id for itself: found by another path, it loads again.
        index.add(rtld, (n for n in (request, loader_path, ins.elf.soname) if n), by_inode=False)

    # ----------------------------------------------------------------- one request

    def _request(
        self,
        name: str,
        requester: LoadedObject | None,
        kind: RequestKind,
        index: NamespaceIndex,
        main: LoadedObject | None,
    ) -> Resolution:
        """One request: expand the name, reuse a loaded object, or find the file and map it."""
        expanded = self._expand(name, requester, kind)
        req_path = requester.path if requester is not None else None
        if not expanded:
            problem = "empty dynamic string token substitution" if name else "empty file name"
            return Resolution(
                kind, req_path, name, name, "error", None, None, None, None, (), (), problem
            )  # fmt: skip

        # DT_NEEDED names are expanded before the loader sees them; a preload is registered
        # as written (its expansion only says which file to open).
        request = name if kind == "preload" else expanded
        hit = index.find_name(request)
        if hit is not None:
            return Resolution(
                kind, req_path, name, expanded, "found", hit.path, hit.path, "loaded", None,
                (), (), None,
            )  # fmt: skip

        if "/" in expanded:
            outcome = self._open_path(expanded)
        else:
            assert requester is not None
            outcome = self._search(expanded, requester, index, main)
        if outcome.status != "found":
            return Resolution(
                kind, req_path, name, expanded, outcome.status, None, outcome.textual, None, None,
                outcome.searched, outcome.rejected, outcome.reason,
            )  # fmt: skip

        path, refusal = self._map(outcome, request, None if kind == "dlopen" else req_path, index)
        if refusal is not None:
            assert outcome.textual is not None
            return Resolution(
                kind, req_path, name, expanded, "error", None, outcome.textual, outcome.via,
                outcome.via_owner, outcome.searched,
                (*outcome.rejected, Rejected(outcome.textual, refusal)), refusal,
            )  # fmt: skip
        return Resolution(
            kind, req_path, name, expanded, "found", path, outcome.textual, outcome.via,
            outcome.via_owner, outcome.searched, outcome.rejected, None,
        )  # fmt: skip

    def _expand(self, name: str, requester: LoadedObject | None, kind: RequestKind) -> str | None:
        """The name as the loader opens it: DSTs substituted, a bare dlopen name made relative."""
        if kind == "dlopen" and "/" not in name:
            return "./" + name  # CPython's dlopen of a bare module name
        if requester is not None and (kind in ("needed", "runtime") or "/" in name):
            system = self._config.system
            return expand_dst(
                name, origin=requester.origin, lib=system.lib, platform=system.platform
            )
        return name

    def _open_path(self, path: str) -> _Outcome:
        """A name with a slash names one file: opened as it is, with no search to fall back on."""
        ins = self._fs.inspect(self._abs(path))
        verdict, why = self._verify(ins)
        rejected = (Rejected(path, why),) if why else ()
        if verdict == "fatal":
            return _Outcome("error", path, ins, None, None, (), rejected, why)
        if verdict != "accept":
            reason = why if why and why.startswith("wrong ELF class") else _NOT_FOUND
            return _Outcome("not_found", None, None, None, None, (), rejected, reason)
        return _Outcome("found", path, ins, "path", None, (), rejected, None)

    def _map(
        self, outcome: _Outcome, request: str, loader: str | None, index: NamespaceIndex
    ) -> tuple[str | None, str | None]:
        """Map the file a search found: (path of the object that satisfies REQUEST, None),
        or (None, why) when the file is an executable, which dlopen refuses."""
        ins = outcome.inspection
        assert outcome.textual is not None and ins is not None and ins.elf is not None
        elf = ins.elf
        same = index.find_id(ins.file_id)
        if same is not None:  # already loaded under another name: reuse, remember this name
            index.add_name(request, same)
            return same.path, None
        if elf.elf_type == ET_EXEC:
            return None, "cannot dynamically load executable"
        if elf.flags_1 & DF_1_PIE:
            return None, "cannot dynamically load position-independent executable"
        obj = _mapped(
            outcome.textual, request, ins, elf, loader, origin_of(outcome.textual, self._cwd)
        )
        index.add(obj, (n for n in (outcome.textual, request, elf.soname) if n))
        return obj.path, None

    # ----------------------------------------------------------------- the search (§1.2)

    def _search(
        self, name: str, requester: LoadedObject, index: NamespaceIndex, main: LoadedObject | None
    ) -> _Outcome:
        owners: list[LoadedObject] = []
        if requester.elf.runpath is None:
            did_main = False
            obj: LoadedObject | None = requester
            seen: set[int] = set()
            while obj is not None and id(obj) not in seen:
                seen.add(id(obj))
                if _effective_rpath(obj.elf):
                    owners.append(obj)
                    did_main = did_main or obj is main
                obj = index.find_path(obj.loader) if obj.loader is not None else None
            if not did_main and main is not None and _effective_rpath(main.elf):
                owners.append(main)
        main_origin = main.origin if main is not None else None
        key = (
            name,
            requester.path,
            requester.origin,
            tuple((o.path, o.origin) for o in owners),
            main_origin,
        )
        cached = self._searches.get(key)
        if cached is None:
            cached = self._search_uncached(name, requester, owners, main_origin)
            self._searches[key] = cached
        return cached

    def _search_uncached(
        self,
        name: str,
        requester: LoadedObject,
        rpath_owners: Sequence[LoadedObject],
        main_origin: str | None,
    ) -> _Outcome:
        searched: list[SearchDir] = []
        rejected: list[Rejected] = []

        lists: list[tuple[Via, tuple[SearchDir, ...]]] = []
        for owner in rpath_owners:
            rpath = _effective_rpath(owner.elf)
            assert rpath is not None
            lists.append(("rpath", self._object_list(owner, rpath, "rpath")))
        llp = self._config.ld_library_path
        if llp:
            lists.append(("ld_library_path", self._llp_list(llp, main_origin)))
        if requester.elf.runpath:
            lists.append(
                ("runpath", self._object_list(requester, requester.elf.runpath, "runpath"))
            )

        for via, dirs in lists:
            hit = self._search_dirs(name, dirs, searched, rejected)
            if hit is not None:
                return self._finish(hit, via, searched, rejected)

        nodeflib = bool(requester.elf.flags_1 & DF_1_NODEFLIB)
        if not self._config.inhibit_cache:
            entry = self._config.system.cache.lookup(
                name, self._config.system.hwcaps_subdirs, self._cache_flags
            )
            if entry is not None:
                searched.append(SearchDir("cache", entry))
                if nodeflib and entry.startswith(self._system_prefixes):
                    rejected.append(Rejected(entry, "cache entry in a default dir (DF_1_NODEFLIB)"))
                else:
                    ins = self._fs.inspect(self._abs(entry))
                    verdict, why = self._verify(ins)
                    if why:
                        rejected.append(Rejected(entry, why))
                    if verdict in ("accept", "fatal"):
                        return self._finish(
                            (verdict, entry, ins, None), "cache", searched, rejected
                        )
        if not nodeflib:
            hit = self._search_dirs(name, self._default_dirs, searched, rejected)
            if hit is not None:
                return self._finish(hit, "default", searched, rejected)

        wrong_class = next((r.reason for r in rejected if r.reason.startswith("wrong ELF")), None)
        return _Outcome(
            "not_found", None, None, None, None, tuple(searched), tuple(rejected),
            wrong_class or _NOT_FOUND,
        )  # fmt: skip

    @staticmethod
    def _finish(
        hit: tuple[Verdict, str, Inspection, SearchDir | None],
        via: Via,
        searched: list[SearchDir],
        rejected: list[Rejected],
    ) -> _Outcome:
        verdict, textual, ins, where = hit
        owner = where.owner if where is not None else None
        if verdict == "fatal":
            reason = rejected[-1].reason if rejected else "cannot load"
            return _Outcome(
                "error", textual, ins, via, owner, tuple(searched), tuple(rejected), reason
            )
        return _Outcome("found", textual, ins, via, owner, tuple(searched), tuple(rejected), None)

    def _search_dirs(
        self,
        name: str,
        dirs: tuple[SearchDir, ...],
        searched: list[SearchDir],
        rejected: list[Rejected],
    ) -> tuple[Verdict, str, Inspection, SearchDir] | None:
        """glibc's open_path: each dir's hwcaps subdirs, legacy subdirs, then the dir itself."""
        for sd in dirs:
            searched.append(sd)
            for textual_prefix, abs_prefix, listing in self._plan(sd.directory):
                if listing is not None and name not in listing:
                    continue
                ins = self._fs.inspect(abs_prefix + name)
                verdict, why = self._verify(ins)
                if why:
                    rejected.append(Rejected(textual_prefix + name, why))
                if verdict in ("accept", "fatal"):
                    return verdict, textual_prefix + name, ins, sd
        return None

    def _plan(self, directory: str) -> _DirPlan:
        """(textual prefix, absolute prefix, listing) for each subdir of DIRECTORY that exists."""
        plan = self._plans.get(directory)
        if plan is not None:
            return plan
        textual = _join(directory, "") if directory else ""
        absolute = _join(self._abs(directory), "")
        top = self._fs.entries(absolute.rstrip("/") or "/")
        steps: list[tuple[str, str, frozenset[str] | None]] = []
        for cap in self._caps:
            if not cap:
                listing = top
            else:
                if top is not None and cap.partition("/")[0] not in top:
                    continue
                listing = self._fs.entries(absolute + cap.rstrip("/"))
            if listing is not None and not listing:
                continue
            steps.append((textual + cap, absolute + cap, listing))
        plan = tuple(steps)
        self._plans[directory] = plan
        return plan

    def _verify(self, ins: Inspection) -> tuple[Verdict, str | None]:
        return open_verify(ins, self._config.system, self._byteorder())

    def _byteorder(self) -> str:
        ins = self._rtld_inspection
        if ins is None and self._config.system.loader_path:
            ins = self._rtld_inspection = self._fs.inspect(self._config.system.loader_path)
        if ins is not None and ins.elf is not None:
            return ins.elf.byteorder
        return "little"

    # ----------------------------------------------------------------- path lists (§1.5)

    def _object_list(self, owner: LoadedObject, raw: str, source: Source) -> tuple[SearchDir, ...]:
        key = (owner.path + "\0" + raw, owner.origin, source)
        cached = self._lists.get(key)
        if cached is None:
            # DT_RPATH/DT_RUNPATH split on ':' only (';' is LD_LIBRARY_PATH's), then expand.
            system = self._config.system
            cached = path_list(system, raw, source, owner.path, owner.origin, ":")
            self._lists[key] = cached
        return cached

    def _llp_list(self, raw: str, main_origin: str | None) -> tuple[SearchDir, ...]:
        key: tuple[str, str | None, Source] = (raw, main_origin, "ld_library_path")
        cached = self._lists.get(key)
        if cached is None:
            # LD_LIBRARY_PATH is expanded as a whole (with the main program's $ORIGIN) and then
            # split; a DST without a value empties all of it, which leaves one element: the cwd.
            system = self._config.system
            expanded = expand_dst(raw, origin=main_origin, lib=system.lib, platform=system.platform)
            cached = path_list(system, expanded or "", "ld_library_path", None, main_origin, ":;")
            self._lists[key] = cached
        return cached

    def _abs(self, path: str) -> str:
        if path.startswith("/"):
            return path
        if not path:
            return self._cwd
        return _join(self._cwd, path)
