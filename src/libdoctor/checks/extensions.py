"""Torch extension packages against the torch they load with: extension-cuda-mismatch,
extension-abi-mismatch.

An extension package (sgl-kernel, flash-attn, xformers, torchvision, vllm's ``_C``) is built
for one CUDA major and against one torch. Its modules need torch's libraries by soname
(``libtorch.so``, ``libc10.so``), which ``import torch`` loads first (``loader.imported``),
or which their RPATH finds in ``torch/lib``: that torch is the one it loads with.

- Its CUDA major is read from its modules' DT_NEEDED (``libcudart.so.12``, ``libnvrtc.so.12``,
  ``libcublas.so.12``: bytes first), else its version's local label (``+cu128``) or its name
  (``-cu12``, ``cuda12x``). Another major than torch's build is an error: its kernels need a
  runtime torch's process does not have.
- Its ABI: every global undefined symbol in torch's namespaces (``c10``, ``at``, ``torch``,
  ``caffe2``) or of torch's stable C ABI (``aoti_torch_*``, ``torch_*``) is held against
  the dynamic symbols torch's libraries export, as ``ldd -r``
  would, without running anything (``elf.dynsym``). One that none exports means it was
  built against another torch: its import fails with ``undefined symbol``.

No command is proven to repair either (the matching build lives on the project's own
index, under a version libdoctor cannot read offline), so each names both ways out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment, is_inside
from libdoctor.environment.paths import display
from libdoctor.findings import DistRef, Finding, Severity
from libdoctor.loader.extensions import Exports, LibraryAnalysis, module_name
from libdoctor.loader.model import Closure
from libdoctor.stack.cuda import soname_major
from libdoctor.stack.frameworks import FrameworkBuild, detect_frameworks, read_file

if TYPE_CHECKING:
    from libdoctor.checks.stack import StackAnalysis

__all__ = ["TORCH_SONAMES", "TORCH_SYMBOLS", "check_extensions", "fold_cuda_gaps"]

TORCH_SONAMES = re.compile(r"^lib(torch(_[a-z_]+)?|c10(_[a-z]+)?)\.so$")
"""torch's own libraries, as an extension names them in DT_NEEDED."""
TORCH_SYMBOLS = re.compile(r"^(?:_Z(?:T[VIST])?N?K?(?:3c10|2at|5torch|6caffe2)|aoti_torch_|torch_)")
"""Mangled names in torch's namespaces (c10::, at::, torch::, caffe2::; their vtables too),
and the C functions of torch's stable ABI (``aoti_torch_*``, ``torch_*``), which an
extension built on it (torchvision 0.29's ``_C_stable.so``) needs from torch as well: that
ABI holds for later torches only, and an older one lacks the newer functions."""
_LABEL = re.compile(r"\+cu(\d{2,3})\b|(?:-cu|cuda)(\d{2})x?\b")
_TORCH_REQ = re.compile(r"^torch\s*\(?\s*((?:[<>=!~]=?|===)\s*[^;)]+?)\s*\)?\s*$", re.I)
_CU_REQ = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d{2})\b", re.I)


@dataclass(slots=True)
class _Package:
    """One extension distribution's torch modules and what they say of their build."""

    dist: Distribution
    modules: list[Closure] = field(default_factory=list)
    cuda: dict[int, set[str]] = field(default_factory=dict)  # major -> evidence
    missing: dict[str, list[str]] = field(default_factory=dict)  # module -> symbols
    by_path: set[str] = field(default_factory=set)  # libraries torch.ops.load_library loads


def check_extensions(
    analysis: LibraryAnalysis, disk: Disk, stack: StackAnalysis | None = None
) -> list[Finding]:
    """STACK: the run's ``analyse_stack``, whose frameworks are read once a run."""
    env = analysis.env
    builds = stack.builds if stack is not None else detect_frameworks(env, read_file)
    torch = next((b for b in builds if b.framework == "torch"), None)
    if torch is None:
        return []
    packages = _torch_extensions(analysis, torch.dist)
    if not packages:
        return []
    libraries = _libraries_of(analysis, torch.dist)
    incoming = _incoming(torch)
    exports = Exports(libraries)
    findings: list[Finding] = []
    for package in packages.values():
        _read_build(package)
        major = incoming.cuda_major if incoming is not None else torch.cuda_major
        others = {m: why for m, why in package.cuda.items() if major is not None and m != major}
        if others:
            findings.append(_cuda_finding(env, package, torch, others, incoming))
        for closure in package.modules:
            lost = exports.unbound(closure, TORCH_SYMBOLS)
            if lost:
                package.missing[closure.root] = lost
        if package.missing:
            findings.append(_abi_finding(env, package, torch))
        elif incoming is not None and incoming.release != _release(torch.version):
            findings.append(_replaced_finding(env, package, torch, incoming))
    return findings


@dataclass(frozen=True, slots=True)
class _Incoming:
    """The torch that torch's metadata says, when its bytes on disk are another release's:
    a plan's after-state (the new wheel's RECORD over today's files), or a torch
    overwritten halfway."""

    version: str
    cuda_major: int | None
    evidence: str

    @property
    def release(self) -> str:
        return _release(self.version)


