"""Reading ``libdoctor check --json`` documents in tests: pick findings, check their fixes.

A document is the parsed JSON (``Doc``); a finding one of its ``findings``. Distribution
names are compared canonicalized (``canon``), so "Foo_Bar" and "foo-bar" are one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from support.commands import run_command
from support.venvs import LibdoctorRun, Venv, pip_env, uv_path

Doc = dict[str, Any]
Finding = dict[str, Any]


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def names_in(finding: Finding) -> set[str]:
    """Canonical names of every distribution a finding is about (its own, or the claimants)."""
    names = set()
    dist = finding.get("distribution")
    if dist:
        names.add(canon(dist["name"]))
    for claimant in finding.get("evidence", {}).get("claimants", []):
        names.add(canon(claimant["name"]))
    return names


def not_bytecode(paths: Sequence[str]) -> list[str]:
    """PATHS without ``__pycache__/*.pyc`` (pip records those without hash or size)."""
    return [p for p in paths if not (p.endswith(".pyc") and "/__pycache__/" in p)]


def select(doc: Doc, code: str | None = None, dist: str | None = None) -> list[Finding]:
    return [
        f
        for f in doc["findings"]
        if (code is None or f["code"] == code) and (dist is None or canon(dist) in names_in(f))
    ]


def only(findings: Sequence[Finding]) -> Finding:
    assert len(findings) == 1, json.dumps(findings, indent=1)[:4000]
    return findings[0]


def by_code(doc: Doc) -> dict[str, list[Finding]]:
    """DOC's findings by their code, in document order."""
    out: dict[str, list[Finding]] = {}
    for finding in doc["findings"]:
        out.setdefault(finding["code"], []).append(finding)
    return out


def codes_for(doc: Doc, dist: str) -> set[str]:
    return {f["code"] for f in select(doc, dist=dist)}


def reinstall_argv(venv: Venv, requirement: str) -> list[str]:
    return [
        str(venv.python),
        "-m",
        "pip",
        "install",
        "--force-reinstall",
        "--no-deps",
        requirement,
    ]


def assert_fix_argv(finding: Finding, venv: Venv, requirement: str) -> None:
    fix = finding["fix"]
    argv = fix["argv"]
    assert argv[1:] == reinstall_argv(venv, requirement)[1:], fix
    # The venv's own interpreter path, not its symlink target (that would be the base python).
    assert Path(argv[0]).parent == venv.bin and Path(argv[0]).name.startswith("python"), fix
    assert shlex.split(fix["command"]) == argv, fix


def check_ok(run: LibdoctorRun) -> Doc:
    assert run.rc in (0, 1), run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    doc: Doc = run.json()
    return doc


def run_fix(finding: Finding, find_links: Path) -> None:
    """Run a finding's fix argv for real, pip seeing only the test wheels in FIND_LINKS."""
    run_fix_argv(finding["fix"]["argv"], find_links)


def run_fix_argv(argv: Sequence[str], find_links: Path) -> None:
    """Run one fix command line for real: pip and uv see only the test wheels in FIND_LINKS
    (and ``uv`` is on PATH, as a fix for what uv installed names it)."""
    env = pip_env([find_links])
    env["PATH"] = f"{uv_path().parent}{os.pathsep}{env.get('PATH', '')}"
    env["UV_FIND_LINKS"], env["UV_NO_INDEX"], env["UV_NO_CACHE"] = str(find_links), "1", "1"
    done = run_command(argv, env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
