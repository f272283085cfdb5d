"""The loader's view of a target as the user's next ``python`` would get it.

``why`` and ``tree`` both start here: model the environment, then emulate every extension
module's load with the loader inputs (``LD_LIBRARY_PATH``, working directory) of the caller.
A library found outside the environment is joined to the system package that owns it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from libdoctor.analysis.run import loader_context
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import Environment, build_environment
from libdoctor.environment.target import Target
from libdoctor.external.ospackages import SystemPackage, SystemPackages
from libdoctor.loader.extensions import LibraryAnalysis, analyse
from libdoctor.loader.model import Resolution


def analyse_libraries(
    target: Target, environ: Mapping[str, str], cwd: str
) -> tuple[LibraryAnalysis, RealDisk]:
    """The library analysis of TARGET, and the disk view it read (the checks read it again)."""
    env = build_environment(target)
    disk = RealDisk(target.root)
    return analyse(env, disk, loader_context(environ, cwd, target)), disk


@dataclass(frozen=True, slots=True)
class Provider:
    """A system package whose file list names a library the loader did not find."""

    package: SystemPackage
    present: bool  # the listed file is on disk (in a directory the search did not try)


@dataclass(frozen=True, slots=True)
class SystemOwners:
    """The operating system's view of a load: the package owning each library found outside
    the environment (by the path the loader found), and who would provide each one missing."""

    owners: Mapping[str, SystemPackage] = field(default_factory=dict)
    providers: Mapping[str, tuple[Provider, ...]] = field(default_factory=dict)

    def owner(self, path: str | None) -> SystemPackage | None:
        return self.owners.get(os.path.normpath(path)) if path else None


def system_owners(
    env: Environment,
    resolutions: Iterable[Resolution],
    packages: SystemPackages | None = None,
) -> SystemOwners:
    """Join every library of RESOLUTIONS no distribution of ENV claims to its system package
    in PACKAGES (by default those of the system ENV lives in), and every name not found to the
    packages listing it."""
    if packages is None:
        packages = SystemPackages(root=env.target.root)
    owners: dict[str, SystemPackage] = {}
    providers: dict[str, tuple[Provider, ...]] = {}
    for res in resolutions:
        if res.status == "found" and res.path:
            path = os.path.normpath(res.path)
            if path in owners or env.owners(path):
                continue
            hit = packages.owner(packages.seen_from_inside(path))
            if hit is not None:
                owners[path] = hit
        elif res.status == "not_found" and "/" not in res.name and res.name not in providers:
            providers[res.name] = tuple(
                Provider(p, os.path.lexists(packages.inside(p.path)))
                for p in packages.providers(res.name)
            )
    return SystemOwners(owners, {k: v for k, v in providers.items() if v})
