"""Real ``pip check`` as the oracle of libdoctor's requirement findings, pair for pair.

``pip_check`` runs the real ``python -m pip check`` of an environment (its own pip, or this
interpreter's pip pointed at it with ``--python`` when it has none, as a uv venv) and parses
every line; ``libdoctor_pairs`` takes the same (requirer, required) pairs from a
``check --json`` document; ``uncovered`` is what pip reports that libdoctor does not.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from support.checkdoc import Doc, canon
from support.venvs import Venv, pip_env

__all__ = [
    "REQUIREMENT_CODES",
    "PipProblem",
    "assert_superset_of_pip_check",
    "covers",
    "libdoctor_pairs",
    "pip_check",
    "pip_check_pairs",
    "requirement_findings",
    "uncovered",
]

REQUIREMENT_CODES = (
    "requirement-missing",
    "requirement-conflict",
    "requirement-phantom",
    "requirement-invalid",
)

PipProblem = tuple[str, str, str | None]  # (kind, requirer, required): missing/conflict/invalid
_MISSING = re.compile(r"^(\S+) \S+ requires (\S+), which is not installed\.$")
_CONFLICT = re.compile(r"^(\S+) \S+ has requirement (.+), but you have (\S+) \S+\.$")
# pip < 23.3 says "requirements for", later pips "dependencies of"
_UNPARSABLE = re.compile(r"Error parsing (?:requirements for|dependencies of) (\S+):")


def _pip_argv(python: Path) -> list[str]:
    """``PYTHON -m pip`` when PYTHON's environment has pip, else this interpreter's pip
    run against it (``pip --python``)."""
    done = subprocess.run(
        [str(python), "-c", "import pip"], capture_output=True, check=False, timeout=60
    )
    if done.returncode == 0:
        return [str(python), "-m", "pip"]
    return [sys.executable, "-m", "pip", "--python", str(python)]


def pip_check(env: Venv | Path) -> tuple[int, list[PipProblem]]:
    """The oracle: real ``pip check`` of ENV (a venv, or its interpreter), each problem it
    reports as a value; every line of its output must be one it knows."""
    python = env.python if isinstance(env, Venv) else env
    done = subprocess.run(
        [*_pip_argv(python), "check"],
        env=pip_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    problems: list[PipProblem] = []
    for line in done.stdout.splitlines():
        if m := _MISSING.match(line):
            problems.append(("missing", canon(m[1]), canon(m[2])))
        elif m := _CONFLICT.match(line):
            problems.append(("conflict", canon(m[1]), canon(m[3])))
        else:
            assert line == "No broken requirements found.", line
    problems += [("invalid", canon(m), None) for m in _UNPARSABLE.findall(done.stderr)]
    assert (done.returncode == 0) == (not problems), done.stdout + done.stderr
    return done.returncode, problems


def pip_check_pairs(env: Venv | Path) -> set[tuple[str, str]]:
    """(requirer, required) of every missing or conflicting requirement pip check reports."""
    return {(r, d) for kind, r, d in pip_check(env)[1] if d is not None and kind != "invalid"}


def requirement_findings(doc: Doc) -> list[Doc]:
    return [f for f in doc["findings"] if f["code"] in REQUIREMENT_CODES]


def libdoctor_pairs(doc: Doc) -> set[tuple[str, str]]:
    """(requirer, required) of every requirement finding of a ``check --json`` document."""
    return {
        (canon(f["distribution"]["name"]), canon(f["evidence"]["name"]))
        for f in requirement_findings(doc)
        if f["code"] != "requirement-invalid"
    }


def covers(finding: Doc, problem: PipProblem) -> bool:
    kind, requirer, required = problem
    name = canon(finding["distribution"]["name"])
    if finding["code"] == "requirement-invalid":
        # pip leaves a distribution whose metadata does not parse out of its view: then
        # whatever requires it "is not installed" too. The unparsable line is the problem.
        return name == requirer if kind == "invalid" else kind == "missing" and name == required
    code = {"missing": "requirement-missing", "conflict": "requirement-conflict"}.get(kind)
    return (
        finding["code"] == code
        and name == requirer
        and canon(finding["evidence"]["name"]) == required
    )


def uncovered(problems: list[PipProblem], doc: Doc) -> list[PipProblem]:
    """Each problem pip check reports that no requirement finding of DOC covers."""
    found = requirement_findings(doc)
    return [p for p in problems if not any(covers(f, p) for f in found)]


def assert_superset_of_pip_check(env: Venv | Path, doc: Doc) -> list[PipProblem]:
    """pip check's problems, every one of them covered by DOC's findings."""
    _, problems = pip_check(env)
    missed = uncovered(problems, doc)
    assert missed == [], (missed, requirement_findings(doc))
    return problems