def _release(version: str) -> str:
    """major.minor: torch keeps its C++ ABI within a release's patch versions only."""
    return ".".join(version.split("+", 1)[0].split(".")[:2])


def _incoming(torch: FrameworkBuild) -> _Incoming | None:
    meta = torch.dist.version
    if meta.split("+", 1)[0] == torch.version.split("+", 1)[0]:
        return None
    match = _LABEL.search(meta)
    if match is not None:
        digits = match.group(1) or match.group(2)
        return _Incoming(meta, int(digits[:2]), f"its version {meta}")
    majors = {int(m[1]) for text in torch.dist.requires_dist if (m := _CU_REQ.search(text))}
    if len(majors) == 1:
        major = majors.pop()
        return _Incoming(meta, major, f"it requires nvidia-*-cu{major} packages")
    return _Incoming(meta, None, "")


def fold_cuda_gaps(findings: list[Finding]) -> list[Finding]:
    """One cause, named once: an ``unresolved-library`` of the extension's CUDA major
    (``libcudart.so.12`` for a CUDA 12 build beside a CUDA 13 torch) needed only by the
    modules of a mismatched extension is part of its ``extension-cuda-mismatch``."""
    mismatches = [f for f in findings if f.code == "extension-cuda-mismatch"]
    if not mismatches:
        return findings
    folded: dict[int, list[str]] = {}
    kept: list[Finding] = []
    for finding in findings:
        home = next((m for m in mismatches if _explains(m, finding)), None)
        if home is None:
            kept.append(finding)
        else:
            folded.setdefault(id(home), []).append(str(finding.evidence.get("library")))
    out = []
    for finding in kept:
        names = folded.get(id(finding))
        if names:
            evidence = {**finding.evidence, "not_found": sorted(names)}
            message = (
                finding.message
                + f" Its CUDA {finding.evidence['major']} libraries are not installed either: "
                + ", ".join(sorted(names))
                + "."
            )
            finding = replace(finding, message=message, evidence=evidence)
        out.append(finding)
    return out


def _explains(mismatch: Finding, finding: Finding) -> bool:
    if finding.code != "unresolved-library":
        return False
    major = soname_major(str(finding.evidence.get("library", "")))
    return major == mismatch.evidence.get("major") and set(finding.paths) <= set(mismatch.paths)


def _torch_extensions(analysis: LibraryAnalysis, torch: Distribution) -> dict[str, _Package]:
    """Extension modules of other distributions that need torch's libraries, by owner; and
    their libraries loaded by path (``torch.ops.load_library``: torchvision's ``_C.so``,
    torchaudio's ``libtorchaudio.so``, fbgemm-gpu's, torchcodec's), which no module's
    DT_NEEDED reaches: they hold torch's symbols the same way."""
    env = analysis.env
    out: dict[str, _Package] = {}
    modules = {c.root for c in analysis.modules}
    for closure in analysis.closures():
        if closure.root_error or not closure.loaded:
            continue
        root = closure.loaded[0]
        if not any(TORCH_SONAMES.match(n) for n in root.needed):
            continue
        owners = env.owners(os.path.normpath(closure.root))
        if not owners or owners[0].metadata_dir == torch.metadata_dir:
            continue
        dist = owners[0]
        package = out.setdefault(dist.metadata_dir, _Package(dist))
        package.modules.append(closure)
        if closure.root not in modules:
            package.by_path.add(closure.root)
    return out


def _libraries_of(analysis: LibraryAnalysis, torch: Distribution) -> list[str]:
    """The shared libraries TORCH's RECORD claims: what its symbols are held against."""
    env = analysis.env
    claimed = [
        path
        for path in analysis.natives
        if any(c.dist.metadata_dir == torch.metadata_dir for c in env.claims.get(path, ()))
    ]
    return [p for p in claimed if ".so" in os.path.basename(p)]


def _read_build(package: _Package) -> None:
    """The CUDA majors the package's modules are built for: DT_NEEDED first, then labels."""
    for closure in package.modules:
        for name in closure.loaded[0].needed:
            major = soname_major(name)
            if major is not None:
                package.cuda.setdefault(major, set()).add(f"needs {name}")
    if package.cuda:
        return
    text = f"{package.dist.name} {package.dist.version}"
    match = _LABEL.search(text)
    if match is not None:
        digits = match.group(1) or match.group(2)
        major = int(digits[:2]) if len(digits) == 3 else int(digits)
        package.cuda.setdefault(major, set()).add(f"its version or name says CUDA {major}")


def _modules(env: Environment, closures: Iterable[str]) -> list[str]:
    return sorted(module_name(c, env.target.site_packages) for c in closures)


