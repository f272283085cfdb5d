"""``verify``'s text stays one screen: many findings of one code read as one block with one
command for all; ``--verbose`` lists each."""

from __future__ import annotations

import sys

from libdoctor.analysis.lock import LockReport
from libdoctor.checks.lock import LockCheck
from libdoctor.environment.target import SiteDir, Target
from libdoctor.external.lockfile import Lock, LockedPackage, Selection
from libdoctor.findings import DistRef, Finding, Fix, Severity
from libdoctor.remedy import Uninstall, Via
from libdoctor.report.lock import merged_fix, render_text

TARGET = Target("/env", "/env/bin/python", (SiteDir("/env/site", "/env"),), "argument", (3, 11))
LOCKED = LockedPackage("alpha", "alpha", "1.0", "registry")


def _extra(name: str) -> Finding:
    return Finding(
        "lock-extra",
        Severity.WARNING,
        f"{name} 1.0 is installed but the lock does not list it.",
        DistRef(name, "1.0"),
        fix=Fix((Uninstall(name, Via("pip", "/env/bin/python")),)),
    )


def _report(findings: list[Finding]) -> LockReport:
    check = LockCheck(tuple(findings), ("alpha 1.0",), (), ("pip 25.0",))
    markers = {"python_full_version": "{}.{}.{}".format(*sys.version_info[:3])}
    lock = Lock("requirements.txt", "requirements.txt", (LOCKED,))
    return LockReport(TARGET, lock, Selection((LOCKED,), ()), markers, check, 3, 10)


def test_many_findings_of_one_code_are_one_block_with_one_command() -> None:
    findings = [_extra(name) for name in ("b", "c", "d", "e", "f")]
    text = render_text(_report(findings), findings, color=False, verbose=False)
    assert "lock-extra (5)" in text and "b 1.0, c 1.0, d 1.0, e 1.0, f 1.0" in text
    assert "fix: /env/bin/python -m pip uninstall --yes b c d e f" in text
    assert "not counted as extra: pip 25.0 (installers the lock does not list)" in text
    assert text.rstrip().endswith(
        "1 of 1 locked packages at their versions, 0 verified by hash or commit"
    )
    verbose = render_text(_report(findings), findings, color=False, verbose=True)
    assert verbose.count("fix: /env/bin/python -m pip uninstall --yes") == 5


def test_fixes_merge_only_when_they_differ_in_the_package_alone() -> None:
    assert merged_fix([_extra("b"), _extra("c")]) == ("/env/bin/python -m pip uninstall --yes b c")
    other = Finding(
        "lock-extra",
        Severity.WARNING,
        "m",
        fix=Fix((Uninstall("x", Via("uv", "/env/bin/python")),)),
    )
    assert merged_fix([_extra("b"), other]) is None
    assert merged_fix([_extra("b"), Finding("lock-extra", Severity.WARNING, "m")]) is None
