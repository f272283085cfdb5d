"""Stack truth: frameworks, their CUDA, their pins, and the bytes they will really load.

Codes: cuda-mixed-major, pin-mismatch, foreign-bytes, model-unknown.

- ``cuda-mixed-major``: CUDA packages (nvidia-*, cuda-toolkit, ...) for a CUDA major no
  installed framework is built for, grouped per major, with who requires each (through the
  extras they are installed with too: ``tensorflow[and-cuda]``); or frameworks
  built for different majors. The fix uninstalls the packages nothing else requires and then
  reinstalls every distribution that the uninstall damages (pip deletes every RECORD path,
  the ones another distribution also claims included).
- ``pin-mismatch``: a framework's exact pin (``==``), direct or through a metapackage's extra,
  that the installed version does not satisfy, or whose package is missing.
- ``foreign-bytes``: a library a framework will load (its extension modules resolved by the
  loader emulation, after torch's preload when the preload model applies) that a pinned
  distribution ships, but whose bytes on disk are not that distribution's: they are another
  distribution's (which one and its version) or nobody's. Size decides when sizes differ;
  hashes only with ``--deep`` (same size without digests counts as the same bytes). Libraries
  loaded from outside the environment are ``shadowed-library``'s business, not this one's.
- ``model-unknown``: a CUDA torch whose ``__init__.py`` matches no preload model.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from libdoctor.checks.verdict import Digests, judge
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Claim, Environment, is_inside
from libdoctor.environment.paths import display, is_native
from libdoctor.environment.requirements import Pin, RequirementIndex, Requirers
from libdoctor.environment.rooted import Rooted
from libdoctor.external.installers import install_like, reinstall, removal
from libdoctor.findings import DistRef, Finding, Fix, Severity
from libdoctor.stack.cuda import CudaPackage, cuda_packages
from libdoctor.stack.frameworks import FrameworkBuild, Reader, detect_frameworks, env_reader
from libdoctor.stack.preload import PreloadStep, TorchStart, replay_preloads, torch_extension
from libdoctor.stack.torchsource import ModelChoice
from libdoctor.stack.torchversions import MODELS

if TYPE_CHECKING:
    from libdoctor.loader.extensions import LibraryAnalysis
    from libdoctor.loader.model import Closure, Resolution

__all__ = ["StackAnalysis", "analyse_stack", "check_stack", "removal_fix"]


def _ref(dist: Distribution) -> DistRef:
    return DistRef(dist.name, dist.version)


def _names(dists: Iterable[Distribution]) -> list[str]:
    return sorted({d.name for d in dists})


# --------------------------------------------------------------------------- shared facts


@dataclass(frozen=True, slots=True)
class StackAnalysis:
    """What the stack checks (and ``libdoctor probe``) know about the environment, read
    once a run: the checks judge these values."""

    builds: tuple[FrameworkBuild, ...]
    requirements: RequirementIndex
    choices: dict[str, ModelChoice]  # torch metadata_dir -> preload model choice
    starts: dict[str, TorchStart]  # torch metadata_dir -> replayed start (with a loader)
    cuda: tuple[CudaPackage, ...]  # every CUDA package, when a framework is built for CUDA
    cuda_requirers: Mapping[str, Requirers]  # CUDA package metadata_dir -> who requires it
    pins: Mapping[str, tuple[Pin, ...]]  # framework metadata_dir -> its exact pins


def analyse_stack(
    env: Environment,
    disk: Disk,
    analysis: LibraryAnalysis | None = None,
    reader: Reader | None = None,
    requirements: RequirementIndex | None = None,
) -> StackAnalysis:
    """REQUIREMENTS: the environment's index, when the caller shares one between checks.
    READER: the files (``env_reader``: in the system the environment is read in)."""
    # The stack's own files first (frameworks, CUDA packages, torch's preload), then what
    # the requirements say about them.
    reader = env_reader(env) if reader is None else reader
    builds = tuple(detect_frameworks(env, reader))
    cuda = tuple(cuda_packages(env)) if any(b.cuda_major is not None for b in builds) else ()
    sys_path = [site.path for site in env.target.site_dirs]
    start = (analysis.loader, analysis.process) if analysis is not None else None
    choices, starts = replay_preloads(builds, reader, sys_path, disk, start)
    requirements = RequirementIndex(env) if requirements is None else requirements
    cuda_requirers = {p.dist.metadata_dir: requirements.requirers(p.dist) for p in cuda}
    pins = {b.dist.metadata_dir: tuple(requirements.pins(b.dist)) for b in builds}
    return StackAnalysis(builds, requirements, choices, starts, cuda, cuda_requirers, pins)


def check_stack(
    env: Environment,
    disk: Disk,
    digests: Digests | Callable[[], Digests | None] | None = None,
    analysis: LibraryAnalysis | None = None,
    *,
    reader: Reader | None = None,
    requirements: RequirementIndex | None = None,
    stack: StackAnalysis | None = None,
) -> list[Finding]:
    """All stack findings. Without ANALYSIS (no loader context) foreign-bytes is skipped.

    DIGESTS may be a function, called only if foreign-bytes needs them (last, so that work
    done in a forked child overlaps with the hashing that produces them). REQUIREMENTS: the
    environment's index, shared with the requirement checks (each line parsed once). STACK:
    ``analyse_stack`` of these, when the caller shares it with the loader checks (torch's
    preload replayed once a run).
    """
    if stack is None:
        stack = analyse_stack(env, disk, analysis, reader, requirements)
    if not stack.builds:
        return []
    findings = _mixed_major(env, stack)
    findings += _pin_mismatch(env, stack)
    findings += _model_unknown(stack)
    if analysis is not None:
        if callable(digests):
            digests = digests()
        findings += _foreign_bytes(env, disk, digests, analysis, stack)
    return findings


# --------------------------------------------------------------------------- fixes


def removal_fix(env: Environment, removed: Sequence[Distribution], note: str = "") -> Fix | None:
    """Uninstall REMOVED; then reinstall each remaining distribution the uninstall damages.

    pip deletes every path of a RECORD, also those another distribution claims: the
    ownership index says which distributions lose files, and they are reinstalled after.
    """
    removed = [d for d in removed if not d.external]
    if not removed:
        return None
    plan = removal(removed, env)
    if plan.damaged:
        names = _names(plan.damaged)
        text = (
            f"the uninstall deletes files that {', '.join(names)} also "
            f"{'claims' if len(names) == 1 else 'claim'}; the reinstall puts them back"
        )
    else:
        text = "the uninstall deletes no file another distribution claims"
    return Fix(plan.remedies, note=f"{note}; {text}" if note else text)


# --------------------------------------------------------------------------- cuda-mixed-major


def _mixed_major(env: Environment, stack: StackAnalysis) -> list[Finding]:
    builds = [b for b in stack.builds if b.cuda_major is not None]
    majors = sorted({b.cuda_major for b in builds if b.cuda_major is not None})
    if not majors:
        return []
    findings: list[Finding] = []
    if len(majors) > 1:
        findings.append(
            Finding(
                code="cuda-mixed-major",
                severity=Severity.WARNING,
                message=(
                    "Frameworks built for different CUDA majors share this environment: "
                    + ", ".join(b.display for b in builds)
                    + ". Their CUDA libraries are separate packages, but cuDNN, NCCL, "
                    "cuSPARSELt and NVSHMEM wheels of different majors install the same paths "
                    "and overwrite each other. Keep one CUDA major per environment."
                ),
                evidence={
                    "frameworks": [
                        {
                            "name": b.dist.name,
                            "version": b.version,
                            "cuda": b.cuda,
                            "source": b.source,
                        }
                        for b in builds
                    ]
                },
            )
        )
    framework_dirs = {b.dist.metadata_dir for b in stack.builds}
    groups: dict[int, list[CudaPackage]] = defaultdict(list)
    for package in stack.cuda:
        if package.major not in majors and package.dist.metadata_dir not in framework_dirs:
            groups[package.major].append(package)
    for major, packages in sorted(groups.items()):
        findings.append(_mixed_group(env, stack.cuda_requirers, builds, major, packages))
    return findings


def _removable(
    packages: Sequence[CudaPackage], requirers: Mapping[str, Requirers]
) -> list[Distribution]:
    """Members nothing outside the removal set requires (fixpoint)."""
    removable = {p.dist.metadata_dir for p in packages if not p.dist.external}
    changed = True
    while changed:
        changed = False
        for key in list(removable):
            if any(r.metadata_dir not in removable for r in requirers[key].dists):
                removable.discard(key)
                changed = True
    return [p.dist for p in packages if p.dist.metadata_dir in removable]


def _mixed_group(
    env: Environment,
    requirers: Mapping[str, Requirers],
    builds: Sequence[FrameworkBuild],
    major: int,
    packages: Sequence[CudaPackage],
) -> Finding:
    removable = _removable(packages, requirers)
    removable_dirs = {d.metadata_dir for d in removable}
    frameworks = ", ".join(b.display for b in builds)
    parts = []
    for package in packages:
        users = requirers[package.dist.metadata_dir]
        who = f"required by {users.text}" if users.dists else "required by nothing: a leftover"
        parts.append(f"{package.dist.display} ({who})")
    n = len(packages)
    message = (
        f"{n} {'package is' if n == 1 else 'packages are'} for CUDA {major}, "
        f"which no framework here is built for ({frameworks}): {'; '.join(parts)}."
    )
    kept = [p.dist for p in packages if p.dist.metadata_dir not in removable_dirs]
    note = ""
    if kept:
        note = "keeps " + "; ".join(
            f"{d.name}, required by {requirers[d.metadata_dir].text}" for d in kept
        )
        message += " Uninstalling the leftovers is the fix; mind what else they share paths with."
    fix = removal_fix(env, removable, note) if removable else None
    return Finding(
        code="cuda-mixed-major",
        severity=Severity.WARNING,
        message=message,
        distribution=_ref(packages[0].dist) if n == 1 else None,
        evidence={
            "major": major,
            "framework_majors": sorted({b.cuda_major for b in builds if b.cuda_major}),
            "frameworks": [
                {"name": b.dist.name, "version": b.version, "cuda": b.cuda} for b in builds
            ],
            "packages": [
                {
                    "name": p.dist.name,
                    "version": p.dist.version,
                    "major": p.major,
                    "evidence": p.evidence,
                    "required_by": _names(requirers[p.dist.metadata_dir].dists),
                    "leftover": not requirers[p.dist.metadata_dir].dists,
                    "uninstalled_by_fix": p.dist.metadata_dir in removable_dirs,
                }
                for p in packages
            ],
        },
        fix=fix,
    )


# --------------------------------------------------------------------------- pin-mismatch


def _pin_mismatch(env: Environment, stack: StackAnalysis) -> list[Finding]:
    findings = []
    for build in stack.builds:
        for pin in stack.pins[build.dist.metadata_dir]:
            if pin.satisfied:
                continue
            findings.append(_pin_finding(env, build, pin))
    return findings


def _pin_text(pin: Pin) -> str:
    return pin.requirement + (f" through {pin.via}" if pin.via else "")


def _pin_finding(env: Environment, build: FrameworkBuild, pin: Pin) -> Finding:
    installed = pin.installed[0] if pin.installed else None
    if installed is None:
        state = "it is not installed"
    else:
        state = f"{', '.join(d.version for d in pin.installed)} is installed"
    message = (
        f"{build.dist.name} {build.version} pins {_pin_text(pin)}, but {state}. "
        "pip check does not look at pins reached through extras, and a mismatched CUDA "
        "library loads without a word until a symbol or a kernel is missing."
    )
    fix = Fix(
        (install_like(pin.requirement, installed or build.dist, env.target, deps=False),),
        note=f"installs the version {build.dist.name} was built against",
    )
    return Finding(
        code="pin-mismatch",
        severity=Severity.ERROR,
        message=message,
        distribution=_ref(installed) if installed else None,
        evidence={
            "framework": {"name": build.dist.name, "version": build.version},
            "pin": pin.requirement,
            "via": pin.via,
            "installed": [d.version for d in pin.installed],
        },
        fix=fix,
    )


# --------------------------------------------------------------------------- model-unknown


def _model_unknown(stack: StackAnalysis) -> list[Finding]:
    findings = []
    for build in stack.builds:
        choice = stack.choices.get(build.dist.metadata_dir)
        if choice is None or choice.model is not None:
            continue
        findings.append(
            Finding(
                code="model-unknown",
                severity=Severity.INFO,
                message=(
                    f"{build.dist.name} {build.version}: {choice.reason}. libdoctor does not "
                    "guess what this torch preloads from nvidia/*/lib before importing "
                    "torch._C; library findings for torch are computed without it."
                ),
                distribution=_ref(build.dist),
                paths=(choice.init_path,),
                evidence={
                    "reason": choice.reason,
                    "known_models": [
                        {"id": m.id, "versions": m.versions, "verified_on": list(m.verified_on)}
                        for m in MODELS
                    ],
                    **({"text_matches": choice.matches_text} if choice.matches_text else {}),
                },
            )
        )
    return findings


# --------------------------------------------------------------------------- foreign-bytes


@dataclass(frozen=True, slots=True)
class _Load:
    """One library a framework loads: where, under which names, and how it was found."""

    path: str  # normalised
    names: tuple[str, ...]
    how: str
    how_evidence: dict[str, Any]


def framework_loads(
    env: Environment, analysis: LibraryAnalysis, stack: StackAnalysis, build: FrameworkBuild
) -> list[_Load]:
    """Every library BUILD's extension modules load, as the emulation (and preload) says."""
    loads: list[_Load] = []
    start = stack.starts.get(build.dist.metadata_dir)
    closures: list[Closure] = []
    preloaded = start.loaded_steps if start is not None else {}
    if start is not None:
        for step in start.steps:
            if step.outcome == "loaded" and step.closure is not None and step.hits:
                closures.append(step.closure)
        closures += [c for c in start.attempts if c.ok]
        extension = torch_extension(build.dist, start.model)
        if extension is not None:
            closures.append(analysis.loader.import_extension(start.process, extension))
    else:
        closures = [
            c for c in analysis.modules if analysis.module_dists.get(c.root) == build.dist.key
        ]
    for closure in closures:
        objects = {o.path: o for o in (*closure.loaded, *closure.search_list)}
        for res in closure.resolutions:
            if res.status != "found" or res.path is None:
                continue
            obj = objects.get(res.path)
            names = tuple(
                dict.fromkeys(
                    n
                    for n in (
                        os.path.basename(res.expanded),
                        obj.soname if obj is not None else None,
                        os.path.basename(res.path),
                    )
                    if n
                )
            )
            how, evidence = _how(res, preloaded.get(res.path))
            loads.append(_Load(os.path.normpath(res.path), names, how, evidence))
    return loads


