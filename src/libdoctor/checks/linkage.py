"""Whether the environment-to-be gives each locked extension module the libraries it needs:
``lock-unresolved-library`` of ``plan lock``.

The input is the model of the environment-to-be (every locked wheel placed where the
installer puts it) and each extension's DT_NEEDED, DT_RPATH and DT_RUNPATH, read from the
locked wheels (``whatif.linkage``). Pure: nothing is read here.

A needed soname is given when, in this order:
- the wheel's platform tag promises it from the system (``environment.policy``:
  auditwheel's policy of its manylinux or musllinux family), or it is the NVIDIA driver's,
  the interpreter's (``libpython``), or of a family of system libraries healthy wheels take
  beyond their policy (``policy.is_common_system_library``: X11, EGL, OpenSSL, ...);
- a locked wheel installs a file of that name in a directory of the extension's search path
  as glibc searches it for a module Python dlopens: its DT_RUNPATH, else its DT_RPATH, with
  ``$ORIGIN`` the module's directory in the environment-to-be.

Zero false alarms come first, so these are never an error:
- a locked wheel ships the name elsewhere (the framework's own loader, torch's preload, a
  runtime loader such as cuda-pathfinder's, or a module imported before may load it by
  path first, and the loader then takes it by its soname): nothing is said;
- the search path leaves the environment (an absolute directory, ``$LIB``, the working
  directory), the name is a CUDA toolkit library a machine may have installed (CuPy's
  wheels take the toolkit from the system), or the module searches no directory of the
  environment at all (no RPATH or RUNPATH: it expects its libraries from the system, as
  numba's optional ``tbbpool`` and ``omppool`` modules do): ``lock-cannot-tell``, info;
- a ``linux_*`` wheel, which promises nothing about the system: not judged.
What is left is an error, one per distribution and soname, naming its modules: a module
that looks for its libraries in the environment and finds this one nowhere there, or needs a
library auditwheel grafted (``libz-5f5b5e4a.so.1.2.13``) that no locked wheel ships.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment
from libdoctor.environment.policy import (
    is_common_system_library,
    is_driver_library,
    system_libraries,
)
from libdoctor.findings import DistRef, Finding, Severity
from libdoctor.loader.strings import expand_dst

__all__ = ["LockedExtension", "UnreadExtension", "unread_extensions", "unresolved_libraries"]

# The CUDA toolkit's libraries (cudart, cuBLAS, cuDNN, NCCL, NVRTC, ...), which a wheel may
# expect from a toolkit installed on the machine rather than from NVIDIA's wheels.
_CUDA_TOOLKIT = re.compile(
    r"^lib(cudart|cublas(Lt)?|cufftw?|curand|cusolver(Mg|Mp)?|cusparse(Lt)?|cudnn[a-z_]*"
    r"|nccl|nvrtc(-builtins)?|nvJitLink|nvToolsExt|cupti|nvperf_(host|target)|npp[a-z]*"
    r"|nvjpeg|cufile(_rdma)?|nvblas|nvfatbin|nvvm|cutensor[A-Za-z]*|cudss|nvshmem[a-z_]*"
    r"|cublasMp|cufftMp|cudla|nvptxcompiler[\w]*)(\.so|-)"
)
_INTERPRETER = re.compile(r"^libpython\d")
_MACHINE = "\0"  # what $LIB expands to here: the machine's, unknown before install
# auditwheel's name for a library it copied into a wheel (``libxcb-9065bb12.so.1.1.0``,
# ``libSDL2-2-d9872e50.0.so.0.3000.7``): such a library only ever comes from a wheel.
_GRAFTED = re.compile(r"-[0-9a-f]{8}(\.[0-9]+)*\.so(\.|$)")


@dataclass(frozen=True, slots=True)
class LockedExtension:
    """An extension module of a locked wheel, and what its dynamic section asks."""

    dist: str  # the key of its distribution in the environment-to-be
    wheel: str  # the wheel's file name
    path: str  # where it is installed in the environment-to-be
    needed: tuple[str, ...]  # DT_NEEDED, in order
    rpath: str | None
    runpath: str | None


@dataclass(frozen=True, slots=True)
class UnreadExtension:
    """An extension module whose dynamic section was not read, and why."""

    dist: str
    wheel: str
    path: str
    why: str
    capped: bool = False  # left out by the read caps (a summary line, not a finding)


@dataclass(frozen=True, slots=True)
class _Gap:
    """A soname no locked wheel gives an extension on its search path."""

    extension: LockedExtension
    soname: str
    searched: tuple[str, ...]  # the directories tried, in order
    doubt: str | None  # why it may be given all the same; None: it is not


def unresolved_libraries(env: Environment, extensions: Sequence[LockedExtension]) -> list[Finding]:
    """One error per distribution and soname its modules need that nothing gives; one info
    where something outside the lock may (a toolkit on the machine, a path outside it)."""
    shipped = functools.cache(lambda: _shipped(env.claims))  # only when a name is not found
    errors: dict[tuple[str, str], list[_Gap]] = {}  # (distribution, soname)
    doubts: dict[tuple[str, str], list[_Gap]] = {}  # (distribution, why)
    for extension in extensions:
        for gap in _gaps(env, extension, shipped):
            if gap.doubt is None:
                errors.setdefault((extension.dist, gap.soname), []).append(gap)
            else:
                doubts.setdefault((extension.dist, gap.doubt), []).append(gap)
    dists = {d.key: d for d in env.distributions}
    found = [_error(env, dists[d], g) for (d, _), g in sorted(errors.items()) if d in dists]
    found += [_doubt(env, dists[d], g) for (d, _), g in sorted(doubts.items()) if d in dists]
    return found


def unread_extensions(env: Environment, unread: Sequence[UnreadExtension]) -> list[Finding]:
    """One info per distribution with extension modules that could not be read (not an
    ELF object, a compression zip does not know); those the read caps left out are counted
    in the plan's summary instead."""
    by_dist: dict[str, list[UnreadExtension]] = {}
    for item in (u for u in unread if not u.capped):
        by_dist.setdefault(item.dist, []).append(item)
    dists = {d.key: d for d in env.distributions}
    findings = []
    for key, items in sorted(by_dist.items()):
        dist = dists.get(key)
        if dist is None:
            continue
        first = items[0]
        more = f" and {len(items) - 1} more" if len(items) > 1 else ""
        findings.append(Finding(
            "lock-cannot-tell", Severity.INFO,
            f"{dist.display}: which libraries {_site_path(env, first.path)}{more} need "
            f"cannot be told: {first.why}.",
            DistRef(dist.name, dist.version), (_site_path(env, first.path),),
            evidence={"wheel": first.wheel, "not_read": [
                {"extension": _site_path(env, i.path), "why": i.why} for i in items]},
        ))  # fmt: skip
    return findings


