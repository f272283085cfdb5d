"""Findings: the data every check returns, and the stable registry of finding codes."""

from __future__ import annotations

import enum
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from libdoctor.remedy import Remedy, merge_reinstalls, remedy_of, to_plain
from libdoctor.remedy import argv as argv_of


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


Code = Literal[
    "missing-files",
    "shared-path",
    "shared-path-identical",
    "altered-files",
    "record-mismatch-upstream",
    "duplicate-distribution",
    "record-invalid",
    "untracked-library",
    "elf-invalid",
    "unresolved-library",
    "driver-library-absent",
    "optional-library-missing",
    "shadowed-library",
    "runtime-library-missing",
    "runtime-library-outside",
    "extension-cuda-mismatch",
    "extension-abi-mismatch",
    "cuda-mixed-major",
    "pin-mismatch",
    "foreign-bytes",
    "model-unknown",
    "requirement-missing",
    "requirement-conflict",
    "requirement-phantom",
    "requirement-invalid",
    "import-failed",
    "duplicate-library",
    "loaded-outside-env",
    "loaded-foreign-bytes",
    "static-runtime-mismatch",
    "lock-missing",
    "lock-version",
    "lock-extra",
    "lock-artifact",
    "lock-files",
    "lock-path-conflict",
    "lock-cuda-mixed-major",
    "lock-requirement-unmet",
    "lock-unresolved-library",
    "lock-cannot-tell",
    "stale-caches",
    "stale-cache-entry",
]
"""Every finding code: a stable contract, never renamed. ``CODES`` says what each means."""


@dataclass(frozen=True, slots=True)
class CodeInfo:
    """What a finding code means. Codes are a stable contract: never rename one."""

    code: Code
    summary: str
    shown_by_default: bool = True


_CODES: tuple[CodeInfo, ...] = (
    CodeInfo("missing-files", "files listed in RECORD do not exist"),
    CodeInfo("shared-path", "paths claimed by two or more distributions with different bytes"),
    CodeInfo(
        "shared-path-identical",
        "paths claimed by two or more distributions with identical bytes",
        shown_by_default=False,
    ),
    CodeInfo("altered-files", "file size or hash differs from RECORD"),
    CodeInfo(
        "record-mismatch-upstream",
        "a file differs from RECORD but is as installed: the wheel's own RECORD is wrong",
    ),
    CodeInfo("duplicate-distribution", "two metadata directories for one distribution"),
    CodeInfo("record-invalid", "RECORD missing, malformed, or naming paths outside the prefix"),
    CodeInfo("untracked-library", "a shared library in a package directory that no RECORD claims"),
    CodeInfo("elf-invalid", "a file that should be an ELF object cannot be parsed"),
    CodeInfo("unresolved-library", "a library an extension module needs cannot be found"),
    CodeInfo("driver-library-absent", "a library that comes with the NVIDIA driver is absent"),
    CodeInfo(
        "optional-library-missing",
        "a library needed only by files nothing in the environment loads is absent",
        shown_by_default=False,
    ),
    CodeInfo("shadowed-library", "a library resolved from outside the environment shadows its own"),
    CodeInfo(
        "runtime-library-missing",
        "a library another library loads at run time by name (dlopen) cannot be loaded",
    ),
    CodeInfo(
        "runtime-library-outside",
        "a library loaded at run time by name resolves outside the environment or to another "
        "CUDA major",
    ),
    CodeInfo(
        "extension-cuda-mismatch",
        "a torch extension package is built for another CUDA major than the torch it loads with",
    ),
    CodeInfo(
        "extension-abi-mismatch",
        "a torch extension needs symbols of torch that the installed torch does not export",
    ),
    CodeInfo("cuda-mixed-major", "CUDA packages for a CUDA major no installed framework uses"),
    CodeInfo("pin-mismatch", "a framework's exact pin is not what is installed"),
    CodeInfo("foreign-bytes", "a library a framework loads is not its pinned package's bytes"),
    CodeInfo("model-unknown", "torch's CUDA preload in this version is not modelled"),
    CodeInfo("requirement-missing", "a requirement of an installed distribution is not installed"),
    CodeInfo("requirement-conflict", "the installed version does not satisfy a requirement"),
    CodeInfo(
        "requirement-phantom",
        "a requirement is met in metadata only: every native library of the installed one is gone",
    ),
    CodeInfo("requirement-invalid", "a Requires-Dist line, or METADATA, that pip cannot read"),
    CodeInfo("import-failed", "probe: importing the module failed (or timed out)"),
    CodeInfo("duplicate-library", "probe: one soname loaded from two files in one process"),
    CodeInfo("loaded-outside-env", "probe: a library loaded from outside while the env ships it"),
    CodeInfo("loaded-foreign-bytes", "probe: a loaded file's bytes are not its owner's RECORD"),
    CodeInfo("static-runtime-mismatch", "probe: the process loaded another file than predicted"),
    CodeInfo("lock-missing", "verify: the lock asks for a package that is not installed"),
    CodeInfo("lock-version", "verify: a locked package is installed at another version"),
    CodeInfo("lock-extra", "verify: installed, but the lock does not ask for it here"),
    CodeInfo("lock-artifact", "verify: installed from another file than the lock's"),
    CodeInfo("lock-files", "verify: the locked version, but its files changed since"),
    CodeInfo("lock-path-conflict", "plan lock: two locked wheels install the same path"),
    CodeInfo(
        "lock-cuda-mixed-major",
        "plan lock: a framework built for one CUDA major beside CUDA wheels of another",
    ),
    CodeInfo(
        "lock-requirement-unmet", "plan lock: a locked wheel requires what the lock does not hold"
    ),
    CodeInfo(
        "lock-unresolved-library",
        "plan lock: a locked extension needs a library neither the lock nor the system gives",
    ),
    CodeInfo("lock-cannot-tell", "plan lock: a locked package whose files cannot be known"),
    CodeInfo("stale-caches", "compile caches hold entries built for other versions than the env's"),
    CodeInfo(
        "stale-cache-entry", "caches: cache entries built for another torch/triton/CUDA/Python"
    ),
)

