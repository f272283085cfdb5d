"""Loader truth as findings: elf-invalid, unresolved-library, driver-library-absent,
optional-library-missing, shadowed-library.

Every answer is joined to the package that owns the file: who needs the library, where the
loader looked, and which installed distribution ships (or shipped) a file by that name.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from libdoctor.checks.optional import OptionalModule, judge_optional
from libdoctor.checks.requirements import missing_requirements
from libdoctor.checks.wording import file_list
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution, required_names
from libdoctor.environment.model import Environment, is_inside
from libdoctor.environment.paths import display
from libdoctor.environment.policy import is_driver_library
from libdoctor.environment.requirements import RequirementIndex
from libdoctor.external.installers import reinstall
from libdoctor.findings import DistRef, Finding, Fix, Severity
from libdoctor.loader.extensions import LibraryAnalysis, module_name, own_copy
from libdoctor.loader.imported import ImportContext, LoadedBefore, PackageLoads
from libdoctor.loader.model import Closure, Resolution
from libdoctor.loader.runtime import RuntimeHit, runtime_search

if TYPE_CHECKING:
    from libdoctor.checks.stack import StackAnalysis


def _norm(path: str) -> str:
    return os.path.normpath(path)


def owner_refs(env: Environment, path: str | None) -> list[dict[str, str]]:
    if path is None:
        return []
    return [{"name": d.name, "version": d.version} for d in env.owners(_norm(path))]


def _owner_text(env: Environment, path: str) -> str:
    owners = env.owners(_norm(path))
    return ", ".join(d.display for d in owners) if owners else "no distribution"


def searched_dirs(res: Resolution) -> list[dict[str, Any]]:
    return [
        {
            "directory": display(s.directory or "(current directory)"),
            "source": s.source,
            **({"owner": display(s.owner)} if s.owner else {}),
        }
        for s in res.searched
    ]


@dataclass(slots=True)
class _Gap:
    """One library name that could not be loaded, everywhere it was asked for."""

    name: str
    requests: list[tuple[Closure, Resolution]] = field(default_factory=list)
    hit: RuntimeHit | None = None  # the package's own loader that would load it, if one does
    modules: list[OptionalModule] = field(default_factory=list)  # optional features needing it
    # modules that need what one of the failing modules' packages loads first: they fail with it
    dependents: list[LoadedBefore] = field(default_factory=list)

    @property
    def requesters(self) -> list[str]:
        seen: dict[str, None] = {}
        for _, res in self.requests:
            seen.setdefault(res.requester or "", None)
        return [r for r in seen if r]


def direct_requirements(env: Environment) -> dict[str, set[str]]:
    """distribution key -> keys of what it requires itself (markers evaluated, extras off)."""
    direct: dict[str, set[str]] = defaultdict(set)
    for dist in env.distributions:
        direct[dist.key].update(required_names(dist))
    return direct


def dependency_closure(env: Environment) -> dict[str, set[str]]:
    """distribution key -> keys of everything it requires, transitively (markers evaluated)."""
    return requirement_graph(env)[1]


def requirement_graph(env: Environment) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(direct_requirements, dependency_closure), the direct edges read once for both."""
    direct = direct_requirements(env)
    closure: dict[str, set[str]] = {}
    for key in {d.key for d in env.distributions}:
        seen: set[str] = set()
        todo = [key]
        while todo:
            for dep in direct.get(todo.pop(), ()):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        closure[key] = seen
    return direct, closure


