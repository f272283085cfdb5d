"""What libdoctor cannot read stops it with one line (exit 2), never a clean report.

A site-packages listed as "0 distributions, no problems" because the user may not read it is a
silent green in CI. Permission denied is real only for a user who is not root: the CLI runs
as ``nobody`` here (support.unprivileged), on a venv uv installed a wheel into.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from libdoctor.environment.distributions import scan_conda, scan_site, scan_target
from libdoctor.environment.target import SiteDir, from_directory
from libdoctor.errors import TargetError
from support.unprivileged import run_libdoctor_unprivileged, shared_tmp
from support.venvs import uv_install
from support.wheels import build_wheel


@pytest.fixture
def shared_venv() -> Iterator[tuple[Path, Path]]:
    """(a venv holding ``ldt-readable`` installed by uv, a HOME), both reachable by nobody."""
    with shared_tmp() as root:
        venv = root / "env"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        wheel = build_wheel(
            root / "wheels", "ldt-readable", "1.0", {"ldt_readable/__init__.py": b""}
        )
        uv_install(venv / "bin" / "python", wheel, cache=root / "uv-cache")
        home = root / "home"
        home.mkdir()
        home.chmod(0o777)
        yield venv, home


def _dist_info(venv: Path) -> Path:
    return next(venv.glob("lib/python3*/site-packages/ldt_readable-1.0.dist-info"))


def test_a_readable_venv_is_checked_as_that_user(shared_venv: tuple[Path, Path]) -> None:
    """The harness itself: the same run without a denied file is a clean check."""
    venv, home = shared_venv
    done = run_libdoctor_unprivileged("check", venv, "--json", "--no-cache", home=home)
    assert done.rc == 0, done.describe()
    assert done.json()["summary"]["distributions"] == 1


@pytest.mark.parametrize(
    "denied",
    ["site-packages", "dist-info", "METADATA", "RECORD", "INSTALLER"],
)
def test_what_cannot_be_read_is_one_line_exit_2(
    shared_venv: tuple[Path, Path], denied: str
) -> None:
    venv, home = shared_venv
    info = _dist_info(venv)
    path = {"site-packages": info.parent, "dist-info": info}.get(denied, info / denied)
    # site-packages still enterable (its files readable), only not listable
    path.chmod(0o300 if denied == "site-packages" else 0o000)
    done = run_libdoctor_unprivileged("check", venv, "--no-cache", home=home)
    assert done.rc == 2, done.describe()
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "cannot read" in lines[0] and "Permission denied" in lines[0], lines[0]
    assert str(path) in lines[0]


def _conda_prefix(tmp_path: Path, record: bytes) -> Path:
    prefix = tmp_path / "conda"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (prefix / "conda-meta" / "zlib-1.3-0.json").write_bytes(record)
    return prefix


@pytest.mark.parametrize(
    "record",
    [b"", b'{"name": "zlib", "version"', b'\xef\xbb\xbf{"name": "zlib"}', b'{"name": "zl\xe9b"}'],
    ids=["empty", "truncated", "BOM", "not UTF-8"],
)
def test_a_conda_record_conda_cannot_read_is_one_line(tmp_path: Path, record: bytes) -> None:
    """conda itself refuses such an environment (CorruptedEnvironmentError): json.loads of
    the UTF-8 text is its reader; a BOM or another encoding is no record to it."""
    prefix = _conda_prefix(tmp_path, record)
    with pytest.raises(TargetError) as excinfo:
        scan_conda(from_directory(prefix, "test"))
    message = str(excinfo.value)
    assert "\n" not in message and "zlib-1.3-0.json" in message
    with pytest.raises(ValueError):
        json.loads(record.decode("utf-8"))  # the reference refuses it too


def test_a_readable_conda_record_is_a_distribution(tmp_path: Path) -> None:
    prefix = _conda_prefix(tmp_path, b'{"name": "zlib", "version": "1.3", "build": "0"}')
    (dist,) = scan_target(from_directory(prefix, "test"))
    assert (dist.name, dist.conda_spec) == ("zlib", "zlib=1.3=0")


def _one_dist_site(tmp_path: Path) -> Path:
    info = tmp_path / "site" / "ldt_x-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: ldt-x\nVersion: 1.0\n")
    (info / "RECORD").write_bytes(b"ldt_x-1.0.dist-info/METADATA,,\n")
    return info


@pytest.mark.parametrize("kind", ["fifo", "device", "oversized"])
def test_a_metadata_file_that_is_no_bounded_file_is_refused_unread(
    tmp_path: Path, kind: str
) -> None:
    """A hostile dist-info: RECORD a FIFO (open would wait for a writer forever), a link to
    /dev/zero (endless), or a sparse 257 MiB file: one line, nothing read."""
    info = _one_dist_site(tmp_path)
    record = info / "RECORD"
    record.unlink()
    if kind == "fifo":
        os.mkfifo(record)
    elif kind == "device":
        record.symlink_to("/dev/zero")
    else:
        with open(record, "wb") as handle:
            handle.truncate(257 << 20)
    site = SiteDir(str(info.parent), str(tmp_path))
    with pytest.raises(TargetError) as excinfo:
        scan_site(site)
    assert str(record) in str(excinfo.value) and "not read" in str(excinfo.value)


def test_a_record_that_is_a_directory_is_no_record(tmp_path: Path) -> None:
    info = _one_dist_site(tmp_path)
    (info / "RECORD").unlink()
    (info / "RECORD").mkdir()
    (dist,) = scan_site(SiteDir(str(info.parent), str(tmp_path)))
    assert dist.record_error == "no RECORD"  # a finding (record-invalid), with its reinstall
