"""``check_lock``'s artifact evidence, table-driven: what a dist-info says of the file it came
from (``InstalledFrom``, given here instead of read) against what the lock names. The real
installers' evidence is ``tests/cli/test_verify.py``'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from libdoctor.checks.lock import check_lock
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import Environment, build_environment
from libdoctor.environment.target import discover
from libdoctor.external.lockfile import (
    Artifact,
    InstalledFrom,
    Lock,
    LockedPackage,
    Selection,
)
from support.venvs import VenvFactory, pip_install
from support.wheels import WheelFactory

SHA = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
WHEEL = Artifact("wheel", "https://e.org/alpha-1.0-py3-none-any.whl", frozenset({SHA}))
SDIST = Artifact("sdist", "https://e.org/alpha-1.0.tar.gz", frozenset({OTHER}))
VCS = Artifact("vcs", "https://e.org/alpha.git", commit="c0ffee")
ARCHIVE = Artifact("archive", "https://e.org/alpha-1.0-py3-none-any.whl", frozenset({SHA}))
NATIVE = Artifact("wheel", "https://e.org/alpha-1.0-cp399-cp399-linux_x86_64.whl")
RENAMED = Artifact("wheel", "https://e.org/alpha-1.0-py3-none-manylinux1_x86_64.whl")


@pytest.fixture(scope="module")
def env(module_venv: VenvFactory, module_wheels: WheelFactory) -> Environment:
    venv = module_venv("alpha")
    pip_install(venv, module_wheels("alpha", "1.0", {"alpha/__init__.py": b"A = 1\n"}))
    return build_environment(discover(str(venv.path), None, {}))


def _package(source: str, *artifacts: Artifact) -> LockedPackage:
    return LockedPackage("alpha", "alpha", "1.0", source, artifacts)


@pytest.mark.parametrize(
    ("package", "found", "expected"),
    [
        (
            _package("registry", WHEEL),
            InstalledFrom("file:///w", "archive", frozenset({SHA})),
            "verified",
        ),
        (
            _package("registry", WHEEL, SDIST),
            InstalledFrom("u", "archive", frozenset({OTHER})),
            "verified",
        ),
        (
            _package("registry", WHEEL),
            InstalledFrom("file:///w", "archive", frozenset({OTHER})),
            "error",
        ),
        (
            _package("registry", WHEEL),
            InstalledFrom("file:///src", "directory", editable=True),
            "error",
        ),
        (
            _package("vcs", VCS),
            InstalledFrom("https://e.org/alpha.git", "vcs", commit="c0ffee"),
            "verified",
        ),
        (
            _package("vcs", VCS),
            InstalledFrom("https://e.org/alpha.git", "vcs", commit="bad"),
            "error",
        ),
        (
            _package("registry", WHEEL),
            InstalledFrom("https://e.org/alpha.git", "vcs", commit="x"),
            "error",
        ),
        (
            _package("directory", Artifact("directory", "/src")),
            InstalledFrom("file:///src", "directory"),
            "info",
        ),
        # locked to a source of its own, installed from elsewhere: an error
        (_package("vcs", VCS), InstalledFrom(tags=("py3-none-any",)), "error"),  # an index
        (_package("vcs", VCS), InstalledFrom("file:///w", "archive", frozenset({SHA})), "error"),
        (_package("directory", Artifact("directory", "/src")), InstalledFrom(), "error"),
        (
            _package("directory", Artifact("directory", "/src")),
            InstalledFrom("file:///elsewhere", "directory"),
            "error",
        ),
        (_package("url", ARCHIVE), InstalledFrom(ARCHIVE.location, "archive"), "info"),
        (
            _package("url", ARCHIVE),
            InstalledFrom(ARCHIVE.location + "#sha256=x", "archive"),
            "info",
        ),
        (_package("url", ARCHIVE), InstalledFrom(tags=("py3-none-any",)), "error"),
        (_package("url", ARCHIVE), InstalledFrom("https://e.org/other.whl", "archive"), "error"),
        (
            _package("url", ARCHIVE),
            InstalledFrom(ARCHIVE.location, "archive", frozenset({SHA})),
            "verified",
        ),
        (
            _package("url", ARCHIVE),
            InstalledFrom(ARCHIVE.location, "archive", frozenset({OTHER})),
            "error",
        ),
        (
            _package("path", Artifact("archive", "/w/a.whl")),
            InstalledFrom("file:///w/a.whl", "archive"),
            "info",
        ),
        (_package("path", Artifact("archive", "/w/a.whl")), InstalledFrom(), "error"),
        (_package("registry", WHEEL), InstalledFrom(tags=("py3-none-any",)), "info"),
        (_package("registry", NATIVE), InstalledFrom(tags=("py3-none-any",)), "error"),
        (_package("registry", NATIVE, SDIST), InstalledFrom(tags=("py3-none-any",)), "info"),
        # a pure build renamed to a platform (playwright): WHEEL keeps py3-none-any
        (_package("registry", RENAMED), InstalledFrom(tags=("py3-none-any",)), "info"),
        (_package("registry", RENAMED), InstalledFrom(tags=("cp399-none-any",)), "error"),
        (_package("registry"), InstalledFrom("file:///w", "archive", frozenset({SHA})), "info"),
        (_package("registry", WHEEL), InstalledFrom("file:///w", "archive"), "info"),  # uv: no hash
    ],
)
def test_the_artifact_evidence(
    env: Environment, package: LockedPackage, found: InstalledFrom, expected: str
) -> None:
    lock = Lock("pylock.toml", "pylock.toml", (package,))
    result = check_lock(env, RealDisk(), lock, Selection((package,), ()), evidence=lambda _: found)
    artifact = [f for f in result.findings if f.code == "lock-artifact"]
    if expected == "verified":
        assert artifact == [] and result.verified == ("alpha 1.0",)
    else:
        assert [f.severity.label for f in artifact] == [expected], artifact
        assert result.verified == ()
    assert result.matched == ("alpha 1.0",)


@pytest.mark.parametrize(
    ("package", "found", "compared"),
    [
        (  # locked to a source of its own: the sources compared
            _package("vcs", VCS),
            InstalledFrom(tags=("py3-none-any",)),
            ["locked_source", "installed_from", "installed_kind", "installed_commit"],
        ),
        (  # a registry's file: the files compared
            _package("registry", WHEEL),
            InstalledFrom("file:///w", "archive", frozenset({OTHER})),
            ["installed_from", "installed_hashes", "installed_tags", "locked_hashes"],
        ),
    ],
)
def test_a_mismatch_says_what_it_compared(
    env: Environment, package: LockedPackage, found: InstalledFrom, compared: list[str]
) -> None:
    lock = Lock("pylock.toml", "pylock.toml", (package,))
    result = check_lock(env, RealDisk(), lock, Selection((package,), ()), evidence=lambda _: found)
    (finding,) = [f for f in result.findings if f.code == "lock-artifact"]
    assert finding.message.startswith("alpha 1.0 is not the locked artifact: ")
    keys = list(finding.evidence)
    assert keys[:2] == ["lock", "locked_version"] and keys[-len(compared) :] == compared
    assert finding.fix is not None and finding.fix.remedies


def test_installers_are_not_extra_unless_locked(env: Environment, tmp_path: Path) -> None:
    alpha = _package("registry", WHEEL)
    lock = Lock("pylock.toml", "pylock.toml", (alpha,))
    result = check_lock(env, RealDisk(), lock, Selection((alpha,), ()))
    assert [d.split()[0] for d in result.excepted if d.startswith("pip ")] == ["pip"]
    assert not [f for f in result.findings if f.code == "lock-extra"]
    pip = LockedPackage("pip", "pip", "0.1", "registry")
    locked = Lock("pylock.toml", "pylock.toml", (alpha, pip))
    again = check_lock(env, RealDisk(), locked, Selection((alpha, pip), ()))
    versions = [f.distribution for f in again.findings if f.code == "lock-version"]
    assert [d.name for d in versions if d is not None] == ["pip"]


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        ("https://download.pytorch.org/whl/cpu", ["--index-url", "https://download.pytorch.org/whl/cpu"]),
        ("https://pypi.org/simple", []),
        (None, []),
    ],
)  # fmt: skip
def test_a_missing_package_is_fixed_from_the_index_the_lock_names(
    env: Environment, index: str | None, expected: list[str]
) -> None:
    """nanochat's `uv sync --extra cpu` locks torch 2.9.1+cpu from PyTorch's index: the fix
    that installs it from PyPI finds nothing there."""
    torch = LockedPackage("torchish", "torchish", "2.9.1+cpu", "registry", (), index=index)
    lock = Lock("uv.lock", "uv.lock", (torch,))
    result = check_lock(env, RealDisk(), lock, Selection((torch,), ()))
    (missing,) = [f for f in result.findings if f.code == "lock-missing"]
    assert missing.fix is not None
    argv = list(missing.fix.argv)
    assert argv[-1] == "torchish==2.9.1+cpu"
    assert argv[-1 - len(expected) : -1] == expected or not expected
    assert ("--index-url" in argv) == bool(expected)