def check_libraries(
    analysis: LibraryAnalysis, disk: Disk, stack: StackAnalysis | None = None
) -> list[Finding]:
    """STACK: the run's ``analyse_stack``, whose preload replay the import context reuses."""
    env = analysis.env
    findings = _elf_invalid(analysis)
    failed = analysis.failed_needs
    needed: dict[str, _Gap] = {}
    optional: dict[str, _Gap] = {}
    broken: list[LoadedBefore] = []
    if failed:  # the import context is worth computing only when something failed alone
        direct, deps = requirement_graph(env)
        provided = analysis.provided
        imports = ImportContext(analysis, lambda: framework_preloads(analysis, disk, stack))
        for closure, res in failed:
            key = analysis.module_dists.get(closure.root, "")
            context = {key} | deps.get(key, set())
            if any(k in context for k in provided.get(res.name, {})):
                continue  # loaded by an import that must come first
            before = imports.loaded_before(closure.root, res.name)
            if before is not None:
                if not before.provider_ok:
                    broken.append(before)
                continue  # loaded by a package its package imports first
            hit = runtime_search(env, disk, res.name, direct, key)
            if hit is not None and (hit.present or not hit.lost):
                if not hit.present:  # a feature its package loads on demand, not installed
                    optional.setdefault(res.name, _Gap(res.name, hit=hit)).requests.append(
                        (closure, res)
                    )
                continue  # found by the package's own loader before the import
            needed.setdefault(res.name, _Gap(res.name)).requests.append((closure, res))
    for closure in analysis.optional:
        for res in closure.resolutions:
            if res.status != "found" and res.kind == "needed" and res.name not in needed:
                optional.setdefault(res.name, _Gap(res.name)).requests.append((closure, res))
    names_index = analysis.shipped_at
    if needed:
        _optional_modules(analysis, disk, needed, optional, names_index)
    for before in broken:  # import torch fails, so import sgl_kernel fails with it
        for gap in needed.values():
            roots = {c.root for c, _ in gap.requests}
            known = {d.module for d in gap.dependents}
            if before.provider_root in roots and not {before.module} & (roots | known):
                gap.dependents.append(before)
    for name, gap in sorted(needed.items()):
        if is_driver_library(name):
            findings.append(_driver_finding(env, gap, optional=False))
        else:
            findings.append(_unresolved_finding(analysis, disk, gap, names_index))
    for name, gap in sorted(optional.items()):
        if is_driver_library(name):
            findings.append(_driver_finding(env, gap, optional=True))
        else:
            findings.append(_optional_finding(env, gap, names_index))
    findings += _shadowed(analysis, disk)
    return findings


def framework_preloads(
    analysis: LibraryAnalysis, disk: Disk, stack: StackAnalysis | None = None
) -> dict[str, PackageLoads]:
    """What ``import torch`` loads before ``torch._C``: its CUDA preload, replayed as the
    stack stage models it (``stack.preload``), for each CUDA torch whose model is known.
    STACK: that replay, done once for the run (else done here)."""
    from libdoctor.checks.stack import analyse_stack
    from libdoctor.stack.frameworks import read_file

    if stack is None:
        stack = analyse_stack(analysis.env, disk, analysis, read_file)
    base = {obj.path for obj in analysis.process.objects}
    out: dict[str, PackageLoads] = {}
    for start in stack.starts.values():
        names: dict[str, str] = {}
        for obj in start.process.objects:
            if obj.path not in base:
                for name in (obj.soname, obj.request, os.path.basename(obj.path)):
                    if name:
                        names.setdefault(name, obj.path)
        how = "its CUDA preload (_load_global_deps)"
        out["torch"] = PackageLoads(names, start.error is None, how)
    return out


def _optional_modules(
    analysis: LibraryAnalysis,
    disk: Disk,
    needed: dict[str, _Gap],
    optional: dict[str, _Gap],
    index: Mapping[str, list[str]],
) -> None:
    """Move the requests of extension modules that are optional features, on evidence
    (``checks.optional``), from NEEDED to OPTIONAL; a gap keeps its other requests."""
    env = analysis.env
    requirements: list[RequirementIndex] = []

    def index_once() -> RequirementIndex:
        if not requirements:
            requirements.append(RequirementIndex(env))
        return requirements[0]

    def missing_for(dist: Distribution) -> bool:
        return bool(missing_requirements(env, index_once(), [dist]))

    for name in list(needed):
        gap = needed[name]
        if is_driver_library(name):
            continue
        shipped: list[object] = [*shipped_by(env, disk, name, index)]
        shipped += [p for p in disk.removed if os.path.basename(p) == name]
        judged: dict[str, OptionalModule | None] = {}
        for closure, res in gap.requests:
            if closure.root not in judged:
                judged[closure.root] = (
                    judge_optional(env, index_once, closure.root, name, shipped, missing_for)
                    if res.status == "not_found"
                    else None
                )
        if not judged or None in judged.values():
            continue  # one module that needs it for certain: the gap stays an error
        del needed[name]
        moved = optional.setdefault(name, _Gap(name))
        moved.requests += gap.requests
        moved.modules += [m for m in judged.values() if m is not None]


# --- elf-invalid ------------------------------------------------------------------------


def _elf_invalid(analysis: LibraryAnalysis) -> list[Finding]:
    env = analysis.env
    needed_paths = {
        _norm(res.found_path)
        for closure in analysis.modules
        for res in closure.resolutions
        if res.status == "error" and res.found_path
    }
    modules = {c.root for c in analysis.modules}
    findings = []
    for path, reason in analysis.invalid:
        owners = env.owners(path)
        loaded = path in modules or path in needed_paths
        findings.append(
            Finding(
                code="elf-invalid",
                severity=Severity.ERROR if loaded else Severity.WARNING,
                message=(
                    f"{display(path)} is not a valid ELF object ({reason})"
                    + ("; loading it fails." if loaded else ".")
                ),
                distribution=DistRef(owners[0].name, owners[0].version) if owners else None,
                paths=(path,),
                evidence={"reason": reason, "owners": owner_refs(env, path)},
                fix=reinstall_fix(env, owners),
            )
        )
    return findings