def _how(res: Resolution, step: PreloadStep | None) -> tuple[str, dict[str, Any]]:
    """How RES was found: by torch's preload (STEP, the one that loaded it), else the loader."""
    if step is not None:
        hits = [display(h) for h in step.hits]
        text = (
            f"preloaded by torch/__init__.py: first hit of {step.pattern} "
            f"for folder {step.folder!r} under {display(step.entry or '')}"
        )
        first_dir = os.path.dirname(step.hits[0])
        if sum(os.path.dirname(h) == first_dir for h in step.hits) > 1:
            text += f" ({len(step.hits)} hits: the choice follows directory order)"
        elif len(step.hits) > 1:
            others = ", ".join(display(os.path.dirname(h)) for h in step.hits[1:])
            text += f" ({len(step.hits)} hits: this directory is globbed before {others})"
        return text, {"preload": {"folder": step.folder, "glob": step.pattern, "hits": hits}}
    if res.via in ("rpath", "runpath") and res.via_owner:
        return f"{res.via} of {display(res.via_owner)}", {
            "via": res.via,
            "via_owner": display(res.via_owner),
            "requester": display(res.requester or ""),
        }
    return f"via {res.via}", {"via": res.via, "requester": display(res.requester or "")}


def _claims_at(env: Environment, path: str) -> tuple[Claim, ...]:
    claims = env.claims.get(path)
    if claims:
        return claims
    real = Rooted(env.target.root).realpath(path)
    return env.claims.get(real, ()) if real != path else ()