# --------------------------------------------------------------------------- resolving


def _shipped(paths: Iterable[str]) -> set[str]:
    """The file names the locked wheels install."""
    return {path.rpartition("/")[2] for path in paths}


def _gaps(
    env: Environment, extension: LockedExtension, shipped: Callable[[], set[str]]
) -> list[_Gap]:
    """What of EXTENSION's needs nothing gives, each with the doubt that keeps it from being
    an error, if any (the module docstring's rules, in its order)."""
    system = system_libraries(extension.wheel)
    if system is None:
        return []
    searched, outside = _search_path(env, extension)
    gaps = []
    for soname in dict.fromkeys(extension.needed):
        grafted = _GRAFTED.search(soname) is not None
        if "/" in soname or soname in system or (not grafted and _given_anyway(soname)):
            continue
        if any(os.path.join(d, soname) in env.claims for d in searched):
            continue
        if _shipped_elsewhere(soname, shipped()):
            continue  # may be loaded by path first: never an error (module docstring)
        doubt = None
        if grafted:
            pass  # a wheel's own copy, which no locked wheel ships: nothing else gives it
        elif outside:
            doubt = f"its search path leaves the environment ({', '.join(outside)})"
        elif _CUDA_TOOLKIT.match(soname):
            doubt = "the CUDA toolkit's, which a machine may have installed"
        elif not searched:
            doubt = (
                "with no RPATH or RUNPATH into the environment it takes its libraries from "
                "the system, which its platform tag does not promise to have"
            )
        gaps.append(_Gap(extension, soname, searched, doubt))
    return gaps


def _given_anyway(soname: str) -> bool:
    return (
        is_driver_library(soname)
        or is_common_system_library(soname)
        or _INTERPRETER.match(soname) is not None
    )


def _shipped_elsewhere(soname: str, shipped: set[str]) -> bool:
    """A locked wheel ships SONAME, or a file named for it with more version (``.so.1.2``)."""
    return soname in shipped or any(name.startswith(soname + ".") for name in shipped)


