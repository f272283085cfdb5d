"""``--root DIR``: an environment inside a mounted image or chroot, read from the outside.

The image is made here: a copy of a venv (with a gcc-built extension needing libstdc++), the
interpreter and every system library the loader found for it in place, copied to the same
paths under DIR (symlinks as they are, absolute ones included), and DIR's own ld.so.cache
written by ``ldconfig -r DIR``. Checked in place and inside DIR, the answers must be the same,
with no path of the host in the second.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from libdoctor.environment.paths import name_inside, realpath_under
from support.cc import compile_lib, require_gcc
from support.venvs import Libdoctor, Venv, VenvFactory, pip_install
from support.wheels import WheelFactory, extension_suffix

EXT = extension_suffix()


def copy_in(root: Path, path: str) -> None:
    """PATH of this machine at the same place under ROOT: each symlink on the way as it is
    (absolute ones too), then what it names."""
    seen: set[str] = set()
    todo = [os.path.abspath(path)]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        parts = current.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            here = "/" + "/".join(parts[:i])
            dest = root / here.lstrip("/")
            if os.path.islink(here):
                link = os.readlink(here)
                if not os.path.lexists(dest):
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.symlink_to(link)
                todo.append(os.path.normpath(os.path.join(os.path.dirname(here), link)))
                if i < len(parts):
                    todo.append(os.path.join(os.path.realpath(here), *parts[i:]))
                break
            if i == len(parts) and not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(here, dest)


@pytest.fixture(scope="module")
def image(
    module_venv: VenvFactory, module_wheels: WheelFactory, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Venv, Path, Path]:
    """(the venv in place, DIR, the venv's copy inside DIR)."""
    require_gcc()
    if shutil.which("ldconfig") is None or os.geteuid() != 0:
        pytest.skip("ldconfig -r DIR (a chroot) needs ldconfig and root")
    built = tmp_path_factory.mktemp("cxx")
    module = compile_lib(built, f"_ext{EXT}", needed=["libstdc++.so.6"]).read_bytes()
    venv = module_venv("inplace")
    pip_install(
        venv, module_wheels("cxx", "1.0", {"cxx/__init__.py": b"", f"cxx/_ext{EXT}": module})
    )
    root = tmp_path_factory.mktemp("image")
    inside = root / str(venv.path).lstrip("/")
    shutil.copytree(venv.path, inside, symlinks=True)
    return venv, root, inside


def system_paths(doc: dict[str, Any]) -> list[str]:
    return [lib["path"] for lib in doc["libraries"] if lib["path"]]


def test_check_why_and_tree_inside_a_root_answer_as_in_place(
    image: tuple[Venv, Path, Path], libdoctor: Libdoctor
) -> None:
    venv, root, _ = image
    tree = libdoctor("tree", "cxx._ext", venv.path, "--json")
    assert tree.rc == 0, tree.describe()
    python = os.path.realpath(venv.python)
    for path in [*system_paths(tree.json()), python, "/lib64/ld-linux-x86-64.so.2"]:
        copy_in(root, path)
    for lib in os.listdir(os.path.dirname(python) + "/../lib"):
        if lib.startswith("libpython"):
            copy_in(root, os.path.join(os.path.dirname(python), "../lib", lib))
    for dpkg in ("var/lib/dpkg/info/libstdc++6:amd64.list",):
        if os.path.exists("/" + dpkg):
            copy_in(root, "/" + dpkg)
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/ld.so.conf").write_text("/usr/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n")
    subprocess.run(["ldconfig", "-r", str(root)], check=True)

    target = str(venv.path)  # the same path, as the system inside DIR names it
    host = libdoctor("check", venv.path, "--json", "--all")
    rooted = libdoctor("check", "--root", root, target, "--json", "--all")
    assert rooted.rc == host.rc == 0, rooted.describe()
    assert rooted.json()["findings"] == host.json()["findings"] == []

    in_root = libdoctor("tree", "--root", root, "cxx._ext", target, "--json")
    assert in_root.rc == 0, in_root.describe()
    ours, theirs = tree.json()["libraries"], in_root.json()["libraries"]
    assert [(x["name"], x["via"], x["status"]) for x in ours] == [
        (x["name"], x["via"], x["status"]) for x in theirs
    ]
    for lib in theirs:
        assert lib["path"].startswith(str(root) + "/"), lib
    # the same files, each resolved inside DIR (lib64/ld-linux-x86-64.so.2 is an absolute link)
    assert [
        realpath_under(str(root), name_inside(str(root), p))[len(str(root)) :]
        for p in system_paths(in_root.json())
    ] == [os.path.realpath(p) for p in system_paths(tree.json())]
    why = libdoctor("why", "--root", root, "libstdc++.so.6", target, "--json")
    assert why.rc == 0, why.describe()
    # every path is DIR's; a system package's path is as the package lists it, inside DIR
    text = json.dumps([{**r, "system_package": None} for r in why.json()["requests"]])
    host_paths = re.findall(r'"(/[^"]*)"', text)
    outside = [p for p in host_paths if not p.startswith(str(root))]
    assert host_paths and outside == [], outside
    (request,) = why.json()["requests"]
    if os.path.exists("/var/lib/dpkg/info/libstdc++6:amd64.list"):
        assert request["system_package"]["name"] == "libstdc++6:amd64"


def test_an_image_without_the_library_does_not_borrow_the_hosts(
    image: tuple[Venv, Path, Path], libdoctor: Libdoctor, tmp_path: Path
) -> None:
    """An empty root: libstdc++ is on the host, not in the image, so it is not found."""
    venv, _, inside = image
    empty = tmp_path / "empty"
    (empty / str(venv.path).lstrip("/")).parent.mkdir(parents=True)
    shutil.copytree(inside, empty / str(venv.path).lstrip("/"), symlinks=True)
    why = libdoctor("why", "--root", empty, "libstdc++.so.6", str(venv.path), "--json")
    assert why.rc == 1, why.describe()
    (request,) = why.json()["requests"]
    assert request["status"] == "not_found"
    for step in request["searched"]:
        assert step["directory"].startswith(str(empty)), step


@pytest.mark.parametrize(
    "argv",
    [
        ["probe", "cxx"],
        ["fix", "--dry-run"],
        ["uninstall", "cxx"],
        ["install", "cxx"],
        ["plan", "uninstall", "cxx"],
    ],
)
def test_commands_that_run_or_write_refuse_root(
    argv: list[str], libdoctor: Libdoctor, tmp_path: Path
) -> None:
    run = libdoctor(*argv, "/opt/venv", "--root", tmp_path)
    assert run.rc == 2, run.describe()
    assert run.stderr.count("\n") == 1 and "--root" in run.stderr, run.stderr
