"""Loader truth for a whole environment: every extension module resolved as Python loads it.

Static: ELF files are parsed, never run. The interpreter's own closure is the baseline
process; each extension module is dlopen'ed into it alone (``loader.import_extension``).
Shared libraries nothing loads (plugins dlopen'ed on demand) are resolved on their own, so
their gaps can be told apart from real breakage. The file system is seen through the
``Disk`` view, so a what-if (files removed) resolves as the environment would be.
"""

from __future__ import annotations

import os
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from libdoctor.disk.stat import Disk
from libdoctor.elf.dynamic import ElfFormatError
from libdoctor.elf.dynsym import DynamicSymbols, open_symbols
from libdoctor.elf.symbols import defines_symbol
from libdoctor.environment.model import Environment, is_inside
from libdoctor.environment.parsed import ParsedFiles
from libdoctor.environment.paths import is_native
from libdoctor.loader.dlopened import RuntimeEdge, runtime_edges
from libdoctor.loader.fs import FileId, Inspection, LoaderFS, RealFS, RootedFS
from libdoctor.loader.model import Closure, LoadedObject, Process, Resolution, SearchConfig
from libdoctor.loader.search import Loader
from libdoctor.loader.strings import expand_dst, is_extension_module
from libdoctor.loader.system import LoaderSystem


@dataclass(frozen=True, slots=True)
class LoaderContext:
    """The process-level inputs, read from the caller's environment by the CLI, not here."""

    system: LoaderSystem
    ld_library_path: str | None
    cwd: str
    root: str = "/"  # the system the files are read in (``--root``): see ``RootedFS``


class HidingFS:
    """A LoaderFS that pretends some files are gone (the what-if of a plan)."""

    def __init__(self, base: LoaderFS, hidden: Iterable[str]) -> None:
        self._base = base
        self._hidden = frozenset(hidden)
        by_dir: dict[str, set[str]] = {}
        for path in self._hidden:
            directory, _, name = path.rpartition(os.sep)
            by_dir.setdefault(directory, set()).add(name)
        self._by_dir = by_dir

    def entries(self, directory: str) -> frozenset[str] | None:
        names = self._base.entries(directory)
        hidden = self._by_dir.get(os.path.normpath(directory))
        if names is None or not hidden:
            return names
        return names - hidden

    def inspect(self, path: str) -> Inspection:
        if os.path.normpath(path) in self._hidden:
            return Inspection("missing")
        return self._base.inspect(path)

    def realpath(self, path: str) -> str:
        return self._base.realpath(path)

    def library_strings(self, path: str) -> tuple[str, ...] | None:
        if os.path.normpath(path) in self._hidden:
            return None
        return self._base.library_strings(path)


@dataclass(frozen=True, slots=True)
class LibraryAnalysis:
    env: Environment
    loader: Loader
    process: Process  # the interpreter right after exec: the baseline of every import
    python: str  # the interpreter whose closure is the baseline
    modules: tuple[Closure, ...]  # one per extension module, sorted by path
    optional: tuple[Closure, ...]  # libraries no extension module loads, each dlopen'ed alone
    invalid: tuple[tuple[str, str], ...]  # (path, reason): native files that are not valid ELF
    natives: tuple[str, ...]  # every claimed shared object under the site dirs, present or not
    module_dists: Mapping[str, str]  # extension module path -> owning distribution key
    failed_needs: tuple[tuple[Closure, Resolution], ...]  # DT_NEEDED a module's closure lacks
    provided: Mapping[str, Mapping[str, str]]  # name -> {importing dist key -> path}
    # file name -> the claimed shared objects by that name that could bring a lost one back
    shipped_at: Mapping[str, list[str]]
    runtime: tuple[RuntimeEdge, ...] = ()  # libraries the loaded libraries dlopen by name

    def closures(self) -> tuple[Closure, ...]:
        return self.modules + self.optional


@dataclass(frozen=True, slots=True)
class LibraryUse:
    """One library name as extension modules request it, and the file the loader gives them."""

    name: str  # as requested (DT_NEEDED)
    path: str | None  # the object that satisfies it, normalised; None: not found
    soname: str | None
    modules: tuple[str, ...]  # the extension modules whose import makes this request


def library_uses(analysis: LibraryAnalysis) -> tuple[LibraryUse, ...]:
    """What each extension module's load resolves every needed name to, grouped by (name,
    file): the compact record a snapshot keeps, sorted."""
    found: dict[tuple[str, str | None], tuple[str | None, set[str]]] = {}
    for closure in analysis.modules:
        sonames = {o.path: o.soname for o in (*closure.loaded, *closure.search_list)}
        for res in closure.resolutions:
            if res.kind != "needed":
                continue
            path = os.path.normpath(res.path) if res.path is not None else None
            soname = sonames.get(res.path) if res.path is not None else None
            known = found.setdefault((res.name, path), (soname, set()))
            known[1].add(closure.root)
    return tuple(
        LibraryUse(name, path, soname, tuple(sorted(modules)))
        for (name, path), (soname, modules) in sorted(
            found.items(), key=lambda i: (i[0][0], i[0][1] or "")
        )
    )