def _foreign_bytes(
    env: Environment,
    disk: Disk,
    digests: Digests | None,
    analysis: LibraryAnalysis,
    stack: StackAnalysis,
) -> list[Finding]:
    findings: list[Finding] = []
    roots = [site.path for site in env.target.site_dirs]
    for build in stack.builds:
        pins = [p for p in stack.pins[build.dist.metadata_dir] if p.satisfied]
        ships: dict[str, list[tuple[Pin, Distribution, str]]] = defaultdict(list)
        pinned: dict[str, tuple[Pin, Distribution]] = {}
        for pin in pins:
            for dist in pin.installed:
                pinned[dist.metadata_dir] = (pin, dist)
                for claim in env.claims_of(dist):
                    if is_native(claim.path):
                        ships[os.path.basename(claim.path)].append((pin, dist, claim.path))
        if not ships:
            continue
        seen: set[str] = set()
        for load in framework_loads(env, analysis, stack, build):
            if load.path in seen or not any(is_inside(load.path, r) for r in roots):
                continue
            expected = [s for name in load.names for s in ships.get(name, [])]
            if not expected:
                continue
            seen.add(load.path)
            finding = _judge_load(env, disk, digests, stack, build, load, expected, pinned)
            if finding is not None:
                findings.append(finding)
    return findings