CODES: Mapping[str, CodeInfo] = {info.code: info for info in _CODES}


@dataclass(frozen=True, slots=True)
class DistRef:
    name: str
    version: str


@dataclass(frozen=True, slots=True)
class Fix:
    """The remedies that repair a finding, in order, and a note on them. Adjacent reinstalls
    through one installer and interpreter are one (one call does what they would). ``argv``
    is what runs (one ``sh -c`` for several steps), ``steps`` each remedy's command,
    ``command`` how they read: all made from the remedies when asked."""

    remedies: tuple[Remedy, ...]
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "remedies", merge_reinstalls(self.remedies))

    @property
    def steps(self) -> tuple[tuple[str, ...], ...]:
        return tuple(argv_of(r) for r in self.remedies)

    @property
    def argv(self) -> tuple[str, ...]:
        steps = self.steps
        if len(steps) == 1:
            return steps[0]
        return ("sh", "-c", " && ".join(shlex.join(step) for step in steps))

    @property
    def command(self) -> str:
        steps = self.steps
        if len(steps) > 1:
            return " && ".join(shlex.join(step) for step in steps)
        return shlex.join(self.argv)

    def to_json(self) -> dict[str, Any]:
        """The ``fix`` of a finding in ``--json``: ``command``, ``argv``, and when they apply
        ``steps`` and ``note``."""
        steps = self.steps
        out: dict[str, Any] = {
            "command": printable(self.command),
            "argv": [printable(a) for a in self.argv],
        }
        if len(steps) > 1:
            out["steps"] = [[printable(a) for a in step] for step in steps]
        if self.note:
            out["note"] = self.note
        return out

    def to_plain(self) -> tuple[Any, ...]:
        """The fix as plain values (strings, booleans, None, tuples) a cache can store."""
        return (tuple(to_plain(r) for r in self.remedies), self.note)

    @classmethod
    def from_plain(cls, plain: object) -> Fix | None:
        """The fix ``to_plain`` stored, or None when PLAIN is not one (a cache is untrusted)."""
        if type(plain) is not tuple or len(plain) != 2 or type(plain[1]) is not str:
            return None
        if type(plain[0]) is not tuple:
            return None
        remedies = [remedy_of(r) for r in plain[0]]
        if any(r is None for r in remedies):
            return None
        return cls(tuple(r for r in remedies if r is not None), plain[1])


@dataclass(frozen=True, slots=True)
class Finding:
    code: Code
    severity: Severity
    message: str
    distribution: DistRef | None = None
    paths: tuple[str, ...] = ()
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: Fix | None = None

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}")

    def to_json(self) -> dict[str, Any]:
        """The finding as ``--json`` prints it: JSON-safe (undecodable bytes escaped)."""
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity.label,
            "message": printable(self.message),
        }
        if self.distribution is not None:
            out["distribution"] = {
                "name": self.distribution.name,
                "version": self.distribution.version,
            }
        if self.paths:
            out["paths"] = [printable(p) for p in self.paths]
        if self.evidence:
            out["evidence"] = json_safe(self.evidence)
        if self.fix is not None:
            out["fix"] = self.fix.to_json()
        return out


def printable(text: str) -> str:
    """TEXT safe to print or put in JSON: undecodable bytes (surrogate escapes from a path)
    become backslash escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def json_safe(value: Any) -> Any:
    """Any evidence value made JSON-safe: mappings, sequences and scalars kept, strings
    printable, anything else its printable ``str``."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {printable(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return printable(str(value))


def count_by_severity(findings: Sequence[Finding]) -> dict[Severity, int]:
    counts = dict.fromkeys(Severity, 0)
    for finding in findings:
        counts[finding.severity] += 1
    return counts
