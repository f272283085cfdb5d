"""``RealDisk.prefetch`` (each name stat'ed in its opened directory) says what ``stat()`` says.

``stat()`` of the whole path, one at a time, is the reference: files, directories, symlinks
to either, a symlinked directory on the way, broken links and loops, missing files and
directories, a file where a directory should be, a NUL in a path.
"""

from __future__ import annotations

import os
from pathlib import Path

from libdoctor.disk.stat import RealDisk


def _tree(root: Path) -> list[str]:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "a.py").write_bytes(b"A = 1\n")
    (root / "pkg" / "sub" / "b.so").write_bytes(b"\x7fELF" + b"\0" * 60)
    (root / "pkg" / "empty").write_bytes(b"")
    (root / "pkg" / "to_a").symlink_to("a.py")
    (root / "pkg" / "broken").symlink_to("nowhere")
    (root / "pkg" / "loop").symlink_to("loop")
    (root / "linked").symlink_to(root / "pkg")
    (root / "looped").symlink_to("looped")
    names = [
        "pkg/a.py",
        "pkg/sub/b.so",
        "pkg/empty",
        "pkg/sub",
        "pkg/to_a",
        "pkg/broken",
        "pkg/loop",
        "pkg/gone.py",
        "linked/a.py",
        "linked/sub/b.so",
        "linked/gone.py",
        "looped/x.py",
        "pkg/a.py/inside",
        "missing/dir/x.py",
        "pkg/a.py",  # twice: the memo
        "pkg/n\0ul.py",
    ]
    return [str(root / name) for name in names]


def test_prefetch_is_stat_of_every_path(tmp_path: Path) -> None:
    paths = _tree(tmp_path)
    paths += ["/", "relative/x.py", ""]
    reference = RealDisk()
    expected = [reference.stat(path) for path in paths]
    assert RealDisk().prefetch(paths) == expected
    assert RealDisk().prefetch(reversed(paths)) == expected[::-1]


def test_prefetch_leaves_no_directory_open(tmp_path: Path) -> None:
    paths = _tree(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    RealDisk().prefetch(paths)
    assert len(os.listdir("/proc/self/fd")) == before