def native_claims(env: Environment) -> list[str]:
    """Shared objects the environment's RECORDs claim under its site dirs (present or not)."""
    roots = [site.path for site in env.target.site_dirs]
    return sorted(
        path
        for path in env.claims
        if ".so" in path  # cheap filter before the exact test: 22k paths
        and is_native(path)
        and any(is_inside(path, root) for root in roots)
    )


def analyse(
    env: Environment, disk: Disk, context: LoaderContext, parsed: ParsedFiles | None = None
) -> LibraryAnalysis:
    """The loader's view of ENV. PARSED: the ELF files earlier runs parsed (``fs.ELF``)."""
    fs: LoaderFS = RealFS(parsed) if context.root == "/" else RootedFS(context.root, parsed)
    if disk.removed:
        fs = HidingFS(fs, disk.removed)
    loader = Loader(SearchConfig(context.system, context.ld_library_path, context.cwd), fs=fs)
    python = env.target.python or sys.executable
    process = loader.start_interpreter(python)
    claimed = native_claims(env)
    natives = [path for path in claimed if disk.stat(path).is_file]
    version = env.target.python_version
    modules = [p for p in natives if is_python_extension(p, version)]
    module_closures = tuple(loader.import_extensions(process, modules))
    reached: set[FileId] = {o.file_id for o in process.objects if o.file_id is not None}
    for closure in module_closures:
        reached.update(o.file_id for o in closure.loaded if o.file_id is not None)
    invalid: list[tuple[str, str]] = []
    unloaded: list[str] = []
    module_set = set(modules)
    for path in natives:
        inspection = fs.inspect(path)
        if inspection.kind == "file" and inspection.elf is None:
            invalid.append((path, inspection.error or "not a valid ELF file"))
        elif (
            path not in module_set
            and inspection.elf is not None
            and inspection.file_id not in reached
        ):
            unloaded.append(path)
            if inspection.file_id is not None:
                reached.add(inspection.file_id)  # hard links / copies: resolve once
    optional = tuple(loader.import_extensions(process, unloaded))
    module_dists = {
        path: claims[0].dist.key for path in modules if (claims := env.claims.get(path))
    }
    return LibraryAnalysis(
        env=env,
        loader=loader,
        process=process,
        python=python,
        modules=module_closures,
        optional=optional,
        invalid=tuple(invalid),
        natives=tuple(claimed),
        module_dists=module_dists,
        failed_needs=_failed_needs(module_closures),
        provided=_provided_in_context(module_closures, module_dists),
        shipped_at=basename_index(_shipping_paths(env, claimed)),
        runtime=runtime_edges(env, loader, process, module_closures, claimed, fs.library_strings),
    )


def _failed_needs(modules: Iterable[Closure]) -> tuple[tuple[Closure, Resolution], ...]:
    """Each DT_NEEDED an extension module's closure did not find, with that closure."""
    return tuple(
        (closure, res)
        for closure in modules
        for res in closure.resolutions
        if res.status != "found" and res.kind == "needed"
    )