def _search_path(env: Environment, extension: LockedExtension) -> tuple[tuple[str, ...], list[str]]:
    """The extension's own directories, as the loader expands them for a module Python
    dlopens (LOADER_SPEC §1.5): DT_RUNPATH if it has one, else DT_RPATH, split on ``:``,
    ``$ORIGIN`` its directory; and the elements that leave the environment-to-be (an
    absolute path outside it, the working directory, ``$LIB`` or ``$PLATFORM``, whose values
    are the machine's)."""
    raw = extension.runpath if extension.runpath is not None else extension.rpath
    origin = os.path.dirname(extension.path)
    prefix = env.target.prefix.rstrip("/") + "/"
    dirs: list[str] = []
    outside: list[str] = []
    for element in raw.split(":") if raw else ():
        value = expand_dst(element, origin=origin, lib=_MACHINE, platform=None)
        if not value or _MACHINE in value or not value.startswith("/"):
            outside.append(element or "(the working directory)")
            continue
        directory = os.path.normpath(value)
        if not (directory + "/").startswith(prefix):
            outside.append(element)
        elif directory not in dirs:
            dirs.append(directory)
    return tuple(dirs), outside


# --------------------------------------------------------------------------- the finding


def _site_path(env: Environment, path: str) -> str:
    for site in env.target.site_packages:
        if path.startswith(site.rstrip("/") + "/"):
            return path[len(site.rstrip("/")) + 1 :]
    return path


def _searched(env: Environment, gap: _Gap) -> str:
    extension = gap.extension
    kind, raw = ("RUNPATH", extension.runpath) if extension.runpath is not None else (
        "RPATH", extension.rpath)  # fmt: skip
    if not raw:
        return "it has no RPATH or RUNPATH"
    dirs = ", ".join(_site_path(env, d) + "/" for d in gap.searched)
    return f"searched {dirs}: its {kind} {raw}" if dirs else f"its {kind} is {raw}"


def _needed_by(env: Environment, gap: _Gap) -> dict[str, Any]:
    return {
        "extension": _site_path(env, gap.extension.path),
        "rpath": gap.extension.rpath,
        "runpath": gap.extension.runpath,
        "searched": [_site_path(env, d) for d in gap.searched],
    }


def _error(env: Environment, dist: Distribution, gaps: Sequence[_Gap]) -> Finding:
    """One soname the modules of DIST need, which nothing gives them."""
    first = gaps[0]
    soname = first.soname
    module = _site_path(env, first.extension.path)
    more = f" and {len(gaps) - 1} more of its modules" if len(gaps) > 1 else ""
    need = "need" if more else "needs"
    evidence = {
        "wheel": first.extension.wheel,
        "library": soname,
        "needed_by": [_needed_by(env, g) for g in gaps],
    }
    message = (
        f"{dist.display}: {module}{more} {need} {soname}, which no locked wheel ships and "
        f"the system libraries of its platform tag do not include ({_searched(env, first)}). "
        "Its import fails in the environment this lock installs."
    )
    paths = tuple(dict.fromkeys(_site_path(env, g.extension.path) for g in gaps))
    ref = DistRef(dist.name, dist.version)
    return Finding("lock-unresolved-library", Severity.ERROR, message, ref, paths, evidence)


def _doubt(env: Environment, dist: Distribution, gaps: Sequence[_Gap]) -> Finding:
    """The sonames the modules of DIST need from outside the lock, for one reason."""
    first = gaps[0]
    names = sorted({g.soname for g in gaps})
    modules = sorted({_site_path(env, g.extension.path) for g in gaps})
    listed = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    more = f" and {len(modules) - 1} more of its modules" if len(modules) > 1 else ""
    need = "need" if more else "needs"
    message = (
        f"{dist.display}: {modules[0]}{more} {need} {listed}, which no locked wheel ships; "
        f"{first.doubt}, so whether {'they load' if len(names) > 1 else 'it loads'} cannot "
        "be told."
    )
    evidence = {
        "wheel": first.extension.wheel,
        "libraries": names,
        "needed_by": [{**_needed_by(env, g), "library": g.soname} for g in gaps],
    }
    ref = DistRef(dist.name, dist.version)
    return Finding("lock-cannot-tell", Severity.INFO, message, ref, tuple(modules), evidence)