def reinstall_fix(env: Environment, dists: Sequence[Distribution]) -> Fix | None:
    usable = [d for d in dict.fromkeys(dists) if not d.external]
    if not usable:
        return None
    return Fix(tuple(reinstall(d, env.target) for d in usable))


# --- unresolved-library -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shipped:
    """An installed distribution whose RECORD names a file called like a library."""

    dist: Distribution
    path: str
    present: bool

    def evidence(self) -> dict[str, Any]:
        return {
            "name": self.dist.name,
            "version": self.dist.version,
            "path": self.path,
            "present": self.present,
        }


def shipped_by(
    env: Environment, disk: Disk, name: str, index: Mapping[str, list[str]]
) -> list[Shipped]:
    """Every installed distribution whose RECORD names a file called NAME, present or not."""
    found = []
    for path in index.get(os.path.basename(name), ()):
        state = disk.stat(path)
        present = state.exists and not state.error
        found += [Shipped(claim.dist, path, present) for claim in env.claims[path]]
    return found


def _unresolved_finding(
    analysis: LibraryAnalysis, disk: Disk, gap: _Gap, index: Mapping[str, list[str]]
) -> Finding:
    env = analysis.env
    sites = env.target.site_packages
    roots = sorted({c.root for c, _ in gap.requests})
    modules = [module_name(r, sites) for r in roots]
    first_closure, first = gap.requests[0]
    requester = first.requester or first_closure.root
    candidates = shipped_by(env, disk, gap.name, index)
    remedy, fix = _unresolved_remedy(env, gap, candidates, requester)
    message = _unresolved_headline(env, gap.name, first, requester, modules)
    evidence: dict[str, Any] = {
        "library": gap.name,
        "modules": modules,
        "requests": _request_evidence(env, gap, sites),
        "shipped_by": [c.evidence() for c in candidates],
    }
    if gap.dependents:
        dependents = sorted({module_name(d.module, sites) for d in gap.dependents})
        packages = sorted({d.package for d in gap.dependents})
        message += (
            f" With it import {' and import '.join(packages)} fails, and so does "
            f"import {dependents[0]}"
            + (f" (and {len(dependents) - 1} more)" if len(dependents) > 1 else "")
            + ", which needs what that import loads."
        )
        evidence["modules"] = modules + [m for m in dependents if m not in modules]
        evidence["fails_with"] = [
            {"module": module_name(d.module, sites), **d.evidence()} for d in gap.dependents
        ]
    return Finding(
        code="unresolved-library",
        severity=Severity.ERROR,
        message=message + remedy,
        distribution=_first_owner(env, requester),
        paths=tuple(dict.fromkeys([requester, *gap.requesters])),
        evidence=evidence,
        fix=fix,
    )


def _unresolved_headline(
    env: Environment, name: str, first: Resolution, requester: str, modules: list[str]
) -> str:
    """Which library, for whom, and which imports fail because of it. A file the search
    found but cannot load stops the search there (glibc does not go on looking), so it is
    named as found and broken, not as missing."""
    who = f"{name}, needed by {display(requester)} ({_owner_text(env, requester)})"
    if first.status == "error" and first.found_path:
        found = display(_norm(first.found_path))
        message = f"{who}, is found at {found} but cannot be loaded ({first.reason})"
    elif first.status == "error":
        message = f"{who}, cannot be found ({first.reason})"
    else:
        message = f"{who}, cannot be found"
    message += f": import {modules[0]} fails"
    if len(modules) > 1:
        message += f" (and {len(modules) - 1} more module(s))"
    return message + "."


def _unresolved_remedy(
    env: Environment, gap: _Gap, candidates: list[Shipped], requester: str
) -> tuple[str, Fix | None]:
    """What the environment has by that name, and the fix when a reinstall brings it back.

    A lost file in a directory the loader searched is the one to restore; failing that,
    any lost file.
    """
    broken = _broken_file(env, gap)
    if broken is not None:
        return broken
    searched = {_norm(s.directory) for _, r in gap.requests for s in r.searched}
    lost = [c for c in candidates if not c.present]
    on_path_lost = [c for c in lost if _norm(os.path.dirname(c.path)) in searched] or lost
    if on_path_lost:
        dists = [c.dist for c in on_path_lost]
        names = ", ".join(sorted({d.display for d in dists}))
        listed = file_list(dists[0]) if all(d.kind == dists[0].kind for d in dists) else "RECORD"
        text = f" {names} lists it in {listed} but the file is gone; reinstalling brings it back."
        return text, reinstall_fix(env, dists)
    if candidates:
        where = ", ".join(display(c.path) for c in candidates[:3])
        return (
            f" The environment has it at {where}, which is not on the search path of "
            f"{display(os.path.basename(requester))}.",
            None,
        )
    provider = _missing_provider(env, gap, requester)
    if provider is not None:
        return provider
    return " No installed distribution ships a file by that name.", None