def _provided_in_context(
    modules: Iterable[Closure], module_dists: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """soname/name -> {distribution key of the importing module -> path}, over all modules.

    A module is imported after the packages it depends on: their libraries are then already
    in the process and satisfy its needs by SONAME (LOADER_SPEC §1.0).
    """
    provided: dict[str, dict[str, str]] = defaultdict(dict)
    for closure in modules:
        key = module_dists.get(closure.root)
        if key is None or closure.root_error:
            continue
        for obj in closure.loaded:
            for name in {obj.soname, obj.request, os.path.basename(obj.path)}:
                if name:
                    provided[name].setdefault(key, obj.path)
    return provided


def basename_index(paths: Iterable[str]) -> dict[str, list[str]]:
    """file name -> PATHS by that name, in their order."""
    index: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        index[path.rpartition(os.sep)[2]].append(path)
    return index


def _shipping_paths(env: Environment, natives: list[str]) -> tuple[str, ...]:
    """The claimed shared objects that could bring a missing library back: those under the
    site dirs (NATIVES), and in a conda prefix a conda package's anywhere in it (``lib/``)."""
    if not any(d.kind == "conda" for d in env.distributions):
        return tuple(natives)
    prefix = env.target.prefix
    outside = [
        p
        for p, claims in env.claims.items()
        if ".so" in p
        and is_native(p)
        and is_inside(p, prefix)
        and any(c.dist.kind == "conda" for c in claims)
    ]
    return tuple(sorted({*natives, *outside}))


def own_copy(
    requester: LoadedObject, name: str, disk: Disk, prefix: str, system: LoaderSystem
) -> str | None:
    """The file NAME under PREFIX that REQUESTER's own RUNPATH (else RPATH) leads to, present
    on DISK: the environment's copy, whatever the search answered first."""
    raw = requester.elf.runpath or requester.elf.rpath or ""
    for element in raw.split(":"):
        directory = expand_dst(
            element, origin=requester.origin, lib=system.lib, platform=system.platform
        )
        if not directory:
            continue
        candidate = os.path.normpath(os.path.join(directory, name))
        if is_inside(candidate, prefix) and disk.stat(candidate).is_file:
            return candidate
    return None


class Exports:
    """The dynamic symbols a set of libraries exports, each library mapped once, looked up
    on demand: how the loader binds a module's undefined symbols (as ``ldd -r`` would),
    read from ``.dynsym`` without running anything."""

    def __init__(self, libraries: Iterable[str]) -> None:
        self._libraries = list(libraries)
        self._tables: list[DynamicSymbols] | None = None
        self._known: dict[str, bool] = {}

    def unbound(self, closure: Closure, wanted: re.Pattern[str]) -> list[str]:
        """The undefined symbols of CLOSURE's module that WANTED matches and that neither
        these libraries nor the module's own (the rest of CLOSURE) define."""
        needed = [n for n in self._imports(closure.root) if wanted.match(n)]
        lost = [n for n in needed if not self._defines(n)]
        if lost:  # a C name its own libraries define is theirs, not these libraries'
            lost = self._not_in_closure(closure, lost)
        return lost

    def _imports(self, path: str) -> tuple[str, ...]:
        try:
            table = open_symbols(path)
        except (ElfFormatError, OSError, ValueError):
            return ()  # unreadable: elf-invalid's business, not an ABI claim
        return table.imported() if table is not None else ()

    def _defines(self, name: str) -> bool:
        if name not in self._known:
            self._known[name] = any(t.defines(name) for t in self._open())
        return self._known[name]

    def _not_in_closure(self, closure: Closure, names: list[str]) -> list[str]:
        """NAMES that no other object of CLOSURE (the module's own libraries) defines."""
        tables = []
        for obj in closure.loaded[1:]:
            try:
                table = open_symbols(obj.path)
            except (ElfFormatError, OSError, ValueError):
                continue
            if table is not None:
                tables.append(table)
        return [n for n in names if not any(t.defines(n) for t in tables)]

    def _open(self) -> list[DynamicSymbols]:
        if self._tables is None:
            tables = []
            for path in self._libraries:
                try:
                    table = open_symbols(path)
                except (ElfFormatError, OSError, ValueError):
                    continue
                if table is not None:
                    tables.append(table)
            self._tables = tables
        return self._tables


_CPYTHON_TAG = re.compile(r"^cpython-(\d+)")


def is_python_extension(path: str, version: tuple[int, int] | None = None) -> bool:
    """Would Python (VERSION, when known) import PATH as an extension module?

    A tagged name (``x.cpython-311-x86_64-linux-gnu.so``, ``x.abi3.so``) says so, when the
    tag is the interpreter's own: CPython 3.11 never imports ``x.cpython-310-*.so`` (its
    ``EXTENSION_SUFFIXES`` hold its own tag only; sgl-kernel 0.3.21 ships one). A plain
    ``x.so`` might be a module or just a library (``torch/lib/libtorch.so``): it is a module
    when it defines ``PyInit_x``, read from its dynamic symbol table.
    """
    name = os.path.basename(path)
    if not is_extension_module(name):
        return False
    stem, dot, tag = name[: -len(".so")].partition(".")
    if dot:
        cpython = _CPYTHON_TAG.match(tag)
        return cpython is None or version is None or cpython.group(1) == f"{version[0]}{version[1]}"
    if not stem.isidentifier():
        return False
    try:
        return defines_symbol(path, f"PyInit_{stem}")
    except (ElfFormatError, OSError):
        return False  # an invalid file is reported as elf-invalid instead


def module_name(path: str, site_dirs: Iterable[str]) -> str:
    """``…/site-packages/torch/_C.cpython-311-x86_64-linux-gnu.so`` → ``torch._C``."""
    for site in site_dirs:
        if is_inside(path, site):
            relative = os.path.relpath(path, site)
            parts = relative.split(os.sep)
            parts[-1] = parts[-1].split(".", 1)[0]
            return ".".join(parts)
    return os.path.basename(path)
