"""Why a shared library is (not) found: every request for it, and who could provide it.

The answer joins three views of one name: the loader's (each DT_NEEDED entry naming it, where
the search went and what it found), the installers' (which installed distributions' RECORDs
ship a file by that name, and whether it is still on disk) and the checks' (the findings
about that library). A name is matched both as written and as its expanded basename, so a
request by path (``$ORIGIN/../lib/libx.so.1``) counts too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from libdoctor.analysis.libraries import SystemOwners, analyse_libraries, system_owners
from libdoctor.checks.libraries import (
    Shipped,
    check_libraries,
    direct_requirements,
    framework_preloads,
    shipped_by,
)
from libdoctor.checks.runtime import check_runtime_loads
from libdoctor.disk.stat import Disk
from libdoctor.environment.model import Environment
from libdoctor.environment.target import Target
from libdoctor.external.ospackages import SystemPackages
from libdoctor.findings import Finding
from libdoctor.loader.extensions import LibraryAnalysis, basename_index
from libdoctor.loader.imported import ImportContext, LoadedBefore
from libdoctor.loader.model import Resolution
from libdoctor.loader.runtime import RuntimeHit, runtime_search


@dataclass(frozen=True, slots=True)
class Request:
    """One object's DT_NEEDED entry for the library, in the load of ROOT."""

    resolution: Resolution
    root: str
    optional: bool  # ROOT is a library no extension module loads (dlopen'ed, if ever)
    runtime: RuntimeHit | None = None  # a package's own loader that finds it first, if any
    before: LoadedBefore | None = None  # already loaded by a package its package imports first


@dataclass(frozen=True, slots=True)
class Explanation:
    """LIBRARY as the loader, the installers and the checks see it; ENV names the owners."""

    library: str
    requests: tuple[Request, ...]
    shipped: tuple[Shipped, ...]
    findings: tuple[Finding, ...]
    env: Environment = field(compare=False, repr=False)
    system: SystemOwners = field(default_factory=SystemOwners, compare=False, repr=False)

    @property
    def found(self) -> bool:
        """Every request for the library is satisfied (vacuously, when nothing needs it)."""
        return all(r.resolution.status == "found" for r in self.requests)


def explain_library(
    target: Target,
    library: str,
    environ: Mapping[str, str],
    cwd: str,
    *,
    packages: SystemPackages | None = None,
) -> Explanation:
    """LIBRARY in TARGET; a copy found outside the environment is joined to its system
    package in PACKAGES (the host's by default)."""
    analysis, disk = analyse_libraries(target, environ, cwd)
    env = analysis.env
    requests = with_runtime_loaders(analysis, disk, requests_for(analysis, library))
    findings = findings_for(analysis, disk, library)
    shipped = shipped_by(env, disk, library, basename_index(env.claims))
    return Explanation(
        library=library,
        requests=tuple(requests),
        shipped=tuple(shipped),
        findings=tuple(findings),
        env=env,
        system=system_owners(
            env,
            (r.resolution for r in requests),
            packages,
        ),
    )


def requests_for(analysis: LibraryAnalysis, library: str) -> list[Request]:
    """Each requester's first DT_NEEDED entry for LIBRARY: a requester reached from several
    extension modules is resolved the same way in each, so it is shown once."""
    requests: list[Request] = []
    seen: set[tuple[str | None, str]] = set()
    optional = analysis.optional
    for closure in analysis.closures():
        for res in closure.resolutions:
            if res.kind != "needed":
                continue
            if library not in (res.name, os.path.basename(res.expanded)):
                continue
            if (res.requester, res.name) in seen:
                continue
            seen.add((res.requester, res.name))
            requests.append(Request(res, closure.root, closure in optional))
    for edge in analysis.runtime:  # loaded at run time by name: after every DT_NEEDED
        loaded = edge.resolution
        key = (loaded.requester, loaded.name) if loaded is not None else None
        if loaded is not None and key is not None and library == loaded.name and key not in seen:
            seen.add(key)
            requests.append(Request(loaded, edge.module, False))
    return requests


def with_runtime_loaders(
    analysis: LibraryAnalysis, disk: Disk, requests: list[Request]
) -> list[Request]:
    """A request the loader cannot satisfy that the requester's package loads itself first
    (loader.runtime) carries where that loader finds it."""
    if all(r.resolution.status == "found" for r in requests):
        return requests
    deps = direct_requirements(analysis.env)
    imports = ImportContext(analysis, lambda: framework_preloads(analysis, disk))
    out = []
    for request in requests:
        res = request.resolution
        if res.status == "found":
            out.append(request)
            continue
        key = analysis.module_dists.get(request.root, "")
        hit = runtime_search(analysis.env, disk, res.name, deps, key)
        before = imports.loaded_before(request.root, res.name) if hit is None else None
        out.append(replace(request, runtime=hit, before=before))
    return out


def findings_for(analysis: LibraryAnalysis, disk: Disk, library: str) -> list[Finding]:
    """The library checks' findings about LIBRARY, an invalid file by that name included."""
    return [
        f
        for f in [*check_libraries(analysis, disk), *check_runtime_loads(analysis, disk)]
        if f.evidence.get("library") == library
        or (f.code == "elf-invalid" and os.path.basename(f.paths[0]) == library)
    ]
