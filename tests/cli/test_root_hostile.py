"""``--root DIR`` never reads the host (issue 23, item 7): an image whose absolute symlinks
name host files that exist must be read as the system inside DIR reads them.

The image holds a copy of a real venv at the same path as on the host, with absolute links
to a host directory (``HOST``) that the image lacks, or holds other bytes of:

- ``pkga-1.0.dist-info -> HOST/pkga-1.0.dist-info``: the host's says version 9.9 and lists
  ``pkga/host_only.py``; in the image the link leads nowhere, so there is no pkga.
- ``pkgb/data.bin -> HOST/data.bin``: the host's holds the right bytes; the image's is gone.
- ``pkgb/same.bin -> HOST/same.bin``: the host's holds the right bytes, the image's the same
  number of other bytes (only ``--deep`` tells).
- ``pyvenv.cfg -> HOST/pyvenv.cfg`` (include-system-site-packages on the host's) and
  ``conda-meta -> HOST/conda-meta`` (a conda package on the host's).

Before the fix the host was read: pkga 9.9 with a missing ``host_only.py``, ``data.bin``
present, ``same.bin`` intact. The strace of each run is the oracle that no path of the host
is touched at all.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from support.venvs import Libdoctor, Venv, VenvFactory, pip_install, snapshot, strace_path
from support.wheels import WheelFactory, dist_info_dirname

GOOD = b"the good bytes\n"
OTHER = b"the bad bytes!\n"
assert len(GOOD) == len(OTHER)

# The first path argument of a strace line (a readlink's second argument is the link's text).
_PATH_ARGUMENT = re.compile(r'^\d+\s+\w+\((?:AT_FDCWD, |-?\d+, )?"([^"]*)"')


@pytest.fixture(scope="module")
def image(
    module_venv: VenvFactory, module_wheels: WheelFactory, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Venv, Path, Path]:
    """(the venv on the host, DIR, HOST): the venv's copy in DIR, linked into HOST."""
    venv = module_venv("rooted")
    pip_install(
        venv,
        module_wheels("pkga", "1.0", {"pkga/__init__.py": b"A = 1\n"}),
        module_wheels(
            "pkgb", "1.0", {"pkgb/__init__.py": b"", "pkgb/data.bin": GOOD, "pkgb/same.bin": GOOD}
        ),
    )
    host = tmp_path_factory.mktemp("host")
    root = tmp_path_factory.mktemp("image")
    inside = root / str(venv.path).lstrip("/")
    shutil.copytree(venv.path, inside, symlinks=True)
    site = inside / venv.site_packages.relative_to(venv.path)

    dist_info = host / dist_info_dirname("pkga", "1.0")
    shutil.copytree(venv.dist_info(dist_info.name), dist_info)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkga\nVersion: 9.9\n\n")
    (dist_info / "RECORD").write_text("pkga/__init__.py,,\npkga/host_only.py,,\n")
    link(site / dist_info.name, dist_info)

    for name, ours in (("data.bin", None), ("same.bin", OTHER)):
        (host / name).write_bytes(GOOD)
        if ours is not None:  # the image's own file at the path the link names
            (root / str(host / name).lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / str(host / name).lstrip("/")).write_bytes(ours)
        link(site / "pkgb" / name, host / name)

    cfg = (inside / "pyvenv.cfg").read_text()
    (host / "pyvenv.cfg").write_text(
        cfg.replace("include-system-site-packages = false", "include-system-site-packages = true")
    )
    link(inside / "pyvenv.cfg", host / "pyvenv.cfg")
    (host / "conda-meta").mkdir()
    (host / "conda-meta" / "hostconda-1.0-0.json").write_text(
        json.dumps({"name": "hostconda", "version": "1.0", "files": ["lib/hostconda.so"]})
    )
    link(inside / "conda-meta", host / "conda-meta")
    return venv, root, host


def link(at: Path, to: Path) -> None:
    """AT becomes an absolute symlink to TO (a host path)."""
    if at.is_dir() and not at.is_symlink():
        shutil.rmtree(at)
    elif at.exists() or at.is_symlink():
        at.unlink()
    at.symlink_to(to)


