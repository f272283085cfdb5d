"""Findings grouped by root cause, each cause with the one command that repairs it.

One event usually shows as several findings: an uninstall that deleted four co-owned
distributions' files gives four ``missing-files`` and four ``unresolved-library``, and
eight repair commands where one ``pip install`` line repairs them all. Findings whose fixes
are the same remedies are one cause; causes repaired by reinstalls through the same installer
and interpreter merge into one, with one command naming every distribution. The title says
what the user will see: the import that fails, else what was lost. Pure: findings in,
causes out; the findings themselves are unchanged (JSON keeps them as they are).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from libdoctor.findings import Finding, Fix, Severity
from libdoctor.remedy import Install, Pin, Reinstall, Remedy

__all__ = ["Cause", "combined_fix", "group_causes"]


@dataclass(frozen=True, slots=True)
class Cause:
    """One root cause: its findings (most severe first, as given) and the fix for all."""

    findings: tuple[Finding, ...]
    fix: Fix | None
    title: str | None  # None for a cause of one finding: the finding says it all

    @property
    def severity(self) -> Severity:
        return max(f.severity for f in self.findings)


def group_causes(findings: Sequence[Finding]) -> list[Cause]:
    """FINDINGS (already in display order) as causes, most severe first, order kept."""
    groups: list[list[Finding]] = []
    by_fix: dict[tuple[Remedy, ...], list[Finding]] = {}
    for finding in findings:
        key = finding.fix.remedies if finding.fix is not None else None
        if key is None:
            groups.append([finding])
        elif key in by_fix:
            by_fix[key].append(finding)
        else:
            by_fix[key] = [finding]
            groups.append(by_fix[key])
    causes = [_cause(g) for g in _merge_reinstalls(groups)]
    return sorted(causes, key=lambda c: -c.severity)


def _reinstall_key(group: Sequence[Finding]) -> Reinstall | Install | None:
    """The group's one (re)install less its last NAME==VERSION, when its fix is that."""
    fix = group[0].fix
    if fix is None or len(fix.remedies) != 1:
        return None
    return _merge_key(fix.remedies[0])


# An exact pin an installer reads as one requirement beside others: NAME==VERSION.
_EXACT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[^\s=]+$")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VERSION = re.compile(r"[^\s=]+$")


def _exact(pin: Pin) -> bool:
    return bool(_NAME.fullmatch(pin.name)) and bool(_VERSION.match(pin.version))


def _merge_key(remedy: Remedy) -> Reinstall | Install | None:
    """REMEDY without its last requirement, when that is an exact pin: remedies of one key
    differ in that pin alone, and one command names every pin. A reinstall of several keys
    by all but its last, as the command it is reads. None for conda (a package and its build
    per call) and anything but a (re)install."""
    if isinstance(remedy, Reinstall):
        if remedy.via.installer == "conda" or not _exact(remedy.dists[-1]):
            return None
        return replace(remedy, dists=remedy.dists[:-1])
    if isinstance(remedy, Install) and not remedy.editable and remedy.requirements:
        if not _EXACT.match(remedy.requirements[-1]):
            return None
        return replace(remedy, requirements=remedy.requirements[:-1])
    return None


def _merged(key: Reinstall | Install, remedies: Sequence[Remedy]) -> Remedy:
    """KEY with the last pin of each of REMEDIES (all of that key) after its own, each once."""
    if isinstance(key, Reinstall):
        pins = [r.dists[-1] for r in remedies if isinstance(r, Reinstall)]
        return replace(key, dists=(*key.dists, *dict.fromkeys(pins)))
    last = [r.requirements[-1] for r in remedies if isinstance(r, Install)]
    return replace(key, requirements=(*key.requirements, *dict.fromkeys(last)))


def _merge_reinstalls(groups: list[list[Finding]]) -> list[list[Finding]]:
    """Groups that break the same import and are repaired by reinstalls through one
    installer and interpreter: one cause (the seed: four lost distributions, one torch)."""
    merged: list[list[Finding]] = []
    by_key: dict[tuple[Reinstall | Install, str], list[Finding]] = {}
    for group in groups:
        prefix = _reinstall_key(group)
        imports = _failing_imports(group)
        if prefix is None or not imports:
            merged.append(group)
            continue
        key = (prefix, imports[0])
        if key in by_key:
            by_key[key].extend(group)
        else:
            by_key[key] = list(group)
            merged.append(by_key[key])
    return merged


def combined_fix(causes: Sequence[Cause]) -> Fix | None:
    """One command for the causes repaired by reinstalls through the same installer and
    interpreter, when there are several such causes (one cause's own fix says it already)."""
    by_prefix: dict[Reinstall | Install, list[Cause]] = {}
    for cause in causes:
        prefix = _reinstall_key(cause.findings)
        if prefix is not None:
            by_prefix.setdefault(prefix, []).append(cause)
    several = [group for group in by_prefix.values() if len(group) > 1]
    if len(several) != 1:
        return None
    return _one_fix([f for cause in several[0] for f in cause.findings])


def _cause(group: list[Finding]) -> Cause:
    if len(group) == 1:
        return Cause((group[0],), group[0].fix, None)
    return Cause(tuple(group), _one_fix(group), _title(group))


def _one_fix(group: Sequence[Finding]) -> Fix | None:
    """The group's fix; for merged reinstalls, one command naming every distribution."""
    fixes = list(dict.fromkeys(f.fix for f in group if f.fix is not None))
    if len(fixes) == 1:
        return fixes[0]
    key = _reinstall_key(group)
    if key is None:
        return None
    remedies = [r for f in fixes for r in f.remedies]
    return Fix((_merged(key, remedies),), note="one command reinstalls them all")


def _title(group: Sequence[Finding]) -> str:
    """What fails, then what was lost: "import torch fails: 4 distributions lost files"."""
    parts = []
    imports = _failing_imports(group)
    if imports:
        verb = "fails" if len(imports) == 1 else "fail"
        parts.append(f"import {' and import '.join(imports[:2])} {verb}")
    lost = [f for f in group if f.code == "missing-files" and f.distribution is not None]
    if lost:
        lost_what = "distribution lost its" if len(lost) == 1 else "distributions lost their"
        parts.append(f"{len(lost)} {lost_what} files")
    if not parts:
        codes = list(dict.fromkeys(f.code for f in group))
        parts.append(f"{len(group)} findings ({', '.join(codes)}) with one repair")
    return ": ".join(parts)


def _failing_imports(group: Sequence[Finding]) -> list[str]:
    """Top-level packages whose import fails, the one that fails first first.

    A package named like the distribution whose module fails is the one users import (and
    that others import first: ``import functorch`` imports torch), so it leads.
    """
    tops: dict[str, bool] = {}
    for finding in group:
        if finding.code != "unresolved-library":
            continue
        owner = finding.distribution.name.lower().replace("-", "_") if finding.distribution else ""
        for module in finding.evidence.get("modules", ()):
            top = str(module).split(".")[0]
            tops[top] = tops.get(top, False) or top == owner
    return sorted(tops, key=lambda t: (not tops[t], t))
