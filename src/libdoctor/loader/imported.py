"""Libraries already in the process when a module is imported: those its package imports first.

``sgl_kernel/__init__.py`` starts with ``import torch``; its extension modules need
``libtorch.so`` and ``libc10.so`` by soname and carry no RPATH to ``torch/lib``, because by
the time they load, ``import torch`` has loaded ``torch._C`` and with it those libraries,
and glibc satisfies a DT_NEEDED by soname from the objects already loaded (LOADER_SPEC
§1.0). Every ``torch.utils.cpp_extension`` build is linked this way.

``ImportContext`` answers, for one extension module and one soname, which package imported
before it (``environment.imports.imported_before``, read statically) loads that soname: one
of that package's extension modules whose closure holds it and that ``import PACKAGE``
reaches (``environment.imports.reach``), or what the package loads itself before those
(torch's CUDA preload, which the stack stage replays and hands in as ``Preloads``). The
provider's own load may fail (a library of torch's is gone): then the module fails with
it, as ``import torch`` does first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from libdoctor.environment.imports import FirstImport, imported_before, loaded_first, reach
from libdoctor.environment.model import is_inside
from libdoctor.loader.extensions import LibraryAnalysis, module_name
from libdoctor.loader.model import Closure

__all__ = ["ImportContext", "LoadedBefore", "PackageLoads", "Preloads"]


@dataclass(frozen=True, slots=True)
class PackageLoads:
    """What a package's own import loads before its extension modules (torch's preload)."""

    names: Mapping[str, str]  # soname / request / file name -> the loaded object's path
    ok: bool  # the import gets past it (torch's preload raises nothing)
    how: str  # "torch's CUDA preload (_load_global_deps)"


Preloads = Callable[[], Mapping[str, PackageLoads]]
"""package (top-level name) -> what its import loads itself; called once, when needed."""


@dataclass(frozen=True, slots=True)
class LoadedBefore:
    """NAME is in the process before MODULE loads: PACKAGE's import loaded it, via PROVIDER."""

    name: str
    path: str  # the object that answers to NAME
    module: str  # the module that needs it (path)
    package: str  # the package imported first: "torch"
    provider_module: str  # what of it loads NAME: "torch._C", or its preload
    provider_root: str | None  # that extension module's path (None: the package's preload)
    provider_ok: bool  # that load succeeds, so ``import PACKAGE`` gets that far
    statement: FirstImport  # where MODULE's package imports PACKAGE (or loads PATH itself)
    by_path: bool = False  # MODULE's own package loads PATH by path at STATEMENT

    def evidence(self) -> dict[str, object]:
        where = f"{self.statement.file}:{self.statement.line}"
        return {
            "loaded_by": f"import {self.package}",
            "via": self.provider_module,
            "path": self.path,
            ("loaded_by_path_at" if self.by_path else "imported_at"): where,
            "provider_loads": self.provider_ok,
        }


