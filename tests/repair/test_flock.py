"""The repair lock: an flock on the environment's resolved site directory (issue 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from libdoctor.errors import LibdoctorError
from libdoctor.repair.flock import Lock, lock_directory, locked


def make_env(root: Path) -> Path:
    site = root / "lib/python3.11/site-packages"
    site.mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return site


def test_the_lock_is_the_resolved_site_directory(tmp_path: Path) -> None:
    site = make_env(tmp_path / "env")
    (tmp_path / "link").symlink_to(tmp_path / "env")
    assert lock_directory(str(tmp_path / "env")) == str(site)
    assert lock_directory(str(tmp_path / "link")) == str(site)
    assert lock_directory(str(tmp_path / "env/lib/..")) == str(site)


def test_a_target_folder_is_its_own_lock(tmp_path: Path) -> None:
    folder = tmp_path / "deps"
    folder.mkdir()
    assert lock_directory(str(folder)) == str(folder)


def test_a_second_holder_fails_at_once_through_any_spelling(tmp_path: Path) -> None:
    make_env(tmp_path / "env")
    (tmp_path / "link").symlink_to(tmp_path / "env")
    refused = pytest.raises(LibdoctorError, match=f"running on {tmp_path / 'link'} ")
    with locked(str(tmp_path / "env")), refused:
        Lock(str(tmp_path / "link"))
    Lock(str(tmp_path / "link")).release()  # released: free again


def test_another_process_meets_the_lock_and_it_ends_with_its_holder(tmp_path: Path) -> None:
    """flock is per open file: a second process (another user, another cache dir) meets it;
    when the holder dies the kernel releases it."""
    make_env(tmp_path / "env")
    code = (
        "import sys; from libdoctor.repair.flock import Lock; "
        "from libdoctor.errors import LibdoctorError\n"
        "try:\n    Lock(sys.argv[1])\nexcept LibdoctorError as e:\n    print(e); sys.exit(3)"
    )
    probe = [sys.executable, "-c", code, str(tmp_path / "env")]
    with locked(str(tmp_path / "env")):
        held = subprocess.run(probe, capture_output=True, text=True, check=False)
    assert held.returncode == 3 and "another libdoctor" in held.stdout
    assert subprocess.run(probe, check=False).returncode == 0


def test_no_lock_file_is_written(tmp_path: Path) -> None:
    site = make_env(tmp_path / "env")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with locked(str(tmp_path / "env")):
        pass
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert site.is_dir()