def host_paths_touched(log: Path, *hosts: Path) -> list[str]:
    """The syscalls of the strace LOG whose path is one of HOSTS or below."""
    found = []
    for line in log.read_text("utf-8", "replace").splitlines():
        match = _PATH_ARGUMENT.match(line)
        if match and any(match[1] == str(h) or match[1].startswith(f"{h}/") for h in hosts):
            found.append(line)
    return found


def paths_of(doc: dict[str, Any], code: str) -> list[str]:
    return [p for f in doc["findings"] if f["code"] == code for p in f.get("paths", [])]


@pytest.mark.parametrize("deep", [False, True])
def test_check_in_an_image_does_not_see_the_hosts_files(
    deep: bool, image: tuple[Venv, Path, Path], libdoctor: Libdoctor, tmp_path: Path
) -> None:
    venv, root, host = image
    inside = root / str(venv.path).lstrip("/")
    site = inside / venv.site_packages.relative_to(venv.path)
    before = snapshot(root), snapshot(host)
    log = tmp_path / "strace.log"
    traced = strace_path() is not None
    run = libdoctor.check(
        "--root",
        root,
        venv.path,
        "--json",
        "--all",
        *(["--deep"] if deep else []),
        strace_log=log if traced else None,
    )
    assert run.rc == 1, run.describe()
    doc = run.json()
    assert doc["target"]["site_packages"] == [str(site)]  # no inherited site of the host's cfg
    on_host = len(list(venv.site_packages.glob("*.dist-info")))
    assert doc["summary"]["distributions"] == on_host - 1  # no pkga: not 1.0, not the host's 9.9
    text = json.dumps(doc)
    assert "host_only" not in text and "9.9" not in text and "hostconda" not in text
    assert paths_of(doc, "missing-files") == [str(site / "pkgb" / "data.bin")]
    assert paths_of(doc, "altered-files") == ([str(site / "pkgb" / "same.bin")] if deep else [])
    assert (snapshot(root), snapshot(host)) == before
    if traced:
        assert host_paths_touched(log, host, venv.path) == []


def test_why_and_tree_in_an_image_touch_no_host_path(
    image: tuple[Venv, Path, Path], libdoctor: Libdoctor, tmp_path: Path
) -> None:
    if strace_path() is None:
        pytest.skip("strace is not installed or may not trace here")
    venv, root, host = image
    for argv in (["why", "libstdc++.so.6"], ["tree", "pkgb"]):
        log = tmp_path / f"{argv[0]}.log"
        run = libdoctor(*argv, venv.path, "--root", root, "--json", strace_log=log)
        assert run.rc in (0, 2), run.describe()  # nothing needs it / no such module
        assert host_paths_touched(log, host, venv.path) == [], argv


def test_snapshot_refuses_root_in_one_line(
    image: tuple[Venv, Path, Path], libdoctor: Libdoctor, tmp_path: Path
) -> None:
    venv, root, _ = image
    run = libdoctor("snapshot", venv.path, "--root", root, "-o", tmp_path / "s.json")
    assert (run.rc, run.stdout) == (2, ""), run.describe()
    assert run.stderr.startswith("libdoctor: error: --root: snapshot ")
    assert run.stderr.count("\n") == 1
    assert not (tmp_path / "s.json").exists()


def test_a_link_inside_the_image_is_followed_inside_it(
    image: tuple[Venv, Path, Path], libdoctor: Libdoctor
) -> None:
    """The other half: an absolute link whose target the image holds is read there (the
    image's bytes), as its own system would: same.bin's target is DIR/HOST/same.bin."""
    venv, root, host = image
    run = libdoctor.check("--root", root, venv.path, "--json", "--deep")
    same = root / str(host / "same.bin").lstrip("/")
    assert same.read_bytes() == OTHER
    finding = next(f for f in run.json()["findings"] if f["code"] == "altered-files")
    assert os.path.basename(finding["paths"][0]) == "same.bin"