def _judge_load(
    env: Environment,
    disk: Disk,
    digests: Digests | None,
    stack: StackAnalysis,
    build: FrameworkBuild,
    load: _Load,
    expected: Sequence[tuple[Pin, Distribution, str]],
    pinned: dict[str, tuple[Pin, Distribution]],
) -> Finding | None:
    judged = _whose_bytes(env, disk, digests, load.path, pinned)
    if judged is None:
        return None
    claims, owner, decided = judged
    pin, pinned_dist, _ = expected[0]
    name = load.names[0]
    wanted = sorted({p for _, _, p in expected})
    parts = _foreign_message(build, load, owner, decided, pin, pinned_dist, wanted)
    fix, note = _foreign_fix(env, stack, owner, pinned_dist, pinned)
    if note:
        parts.append(note)
    return Finding(
        code="foreign-bytes",
        severity=Severity.ERROR,
        message=" ".join(parts),
        distribution=_ref(pinned_dist),
        paths=(load.path,),
        evidence={
            "framework": {"name": build.dist.name, "version": build.version},
            "library": name,
            "loaded_path": display(load.path),
            "how": load.how,
            **load.how_evidence,
            "bytes_of": {"name": owner.name, "version": owner.version} if owner else None,
            "decided_by": decided,
            "claimed_by": [{"name": c.dist.name, "version": c.dist.version} for c in claims],
            "pinned": {
                "name": pinned_dist.name,
                "version": pinned_dist.version,
                "pin": pin.requirement,
                "via": pin.via,
                "ships": [display(p) for p in wanted],
            },
        },
        fix=fix,
    )