def _first_load(env: Environment, package: _Package, roots: Iterable[str]) -> str:
    """How the first of ROOTS comes into the process, for a message: a module's import
    (modules first), else a library's load by path (``torch.ops.load_library``)."""
    sites = env.target.site_packages

    def order(root: str) -> tuple[bool, str]:
        return root in package.by_path, module_name(root, sites)

    root = min(roots, key=order)
    if root in package.by_path:
        site = next((s for s in sites if is_inside(root, s)), os.path.dirname(root))
        return f"loading {display(os.path.relpath(root, site))} (torch.ops.load_library)"
    return f"import {module_name(root, sites)}"


def _needing(package: _Package, major: int) -> list[str]:
    """The package's modules that need a library of CUDA MAJOR (all, when none names one:
    the label said it)."""
    roots = [
        c.root for c in package.modules if any(soname_major(n) == major for n in c.loaded[0].needed)
    ]
    return roots or [c.root for c in package.modules]


def _built_for(dist: Distribution) -> str:
    """The torch the extension was built for, as far as its metadata says (``torch==2.9.1``,
    ``torch>=2.14.0``)."""
    for text in dist.requires_dist:
        match = _TORCH_REQ.match(text)
        if match is not None:
            return f"the torch it was built for (its requirement: torch{match.group(1)})"
    return "the torch it was built for"


def _cuda_finding(
    env: Environment,
    package: _Package,
    torch: FrameworkBuild,
    others: Mapping[int, set[str]],
    incoming: _Incoming | None,
) -> Finding:
    dist = package.dist
    major = min(others)
    why = ", ".join(sorted(others[major]))
    modules = _modules(env, (c.root for c in package.modules))
    theirs = incoming.cuda_major if incoming is not None else torch.cuda_major
    which = (
        f"torch {incoming.version}, which would replace {torch.display}, is built for CUDA "
        f"{theirs} ({incoming.evidence})"
        if incoming is not None
        else f"{torch.display}, the torch it loads with, is built for CUDA {theirs}"
    )
    return Finding(
        code="extension-cuda-mismatch",
        severity=Severity.ERROR,
        message=(
            f"{dist.display} is built for CUDA {major} ({why}), but {which}: "
            f"{_first_load(env, package, _needing(package, major))} needs a CUDA "
            f"{major} runtime torch's process does not have. Install "
            f"{dist.name}'s build for CUDA {theirs}, or a torch built for CUDA {major}."
        ),
        distribution=DistRef(dist.name, dist.version),
        paths=tuple(c.root for c in package.modules),
        evidence={
            "extension": {"name": dist.name, "version": dist.version},
            "extension_cuda": {str(m): sorted(w) for m, w in package.cuda.items()},
            "major": major,
            "torch": {"version": torch.version, "cuda": torch.cuda, "read_from": torch.source},
            "modules": modules,
            "fix_note": "no command is proven: the matching build is on the project's index",
        },
    )


def _replaced_finding(
    env: Environment, package: _Package, torch: FrameworkBuild, incoming: _Incoming
) -> Finding:
    dist = package.dist
    modules = _modules(env, (c.root for c in package.modules))
    return Finding(
        code="extension-abi-mismatch",
        severity=Severity.ERROR,
        message=(
            f"torch {incoming.version} would replace torch {torch.version}, against which "
            f"{dist.display} is built (every torch symbol it needs is exported by that one): "
            f"torch's C++ ABI changes between releases, and "
            f"{_first_load(env, package, (c.root for c in package.modules))} would fail "
            f"with 'undefined symbol'. Keep torch {_release(torch.version)}.*, or install "
            f"{dist.name}'s build for torch {incoming.release}."
        ),
        distribution=DistRef(dist.name, dist.version),
        paths=tuple(c.root for c in package.modules),
        evidence={
            "extension": {"name": dist.name, "version": dist.version},
            "built_against": torch.version,
            "incoming_torch": incoming.version,
            "modules": modules,
            "how": "the release torch's metadata names differs from the bytes it replaces",
        },
    )


def _abi_finding(env: Environment, package: _Package, torch: FrameworkBuild) -> Finding:
    dist = package.dist
    symbols = sorted({s for found in package.missing.values() for s in found})
    modules = _modules(env, package.missing)
    return Finding(
        code="extension-abi-mismatch",
        severity=Severity.ERROR,
        message=(
            f"{dist.display} needs {len(symbols)} symbol(s) of torch that {torch.dist.display} "
            f"does not export (e.g. {symbols[0]}): it was built against another torch, and "
            f"{_first_load(env, package, package.missing)} fails with 'undefined symbol'"
            + (f" (and {len(modules) - 1} more module(s))" if len(modules) > 1 else "")
            + f". Install {dist.name}'s build for torch {torch.dist.version}, or "
            f"{_built_for(dist)}."
        ),
        distribution=DistRef(dist.name, dist.version),
        paths=tuple(sorted(package.missing)),
        evidence={
            "extension": {"name": dist.name, "version": dist.version},
            "torch": {"name": torch.dist.name, "version": torch.dist.version},
            "modules": modules,
            "missing": {
                display(module): names[:20] for module, names in sorted(package.missing.items())
            },
            "missing_count": len(symbols),
            "how": "undefined dynamic symbols held against torch's libraries' .dynsym",
        },
    )
