"""Libraries packages load themselves, by absolute path, before the loader's search runs.

Some packages do not rely on RPATH or RUNPATH: they find a library in a sibling wheel's
directory and ``ctypes.CDLL`` it with ``RTLD_GLOBAL`` before they import the extension
module that needs it, whose DT_NEEDED entry is then satisfied by the soname already in the
process. A library found that way is resolved, not missing; a library such a loader would
look for that nothing installed ships is an optional feature of that package, not a broken
import. Unknown packages stay strict: only the searches in ``SEARCHES`` are believed.

Each search is data: the distribution that does the loading, and where it looks for a
soname. It applies to the modules of that distribution and of the distributions that require
it *directly*: those call it on their own import (cupy's ``_environment`` preloads through
cuda-pathfinder). A distribution that only reaches it through another (torch -> cuda-bindings
-> cuda-pathfinder) never calls it before its own imports, so a library its modules need is
needed, whoever else could load it. cuda-pathfinder's
own catalog (``descriptor_catalog.py``) is read from the installed package with ``ast``,
never imported; when it cannot be read, its documented directories are the fallback.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment
from libdoctor.environment.rooted import Rooted

__all__ = ["SEARCHES", "RuntimeHit", "RuntimeSearch", "runtime_search"]

Catalog = Mapping[str, tuple[str, ...]]
"""soname -> the site-packages-relative directories a loader tries for it, in order."""


@dataclass(frozen=True, slots=True)
class RuntimeSearch:
    """One package's own way of loading libraries ahead of the import that needs them."""

    name: str  # how the finding names it: "cuda-pathfinder"
    distribution: str  # canonical name of the distribution that loads: modules of its users
    how: str  # one line for the evidence
    catalog: Callable[[Distribution], Catalog]  # what it loads, read from the installed copy
    fallback: tuple[str, ...]  # where it looks for anything, when the catalog cannot be read


@dataclass(frozen=True, slots=True)
class RuntimeHit:
    """Where a runtime loader finds a library in the environment, or would look for it."""

    search: RuntimeSearch
    dirs: tuple[str, ...]  # absolute directories it tries, in order
    present: tuple[str, ...]  # files there now (the first is what it loads)
    lost: tuple[str, ...]  # files a RECORD lists there that are gone


_PATHFINDER_CATALOG = "cuda/pathfinder/_dynamic_libs/descriptor_catalog.py"


def _pathfinder_catalog(dist: Distribution) -> Catalog:
    """``DescriptorSpec(linux_sonames=(...), site_packages_linux=(...))`` entries of the
    installed cuda-pathfinder: which sonames it loads, from which directories."""
    path = os.path.join(dist.base_dir, _PATHFINDER_CATALOG)
    try:
        with Rooted(dist.site.root).open(path, "rb") as handle:
            tree = ast.parse(handle.read(), path)
    except (OSError, SyntaxError, ValueError):
        return {}
    catalog: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fields = {k.arg: _strings(k.value) for k in node.keywords if k.arg}
            sonames, dirs = fields.get("linux_sonames"), fields.get("site_packages_linux")
            for soname in sonames or ():
                catalog.setdefault(soname, dirs or ())
    return catalog


def _strings(node: ast.expr) -> tuple[str, ...] | None:
    """A tuple or list of string literals, else None."""
    if isinstance(node, ast.Tuple | ast.List) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return tuple(str(e.value) for e in node.elts if isinstance(e, ast.Constant))
    return None


SEARCHES: tuple[RuntimeSearch, ...] = (
    RuntimeSearch(
        name="cuda-pathfinder",
        distribution="cuda-pathfinder",
        how="load_nvidia_dynamic_lib: ctypes.CDLL(<site-packages>/<dir>/<soname>, RTLD_GLOBAL) "
        "before the module that needs it is imported",
        catalog=_pathfinder_catalog,
        fallback=("nvidia/cu13/lib", "nvidia/cu12/lib"),  # its layout of NVIDIA's wheels
    ),
)


def runtime_search(
    env: Environment,
    disk: Disk,
    soname: str,
    users: Mapping[str, set[str]],
    requester_dist: str,
    searches: tuple[RuntimeSearch, ...] = SEARCHES,
) -> RuntimeHit | None:
    """How a loader of REQUESTER_DIST's own finds SONAME, or None when none applies.

    USERS maps a distribution key to the keys it requires directly (markers evaluated): a
    search applies to the modules of its own distribution and of those that require it.
    """
    for search in searches:
        if search.distribution != requester_dist and search.distribution not in users.get(
            requester_dist, ()
        ):
            continue
        loader = next((d for d in env.distributions if d.key == search.distribution), None)
        if loader is None:
            continue
        catalog = search.catalog(loader)
        rel_dirs = catalog.get(soname) if catalog else search.fallback
        if not rel_dirs:
            continue
        dirs = tuple(
            os.path.join(site, rel) for rel in rel_dirs for site in env.target.site_packages
        )
        present, lost = [], []
        for directory in dirs:
            path = os.path.join(directory, soname)
            if disk.stat(path).exists:
                present.append(path)
            elif path in env.claims:
                lost.append(path)
        return RuntimeHit(search, dirs, tuple(present), tuple(lost))
    return None