class ImportContext:
    """Per analysis: which libraries each extension module finds already loaded."""

    def __init__(self, analysis: LibraryAnalysis, preloads: Preloads | None = None) -> None:
        self._analysis = analysis
        self._preloads = preloads
        self._preloaded: Mapping[str, PackageLoads] | None = None
        self._sites = analysis.env.target.site_packages
        self._providers: dict[str, list[tuple[Closure, str]]] | None = None
        self._before: dict[tuple[str, frozenset[str]], tuple[FirstImport, ...]] = {}
        self._reached: dict[str, bool] = {}
        self._shipped: dict[str, list[str]] | None = None
        self._resolving: set[tuple[str, str]] = set()

    def _index(self) -> dict[str, list[tuple[Closure, str]]]:
        """soname (and request name, file name) -> (module closure, object path) loading it."""
        if self._providers is None:
            index: dict[str, list[tuple[Closure, str]]] = {}
            for closure in self._analysis.modules:
                if closure.root_error:
                    continue
                for obj in closure.loaded:
                    for name in {obj.soname, obj.request, os.path.basename(obj.path)}:
                        if name:
                            index.setdefault(name, []).append((closure, obj.path))
            self._providers = index
        return self._providers

    def _site_of(self, path: str) -> str | None:
        return next((s for s in self._sites if is_inside(path, s)), None)

    def _is_reached(self, closure: Closure) -> bool:
        root = closure.root
        if root not in self._reached:
            site = self._site_of(root)
            self._reached[root] = (
                site is not None and reach(site, module_name(root, [site])).status == "reached"
            )
        return self._reached[root]

    def loaded_before(self, module: str, name: str) -> LoadedBefore | None:
        """What answers to NAME when MODULE loads, thanks to a package imported first, or
        to MODULE's own package loading a library of its own by path before importing it."""
        site = self._site_of(module)
        if site is None:
            return None
        dotted = module_name(module, [site])
        found = self._from_other_packages(module, site, dotted, name)
        return found if found is not None else self._loaded_by_path(module, site, dotted, name)

    def _from_other_packages(
        self, module: str, site: str, dotted: str, name: str
    ) -> LoadedBefore | None:
        top = dotted.split(".")[0]
        candidates: dict[str, list[tuple[Closure, str]]] = {}
        for closure, path in self._index().get(name, ()):
            other_site = self._site_of(closure.root)
            if other_site is None:
                continue
            package = module_name(closure.root, [other_site]).split(".")[0]
            if package != top:
                candidates.setdefault(package, []).append((closure, path))
        preloaded = {
            package: loads
            for package, loads in self._package_loads().items()
            if package != top and name in loads.names
        }
        if not candidates and not preloaded:
            return None
        key = (module, frozenset(candidates) | frozenset(preloaded))
        if key not in self._before:
            self._before[key] = imported_before(site, dotted, key[1])
        for statement in self._before[key]:
            loads = preloaded.get(statement.package)
            if loads is not None:
                return LoadedBefore(
                    name, loads.names[name], module, statement.package, loads.how, None,
                    loads.ok, statement,
                )  # fmt: skip
            for closure, path in candidates.get(statement.package, ()):
                if self._is_reached(closure):
                    provider_site = self._site_of(closure.root) or site
                    return LoadedBefore(
                        name, path, module, statement.package,
                        module_name(closure.root, [provider_site]), closure.root, closure.ok,
                        statement,
                    )  # fmt: skip
        return None

    def _loaded_by_path(
        self, module: str, site: str, dotted: str, name: str
    ) -> LoadedBefore | None:
        """A library of MODULE's own distribution named NAME, which its package loads by
        path (``torch.ops.load_library``, ``ctypes.CDLL``) before it imports MODULE: its
        soname is then in the process (torchaudio's ``libtorchaudio.so``). Its own needs
        are those of the same process: the load succeeds when each is found or loaded
        before MODULE too."""
        env = self._analysis.env
        owners = env.owners(os.path.normpath(module))
        if not owners or (module, name) in self._resolving:
            return None
        home = owners[0].metadata_dir
        paths = [
            p
            for p in self._shipped_index().get(name, ())
            if any(c.dist.metadata_dir == home for c in env.claims.get(p, ()))
        ]
        if not paths:
            return None
        load = loaded_first(site, dotted, {name, name.split(".so", 1)[0]})
        if load is None:
            return None
        path = paths[0]
        closure = next((c for c in self._analysis.closures() if c.root == path), None)
        self._resolving.add((module, name))
        try:
            ok = closure is not None and all(
                res.status == "found" or self.loaded_before(module, res.name) is not None
                for res in closure.resolutions
                if res.kind == "needed"
            )
        finally:
            self._resolving.discard((module, name))
        top = dotted.split(".")[0]
        return LoadedBefore(
            name, path, module, top, module_name(path, [site]), path, ok,
            FirstImport(top, load.file, load.line), by_path=True,
        )  # fmt: skip

    def _shipped_index(self) -> dict[str, list[str]]:
        """file name -> the environment's native files of that name."""
        if self._shipped is None:
            index: dict[str, list[str]] = {}
            for path in self._analysis.natives:
                index.setdefault(os.path.basename(path), []).append(path)
            self._shipped = index
        return self._shipped

    def _package_loads(self) -> Mapping[str, PackageLoads]:
        if self._preloaded is None:
            self._preloaded = self._preloads() if self._preloads is not None else {}
        return self._preloaded
