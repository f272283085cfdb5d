"""``libdoctor probe``: import modules in the target interpreter and report what got loaded.

This is the one part of libdoctor that runs the target's code; the child process (its script,
launch, timeout and result) is ``probe_child.py``. Framework facts (``stack.FRAMEWORKS``) are
evaluated in the child, each in try/except, so a missing GPU never fails a probe; libraries those
calls map are reported apart.

The parent joins every mapped ELF file to its owner and RECORD (size; hash with ``deep``),
predicts the same load statically (the loader emulation, with torch's preload replayed) and
turns the differences into findings: ``import-failed``, ``duplicate-library``,
``loaded-outside-env``, ``loaded-foreign-bytes`` and ``static-runtime-mismatch``.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from libdoctor.checks.verdict import judge
from libdoctor.checks.wording import EXTERNAL_NOTE
from libdoctor.disk.stat import Disk
from libdoctor.elf.dynamic import ElfFormatError, read_elf
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Claim, Environment, is_inside
from libdoctor.environment.paths import display
from libdoctor.external.installers import reinstall
from libdoctor.findings import DistRef, Finding, Fix, Severity
from libdoctor.loader.verify import ET_DYN, ET_EXEC
from libdoctor.probe.child import (
    ChildReport,
    MappedFile,
    signal_name,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "LoadedFile",
    "ModuleProbe",
    "analyse_probe",
    "default_modules",
]


# --------------------------------------------------------------------------- the analysis


@dataclass(frozen=True, slots=True)
class LoadedFile:
    """One ELF object mapped in the child after the import."""

    path: str
    soname: str | None
    owners: tuple[Distribution, ...]
    bytes_of: tuple[Distribution, ...]  # owners whose RECORD matches the bytes on disk
    decided_by: str | None  # "size" | "hash" | None
    inside_env: bool
    deleted: bool
    predicted: tuple[str, ...] = ()  # statically predicted real paths for this name

    @property
    def name(self) -> str:
        return self.soname or os.path.basename(self.path)

    @property
    def record_match(self) -> bool | None:
        if not self.owners or self.decided_by is None:
            return None
        return bool(self.bytes_of)


@dataclass(frozen=True, slots=True)
class ModuleProbe:
    module: str
    child: ChildReport
    loaded: tuple[LoadedFile, ...]
    facts_loaded: tuple[LoadedFile, ...]
    findings: tuple[Finding, ...]
    prediction: Mapping[str, Any] = field(default_factory=dict)


Prediction = dict[str, dict[str, str]]
"""name (soname / request basename) -> {real path -> how it was predicted}."""

StaticFindings = Callable[[], Sequence[Finding]]
Predictor = Callable[[str, Sequence[str]], Prediction]
"""(module, the extension modules the process mapped) -> what the emulation predicts."""


def default_modules(env: Environment) -> list[str]:
    """The import names of the frameworks installed in ENV, once each: their CUDA builds
    (``detect_frameworks``) and the plain distribution of each framework's module (a CPU
    ``jax`` or ``onnxruntime`` is a framework too: "no framework found" was false there)."""
    from libdoctor.stack.frameworks import FRAMEWORKS, detect_frameworks

    modules = [build.module for build in detect_frameworks(env)]
    installed = {dist.key for dist in env.distributions}
    modules += [spec.module for spec in FRAMEWORKS if spec.module in installed]
    return list(dict.fromkeys(modules))


def facts_for(module: str) -> tuple[tuple[str, str], ...]:
    from libdoctor.stack.frameworks import FRAMEWORKS

    root = module.split(".")[0]
    spec = next((s for s in FRAMEWORKS if s.module == root), None)
    return spec.facts if spec is not None and root == module else ()


class Owners:
    """Claims by real path: /proc/self/maps shows real paths, RECORD textual ones."""

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._real: dict[str, tuple[Claim, ...]] | None = None
        self._by_name: dict[str, list[str]] | None = None

    def claims(self, real: str) -> tuple[Claim, ...]:
        direct = self._env.claims.get(real)
        if direct:
            return direct
        if self._real is None:
            index: dict[str, list[Claim]] = defaultdict(list)
            for path, claims in self._env.claims.items():
                if ".so" in os.path.basename(path):
                    index[os.path.realpath(path)].extend(claims)
            self._real = {k: tuple(v) for k, v in index.items()}
        return self._real.get(real, ())

    def shipped(self, name: str) -> list[str]:
        """Claimed paths whose file name is NAME."""
        if self._by_name is None:
            by_name: dict[str, list[str]] = defaultdict(list)
            for path in self._env.claims:
                by_name[os.path.basename(path)].append(path)
            self._by_name = by_name
        return self._by_name.get(name, [])


def _soname(path: str) -> tuple[bool, str | None]:
    """(is an ELF object a process maps: a shared object, a PIE, or a non-PIE main program
    such as Debian's python3.11, its DT_SONAME)."""
    try:
        info = read_elf(path)
    except (ElfFormatError, OSError):
        return False, None
    return info.elf_type in (ET_DYN, ET_EXEC), info.soname


def _env_roots(env: Environment) -> list[str]:
    roots = {os.path.realpath(env.target.prefix)}
    roots.update(os.path.realpath(site.path) for site in env.target.site_dirs)
    return sorted(roots)


def _digests(claims: Sequence[Claim], deep: bool) -> Mapping[tuple[str, str], str | None] | None:
    if not deep:
        return None
    from libdoctor.digests import spell_hash
    from libdoctor.disk.hashing import hash_file

    digests: dict[tuple[str, str], str | None] = {}
    for claim in claims:
        algorithm = claim.entry.algorithm
        if algorithm is None or (claim.path, algorithm) in digests:
            continue
        try:
            digests[(claim.path, algorithm)] = spell_hash(
                algorithm, hash_file(claim.path, algorithm)
            )
        except (OSError, ValueError):
            digests[(claim.path, algorithm)] = None
    return digests


def describe_loaded(
    env: Environment,
    disk: Disk,
    mapped: Sequence[MappedFile],
    *,
    deep: bool,
    owners: Owners | None = None,
) -> list[LoadedFile]:
    owners = owners or Owners(env)
    roots = _env_roots(env)
    loaded = []
    for entry in mapped:
        is_object, soname = _soname(entry.path)
        if not is_object:
            continue
        claims = owners.claims(entry.path)
        digests = _digests(claims, deep)
        bytes_of: list[Distribution] = []
        decided: str | None = None
        for claim in claims:
            state = disk.stat(claim.path)
            if not state.is_file:
                continue
            verdict = judge(claim, state, digests)
            decided = verdict.decided_by or decided
            if verdict.matches:
                bytes_of.append(claim.dist)
        loaded.append(
            LoadedFile(
                path=entry.path,
                soname=soname,
                owners=tuple(dict.fromkeys(c.dist for c in claims)),
                bytes_of=tuple(dict.fromkeys(bytes_of)),
                decided_by=decided,
                inside_env=any(is_inside(entry.path, r) for r in roots),
                deleted=entry.deleted,
            )
        )
    return loaded


def _ref(dist: Distribution) -> DistRef:
    return DistRef(dist.name, dist.version)


def _owner_list(dists: Sequence[Distribution]) -> list[dict[str, str]]:
    return [{"name": d.name, "version": d.version} for d in dists]


_MISSING_SONAME = re.compile(r"([^\s:'\"]+): cannot open shared object file")
_EXPLAINS_MISSING = ("unresolved-library", "missing-files", "elf-invalid", "driver-library-absent")
_EXPLAINS_SYMBOL = ("foreign-bytes", "shared-path", "cuda-mixed-major", "pin-mismatch")


def explain_failure(message: str, findings: Sequence[Finding]) -> list[Finding]:
    """The static findings that explain an import error, best first."""
    match = _MISSING_SONAME.search(message)
    if match:
        name = os.path.basename(match[1])
        hits = []
        for finding in findings:
            if finding.code not in _EXPLAINS_MISSING:
                continue
            if (
                finding.evidence.get("library") == name
                or any(os.path.basename(p) == name for p in finding.paths)
                or name in finding.message
            ):
                hits.append(finding)
        hits.sort(key=lambda f: _EXPLAINS_MISSING.index(f.code))
        return hits
    if "undefined symbol" in message or "version `" in message:
        return [f for f in findings if f.code in _EXPLAINS_SYMBOL]
    return []


def _import_failed(probe: ChildReport, static: StaticFindings | None, python: str) -> Finding:
    text = probe.error_message or ""
    evidence: dict[str, Any] = {"module": probe.module, "python": python}
    if probe.timed_out:
        evidence["timeout"] = probe.seconds
        message = text
    else:
        message = f"import {probe.module} failed: {probe.error_type}: {text}"
        evidence["exception"] = {"type": probe.error_type, "message": text}
        if probe.traceback:
            evidence["traceback"] = probe.traceback.splitlines()[-12:]
    if probe.returncode is not None and probe.returncode < 0:
        evidence["signal"] = signal_name(probe.returncode)
    if probe.stderr_tail and not probe.ok and probe.error_type == "Crash":
        evidence["stderr"] = probe.stderr_tail.splitlines()[-12:]
    fix: Fix | None = None
    if static is not None and not probe.timed_out:
        explained = explain_failure(text, static())
        if explained:
            first = explained[0]
            message = message.rstrip(".") + f". Explained by {first.code}: {first.message}"
            evidence["explained_by"] = [
                {
                    "code": f.code,
                    "message": f.message,
                    **({"fix": f.fix.command} if f.fix else {}),
                }
                for f in explained
            ]
            fix = next((f.fix for f in explained if f.fix is not None), None)
        else:
            evidence["explained_by"] = []
            if _MISSING_SONAME.search(text):
                message = (
                    message.rstrip(".")
                    + "."
                    + (
                        " No static finding explains it: libdoctor predicted this load would work, "
                        "which is a libdoctor bug worth reporting (with this output in --json)."
                    )
                )
    return Finding(
        code="import-failed",
        severity=Severity.ERROR,
        message=message,
        evidence=evidence,
        fix=fix,
    )


def _duplicates(loaded: Sequence[LoadedFile]) -> list[Finding]:
    # By DT_SONAME only: objects without one (extension modules) are opened by path and
    # never matched by name, so two of them with one file name are two different modules.
    groups: dict[str, list[LoadedFile]] = defaultdict(list)
    for item in loaded:
        if item.soname:
            groups[item.soname].append(item)
    findings = []
    for name, items in sorted(groups.items()):
        if len({i.path for i in items}) < 2:
            continue
        listed = "; ".join(
            f"{display(i.path)} ({', '.join(d.display for d in i.owners) or 'no distribution'})"
            for i in items
        )
        findings.append(
            Finding(
                code="duplicate-library",
                severity=Severity.WARNING,
                message=(
                    f"{name} is loaded twice in one process, from {len(items)} files: {listed}. "
                    "Each copy has its own state; code bound to one sees the other's symbols "
                    "and data as strangers (the cuDNN SUBLIBRARY_VERSION_MISMATCH kind of bug)."
                ),
                paths=tuple(i.path for i in items),
                evidence={
                    "library": name,
                    "copies": [
                        {"path": display(i.path), "owners": _owner_list(i.owners)} for i in items
                    ],
                },
            )
        )
    return findings


def _outside(
    loaded: Sequence[LoadedFile], owners: Owners, environ: Mapping[str, str]
) -> list[Finding]:
    findings = []
    mapped = {_identity(i.path) for i in loaded} - {None}
    for item in loaded:
        # Without a DT_SONAME a file is matched only by path (an extension module such as
        # the stdlib's _csv and pyarrow's _csv share a basename, not an identity).
        if item.inside_env or item.soname is None:
            continue
        own = [p for p in owners.shipped(item.name) if p != item.path]
        if not own or any(_identity(p) in mapped for p in own):
            continue  # the env's copy is loaded too (by any path): duplicate-library's business
        dists = sorted({c.dist.display for p in own for c in owners.claims(p)})
        llp = environ.get("LD_LIBRARY_PATH")
        findings.append(
            Finding(
                code="loaded-outside-env",
                severity=Severity.WARNING,
                message=(
                    f"{item.name} was loaded from {display(item.path)}, outside the environment, "
                    f"although the environment ships its own ({', '.join(display(p) for p in own)}"
                    f"; {', '.join(dists)})." + (f" LD_LIBRARY_PATH is {llp!r}." if llp else "")
                ),
                paths=(item.path, *own),
                evidence={
                    "library": item.name,
                    "loaded": display(item.path),
                    "environment_copies": [display(p) for p in own],
                    "owners": dists,
                    "ld_library_path": llp,
                    "ld_preload": environ.get("LD_PRELOAD"),
                },
            )
        )
    return findings


def _identity(path: str) -> tuple[int, int] | None:
    """A file's (device, inode): the same file, whatever path (symlinked prefix, hard link)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _static_fix(static: StaticFindings | None, path: str) -> Fix | None:
    """The fix of the static foreign-bytes / shared-path finding about PATH, if any."""
    if static is None:
        return None
    findings = static()
    for code in ("foreign-bytes", "shared-path"):
        for finding in findings:
            if (
                finding.code == code
                and finding.fix is not None
                and any(os.path.realpath(p) == path for p in finding.paths)
            ):
                return finding.fix
    return None


def _foreign(
    env: Environment,
    loaded: Sequence[LoadedFile],
    pinned: Mapping[str, str],
    static: StaticFindings | None = None,
) -> list[Finding]:
    """Loaded files whose bytes are not their owner's (or not the pinned claimant's)."""
    findings = []
    for item in loaded:
        if not item.owners or item.decided_by is None:
            continue
        wanted = [d for d in item.owners if d.metadata_dir in pinned]
        if item.bytes_of and (not wanted or any(d in item.bytes_of for d in wanted)):
            continue
        target = wanted[0] if wanted else item.owners[0]
        if item.bytes_of:
            whose = ", ".join(d.display for d in item.bytes_of)
            detail = (
                f"its bytes are {whose}'s (by {item.decided_by}), not those of "
                f"{target.display}, which {pinned[target.metadata_dir]} pins"
            )
        else:
            detail = (
                f"its bytes match no RECORD (by {item.decided_by}) of "
                f"{', '.join(d.display for d in item.owners)}"
            )
        distro = all(d.external for d in item.owners)  # a distro patches and strips on purpose
        findings.append(
            Finding(
                code="loaded-foreign-bytes",
                severity=Severity.INFO if distro else Severity.ERROR,
                message=f"The process loaded {display(item.path)}, but {detail}."
                + (EXTERNAL_NOTE if distro else ""),
                distribution=_ref(target),
                paths=(item.path,),
                evidence={
                    "library": item.name,
                    "owners": _owner_list(item.owners),
                    "bytes_of": _owner_list(item.bytes_of),
                    "decided_by": item.decided_by,
                },
                fix=_static_fix(static, item.path)
                or (
                    None
                    if target.external
                    else Fix(
                        (reinstall(target, env.target),),
                        note=f"puts {target.name}'s bytes back",
                    )
                ),
            )
        )
    return findings


def _mismatches(
    module: str,
    loaded: Sequence[LoadedFile],
    prediction: Prediction,
    environ: Mapping[str, str],
) -> list[Finding]:
    """Names whose predicted file is not among the files the process mapped by that name.

    A second copy loaded by a runtime dlopen of a full path (ctypes) is no misprediction as
    long as the predicted copy is loaded too: that is duplicate-library's business.
    """
    from libdoctor.version import __version__

    by_name: dict[str, list[str]] = defaultdict(list)
    for item in loaded:
        by_name[item.name].append(item.path)
    mapped = {i.path for i in loaded}
    findings = []
    for name, expected in sorted(prediction.items()):
        if any(p in mapped for p in expected):
            continue
        findings.append(
            _mismatch(module, name, by_name.get(name, []), expected, environ, __version__)
        )
    return findings


def _mismatch(
    module: str,
    name: str,
    actual: Sequence[str],
    expected: Mapping[str, str],
    environ: Mapping[str, str],
    version: str,
) -> Finding:
    predicted = "; ".join(f"{display(p)} ({how})" for p, how in expected.items())
    got = ", ".join(display(p) for p in actual) if actual else "nothing by that name"
    report = (
        f"libdoctor {version}, probe {module}: {name} predicted {predicted}, loaded {got}; "
        f"LD_LIBRARY_PATH={environ.get('LD_LIBRARY_PATH', '')!r} "
        f"LD_PRELOAD={environ.get('LD_PRELOAD', '')!r}"
    )
    return Finding(
        code="static-runtime-mismatch",
        severity=Severity.WARNING,
        message=(
            f"The static emulation predicted {name} from {predicted}, but the process loaded "
            f"{got}. That is libdoctor's bug (or a load the files alone cannot show, such as "
            f"a dlopen by full path or LD_PRELOAD): please report it with this line: {report}"
        ),
        paths=(*actual, *expected),
        evidence={
            "library": name,
            "predicted": {display(p): how for p, how in expected.items()},
            "loaded": [display(p) for p in actual],
            "report": report,
        },
    )


def _loaded_though_unresolved(
    module: str, loaded: Sequence[LoadedFile], static: StaticFindings
) -> list[Finding]:
    """A file the process mapped that the static check says cannot load: the emulation (or
    a runtime loader it does not model) is wrong about it, and that is worth a report."""
    mapped = {i.path for i in loaded}
    findings = []
    for finding in static():
        if finding.code != "unresolved-library":
            continue
        loaded_anyway = [p for p in finding.paths if p in mapped]
        if not loaded_anyway:
            continue
        library = finding.evidence.get("library", "?")
        findings.append(
            Finding(
                code="static-runtime-mismatch",
                severity=Severity.WARNING,
                message=(
                    f"check says {library} cannot be found for "
                    f"{', '.join(display(p) for p in loaded_anyway)}, but importing {module} "
                    "loaded it: a load the files alone do not show (a package's own loader, a "
                    "preload) or libdoctor's bug; please report it."
                ),
                paths=tuple(loaded_anyway),
                evidence={"library": library, "static_message": finding.message},
            )
        )
    return findings


def analyse_probe(
    env: Environment,
    disk: Disk,
    child: ChildReport,
    *,
    python: str,
    deep: bool,
    environ: Mapping[str, str],
    static: StaticFindings | None = None,
    predictor: Predictor | None = None,
    pinned: Mapping[str, str] | None = None,
) -> ModuleProbe:
    """Findings for one child: what it loaded, joined to owners, RECORDs and the prediction.

    PINNED maps metadata dirs of pinned distributions to the framework that pins them.
    """
    owners = Owners(env)
    loaded = describe_loaded(env, disk, child.maps, deep=deep, owners=owners)
    facts_loaded = describe_loaded(env, disk, child.loaded_by_facts, deep=deep, owners=owners)
    findings: list[Finding] = []
    prediction: Prediction = {}
    if not child.ok:
        findings.append(_import_failed(child, static, python))
    findings += _duplicates(loaded)
    findings += _outside(loaded, owners, environ)
    findings += _foreign(env, loaded, pinned or {}, static)
    if child.ok and static is not None:
        findings += _loaded_though_unresolved(child.module, loaded, static)
    if child.ok and predictor is not None:
        prediction = predictor(child.module, [i.path for i in loaded if _is_module(i.path)])
        loaded = [
            replace(i, predicted=tuple(prediction[i.name])) if i.name in prediction else i
            for i in loaded
        ]
        findings += _mismatches(child.module, loaded, prediction, environ)
    return ModuleProbe(
        child.module, child, tuple(loaded), tuple(facts_loaded), tuple(findings), prediction
    )


def _is_module(path: str) -> bool:
    from libdoctor.loader.extensions import is_python_extension

    return is_python_extension(path)
