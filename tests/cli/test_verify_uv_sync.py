"""``verify --lock uv.lock`` against what the real ``uv sync --frozen`` installs, offline.

One project, locked once by the real uv: a workspace (the project and a member ``sub`` with
its own ``default-groups``), ``[tool.uv] default-groups``, ``dev-dependencies``, a group
that includes another, two conflicting extras that pick different versions of ``beta``
(uv writes conflict markers for them), and ``gitpkg`` locked to a commit of a local git
repository. Wheels come from a find-links folder; the local packages are built by an
in-tree backend (``support.uvprojects``). The oracle is uv itself: after ``uv sync
--frozen FLAGS`` (exact: it also removes what FLAGS leave out), ``verify`` with the same
FLAGS must be clean, and with the default flags it must name the difference.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from support.checkdoc import Doc, check_ok, only, select
from support.uvprojects import git_repo, uv, uv_env, write_package
from support.venvs import Libdoctor
from support.wheels import build_wheel

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="the backend uses tomllib")

PROJECT = """\
dependencies = ["alpha", "gitpkg", "sub"]
[project.optional-dependencies]
cpu = ["beta==1.0", "cpuonly"]
gpu = ["beta==2.0", "gpuonly"]
[dependency-groups]
dev = ["gamma"]
docs = ["delta"]
lint = ["eps", {{include-group = "docs"}}]
[tool.uv]
default-groups = ["docs", "lint"]
dev-dependencies = ["zeta"]
find-links = ["{wheels}"]
no-index = true
conflicts = [[{{extra = "cpu"}}, {{extra = "gpu"}}]]
[tool.uv.workspace]
members = ["sub"]
[tool.uv.sources]
gitpkg = {{ git = "{git}" }}
sub = {{ workspace = true }}
"""
SUB = """\
dependencies = ["subdep"]
[dependency-groups]
subdev = ["gamma"]
[tool.uv]
default-groups = ["subdev"]
"""


class Project:
    def __init__(self, root: Path, commit: str, env: dict[str, str]) -> None:
        self.root, self.commit, self.env = root, commit, env
        self.dir = root / "proj"
        self.venv = self.dir / ".venv"

    def sync(self, *flags: str) -> set[str]:
        uv(["sync", "--frozen", "--python", sys.executable, *flags], self.dir, self.env)
        site = next(self.venv.glob("lib/python*/site-packages"))
        return {p.name.split("-")[0] for p in site.glob("*.dist-info")}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    root = tmp_path_factory.mktemp("uvsync")
    wheels = root / "wheels"
    for name in ("alpha", "delta", "eps", "zeta", "cpuonly", "gpuonly", "subdep"):
        build_wheel(wheels, name, "1.0", {f"{name}/__init__.py": b"X = 1\n"})
    build_wheel(wheels, "gamma", "1.0", {"gamma/__init__.py": b"X = 1\n"}, requires=["beta"])
    for version in ("1.0", "2.0"):
        build_wheel(wheels, "beta", version, {"beta/__init__.py": b"X = 1\n"})
    commit = git_repo(write_package(root / "gitpkg", "gitpkg", "0.1", text="X = 'git'\n"))
    proj = root / "proj"
    write_package(proj / "sub", "sub", "0.1", extra=SUB)
    text = PROJECT.format(wheels=wheels, git=(root / "gitpkg").as_uri())
    write_package(proj, "proj", "0.1.0", extra=text)
    env = uv_env(root / "cache")
    uv(["lock", "--python", sys.executable], proj, env)
    return Project(root, commit, env)


def _verify(libdoctor: Libdoctor, project: Project, *flags: str, lock: Path | None = None) -> Doc:
    run = libdoctor(
        "verify", "--lock", lock or project.dir / "uv.lock", project.venv, "--json", *flags
    )
    doc = check_ok(run)
    assert run.rc == (1 if doc["summary"]["errors"] + doc["summary"]["warnings"] else 0), run
    return doc


def _drift(doc: Doc) -> set[tuple[str, str]]:
    return {
        (f["code"], f["distribution"]["name"]) for f in doc["findings"] if f["severity"] != "info"
    }


@pytest.mark.parametrize(
    ("flags", "installed", "default_drift"),
    [
        ((), {"alpha", "delta", "eps", "gitpkg", "proj", "sub", "subdep"}, set()),
        (("--no-dev",), {"alpha", "delta", "eps", "gitpkg", "proj", "sub", "subdep"}, set()),
        (
            ("--no-default-groups",),
            {"alpha", "gitpkg", "proj", "sub", "subdep"},
            {("lock-missing", "delta"), ("lock-missing", "eps")},
        ),
        (
            ("--only-group", "docs"),
            {"delta"},
            {("lock-missing", n) for n in ("alpha", "eps", "gitpkg", "proj", "sub", "subdep")},
        ),
        (("--only-dev",), {"beta", "gamma", "zeta"}, None),
        (
            ("--extra", "cpu"),
            {"alpha", "beta", "cpuonly", "delta", "eps", "gitpkg", "proj", "sub", "subdep"},
            {("lock-extra", "beta"), ("lock-extra", "cpuonly")},
        ),
        (("--extra", "gpu", "--group", "dev"), None, None),
        (("--all-groups", "--no-group", "docs"), None, None),
        (("--package", "sub"), {"beta", "gamma", "sub", "subdep"}, None),
        (("--all-packages", "--extra", "gpu"), None, None),
        (("--no-install-package", "alpha", "--no-install-workspace"), None, None),
    ],
)
def test_what_uv_sync_installs_verifies_clean_and_nothing_else(
    project: Project,
    libdoctor: Libdoctor,
    flags: Sequence[str],
    installed: set[str] | None,
    default_drift: set[tuple[str, str]] | None,
) -> None:
    synced = project.sync(*flags)
    if installed is not None:
        assert synced == installed
    doc = _verify(libdoctor, project, *flags)
    assert _drift(doc) == set(), doc["findings"]
    without = _drift(_verify(libdoctor, project))
    if default_drift is not None:
        assert without == default_drift
    elif flags:
        assert without, f"{flags}: the default selection should differ from {synced}"


def test_the_chosen_groups_are_said_and_the_rest_is_excluded_with_why(
    project: Project, libdoctor: Libdoctor
) -> None:
    project.sync()
    doc = _verify(libdoctor, project)
    assert doc["lock"]["synced_with"] == "extras none; groups docs, lint"
    why = {e["name"]: e["why"] for e in doc["lock"]["excluded"]}
    assert why["cpuonly"] == "only in proj's extra cpu, not synced (--extra cpu)"
    assert why["zeta"] == "only in proj's group dev, not synced (--group dev)"
    # uv sync installs the project (editable): it is required, not "installed or not"
    assert "proj" in {p["name"] for p in doc["lock"]["required"]}
    assert doc["lock"]["project"] == []


def test_flags_that_do_not_fit_the_lock_are_one_line(
    project: Project, libdoctor: Libdoctor
) -> None:
    for flags, expected in [
        (("--extra", "nope"), "--extra nope: proj has no such extra"),
        (("--group", "nope"), "--group nope: proj has no such dependency group"),
        (("--package", "nope"), "--package nope: no such workspace member"),
        (("--all-groups", "--only-dev"), "cannot be used together"),
    ]:
        run = libdoctor.inprocess("verify", "--lock", project.dir / "uv.lock", project.venv, *flags)
        assert run.rc == 2 and run.stdout == "", run
        assert run.stderr.count("\n") == 1 and expected in run.stderr, run.stderr


def test_default_groups_all_and_the_lock_alone(
    project: Project, libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """``default-groups = "all"``; and the lock copied without its pyproject.toml: uv's
    revision-5 lock keeps the project's default-groups, which are read from it then."""
    pyproject = project.dir / "pyproject.toml"
    before = pyproject.read_text()
    try:
        pyproject.write_text(
            before.replace('default-groups = ["docs", "lint"]', 'default-groups = "all"')
        )
        uv(["lock", "--python", sys.executable], project.dir, project.env)
        assert project.sync() >= {"gamma", "zeta", "delta", "eps"}
        assert _drift(_verify(libdoctor, project)) == set()
        alone = tmp_path / "uv.lock"
        alone.write_bytes((project.dir / "uv.lock").read_bytes())
        doc = _verify(libdoctor, project, "--no-install-workspace", lock=alone)
        assert _drift(doc) == set() and "groups dev, docs, lint" in doc["lock"]["synced_with"]
    finally:
        pyproject.write_text(before)
        uv(["lock", "--python", sys.executable], project.dir, project.env)