_GENERIC_TOKENS = frozenset({"nvidia", "python", "py", "lib", "libs", "bin", "cuda"})
_CUDA_TOKEN = re.compile(r"^cu\d+x?$")


def _name_tokens(key: str) -> set[str]:
    """The words of a distribution name that can name a place: ``nvidia-cudnn-cu13`` ->
    {cudnn}."""
    return {
        t
        for t in re.split(r"[-_.]", key)
        if len(t) > 2 and t not in _GENERIC_TOKENS and not _CUDA_TOKEN.match(t)
    }


def _missing_provider(env: Environment, gap: _Gap, requester: str) -> tuple[str, Fix] | None:
    """A requirement of the requester's distribution (or of what it requires) that is not
    installed and whose name names where the loader looked, or the library itself: the
    distribution that was meant to provide it. Its fix is the one ``requirement-missing``
    gives, so both are one cause. Only one such requirement counts; two are a guess."""
    owners = env.owners(_norm(requester))
    if not owners:
        return None
    deps = dependency_closure(env)
    requirers = [owners[0], *(d for d in env.distributions if d.key in deps.get(owners[0].key, ()))]
    missing = missing_requirements(env, RequirementIndex(env), requirers)
    stem = re.sub(r"\.so(\.[0-9.]*)?$", "", gap.name).removeprefix("lib").lower()
    places = {stem} | {
        part.lower()
        for _, res in gap.requests
        for sd in res.searched
        if sd.directory and is_inside(_norm(sd.directory), env.target.prefix)
        for part in _norm(sd.directory).split(os.sep)
    }
    meant = [(key, fix) for key, fix in missing.items() if _name_tokens(key) & places]
    if len(meant) != 1 or meant[0][1] is None:
        return None
    key, fix = meant[0]
    assert fix is not None
    return (
        f" {owners[0].display} requires {key}, which is not installed: its name is where the "
        "loader looks for it; installing it brings the library.",
        fix,
    )


def _broken_file(env: Environment, gap: _Gap) -> tuple[str, Fix | None] | None:
    """The remedy when the search found a file it cannot load: reinstall its owner."""
    found = next((r.found_path for _, r in gap.requests if r.status == "error"), None)
    if not found:
        return None
    owners = env.owners(_norm(found))
    if not owners:
        return " No installed distribution claims that file.", None
    names = ", ".join(sorted({d.display for d in owners}))
    return f" It is {names}'s; reinstalling restores it.", reinstall_fix(env, owners)


def _request_evidence(env: Environment, gap: _Gap, sites: Sequence[str]) -> list[dict[str, Any]]:
    """One entry per requester: who asked, from which module, and where it was looked for."""
    return [
        {
            "requester": display(res.requester or closure.root),
            "requester_owner": owner_refs(env, res.requester or closure.root),
            "module": module_name(closure.root, sites),
            "status": res.status,
            "reason": res.reason,
            "searched": searched_dirs(res),
        }
        for closure, res in _one_per_requester(gap.requests)
    ]


def _one_per_requester(
    requests: Iterable[tuple[Closure, Resolution]],
) -> list[tuple[Closure, Resolution]]:
    seen: set[str | None] = set()
    out = []
    for closure, res in requests:
        if res.requester not in seen:
            seen.add(res.requester)
            out.append((closure, res))
    return out


def _first_owner(env: Environment, path: str) -> DistRef | None:
    owners = env.owners(_norm(path))
    return DistRef(owners[0].name, owners[0].version) if owners else None


def _driver_finding(env: Environment, gap: _Gap, *, optional: bool) -> Finding:
    requesters = gap.requesters
    return Finding(
        code="driver-library-absent",
        severity=Severity.INFO,
        message=(
            f"{gap.name} comes with the NVIDIA driver, not from pip, and is not installed on "
            f"this machine; {display(os.path.basename(requesters[0]))}"
            + (f" and {len(requesters) - 1} more" if len(requesters) > 1 else "")
            + (" load it only when a GPU is used." if not optional else " (loaded on demand).")
        ),
        paths=tuple(requesters),
        evidence={
            "library": gap.name,
            "needed_by": [{"path": display(r), "owners": owner_refs(env, r)} for r in requesters],
        },
    )


