"""``RealDisk.prefetch`` (each name stat'ed in its opened directory) says what ``stat()`` says.

``stat()`` of the whole path, one at a time, is the reference: files, directories, symlinks
to either, a symlinked directory on the way, broken links and loops, missing files and
directories, a file where a directory should be, a NUL in a path. The memo keeps a regular
file's state packed into one int (or, told not to remember files, none, each asked by name
in its directory too): what it answers is the FileState a fresh ``os.stat`` gives.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from stat import S_ISREG

import pytest

from libdoctor.disk.stat import MISSING, FileState, RealDisk


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


def test_a_disk_that_forgets_files_says_the_same(tmp_path: Path) -> None:
    paths = _tree(tmp_path)
    paths += ["/", "relative/x.py", ""]
    reference = RealDisk()
    expected = [reference.stat(path) for path in paths]
    forgetting = RealDisk(remember_files=False)
    assert [forgetting.stat(path) for path in paths] == expected
    assert [forgetting.stat(path) for path in reversed(paths)] == expected[::-1]
    assert RealDisk(remember_files=False).prefetch(paths) == expected


def test_prefetch_leaves_no_directory_open(tmp_path: Path) -> None:
    paths = _tree(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    RealDisk().prefetch(paths)
    assert len(os.listdir("/proc/self/fd")) == before
    forgetting = RealDisk(remember_files=False)
    for path in paths:
        forgetting.stat(path)
    del forgetting  # its one open directory goes with it
    assert len(os.listdir("/proc/self/fd")) == before


def _expected(path: Path) -> FileState:
    st = os.stat(path)
    return FileState(
        True,
        S_ISREG(st.st_mode),
        st.st_size,
        st.st_mtime_ns,
        st.st_ino,
        st.st_dev,
        None,
        st.st_ctime_ns,
    )


def _sized(tmp_path: Path) -> dict[str, Path]:
    files = {
        "empty": tmp_path / "empty",
        "small": tmp_path / "small.py",
        "big": tmp_path / "big.bin",
        "dir": tmp_path / "sub",
        "old": tmp_path / "old.py",  # an mtime before 1970: not packed
    }
    files["empty"].write_bytes(b"")
    files["small"].write_bytes(b"x = 1\n")
    with open(files["big"], "wb") as handle:
        handle.truncate(5 << 30)  # sparse: a size past 32 bits
    files["dir"].mkdir()
    files["old"].write_bytes(b"old\n")
    os.utime(files["old"], ns=(-1_500_000_000, -1_500_000_000))
    return files


@pytest.mark.parametrize(("prefetched", "remember"), [(False, True), (True, True), (True, False)])
def test_states_are_the_disk_s(tmp_path: Path, prefetched: bool, remember: bool) -> None:
    files = _sized(tmp_path)
    disk = RealDisk(remember_files=remember)
    paths = [str(p) for p in files.values()]
    if prefetched:
        assert disk.prefetch(paths, states=False) == []
    for path in files.values():
        assert disk.stat(str(path)) == _expected(path)
        assert disk.stat(str(path)) == _expected(path)  # from the memo
        expected = _expected(path)
        assert disk.regular_size(str(path)) == (expected.size if expected.is_file else None)
    assert disk.stat(str(tmp_path / "absent")) == MISSING
    assert disk.regular_size(str(tmp_path / "absent")) is None


def test_prefetch_returns_the_states_in_order(tmp_path: Path) -> None:
    files = _sized(tmp_path)
    disk = RealDisk()
    paths = [str(p) for p in files.values()]
    disk.stat(paths[1])  # one already in the memo
    expected = [_expected(p) for p in files.values()]
    assert disk.prefetch(paths) == expected
    assert disk.prefetch(paths) == expected
    assert [disk.stat(p) for p in paths] == expected
    forgetting = RealDisk(remember_files=False)
    assert forgetting.prefetch(paths) == expected
    assert [forgetting.stat(p) for p in paths] == expected


def test_a_file_on_another_device(tmp_path: Path) -> None:
    """Packed states share one device; a file on another keeps its own."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm to hold a file on another device")
    local = tmp_path / "here.py"
    local.write_bytes(b"here\n")
    with tempfile.NamedTemporaryFile(dir="/dev/shm") as other:
        other.write(b"there\n")
        other.flush()
        there = Path(other.name)
        if os.stat(there).st_dev == os.stat(local).st_dev:
            pytest.skip("/dev/shm is on the same device here")
        for order in ([local, there], [there, local]):
            disk = RealDisk()
            disk.prefetch([str(p) for p in order], states=False)
            assert [disk.stat(str(p)) for p in order] == [_expected(p) for p in order]
