"""``analysis.lock``: one ``verify --lock`` run as a value. The lock's markers are evaluated
for the target's interpreter (what does not apply is excluded, not missing); files are
hashed only with --deep; a lock that cannot be read is refused, not reported.

On a real pip-installed env (``support.libchain``'s ``chainy`` 1.0); the lock is a
requirements file written here. (Named for the verify run: ``tests/repair/test_flock.py`` is
the repair's flock.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from libdoctor.analysis.lock import LockReport, verify_lock
from libdoctor.analysis.run import CheckOptions
from libdoctor.environment.target import Target
from libdoctor.external.lockfile import LockfileError
from support.libchain import ChainEnv

LOCK = """\
chainy==1.0
ldt-absent==2.0 ; python_version >= "3"
ldt-ancient==1.0 ; python_version < "3"
"""


@pytest.fixture(scope="module")
def target(chain_env: ChainEnv) -> Target:
    return chain_env.target


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lock") / "requirements.txt"
    path.write_text(LOCK)
    return path


@pytest.fixture(scope="module")
def report(target: Target, lock: Path) -> LockReport:
    return verify_lock(target, str(lock), CheckOptions())


def test_markers_are_the_targets_and_what_they_exclude_is_not_missing(
    report: LockReport,
) -> None:
    version = report.target.python_version
    assert version is not None and report.markers["python_version"] == f"{version[0]}.{version[1]}"
    assert sorted(p.name for p in report.selection.required) == ["chainy", "ldt-absent"]
    assert [e.package.name for e in report.selection.excluded] == ["ldt-ancient"]
    missing = [f for f in report.check.findings if f.code == "lock-missing"]
    assert [f.distribution.name for f in missing if f.distribution] == ["ldt-absent"]
    assert len(missing) == 1


def test_the_installed_version_matches_and_the_model_is_counted(
    report: LockReport, target: Target
) -> None:
    assert report.check.matched == ("chainy 1.0",)
    assert report.distributions >= 2  # chainy and the venv's own pip
    assert report.files > len(("chainy/__init__.py", "RECORD"))
    assert report.hashing is None  # not --deep: nothing hashed
    assert report.target == target


def test_deep_hashes_the_files(
    report: LockReport, target: Target, lock: Path, tmp_path: Path
) -> None:
    deep = verify_lock(target, str(lock), CheckOptions(deep=True, cache_dir=str(tmp_path)))
    assert deep.hashing is not None and deep.hashing["files_hashed"] > 0
    assert deep.check.findings == report.check.findings  # the files are whole


def test_a_lock_that_cannot_be_read_is_refused(target: Target, tmp_path: Path) -> None:
    with pytest.raises(LockfileError):
        verify_lock(target, str(tmp_path / "no-such-lock.txt"), CheckOptions())
