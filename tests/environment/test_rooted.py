"""``Rooted``: paths under a root resolved as the system inside it would, every link (absolute,
relative, ``..`` past the top, chains, loops) kept inside; the host's ``Rooted("/")`` the plain
``os`` calls. The oracle for the resolution is the kernel itself: ``chroot`` in a child,
where the test may (root); else the expected table alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from libdoctor.environment.rooted import HOST, Rooted


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """(ROOT, HOST): an image and a host directory its absolute links name."""
    root, host = tmp_path / "root", tmp_path / "host"
    for d in ("usr/lib", "opt/venv/lib", "etc", str(host).lstrip("/")):
        (root / d).mkdir(parents=True, exist_ok=True)
    host.mkdir()
    (host / "secret").write_text("host\n")
    (root / str(host).lstrip("/") / "secret").write_text("image\n")
    (root / "usr/lib/libc.so.6").write_text("libc\n")
    (root / "lib").symlink_to("usr/lib")  # relative
    (root / "lib64").symlink_to("/usr/lib")  # absolute: the image's /usr/lib
    (root / "opt/venv/lib64").symlink_to("/opt/venv/lib")
    (root / "opt/venv/up").symlink_to("../../../../../../etc")  # past the top: stays at /
    (root / "opt/venv/secret").symlink_to(host / "secret")  # a host path, the image's file
    (root / "opt/venv/gone").symlink_to(host / "nothing")
    (root / "opt/venv/a").symlink_to("b")
    (root / "opt/venv/b").symlink_to("a")  # a loop
    return root, host


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("lib/libc.so.6", "usr/lib/libc.so.6"),
        ("lib64/libc.so.6", "usr/lib/libc.so.6"),
        ("opt/venv/lib64", "opt/venv/lib"),
        ("opt/venv/up", "etc"),
        ("opt/venv/secret", "{host}/secret"),
        ("opt/venv/gone", "{host}/nothing"),
        ("opt/venv/lib/../lib64/../lib", "opt/venv/lib"),
        ("/usr/lib/libc.so.6", "usr/lib/libc.so.6"),  # outside ROOT: the root's path
    ],
)
def test_a_path_resolves_inside_the_root(path: str, expected: str, tree: tuple[Path, Path]) -> None:
    root, host = tree
    rooted = Rooted(str(root))
    given = path if path.startswith("/") else str(root / path)
    want = str(root / expected.format(host=host).lstrip("/"))
    assert rooted.host(given) == want
    assert rooted.host(given) == rooted.host(given)  # the memo gives the same answer
    if os.geteuid() == 0 and not path.startswith("/"):
        assert _kernel_realpath(root, "/" + path) == "/" + os.path.relpath(want, root)


def _kernel_realpath(root: Path, path: str) -> str:
    """``os.path.realpath`` of PATH inside ``chroot ROOT``, by the kernel in a child."""
    code = (
        "import os, sys; os.chroot(sys.argv[1]); os.chdir('/');"
        " print(os.path.realpath(sys.argv[2]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(root), path], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_reads_go_to_the_images_file_not_the_hosts(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    rooted = Rooted(str(root))
    link = root / "opt/venv/secret"
    assert rooted.read(link) == b"image\n" and link.read_bytes() == b"host\n"
    assert rooted.exists(link) and rooted.isfile(link) and rooted.islink(link)
    assert not rooted.exists(root / "opt/venv/gone") and rooted.lexists(root / "opt/venv/gone")
    assert rooted.isdir(root / "lib64") and rooted.listdir(root / "lib64") == ["libc.so.6"]
    assert rooted.readlink(root / "lib64") == "/usr/lib"
    assert rooted.realpath(root / "lib64") == str(root / "usr/lib")
    assert not rooted.exists(root / "opt/venv/a")  # the loop: no such file, no hang
    with pytest.raises(OSError):
        rooted.read(root / "opt/venv/gone")


def test_the_host_is_the_plain_os_calls(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    link = root / "opt/venv/secret"
    assert HOST.is_host and HOST.host(str(link)) == str(link)
    assert HOST.read(link) == b"host\n"
    assert HOST.realpath(link) == os.path.realpath(link)
    assert Rooted("/").host("relative/path") == "relative/path"
