"""The system's own packages: this machine's dpkg database against ``dpkg -S``, and small fake
databases under a temporary root (merged /usr, md5 verdicts, providers, rpm)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from libdoctor.environment.paths import realpath_under
from libdoctor.external.ospackages import SystemPackage, SystemPackages

MULTIARCH = "usr/lib/x86_64-linux-gnu"


def dpkg_owner(path: str) -> str | None:
    """The oracle: ``dpkg -S PATH``'s package, or None."""
    done = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    return done.stdout.split(": ", 1)[0]


def test_this_machines_libstdcxx_is_owned_by_its_debian_package() -> None:
    path = f"/{MULTIARCH}/libstdc++.so.6"
    if shutil.which("dpkg") is None or not os.path.exists(path):
        pytest.skip("not a Debian system with libstdc++ in /usr/lib/x86_64-linux-gnu")
    expected = dpkg_owner(path)
    assert expected is not None
    hit = SystemPackages(rpm=None, deep=True).owner(path)
    assert hit is not None
    assert (hit.manager, hit.name) == ("dpkg", expected)
    assert hit.intact is True  # the bytes still match the md5 dpkg recorded


def test_a_path_no_package_lists_has_no_owner() -> None:
    if shutil.which("dpkg") is None:
        pytest.skip("not a Debian system")
    packages = SystemPackages(rpm=None)
    assert packages.owner(f"/{MULTIARCH}/libdoctor-no-such-lib.so.1") is None


def fake_system(root: Path, files: dict[str, bytes], package: str = "libfake1:amd64") -> None:
    """ROOT holding FILES (paths from /) and one dpkg package listing them, merged /usr."""
    (root / "usr/lib").mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    listed, sums = ["/."], []
    for path, data in files.items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_bytes(data)
        listed.append(path)
        sums.append(f"{hashlib.md5(data).hexdigest()}  {path.lstrip('/')}")
    (info / f"{package}.list").write_text("\n".join(listed) + "\n")
    (info / f"{package}.md5sums").write_text("\n".join(sums) + "\n")


def test_fake_database_owner_md5_and_merged_usr(tmp_path: Path) -> None:
    fake_system(tmp_path, {"/lib/x86_64-linux-gnu/libfake.so.1": b"\x7fELF fake"})
    packages = SystemPackages(root=str(tmp_path), rpm=None, deep=True)
    # listed as /lib/..., found by the loader as /usr/lib/...: one file on a merged /usr
    hit = packages.owner(f"/{MULTIARCH}/libfake.so.1")
    assert hit == SystemPackage(
        "dpkg", "libfake1:amd64", "/lib/x86_64-linux-gnu/libfake.so.1", True
    )
    shallow = SystemPackages(root=str(tmp_path), rpm=None)
    assert shallow.owner("/lib/x86_64-linux-gnu/libfake.so.1") == SystemPackage(
        "dpkg", "libfake1:amd64", "/lib/x86_64-linux-gnu/libfake.so.1"
    )
    (tmp_path / MULTIARCH / "libfake.so.1").write_bytes(b"\x7fELF edited")
    edited = SystemPackages(root=str(tmp_path), rpm=None, deep=True).owner(
        f"/{MULTIARCH}/libfake.so.1"
    )
    assert edited is not None and edited.intact is False
    assert "BYTES DIFFER" in edited.label


def test_without_the_usr_merge_link_the_other_spelling_is_another_file(tmp_path: Path) -> None:
    info = tmp_path / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "libfake1.list").write_text("/lib/x86_64-linux-gnu/libfake.so.1\n")
    packages = SystemPackages(root=str(tmp_path), rpm=None)
    assert packages.owner(f"/{MULTIARCH}/libfake.so.1") is None
    assert packages.owner("/lib/x86_64-linux-gnu/libfake.so.1") is not None


def test_a_symlink_is_verified_by_the_file_it_names_inside_the_root(tmp_path: Path) -> None:
    """An absolute link inside ROOT resolves inside ROOT, never on the host."""
    real = f"/{MULTIARCH}/libstdc++.so.6.0.30"
    fake_system(tmp_path, {real: b"not the host's libstdc++"})
    link = tmp_path / MULTIARCH / "libstdc++.so.6"
    link.symlink_to(real)  # absolute, as the image sees it
    info = tmp_path / "var/lib/dpkg/info/libfake1:amd64.list"
    info.write_text(info.read_text() + f"/{MULTIARCH}/libstdc++.so.6\n")
    hit = SystemPackages(root=str(tmp_path), rpm=None, deep=True).owner(
        f"/{MULTIARCH}/libstdc++.so.6"
    )
    assert hit is not None and hit.intact is True


def test_providers_of_a_missing_library(tmp_path: Path) -> None:
    fake_system(tmp_path, {"/lib/x86_64-linux-gnu/libgone.so.2": b"x"})
    (tmp_path / MULTIARCH / "libgone.so.2").unlink()
    packages = SystemPackages(root=str(tmp_path), rpm=None)
    assert [(p.name, p.path) for p in packages.providers("libgone.so.2")] == [
        ("libfake1:amd64", "/lib/x86_64-linux-gnu/libgone.so.2")
    ]
    assert packages.providers("libother.so.1") == []


def test_no_database_is_no_answer(tmp_path: Path) -> None:
    packages = SystemPackages(root=str(tmp_path), rpm=None)
    assert packages.owner("/usr/lib/libx.so.1") is None
    assert packages.providers("libx.so.1") == []


def test_rpm_is_asked_only_when_it_and_its_database_exist(tmp_path: Path) -> None:
    rpm = tmp_path / "bin/rpm"
    rpm.parent.mkdir()
    rpm.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\necho fake-libs-1.0-1.x86_64\n')
    rpm.chmod(0o755)
    root = tmp_path / "image"
    root.mkdir()
    packages = SystemPackages(root=str(root), rpm=str(rpm))
    assert packages.owner("/usr/lib64/libfake.so.1") is None  # no rpm database: not run
    assert not (tmp_path / "bin/args").exists()
    (root / "var/lib/rpm").mkdir(parents=True)
    hit = SystemPackages(root=str(root), rpm=str(rpm)).owner("/usr/lib64/libfake.so.1")
    assert hit == SystemPackage("rpm", "fake-libs-1.0-1.x86_64", "/usr/lib64/libfake.so.1")
    args = (tmp_path / "bin/args").read_text().split()
    assert args[:2] == ["--root", str(root)] and args[-1] == "/usr/lib64/libfake.so.1"


@pytest.mark.parametrize(
    ("links", "path", "expected"),
    [
        ({"lib": "usr/lib"}, "/lib/x/y", "usr/lib/x/y"),
        ({"usr/lib/a": "/usr/lib/b"}, "/usr/lib/a", "usr/lib/b"),  # absolute: inside ROOT
        ({"usr/lib/a": "../../../../../etc"}, "/usr/lib/a/passwd", "etc/passwd"),  # .. clamps
        ({"usr/lib/a": "/"}, "/usr/lib/a/etc", "etc"),
        ({}, "/usr/../usr/lib", "usr/lib"),
    ],
)
def test_realpath_under_never_leaves_the_root(
    tmp_path: Path, links: dict[str, str], path: str, expected: str
) -> None:
    (tmp_path / "usr/lib").mkdir(parents=True)
    for name, target in links.items():
        (tmp_path / name).symlink_to(target)
    assert realpath_under(str(tmp_path), path) == str(tmp_path / expected)


def test_realpath_under_a_loop_stops(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("/b")
    (tmp_path / "b").symlink_to("/a")
    assert realpath_under(str(tmp_path), "/a").startswith(str(tmp_path))
