"""One file's dependency tree: the load Python would do when it imports that file.

The root is named by the user either as a path or as an extension module's dotted name
(``torch._C``); a dotted name is looked up in the site dirs as Python's import would find it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from libdoctor.analysis.libraries import SystemOwners, analyse_libraries, system_owners
from libdoctor.checks.libraries import framework_preloads
from libdoctor.disk.stat import Disk
from libdoctor.environment.model import Environment
from libdoctor.environment.rooted import Rooted
from libdoctor.environment.target import Target
from libdoctor.errors import LibdoctorError
from libdoctor.external.ospackages import SystemPackages
from libdoctor.loader.dlopened import expected, runtime_edges
from libdoctor.loader.extensions import (
    LibraryAnalysis,
    LoaderContext,
    analyse,
    is_python_extension,
    module_name,
)
from libdoctor.loader.imported import ImportContext, LoadedBefore
from libdoctor.loader.model import Closure


@dataclass(frozen=True, slots=True)
class DependencyTree:
    """ROOT's load into the interpreter's process: every request, as the loader answers it."""

    root: str
    closure: Closure
    env: Environment = field(compare=False, repr=False)
    system: SystemOwners = field(default_factory=SystemOwners, compare=False, repr=False)
    runtime: tuple[Closure, ...] = ()  # what its libraries dlopen by name at run time
    before: Mapping[str, LoadedBefore] = field(default_factory=dict)  # found already loaded

    @property
    def ok(self) -> bool:
        return self.closure.ok


def find_root(analysis: LibraryAnalysis, text: str) -> str:
    """The file TEXT names: a path, or the first extension module of that dotted name."""
    if os.sep in text or os.path.exists(text):
        if not os.path.isfile(text):
            raise LibdoctorError(f"{text} is not a file")
        return os.path.abspath(text)
    parts = text.split(".")
    matches: list[str] = []
    files = Rooted(analysis.env.target.root)
    for site in analysis.env.target.site_packages:
        directory = os.path.join(site, *parts[:-1])
        try:
            names = files.listdir(directory)
        except OSError:
            continue
        for name in sorted(names):
            if name.split(".", 1)[0] == parts[-1] and name.endswith(".so"):
                path = os.path.join(directory, name)
                if is_python_extension(files.host(path)):
                    matches.append(path)
    if not matches:
        raise LibdoctorError(
            f"no extension module {text} in {', '.join(analysis.env.target.site_packages)}"
        )
    return matches[0]


def dependency_tree(
    target: Target,
    text: str,
    environ: Mapping[str, str],
    cwd: str,
    *,
    packages: SystemPackages | None = None,
) -> DependencyTree:
    """The tree of the file TEXT names, loaded into the process after the interpreter starts;
    each library outside the environment with its system package (see ``explain_library``)."""
    analysis, disk = analyse_libraries(target, environ, cwd)
    root = find_root(analysis, text)
    loader = analysis.loader
    closure = loader.import_extension(analysis.process, root)
    edges = runtime_edges(
        analysis.env,
        loader,
        analysis.process,
        [closure],
        analysis.natives,
        loader.fs.library_strings,
    )
    # a runtime load is drawn when it loads, or when the environment is meant to provide it
    shown = [e for e in edges if e.closure.root_error is None or expected(analysis.env, e)]
    runtime = tuple(e.closure for e in shown)
    system = system_owners(
        analysis.env,
        (r for c in (closure, *runtime) for r in c.resolutions if r.kind != "preload"),
        packages,
    )
    imports = ImportContext(analysis, lambda: framework_preloads(analysis, disk))
    before: dict[str, LoadedBefore] = {}
    for res in closure.resolutions:
        if res.kind == "needed" and res.status == "not_found" and res.name not in before:
            found = imports.loaded_before(root, res.name)
            if found is not None:
                before[res.name] = found
    return DependencyTree(root, closure, analysis.env, system, runtime, before)


@dataclass(frozen=True, slots=True)
class FailingImport:
    """An extension module whose load stops at LIBRARY: the chain of objects from the module
    to the one that needs LIBRARY (each loaded by the one before), and the module's tree."""

    module: str  # the dotted name
    library: str
    chain: tuple[str, ...]  # the module's path first, the object requesting LIBRARY last
    tree: DependencyTree


def chain_to(closure: Closure, library: str) -> tuple[str, ...] | None:
    """The objects from CLOSURE's root to the first one whose request for LIBRARY failed,
    each loaded by the one before; None when the load does not fail on LIBRARY."""
    failed = next(
        (r for r in closure.resolutions if r.name == library and r.status != "found"), None
    )
    if failed is None:
        return None
    loaded_by = {obj.path: obj.loader for obj in closure.loaded}
    chain = [failed.requester or closure.root]
    while chain[-1] != closure.root and loaded_by.get(chain[-1]) not in (None, *chain):
        chain.append(str(loaded_by[chain[-1]]))
    if chain[-1] != closure.root:
        chain.append(closure.root)
    return tuple(reversed(chain))


def failing_imports(
    env: Environment,
    disk: Disk,
    context: LoaderContext,
    libraries: Collection[str],
    *,
    limit: int = 5,
) -> tuple[FailingImport, ...]:
    """Up to LIMIT extension modules per library of LIBRARIES whose load fails on it, as the
    loader emulation of ``check`` sees them (no system package database is read)."""
    analysis = analyse(env, disk, context)
    sites = env.target.site_packages
    found: list[FailingImport] = []
    for library in dict.fromkeys(libraries):
        count = 0
        for closure in analysis.modules:
            chain = chain_to(closure, library)
            if chain is None or count >= limit:
                continue
            count += 1
            tree = DependencyTree(closure.root, closure, env)
            found.append(FailingImport(module_name(closure.root, sites), library, chain, tree))
    return tuple(found)