def _optional_finding(env: Environment, gap: _Gap, index: Mapping[str, list[str]]) -> Finding:
    requesters = gap.requesters
    evidence: dict[str, Any] = {
        "library": gap.name,
        "needed_by": [{"path": display(r), "owners": owner_refs(env, r)} for r in requesters],
        "shipped_at": [display(p) for p in index.get(gap.name, ())],
    }
    if gap.modules:
        return _optional_module_finding(gap, evidence)
    first = (
        display(os.path.basename(requesters[0]))
        if gap.hit is None
        else module_name(requesters[0], env.target.site_packages)
    )
    whom = first + (f" and {len(requesters) - 1} more" if len(requesters) > 1 else "")
    if gap.hit is None:
        why = ", which no extension module loads (a plugin loaded on demand, if ever)."
    else:
        why = (
            f"; {gap.hit.search.name} loads it on demand for that package, and no installed "
            "distribution ships it where it looks: that feature is unavailable until one does."
        )
        evidence["runtime_loader"] = {
            "name": gap.hit.search.name,
            "how": gap.hit.search.how,
            "searched": [display(d) for d in gap.hit.dirs],
        }
    return Finding(
        code="optional-library-missing",
        severity=Severity.INFO,
        message=f"{gap.name} is not found for {whom}{why}",
        paths=tuple(requesters),
        evidence=evidence,
    )


def _optional_module_finding(gap: _Gap, evidence: dict[str, Any]) -> Finding:
    """``optional: numba.np.ufunc.tbbpool needs libtbb.so.12, which no installed
    distribution ships (install tbb to enable)``, with the evidence that makes it optional."""
    first = gap.modules[0]
    whom = first.module + (
        f" and {len(gap.modules) - 1} more module(s)" if len(gap.modules) > 1 else ""
    )
    enable = (
        f"install {first.provider}" if first.provider else "install a distribution that ships it"
    )
    top = first.module.split(".")[0]
    evidence["optional_modules"] = [m.evidence() for m in gap.modules]
    return Finding(
        code="optional-library-missing",
        severity=Severity.INFO,
        message=(
            f"optional: {whom} needs {gap.name}, which no installed distribution ships "
            f"({enable} to enable). {first.dist.display} is intact (its bytes match RECORD, "
            f"its requirements are installed) and import {top} does not import it: only "
            "the feature that loads it is unavailable."
        ),
        distribution=DistRef(first.dist.name, first.dist.version),
        paths=tuple(m.path for m in gap.modules),
        evidence=evidence,
    )


# --- shadowed-library -------------------------------------------------------------------


def _shadowed(analysis: LibraryAnalysis, disk: Disk) -> list[Finding]:
    """Found outside the env (LD_LIBRARY_PATH, cache, system dir) while the requester's own
    RUNPATH/RPATH, searched later or not at all, leads to the env's own copy."""
    env = analysis.env
    prefix = env.target.prefix
    system = analysis.loader.config.system
    findings: dict[tuple[str, str], Finding] = {}
    for closure in analysis.modules:
        objects = {o.path: o for o in closure.loaded}
        for res in closure.resolutions:
            if res.status != "found" or res.via not in ("ld_library_path", "cache", "default"):
                continue
            if res.path is None or is_inside(_norm(res.path), prefix) or res.requester is None:
                continue
            requester = objects.get(res.requester)
            if requester is None:
                continue
            own = own_copy(requester, res.name, disk, prefix, system)
            if own is None or (res.requester, res.name) in findings:
                continue
            findings[(res.requester, res.name)] = Finding(
                code="shadowed-library",
                severity=Severity.WARNING,
                message=(
                    f"{res.name} for {display(os.path.basename(res.requester))} resolves to "
                    f"{display(res.path)} (via {res.via.replace('_', ' ')}) although the "
                    f"environment ships its own at {display(own)} ({_owner_text(env, own)})"
                    + (
                        ": unset LD_LIBRARY_PATH or drop that directory from it."
                        if res.via == "ld_library_path"
                        else "."
                    )
                ),
                distribution=_first_owner(env, res.requester),
                paths=(res.requester, res.path, own),
                evidence={
                    "library": res.name,
                    "resolved": display(res.path),
                    "via": res.via,
                    "own_copy": display(own),
                    "own_copy_owners": owner_refs(env, own),
                    "searched": searched_dirs(res),
                },
            )
    return list(findings.values())
