"""Findings grouped by root cause (analysis.causes): same fix, one cause; reinstalls that
break one import through one installer, one cause with one command; the rest stay apart."""

from __future__ import annotations

from typing import Any

from libdoctor.analysis.causes import combined_fix, group_causes
from libdoctor.findings import Code, DistRef, Finding, Fix, Severity
from libdoctor.remedy import Pin, Reinstall, Uninstall, Via

PIP = ("/env/bin/python", "-m", "pip", "install", "--force-reinstall", "--no-deps")
VIA = Via("pip", "/env/bin/python", (3, 11))


def _reinstall(pin: str) -> Fix:
    name, _, version = pin.partition("==")
    return Fix((Reinstall((Pin(name, version),), VIA),))


def _f(
    code: Code, dist: str, fix: Fix | None, severity: Severity = Severity.ERROR, **ev: Any
) -> Finding:
    return Finding(code, severity, f"{code} {dist}", DistRef(dist, "1"), evidence=ev, fix=fix)


def _seed() -> list[Finding]:
    """Two distributions lost their files; torch's extension needs a library of each."""
    a, b = _reinstall("cudnn==9"), _reinstall("nccl==2")
    return [
        _f("missing-files", "cudnn", a, missing=3, files=4, phantom=True),
        _f("missing-files", "nccl", b, missing=1, files=2, phantom=True),
        _f("unresolved-library", "torch", a, library="libcudnn.so.9", modules=["torch._C"]),
        _f("unresolved-library", "torch", b, library="libnccl.so.2", modules=["torch._C"]),
    ]


def test_lost_distributions_breaking_one_import_are_one_cause_with_one_command() -> None:
    (cause,) = group_causes(_seed())
    assert cause.title == "import torch fails: 2 distributions lost their files"
    assert cause.fix is not None
    assert cause.fix.argv == (*PIP, "cudnn==9", "nccl==2")
    assert len(cause.findings) == 4


def test_the_import_users_type_is_named_first() -> None:
    fix = _reinstall("cudnn==9")
    findings = [
        _f("unresolved-library", "torch", fix, modules=["functorch._C", "torch._C"]),
        _f("missing-files", "cudnn", fix, missing=1, files=1),
    ]
    (cause,) = group_causes(findings)
    assert cause.title is not None and cause.title.startswith("import torch and import functorch")


def test_unrelated_findings_stay_apart_and_one_line_repairs_them_all() -> None:
    findings = [
        _f("missing-files", "pkg-a", _reinstall("pkg-a==1"), missing=1, files=2),
        _f("altered-files", "pkg-b", _reinstall("pkg-b==1"), Severity.WARNING),
        _f("driver-library-absent", "x", None, Severity.INFO),
    ]
    causes = group_causes(findings)
    assert [c.title for c in causes] == [None, None, None]
    assert [c.severity for c in causes] == [Severity.ERROR, Severity.WARNING, Severity.INFO]
    everything = combined_fix(causes)
    assert everything is not None and everything.argv == (*PIP, "pkg-a==1", "pkg-b==1")


def test_a_multi_step_fix_is_never_merged() -> None:
    fix = Fix((Uninstall("b", VIA), Reinstall((Pin("a", "1"),), VIA)))
    findings = [_f("shared-path", "a", fix), _f("missing-files", "c", _reinstall("c==1"))]
    causes = group_causes(findings)
    assert len(causes) == 2 and combined_fix(causes) is None
