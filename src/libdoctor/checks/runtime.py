"""Runtime loads as findings: runtime-library-missing, runtime-library-outside.

A library a library loads by name at run time (``loader.dlopened``) that cannot be loaded is
an error, named with its owner and what stops working, when there is evidence the
environment meant to provide it:

- the table says the requester always loads it (cuDNN 9's sublibraries) and its own
  distribution is of that layout (its RECORD lists another name the table gives that
  loader), or loads it when its own distribution ships it and its RECORD lists it;
- a RECORD lists a file by that name that is gone (it was there): whatever the source.

Found outside the environment (the system's cuDNN answering for a sublibrary the wheel
lost: ``CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH``), or inside it but in a file of another
CUDA major than its requester's, is a warning, for the loads the table says are needed.
Plugins (NCCL's), names read only from strings, and the NVIDIA driver are never a warning
for where they come from: a system NCCL network plugin, a toolkit's CUPTI a package loads
by its own path, the driver's ``libcuda.so.1``, are how such machines are meant to work.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from libdoctor.checks.libraries import (
    Shipped,
    owner_refs,
    reinstall_fix,
    searched_dirs,
    shipped_by,
)
from libdoctor.checks.wording import file_list
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment, is_inside
from libdoctor.environment.paths import display
from libdoctor.findings import DistRef, Finding, Severity
from libdoctor.loader.dlopened import RuntimeEdge
from libdoctor.loader.extensions import LibraryAnalysis, module_name
from libdoctor.stack.cuda import cuda_major_of

__all__ = ["check_runtime_loads"]


def check_runtime_loads(analysis: LibraryAnalysis, disk: Disk) -> list[Finding]:
    env = analysis.env
    if not analysis.runtime:
        return []
    index = analysis.shipped_at
    findings: list[Finding] = []
    for edge in analysis.runtime:
        res = edge.resolution
        if res is None or edge.load.need == "driver":
            continue
        shipped = shipped_by(env, disk, edge.load.name, index)
        owner = _owner(env, edge.requester)
        module = module_name(edge.module, env.target.site_packages)  # dotted, once
        meant = edge.expected
        lost = [s for s in shipped if not s.present]
        if res.status != "found":
            if meant or lost:
                findings.append(_missing(analysis, edge, module, owner, shipped, lost))
            continue
        if not meant or res.path is None:
            continue
        found = os.path.normpath(res.path)
        if not is_inside(found, env.target.prefix):
            findings.append(_outside(analysis, edge, module, owner, found, shipped))
        else:
            other = _other_major(env, owner, found)
            if other is not None:
                findings.append(_other_major_finding(analysis, edge, module, owner, found, other))
    return findings


def _owner(env: Environment, path: str) -> Distribution | None:
    owners = env.owners(os.path.normpath(path))
    return owners[0] if owners else None


def _listed(dists: Sequence[Distribution]) -> str:
    """RECORD, or "its conda-meta record" when every one is a conda package."""
    kinds = {d.kind for d in dists}
    return file_list(dists[0]) if len(kinds) == 1 else "RECORD"


def _who(env: Environment, edge: RuntimeEdge, owner: Distribution | None) -> str:
    name = os.path.basename(edge.requester)
    return f"{name} ({owner.display})" if owner is not None else name


def _evidence(
    analysis: LibraryAnalysis, edge: RuntimeEdge, module: str, shipped: Sequence[Shipped]
) -> dict[str, Any]:
    env = analysis.env
    res = edge.resolution
    return {
        "library": edge.load.name,
        "loaded_by": display(os.path.normpath(edge.requester)),
        "loaded_by_owner": owner_refs(env, edge.requester),
        "how": f"dlopen by name at run time ({edge.load.source})",
        "need": edge.load.need,
        "module": module,
        "status": res.status if res is not None else None,
        "reason": res.reason if res is not None else None,
        "searched": searched_dirs(res) if res is not None else [],
        "shipped_by": [s.evidence() for s in shipped],
    }


def _missing(
    analysis: LibraryAnalysis,
    edge: RuntimeEdge,
    module: str,
    owner: Distribution | None,
    shipped: Sequence[Shipped],
    lost: Sequence[Shipped],
) -> Finding:
    env = analysis.env
    res = edge.resolution
    assert res is not None
    broken = res.status == "error" and res.found_path
    state = (
        f"is found at {display(os.path.normpath(res.found_path or ''))} but cannot be loaded "
        f"({res.reason})"
        if broken
        else "cannot be found"
    )
    top = module.split(".")[0]
    message = (
        f"{edge.load.name}, which {_who(env, edge, owner)} loads at run time by name, {state}: "
        f"{edge.load.what}, though import {top} works."
    )
    if lost:
        dists = [s.dist for s in lost]
        names = ", ".join(sorted({d.display for d in dists}))
        message += (
            f" {names} lists it in {_listed(dists)} but the file is gone; "
            "reinstalling brings it back."
        )
        fix = reinstall_fix(env, dists)
    elif owner is not None and not owner.external:
        beside = os.path.basename(edge.requester)
        message += (
            f" {owner.display}'s wheel ships it beside {beside}; reinstalling it brings it back."
        )
        fix = reinstall_fix(env, [owner])
    else:
        fix = None
    return Finding(
        code="runtime-library-missing",
        severity=Severity.ERROR,
        message=message,
        distribution=DistRef(owner.name, owner.version) if owner else None,
        paths=(os.path.normpath(edge.requester), *(s.path for s in lost)),
        evidence=_evidence(analysis, edge, module, shipped),
        fix=fix,
    )


def _outside(
    analysis: LibraryAnalysis,
    edge: RuntimeEdge,
    module: str,
    owner: Distribution | None,
    found: str,
    shipped: Sequence[Shipped],
) -> Finding:
    env = analysis.env
    res = edge.resolution
    assert res is not None
    via = (res.via or "").replace("_", " ")
    lost = [s for s in shipped if not s.present]
    present = [s for s in shipped if s.present]
    message = (
        f"{edge.load.name}, which {_who(env, edge, owner)} loads at run time by name, resolves "
        f"to {display(found)} (via {via}), outside the environment: another build's library "
        "is loaded beside the environment's own"
    )
    fix = None
    if present:
        message += f", although the environment ships it at {display(present[0].path)}"
        message += (
            ": unset LD_LIBRARY_PATH or drop that directory from it."
            if res.via == "ld_library_path"
            else "."
        )
    elif lost:
        names = ", ".join(sorted({s.dist.display for s in lost}))
        listed = _listed([s.dist for s in lost])
        message += f"; {names} lists it in {listed} but the file is gone, so the search went on."
        fix = reinstall_fix(env, [s.dist for s in lost])
    elif owner is not None:
        message += (
            f"; {owner.display}'s wheel ships it beside {os.path.basename(edge.requester)} and "
            "it is not there: reinstalling it brings it back."
        )
        fix = reinstall_fix(env, [owner])
    evidence = _evidence(analysis, edge, module, shipped)
    evidence["resolved"] = display(found)
    evidence["via"] = res.via
    return Finding(
        code="runtime-library-outside",
        severity=Severity.WARNING,
        message=message,
        distribution=DistRef(owner.name, owner.version) if owner else None,
        paths=(os.path.normpath(edge.requester), found),
        evidence=evidence,
        fix=fix,
    )


def _other_major(
    env: Environment, owner: Distribution | None, found: str
) -> tuple[Distribution, int, int] | None:
    """(the found file's distribution, its CUDA major, the requester's) when they differ."""
    found_owner = _owner(env, found)
    if owner is None or found_owner is None or found_owner.metadata_dir == owner.metadata_dir:
        return None
    mine, theirs = cuda_major_of(owner), cuda_major_of(found_owner)
    if mine is None or theirs is None or mine.major == theirs.major:
        return None
    return found_owner, theirs.major, mine.major


def _other_major_finding(
    analysis: LibraryAnalysis,
    edge: RuntimeEdge,
    module: str,
    owner: Distribution | None,
    found: str,
    other: tuple[Distribution, int, int],
) -> Finding:
    env = analysis.env
    found_owner, theirs, mine = other
    evidence = _evidence(analysis, edge, module, [])
    evidence["resolved"] = display(found)
    evidence["resolved_owner"] = {"name": found_owner.name, "version": found_owner.version}
    return Finding(
        code="runtime-library-outside",
        severity=Severity.WARNING,
        message=(
            f"{edge.load.name}, which {_who(env, edge, owner)} (CUDA {mine}) loads at run time "
            f"by name, resolves to {display(found)}, {found_owner.display}'s, built for CUDA "
            f"{theirs}."
        ),
        distribution=DistRef(owner.name, owner.version) if owner else None,
        paths=(os.path.normpath(edge.requester), found),
        evidence=evidence,
    )