def _whose_bytes(
    env: Environment,
    disk: Disk,
    digests: Digests | None,
    path: str,
    pinned: dict[str, tuple[Pin, Distribution]],
) -> tuple[tuple[Claim, ...], Distribution | None, str] | None:
    """(claims on PATH, the claimant whose bytes it holds, decided by what); None when the
    bytes are a pinned distribution's, or cannot be judged."""
    state = disk.stat(path)
    if not state.is_file or state.error:
        return None  # gone: missing-files / unresolved-library say so
    claims = _claims_at(env, path)
    verdicts = [(c, judge(c, state, digests)) for c in claims]
    if any(v.matches and c.dist.metadata_dir in pinned for c, v in verdicts):
        return None
    if any(v.matches is None and c.dist.metadata_dir in pinned for c, v in verdicts):
        return None  # RECORD has neither size nor hash: cannot tell
    matching = [(c, v) for c, v in verdicts if v.matches]
    owner = matching[0][0].dist if matching else None
    decided = next((v.decided_by for _, v in verdicts if v.decided_by), None) or "size"
    return claims, owner, decided


def _foreign_message(
    build: FrameworkBuild,
    load: _Load,
    owner: Distribution | None,
    decided: str,
    pin: Pin,
    pinned_dist: Distribution,
    wanted: list[str],
) -> list[str]:
    parts = [
        f"{build.dist.name} {build.version} will load {load.names[0]} from {display(load.path)} "
        f"({load.how})."
    ]
    if owner is not None:
        parts.append(
            f"Those bytes are {owner.name} {owner.version}'s (by {decided}), not those of "
            f"{pinned_dist.name} {pinned_dist.version}, which {build.dist.name} pins "
            f"({_pin_text(pin)})."
        )
    else:
        parts.append(
            f"Those bytes match no installed distribution's "
            f"{'RECORD or conda-meta record' if pinned_dist.kind == 'conda' else 'RECORD'} "
            f"(by {decided}); "
            f"{build.dist.name} pins {_pin_text(pin)}."
        )
    if load.path not in wanted:
        parts.append(f"{pinned_dist.name} ships it at {', '.join(display(p) for p in wanted)}.")
    return parts


def _foreign_fix(
    env: Environment,
    stack: StackAnalysis,
    owner: Distribution | None,
    pinned_dist: Distribution,
    pinned: dict[str, tuple[Pin, Distribution]],
) -> tuple[Fix | None, str]:
    if owner is not None and owner.metadata_dir not in pinned and not owner.external:
        users = stack.requirements.requirers(owner)
        if not users.dists:
            fix = removal_fix(env, [owner], note=f"{owner.name} is required by nothing")
            return fix, f"{owner.name} is required by nothing: uninstalling it is the fix."
        note = f"{owner.name} stays: required by {users.text}"
        said = f"{owner.name} is required by {users.text}."
    else:
        note = said = ""
    if pinned_dist.external:
        return None, ""
    return Fix((reinstall(pinned_dist, env.target),), note=note), said