def test_a_git_locked_package_reinstalled_from_a_plain_wheel_is_an_error_naming_the_git_source(
    project: Project, libdoctor: Libdoctor
) -> None:
    project.sync()
    assert "gitpkg 0.1" in _verify(libdoctor, project)["lock"]["verified"]  # by commit
    plain = build_wheel(
        project.root / "plain", "gitpkg", "0.1", {"gitpkg/__init__.py": b"X = 'w'\n"}
    )
    python = project.venv / "bin" / "python"
    by_file: list[str | Path] = [
        "pip",
        "install",
        "--reinstall",
        "--no-deps",
        "--python",
        python,
        plain,
    ]
    by_name: list[str | Path] = [
        *by_file[:-1],
        "--no-index",
        "--find-links",
        plain.parent,
        "gitpkg==0.1",
    ]
    source = f"gitpkg @ git+{(project.root / 'gitpkg').as_uri()}@{project.commit}"
    for install, said in ((by_file, "installed from the file"), (by_name, "no direct_url.json")):
        uv(install, project.dir, project.env)
        doc = _verify(libdoctor, project)
        finding = only(select(doc, "lock-artifact", "gitpkg"))
        assert finding["severity"] == "error" and said in finding["message"], finding
        assert project.commit in finding["message"]
        assert finding["fix"]["argv"][-1] == source
        assert finding["fix"]["argv"][:3] == ["uv", "pip", "install"]
        assert "--reinstall" in finding["fix"]["argv"]
        uv(finding["fix"]["argv"][1:], project.dir, project.env)  # the fix, with the real uv
        after = _verify(libdoctor, project)
        assert _drift(after) == set() and "gitpkg 0.1" in after["lock"]["verified"]
